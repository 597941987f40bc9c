//! `--kube`: `up`, `apply`, `status`, `exec`, `link` and `down` of a fleet spread over a
//! Kubernetes cluster. What is done in the cluster is nsfleet-kube's; the printing for
//! people and machines is here.

use crate::Cluster;
use anyhow::{anyhow, bail, Context};
use nsfleet::topology::{self, Topology};
use nsfleet_kube::crd::{FleetSpec, FleetStatus, MachineStatus};
use nsfleet_kube::{plan, remote};
use std::path::Path;
use std::time::{Duration, Instant};

/// How long `up --kube` waits for every machine's part.
const UP_BOUND: Duration = Duration::from_secs(600);
/// How long `down --kube` waits for every machine to take its part down (the controller
/// gives up on a machine without an agent after its own bound, 30 s).
const DOWN_BOUND: Duration = Duration::from_secs(300);

/// `nsfleet up FILE --kube`: the file read and checked here (its errors name its lines,
/// and nothing is made in the cluster), then a Fleet made and followed until every
/// machine's part is up.
pub fn up(
    file: &Path,
    format: Option<topology::Format>,
    name: Option<String>,
    machines: Vec<String>,
    c: &Cluster,
    json: bool,
) -> anyhow::Result<()> {
    let sent = read_checked(file, format, name)?;
    let name = sent.topo.name.clone();
    c.with_client(|client| async move {
        let spec = FleetSpec {
            topology: Some(sent.text),
            format: Some(sent.format_name.into()),
            machines,
            ..FleetSpec::default()
        };
        remote::check_access(&client).await?;
        remote::create(&client, &c.namespace, &name, spec).await?;
        if !json {
            eprintln!("nsfleet: fleet {name} ({} nodes) made in namespace {}", sent.topo.node_count(), c.namespace);
        }
        let status = remote::wait_ready(&client, &c.namespace, &name, 1, UP_BOUND, |s| {
            if !json {
                eprintln!("  {:<10} {}/{} nodes up  {}", s.phase, s.nodes_up, s.nodes, s.message);
            }
        })
        .await?;
        if status.phase == "Failed" {
            // The controller has rolled the fleet back; the resource goes too.
            let _ = remote::delete(&client, &c.namespace, &name, DOWN_BOUND).await;
            bail!("fleet {name} failed: {}", status.message);
        }
        if json {
            println!("{}", serde_json::json!({ "fleet": name, "status": status, "seconds": sent.started.elapsed().as_secs_f64() }));
        } else {
            println!(
                "fleet {name:?} is up on Kubernetes: {} nodes on {} machines in {:.1} s; {} links cross machines (VXLAN, MTU {})",
                status.nodes,
                status.machine_count,
                sent.started.elapsed().as_secs_f64(),
                status.tunnels,
                status.tunnel_mtu.unwrap_or(0)
            );
            print_machines(&status.machines);
        }
        Ok(())
    })
}

/// What `up --kube` and `apply --kube` send, and when the command began (the time each
/// says counts the reading).
struct Sent {
    started: Instant,
    text: String,
    format_name: &'static str,
    topo: Topology,
}

/// How `up --kube` and `apply --kube` open: the file read and checked here, as `up` reads
/// it (its errors name its lines, and nothing is made in the cluster), named `name` if
/// given: its text, its format's name and the topology (which holds the fleet's name).
fn read_checked(
    file: &Path,
    format: Option<topology::Format>,
    name: Option<String>,
) -> anyhow::Result<Sent> {
    let started = Instant::now();
    let text = topology::read_text(file)?;
    let format_name = match format.unwrap_or_else(|| topology::Format::of(file)) {
        topology::Format::Toml => "toml",
        topology::Format::Clab => "clab",
    };
    let draft = plan::draft(&file.display().to_string(), &text, Some(format_name))?;
    let mut topo = draft.check(&topology::KernelCaps::assumed())?;
    if let Some(n) = name {
        topology::check_name("fleet name", &n, topology::MAX_FLEET_NAME)
            .map_err(|m| anyhow!("--name: {m}"))?;
        topo.name = n;
    }
    plan::check_fleet_name(&topo.name).map_err(|m| anyhow!("{}: {m}", file.display()))?;
    Ok(Sent {
        started,
        text,
        format_name,
        topo,
    })
}

/// `nsfleet apply FILE --kube`: the file read and checked here, the change shown (as the
/// topologies differ: a local `apply` also sees live impairments), and unless `dry_run`
/// the Fleet's topology changed and followed until every machine has changed its part.
pub fn apply(
    file: &Path,
    format: Option<topology::Format>,
    name: Option<String>,
    dry_run: bool,
    c: &Cluster,
    json: bool,
) -> anyhow::Result<()> {
    let sent = read_checked(file, format, name)?;
    let name = sent.topo.name.clone();
    c.with_client(|client| async move {
        let (fleet, parts) = remote::get(&client, &c.namespace, &name).await?;
        if fleet.spec.config_map.is_some() {
            bail!("fleet {name} takes its topology from a ConfigMap; `apply --kube` changes spec.topology: change the ConfigMap and the Fleet with kubectl instead");
        }
        // What runs is what the parts say (a refused change is in the Fleet's spec only).
        let (running_text, running_format) = match parts.first() {
            Some(p) => (p.spec.topology.clone(), p.spec.format.clone()),
            None => (fleet.spec.topology.clone().unwrap_or_default(), fleet.spec.format.clone()),
        };
        let old = plan::read(&name, &running_text, running_format.as_deref()).map_err(|e| anyhow!(e))?;
        let running: Vec<_> = old.nodes().collect();
        let reshape = topology::reshape::reshape(&running, sent.topo.nodes().collect())
            .map_err(|e| anyhow!("{}: {e}", file.display()))?;
        let changes = topology::diff::diff(&running, &reshape);
        let said = fleet.spec.topology.as_deref() == Some(sent.text.as_str());
        let clean = fleet.status.as_ref().is_none_or(|s| s.change_error.is_empty());
        if dry_run || (changes.is_empty() && said && clean) {
            if json {
                println!("{}", serde_json::json!({ "fleet": name, "dry_run": dry_run, "applied": false, "changes": changes }));
            } else {
                nsfleet_client::apply::print_plan(&name, &changes, None);
            }
            return Ok(());
        }
        remote::check_access(&client).await?;
        let generation = remote::change(&client, &c.namespace, &name, sent.text, sent.format_name).await?;
        if !json {
            eprintln!("nsfleet: changing fleet {name} on Kubernetes ({} changes)", changes.len());
        }
        let status = remote::wait_ready(&client, &c.namespace, &name, generation, UP_BOUND, |s| {
            if !json {
                eprintln!("  {:<10} {}/{} nodes up  {}", s.phase, s.nodes_up, s.nodes, s.message);
            }
        })
        .await?;
        if !status.change_error.is_empty() {
            bail!("fleet {name}: {}", status.change_error);
        }
        if status.phase != "Running" {
            bail!("fleet {name} is {}: {}", status.phase, status.message);
        }
        if json {
            println!("{}", serde_json::json!({ "fleet": name, "dry_run": false, "applied": true, "changes": changes, "status": status, "seconds": sent.started.elapsed().as_secs_f64() }));
            return Ok(());
        }
        nsfleet_client::apply::print_plan(&name, &changes, None);
        println!(
            "fleet {name:?} changed on Kubernetes in {:.1} s: {} nodes on {} machines; {} links cross machines",
            sent.started.elapsed().as_secs_f64(),
            status.nodes,
            status.machine_count,
            status.tunnels
        );
        print_machines(&status.machines);
        Ok(())
    })
}

fn print_machines(machines: &[MachineStatus]) {
    println!(
        "  {:<16} {:<16} {:>7} {:>7} {:<10} MESSAGE",
        "MACHINE", "ADDRESS", "NODES", "UP", "PHASE"
    );
    for m in machines {
        println!(
            "  {:<16} {:<16} {:>7} {:>7} {:<10} {}",
            m.machine, m.address, m.nodes, m.nodes_up, m.phase, m.message
        );
    }
}

/// `nsfleet status NAME --kube`: the Fleet's status, and with `--json` the machine of
/// every node.
pub fn status(name: &str, c: &Cluster, json: bool) -> anyhow::Result<()> {
    c.with_client(|client| async move {
        let (fleet, parts) = remote::get(&client, &c.namespace, name).await?;
        let status: FleetStatus = fleet.status.unwrap_or_default();
        if json {
            let nodes: Vec<_> = (parts.iter())
                .flat_map(|p| p.spec.nodes.iter().map(|n| serde_json::json!({"name": n, "machine": p.spec.machine})))
                .collect();
            println!("{}", serde_json::json!({ "fleet": name, "namespace": c.namespace, "status": status, "nodes": nodes }));
            return Ok(());
        }
        println!(
            "fleet {name} (namespace {}): {}  {}/{} nodes up on {} machines; {} links cross machines  {}",
            c.namespace, status.phase, status.nodes_up, status.nodes, status.machine_count, status.tunnels, status.message
        );
        print_machines(&status.machines);
        Ok(())
    })
}

/// `nsfleet exec NAME NODE --kube -- CMD`: the command run in the node, on its machine.
pub fn exec(name: &str, node: &str, command: &[String], c: &Cluster) -> anyhow::Result<i32> {
    c.with_client(|client| async move {
        Ok(remote::exec(&client, &c.namespace, name, node, command).await?)
    })
}

/// What `nsfleet link --kube` reads back from a machine (`link --json` there).
#[derive(serde::Deserialize)]
struct LinkLook {
    end: nsfleet::subsys::cable::EndState,
    far: Option<nsfleet::subsys::cable::EndState>,
    host: Option<String>,
    impair: Option<nsfleet::topology::Impair>,
}

/// `nsfleet link NAME NODE:IFACE [down|up] --kube`: done on the node's machine. A link
/// that crosses machines is a VXLAN tunnel there: its far end is read on its own machine,
/// and keeps its carrier when this end is pulled (packets stop both ways).
pub fn link(
    name: &str,
    target: &str,
    action: Option<&str>,
    c: &Cluster,
    json: bool,
) -> anyhow::Result<()> {
    let node = (target.split_once(':').map(|(n, _)| n))
        .filter(|n| !n.is_empty())
        .ok_or_else(|| anyhow!("expected NODE:IFACE, like r1:eth0, got {target:?}"))?;
    c.with_client(|client| async move {
        let (part, agent) = remote::node_home(&client, &c.namespace, name, node).await?;
        let mut args = vec!["link".to_string(), name.into(), target.into()];
        args.extend(action.map(str::to_string));
        let mut look: LinkLook = run_json(&client, &agent, args).await?;
        let tunnel = (part.spec.tunnels.iter()).find(|t| t.a == target || t.b == target);
        let mut across = None;
        if let Some(t) = tunnel {
            let far = if t.a == target { &t.b } else { &t.a };
            let far_node = far.split_once(':').map_or(far.as_str(), |(n, _)| n);
            let (far_part, far_agent) =
                remote::node_home(&client, &c.namespace, name, far_node).await?;
            let args = vec!["link".to_string(), name.into(), far.clone()];
            let far_look: LinkLook = run_json(&client, &far_agent, args).await?;
            look.far = Some(far_look.end);
            across = Some((far_part.spec.machine, t.vni));
        }
        if json {
            let v = serde_json::json!({
                "fleet": name, "end": look.end, "far": look.far, "host": look.host,
                "impair": look.impair, "machine": part.spec.machine,
                "far_machine": across.as_ref().map(|a| &a.0),
                "vni": across.as_ref().map(|a| a.1),
            });
            println!("{v}");
            return Ok(());
        }
        nsfleet_client::link::print(&look.end, look.far.as_ref(), look.host.as_deref(), look.impair.as_ref());
        match across {
            Some((far_machine, vni)) => println!(
                "  across machines: {} to {far_machine}, VXLAN {vni}; the far end keeps its carrier when this one is pulled, and packets stop both ways",
                part.spec.machine
            ),
            None => println!("  on machine {}", part.spec.machine),
        }
        Ok(())
    })
}

/// Runs nsfleet with `args` and `--json` on an agent's machine and reads its answer; its
/// refusal, if it refuses, is ours.
async fn run_json<T: serde::de::DeserializeOwned>(
    client: &nsfleet_kube::Client,
    agent: &nsfleet_kube::agents::Agent,
    mut args: Vec<String>,
) -> anyhow::Result<T> {
    args.push("--json".into());
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let streams = remote::Streams {
        stdout: &mut out,
        stderr: &mut err,
        stdin: false,
    };
    let code = remote::run_in_agent(client, agent, &args, streams).await?;
    if code != 0 {
        bail!("on machine {}: {}", agent.machine, remote_error(&err));
    }
    serde_json::from_slice(&out)
        .with_context(|| format!("nsfleet {} on machine {}", args.join(" "), agent.machine))
}

/// A remote nsfleet's error, from its `--json` error objects or its plain lines.
fn remote_error(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<String> = (text.lines())
        .filter(|l| !l.trim().is_empty())
        .map(|l| match serde_json::from_str::<serde_json::Value>(l) {
            Ok(v) => v["error"]["message"].as_str().unwrap_or(l).to_string(),
            Err(_) => l.trim_start_matches("nsfleet: ").to_string(),
        })
        .collect();
    match lines.is_empty() {
        true => "it failed and said nothing".into(),
        false => lines.join("; "),
    }
}

/// `nsfleet down NAME --kube`: the Fleet deleted, and each machine's word on its part.
pub fn down(name: &str, c: &Cluster, json: bool) -> anyhow::Result<()> {
    let started = Instant::now();
    c.with_client(|client| async move {
        let machines = remote::delete(&client, &c.namespace, name, DOWN_BOUND).await?;
        let lost: Vec<&MachineStatus> = machines.iter().filter(|m| !m.reclaimed).collect();
        if json {
            println!("{}", serde_json::json!({ "fleet": name, "machines": machines, "seconds": started.elapsed().as_secs_f64() }));
        } else {
            println!(
                "fleet {name:?} taken down on Kubernetes in {:.1} s: reclaimed on {} of {} machines",
                started.elapsed().as_secs_f64(),
                machines.len() - lost.len(),
                machines.len()
            );
            for m in &lost {
                println!("  {}: not reclaimed ({}): its nodes ended with its agent or machine", m.machine, m.message);
            }
        }
        if !lost.is_empty() {
            bail!("{} machine(s) could not say their part was reclaimed", lost.len());
        }
        Ok(())
    })
}

//! `--kube`: `up`, `apply`, `status`, `exec`, `link` and `down` of a fleet spread over a
//! Kubernetes cluster. What is done in the cluster is nsfleet-kube's; the printing for
//! people and machines is here.

use crate::transfer;
use crate::Cluster;
use anyhow::{anyhow, bail, Context};
use nsfleet::topology::{self, Topology};
use nsfleet_client::apply::ApplyArgs;
use nsfleet_client::backend::Spread;
use nsfleet_client::up::UpArgs;
use nsfleet_image::Store;
use nsfleet_kube::crd::{
    FleetImage, FleetSpec, FleetStatus, MachinePull, MachineStatus, Software, UpOptions,
    OWNER_LEASE_S, OWNER_RENEW_S,
};
use nsfleet_kube::{plan, remote};
use std::path::Path;
use std::time::{Duration, Instant};

/// How long `up --kube` waits for every machine's part.
const UP_BOUND: Duration = Duration::from_secs(600);
/// How long `down --kube` waits for every machine to take its part down (the controller
/// gives up on a machine without an agent after its own bound, 30 s).
const DOWN_BOUND: Duration = Duration::from_secs(300);

/// `nsfleet up FILE --kube`: the file read and checked here (its errors name its lines,
/// and nothing is made in the cluster), the images its nodes name found in the user's
/// store, then a Fleet made and followed until every machine's part is up, each machine
/// sent the layers its own store lacks meanwhile.
pub fn up(file: &Path, a: UpArgs, spread: Spread, c: &Cluster) -> anyhow::Result<()> {
    let json = a.json;
    let up = UpOptions {
        workers: (a.workers != nsfleet_client::up::default_workers()).then_some(a.workers as u32),
        wait: a.wait.as_ref().map(|w| w.until.name().to_string()),
        wait_timeout_s: a.wait.as_ref().map(|w| w.bound.as_secs()),
        privileged: a.privileged,
    };
    let sent = read_checked(file, a.format, a.name, a.software)?;
    let host_software = a.software == topology::Software::Host;
    let (images, hold) = transfer::fleet_images(&sent.topo, file, &a.images, spread.machines_pull)?;
    let (pull, credentials) = machines_pull(&images, &spread)?;
    let owner = a.owner.map(crate::owner::owner).transpose()?;
    let store = Store::open(&a.images)?;
    let name = sent.topo.name.clone();
    let shipped = images.clone();
    c.with_client(|client| async move {
        let spec = FleetSpec {
            topology: Some(sent.text),
            format: Some(sent.format_name.into()),
            machines: spread.machines,
            software: Software { host_software, images, pull },
            up,
            owner,
            ..FleetSpec::default()
        };
        remote::check_access(&client).await?;
        remote::create(&client, &c.namespace, &name, spec, credentials).await?;
        if !json {
            eprintln!("nsfleet: fleet {name} ({} nodes) made in namespace {}", sent.topo.node_count(), c.namespace);
        }
        if let Some(pid) = a.owner {
            let watcher = crate::owner::start_watcher(&name, pid, c)?;
            if !json {
                eprintln!("nsfleet: fleet {name} goes down when process {pid} ends: watched by process {watcher}, which renews its lease every {OWNER_RENEW_S} s (without it, the controller takes the fleet down after {OWNER_LEASE_S} s)");
            }
        }
        let mut shipper = transfer::Shipper::new(client.clone(), &c.namespace, &name, store, json, &shipped);
        let waited = follow(&client, c, &name, 1, &mut shipper, json).await?;
        drop(hold);
        let status = match waited {
            Ok(s) if s.phase != "Failed" => s,
            Ok(s) => {
                // The controller has rolled the fleet back; the resource goes too.
                let _ = remote::delete(&client, &c.namespace, &name, DOWN_BOUND).await;
                bail!("fleet {name} failed: {}", s.message);
            }
            // A layer no machine would take: nothing half-made is left.
            Err(not_sent) => {
                let _ = remote::delete(&client, &c.namespace, &name, DOWN_BOUND).await;
                bail!("fleet {name}: {not_sent:#}; it was taken down on every machine");
            }
        };
        if json {
            println!("{}", serde_json::json!({ "fleet": name, "status": status, "seconds": sent.started.elapsed().as_secs_f64(), "images_sent": shipper.moved }));
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
            print_moved(&shipper.moved);
        }
        Ok(())
    })
}

/// How the machines pull the images marked theirs to pull, and the user's credentials
/// for those images' registries (their entries of Docker's config file), if any.
fn machines_pull(
    images: &[FleetImage],
    spread: &Spread,
) -> anyhow::Result<(Option<MachinePull>, Option<String>)> {
    let pulled = pulled(images);
    if pulled.is_empty() {
        return Ok((None, None));
    }
    let credentials = nsfleet_image::pull_credentials_for(&pulled, None)?;
    let pull = MachinePull {
        // Named by `remote::create` when it makes the Secret.
        secret: None,
        insecure_registries: spread.insecure_registries.clone(),
    };
    Ok((Some(pull), credentials))
}

/// The references of the images the machines pull themselves.
fn pulled(images: &[FleetImage]) -> Vec<String> {
    (images.iter())
        .filter(|i| i.from_registry)
        .map(|i| i.reference.clone())
        .collect()
}

/// Follows the fleet until the controller has acted on `generation` (see
/// [`remote::wait_ready`]), sending each machine the layers it asks for meanwhile: the
/// fleet's status, or (inside) why a layer could not be sent. The outer error is the
/// cluster's (unreachable, or the bound passed): the fleet is left as it is.
async fn follow(
    client: &nsfleet_kube::Client,
    c: &Cluster,
    name: &str,
    generation: i64,
    shipper: &mut transfer::Shipper,
    json: bool,
) -> anyhow::Result<anyhow::Result<FleetStatus>> {
    // Each machine's phase said as it changes, below the fleet's.
    let mut said: std::collections::HashMap<String, String> = Default::default();
    let waiting = remote::wait_ready(client, &c.namespace, name, generation, UP_BOUND, |s| {
        if json {
            return;
        }
        eprintln!(
            "  {:<10} {}/{} nodes up  {}",
            s.phase, s.nodes_up, s.nodes, s.message
        );
        for m in &s.machines {
            if said.insert(m.machine.clone(), m.phase.clone()).as_ref() != Some(&m.phase) {
                eprintln!(
                    "    {:<16} {:<10} {}/{} nodes up  {}",
                    m.machine, m.phase, m.nodes_up, m.nodes, m.message
                );
            }
        }
    });
    // A fleet whose nodes name no image has nothing to send: its parts are not asked.
    if !shipper.has_images() {
        return Ok(Ok(waiting.await?));
    }
    tokio::select! {
        status = waiting => Ok(Ok(status?)),
        not_sent = shipper.run() => Ok(Err(not_sent)),
    }
}

fn print_moved(moved: &std::collections::BTreeMap<String, transfer::Moved>) {
    for (machine, m) in moved {
        let mut said = format!(
            "  images: {machine} took {} layers, {:.1} MB sent",
            m.layers,
            m.bytes as f64 / 1e6
        );
        if m.resumed > 0 {
            said += &format!(", {} resumed after a dropped connection", m.resumed);
        }
        if m.tried_again > 0 {
            said += &format!(", {} tries refused and made again", m.tried_again);
        }
        println!("{said}");
    }
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
    software: topology::Software,
) -> anyhow::Result<Sent> {
    let started = Instant::now();
    let text = topology::read_text(file)?;
    plan::check_topology_size(text.len()).map_err(|m| anyhow!("{}: {m}", file.display()))?;
    let format_name = match format.unwrap_or_else(|| topology::Format::of(file)) {
        topology::Format::Toml => "toml",
        topology::Format::Clab => "clab",
    };
    let draft = plan::draft(
        &file.display().to_string(),
        &text,
        Some(format_name),
        software,
    )?;
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
pub fn apply(a: ApplyArgs, c: &Cluster) -> anyhow::Result<()> {
    let (file, dry_run, json) = (&a.file, a.dry_run, a.json);
    let sent = read_checked(file, a.format, a.name, a.software)?;
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
        let host_software = fleet.spec.software.host_software;
        let (images, hold) = match host_software {
            true => (Vec::new(), None),
            false => transfer::fleet_images(&sent.topo, file, &a.images, fleet.spec.software.pull.is_some())?,
        };
        let store = Store::open(&a.images)?;
        // A fleet whose machines pull: the Secret made anew for the images now named.
        let mut pull = fleet.spec.software.pull.clone();
        if let Some(p) = pull.as_mut() {
            if let Some(text) = nsfleet_image::pull_credentials_for(&pulled(&images), None)? {
                p.secret = Some(remote::renew_pull_secret(&client, &fleet, text).await?);
            }
        }
        let generation = remote::change(&client, &c.namespace, &name, sent.text, sent.format_name, &images, pull.as_ref()).await?;
        if !json {
            eprintln!("nsfleet: changing fleet {name} on Kubernetes ({} changes)", changes.len());
        }
        let mut shipper = transfer::Shipper::new(client.clone(), &c.namespace, &name, store, json, &images);
        let status = follow(&client, c, &name, generation, &mut shipper, json).await?;
        drop(hold);
        let status = match status {
            Ok(status) => status,
            // A layer a machine would not take: the change is undone on every machine,
            // as when a machine refuses it (the images that ran are there already).
            Err(not_sent) => {
                let format = running_format.unwrap_or_else(|| sent.format_name.to_string());
                let before = &fleet.spec.software.images;
                let was = fleet.spec.software.pull.as_ref();
                let back = remote::change(&client, &c.namespace, &name, running_text, &format, before, was).await?;
                let mut nothing = transfer::Shipper::new(client.clone(), &c.namespace, &name, Store::open(&a.images)?, json, &[]);
                let undone = follow(&client, c, &name, back, &mut nothing, json).await?;
                let how = match undone {
                    Ok(s) if s.phase == "Running" => "it was undone on every machine".to_string(),
                    Ok(s) => format!("undoing it left the fleet {}: {}", s.phase, s.message),
                    Err(e) => format!("undoing it failed: {e:#}"),
                };
                bail!("fleet {name}: the change was not made: {not_sent:#}; {how}");
            }
        };
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
        let images = machines_images(&client, &parts).await;
        if json {
            let nodes: Vec<_> = (parts.iter())
                .flat_map(|p| p.spec.nodes.iter().map(|n| serde_json::json!({"name": n, "machine": p.spec.machine})))
                .collect();
            println!("{}", serde_json::json!({ "fleet": name, "namespace": c.namespace, "status": status, "nodes": nodes, "images": images }));
            return Ok(());
        }
        println!(
            "fleet {name} (namespace {}): {}  {}/{} nodes up on {} machines; {} links cross machines  {}",
            c.namespace, status.phase, status.nodes_up, status.nodes, status.machine_count, status.tunnels, status.message
        );
        print_machines(&status.machines);
        for (machine, held) in &images {
            let said: Vec<String> = match held {
                Ok(list) if list.is_empty() => vec!["none".into()],
                Ok(list) => list.iter().map(|i| format!("{} ({:.1} MB)", i.names.first().map_or(i.id.short(), String::as_str), i.size as f64 / 1e6)).collect(),
                Err(e) => vec![format!("not known: {e}")],
            };
            println!("  images on {machine}: {}", said.join(", "));
        }
        Ok(())
    })
}

/// What the image store of each machine of the fleet holds (`nsfleet image ls` there), or
/// why it could not be asked.
async fn machines_images(
    client: &nsfleet_kube::Client,
    parts: &[nsfleet_kube::crd::FleetPart],
) -> std::collections::BTreeMap<String, Result<Vec<nsfleet_image::ImageRecord>, String>> {
    #[derive(serde::Deserialize)]
    struct Listed {
        images: Vec<nsfleet_image::ImageRecord>,
    }
    let mut held = std::collections::BTreeMap::new();
    for p in parts {
        let machine = p.spec.machine.clone();
        let listed = async {
            let agent = remote::machine_agent(client, &machine).await?;
            let l: Listed = run_json(client, &agent, vec!["image".into(), "ls".into()]).await?;
            anyhow::Ok(l.images)
        };
        held.insert(machine.clone(), listed.await.map_err(|e| format!("{e:#}")));
    }
    held
}

/// `nsfleet image prune --kube [--all]`: each machine's image store pruned by its agent
/// (`nsfleet image prune` there): what no fleet on it holds goes.
pub fn prune_images(all: bool, c: &Cluster, json: bool) -> anyhow::Result<()> {
    c.with_client(|client| async move {
        let agents =
            nsfleet_kube::agents::list(&client, nsfleet_kube::manifests::SYSTEM, None).await?;
        let mut said = serde_json::Map::new();
        let mut failed = Vec::new();
        for agent in agents.iter().filter(|a| a.ready) {
            let mut args = vec!["image".to_string(), "prune".into()];
            if all {
                args.push("--all".into());
            }
            match run_json::<serde_json::Value>(&client, agent, args).await {
                Ok(v) => {
                    let p = &v["pruned"];
                    if !json {
                        let count = |k: &str| p[k].as_array().map_or(0, Vec::len);
                        println!(
                            "{}: {} images and {} layers removed, {:.1} MB freed",
                            agent.machine,
                            count("images"),
                            count("layers"),
                            p["bytes_freed"].as_f64().unwrap_or(0.0) / 1e6
                        );
                    }
                    said.insert(agent.machine.clone(), p.clone());
                }
                Err(e) => failed.push(format!("{e:#}")),
            }
        }
        if json {
            println!(
                "{}",
                serde_json::json!({ "pruned": said, "failed": failed })
            );
        }
        if !failed.is_empty() {
            bail!("not pruned: {}", failed.join("; "));
        }
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

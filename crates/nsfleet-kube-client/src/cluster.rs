//! `nsfleet kube`: install nsfleet in a cluster (or print what it applies), and what
//! runs there: the controller, the agent, and one machine's part brought up or changed.

use anyhow::{anyhow, Context};
use nsfleet::topology::Topology;
use nsfleet_client::up::{UpArgs, Validated};
use nsfleet_kube::crd::FleetPartSpec;
use nsfleet_kube::{manifests, plan, remote};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long `kube install` waits for the controller and the agents to run.
const INSTALL_BOUND: Duration = Duration::from_secs(180);

/// `nsfleet kube install`: the resources, RBAC, controller and agents applied.
pub fn install(
    image: String,
    api_server: Option<String>,
    context: Option<String>,
) -> anyhow::Result<()> {
    let api_server = api_server.map(|a| parse_host_port(&a)).transpose()?;
    let o = manifests::Options { image, api_server };
    crate::runtime()?.block_on(async {
        let client = remote::connect(context.as_deref()).await?;
        for done in remote::install(&client, &o).await? {
            println!("applied {done}");
        }
        eprintln!(
            "nsfleet: waiting for the controller and an agent on every machine (bound: {} s)",
            INSTALL_BOUND.as_secs()
        );
        let agents = remote::wait_installed(&client, INSTALL_BOUND).await?;
        println!(
            "nsfleet is installed: the controller runs, and {} machines run the agent:",
            agents.len()
        );
        for a in agents.iter().filter(|a| a.ready) {
            println!(
                "  {:<16} {:<16} {:>8} MB for fleets, MTU {}",
                a.machine,
                a.info.address,
                a.info.capacity >> 20,
                a.info.mtu
            );
        }
        Ok(())
    })
}

/// `nsfleet kube manifests`: the same objects, as a JSON list for `kubectl apply -f -`.
pub fn print_manifests(image: String, api_server: Option<String>) -> anyhow::Result<()> {
    let api_server = api_server.map(|a| parse_host_port(&a)).transpose()?;
    let items = manifests::all(&manifests::Options { image, api_server });
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    println!("{}", serde_json::to_string_pretty(&list)?);
    Ok(())
}

fn parse_host_port(s: &str) -> anyhow::Result<(String, u16)> {
    let (host, port) = s
        .rsplit_once(':')
        .ok_or_else(|| anyhow!("--api-server {s:?}: expected HOST:PORT"))?;
    let port = port
        .parse()
        .map_err(|_| anyhow!("--api-server {s:?}: expected a port number after ':'"))?;
    Ok((host.to_string(), port))
}

/// `nsfleet kube controller`.
pub fn controller() -> anyhow::Result<()> {
    crate::runtime()?.block_on(nsfleet_kube::controller::run(manifests::SYSTEM.to_string()))
}

/// `nsfleet kube agent`: its machine, pod and namespace from the environment the
/// DaemonSet gives it.
pub fn agent() -> anyhow::Result<()> {
    let var = |k: &str| {
        std::env::var(k).with_context(|| format!("${k} is not set (the DaemonSet sets it)"))
    };
    let args = nsfleet_kube::agent::AgentArgs {
        machine: var("NSFLEET_MACHINE")?,
        pod: var("NSFLEET_POD")?,
        namespace: var("NSFLEET_POD_NAMESPACE")?,
        exe: std::env::current_exe()?,
        work_dir: PathBuf::from("/run/nsfleet-parts"),
    };
    crate::runtime()?.block_on(nsfleet_kube::agent::run(args))
}

/// `nsfleet kube up-part FILE`: one machine's part brought up, as `up` brings up a file:
/// the whole topology read and checked against this machine's kernel, this machine's
/// nodes kept, its cut links made tunnels.
pub fn up_part(file: &Path, run_dir: PathBuf) -> anyhow::Result<()> {
    let part = part_topology(file)?;
    nsfleet_client::up::start(UpArgs::defaults(run_dir), Validated::of(part))
}

/// `nsfleet kube apply-part FILE`: the running part changed into the part FILE describes
/// (its spec changed by `nsfleet apply --kube`), as `apply` changes a fleet: all or
/// nothing on this machine.
pub fn apply_part(file: &Path, run_dir: PathBuf) -> anyhow::Result<()> {
    let topo = part_topology(file)?;
    nsfleet_client::apply::change(nsfleet_client::apply::ChangeTo {
        name: topo.name.clone(),
        file: std::path::absolute(file)?,
        shown: file.to_path_buf(),
        topo,
        hold: None,
        dry_run: false,
        json: false,
        run_dir,
    })
}

/// This machine's part of a fleet, from a FleetPart's spec written to `file`.
fn part_topology(file: &Path) -> anyhow::Result<Topology> {
    let spec: FleetPartSpec = serde_json::from_slice(&std::fs::read(file)?)
        .with_context(|| format!("{}: not a fleet part", file.display()))?;
    let where_ = format!("fleet {}'s topology", spec.fleet);
    let draft = plan::draft(&where_, &spec.topology, spec.format.as_deref())?;
    let mut whole: Topology = nsfleet::subsys::probe::validate(draft)?;
    whole.name = spec.fleet.clone();
    let here: HashSet<&str> = spec.nodes.iter().map(String::as_str).collect();
    let cut = plan::crossings(&spec.tunnels).map_err(|e| anyhow!(e))?;
    let local = spec
        .address
        .parse()
        .map_err(|_| anyhow!("part address {:?}: expected an IP address", spec.address))?;
    Ok(whole.part(|n| here.contains(n), local, &cut))
}

//! `nsfleet kube`: install nsfleet in a cluster (or print what it applies), and what
//! runs there: the controller, the agent, and one machine's part brought up or changed.

use anyhow::{anyhow, Context};
use nsfleet::topology::Software;
use nsfleet::topology::Topology;
use nsfleet_client::up::{UpArgs, Validated};
use nsfleet_image::transfer::Receiving;
use nsfleet_image::Store;
use nsfleet_kube::crd::{FleetImage, FleetPartSpec};
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
    allow_privileged: bool,
    context: Option<String>,
) -> anyhow::Result<()> {
    let api_server = api_server.map(|a| parse_host_port(&a)).transpose()?;
    let o = manifests::Options {
        image,
        api_server,
        allow_privileged,
    };
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
        let behind = remote::agents_behind(&client).await?;
        if !behind.is_empty() {
            eprintln!(
                "nsfleet: {} agents still run an earlier install (their DaemonSet updates OnDelete, so that an install ends no running fleet); each takes this one when its pod is replaced, which ends its machine's fleets:\n  kubectl -n {} delete pod {}",
                behind.len(),
                manifests::SYSTEM,
                behind.join(" ")
            );
        }
        Ok(())
    })
}

/// `nsfleet kube manifests`: the same objects, as a JSON list for `kubectl apply -f -`.
pub fn print_manifests(
    image: String,
    api_server: Option<String>,
    allow_privileged: bool,
) -> anyhow::Result<()> {
    let api_server = api_server.map(|a| parse_host_port(&a)).transpose()?;
    let items = manifests::all(&manifests::Options {
        image,
        api_server,
        allow_privileged,
    });
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
/// nodes kept (each running its image from this machine's store), its cut links made
/// tunnels.
pub fn up_part(file: &Path, run_dir: PathBuf) -> anyhow::Result<()> {
    let spec = read_part(file)?;
    let mut a = UpArgs::defaults(run_dir);
    if let Some(why) = manifests::privileged_refusal(spec.up.privileged) {
        anyhow::bail!(why);
    }
    a.privileged = spec.up.privileged;
    if let Some(w) = spec.up.workers {
        a.workers = w as usize;
    }
    if let Some(until) = &spec.up.wait {
        a.wait = Some(nsfleet_client::ready::Wait {
            until: nsfleet_client::ready::parse_condition(until).map_err(anyhow::Error::msg)?,
            bound: Duration::from_secs(spec.up.wait_timeout_s.unwrap_or(300)),
        });
    }
    let mut part = part_topology(&spec)?;
    let hold = nsfleet_client::fleet_images::find(&mut part, file, &a.images)?;
    nsfleet_client::up::start(a, Validated::of(part).holding(hold))
}

/// `nsfleet kube apply-part FILE`: the running part changed into the part FILE describes
/// (its spec changed by `nsfleet apply --kube`), as `apply` changes a fleet: all or
/// nothing on this machine.
pub fn apply_part(file: &Path, run_dir: PathBuf) -> anyhow::Result<()> {
    let mut topo = part_topology(&read_part(file)?)?;
    let hold = nsfleet_client::fleet_images::find(&mut topo, file, &Store::default_root())?;
    nsfleet_client::apply::change(nsfleet_client::apply::ChangeTo {
        name: topo.name.clone(),
        file: std::path::absolute(file)?,
        shown: file.to_path_buf(),
        topo,
        hold,
        dry_run: false,
        json: false,
        run_dir,
    })
}

/// `nsfleet kube part-images FILE`: which layers of the part's images this machine's
/// store lacks, as JSON (`{"missing": [diff_id, ...]}`); each image whose layers are all
/// there is adopted by the store under its names first. The images it is to pull itself
/// are pulled first, unless the store has them by their reference: with the Docker config
/// on standard input when `credentials_on_stdin` (kept in memory only).
pub fn part_images(file: &Path, credentials_on_stdin: bool) -> anyhow::Result<()> {
    let spec = read_part(file)?;
    let store = Store::open(&Store::default_root())?;
    pull_missing(&store, &spec, credentials_on_stdin)?;
    let mut missing: Vec<String> = Vec::new();
    for image in spec.software.images.iter().filter(|i| !i.from_registry) {
        let lacks: Vec<&String> = (image.layers.iter())
            .filter(|l| !store.has_layer(l))
            .collect();
        if lacks.is_empty() {
            adopt(&store, image)?;
        }
        for l in lacks {
            if !missing.contains(l) {
                missing.push(l.clone());
            }
        }
    }
    println!("{}", serde_json::json!({ "missing": missing }));
    Ok(())
}

/// What a machine's refused anonymous pull names as where credentials were looked for.
const NO_SECRET: &str = "the user's Docker config, as `up --kube` read it when it made the fleet,";

/// Pulls each image the part is to pull itself that the store lacks, as `image pull`
/// does; the first that fails is the error (the controller names the machine).
fn pull_missing(
    store: &Store,
    spec: &FleetPartSpec,
    credentials_on_stdin: bool,
) -> anyhow::Result<()> {
    let pulls: Vec<&FleetImage> = (spec.software.images.iter())
        .filter(|i| i.from_registry)
        .collect();
    // Never the machine's own Docker config: the user's credentials, or none.
    let credentials = match credentials_on_stdin {
        true => {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)?;
            ("the fleet's pull Secret".into(), text)
        }
        false => (NO_SECRET.into(), "{}".into()),
    };
    let opts = nsfleet_image::PullOptions {
        docker_config_text: Some(credentials),
        insecure_registries: (spec.software.pull.iter())
            .flat_map(|p| p.insecure_registries.clone())
            .collect(),
        ..Default::default()
    };
    for image in pulls {
        if store.find(&image.reference)?.is_none() {
            (store.pull(&image.reference, &opts, &mut |_| {})).context("pull failed")?;
        }
    }
    Ok(())
}

/// The image in the machine's store under the names it has in the user's, unless it is
/// there already by its reference.
fn adopt(store: &Store, image: &FleetImage) -> anyhow::Result<()> {
    let there = store.find(&image.reference)?;
    if there.is_some_and(|i| i.id.0 == image.id) {
        return Ok(());
    }
    store.adopt(&crate::transfer::portable(image))?;
    Ok(())
}

/// `nsfleet kube receive-layer DIFF_ID DIGEST SIZE`: one layer of an image, sent by the
/// user's `up --kube` through this agent's standard input, into this machine's store.
/// Says first where the sender is to start (`present`, or `from N`: N bytes kept of a
/// dropped try), then takes the bytes until the input ends, checks them against DIGEST
/// and SIZE, and moves the layer into the store (see nsfleet-image's transfer).
pub fn receive_layer(diff_id: &str, digest: &str, size: u64) -> anyhow::Result<()> {
    use std::io::Write;
    let store = Store::open(&Store::default_root())?;
    let offset = match store.receiving(diff_id, digest)? {
        Receiving::Present => {
            println!("present");
            return Ok(());
        }
        Receiving::From(n) => n,
    };
    store.check_room(diff_id, size, offset)?;
    println!("from {offset}");
    std::io::stdout().flush()?;
    store.receive_layer(diff_id, digest, size, offset, &mut std::io::stdin().lock())?;
    println!("stored");
    Ok(())
}

fn read_part(file: &Path) -> anyhow::Result<FleetPartSpec> {
    serde_json::from_slice(&std::fs::read(file)?)
        .with_context(|| format!("{}: not a fleet part", file.display()))
}

/// This machine's part of a fleet, from its FleetPart's spec.
fn part_topology(spec: &FleetPartSpec) -> anyhow::Result<Topology> {
    let where_ = format!("fleet {}'s topology", spec.fleet);
    let software = match spec.software.host_software {
        true => Software::Host,
        false => Software::Images,
    };
    let draft = plan::draft(&where_, &spec.topology, spec.format.as_deref(), software)?;
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

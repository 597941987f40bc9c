//! The agent (a DaemonSet: one per machine, privileged, in the machine's own network
//! namespace): carries out the FleetParts placed on its machine with nsfleet's own
//! supervisor, and says how each is doing in the part's status.
//!
//! Each part is brought up and taken down by this same program run as a command
//! (`nsfleet kube up-part`, `nsfleet down`): the supervisor is forked from a process of one
//! thread, never from this one's async runtime. A part the agent finds up (after its own
//! restart) is left running; a part it finds gone after it was running is Failed: its
//! nodes ended with the agent's container.

use crate::crd::{FleetPart, PartStatus, FINALIZER, MACHINE_LABEL, PULL_SECRET_LABEL};
use crate::{agents, Error};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{finalizer, Event};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How often a running part's count of nodes up is said again.
const REFRESH: Duration = Duration::from_secs(10);
/// How often a part waiting for its images' layers looks at its machine's store again.
const FETCH_POLL: Duration = Duration::from_secs(1);
/// Every how many heartbeats the agent looks for fleets no part names (a minute).
const SWEEP_EVERY: u64 = 12;
/// Network namespaces left to the machine's own (containers, services) when saying how
/// many fleets may make there.
const OWN_NAMESPACES: u64 = 256;
/// Share of the machine's available memory fleets may be given.
const SHARE_PERCENT: u64 = 80;

pub struct AgentArgs {
    /// The Kubernetes node (machine) this agent runs on.
    pub machine: String,
    pub pod: String,
    pub namespace: String,
    /// This program, which runs each part's `up` and `down`.
    pub exe: PathBuf,
    /// Where the parts' topologies are written for `up-part`.
    pub work_dir: PathBuf,
}

struct Ctx {
    client: Client,
    args: AgentArgs,
}

/// Runs the agent until the process ends.
pub async fn run(args: AgentArgs) -> anyhow::Result<()> {
    // On cgroup v2 the container's own group holds this process, and v2 hands no
    // controller down from it: the parts' node limits need it to (v1 hands each down).
    let leaf = nsfleet_sys::cgroup::give_processes_a_leaf("agent")
        .map_err(|e| anyhow::anyhow!("readying the container's cgroup for nodes' groups: {e}"))?;
    if let Some(leaf) = leaf {
        eprintln!(
            "nsfleet agent: moved this container's processes into {}, so that its cgroup hands its controllers down to nodes' groups",
            leaf.display()
        );
    }
    let client = Client::try_default().await?;
    std::fs::create_dir_all(&args.work_dir)?;
    // The agent is its container's first process: each part's supervisor, once the
    // command that started it has returned, is an orphan of ours to reap when it ends.
    std::thread::spawn(|| loop {
        nsfleet_sys::reap_any();
        std::thread::sleep(Duration::from_secs(1));
    });
    renew(&client, &args).await?;
    let said = measure(&client, &args).await?;
    announce(&client, &args, said.clone()).await?;
    let selector = format!("{MACHINE_LABEL}={}", args.machine);
    eprintln!(
        "nsfleet agent on {}: watching parts ({selector})",
        args.machine
    );
    let parts: Api<FleetPart> = Api::all(client.clone());
    let ctx = Arc::new(Ctx { client, args });
    tokio::spawn(heartbeat(ctx.clone(), said));
    let work = Controller::new(parts, watcher::Config::default().labels(&selector))
        .run(reconcile, error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                eprintln!("nsfleet agent: {e}");
            }
        });
    crate::until_terminated(
        work,
        "nsfleet agent: SIGTERM: ending; this machine's parts end with its container",
    )
    .await
}

/// What the agent last said of its machine: bytes for fleets, the underlay's MTU, the
/// namespaces it may make, and the layers its image store holds.
#[derive(Clone, Default, PartialEq)]
struct Said {
    capacity: u64,
    mtu: u32,
    max_nodes: u64,
    layers: String,
}

/// Renews the agent's Lease every [`agents::RENEW`] (its heartbeat), and says its
/// machine's capacity again when it has moved by a twentieth or the MTU changed.
async fn heartbeat(ctx: Arc<Ctx>, mut said: Said) {
    let (client, a) = (&ctx.client, &ctx.args);
    let mut last = std::time::Instant::now();
    for beat in 0u64.. {
        // Every minute, and at once after being away (frozen, or the machine suspended):
        // what was let go meanwhile is found at its first beat back.
        let away = last.elapsed() > agents::RENEW * 3;
        if beat % SWEEP_EVERY == 0 || away {
            if let Err(e) = sweep(&ctx).await {
                eprintln!("nsfleet agent: looking for fleets without a part: {e}");
            }
        }
        last = std::time::Instant::now();
        tokio::time::sleep(agents::RENEW).await;
        if let Err(e) = renew(client, a).await {
            eprintln!("nsfleet agent: renewing its lease: {e}");
        }
        match measure(client, a).await {
            Ok(now) if moved(&said, &now) => match announce(client, a, now.clone()).await {
                Ok(()) => said = now,
                Err(e) => eprintln!("nsfleet agent: saying its capacity: {e}"),
            },
            Ok(_) => {}
            Err(e) => eprintln!("nsfleet agent: measuring its machine: {e}"),
        }
    }
}

/// Takes down the fleets this agent runs that no FleetPart of its machine names any more:
/// a part let go by the controller while this agent was away (frozen, or cut off) is gone
/// from the cluster, and nothing else would ever take its nodes down. Only the agent's own
/// run folder is looked at: every fleet there is one it made.
async fn sweep(ctx: &Ctx) -> anyhow::Result<()> {
    let listed: serde_json::Value = serde_json::from_str(
        &output(ctx, &["status", "--json"])
            .await
            .map_err(anyhow::Error::msg)?,
    )?;
    let running: Vec<String> = (listed["fleets"].as_array().into_iter().flatten())
        .filter_map(|f| f["name"].as_str().map(str::to_string))
        .collect();
    if running.is_empty() {
        return Ok(());
    }
    let parts: Api<FleetPart> = Api::all(ctx.client.clone());
    let selector = format!("{MACHINE_LABEL}={}", ctx.args.machine);
    let named = parts
        .list(&ListParams::default().labels(&selector))
        .await?
        .items;
    for fleet in running {
        if named.iter().any(|p| p.spec.fleet == fleet) {
            continue;
        }
        // Asked again just before: a part made since the list above is not swept.
        let this = format!("{selector},{}", crate::crd::parts_of(&fleet));
        if !parts
            .list(&ListParams::default().labels(&this))
            .await?
            .items
            .is_empty()
        {
            continue;
        }
        eprintln!("nsfleet agent: fleet {fleet} runs here and no part names it: taking it down");
        if let Err(e) = run_nsfleet(ctx, &["down", &fleet]).await {
            eprintln!("nsfleet agent: {e}");
        }
    }
    Ok(())
}

fn moved(was: &Said, now: &Said) -> bool {
    was.mtu != now.mtu
        || was.max_nodes != now.max_nodes
        || was.layers != now.layers
        || was.capacity.abs_diff(now.capacity) > was.capacity / 20
}

/// The Lease `agent-MACHINE` held by this agent's pod, renewed now.
async fn renew(client: &Client, a: &AgentArgs) -> Result<(), kube::Error> {
    use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    let name = agents::lease_name(&a.machine);
    let lease = Lease {
        metadata: kube::api::ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(a.namespace.clone()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(a.pod.clone()),
            lease_duration_seconds: Some(agents::LEASE_SECONDS),
            renew_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
            ..Default::default()
        }),
    };
    let leases: Api<Lease> = Api::namespaced(client.clone(), &a.namespace);
    let pp = PatchParams::apply("nsfleet-agent").force();
    leases.patch(&name, &pp, &Patch::Apply(&lease)).await?;
    Ok(())
}

/// This machine's room for fleets: a share of its available memory, plus what the parts
/// it runs were given (their memory is no longer available, and the controller takes
/// their weight off again); the network namespaces it may make (the controller takes the
/// parts' nodes off); and its underlay's MTU.
async fn measure(client: &Client, a: &AgentArgs) -> anyhow::Result<Said> {
    let available = nsfleet_sys::meminfo("MemAvailable:");
    if available <= 0 {
        anyhow::bail!("/proc/meminfo has no MemAvailable");
    }
    let parts: Api<FleetPart> = Api::all(client.clone());
    let selector = format!("{MACHINE_LABEL}={}", a.machine);
    let held: u64 = (parts
        .list(&ListParams::default().labels(&selector))
        .await?
        .items)
        .iter()
        .filter(|p| {
            p.status
                .as_ref()
                .is_some_and(|s| s.phase == "Running" || s.phase == "Deploying")
        })
        .map(|p| p.spec.weight)
        .sum();
    // The machine's own namespaces (its containers', its services') are not counted by
    // the kernel anywhere a process can read: a margin is left them.
    let max_nodes = std::fs::read_to_string("/proc/sys/user/max_net_namespaces")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map_or(u64::MAX, |n| n.saturating_sub(OWN_NAMESPACES));
    Ok(Said {
        capacity: available as u64 / 100 * SHARE_PERCENT + held,
        mtu: underlay_mtu(),
        max_nodes,
        layers: held_layers(),
    })
}

/// The layers of the machine's image store (its `layers/` folder: one folder per layer,
/// named by its diff_id's hex), each by its first hex digits, sorted, comma-separated:
/// what placement prefers a machine for.
fn held_layers() -> String {
    let dir = std::path::Path::new(crate::manifests::IMAGE_STORE).join("layers");
    let mut keys: Vec<String> = (std::fs::read_dir(dir).into_iter().flatten().flatten())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.len() == 64 && n.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(|n| n[..crate::plan::LAYER_KEY].to_string())
        .collect();
    keys.sort();
    keys.join(",")
}

/// Says what this machine can hold and its underlay's MTU, on the agent's own pod.
async fn announce(client: &Client, a: &AgentArgs, said: Said) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &a.namespace);
    let patch = json!({ "metadata": { "annotations": {
        agents::CAPACITY: said.capacity.to_string(),
        agents::MTU: said.mtu.to_string(),
        agents::MAX_NODES: said.max_nodes.to_string(),
        agents::LAYERS: said.layers,
    }}});
    pods.patch(&a.pod, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    eprintln!(
        "nsfleet agent on {}: {} MB for fleets, underlay MTU {}",
        a.machine,
        said.capacity >> 20,
        said.mtu
    );
    Ok(())
}

/// The smallest MTU of the machine's interfaces that are up, but `lo`: what a tunnel's
/// packets may meet on their way out.
fn underlay_mtu() -> u32 {
    let read = |p: PathBuf| std::fs::read_to_string(p).ok();
    (std::fs::read_dir("/sys/class/net")
        .into_iter()
        .flatten()
        .flatten())
    .filter(|e| e.file_name() != "lo")
    .filter(|e| read(e.path().join("operstate")).is_some_and(|s| s.trim() != "down"))
    .filter_map(|e| read(e.path().join("mtu"))?.trim().parse().ok())
    .min()
    .unwrap_or(1500)
}

fn error_policy(_: Arc<FleetPart>, e: &Error, _: Arc<Ctx>) -> Action {
    eprintln!("nsfleet agent: {}", e.0);
    Action::requeue(Duration::from_secs(2))
}

async fn reconcile(part: Arc<FleetPart>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = part.namespace().unwrap_or_else(|| "default".into());
    let api: Api<FleetPart> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&api, FINALIZER, part, |event| async {
        match event {
            Event::Apply(p) => bring_up(&api, &p, &ctx).await,
            Event::Cleanup(p) => take_down(&api, &p, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error(e.to_string()))
}

async fn set_status(api: &Api<FleetPart>, part: &FleetPart, s: PartStatus) -> Result<(), Error> {
    if part.status.as_ref() == Some(&s) {
        return Ok(());
    }
    let patch = json!({ "status": s });
    api.patch_status(
        &part.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

async fn bring_up(api: &Api<FleetPart>, part: &FleetPart, ctx: &Ctx) -> Result<Action, Error> {
    let fleet = &part.spec.fleet;
    let was = part.status.clone().unwrap_or_default();
    let generation = part.metadata.generation;
    // Running, keeping the generations it said; layers it waited for are not waited for
    // any more (the fetching branch below says them again while they are).
    let running = |nodes_up, message: String| PartStatus {
        phase: "Running".into(),
        nodes_up,
        message,
        missing_layers: Vec::new(),
        ..was.clone()
    };
    let refused = crate::manifests::privileged_refusal(part.spec.up.privileged);
    let status = match (was.phase.as_str(), local(ctx, fleet).await) {
        ("Failed", _) => return Ok(Action::await_change()),
        // Starting, stopping, or its supervisor not answering: asked again soon.
        (_, Local::Unknown) => return Ok(Action::requeue(Duration::from_secs(2))),
        // Up before this part ever said a phase (the agent says Deploying before it
        // starts one): what runs is an earlier part's fleet of the same name, let go
        // while this agent was away. It goes first.
        ("", Local::Up(_)) => {
            eprintln!("nsfleet agent: fleet {fleet} runs here from an earlier part: taking it down first");
            run_nsfleet(ctx, &["down", fleet]).await.map_err(Error)?;
            return Ok(Action::requeue(Duration::from_secs(1)));
        }
        // Its spec changed while it runs (`nsfleet apply --kube`), and was not refused.
        (_, Local::Up(_)) if was.observed_generation != generation && was.refused_generation != generation => {
            let waiting = |missing: Vec<String>| PartStatus {
                missing_layers: missing,
                ..running(was.nodes_up, "waiting for the layers its images lack".into())
            };
            let refused = |e| PartStatus {
                refused_generation: generation,
                ..running(was.nodes_up, e)
            };
            let broken = (refused, Action::requeue(REFRESH));
            if let Some(then) = until_fetched(api, part, ctx, waiting, broken).await? {
                return Ok(then);
            }
            match run_part(ctx, part, "apply-part").await {
                Ok(up) => PartStatus {
                    observed_generation: generation,
                    ..running(up, String::new())
                },
                Err(e) => PartStatus {
                    refused_generation: generation,
                    ..running(was.nodes_up, e)
                },
            }
        }
        (_, Local::Up(up)) => running(up, was.message.clone()),
        ("Running", Local::Absent) => PartStatus {
            phase: "Failed".into(),
            message: "its nodes ended: the agent restarted, or the fleet was taken down outside Kubernetes".into(),
            ..PartStatus::default()
        },
        // Unconfined nodes where the agent was not installed to run them: nothing made.
        (_, Local::Absent) if refused.is_some() => PartStatus {
            phase: "Failed".into(),
            message: refused.unwrap_or_default(),
            ..PartStatus::default()
        },
        (_, Local::Absent) => {
            let waiting = |missing: Vec<String>| PartStatus {
                phase: "Fetching".into(),
                message: format!("its machine's image store lacks {} layers: waiting for them from `nsfleet up --kube`", missing.len()),
                missing_layers: missing,
                ..PartStatus::default()
            };
            let failed = |e| PartStatus {
                phase: "Failed".into(),
                message: e,
                ..PartStatus::default()
            };
            let broken = (failed, Action::await_change());
            if let Some(then) = until_fetched(api, part, ctx, waiting, broken).await? {
                return Ok(then);
            }
            let deploying = PartStatus {
                phase: "Deploying".into(),
                ..PartStatus::default()
            };
            set_status(api, part, deploying).await?;
            match run_part(ctx, part, "up-part").await {
                Ok(up) => PartStatus {
                    phase: "Running".into(),
                    nodes_up: up,
                    observed_generation: generation,
                    ..PartStatus::default()
                },
                Err(e) => PartStatus {
                    phase: "Failed".into(),
                    message: e,
                    ..PartStatus::default()
                },
            }
        }
    };
    set_status(api, part, status).await?;
    Ok(Action::requeue(REFRESH))
}

async fn take_down(api: &Api<FleetPart>, part: &FleetPart, ctx: &Ctx) -> Result<Action, Error> {
    let fleet = &part.spec.fleet;
    // Unless it is surely gone, `down` (which waits for the kernel's reclamation); if that
    // fails, the part stays, and this is tried again.
    if local(ctx, fleet).await != Local::Absent {
        run_nsfleet(ctx, &["down", fleet]).await.map_err(Error)?;
    }
    let status = PartStatus {
        phase: "Reclaimed".into(),
        reclaimed: true,
        ..PartStatus::default()
    };
    // The part goes once its finalizer does: its last status is for whoever watches it go.
    let _ = set_status(api, part, status).await;
    let _ = std::fs::remove_file(part_file(ctx, fleet));
    Ok(Action::await_change())
}

fn part_file(ctx: &Ctx, fleet: &str) -> PathBuf {
    ctx.args.work_dir.join(format!("{fleet}.json"))
}

/// While the machine's store lacks layers of the part's images: the part's status set to
/// `waiting` (the layers listed, for `up --kube` to send) and the part looked at again
/// soon. When the store cannot be asked: the status `broken` makes of the error, and
/// its action. None once the store holds every layer (and has adopted the images).
async fn until_fetched(
    api: &Api<FleetPart>,
    part: &FleetPart,
    ctx: &Ctx,
    waiting: impl FnOnce(Vec<String>) -> PartStatus,
    broken: (impl FnOnce(String) -> PartStatus, Action),
) -> Result<Option<Action>, Error> {
    let pulls = part
        .spec
        .software
        .images
        .iter()
        .filter(|i| i.from_registry)
        .count();
    if pulls > 0 && part.status.as_ref().is_none_or(|s| s.phase.is_empty()) {
        let pulling = PartStatus {
            phase: "Fetching".into(),
            message: format!("pulling {pulls} images from their registries"),
            ..PartStatus::default()
        };
        set_status(api, part, pulling).await?;
    }
    let (status, then) = match lacking(ctx, part).await {
        Ok(missing) if missing.is_empty() => return Ok(None),
        Ok(missing) => (waiting(missing), Action::requeue(FETCH_POLL)),
        Err(e) => (broken.0(e), broken.1),
    };
    set_status(api, part, status).await?;
    Ok(Some(then))
}

/// The part's spec written where `nsfleet kube up-part` and its kin read it.
fn write_part(ctx: &Ctx, part: &FleetPart) -> Result<String, String> {
    let file = part_file(ctx, &part.spec.fleet);
    let text = serde_json::to_vec(&part.spec).map_err(|e| e.to_string())?;
    std::fs::write(&file, text).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(file.display().to_string())
}

/// The layers of the part's images that this machine's store lacks (its images adopted
/// by the store once it holds every layer: `nsfleet kube part-images`).
async fn lacking(ctx: &Ctx, part: &FleetPart) -> Result<Vec<String>, String> {
    if part.spec.software.images.is_empty() {
        return Ok(Vec::new());
    }
    let file = write_part(ctx, part)?;
    let out = match pull_credentials(ctx, part).await? {
        Some(text) => {
            let args = ["kube", "part-images", &file, "--credentials-on-stdin"];
            output_fed(ctx, &args, Some(text.into_bytes())).await
        }
        None => output(ctx, &["kube", "part-images", &file]).await,
    };
    // What the store said (a pull refused, say), not the command line that asked it.
    let out = out.map_err(|e| match e.rsplit_once("nsfleet: ") {
        Some((_, said)) => said.to_string(),
        None => e,
    })?;
    let said: serde_json::Value =
        serde_json::from_str(&out).map_err(|e| format!("nsfleet kube part-images: {e}"))?;
    let missing: Vec<String> = (said["missing"].as_array().into_iter().flatten())
        .filter_map(|l| l.as_str().map(str::to_string))
        .collect();
    if missing.is_empty() {
        // Its store has what it was sent: said now, for the next fleet's placement, not
        // at the next heartbeat.
        if let Ok(now) = measure(&ctx.client, &ctx.args).await {
            let _ = announce(&ctx.client, &ctx.args, now).await;
        }
    }
    Ok(missing)
}

/// The text of the Docker config the part's images are pulled with (the data of the
/// Secret its fleet names), read into memory only; None when it names none.
async fn pull_credentials(ctx: &Ctx, part: &FleetPart) -> Result<Option<String>, String> {
    let Some(name) = (part.spec.software.pull.as_ref()).and_then(|p| p.secret.as_ref()) else {
        return Ok(None);
    };
    let namespace = part.namespace().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
    let what = format!("the pull credentials, Secret {namespace}/{name}");
    let secret = secrets
        .get(name)
        .await
        .map_err(|e| format!("{what}: {e}"))?;
    let fleet = &part.spec.fleet;
    if secret.labels().get(PULL_SECRET_LABEL) != Some(fleet) {
        return Err(format!(
            "{what}: not labelled {PULL_SECRET_LABEL}={fleet}, so not read (an agent reads only the credentials made for the fleet)"
        ));
    }
    let data = (secret.data.as_ref()).and_then(|d| d.get(".dockerconfigjson"));
    let text = data.and_then(|b| String::from_utf8(b.0.clone()).ok());
    text.map(Some)
        .ok_or_else(|| format!("{what}: no .dockerconfigjson (expected a Secret of type kubernetes.io/dockerconfigjson)"))
}

/// Brings the part up, or changes the running part to its spec (`how`: `up-part` or
/// `apply-part`, each all or nothing on this machine); its nodes up once done.
async fn run_part(ctx: &Ctx, part: &FleetPart, how: &str) -> Result<u64, String> {
    let file = write_part(ctx, part)?;
    run_nsfleet(ctx, &["kube", how, &file]).await?;
    // Done: its supervisor answers, perhaps not at once (still settling the change).
    let mut last = Local::Unknown;
    for _ in 0..20 {
        last = local(ctx, &part.spec.fleet).await;
        if let Local::Up(n) = last {
            return Ok(n);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err(format!("its supervisor is not up after `{how}` ({last:?})"))
}

/// What this machine runs of a fleet, as `nsfleet status` says it.
#[derive(Debug, PartialEq)]
enum Local {
    /// Its supervisor is up, with this many nodes.
    Up(u64),
    /// No supervisor: none was started, or it ended, and its nodes with it.
    Absent,
    /// Starting, stopping, not answering, or not known.
    Unknown,
}

async fn local(ctx: &Ctx, fleet: &str) -> Local {
    let out = match output(ctx, &["status", fleet, "--json"]).await {
        Ok(out) => out,
        // Its run folder has no record of it: never started here, or gone.
        Err(e) if e.contains("no fleet named") => return Local::Absent,
        Err(_) => return Local::Unknown,
    };
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    let f = &v["fleets"][0];
    match f["state"].as_str() {
        Some("up") => Local::Up(f["node_count"].as_u64().unwrap_or(0)),
        Some("dead") => Local::Absent,
        _ => Local::Unknown,
    }
}

async fn run_nsfleet(ctx: &Ctx, args: &[&str]) -> Result<(), String> {
    output(ctx, args).await.map(|out| eprint!("{out}"))
}

/// This program run with `args`: its standard output, or its standard error's last lines
/// when it fails.
async fn output(ctx: &Ctx, args: &[&str]) -> Result<String, String> {
    output_fed(ctx, args, None).await
}

/// As [`output`], with `input` on the command's standard input.
async fn output_fed(ctx: &Ctx, args: &[&str], input: Option<Vec<u8>>) -> Result<String, String> {
    let exe = ctx.args.exe.clone();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let shown = args.join(" ");
    let out = tokio::task::spawn_blocking(move || {
        nsfleet_sys::output_fed(
            std::process::Command::new(exe).args(&args),
            input.as_deref(),
        )
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("nsfleet {shown}: {e}"))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = err
        .lines()
        .rev()
        .take(8)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    Err(format!("nsfleet {shown}: {}", tail.join("\n")))
}

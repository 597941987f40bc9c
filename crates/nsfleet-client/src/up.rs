//! `nsfleet up`: validate, claim the name, launch the supervisor, show its progress, and
//! return once the fleet is ready (leaving the supervisor running).

use super::{human_bytes, FleetRef};
use crate::errors::Refused;
use anyhow::{anyhow, bail, Context};
use nsfleet::control::UpEvent;
use nsfleet::core::CreateReport;
use nsfleet::rundir::{FleetRecord, ProcId, RunDir};
use nsfleet::sys;
use nsfleet::topology::{self, check_name, Subject, Topology, TopologyError, MAX_FLEET_NAME};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// One worker per CPU, the default of `--workers` (2 when the count is unknown).
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// The default of `--max-unreclaimed`: torn-down namespaces the kernel may still be
/// reclaiming at once.
pub const DEFAULT_MAX_UNRECLAIMED: usize = 4096;

pub struct UpArgs {
    pub file: Option<PathBuf>,
    /// The file's language, when its name does not say.
    pub format: Option<topology::Format>,
    pub name: Option<String>,
    pub workers: usize,
    pub max_unreclaimed: usize,
    pub run_dir: PathBuf,
    pub json: bool,
    /// Validate and check against this machine, then stop: nothing is created.
    pub dry_run: bool,
    /// What nodes that name an image run: the image, or the host's software.
    pub software: topology::Software,
    /// The image store's folder.
    pub images: PathBuf,
    /// Name each containerlab node's namespace after its container (`/run/netns`).
    pub netns_names: bool,
    /// A containerlab file's template variables (`deploy --vars`).
    pub vars: Vec<PathBuf>,
    /// A process whose end takes the fleet down (`--owner`).
    pub owner: Option<libc::pid_t>,
    /// Return once the fleet is ready by this condition (`--wait`).
    pub wait: Option<crate::ready::Wait>,
    /// Run every node as the host's root, unconfined (`--privileged`).
    pub privileged: bool,
}

impl UpArgs {
    /// An `up` of nothing yet, everything at its default: the machine's CPUs, the host's
    /// software, nsfleet's image store, no owner. For callers other than the command line
    /// (a containerlab stand-in, a Kubernetes agent's part).
    pub fn defaults(run_dir: PathBuf) -> UpArgs {
        UpArgs {
            file: None,
            format: None,
            name: None,
            workers: default_workers(),
            max_unreclaimed: DEFAULT_MAX_UNRECLAIMED,
            run_dir,
            json: false,
            dry_run: false,
            software: topology::Software::Host,
            images: nsfleet_image::Store::default_root(),
            netns_names: false,
            vars: Vec::new(),
            owner: None,
            wait: None,
            privileged: false,
        }
    }
}

pub fn up(a: UpArgs) -> anyhow::Result<()> {
    let valid = validate(&a)?;
    start(a, valid)
}

/// A topology read once, checked against this kernel once, and how long that took.
pub struct Validated {
    pub topo: Topology,
    took: Duration,
    /// The image store's hold on the images the nodes run, handed to the supervisor.
    hold: Option<nsfleet_image::Hold>,
    /// A user's fleet's forwarder, told the supervisor once there is one.
    forwarder: Option<crate::forward::Forwarder>,
    /// A user's fleet's management network gets outbound traffic through pasta, which
    /// the forwarder runs (see nsfleet-subsys's `outbound`).
    outbound: bool,
}

impl Validated {
    /// A topology checked already (a machine's part of a fleet on Kubernetes).
    pub fn of(topo: Topology) -> Validated {
        Validated {
            topo,
            took: Duration::ZERO,
            hold: None,
            forwarder: None,
            outbound: false,
        }
    }

    /// With the image store's hold on the images its nodes run (from
    /// [`crate::fleet_images::find`]), handed to the supervisor.
    pub fn holding(self, hold: Option<nsfleet_image::Hold>) -> Validated {
        Validated { hold, ..self }
    }
}

/// The file (or the built-in default) read and checked against this kernel, its
/// warnings said, `--name` applied: everything of `up` that creates nothing.
pub fn validate(a: &UpArgs) -> anyhow::Result<Validated> {
    let started = Instant::now();
    let draft = match &a.file {
        Some(f) => topology::read_file_with(f, a.format, a.software, &a.vars)?,
        None => topology::read(topology::DEFAULT_FLEET_FILE, topology::DEFAULT_FLEET)?,
    };
    for w in draft.warnings() {
        eprintln!("nsfleet: warning: {w}");
    }
    if a.privileged {
        eprintln!("nsfleet: warning: --privileged: every node runs as the host's root with every capability, not confined to its own namespaces (see docs/confinement.md)");
    }
    // A user's fleet is probed where it will live: in its own user namespace. Its ports
    // are bound before, in the host's, where its forwarder stays.
    let mut forwarder = None;
    let users = !sys::is_host_root();
    let mut pasta = Err(String::new());
    if users {
        let ports = draft.published_ports();
        forwarder = Some(crate::forward::Forwarder::start(&file_name(a), &ports)?);
        pasta = crate::user::pasta_runs();
        users_fleet(a)?;
    }
    let mut topo = nsfleet::subsys::probe::validate(draft)?;
    if users {
        crate::user::check_switches(&topo)?;
    }
    let outbound = users && topo.has_management_network();
    if let (true, Err(why)) = (outbound, &pasta) {
        eprintln!("nsfleet: warning: the management network ends in the fleet's own namespace: its nodes reach each other and its gateway, and nothing beyond: {why} (see docs/rootless.md)");
    }
    let outbound = outbound && pasta.is_ok();
    if let Some(n) = &a.name {
        check_name("fleet name", n, MAX_FLEET_NAME).map_err(|m| anyhow!("--name: {m}"))?;
        topo.name = n.clone();
    }
    let hold = crate::fleet_images::find(&mut topo, &file_name(a), &a.images)?;
    Ok(Validated {
        topo,
        took: started.elapsed(),
        hold,
        forwarder,
        outbound,
    })
}

/// The rest of `up` for a topology [`validate`] gave: the machine's limits, the name
/// claimed, the supervisor launched and followed until the fleet is ready.
pub fn start(a: UpArgs, valid: Validated) -> anyhow::Result<()> {
    let Validated {
        topo,
        took: validate,
        hold,
        mut forwarder,
        outbound,
    } = valid;
    // Not root yet (a topology checked elsewhere, `Validated::of`): a user's fleet's
    // namespace, made now. After `validate`, a user's `up` is its root already.
    if !sys::is_root() {
        users_fleet(&a)?;
    }
    preflight(&topo, &a)?;
    crate::ports::check_free(&file_name(&a), &topo)?;
    if a.dry_run {
        let links: usize = topo.wiring.iter().map(|w| w.ifaces.len()).sum();
        println!(
            "fleet {:?} is valid: {} nodes, {links} interfaces; nothing was created (--dry-run)",
            topo.name,
            topo.node_count()
        );
        return Ok(());
    }
    let rd = RunDir::new(&a.run_dir);

    // From the claim until the supervisor is recorded, a Ctrl-C would leave a folder that
    // nobody owns: hold it until the supervisor exists to clean up after us.
    let held = sys::SignalsHeld::new(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP])?;
    let mut record = rd.claim(&topo.name)?;
    // From here on a failure must give the name back, and what a supervisor that died
    // made that outlives it (its cgroup, journalled in the folder) goes first.
    let host_dialer = forwarder.as_mut().and_then(|f| f.take_host_end());
    let kept = Kept { hold, host_dialer };
    let report = launch(&rd, &mut record, &topo, &a, validate, held, kept).inspect_err(|_| {
        let _ = nsfleet::subsys::world::cgroups::clean_journal(&rd.cgroup_journal(&topo.name));
        let _ = rd.remove(&topo.name, true);
    })?;
    let fleet = FleetRef {
        name: topo.name.clone(),
        run_dir: a.run_dir.clone(),
    };
    // A user's ports, from now on: the supervisor is up and recorded.
    if let (Some(f), Some(sup)) = (forwarder, record.supervisor) {
        f.serve(sup.pid, &fleet, outbound)?;
    }
    match a.wait {
        Some(w) => wait_ready(&fleet, w, report),
        None => {
            if let Some(v) = report {
                println!("{v}");
            }
            Ok(())
        }
    }
}

/// A user's `up`: what needs the host's root refused, then this process made root of the
/// fleet's own user namespace (see `crate::user`), where the rest of `up` runs as root's.
fn users_fleet(a: &UpArgs) -> anyhow::Result<()> {
    if a.netns_names {
        bail!("--netns-names names the nodes' namespaces in /run/netns, the host's, which only root may write; a user reaches a node with `nsfleet exec` (docs/rootless.md)");
    }
    if a.privileged {
        bail!("--privileged runs nodes as the host's root, which a user is not; without it every node is confined to the fleet (docs/rootless.md)");
    }
    crate::user::become_root_of_new_fleet()
}

/// `--wait`: the fleet ready, or taken down when a node failed to start, or left up
/// (said so) when the bound came first. With `--json` (`report`, the fleet's object),
/// one object: the fleet's, its `ready` what the wait found (null when it was not met
/// and the fleet is left up; nothing when the fleet was taken down).
fn wait_ready(
    fleet: &FleetRef,
    w: crate::ready::Wait,
    report: Option<serde_json::Value>,
) -> anyhow::Result<()> {
    use crate::ready::NotReady;
    let name = &fleet.name;
    let outcome = match crate::ready::wait(fleet, w, report.is_some()) {
        Ok(outcome) => outcome,
        Err(e) => {
            // The wait itself failed (the fleet went, a lost connection): the fleet's
            // object still, for what may be up.
            if let Some(mut v) = report {
                v["ready"] = serde_json::Value::Null;
                println!("{v}");
            }
            return Err(e);
        }
    };
    let ready = match &outcome {
        Ok(ready) => crate::ready::ready_json(name, ready),
        Err(_) => serde_json::Value::Null,
    };
    match (report, &outcome) {
        (Some(_), Err(NotReady::Failed(_))) => {}
        (Some(mut v), _) => {
            v["ready"] = ready;
            println!("{v}");
        }
        (None, Ok(r)) => crate::ready::say_ready(name, r, false),
        (None, Err(_)) => {}
    }
    match outcome {
        Ok(_) => Ok(()),
        Err(NotReady::Failed(m)) => {
            let gone = match crate::down::down_quietly(fleet) {
                Ok(()) => "the fleet was taken down: nothing of it is left".to_string(),
                Err(e) => format!("taking the fleet down failed too: {e:#}"),
            };
            bail!("{}\n{gone}", m.join("\n"))
        }
        Err(NotReady::Unmet(m)) => {
            bail!("{m}\nthe fleet is left up to look into: `nsfleet down {name}` takes it down")
        }
        // `up` never asks to stop waiting.
        Err(NotReady::Stopped) => bail!("fleet {name:?}: the wait was stopped"),
    }
}

/// What the machine would refuse half-way is refused now, with what to change; notes go
/// to stderr. Refusals of what the file writes somewhere (a host link's name or subnet)
/// are errors of the file at that place; the others are about the machine.
fn preflight(topo: &Topology, a: &UpArgs) -> anyhow::Result<()> {
    let what = format!(
        "fleet {:?} was not started (nothing was created)",
        topo.name
    );
    let mut refused = Refused {
        what,
        placed: Vec::new(),
        unplaced: Vec::new(),
    };
    let file = file_name(a).display().to_string();
    for f in nsfleet::preflight::check(topo, !a.privileged) {
        match f {
            nsfleet::preflight::Finding::Refuse(Subject { text, at: Some(at) }) => {
                refused.placed.push(TopologyError::new(&file, at, text))
            }
            nsfleet::preflight::Finding::Refuse(m) => refused.unplaced.push(m.text),
            nsfleet::preflight::Finding::Note(m) => eprintln!("nsfleet: preflight: {m}"),
        }
    }
    if refused.placed.is_empty() && refused.unplaced.is_empty() {
        return Ok(());
    }
    Err(refused.into())
}

/// The topology file as errors name it.
fn file_name(a: &UpArgs) -> PathBuf {
    a.file
        .clone()
        .unwrap_or(topology::DEFAULT_FLEET_FILE.into())
}

/// What the supervisor is handed to keep: the image store's hold on the fleet's images,
/// and a user's fleet's line to its forwarder (see `crate::forward`).
struct Kept {
    hold: Option<nsfleet_image::Hold>,
    host_dialer: Option<std::os::fd::OwnedFd>,
}

fn launch(
    rd: &RunDir,
    record: &mut FleetRecord,
    topo: &Topology,
    a: &UpArgs,
    validate: Duration,
    held: sys::SignalsHeld,
    kept: Kept,
) -> anyhow::Result<Option<serde_json::Value>> {
    let log = std::fs::File::create(rd.supervisor_log(&topo.name))?;
    // Opened here, in the caller's PID namespace: the supervisor has one of its own.
    let owner = (a.owner)
        .map(|pid| sys::pidfd_open(pid).with_context(|| format!("--owner {pid}: no such process")))
        .transpose()?;
    let args = nsfleet::supervisor::SupervisorArgs {
        owner,
        run_dir: rd.root().to_path_buf(),
        name: topo.name.clone(),
        workers: a.workers,
        max_unreclaimed: a.max_unreclaimed,
        holding: None,
        // The fleet's images stay held for as long as its supervisor lives.
        keep: kept.hold.map(nsfleet_image::Hold::into_fd),
        host_dialer: kept.host_dialer,
        netns_names: a.netns_names,
        privileged: a.privileged,
    };
    let sup = nsfleet::supervisor::launch(args, log.into()).context("starting the supervisor")?;
    let pid = sup.pid;
    record.supervisor = ProcId::of(pid);
    rd.write_record(record)?;
    // One write: serde_json writes piecemeal, a syscall per piece on an unbuffered pipe.
    let mut topology = sup.topology;
    topology.write_all(&serde_json::to_vec(topo)?)?;
    drop(topology);
    // The supervisor has the fleet now; a Ctrl-C from here on cancels it cleanly.
    drop(held);

    let bar = Progress::new(topo.node_count());
    for line in BufReader::new(sup.events).lines() {
        let line = line?;
        match serde_json::from_str::<UpEvent>(&line) {
            Ok(UpEvent::Progress { phase, done, total }) => bar.set(&phase, done, total),
            Ok(UpEvent::Ready { report, pid }) => {
                bar.finish();
                return Ok(print_ready(topo, &report, validate, pid, a.json));
            }
            Ok(UpEvent::Failed { message, at }) => {
                bar.finish();
                let _ = sys::wait_child(pid);
                let failed = anyhow::Error::new(Subject { text: message, at });
                return Err(crate::errors::in_file(failed, &file_name(a)));
            }
            Err(_) => {}
        }
    }
    bar.finish();
    let status = sys::wait_child(pid).unwrap_or(-1);
    let log = std::fs::read_to_string(rd.supervisor_log(&topo.name)).unwrap_or_default();
    let last = log.lines().last().unwrap_or("no log output");
    bail!("the supervisor died while starting (wait status {status}): {last}")
}

/// Says the fleet is up; with `json`, returns its object instead, for the caller to
/// print (with what `--wait` found, if it waits).
fn print_ready(
    topo: &Topology,
    r: &CreateReport,
    validate: Duration,
    pid: i32,
    json: bool,
) -> Option<serde_json::Value> {
    let build: Duration = r.phases.iter().map(|(_, d)| *d).sum();
    let rate = r.nodes as f64 / build.as_secs_f64().max(1e-9);
    if json {
        let v = serde_json::json!({
            "name": topo.name, "pid": pid, "nodes": r.nodes, "nodes_per_sec": rate,
            "validate_ms": validate.as_secs_f64() * 1e3,
            "phases_ms": r.phases.iter().map(|(p, d)| (p.name(), d.as_secs_f64() * 1e3)).collect::<std::collections::BTreeMap<_, _>>(),
            "kernel_mem_bytes": r.kernel_bytes,
            "create_latency_us": r.create_latency_us,
        });
        return Some(v);
    }
    let name = &topo.name;
    let took = if build.as_secs() >= 1 {
        format!("{:.2} s", build.as_secs_f64())
    } else {
        format!("{:.1} ms", build.as_secs_f64() * 1e3)
    };
    println!(
        "fleet {name:?} is up: {} nodes in {took} ({rate:.0} nodes/s)",
        r.nodes
    );

    println!(
        "  {:<10} {:>9.1} ms",
        "validate",
        validate.as_secs_f64() * 1e3
    );
    for (phase, d) in &r.phases {
        let label = phase.name();
        println!("  {label:<10} {:>9.1} ms", d.as_secs_f64() * 1e3);
    }
    if let (Some(p50), Some(p99)) = (r.create_latency_us.get(50), r.create_latency_us.get(99)) {
        println!(
            "  one node's creation on its worker: median {:.2} ms, 99th percentile {:.2} ms",
            p50 / 1e3,
            p99 / 1e3
        );
    }
    println!(
        "  kernel memory ~{} ({} per node); supervisor pid {pid}",
        human_bytes(r.kernel_bytes),
        human_bytes(r.kernel_bytes / r.nodes.max(1) as i64)
    );
    let first = topo.nodes().next().map(|n| n.name).unwrap_or_default();
    let clab = topo.groups.iter().any(|g| g.config.clab.is_some());
    let (status, down) = if clab {
        ("inspect --name", "destroy --name")
    } else {
        ("status", "down")
    };
    println!("  next: nsfleet {status} {name} | nsfleet exec {name} {first} -- ip addr | nsfleet {down} {name}");
    None
}

/// A progress bar on a terminal; nothing when stderr is piped.
struct Progress(indicatif::ProgressBar);

impl Progress {
    fn new(total: u64) -> Self {
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(total),
            indicatif::ProgressDrawTarget::stderr(),
        );
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{prefix:>9} [{bar:30}] {pos}/{len} nodes {rate}",
            )
            .expect("valid template")
            .with_key(
                "rate",
                |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = write!(w, "{:.0}/s", s.per_sec());
                },
            )
            .progress_chars("=> "),
        );
        Progress(bar)
    }

    fn set(&self, phase: &str, done: usize, total: usize) {
        self.0.set_prefix(phase.to_string());
        self.0.set_length(total as u64);
        self.0.set_position(done as u64);
    }

    fn finish(&self) {
        self.0.finish_and_clear();
    }
}

//! The supervisor: the one process that owns a fleet.
//!
//! [`launch`] starts it, forked from the caller (`nsfleet up`, or any program that embeds
//! the engine) and never exec'd, as PID 1 of a new PID namespace, named `nsfleet-sup`. It
//! holds every node's namespace by an open descriptor only (no bind mounts), so when it
//! dies, however it dies, the kernel drops every namespace and, because it is the PID
//! namespace's init, kills every process of the fleet. Nothing of the fleet can outlive
//! it but its run folder, which `nsfleet clean` removes.
//!
//! It serves the control socket ([`crate::control`]; each request's handler is a file of
//! `requests/`), and ends on `down`, on SIGTERM, SIGINT or SIGHUP, or when the `up` that
//! launched it goes away before the fleet is ready.
//!
//! This crate never parses arguments and never prints for people: its output is the
//! control protocol's JSON and its log.

pub mod control;
pub mod ids;
pub mod preflight;
pub mod ready;
pub mod rundir;
pub mod traffic;
pub mod watch;

mod requests;

use crate::control::{Reply, UpEvent};
use crate::rundir::RunDir;
use crate::traffic::Traffic;
use anyhow::Context;
use crossbeam_channel::{Receiver, Sender};
use nsfleet_core::{Fleet, FleetOptions, Holding, Phase};
use nsfleet_locks::{order, Mutex};
use nsfleet_subsys::{register_defaults, Defaults};
use nsfleet_sys as sys;
use nsfleet_topology::Topology;
use std::ffi::CStr;
use std::io::{Read, Write};
use std::ops::ControlFlow;

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct SupervisorArgs {
    pub run_dir: PathBuf,
    pub name: String,
    pub workers: usize,
    pub max_unreclaimed: usize,
    /// Who holds the nodes' namespaces; `None`: as [`preflight::holding`] decides from
    /// this machine's limits and `NSFLEET_HOLDER_CAP`.
    pub holding: Option<Holding>,
    /// A descriptor the supervisor keeps open, untouched, for as long as it lives: the
    /// image store's hold on the images its nodes run (a lock the kernel lets go of when
    /// the supervisor ends, however it ends).
    pub keep: Option<OwnedFd>,
    /// Name each containerlab node's namespace after its container, below /run/netns.
    pub netns_names: bool,
    /// Run every node as the host's root, with every capability, as nsfleet did before
    /// nodes were confined (`up --privileged`): no user namespace, no id range.
    pub privileged: bool,
    /// A pidfd of the process whose end ends the fleet (`up --owner`), as a `down` would.
    pub owner: Option<OwnedFd>,
    /// A user's fleet: its end of the line to the forwarder that stayed in the host's
    /// namespaces, which makes connections there for it (nsfleet-subsys's `host_dial`).
    pub host_dialer: Option<OwnedFd>,
}

/// A supervisor [`launch`] started: its pid and its two pipes.
pub struct Launched {
    /// Its pid as the caller sees it. It is the caller's child: reap it (waitpid) once it
    /// is gone, or leave that to the caller's own exit.
    pub pid: libc::pid_t,
    /// Its stdin: write the topology as JSON (one write), then close it.
    pub topology: std::io::PipeWriter,
    /// Its stdout: [`UpEvent`]s, one JSON line each, until end-of-file (once the fleet is
    /// ready or has failed).
    pub events: std::io::PipeReader,
}

/// The name of a supervisor process (`comm`), as `ps -e` and `pgrep -x` show it: its
/// command line is that of the program that launched it.
pub const SUPERVISOR_NAME: &CStr = c"nsfleet-sup";

/// Starts a fleet's supervisor: a child of the caller, forked, not exec'd (so any program
/// that embeds the engine can run it, not only the `nsfleet` binary), PID 1 of a new PID
/// namespace in a session of its own, named [`SUPERVISOR_NAME`], its stderr `log`. It then
/// waits for the topology on [`Launched::topology`], builds the fleet, reports on
/// [`Launched::events`] and serves the control socket under `args.run_dir` until it is
/// told to end (see the module). Nothing of the fleet outlives it. The fleet's folder under
/// `args.run_dir` is the caller's to claim first ([`RunDir::claim`]), as `nsfleet up` does:
/// the supervisor removes it as it ends only if it holds nsfleet's record.
///
/// What an embedder must know, since the child is a copy of the caller (see
/// [`sys::fork_helper`]):
/// - It is glibc's fork: the child may allocate; it runs the supervisor on the forking
///   thread alone and never returns into the caller's stack.
/// - The child touches none of the caller's data or locks, with these exceptions, which
///   only matter if another thread holds them at the instant of the fork: std's
///   `Stdout`/`Stderr`/`Stdin` (the supervisor writes its events and log and reads the
///   topology through the descriptors, never through those; only a panic message goes
///   through std's stderr), std's environment lock (`NSFLEET_*` variables are read: do
///   not `set_var` concurrently), and parking_lot's global table of parked threads.
/// - It keeps only its three standard descriptors; every other one is closed in it. It
///   keeps the caller's signal mask and ignored signals (as exec would; SIGPIPE is set to
///   ignored, which it needs), not the caller's handlers.
/// - It keeps none of the caller's environment but `PATH`, `TMPDIR`, `RUST_BACKTRACE`
///   and `NSFLEET_*` (and /proc/PID/environ shows none of it), and works from `/`.
/// - The caller's memory is shared copy-on-write: the child keeps alive what the caller
///   changes afterwards, and files or sockets the caller has mapped; a caller with big
///   or such mappings should launch early, or mark them MADV_DONTFORK.
pub fn launch(mut args: SupervisorArgs, log: OwnedFd) -> std::io::Result<Launched> {
    let (stdin_r, topology) = std::io::pipe()?;
    let (events, stdout_w) = std::io::pipe()?;
    // Kept after the standard streams in the supervisor; ours is closed once it is forked.
    let (keep, owner, host) = (args.keep.take(), args.owner.take(), args.host_dialer.take());
    let mut fds = vec![stdin_r.as_fd(), stdout_w.as_fd(), log.as_fd()];
    // Each kept after the standard streams, at the place it gets (none if there is none).
    let mut keep_at = None;
    let mut owner_at = None;
    let mut host_at = None;
    for (fd, at) in [
        (&keep, &mut keep_at),
        (&owner, &mut owner_at),
        (&host, &mut host_at),
    ] {
        if let Some(fd) = fd {
            *at = Some(fds.len());
            fds.push(fd.as_fd());
        }
    }
    let how = sys::HelperStart {
        name: SUPERVISOR_NAME,
        fds: &fds,
        new_session: true,
        unblock_signals: false,
    };
    let cmdline = format!("nsfleet-sup {}", args.name);
    let pid = sys::fork_pid_ns_init(&how, move |fds| {
        let mut args = args;
        // Ours again, at the place `how` gave it (none if there was none): `apply` may
        // replace it.
        args.keep = keep_at.and_then(|i| fds.take(i));
        args.owner = owner_at.and_then(|i| fds.take(i));
        args.host_dialer = host_at.and_then(|i| fds.take(i));
        // `ps` shows what we are, not the command that forked us.
        let _ = sys::set_cmdline(&cmdline);
        // Nothing of the shell that ran `up` reaches the fleet, whose nodes' inits are
        // forked from us: not its environment, not its working directory.
        let _ = sys::forget_environment(supervisor_needs);
        let _ = std::env::set_current_dir("/");
        // A reader of our events or of a control reply that goes away must cost an EPIPE,
        // not the fleet.
        sys::ignore_sigpipe();
        // What `up` had freed before it forked us (clap's commands, the file's text)
        // goes before we fork an init per node (measured: 3.9 MB of 16.4 at 100 nodes).
        sys::release_free_heap();
        // Its error is logged and told to the caller already.
        run(args).unwrap_or(1)
    })?;
    Ok(Launched {
        pid,
        topology,
        events,
    })
}

/// The variables of the caller's environment a supervisor keeps: where programs are
/// (`PATH`, for the host's software and `ovs-vsctl`), where temporary files go, and
/// nsfleet's own (`NSFLEET_FAULT`'s injected faults, the tests' `NSFLEET_HOLDER_CAP`).
fn supervisor_needs(name: &std::ffi::OsStr) -> bool {
    let name = name.to_string_lossy();
    matches!(&*name, "PATH" | "TMPDIR" | "RUST_BACKTRACE") || name.starts_with("NSFLEET_")
}

const SIGNALS: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGCHLD];

/// A request to end the fleet: from a `down`, answered on its own connection, or from a
/// signal, answered to nobody.
struct Shutdown {
    asker: Option<Asker>,
}

struct Asker {
    conn: UnixStream,
    /// Whether it waits for reclamation, or only for the namespaces to be dropped.
    wait: bool,
}

struct Supervisor {
    name: String,
    run_dir: RunDir,
    fleet: Fleet,
    defaults: Defaults,
    /// Protects the fleet's state as `status` shows it ("starting", "up", ...). A leaf.
    state: Mutex<&'static str>,
    /// Protects the kernel memory the creation cost, set once it is done. A leaf.
    kernel_bytes: Mutex<i64>,
    shutdown: Sender<Shutdown>,
    /// Protects the traffic generator and serialises its control, as pktgen's
    /// pktgen_thread_lock does. Taken after `changes` (nsfleet-locks' `order`).
    traffic: Mutex<Traffic>,
    /// Who watches the fleet (`nsfleet events`); `links` is taken after `traffic`, `subs`
    /// is a leaf (nsfleet-locks' `order`).
    watchers: Arc<watch::Watchers>,
    /// Serialises changes to the live fleet (`apply`, `impair`, `link`, `node`): each is
    /// all or nothing, and no two interleave on a node. `status` takes it to read between
    /// changes, and `events` to open its sockets in the nodes between changes; `exec` does
    /// not. The outermost lock of the process (nsfleet-locks' `order`).
    changes: Mutex<()>,
    /// Protects the image store's hold on the images the nodes run ([`SupervisorArgs::keep`]),
    /// which `apply` replaces by its own. A leaf.
    images: Mutex<Option<OwnedFd>>,
    /// When the supervisor started: what `wait` counts its `since_up_s` from.
    born: std::time::Instant,
    /// Waits under way (`ready`) and pings (`probe`): their sockets in the nodes hold
    /// namespaces, so the teardown lets them end first.
    waits: std::sync::atomic::AtomicUsize,
    /// The ids of its confined nodes (`status` says them), held by the lease `supervise`
    /// keeps.
    ids: Option<nsfleet_sys::userns::IdRange>,
}

/// Runs the supervisor, in the process [`launch`] forked; the topology arrives as JSON on
/// stdin, events go to stdout, the log to stderr, each through its descriptor.
fn run(args: SupervisorArgs) -> anyhow::Result<i32> {
    // Blocked before any thread exists, so that every thread inherits the mask and only
    // the signal thread ever receives them.
    let _signals = sys::SignalsHeld::new(&SIGNALS)?;
    let (run_dir, name) = (RunDir::new(&args.run_dir), args.name.clone());
    log(format_args!("pid {} for fleet {name:?}", sys::host_pid()));
    supervise(args).inspect_err(|e| {
        log(format_args!("{e:#}"));
        // The log goes with the folder below: tell `up` directly, if it still listens.
        if let Ok(out) = sys::dup_stdio(1) {
            let _ = control::write_line(out, &UpEvent::failed(e));
        }

        // Whatever failed, the folder is ours and nobody else may be left to remove it
        // (the `up` that launched us may be gone).
        let _ = run_dir.remove(&name, true);
    })
}

/// A line of the log (stderr), in one write, through the descriptor: std's `Stderr` lock
/// may be held forever in a forked process (see [`launch`]).
fn log(line: std::fmt::Arguments) {
    if let Ok(mut err) = sys::dup_stdio(2) {
        let _ = err.write_all(format!("nsfleet supervisor: {line}\n").as_bytes());
    }
}

/// A user's fleet's own network namespace (nsfleet-client's `user` makes it) is the
/// fleet's host, and gets the host's loopback: what the fleet publishes is reached there
/// (`dial`), as the host's own connections reach root's.
fn own_loopback_up() -> std::io::Result<()> {
    use nsfleet_netlink::{rtnl, Batch, NlSocket};
    const LOOPBACK_IFINDEX: i32 = 1;
    let mut sock = NlSocket::open()?;
    let mut b = Batch::new();
    rtnl::set_link(&mut b, sock.next_seq(), LOOPBACK_IFINDEX, true, None);
    sock.execute_all(&b).map_err(std::io::Error::other)
}

fn supervise(mut args: SupervisorArgs) -> anyhow::Result<i32> {
    let born = std::time::Instant::now();
    let mut input = String::new();
    sys::dup_stdio(0)?.read_to_string(&mut input)?;
    let topo: Topology =
        serde_json::from_str(&input).context("reading the topology from `nsfleet up`")?;
    let run_dir = RunDir::new(&args.run_dir);
    // What it holds, and a socket per node for a watch of their links (`nsfleet events`,
    // a live page), which only the first watcher opens: 10,000 nodes watched needed 20,019
    // descriptors. Where the limit may not be raised that far (a user's hard limit), as
    // far as it goes: the preflight checked what the fleet itself holds.
    let watched = topo.node_count();
    sys::raise_nofile(crate::preflight::descriptors_needed(&topo) + watched)
        .context("raising RLIMIT_NOFILE")?;
    let log_dir = run_dir.log_dir(&args.name);
    std::fs::create_dir_all(&log_dir)?;
    // Held until the supervisor ends: the rule that lets a user's nodes out (none if
    // the fleet has no management network, or the kernel refused it).
    let mut _outbound = None;
    if !sys::userns::in_host_namespace()? {
        own_loopback_up().context("bringing up the fleet's own loopback")?;
        if topo.has_management_network() {
            // Said, not fatal: the fleet works without the world, as `up` warns when
            // pasta cannot run.
            match nsfleet_subsys::outbound::masquerade() {
                Ok(sock) => _outbound = Some(sock),
                Err(e) => eprintln!("no outbound traffic: {e:#}"),
            }
        }
    }
    // Held until the supervisor ends, and with it every process of the fleet.
    let lease = match args.privileged {
        true => None,
        false => Some(ids::take(&args.name).context("taking the fleet's id range")?),
    };
    let fleet = Fleet::new(FleetOptions {
        holding: (args.holding).unwrap_or_else(|| crate::preflight::holding(&topo)),
        workers: args.workers,
        max_unreclaimed: args.max_unreclaimed,
        log_dir,
        confine: lease.as_ref().map(|l| l.ids),
    })?;
    let watchers = Arc::new(watch::Watchers::default());
    let to = watchers.clone();
    let events: nsfleet_subsys::Events = Arc::new(move |e| to.publish(&e));
    let journal = run_dir.host_journal(&args.name);
    let cgroups = run_dir.cgroup_journal(&args.name);
    let host = (args.host_dialer.take())
        .map(nsfleet_subsys::host_dial::HostDialer::new)
        .transpose()?;
    let defaults = register_defaults(&fleet, &args.name, journal, cgroups, Some(events), host)?;
    if args.netns_names {
        let journal = run_dir.netns_journal(&args.name);
        fleet.register(nsfleet_subsys::netns_names::NetnsNames::new(journal)?)?;
    }
    let (shutdown, shutdown_rx) = crossbeam_channel::unbounded();
    let sup = Arc::new(Supervisor {
        name: args.name.clone(),
        run_dir,
        fleet,
        defaults,
        state: Mutex::new(order::STATE, "starting"),
        kernel_bytes: Mutex::new(order::KERNEL_BYTES, 0),
        shutdown,
        traffic: Mutex::new(order::TRAFFIC, Traffic::default()),
        watchers,
        changes: Mutex::new(order::CHANGES, ()),
        images: Mutex::new(order::IMAGES_HELD, args.keep),
        born,
        waits: std::sync::atomic::AtomicUsize::new(0),
        ids: lease.as_ref().map(|l| l.ids),
    });
    serve(sup.clone())?;
    signals(sup.shutdown.clone());
    if let Some(owner) = args.owner {
        ended_with(owner, sup.shutdown.clone());
    }
    let mut events = Events::stdout()?;
    let result = sup.fleet.create(&topo, &mut |phase, done, total| {
        events.progress(phase, done, total)
    });
    match result {
        Err(e) => {
            // Rolled back already; the folder goes too, even if `up` is no longer there
            // to remove it.
            sup.fleet.shutdown();
            wait_host_ends_gone(&sup, Duration::from_secs(2));
            remove_cgroups(&sup);
            let _ = sup.run_dir.remove(&sup.name, true);
            events.send(&UpEvent::failed(&e));
            return Ok(1);
        }

        Ok(report) => {
            *sup.kernel_bytes.lock() = report.kernel_bytes;
            *sup.state.lock() = "up";
            let pid = sys::host_pid();
            events.send(&UpEvent::Ready { report, pid });
            events.close();
        }
    }
    let first = if events.broken {
        // The `up` that launched us is gone before seeing the fleet ready: nobody will
        // ever know this fleet exists, so it must not stay.
        Shutdown { asker: None }
    } else {
        shutdown_rx.recv().expect("the supervisor holds a sender")
    };
    teardown(&sup, first, &shutdown_rx);
    Ok(0)
}

fn teardown(sup: &Supervisor, first: Shutdown, more: &Receiver<Shutdown>) {
    *sup.state.lock() = "stopping";
    let started = Instant::now();
    // A change under way finishes first; those that come later see "stopping".
    let change = sup.changes.lock();
    // The generator's threads and sinks, and the watchers' link sockets, hold
    // namespaces: they go first.
    sup.watchers.close();
    sup.traffic.lock().shutdown(&sup.fleet);
    sup.waits_ended(Duration::from_secs(3));
    let ms = |t: Option<Instant>| t.map_or(0.0, |t| (t - started).as_secs_f64() * 1e3);
    let ticket = sup.fleet.destroy_all();
    drop(change);
    let dropped = ticket.wait_dropped();
    let dropped = Reply::Dropped {
        nodes: dropped.total,
        teardown_ms: ms(dropped.dropped_at),
    };
    // Every asker hears "dropped", even one that came late; only those who wait stay.
    let mut waiting = Vec::new();
    let mut answer_dropped = |askers: &mut dyn Iterator<Item = Asker>| {
        for a in askers {
            if control::write_line(&a.conn, &dropped).is_ok() && a.wait {
                waiting.push(a);
            }
        }
    };
    answer_dropped(
        &mut first
            .asker
            .into_iter()
            .chain(more.try_iter().filter_map(|s| s.asker)),
    );
    let settled = ticket.wait_settled();
    // The hub is a namespace of the fleet too: let it go before saying "reclaimed".
    sup.fleet.shutdown();
    // A held node keeps its host end: no use waiting long for it.
    let bound = if settled.held.is_empty() { 2000 } else { 200 };
    wait_host_ends_gone(sup, Duration::from_millis(bound));
    remove_cgroups(sup);
    // Every node's root went with its mount namespace: the images are free for `prune`
    // once the asker hears "reclaimed", not only once this process has exited (a `prune`
    // right after `down` found them held, under the suite's load). A node held by
    // another process keeps them until we exit, as before.
    if settled.held.is_empty() {
        sup.images.lock().take();
    }
    answer_dropped(&mut more.try_iter().filter_map(|s| s.asker));
    if let Err(e) = sup.run_dir.remove(&sup.name, true) {
        log(format_args!("{e:#}"));
    }
    let reclaimed = Reply::Reclaimed {
        nodes: settled.total,
        reclaimed: settled.reclaimed,
        held: settled.held,
        total_ms: ms(settled.settled_at),
        unconfirmed: settled.unconfirmed,
    };
    // Written here, before we exit: the kernel delivers it even after the process ends.
    for a in &waiting {
        let _ = control::write_line(&a.conn, &reclaimed);
    }
}

/// Removes the fleet's cgroup, its nodes' all gone with their worlds: what its journal
/// names, as `clean` would.
fn remove_cgroups(sup: &Supervisor) {
    let journal = sup.run_dir.cgroup_journal(&sup.name);
    if let Err(e) = nsfleet_subsys::world::cgroups::clean_journal(&journal) {
        log(format_args!("{e:#}"));
    }
}

/// Waits, `bound` at most, until the fleet's host interfaces are gone, so that `down`
/// (or a failed `up`) returns with none of them left: the kernel deletes a reclaimed
/// node's host end a moment after it says the node is reclaimed (see
/// `host::wait_gone`). Those that outlive the bound (their node held alive elsewhere)
/// are logged; they go with their node.
fn wait_host_ends_gone(sup: &Supervisor, bound: Duration) {
    let journal = sup.run_dir.host_journal(&sup.name);
    match nsfleet_subsys::link::host::wait_gone(&journal, bound) {
        Ok(left) if !left.is_empty() => log(format_args!(
            "host interfaces {} outlived the bound of {bound:?} after their nodes; they go when their nodes do",
            left.join(", ")
        )),
        Ok(_) => {}
        Err(e) => log(format_args!("looking for the fleet's host interfaces: {e:#}")),
    }
}

/// Writes [`UpEvent`]s to the `up` that launched us, at most ten progress lines a second,
/// each in one write through a descriptor of our own for stdout (not std's `Stdout`, see
/// [`launch`]).
struct Events {
    out: Option<std::fs::File>,
    last: Instant,
    broken: bool,
}

impl Events {
    fn stdout() -> std::io::Result<Self> {
        Ok(Events {
            out: Some(sys::dup_stdio(1)?),
            last: Instant::now(),
            broken: false,
        })
    }

    /// Reports progress; `Break` once the `up` that launched us is gone (Ctrl-C): nobody
    /// will ever know this fleet exists, so its creation is cancelled and rolled back.
    fn progress(&mut self, phase: Phase, done: usize, total: usize) -> ControlFlow<()> {
        if done == total || self.last.elapsed() >= Duration::from_millis(100) {
            self.last = Instant::now();
            let phase = phase.name().to_string();
            self.send(&UpEvent::Progress { phase, done, total });
        }
        if self.broken {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }

    fn send(&mut self, e: &UpEvent) {
        if let Some(out) = &self.out {
            if control::write_line(out, e).is_err() {
                self.broken = true;
            }
        }
    }

    /// Stops writing and lets `up` see end-of-file: our copy of stdout closes, and stdout
    /// itself goes to /dev/null.
    fn close(&mut self) {
        self.out = None;
        let _ = sys::redirect_stdout_to_null();
    }
}

fn signals(shutdown: Sender<Shutdown>) {
    std::thread::Builder::new()
        .name("nsfleet-signals".into())
        .spawn(move || loop {
            match sys::wait_signal(&SIGNALS) {
                // As PID 1 of our namespace we inherit every orphan: reap them.
                Ok(libc::SIGCHLD) => sys::reap_any(),
                Ok(_) => {
                    let _ = shutdown.send(Shutdown { asker: None });
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        })
        .expect("spawning the signal thread");
}

/// Ends the fleet when the process behind `owner` (a pidfd) ends, however it ends.
fn ended_with(owner: OwnedFd, shutdown: Sender<Shutdown>) {
    std::thread::Builder::new()
        .name("nsfleet-owner".into())
        .spawn(move || loop {
            match sys::poll_readable(&[owner.as_fd()], None).as_deref() {
                Ok([true]) => {
                    log(format_args!("its owner ended: the fleet goes down"));
                    let _ = shutdown.send(Shutdown { asker: None });
                    return;
                }
                Err(e) if e.kind() != std::io::ErrorKind::Interrupted => {
                    log(format_args!("watching its owner: {e}; the fleet stays up"));
                    return;
                }
                _ => {}
            }
        })
        .expect("spawning the owner's watch");
}

fn serve(sup: Arc<Supervisor>) -> anyhow::Result<()> {
    let path = sup.run_dir.socket(&sup.name);
    let _ = std::fs::remove_file(&path);
    let listener =
        UnixListener::bind(&path).with_context(|| format!("binding {}", path.display()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    std::thread::Builder::new()
        .name("nsfleet-control".into())
        .spawn(move || {
            for conn in listener.incoming().flatten() {
                let sup = sup.clone();
                let _ = std::thread::Builder::new()
                    .name("nsfleet-conn".into())
                    .spawn(move || sup.handle(conn));
            }
        })?;
    Ok(())
}

//! The supervisor: the one process that owns a fleet.
//!
//! [`launch`] starts it, forked from the caller (`nsfleet up`, or any program that embeds
//! the engine) and never exec'd, as PID 1 of a new PID namespace, named `nsfleet-sup`. It
//! holds every node's namespace by an open descriptor only (no bind mounts), so when it
//! dies, however it dies, the kernel drops every namespace and, because it is the PID
//! namespace's init, kills every process of the fleet. Nothing of the fleet can outlive it but its run folder, which
//! `nsfleet clean` removes.
//!
//! It serves the control socket ([`crate::control`]), and ends on `down`, on SIGTERM,
//! SIGINT or SIGHUP, or when the `up` that launched it goes away before the fleet is ready.
//!
//! This crate never parses arguments and never prints for people: its output is the
//! control protocol's JSON and its log.

pub mod control;
pub mod preflight;
pub mod rundir;
pub mod traffic;
pub mod watch;

use crate::control::{FleetStatus, NodeStatus, Reply, Request, UpEvent, MAX_REQUEST};
use crate::rundir::RunDir;
use crate::traffic::Traffic;
use anyhow::Context;
use crossbeam_channel::{Receiver, Sender};
use nsfleet_core::{Fleet, FleetOptions, Holding, Node, Phase};
use nsfleet_subsys::cable;
use nsfleet_subsys::impair::{Impaired, Impairments};
use nsfleet_subsys::process::Procs;
use nsfleet_subsys::{register_defaults, Defaults};
use nsfleet_sys as sys;
use nsfleet_topology::{Impair, Topology};
use nsfleet_traffic::Command;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::CStr;
use std::io::{BufRead, BufReader, Read, Write};
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
/// - The caller's memory is shared copy-on-write: the child keeps alive what the caller
///   changes afterwards, and files or sockets the caller has mapped; a caller with big
///   or such mappings should launch early, or mark them MADV_DONTFORK.
pub fn launch(args: SupervisorArgs, log: OwnedFd) -> std::io::Result<Launched> {
    let (stdin_r, topology) = std::io::pipe()?;
    let (events, stdout_w) = std::io::pipe()?;
    let how = sys::HelperStart {
        name: SUPERVISOR_NAME,
        fds: &[stdin_r.as_fd(), stdout_w.as_fd(), log.as_fd()],
        new_session: true,
        unblock_signals: false,
    };
    let cmdline = format!("nsfleet-sup {}", args.name);
    let pid = sys::fork_pid_ns_init(&how, move |_| {
        // `ps` shows what we are, not the command that forked us.
        let _ = sys::set_cmdline(&cmdline);
        // A reader of our events or of a control reply that goes away must cost an EPIPE,
        // not the fleet.
        sys::ignore_sigpipe();
        // Its error is logged and told to the caller already.
        run(args).unwrap_or(1)
    })?;
    Ok(Launched {
        pid,
        topology,
        events,
    })
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
    /// pktgen_thread_lock does. Taken after `changes` (order: `core`).
    traffic: Mutex<Traffic>,
    /// Who watches the fleet (`nsfleet events`); its locks are leaves.
    watchers: Arc<watch::Watchers>,
    /// Serialises changes to the live fleet (`apply`, `impair`, `link`, `node`): each is
    /// all or nothing, and no two interleave on a node. `status` takes it to read between
    /// changes, and `events` to open its sockets in the nodes between changes; `exec` does
    /// not. The outermost lock of the process (order: `core`).
    changes: Mutex<()>,
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
        let message = format!("{e:#}");
        if let Ok(out) = sys::dup_stdio(1) {
            let _ = control::write_line(out, &UpEvent::Failed { message });
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

fn supervise(args: SupervisorArgs) -> anyhow::Result<i32> {
    let mut input = String::new();
    sys::dup_stdio(0)?.read_to_string(&mut input)?;
    let topo: Topology =
        serde_json::from_str(&input).context("reading the topology from `nsfleet up`")?;
    let run_dir = RunDir::new(&args.run_dir);
    sys::raise_nofile(crate::preflight::descriptors_needed(&topo))
        .context("raising RLIMIT_NOFILE")?;
    let log_dir = run_dir.log_dir(&args.name);
    std::fs::create_dir_all(&log_dir)?;
    let fleet = Fleet::new(FleetOptions {
        holding: (args.holding).unwrap_or_else(|| crate::preflight::holding(&topo)),
        workers: args.workers,
        max_unreclaimed: args.max_unreclaimed,
        log_dir,
    })?;
    let watchers = Arc::new(watch::Watchers::default());
    let to = watchers.clone();
    let process_events: nsfleet_subsys::process::ProcessEvents = Arc::new(move |e| to.publish(&e));
    let journal = run_dir.host_journal(&args.name);
    let defaults = register_defaults(&fleet, &args.name, journal, Some(process_events))?;
    let (shutdown, shutdown_rx) = crossbeam_channel::unbounded();
    let sup = Arc::new(Supervisor {
        name: args.name.clone(),
        run_dir,
        fleet,
        defaults,
        state: Mutex::new("starting"),
        kernel_bytes: Mutex::new(0),
        shutdown,
        traffic: Mutex::new(Traffic::default()),
        watchers,
        changes: Mutex::new(()),
    });
    serve(sup.clone())?;
    signals(sup.shutdown.clone());
    let mut events = Events::stdout()?;
    let result = sup.fleet.create(&topo, &mut |phase, done, total| {
        events.progress(phase, done, total)
    });
    match result {
        Err(e) => {
            // Rolled back already; the folder goes too, even if `up` is no longer there
            // to remove it.
            sup.fleet.shutdown();
            let _ = sup.run_dir.remove(&sup.name, true);
            events.send(&UpEvent::Failed {
                message: format!("{e:#}"),
            });
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

impl Supervisor {
    fn handle(&self, conn: UnixStream) {
        // A client that says nothing, or too much, gets dropped; it never wedges anything
        // but its own connection thread.
        let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
        let mut line = Vec::new();
        let read = BufReader::new(&conn)
            .take(MAX_REQUEST as u64 + 1)
            .read_until(b'\n', &mut line);
        let req = match read {
            Ok(_) if line.len() > MAX_REQUEST => {
                Err(format!("request longer than {MAX_REQUEST} bytes"))
            }
            Ok(_) => serde_json::from_slice::<Request>(&line)
                .map_err(|e| format!("malformed request: {e}")),
            Err(e) => Err(format!("reading the request: {e}")),
        };
        let reply = |r: &Reply| control::write_line(&conn, r);
        // The socket is root's only (mode 0600); the kernel's word on who connected holds
        // even if that ever changes (a socket passed on, a folder made wrongly). Answered
        // once the request is read, so that the refusal reaches the asker.
        match sys::peer_uid(conn.as_fd()) {
            Ok(0) => {}
            who => {
                let who = who.map_or_else(|e| format!("unknown ({e})"), |uid| format!("uid {uid}"));
                let message = format!("refused: only root controls a fleet, and this is {who}");
                let _ = reply(&Reply::Error { message });
                return;
            }
        }
        let _ = match req {
            Err(message) => reply(&Reply::Error { message }),
            // Between changes: the fleet before one or after it, never half-way.
            Ok(Request::Status) => reply(&Reply::Status({
                let _between = self.changes.lock();
                self.status()
            })),
            Ok(Request::Netns { node }) => self.send_netns(&conn, &node),
            Ok(Request::Stats { node }) => reply(&answer(self.stats(node.as_deref()))),
            Ok(Request::Shapes) => reply(&Reply::Shapes {
                nodes: (self.fleet.nodes().iter())
                    .map(|n| control::NodeShape {
                        name: n.name().to_string(),
                        config: n.config(),
                        wiring: n.wiring(),
                    })
                    .collect(),
            }),
            Ok(Request::Impair {
                node,
                iface,
                impair,
            }) => reply(&answer(self.impair(node, iface, impair))),
            Ok(Request::Gen {
                commands,
                threads,
                sink,
            }) => reply(&self.gen(&commands, threads, sink)),
            Ok(Request::Link { node, iface, up }) => reply(&answer(self.link(&node, &iface, up))),
            Ok(Request::Node { node, action }) => reply(&answer(self.node(&node, action))),
            Ok(Request::Apply {
                file,
                format,
                dry_run,
            }) => reply(&answer(self.apply(&file, format, dry_run))),
            // `watching` is written by the subscription, before any event.
            Ok(Request::Events) => match self.subscribe(&conn) {
                Ok(()) => Ok(()),
                Err(e) => reply(&Reply::Error {
                    message: format!("watching the fleet: {e:#}"),
                }),
            },
            // The main thread answers on this connection as the teardown goes.
            Ok(Request::Down { wait }) => conn.try_clone().map(|conn| {
                let _ = self.shutdown.send(Shutdown {
                    asker: Some(Asker { conn, wait }),
                });
            }),
        };
    }

    /// A new watcher, between changes: its sockets in the nodes would keep a node that
    /// `apply` removes from being reclaimed.
    fn subscribe(&self, conn: &UnixStream) -> anyhow::Result<()> {
        let _between = self.changes.lock();
        self.watchers.subscribe(conn, &self.fleet)
    }

    fn send_netns(&self, conn: &UnixStream, node: &str) -> std::io::Result<()> {
        let nodes = self.fleet.nodes();
        let world = |n: &Node| n.inspect::<Procs, _>(self.defaults.process, Procs::world_pidfd);
        let found = nodes.find(node).map(|n| match world(n).flatten() {
            Some(pidfd) => (n, Some(pidfd), true),
            None => (n, n.dup_netns(), false),
        });
        match found {
            Some((n, Some(fd), world)) => {
                let mut line = serde_json::to_vec(&Reply::Netns {
                    node: node.into(),
                    inode: n.inode(),
                    world,
                    number: n.number(),
                    env: n.config().env.clone(),
                })?;
                line.push(b'\n');
                sys::send_with_fd(conn.as_fd(), &line, fd.as_fd())
            }
            Some((_, None, _)) => control::write_line(
                conn,
                &Reply::Error {
                    message: format!("node {node:?} of fleet {:?} is being torn down", self.name),
                },
            ),
            None => {
                let message = match self.known_node(node) {
                    Err(e) => format!("{e:#}"),
                    Ok(_) => format!("fleet {:?} has no node {node:?}", self.name),
                };
                control::write_line(conn, &Reply::Error { message })
            }
        }
    }

    fn impair(&self, node: String, iface: String, impair: Option<Impair>) -> anyhow::Result<Reply> {
        let _change = self.change()?;
        let id = self.defaults.impair;
        let (n, i) = (node.clone(), iface.clone());
        let r = self.fleet.on_node(&node, move |cx| {
            let mut state: Impaired = cx.node.modify(id, std::mem::take).unwrap_or_default();
            let r = Impairments::change(cx, &mut state, &i, impair);
            cx.node.modify(id, |s: &mut Impaired| *s = state);
            r
        });
        r?;
        // What the node is now: `apply` starts from it.
        let node = self.known_node(&n)?;
        let mut shape = (*node.shape()).clone();
        let wiring = Arc::make_mut(&mut shape.wiring);
        if let Some(i) = wiring.ifaces.iter_mut().find(|i| i.name == iface) {
            i.impair = impair;
        }
        node.reshape(Arc::new(shape));
        Ok(Reply::Impaired {
            node: n,
            iface,
            impair,
        })
    }

    /// `nsfleet link`: one end down or up, then both ends' state.
    fn link(&self, node: &str, iface: &str, up: Option<bool>) -> anyhow::Result<Reply> {
        let _change = self.change()?;
        let n = self.known_node(node)?;
        let i = iface.to_string();
        let (end, far) = self.fleet.on_node(node, move |cx| {
            Ok((cable::set(cx, &i, up)?, cable::far_end(cx, &i)))
        })?;
        let (far, host) = match far {
            cable::Far::Node(n, f) => {
                let state = self.fleet.on_node(&n, move |cx| cable::set(cx, &f, None))?;
                (Some(state), None)
            }
            cable::Far::Host(h) => (None, Some(h)),
            cable::Far::None => (None, None),
        };
        let impair = (self.impairments(&n).into_iter())
            .find(|(f, _)| f == iface)
            .map(|(_, imp)| imp);
        Ok(Reply::Link {
            end,
            far,
            host,
            impair,
        })
    }

    /// `nsfleet node`: a node's processes stopped, started, restarted, paused or resumed,
    /// through the processes subsystem's own exit and init (its namespace and links stay).
    fn node(&self, node: &str, action: control::NodeAction) -> anyhow::Result<Reply> {
        use control::NodeAction::*;
        let _change = self.change()?;
        let n = self.known_node(node)?;
        let id = self.defaults.process;
        if !n.config().has_world() {
            anyhow::bail!("node {node} runs no processes (it has no commands, kind or files)");
        }
        match action {
            Stop => {
                if !self.fleet.stop_on(id, node)? {
                    anyhow::bail!("node {node}'s processes are stopped already");
                }
            }
            Start => self.fleet.start_on(id, node)?,
            Restart => {
                self.fleet.stop_on(id, node)?;
                if let Err(e) = self.fleet.start_on(id, node) {
                    // Not all or nothing: what was stopped stays stopped, and is told.
                    let event = watch::FleetEvent::Node {
                        node: node.to_string(),
                        action: Stop.done(),
                    };
                    self.watchers.publish(&event);
                    return Err(e.context(format!(
                        "node {node}: stopped, but starting it again failed"
                    )));
                }
            }
            Pause | Resume => {
                let done = n.inspect::<Procs, _>(id, |p| p.pause(action == Pause));
                if done != Some(true) {
                    anyhow::bail!(
                        "node {node}'s processes are stopped: nothing to {}",
                        if action == Pause { "pause" } else { "resume" }
                    );
                }
            }
        }
        // The signals go through the node's init: look once the processes have taken them
        // (or after a second, and say what is).
        if matches!(action, Pause | Resume) {
            let deadline = Instant::now() + Duration::from_secs(1);
            let settled = || {
                let procs = n
                    .inspect::<Procs, _>(id, |p| p.describe())
                    .unwrap_or_default();
                procs
                    .iter()
                    .filter(|p| p.running)
                    .all(|p| p.paused == (action == Pause))
            };
            while !settled() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        let processes = n
            .inspect::<Procs, _>(id, |p| p.describe())
            .unwrap_or_default();
        let event = watch::FleetEvent::Node {
            node: node.to_string(),
            action: action.done(),
        };
        self.watchers.publish(&event);
        Ok(Reply::Node {
            node: node.to_string(),
            processes,
        })
    }

    /// `nsfleet apply`: changes the running fleet into the topology in `file`, only where
    /// they differ, all or nothing; with `dry_run`, only says what that would change.
    fn apply(
        &self,
        file: &std::path::Path,
        format: Option<nsfleet_topology::Format>,
        dry_run: bool,
    ) -> anyhow::Result<Reply> {
        let draft = nsfleet_topology::read_file(file, format)?;
        let topo = nsfleet_subsys::probe::validate(draft)?;
        if topo.name != self.name {
            anyhow::bail!(
                "{} is fleet {:?}, not {:?}: apply changes the fleet a file names",
                file.display(),
                topo.name,
                self.name
            );
        }
        // Taken before the fleet is read, so that the plan is made against what stays; then
        // the generator's, so that it takes no new node meanwhile (lock order: `core`).
        let _change = if dry_run { None } else { Some(self.change()?) };
        let mut traffic = (!dry_run).then(|| self.traffic.lock());
        let running: Vec<nsfleet_topology::NodeSpec> = (self.fleet.nodes().iter())
            .map(|n| {
                let shape = n.shape();
                nsfleet_topology::NodeSpec {
                    name: n.name().to_string(),
                    number: n.number(),
                    config: shape.config.clone(),
                    wiring: shape.wiring.clone(),
                }
            })
            .collect();
        let plan = nsfleet_topology::reshape::reshape(&running, topo.nodes().collect())
            .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        let changes = nsfleet_topology::diff::diff(&running, &plan);
        if dry_run || plan.is_empty() {
            return Ok(Reply::Plan {
                changes,
                applied: false,
                report: None,
            });
        }
        self.refuse_removing_exec(&plan.remove)?;
        if let Some(traffic) = traffic.as_mut() {
            self.release_generator(traffic, &plan.remove)?;
        }
        let added: Vec<String> = plan.add.iter().map(|n| n.name.clone()).collect();
        let (changed, removed) = (
            plan.change
                .iter()
                .map(|n| n.name.clone())
                .collect::<Vec<_>>(),
            plan.remove.clone(),
        );
        // Their sockets would keep them from being reclaimed.
        self.watchers.forget_nodes(&removed);
        let mut quiet = |_: Phase, _: usize, _: usize| ControlFlow::Continue(());
        let done = self.fleet.reshape(plan, &mut quiet);
        // Watched again if the change was undone; the new nodes if it was not.
        let watch = if done.is_ok() { &added } else { &removed };
        if let Err(e) = self.watchers.add_nodes(&self.fleet, watch) {
            log(format_args!("events: watching links of {watch:?}: {e:#}"));
        }
        let report = done?;
        let hosts = (self.run_dir.log_dir(&self.name)).join(nsfleet_subsys::world::HOSTS_FILE);
        if hosts.exists() {
            let nodes = self.fleet.nodes();
            if let Err(e) = nsfleet_subsys::world::write_hosts(&hosts, nodes.iter().map(|n| &**n)) {
                log(format_args!("apply: rewriting {}: {e}", hosts.display()));
            }
        }
        self.tell_applied(
            &changes,
            [
                (&added, "added"),
                (&changed, "changed"),
                (&removed, "removed"),
            ],
        );
        Ok(Reply::Plan {
            changes,
            applied: true,
            report: Some(report),
        })
    }

    /// The generator's sockets in nodes to remove would keep them from being reclaimed:
    /// one that is done lets go of everything (its last results with it); one that is
    /// sending from such a node is not cut off.
    fn release_generator(&self, traffic: &mut Traffic, remove: &[String]) -> anyhow::Result<()> {
        let used = traffic.nodes_in_use();
        if !remove.iter().any(|n| used.contains(n)) {
            return Ok(());
        }
        let sending = traffic.sending_nodes();
        if let Some(n) = remove.iter().find(|n| sending.contains(*n)) {
            anyhow::bail!(
                "apply would remove node {n}, which the traffic generator is sending on: `nsfleet gen {} --stop` first; nothing was changed",
                self.name
            );
        }
        traffic.shutdown(&self.fleet);
        Ok(())
    }

    /// A node that `nsfleet exec` runs in is not removed under it.
    fn refuse_removing_exec(&self, remove: &[String]) -> anyhow::Result<()> {
        if remove.is_empty() {
            return Ok(());
        }
        let nodes = self.fleet.nodes();
        let inodes: HashMap<u64, &str> = (remove.iter())
            .filter_map(|n| Some((nodes.get(n)?.inode(), n.as_str())))
            .collect();
        let marker = format!("{}={}", control::EXEC_MARKER, self.name);
        let found = sys::marked_processes(&inodes.keys().copied().collect(), &marker);
        if let Some((ino, who)) = found.first() {
            anyhow::bail!(
                "apply would remove node {}, which nsfleet exec runs in ({who}): nothing was changed",
                inodes[ino]
            );
        }
        Ok(())
    }

    /// Events for what `apply` did: nodes, then interfaces added and removed.
    fn tell_applied<'a>(
        &self,
        changes: &[nsfleet_topology::diff::Change],
        nodes: impl IntoIterator<Item = (&'a Vec<String>, &'static str)>,
    ) {
        use nsfleet_topology::diff::Op;
        for (names, action) in nodes {
            for node in names {
                let node = node.clone();
                self.watchers
                    .publish(&watch::FleetEvent::Node { node, action });
            }
        }
        for c in changes {
            let action = match c.op {
                Op::Add => "added",
                Op::Remove => "removed",
                Op::Change => continue,
            };
            // Interfaces are `node:iface` (other objects have a space in their name).
            if let Some((node, iface)) =
                c.object.split_once(':').filter(|_| !c.object.contains(' '))
            {
                self.watchers.publish(&watch::FleetEvent::Interface {
                    node: node.to_string(),
                    iface: iface.to_string(),
                    action,
                });
            }
        }
    }

    /// The right to change the live fleet: one change at a time, and none once the fleet
    /// is going down (or not up yet).
    fn change(&self) -> anyhow::Result<parking_lot::MutexGuard<'_, ()>> {
        let guard = self.changes.lock();
        let state = *self.state.lock();
        if state != "up" {
            anyhow::bail!("fleet {:?} is {state}: it cannot be changed now", self.name);
        }
        Ok(guard)
    }

    /// Each interface's impairment now, as `nsfleet impair` left it.
    fn impairments(&self, n: &Node) -> Vec<(String, Impair)> {
        n.inspect::<Impaired, _>(self.defaults.impair, Clone::clone)
            .unwrap_or_default()
    }

    /// The node named `node`, or an error naming the closest ones.
    fn known_node(&self, node: &str) -> anyhow::Result<Arc<Node>> {
        let nodes = self.fleet.nodes();
        if let Some(n) = nodes.get(node) {
            return Ok(n.clone());
        }
        let names: Vec<&str> = nodes.iter().map(|n| n.name()).collect();
        let close = nsfleet_topology::closest(node, &names);
        let hint = if close.is_empty() {
            String::new()
        } else {
            format!(": did you mean {}?", close.join(" or "))
        };
        anyhow::bail!("fleet {:?} has no node {node:?}{hint}", self.name)
    }

    fn gen(&self, commands: &[Command], threads: Option<usize>, sink: bool) -> Reply {
        if *self.state.lock() != "up" {
            return Reply::Error {
                message: format!("fleet {:?} is not up", self.name),
            };
        }
        match (self.traffic.lock()).apply(&self.fleet, commands, threads, sink) {
            Ok(r) => Reply::Gen(r),
            Err(e) => Reply::Error {
                message: format!("{e:#}"),
            },
        }
    }

    /// Counters of every interface and usage of every process, of node `only` or of all:
    /// one link dump in each node's namespace, spread over the workers; the processes from
    /// /proc. Never waits for a change: a node removed meanwhile says so.
    fn stats(&self, only: Option<&str>) -> anyhow::Result<Reply> {
        use nsfleet_netlink::{rtnl, Batch};
        let table = self.fleet.nodes();
        let nodes: Vec<Arc<Node>> = match only {
            Some(n) => vec![self.known_node(n)?],
            None => table.iter().cloned().collect(),
        };
        let usage = |n: &Node| -> Vec<control::ProcUsage> {
            let procs = n.inspect::<Procs, _>(self.defaults.process, |p| p.describe());
            (procs.unwrap_or_default().into_iter())
                .filter(|p| p.running)
                .filter_map(|p| {
                    let u = sys::usage_of(&p.pid.to_string())?;
                    Some(control::ProcUsage {
                        pid: p.pid,
                        command: p.command,
                        cpu_seconds: u.cpu_seconds(),
                        rss_bytes: u.rss_bytes,
                    })
                })
                .collect()
        };
        let processes: Vec<_> = (nodes.iter())
            .map(|n| (usage(n), self.impairments(n)))
            .collect();
        let order: HashMap<String, usize> = (nodes.iter().enumerate())
            .map(|(i, n)| (n.name().to_string(), i))
            .collect();
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        // A switch's ports by the counters alone (see `rtnl::dump_stats`), named from its
        // wiring; their state is read at the other end. Any other node by a link dump.
        let names: HashMap<String, HashMap<i32, String>> = (nodes.iter())
            .filter(|n| n.config().switch)
            .map(|n| (n.name().to_string(), port_names(&n.wiring())))
            .collect();
        let mut read = self.fleet.in_each(nodes, move |name, sock| {
            let mut b = Batch::new();
            let Some(ports) = names.get(name) else {
                rtnl::dump_links(&mut b, sock.next_seq());
                let mut links = Vec::new();
                sock.dump(&b, |m| links.extend(rtnl::parse_link(m)))?;
                return Ok(links
                    .iter()
                    .filter(|l| l.name != "lo")
                    .map(iface_stats)
                    .collect());
            };
            rtnl::dump_stats(&mut b, sock.next_seq());
            let mut ports_seen = Vec::new();
            sock.dump(&b, |m| {
                let Some((index, stats)) = rtnl::parse_stats(m) else {
                    return;
                };
                if let Some(name) = ports.get(&index) {
                    ports_seen.push(control::IfaceStats {
                        name: name.clone(),
                        up: true,
                        carrier: true,
                        counters: stats.into(),
                    });
                }
            })?;
            Ok(ports_seen)
        });
        read.sort_by_key(|(name, _)| order[name]);
        let nodes = (read.into_iter().zip(processes))
            .map(
                |((name, interfaces), (processes, impairments))| match interfaces {
                    Ok(interfaces) => control::NodeStats {
                        name,
                        interfaces,
                        processes,
                        impairments,
                        error: None,
                    },
                    Err(e) => control::NodeStats {
                        name,
                        error: Some(format!("{e:#}")),
                        ..Default::default()
                    },
                },
            )
            .collect();
        Ok(Reply::Stats(control::FleetStats { at, nodes }))
    }

    fn status(&self) -> FleetStatus {
        let nodes = self.fleet.nodes();
        let nodes: Vec<NodeStatus> = nodes
            .iter()
            .map(|n| NodeStatus {
                name: n.name().to_string(),
                netns_inode: n.inode(),
                processes: n
                    .inspect::<Procs, _>(self.defaults.process, |p| p.describe())
                    .unwrap_or_default(),
                interfaces: describe_ifaces(n),
                impairments: self.impairments(n),
                clab: n.config().clab.clone(),
            })
            .collect();
        FleetStatus {
            name: self.name.clone(),
            state: self.state.lock().to_string(),
            pid: sys::host_pid(),
            node_count: nodes.len(),
            processes_running: nodes
                .iter()
                .flat_map(|n| &n.processes)
                .filter(|p| p.running)
                .count(),
            kernel_mem_bytes: *self.kernel_bytes.lock(),
            awaiting_reclaim: self.fleet.awaiting_reclaim(),
            workers: self.fleet.workers(),
            subsystems: self
                .fleet
                .subsystems()
                .into_iter()
                .map(String::from)
                .collect(),
            run_dir: self.run_dir.fleet_dir(&self.name).display().to_string(),
            nodes,
        }
    }
}

/// A node's interfaces for `status`; a switch's ports are many and say little.
fn describe_ifaces(n: &Node) -> Vec<String> {
    if n.config().switch {
        let w = n.wiring();
        let bridge = nsfleet_topology::BRIDGE.0;
        let mut line = format!("bridge {bridge}, {} ports", w.ifaces.len());
        if !w.macvlans.is_empty() {
            line += &format!(", {} macvlans", w.macvlans.len());
        }
        return vec![line];
    }
    (n.wiring().ifaces.iter())
        .map(|i| {
            let addrs: Vec<String> = i.addrs.iter().map(|a| a.to_string()).collect();
            format!("{} {}", i.name, addrs.join(" "))
                .trim_end()
                .to_string()
        })
        .collect()
}

/// A change's reply, or its error as one.
fn answer(r: anyhow::Result<Reply>) -> Reply {
    r.unwrap_or_else(|e| Reply::Error {
        message: format!("{e:#}"),
    })
}

/// A link's state and counters as `nsfleet stats` shows them.
fn iface_stats(l: &nsfleet_netlink::rtnl::LinkInfo) -> control::IfaceStats {
    control::IfaceStats {
        name: l.name.clone(),
        up: l.flags & nsfleet_netlink::rtnl::IFF_UP != 0,
        carrier: l.carrier.unwrap_or(false),
        counters: l.stats.into(),
    }
}

/// A switch's interfaces by index: its ports (trunks to its other shards included) and
/// its bridge.
fn port_names(w: &nsfleet_topology::NodeWiring) -> HashMap<i32, String> {
    let ports = w.ifaces.iter().map(|i| (i.index, i.name.clone()));
    let (name, index) = nsfleet_topology::BRIDGE;
    let bridge = (index, name.to_string());
    ports.chain([bridge]).collect()
}

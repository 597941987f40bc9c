//! Processes per node: the topology's `commands`, started inside the node's world (see
//! `world`) once the fleet is configured, each through `/bin/sh -c` in a process group of
//! its own, with an environment of the node's own (see [`environment`]), their
//! placeholders filled, stdout and stderr appended to `<log dir>/<node>.log`. Before
//! them, the lines other subsystems describe ([`StartLine`]), given as data: this file
//! knows of no other subsystem.
//!
//! A watcher thread collects every command's exit status as it ends, and with
//! `restart = "on-failure"` starts a failed one again after a backoff (1 s, doubling to
//! 30 s); `status` shows each command's state and the processes the node's init holds
//! (daemons that left their command).
//!
//! At teardown `exit` stops restarts, sends SIGTERM to every group of the node and to its
//! world's init; `exit_batch` then waits for the whole batch at once on pidfds, SIGKILLs
//! what is left after the grace period, and reaps; then the same for the inits, whose exit
//! takes every other process of their nodes (daemons) with them. Processes also die with
//! the fleet's owner: PR_SET_PDEATHSIG, and the supervisor's PID namespace.

use crate::spawner::{Launch, Spawner, WorldRef};
use crate::world::{self, World};
use anyhow::Context;
use nsfleet_core::{InitCtx, Node, Phase, Shape, SubsysId, Subsystem};
use nsfleet_locks::{order, Mutex};
use nsfleet_sys::{self as sys, Exit};
use nsfleet_topology::{template, FileSource, NodeConfig};
use std::fs::OpenOptions;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

/// What happens to a node's commands, for whoever watches the fleet (`nsfleet events`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ProcessEvent {
    ProcessStarted {
        node: String,
        pid: i64,
        command: String,
    },
    ProcessExited {
        node: String,
        pid: i64,
        command: String,
        exit: Exit,
    },
    /// The kernel's OOM killer killed a process of the node for its memory limit: told
    /// as the command it ended is seen to end, or as the kernel kills (`OomTeller`).
    OutOfMemory {
        node: String,
        /// The command that ended with it; `None` when it was found while the node's
        /// commands ran on (a daemon's child, a process `exec` started).
        command: Option<String>,
        /// The node's kills so far.
        kills: u64,
        limit_bytes: Option<u64>,
    },
}

/// A node's OOM kills as last told: each new one is told once, in the node's log and as
/// an event, by whoever sees it first (a command's end, or [`OomTeller`]).
pub(crate) struct OomCount {
    group: Arc<world::cgroups::CurrentGroup>,
    told: std::sync::atomic::AtomicU64,
    node: String,
    log: PathBuf,
    events: Option<crate::Events>,
}

impl OomCount {
    /// Tells the kills not told yet, if any; `command` is the one that ended with them.
    fn tell_new(&self, command: Option<&str>) {
        let group = self.group.get();
        let kills = group.oom_kills();
        let was = self
            .told
            .fetch_max(kills, std::sync::atomic::Ordering::Relaxed);
        if kills <= was {
            return;
        }
        let limit = group.memory_limit();
        let line = format!("nsfleet: {}\n", oom_line(kills, limit));
        let log = OpenOptions::new().append(true).open(&self.log);
        let _ = log.and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()));
        if let Some(events) = &self.events {
            events(crate::Event::Process(ProcessEvent::OutOfMemory {
                node: self.node.clone(),
                command: command.map(str::to_string),
                kills,
                limit_bytes: limit,
            }));
        }
    }
}

/// The thread that tells a node's OOM kills as the kernel makes them, for the nodes with a
/// memory limit of their own: a daemon's child killed while the daemon runs on ends no
/// command, so a command's end alone would never tell it.
struct OomTeller {
    watch: sys::cgroup::OomWatch,
    /// The nodes watched, dropped with their state.
    counts: Mutex<Vec<Weak<OomCount>>>,
}

/// How long the teller waits after a sign of a kill before it reads the counts: v1 signals
/// before the kill, and a command that ends with it is better told by its end, which names it.
const OOM_SETTLE: Duration = Duration::from_millis(200);

impl OomTeller {
    /// Starts its thread, which ends with the last `Arc`.
    fn start() -> std::io::Result<Arc<OomTeller>> {
        let teller = Arc::new(OomTeller {
            watch: sys::cgroup::OomWatch::new()?,
            counts: Mutex::new(order::OOM_COUNTS, Vec::new()),
        });
        let weak = Arc::downgrade(&teller);
        thread_at_home("nsfleet-oom", || Ok(((), ())), move |()| tell_kills(weak))?;
        Ok(teller)
    }

    /// Watches a node's group, whose kills `count` tells.
    fn add(&self, count: &Arc<OomCount>) -> std::io::Result<()> {
        self.watch.add(&count.group.get())?;
        self.counts.lock().push(Arc::downgrade(count));
        Ok(())
    }
}

/// Starts a thread of this subsystem's, named `name`, in the process's own network
/// namespace: `setup` runs there first, and what it gives the caller is returned once it
/// has; then `run` gets the rest. These threads are started by a worker inside the node
/// that first needs them, and a thread is born in its maker's namespaces: the OOM teller,
/// left there, kept the first memory-limited node's namespace alive until the supervisor
/// exited (`down` said it outlived the fleet), as a socket made there would.
fn thread_at_home<C: Send + 'static, K: 'static>(
    name: &str,
    setup: impl FnOnce() -> std::io::Result<(C, K)> + Send + 'static,
    run: impl FnOnce(K) + Send + 'static,
) -> std::io::Result<C> {
    let home = sys::open_process_netns()?;
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let made = sys::setns_net(home.as_fd()).and_then(|()| setup());
            drop(home);
            match made {
                Ok((for_caller, kept)) => {
                    let _ = tx.send(Ok(for_caller));
                    run(kept)
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            }
        })?;
    rx.recv()
        .unwrap_or_else(|_| Err(std::io::Error::other(format!("{name} ended at once"))))
}

/// The teller's thread, until the teller goes: after each sign of a kill, every watched
/// node's new kills told.
fn tell_kills(teller: Weak<OomTeller>) {
    loop {
        let Some(t) = teller.upgrade() else { return };
        let signalled = t.watch.wait(Duration::from_secs(1));
        if !matches!(signalled, Ok(true)) {
            continue;
        }
        std::thread::sleep(OOM_SETTLE);
        t.counts.lock().retain(|c| c.strong_count() > 0);
        let live: Vec<Arc<OomCount>> = t.counts.lock().iter().filter_map(Weak::upgrade).collect();
        for c in live {
            c.tell_new(None);
        }
    }
}

/// What a node's log says of an OOM kill: "killed: out of memory, limit 64 MB".
pub fn oom_line(kills: u64, limit: Option<u64>) -> String {
    let limit = limit.map_or("no limit of its own".into(), |b| {
        format!("limit {}", nsfleet_values::memory_text(b))
    });
    let times = if kills == 1 {
        String::new()
    } else {
        format!(" ({kills} kills so far)")
    };
    format!("killed: out of memory, {limit}{times}")
}

/// A command a node runs besides its own, described by the subsystem that knows what it
/// is for (the fleet's Open vSwitch hub's start line, `ovs/hub.rs`): what `status` and
/// `events` call it and its shell line, or `None` for a node that runs none. Given to
/// [`Processes::new`] by `register_defaults`, so that this subsystem imports no other.
pub type StartLine = fn(&Node) -> Option<(String, String)>;

pub struct Processes {
    /// How long processes get between SIGTERM and SIGKILL.
    pub grace: Duration,
    fleet: String,
    /// The lines a node starts before its own commands: those that describe one for it.
    start_lines: Vec<StartLine>,
    events: Option<crate::Events>,
    spawner: OnceLock<Spawner>,
    watcher: OnceLock<Watcher>,
    /// What the fleet's worlds share, made on the first node's start.
    shared: OnceLock<world::Shared>,
    /// Tells OOM kills as they happen, started with the first node that has a memory limit.
    oom_teller: OnceLock<Arc<OomTeller>>,
    /// Where the fleet's cgroup is journalled (see `world::cgroups`).
    cgroup_journal: PathBuf,
}

impl Processes {
    pub fn new(
        fleet: &str,
        events: Option<crate::Events>,
        start_lines: Vec<StartLine>,
        cgroup_journal: PathBuf,
    ) -> Self {
        Processes {
            cgroup_journal,
            grace: Duration::from_secs(3),
            fleet: fleet.to_string(),
            start_lines,
            events,
            spawner: OnceLock::new(),
            watcher: OnceLock::new(),
            shared: OnceLock::new(),
            oom_teller: OnceLock::new(),
        }
    }
}

/// One command of a node, across its restarts.
struct Proc {
    node: String,
    command: String,
    log: PathBuf,
    /// The node's world the command runs in: its init, and its cgroup.
    world: WorldRef,
    launch: Launch,
    restart: bool,
    events: Option<crate::Events>,
    /// The node's OOM kills, shared by its commands.
    oom: Arc<OomCount>,
    /// Protects the command's current run; taken by the watcher, `status` (under the
    /// node's states) and teardown (a batch's at once); only `WATCHED` is taken under it.
    run: Mutex<Run>,
}

struct Run {
    /// As fork returned it: in the supervisor's own PID namespace, and the process group.
    pid: libc::pid_t,
    /// As the host sees it (what `status` shows).
    host_pid: i64,
    /// Shared with the watcher's poll: no descriptor is duplicated per round.
    pidfd: Arc<OwnedFd>,
    exit: Option<Exit>,
    restarts: u32,
    /// When a failed command starts again.
    again_at: Option<Instant>,
    /// Set at teardown: no more restarts.
    stopping: bool,
    /// The command's processes, all asleep, as `started` last saw them, and since when.
    quiet: Option<(Vec<i64>, Instant)>,
}

/// How long a command's processes must stay asleep and the same for `started` to count
/// it as a daemon in the foreground, when it has children.
pub const QUIET: Duration = Duration::from_secs(3);

impl Run {
    /// Why the running command is not settled yet (see `Procs::started`), if it is not.
    fn under_way(&mut self) -> Option<&'static str> {
        let tree = sys::tree_of(self.host_pid);
        if !tree.iter().all(|p| sys::is_sleeping(*p)) {
            self.quiet = None;
            return Some("still runs");
        }
        if tree.len() == 1 {
            return None;
        }
        match &self.quiet {
            Some((seen, since)) if *seen == tree => {
                (since.elapsed() < QUIET).then_some("and its children have not settled")
            }
            _ => {
                self.quiet = Some((tree, Instant::now()));
                Some("and its children have not settled")
            }
        }
    }
}

/// Whether a node's commands have started it ([`Procs::started`]).
#[derive(Debug, PartialEq)]
pub enum Started {
    Yes,
    /// Not yet, and what it waits for.
    Not(String),
    /// A command failed: which, how, and the log that has its output.
    Failed {
        command: String,
        exit: Exit,
        log: PathBuf,
    },
}

/// A node's processes and their world (this subsystem's per-node state).
#[derive(Default)]
pub struct Procs {
    world: Option<World>,
    /// Its OOM kills as told, while it has a world.
    oom: Option<Arc<OomCount>>,
    /// What `init` made ready and `launch` starts.
    unlaunched: Option<Unlaunched>,
    list: Vec<Arc<Proc>>,
    /// How its health check is started, if it has one.
    checker: Option<Checker>,
}

/// A node's commands between `init` and `launch`: ready to start in its world.
struct Unlaunched {
    commands: Vec<(String, Launch)>,
    log: PathBuf,
    world: WorldRef,
}

/// This subsystem's answers to [`crate::Commands`], read from its state of each node:
/// `Lookup(id)`, with the id registering [`Processes`] returned. What another subsystem
/// learns of the commands it had started (the hub's ovs-vswitchd), without knowing
/// [`Procs`].
pub struct Lookup(pub SubsysId);

impl crate::Commands for Lookup {
    fn world_pid(&self, node: &Node) -> Option<i64> {
        node.inspect(self.0, Procs::world_pid).flatten()
    }

    fn run_of(&self, node: &Node, command: &str) -> Option<Result<i64, Exit>> {
        node.inspect(self.0, |p: &Procs| p.run_of(command))
            .flatten()
    }

    fn running(&self, node: &Node, command: &str) -> Option<(Arc<OwnedFd>, i64)> {
        node.inspect(self.0, |p: &Procs| {
            Some((p.pidfd_of(command)?, p.run_of(command)?.ok()?))
        })
        .flatten()
    }

    fn held(&self, node: &Node) -> bool {
        node.inspect(self.0, |_: &Procs| ()).is_some()
    }
}

/// What a node's health check runs as, and where its output goes.
struct Checker {
    spawner: Spawner,
    world: WorldRef,
    launch: Launch,
    log: PathBuf,
}

/// A health check under way: its pid (for the reaper) and pidfd.
pub struct CheckRun {
    pid: libc::pid_t,
    pidfd: OwnedFd,
    /// Where its output went: `<log dir>/<node>.health.log`.
    pub log: PathBuf,
}

impl CheckRun {
    /// How it ended, once it has (its process group is killed then: what the check left
    /// running goes with it; the drop reaps).
    pub fn ended(&self) -> Option<Exit> {
        sys::peek_exit_pidfd(self.pidfd.as_fd())
    }
}

impl Drop for CheckRun {
    /// Ends it, with whatever it started (SIGKILL to its process group), and reaps it:
    /// a check is never left running, nor unreaped (a watched child the orphan sweep
    /// would wait on).
    fn drop(&mut self) {
        let _ = sys::kill_group(self.pid, libc::SIGKILL);
        let _ = sys::kill_pidfd(self.pidfd.as_fd(), libc::SIGKILL);
        let _ = sys::poll_exited(&[self.pidfd.as_fd()], Duration::from_secs(5));
        sys::reap_pidfd(self.pidfd.as_fd());
        sys::unwatch_child(self.pid);
    }
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ProcInfo {
    /// The pid as the host sees it.
    pub pid: i64,
    pub command: String,
    pub running: bool,
    /// How it ended, once it has.
    #[serde(default)]
    pub exit: Option<Exit>,
    #[serde(default)]
    pub restarts: u32,
    /// Not one of the node's commands: a process its init holds (a daemon that left it).
    #[serde(default)]
    pub daemon: bool,
    /// Stopped by a signal (`nsfleet node pause`).
    #[serde(default)]
    pub paused: bool,
}

impl Procs {
    /// What the node's cgroup counts it has used, while it has a world.
    pub fn cgroup_usage(&self) -> Option<sys::cgroup::Usage> {
        Some(self.world.as_ref()?.cgroup.0.get().usage())
    }

    /// A pidfd of the node's init, to enter its world by (`exec`).
    pub fn world_pidfd(&self) -> Option<OwnedFd> {
        self.world.as_ref().and_then(|w| w.pidfd().ok())
    }

    /// What a process that enters the node's world gives up as it starts, as the node's
    /// own processes do.
    pub fn world_restrictions(&self) -> Option<sys::confine::Restrictions> {
        self.world.as_ref().map(|w| w.restrictions)
    }

    /// The pid of the node's init in the host's /proc (the supervisor's PID namespace is
    /// its own): its world's root is `/proc/PID/root`.
    pub fn world_pid(&self) -> Option<i64> {
        self.world.as_ref().and_then(|w| w.host_pid)
    }

    /// The pidfd of the node's command `command` (as `describe` names it) while it runs.
    pub fn pidfd_of(&self, command: &str) -> Option<Arc<OwnedFd>> {
        let p = self.list.iter().find(|p| p.command == command)?;
        let run = p.run.lock();
        run.exit.is_none().then(|| run.pidfd.clone())
    }

    /// The node's command `command` (as `describe` names it) as the host sees it: its
    /// pid, or how it ended; without describe's look for daemons, for a caller that polls.
    pub fn run_of(&self, command: &str) -> Option<Result<i64, Exit>> {
        let p = self.list.iter().find(|p| p.command == command)?;
        let run = p.run.lock();
        Some(match run.exit {
            Some(exit) => Err(exit),
            None => Ok(run.host_pid),
        })
    }

    /// How far the node's commands have got (`--wait started`). Each must have exited
    /// with status 0, or run on as a daemon in the foreground: asleep with no child (a
    /// daemon, a `sleep`), or a tree of processes all asleep and unchanged for
    /// [`QUIET`] (a supervisor and its workers, a pipeline). A command whose processes
    /// run, or change, is under way; a shell between two of its commands has no child
    /// for an instant but runs, so one look can be wrong: the caller looks twice
    /// (`ready`). A failed command is a failure unless it is to be started again.
    pub fn started(&self) -> Started {
        for p in &self.list {
            let mut run = p.run.lock();
            match run.exit {
                Some(Exit::Code(0)) => {}
                Some(exit) if p.restart && !run.stopping => {
                    return Started::Not(format!(
                        "`{}` ended ({exit:?}) and starts again",
                        p.command
                    ))
                }
                Some(exit) => {
                    return Started::Failed {
                        command: p.command.clone(),
                        exit,
                        log: p.log.clone(),
                    }
                }
                None if sys::is_stopped(run.host_pid) => {
                    return Started::Not("paused (`nsfleet node ... resume`)".into())
                }
                None => {
                    if let Some(why) = run.under_way() {
                        return Started::Not(format!("`{}` {why}", p.command));
                    }
                }
            }
        }
        Started::Yes
    }

    /// Starts the node's health check in its world (`--wait healthy`); `None` when it has
    /// none.
    pub fn start_check(&self) -> Option<std::io::Result<CheckRun>> {
        let c = self.checker.as_ref()?;
        Some(
            (c.spawner.spawn(&c.launch, &c.log, &c.world)).map(|(pid, pidfd)| CheckRun {
                pid,
                pidfd,
                log: c.log.clone(),
            }),
        )
    }

    /// The node's commands, then the daemons its init holds.
    pub fn describe(&self) -> Vec<ProcInfo> {
        let mut out: Vec<ProcInfo> = self
            .list
            .iter()
            .map(|p| {
                let run = p.run.lock();
                ProcInfo {
                    pid: run.host_pid,
                    command: p.command.clone(),
                    running: run.exit.is_none(),
                    exit: run.exit,
                    restarts: run.restarts,
                    daemon: false,
                    paused: run.exit.is_none() && sys::is_stopped(run.host_pid),
                }
            })
            .collect();
        if let Some(init) = self.world.as_ref().and_then(|w| w.host_pid) {
            for pid in sys::children_of(init) {
                let Some(command) = sys::cmdline_of(pid) else {
                    continue;
                };
                out.push(ProcInfo {
                    pid,
                    command,
                    running: true,
                    exit: None,
                    restarts: 0,
                    daemon: true,
                    paused: sys::is_stopped(pid),
                });
            }
        }
        out
    }

    /// Stops (`true`) or continues every process of the node but its init, through the
    /// init (see `sys::PAUSE`). False when the node has no world.
    pub fn pause(&self, pause: bool) -> bool {
        let Some(w) = &self.world else { return false };
        let sig = if pause { sys::PAUSE } else { sys::RESUME };
        w.signal(sig).is_ok()
    }

    fn signal_all(&self, sig: libc::c_int) {
        for p in &self.list {
            let run = p.run.lock();
            // A run whose status is collected is reaped: its pid may be another's by now.
            if run.exit.is_none() {
                // ESRCH: the group is already gone.
                let _ = sys::kill_group(run.pid, sig);
            }
        }
    }
}

/// What a node runs, each as its line for people and how it is started: an image's
/// process first (its entrypoint and cmd), then the node's `commands` (shell lines, its
/// templates filled). In a node with an image, all run with the image's environment,
/// working directory and user, as `docker exec` runs in a container.
/// What every process of the node starts with but its command line: its environment,
/// and its image's working directory and user.
fn base_launch(node: &Node, fleet: &str) -> Launch {
    let config = node.config();
    let image = config.image.as_ref();
    Launch {
        argv: Vec::new(),
        env: environment(node, fleet),
        workdir: image.and_then(|i| i.workdir()).map(String::from),
        user: image.and_then(|i| i.user()).map(String::from),
    }
}

fn launches(node: &Node, fleet: &str, start_lines: &[StartLine]) -> Vec<(String, Launch)> {
    let config = node.config();
    let image = config.image.as_ref();
    let base = base_launch(node, fleet);
    let mut out = Vec::new();
    // containerlab's `startup-delay`: every process waits, through the node's shell.
    let delay = config.start_delay_s;
    let main = image.map(|i| i.argv()).unwrap_or_default();
    if !main.is_empty() {
        let line = main.join(" ");
        let argv = match delay {
            0 => main,
            d => ["/bin/sh", "-c", &format!("sleep {d}; exec \"$@\""), "sh"]
                .into_iter()
                .map(String::from)
                .chain(main)
                .collect(),
        };
        out.push((
            line,
            Launch {
                argv,
                ..base.clone()
            },
        ));
    }
    for (label, line) in start_lines.iter().filter_map(|start| start(node)) {
        out.push((label, Launch::shell(&line, &base)));
    }
    let wiring = node.wiring();
    let vars = world::vars(node, fleet, &wiring);
    for c in &config.commands {
        let line = template::expand(c, &vars);
        let launch = match delay {
            0 => Launch::shell(&line, &base),
            d => Launch::shell(&format!("sleep {d}; {line}"), &base),
        };
        out.push((line, launch));
    }
    out
}

/// The whole environment of a node's processes and of `nsfleet exec` in it, as a
/// container's is its own and none of the deploying shell's: a standard PATH, HOME and
/// HOSTNAME (as Docker gives them), then the image's variables, the node's `env`
/// (containerlab's `CLAB_*` among them), and nsfleet's, which nothing overrides:
/// NSFLEET_FLEET, NSFLEET_NODE and, but on containerlab's nodes, which have no number of
/// their own, NSFLEET_INDEX (`{i}`). A variable set twice keeps its last value.
pub fn environment(node: &Node, fleet: &str) -> Vec<(String, String)> {
    let config = node.config();
    let wiring = node.wiring();
    let hostname = world::hostname(node, &world::vars(node, fleet, &wiring));
    let base = [
        ("PATH", sys::DEFAULT_PATH),
        ("HOME", "/root"),
        ("HOSTNAME", &hostname),
    ];
    let mut ours = vec![
        ("NSFLEET_FLEET".to_string(), fleet.to_string()),
        ("NSFLEET_NODE".to_string(), node.name().to_string()),
    ];
    if config.clab.is_none() {
        ours.push(("NSFLEET_INDEX".to_string(), node.number().to_string()));
    }
    let all = (base.iter().map(|(k, v)| (k.to_string(), v.to_string())))
        .chain(config.process_env())
        .chain(ours);
    let mut env: Vec<(String, String)> = Vec::new();
    for (k, v) in all {
        env.retain(|(o, _)| *o != k);
        env.push((k, v));
    }
    env
}

/// Whether a node's processes must start again: what it runs, in what world, with what
/// restrictions, changes. Its cgroup's limits change in place (see `extend`); the size
/// of its /dev/shm, a mount's, does not.
/// Commands and files are templates of the node's wiring (`{eth0.addr}`): a node that
/// has any and whose wiring changes starts again too.
fn runs_differently(was: &Shape, now: &Shape) -> bool {
    let (a, b) = (&*was.config, &*now.config);
    fn world(c: &NodeConfig) -> impl PartialEq + '_ {
        (
            &c.commands,
            &c.env,
            &c.hostname,
            &c.dirs,
            &c.files,
            &c.binds,
            &c.image,
            c.ovs_hub.is_some(),
            &c.healthcheck,
            // Both are the world's, made as it starts: a node starts again to change
            // them.
            c.limits.shm_bytes,
            &c.security,
        )
    }
    let templated = |c: &NodeConfig| {
        c.commands.iter().any(|x| x.contains('{'))
            || (c.files.iter()).any(|f| match &f.source {
                FileSource::Inline(t) => t.contains('{'),
                FileSource::Path(p) => p.contains('{'),
            })
    };
    world(a) != world(b)
        || a.restart_on_failure != b.restart_on_failure
        || (templated(b) && was.wiring != now.wiring)
}

impl Subsystem for Processes {
    type State = Procs;

    fn name(&self) -> &'static str {
        "processes"
    }

    fn phase(&self) -> Phase {
        Phase::Start
    }

    fn wants(&self, node: &Node) -> bool {
        node.config().has_world()
    }

    /// The node's world, and its commands and health check made ready to start in it;
    /// the commands start in [`launch`](Self::launch), once every node has its world.
    fn init(&self, cx: &mut InitCtx<'_>, procs: &mut Procs) -> anyhow::Result<()> {
        let node = cx.node;
        let log = cx.log_dir.join(format!("{}.log", node.name()));
        let shared = self.shared.get_or_init(|| {
            let peers = cx.peers().iter().map(|n| &**n);
            world::Shared::new(&self.fleet, cx.log_dir, &self.cgroup_journal, peers)
        });
        let commands = launches(node, &self.fleet, &self.start_lines);
        let check = node.config().healthcheck.clone();
        // Before the world: a failure here must not leave an init behind.
        let helpers = if commands.is_empty() && check.is_none() {
            None
        } else {
            Some(self.helpers()?)
        };
        let log_file = OpenOptions::new().create(true).append(true).open(&log)?;
        let w = world::start(node, &self.fleet, &log_file, shared)
            .with_context(|| format!("node {} (log {})", node.name(), log.display()))?;
        let world_id = WorldRef {
            init: (w.pid, w.start_time),
            cgroup: w.cgroup.0.clone(),
            restrictions: w.restrictions,
        };
        let oom = Arc::new(OomCount {
            group: w.cgroup.0.clone(),
            told: 0.into(),
            node: node.name().to_string(),
            log: log.clone(),
            events: self.events.clone(),
        });
        procs.world = Some(w);
        if node.config().limits.memory.is_some() {
            // A node whose kills go untold as they happen is no reason to fail its start.
            let _ = self.oom_teller().and_then(|t| t.add(&oom));
        }
        procs.oom = Some(oom);
        let Some((spawner, _)) = helpers else {
            return Ok(());
        };
        procs.checker = check.map(|c| Checker {
            spawner: spawner.clone(),
            world: world_id.clone(),
            launch: Launch {
                argv: c.argv,
                ..base_launch(node, &self.fleet)
            },
            log: cx.log_dir.join(format!("{}.health.log", node.name())),
        });
        procs.unlaunched = Some(Unlaunched {
            commands,
            log,
            world: world_id,
        });
        Ok(())
    }

    /// Starts the commands `init` made ready, in order; on a failure, ends the node's
    /// processes and world, as a failed `init` leaves nothing.
    fn launch(&self, node: &Node, procs: &mut Procs) -> anyhow::Result<()> {
        let (Some(u), Some(oom)) = (procs.unlaunched.take(), procs.oom.clone()) else {
            return Ok(());
        };
        let (spawner, watcher) = self.helpers()?;
        for (command, launch) in u.commands {
            match spawner.spawn(&launch, &u.log, &u.world) {
                Ok((pid, pidfd)) => {
                    let host_pid = sys::host_pid_of(pidfd.as_fd()).unwrap_or(pid as i64);
                    let p = Arc::new(Proc {
                        node: node.name().to_string(),
                        events: self.events.clone(),
                        oom: oom.clone(),
                        command,
                        log: u.log.clone(),
                        world: u.world.clone(),
                        launch,
                        restart: node.config().restart_on_failure,
                        run: Mutex::new(
                            order::PROC_RUN,
                            Run {
                                pid,
                                host_pid,
                                pidfd: Arc::new(pidfd),
                                exit: None,
                                restarts: 0,
                                again_at: None,
                                stopping: false,
                                quiet: None,
                            },
                        ),
                    });
                    p.tell_started(host_pid);
                    watcher.add(&p);
                    procs.list.push(p);
                }
                Err(e) => {
                    // Nothing left running, and nothing for a later `exit` to signal.
                    self.exit(node, procs);
                    self.exit_batch(&mut [(node, procs)]);
                    *procs = Procs::default();
                    return Err(anyhow::Error::from(e)
                        .context(format!("starting {command:?} (log {})", u.log.display())));
                }
            }
        }
        Ok(())
    }

    /// Stops the node's processes and world if what they run changes.
    fn retire(&self, cx: &mut InitCtx<'_>, procs: &mut Procs, was: &Shape) -> anyhow::Result<()> {
        if !runs_differently(was, &cx.node.shape()) {
            return Ok(());
        }
        let node = cx.node;
        self.exit(node, procs);
        self.exit_batch(&mut [(node, procs)]);
        *procs = Procs::default();
        Ok(())
    }

    /// Starts them again, as the node's new shape says; or, if only its limits change,
    /// changes them in place.
    fn extend(&self, cx: &mut InitCtx<'_>, procs: &mut Procs, was: &Shape) -> anyhow::Result<()> {
        let now = cx.node.shape();
        if !runs_differently(was, &now) {
            return self.relimit(cx.node, procs, &was.config.limits);
        }
        if !now.config.has_world() || procs.world.is_some() {
            return Ok(());
        }
        self.init(cx, procs)
    }

    fn exit(&self, _node: &Node, procs: &mut Procs) {
        for p in &procs.list {
            p.run.lock().stopping = true;
        }
        procs.signal_all(libc::SIGTERM);
        if let Some(w) = &procs.world {
            w.stop();
        }
    }

    fn exit_batch(&self, batch: &mut [(&Node, &mut Procs)]) {
        // The commands still running, each with its run held until its end is recorded
        // (the watcher would record it too), and told.
        let mut runs: Vec<_> = (batch.iter().flat_map(|(_, p)| &p.list))
            .map(|p| (p, p.run.lock()))
            .filter(|(_, r)| r.exit.is_none())
            .collect();
        // `exit` has sent SIGTERM to every group: one wait for the whole batch.
        let fds: Vec<_> = runs.iter().map(|(_, r)| r.pidfd.as_fd()).collect();
        wait_or_kill(&fds, self.grace, |i| {
            let _ = sys::kill_group(runs[i].1.pid, libc::SIGKILL);
        });
        drop(fds);
        // Reaped before the inits are waited for: an init waits until no other process
        // of its namespace is left, zombies included.
        for (_, r) in runs.iter_mut() {
            r.exit = Some(sys::try_wait_pidfd(r.pidfd.as_fd()).unwrap_or(Exit::Unknown));
            sys::unwatch_child(r.pid);
        }
        let ended: Vec<_> = (runs.into_iter())
            .map(|(p, r)| (p, r.host_pid, r.exit.unwrap_or(Exit::Unknown)))
            .collect();
        for (p, pid, exit) in ended {
            p.tell_exited(pid, exit);
        }
        // Then the inits, whose exit takes the rest of their nodes (daemons) along: `exit`
        // has told them all, so their grace runs from now for each slice.
        let worlds: Vec<&World> = batch.iter().filter_map(|(_, p)| p.world.as_ref()).collect();
        let until = Instant::now() + world::GRACE + Duration::from_secs(1);
        for slice in worlds.chunks(WORLDS_AT_ONCE) {
            let fds: Vec<OwnedFd> = slice.iter().filter_map(|w| w.pidfd().ok()).collect();
            let fds: Vec<_> = fds.iter().map(|f| f.as_fd()).collect();
            wait_or_kill(&fds, until.saturating_duration_since(Instant::now()), |i| {
                let _ = sys::kill_pidfd(fds[i], libc::SIGKILL);
            });
            for fd in fds {
                sys::reap_pidfd(fd);
            }
        }
    }
}

/// How many inits' ends are waited for at once, each through a pidfd opened for it: a
/// batch of 10,000 nodes still holds its commands' pidfds then.
const WORLDS_AT_ONCE: usize = 1024;

/// Waits up to `grace` for every process behind `pidfds` to end; then `kill`s (by their
/// position) what is left, and waits for that a little longer.
fn wait_or_kill(pidfds: &[BorrowedFd<'_>], grace: Duration, mut kill: impl FnMut(usize)) {
    if sys::poll_exited(pidfds, grace).unwrap_or(0) < pidfds.len() {
        (0..pidfds.len()).for_each(&mut kill);
        let _ = sys::poll_exited(pidfds, Duration::from_secs(5));
    }
}

impl Processes {
    /// Changes the limits of `node`'s running world, which were `had`, to what its
    /// configuration now says (see `world::relimit`); a node without a world has nothing
    /// to change. A node given a memory limit has its OOM kills told from then on.
    fn relimit(
        &self,
        node: &Node,
        procs: &Procs,
        had: &nsfleet_topology::Limits,
    ) -> anyhow::Result<()> {
        let limits = node.config().limits.clone();
        let (Some(w), Some(shared)) = (&procs.world, self.shared.get()) else {
            return Ok(());
        };
        if limits == *had {
            return Ok(());
        }
        (world::relimit(node.name(), w, shared, &limits))
            .context("changing its limits in place")?;
        if let (Some(oom), Some(_), None) = (&procs.oom, limits.memory, had.memory) {
            // As at a start: untold kills are no reason to fail the change.
            let _ = self.oom_teller().and_then(|t| t.add(oom));
        }
        Ok(())
    }

    /// The spawner and the watcher, started on first use.
    fn oom_teller(&self) -> std::io::Result<&Arc<OomTeller>> {
        if let Some(t) = self.oom_teller.get() {
            return Ok(t);
        }
        let t = OomTeller::start()?;
        Ok(self.oom_teller.get_or_init(|| t))
    }

    fn helpers(&self) -> anyhow::Result<(&Spawner, &Watcher)> {
        let spawner = match self.spawner.get() {
            Some(s) => s,
            None => {
                let s = Spawner::start().context("starting the process spawner")?;
                self.spawner.get_or_init(|| s)
            }
        };
        let watcher = match self.watcher.get() {
            Some(w) => w,
            None => {
                let w = Watcher::start(spawner.clone()).context("starting the process watcher")?;
                self.watcher.get_or_init(|| w)
            }
        };
        Ok((spawner, watcher))
    }
}

/// The thread that sees commands end (their pidfds become readable), records how, and
/// restarts failed ones that asked for it. It holds commands weakly: a node torn down
/// takes its commands out of its sight.
struct Watcher {
    /// Protects the list of watched commands; the watcher copies it out each round.
    procs: Arc<Mutex<Vec<Weak<Proc>>>>,
    /// A byte here wakes the watcher to look at its list again.
    wake: UnixStream,
}

const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

impl Watcher {
    fn start(spawner: Spawner) -> std::io::Result<Watcher> {
        let procs = Arc::new(Mutex::new(order::WATCHED_PROCS, Vec::<Weak<Proc>>::new()));
        let list = procs.clone();
        // The thread's socket pair is made at home: a socket keeps the namespace it was
        // made in alive.
        let pair = || {
            let (wake, woken) = UnixStream::pair()?;
            woken.set_nonblocking(true)?;
            Ok((wake, woken))
        };
        let wake = thread_at_home("nsfleet-watch", pair, move |woken| loop {
            list.lock().retain(|p| p.strong_count() > 0);
            let live: Vec<Arc<Proc>> = list.lock().iter().filter_map(Weak::upgrade).collect();
            if !watch_round(&live, &woken, &spawner) {
                return;
            }
        })?;
        Ok(Watcher { procs, wake })
    }

    fn add(&self, p: &Arc<Proc>) {
        self.procs.lock().push(Arc::downgrade(p));
        let _ = std::io::Write::write(&mut &self.wake, &[1]);
    }
}

/// One round of the watcher: waits for an exit, a restart that is due, or a wake-up, and
/// handles what happened. False once the fleet's end of the wake-up socket is gone.
fn watch_round(live: &[Arc<Proc>], woken: &UnixStream, spawner: &Spawner) -> bool {
    let now = Instant::now();
    let mut timeout = Duration::from_secs(60);
    let mut fds: Vec<Arc<OwnedFd>> = Vec::new();
    let mut owners: Vec<&Arc<Proc>> = Vec::new();
    for p in live {
        let run = p.run.lock();
        if run.exit.is_none() {
            fds.push(run.pidfd.clone());
            owners.push(p);
        } else if let Some(at) = run.again_at {
            timeout = timeout.min(at.saturating_duration_since(now));
        }
    }
    let mut all: Vec<_> = fds.iter().map(|f| f.as_fd()).collect();
    all.push(woken.as_fd());
    let Ok(ready) = sys::poll_readable(&all, Some(timeout)) else {
        return true;
    };
    if ready[fds.len()] {
        let mut buf = [0u8; 64];
        if matches!(std::io::Read::read(&mut &*woken, &mut buf), Ok(0)) {
            return false;
        }
    }
    for (p, _) in owners.iter().zip(&ready).filter(|(_, r)| **r) {
        ended(p);
    }
    for p in live {
        let due = {
            let run = p.run.lock();
            !run.stopping && run.again_at.is_some_and(|at| at <= Instant::now())
        };
        if due {
            start_again(p, spawner);
        }
    }
    true
}

impl Proc {
    fn tell(&self, e: impl FnOnce(String, String) -> ProcessEvent) {
        if let Some(events) = &self.events {
            events(crate::Event::Process(e(
                self.node.clone(),
                self.command.clone(),
            )));
        }
    }

    /// Tells that a run started; called with no lock held.
    fn tell_started(&self, pid: i64) {
        self.tell(|node, command| ProcessEvent::ProcessStarted { node, pid, command });
    }

    /// Tells how a run ended; called with no lock held.
    fn tell_exited(&self, pid: i64, exit: Exit) {
        self.tell(|node, command| ProcessEvent::ProcessExited {
            node,
            pid,
            command,
            exit,
        });
    }
}

/// Records how a command ended, and when it starts again if it failed and may.
fn ended(p: &Proc) {
    let mut run = p.run.lock();
    if run.exit.is_some() {
        return;
    }
    // Its pidfd is readable, so it has ended; no status means it was reaped elsewhere.
    let exit = sys::try_wait_pidfd(run.pidfd.as_fd()).unwrap_or(Exit::Unknown);
    sys::unwatch_child(run.pid);
    run.exit = Some(exit);
    let pid = run.host_pid;
    if p.restart && exit.failed() && !run.stopping {
        let backoff = FIRST_BACKOFF
            .saturating_mul(1 << run.restarts.min(5))
            .min(MAX_BACKOFF);
        run.again_at = Some(Instant::now() + backoff);
    }
    // Told with no lock held: whoever listens may be slow.
    drop(run);
    p.oom.tell_new(Some(&p.command));
    p.tell_exited(pid, exit);
}

fn start_again(p: &Proc, spawner: &Spawner) {
    let r = spawner.spawn(&p.launch, &p.log, &p.world);
    let mut run = p.run.lock();
    run.again_at = None;
    match r {
        Ok((pid, pidfd)) if !run.stopping => {
            run.pid = pid;
            run.host_pid = sys::host_pid_of(pidfd.as_fd()).unwrap_or(pid as i64);
            run.pidfd = Arc::new(pidfd);
            run.exit = None;
            run.restarts += 1;
            let pid = run.host_pid;
            drop(run);
            p.tell_started(pid);
        }
        Ok((pid, pidfd)) => {
            // Torn down meanwhile: this run is not wanted.
            let _ = sys::kill_group(pid, libc::SIGKILL);
            let _ = sys::poll_exited(&[pidfd.as_fd()], Duration::from_secs(5));
            sys::reap_pidfd(pidfd.as_fd());
            sys::unwatch_child(pid);
        }
        Err(_) => {
            // The node's world is gone (torn down): nothing to restart into.
        }
    }
}

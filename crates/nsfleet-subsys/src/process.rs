//! Processes per node: the topology's `commands`, started inside the node's world (see
//! `world`) once the fleet is configured, each through `/bin/sh -c` in a process group of
//! its own, with NSFLEET_FLEET, NSFLEET_NODE and NSFLEET_INDEX set, their placeholders
//! filled, stdout and stderr appended to `<log dir>/<node>.log`.
//!
//! At teardown `exit` sends SIGTERM to every group of the node and to its world's init;
//! `exit_batch` then waits for the whole batch at once on pidfds, SIGKILLs what is left
//! after the grace period, and reaps; then the same for the inits, whose exit takes every
//! other process of their nodes (daemons that left their group) with them. Processes also
//! die with the fleet's owner: PR_SET_PDEATHSIG here, and the supervisor's PID namespace.

use crate::world::{self, World};
use nsfleet_core::{InitCtx, Node, Phase, Subsystem};
use nsfleet_sys as sys;
use nsfleet_topology::template::{self, Vars};

use anyhow::Context;
use crossbeam_channel::Sender;
use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

pub struct Processes {
    /// How long processes get between SIGTERM and SIGKILL.
    pub grace: Duration,
    fleet: String,
    spawner: OnceLock<Spawner>,
    /// The fleet's /etc/hosts, written on the first node's start.
    hosts: OnceLock<Option<PathBuf>>,
}

impl Processes {
    pub fn new(fleet: &str) -> Self {
        Processes {
            grace: Duration::from_secs(3),
            fleet: fleet.to_string(),
            spawner: OnceLock::new(),
            hosts: OnceLock::new(),
        }
    }
}

struct Proc {
    /// As fork returned it: in the supervisor's own PID namespace, and the process group.
    pid: i32,
    pidfd: OwnedFd,
    command: String,
}

/// A node's processes and their world (this subsystem's per-node state).
#[derive(Default)]
pub struct Procs {
    world: Option<World>,
    list: Vec<Proc>,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ProcInfo {
    /// The pid as the host sees it.
    pub pid: i64,
    pub command: String,
    pub running: bool,
}

impl Procs {
    /// A pidfd of the node's init, to enter its world by (`exec`).
    pub fn world_pidfd(&self) -> Option<OwnedFd> {
        self.world.as_ref().and_then(|w| w.pidfd.try_clone().ok())
    }

    pub fn describe(&self) -> Vec<ProcInfo> {
        self.list
            .iter()
            .map(|p| {
                let running = matches!(sys::poll_exited(&[p.pidfd.as_fd()], Duration::ZERO), Ok(0));
                ProcInfo {
                    pid: sys::host_pid_of(p.pidfd.as_fd()).unwrap_or(p.pid as i64),
                    command: p.command.clone(),
                    running,
                }
            })
            .collect()
    }

    fn signal_all(&self, sig: libc::c_int) {
        for p in &self.list {
            // ESRCH: the group is already gone.
            let _ = sys::kill_group(p.pid, sig);
        }
    }
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

    fn init(&self, cx: &mut InitCtx<'_>, procs: &mut Procs) -> anyhow::Result<()> {
        let node = cx.node;
        let log = cx.log_dir.join(format!("{}.log", node.name()));
        let hosts = self.hosts.get_or_init(|| {
            let path = cx.log_dir.join("hosts");
            world::write_hosts(&path, cx.peers().iter().map(|n| &**n))
                .ok()
                .map(|_| path)
        });
        let log_file = OpenOptions::new().create(true).append(true).open(&log)?;
        let w = world::start(node, &self.fleet, &log_file, hosts.as_deref())
            .with_context(|| format!("node {} (log {})", node.name(), log.display()))?;
        let enter = w.pid;
        procs.world = Some(w);
        let vars = Vars {
            name: node.name(),
            number: node.number(),
            fleet: &self.fleet,
            wiring: node.wiring(),
        };
        let env = [
            ("NSFLEET_FLEET", self.fleet.clone()),
            ("NSFLEET_NODE", node.name().to_string()),
            ("NSFLEET_INDEX", node.number().to_string()),
        ];
        let spawner = match self.spawner.get() {
            Some(s) => s,
            None => {
                let s = Spawner::start().context("starting the process spawner")?;
                self.spawner.get_or_init(|| s)
            }
        };
        for command in &node.config().commands {
            let command = template::expand(command, &vars);
            match spawner.spawn(&command, &log, enter, &env) {
                Ok(p) => procs.list.push(p),
                Err(e) => {
                    // Leave nothing behind of our own: the core only undoes earlier subsystems.
                    self.exit(node, procs);
                    self.exit_batch(&mut [(node, procs)]);
                    return Err(anyhow::Error::from(e)
                        .context(format!("starting {command:?} (log {})", log.display())));
                }
            }
        }
        Ok(())
    }

    fn exit(&self, _node: &Node, procs: &mut Procs) {
        procs.signal_all(libc::SIGTERM);
        if let Some(w) = &procs.world {
            w.stop();
        }
    }

    fn exit_batch(&self, batch: &mut [(&Node, &mut Procs)]) {
        let all: Vec<&Proc> = batch.iter().flat_map(|(_, p)| p.list.iter()).collect();
        let fds: Vec<_> = all.iter().map(|p| p.pidfd.as_fd()).collect();
        // `exit` has sent SIGTERM to every group: one wait for the whole batch.
        if sys::poll_exited(&fds, self.grace).unwrap_or(0) < fds.len() {
            for (_, procs) in batch.iter() {
                procs.signal_all(libc::SIGKILL);
            }
            let _ = sys::poll_exited(&fds, Duration::from_secs(5));
        }
        // Reaped before the inits are waited for: an init waits until no other process
        // of its namespace is left, zombies included.
        for fd in fds {
            sys::reap_pidfd(fd);
        }
        let worlds: Vec<&World> = batch.iter().filter_map(|(_, p)| p.world.as_ref()).collect();
        let fds: Vec<_> = worlds.iter().map(|w| w.pidfd.as_fd()).collect();
        let grace = world::GRACE + Duration::from_secs(1);
        if sys::poll_exited(&fds, grace).unwrap_or(0) < fds.len() {
            for w in &worlds {
                let _ = sys::kill_pidfd(w.pidfd.as_fd(), libc::SIGKILL);
            }
            let _ = sys::poll_exited(&fds, Duration::from_secs(5));
        }
        for fd in fds {
            sys::reap_pidfd(fd);
        }
    }
}

/// Spawns node processes from a thread with a file-descriptor table of its own. A fork
/// copies the parent's descriptor table and exec then closes the copies, so spawning from
/// the supervisor, which holds one descriptor per node, cost O(nodes) per process
/// (measured: 1.5 ms each at 500 nodes, 2.5 ms at 2,000). This thread's table holds
/// stdio and its home namespace only.
struct Spawner {
    tx: Sender<Request>,
}

struct Request {
    /// The node's init, whose namespaces the command's are (its PID namespace by setns
    /// for children). A pid, not a descriptor: this thread has a descriptor table of its
    /// own. The init is our unreaped child, so its pid is not reused under us.
    world: libc::pid_t,
    env: Vec<(&'static str, String)>,
    command: String,
    log: PathBuf,
    reply: Sender<io::Result<libc::pid_t>>,
}

impl Spawner {
    fn start() -> io::Result<Self> {
        let (tx, rx) = crossbeam_channel::unbounded::<Request>();
        let (ready, started) = crossbeam_channel::bounded(1);
        std::thread::Builder::new()
            .name("nsfleet-spawner".into())
            .spawn(move || {
                // Home is the process's own namespace (the main thread's): this thread may be
                // started by a worker that is inside a node, and would inherit that node.
                let home = sys::private_fd_table(3)
                    .and_then(|_| sys::unshare_fs())
                    .and_then(|_| Home::open());
                match home {
                    Ok(home) => {
                        let _ = ready.send(Ok(()));
                        for req in rx.iter() {
                            let r = spawn_in_world(&req);
                            // Never stay in a node: this thread would keep it alive.
                            home.go().expect("spawner cannot return home");
                            let _ = req.reply.send(r);
                        }
                    }
                    Err(e) => {
                        let _ = ready.send(Err(e));
                    }
                }
            })?;
        started
            .recv()
            .map_err(|_| io::Error::other("the spawner thread died"))??;
        Ok(Spawner { tx })
    }

    /// Starts `/bin/sh -c command` in the world of the init `world`, output appended to
    /// `log`.
    fn spawn(
        &self,
        command: &str,
        log: &Path,
        world: libc::pid_t,
        env: &[(&'static str, String)],
    ) -> io::Result<Proc> {
        let (reply, answer) = crossbeam_channel::bounded(1);
        // Held until we have the pidfd: the PID-1 orphan sweep must not reap it first.
        let _guard = sys::spawn_guard();
        self.tx
            .send(Request {
                world,
                env: env.to_vec(),
                command: command.to_string(),
                log: log.to_path_buf(),
                reply,
            })
            .map_err(|_| io::Error::other("the spawner thread is gone"))?;
        let pid = answer
            .recv()
            .map_err(|_| io::Error::other("the spawner thread is gone"))??;
        Ok(Proc {
            pid,
            pidfd: sys::pidfd_open(pid)?,
            command: command.to_string(),
        })
    }
}

/// The spawner thread's own namespaces, to come back to after each spawn.
struct Home {
    net: OwnedFd,
    mnt: OwnedFd,
    uts: OwnedFd,
    pid: OwnedFd,
}

impl Home {
    fn open() -> io::Result<Home> {
        Ok(Home {
            net: sys::open_process_netns()?,
            mnt: sys::open_thread_ns("mnt")?,
            uts: sys::open_thread_ns("uts")?,
            pid: sys::open_thread_ns("pid")?,
        })
    }

    fn go(&self) -> io::Result<()> {
        sys::setns_net(self.net.as_fd())?;
        sys::setns(self.mnt.as_fd(), libc::CLONE_NEWNS)?;
        sys::setns(self.uts.as_fd(), libc::CLONE_NEWUTS)?;
        sys::setns(self.pid.as_fd(), libc::CLONE_NEWPID)
    }
}

fn spawn_in_world(req: &Request) -> io::Result<libc::pid_t> {
    // Opened before entering: the node has a /run of its own, where the host's run folder
    // is not.
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&req.log)?;
    let all = libc::CLONE_NEWNET | libc::CLONE_NEWNS | libc::CLONE_NEWUTS | libc::CLONE_NEWPID;
    sys::setns_pidfd(sys::pidfd_open(req.world)?.as_fd(), all)?;
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(&req.command)
        .envs(req.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    nsfleet_core::fault::point("starting a process")?;
    sys::spawn_node_process(&mut cmd)
}

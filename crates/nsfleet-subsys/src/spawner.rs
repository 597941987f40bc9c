//! The spawner: the threads that start node processes, inside their nodes' worlds.

use crossbeam_channel::Sender;
use nsfleet_sys as sys;
use std::ffi::{OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Spawns node processes from threads with a file-descriptor table each of their own. A
/// fork copies the parent's descriptor table and exec then closes the copies, so spawning
/// from the supervisor, which holds one descriptor per node, cost O(nodes) per process
/// (measured: 1.5 ms each at 500 nodes, 2.5 ms at 2,000). Their tables hold stdio and
/// their home namespace only.
#[derive(Clone)]
pub(crate) struct Spawner {
    tx: Sender<Request>,
}

struct Request {
    world: WorldRef,
    launch: Launch,
    log: PathBuf,
    reply: Sender<io::Result<libc::pid_t>>,
}

/// The world a node process starts in.
#[derive(Clone, Debug)]
pub(crate) struct WorldRef {
    /// The node's init, whose namespaces the command's are (its PID namespace by setns
    /// for children), as its pid and start time: a pid, not a descriptor, as this thread
    /// has a descriptor table of its own; with the start time, as the pid of an init that
    /// has died may have been given to another process (see `open_world`).
    pub init: (libc::pid_t, u64),
    /// The node's cgroup (a folder per hierarchy, as its limits last left it), which the
    /// process joins first.
    pub cgroup: std::sync::Arc<crate::world::cgroups::CurrentGroup>,
    /// What the node's processes give up as they start.
    pub restrictions: sys::confine::Restrictions,
}

/// What a node process is started as.
#[derive(Clone, Debug)]
pub(crate) struct Launch {
    /// The program and its arguments: a command line is `/bin/sh -c LINE`.
    pub argv: Vec<String>,
    /// Its whole environment (see `process::environment`).
    pub env: Vec<(String, String)>,
    /// The working directory, in the node's root.
    pub workdir: Option<String>,
    /// Who it runs as (`name`, `uid`, `name:group`, `uid:gid`), looked up in the node's
    /// own /etc/passwd and /etc/group; root when `None`.
    pub user: Option<String>,
}

impl Launch {
    /// A shell command line, as `commands` are run.
    pub(crate) fn shell(line: &str, like: &Launch) -> Launch {
        Launch {
            argv: ["/bin/sh", "-c", line].map(String::from).to_vec(),
            ..like.clone()
        }
    }
}

impl Spawner {
    /// Its threads, one per CPU, taking requests from one queue: `up` starts every node's
    /// commands in a phase of its own (Launch), where the workers ask for spawns at once
    /// and one thread served them in turn (1,000 image nodes, that phase: 0.61-0.68 s
    /// with one thread, 0.55-0.61 s with two, confined).
    pub(crate) fn start() -> io::Result<Self> {
        let (tx, rx) = crossbeam_channel::unbounded::<Request>();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        for _ in 0..threads {
            spawner_thread(rx.clone())?;
        }
        Ok(Spawner { tx })
    }

    /// Starts `launch` in the world of the init `world`, output appended to `log`.
    pub(crate) fn spawn(
        &self,
        launch: &Launch,
        log: &Path,
        world: &WorldRef,
    ) -> io::Result<(libc::pid_t, OwnedFd)> {
        let (reply, answer) = crossbeam_channel::bounded(1);
        // Held until the child is watched: the PID-1 orphan sweep must not reap it, its
        // exit status is ours.
        let _guard = sys::spawn_guard();
        self.tx
            .send(Request {
                world: world.clone(),
                launch: launch.clone(),
                log: log.to_path_buf(),
                reply,
            })
            .map_err(|_| io::Error::other("the spawner's threads are gone"))?;
        let pid = answer
            .recv()
            .map_err(|_| io::Error::other("the spawner's threads are gone"))??;
        sys::watch_child(pid);
        match sys::pidfd_open(pid) {
            Ok(fd) => Ok((pid, fd)),
            Err(e) => {
                sys::unwatch_child(pid);
                Err(e)
            }
        }
    }
}

/// Starts one spawner thread on `rx`, and returns once it is home and ready.
fn spawner_thread(rx: crossbeam_channel::Receiver<Request>) -> io::Result<()> {
    let (ready, started) = crossbeam_channel::bounded(1);
    std::thread::Builder::new()
        .name("nsfleet-spawner".into())
        .spawn(move || {
            // Best effort, as the workers: its children go back to nice 0 at exec.
            let _ = sys::prefer_this_thread();
            // Home (the process's own namespaces) at once: this thread may be started
            // by a worker inside a node, whose namespace it would keep alive.
            let home = sys::private_fd_table(3)
                .and_then(|_| sys::unshare_fs())
                .and_then(|_| Home::open())
                .and_then(|h| h.go().map(|()| h));
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
        .map_err(|_| io::Error::other("the spawner thread died"))?
}

/// A pidfd of the init `(pid, start time)`, if that is still who has the pid: the pidfd
/// pins the process, and its start time tells it from a later one with the same pid.
fn open_world((pid, start_time): (libc::pid_t, u64)) -> io::Result<OwnedFd> {
    let fd = sys::pidfd_open(pid)?;
    if sys::started_at(fd.as_fd()) != Some(start_time) {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(fd)
}

/// The namespaces a node process is started in, and those the spawner comes back to. A
/// confined node's user namespace is entered by the process itself (a thread cannot),
/// and then its cgroup namespace, which that user namespace owns: the spawner stays in
/// its process's, where the node's group's files are opened (a user's fleet is in the
/// host's, which it could not enter again).
const WORLD: libc::c_int = libc::CLONE_NEWNET
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWIPC;

/// The spawner thread's home: a pidfd of its own process, whose main thread has the
/// process's namespaces, to come back to after each spawn in one `setns`.
struct Home(OwnedFd);

impl Home {
    fn open() -> io::Result<Home> {
        Ok(Home(sys::pidfd_open(std::process::id() as libc::pid_t)?))
    }

    fn go(&self) -> io::Result<()> {
        sys::setns(self.0.as_fd(), WORLD)
    }
}

fn spawn_in_world(req: &Request) -> io::Result<libc::pid_t> {
    // Opened before entering: the node has a /run of its own, where the host's run folder
    // is not.
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&req.log)?;
    let world = open_world(req.world.init)?;
    let userns = sys::userns::of_process(world.as_fd())?;
    // Opened here, in the fleet's cgroup namespace (the host's) and as its root: the
    // process joins before it is the node's root.
    let cgroups = req.world.cgroup.get().procs_files()?;
    // A confined node's own (see nsfleet-subsys's world); another's is the fleet's.
    let cgroupns = (userns.as_ref())
        .map(|_| sys::userns::cgroup_ns_of(world.as_fd()))
        .transpose()?;
    sys::setns(world.as_fd(), WORLD)?;
    let l = &req.launch;
    let Some((program, args)) = l.argv.split_first() else {
        return Err(io::Error::other("nothing to run"));
    };
    let ids = match &l.user {
        // Read now, in the node's root: its users are its image's.
        Some(u) => Some(sys::host::user_ids(u)?),
        None => None,
    };
    let null = File::open("/dev/null")?;
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    let env: Vec<(OsString, OsString)> = (l.env.iter())
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect();
    nsfleet_core::fault::point("starting a process")?;
    sys::spawn_node_process(&sys::Exec {
        program: OsStr::new(program),
        args: &args,
        env: &env,
        stdio: [null.as_fd(), log.as_fd(), log.as_fd()],
        cwd: l.workdir.as_deref().map(OsStr::new),
        ids,
        userns: userns.as_ref().map(|u| u.as_fd()),
        cgroups: &cgroups.iter().map(|f| f.as_fd()).collect::<Vec<_>>(),
        cgroupns: cgroupns.as_ref().map(|c| c.as_fd()),
        restrictions: req.world.restrictions,
    })
}

//! A node's world: what a node that runs software has besides its network namespace, as
//! a container would. Its own PID namespace, whose init (`nsfleet-node`) holds the others
//! and takes every process of the node with it when it goes (daemons that double-fork
//! included); its own UTS namespace (host name = node name); its own mount namespace with
//! a private /run, /proc and /sys of its own, its private directories and files, and the
//! fleet's /etc/hosts.
//!
//! Everything is made inside the new mount namespace, after it is made private: the
//! host's /etc, /run and /var are never written, and nothing mounted survives the node.
//! Its cgroup (see [`cgroups`]) limits it and counts what it uses. Used by the
//! `processes` subsystem, which starts the node's commands in the world.

pub mod cgroups;
mod seccomp;

use anyhow::{anyhow, Context};
use nsfleet_core::Node;
use nsfleet_sys as sys;
use nsfleet_topology::template::{self, Vars};
use nsfleet_topology::{
    private_holder, Bind, FileSource, NodeWiring, PrivateDir, HOSTS, PRIVATE_RUN,
};
use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The name of a node's init (`comm`), as `ps -e` shows it.
pub const INIT_NAME: &std::ffi::CStr = c"nsfleet-node";

/// A node's world, alive as long as its init runs.
pub struct World {
    /// The init's pid as the supervisor sees it.
    pub pid: i32,
    /// When it started (with the pid, an identity that a recycled pid does not have).
    pub start_time: u64,
    /// The init's pid in the host's /proc (the supervisor's PID namespace is its own).
    pub host_pid: Option<i64>,
    /// Its cgroup, which every process of the node joins; removed with the world, once
    /// the init is reaped.
    pub cgroup: cgroups::NodeGroup,
    /// What each process of the node gives up as it starts.
    pub restrictions: sys::confine::Restrictions,
}

/// What the init sets up, computed before the fork.
struct Layout {
    /// See [`Shared::users`].
    users: bool,
    hostname: String,
    dirs: Vec<PrivateDir>,
    files: Vec<(String, String)>,
    binds: Vec<Bind>,
    hosts: Option<String>,
    /// The image the node's root is made of, if it runs one.
    image: Option<ImageLayout>,
    /// Its cgroup's folders, which the init joins first.
    cgroup: Vec<PathBuf>,
    /// Its cgroup's hierarchies, mounted at /sys/fs/cgroup for a confined node (which has
    /// a cgroup namespace of its own), as Docker's containers have them.
    cgroup_view: Vec<sys::cgroup::View>,
    /// The size of its /dev/shm, if not Docker's 64 MB.
    shm_bytes: Option<u64>,
    /// The host's devices it was given (`devices`), made for it.
    devices: Vec<nsfleet_topology::Device>,
    /// Whether Docker's masked and read-only paths are applied to its /proc and /sys
    /// (a confined node's, unless lifted).
    masks: bool,
}

/// A root made of an image's layers and a writable layer of the node's own.
struct ImageLayout {
    /// The layers as overlayfs's `lowerdir` (top first), relative to `layers_dir`.
    lower: String,
    /// The folder the layers share: the init works from there, so that `lower` fits in
    /// the page that mount(2) takes its options in (about 60 layers).
    layers_dir: String,
    /// What the node's /etc/hostname and /etc/resolv.conf say.
    etc: [(&'static str, String); 2],
}

/// The host's devices a node's own /dev gets (an image node's, a confined node's), as
/// Docker's containers.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// Devices made for a node rather than bound from the host's /dev (see
/// `sys::device_files`), where the host has them: (path in the node, major, minor). A
/// node's own /dev gets them: a confined root may not open the host's own (this
/// machine's /dev/net/tun is its root's alone).
const OWN_DEVICES: &[(&str, u32, u32)] = &[("/dev/net/tun", 10, 200), ("/dev/fuse", 10, 229)];

/// Where [`mount_own_devices`] attaches the node's devices' tmpfs for the while.
const DEVICES_SCRATCH: &str = "/dev/.nsfleet-devices";

/// How long a world's init may take to set it up.
const SETUP_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a world's init waits for the node's processes after SIGTERM before it exits
/// (and the kernel kills the rest).
pub const GRACE: Duration = Duration::from_secs(3);

/// What every world of a fleet shares, made once, on the first node's start.
pub struct Shared {
    /// The fleet's hosts file, if it could be written (see [`write_hosts`]).
    pub hosts: Option<PathBuf>,
    /// What an image node's /etc/resolv.conf says (see [`resolv_conf`]).
    resolv_conf: String,
    /// The fleet's cgroup (none for a user's), or why it could not be made (each node's
    /// start says it).
    cgroup: Result<Option<cgroups::FleetGroup>, String>,
    /// The fleet is a user's (its supervisor root of a user namespace the user made, not
    /// the host's): it may make no device and no idmapped mount. Read once, here.
    users: bool,
}

impl Shared {
    /// For the fleet `fleet` whose nodes are `peers` and whose logs go to `log_dir`; its
    /// cgroup journalled in `cgroup_journal`.
    pub fn new<'a>(
        fleet: &str,
        log_dir: &Path,
        cgroup_journal: &Path,
        peers: impl Iterator<Item = &'a Node>,
    ) -> Shared {
        let hosts = log_dir.join(HOSTS_FILE);
        Shared {
            hosts: write_hosts(&hosts, peers).ok().map(|()| hosts),
            resolv_conf: resolv_conf(),
            cgroup: cgroups::FleetGroup::make(fleet, cgroup_journal).map_err(|e| format!("{e:#}")),
            users: !sys::userns::in_host_namespace().unwrap_or(false),
        }
    }
}

/// Builds the world of `node`, whose network namespace the calling thread is in. `log` is
/// where its init's own output goes.
pub fn start(node: &Node, fleet: &str, log: &File, shared: &Shared) -> anyhow::Result<World> {
    let cgroup = match shared.cgroup.as_ref().map_err(|e| anyhow!("{e}"))? {
        Some(fleet_group) => fleet_group.node(node.name(), &node.config().limits)?,
        None => cgroups::NodeGroup::none(),
    };
    let mut layout = layout(node, fleet, shared)?;
    let group = cgroup.0.get();
    layout.cgroup = group.paths().map(Path::to_path_buf).collect();
    let (ours, theirs) = UnixStream::pair().context("a socket pair for the node's init")?;
    let null = File::open("/dev/null")?;
    // A confined node's network namespace is owned by its user namespace (see
    // nsfleet-core's `Worker::enter_new_confined`): its world is made in it too.
    let userns = sys::userns::owner_if_other(sys::current_netns()?.as_fd())?;
    let confined = userns.is_some();
    layout.masks &= confined;
    if confined {
        layout.cgroup_view = group.views();
    }
    let restrictions = restrictions(&node.config(), confined)?;
    let mut fds = vec![null.as_fd(), log.as_fd(), log.as_fd(), theirs.as_fd()];
    fds.extend(userns.as_ref().map(|u| u.as_fd()));
    let how = sys::HelperStart {
        name: INIT_NAME,
        fds: &fds,
        new_session: true,
        unblock_signals: true,
    };
    // A confined node's init is PID 1 of a PID namespace its user namespace owns, made
    // before the fork: its root may then mount the node's /proc.
    let pidns = (userns.as_ref())
        .map(|u| sys::userns::new_pid_ns_in(u.as_fd()))
        .transpose()
        .context("a PID namespace in the node's user namespace")?;
    let init = |kept: &sys::KeptFds| {
        // First, while the host's root in the host's cgroup namespace: every process the
        // node will have is forked from here, or joins as it starts.
        if let Err(e) = sys::cgroup::join_dirs(&layout.cgroup) {
            say(kept, &format!("joining the node's cgroup: {e}\n"));
            return 1;
        }
        let sources = match kept.get(USERNS_SLOT) {
            None => (sys::unshare_mounts(libc::CLONE_NEWUTS, libc::MS_PRIVATE))
                .map_err(|e| format!("new mount and UTS namespaces: {e}"))
                .and_then(|()| open_sources(&layout, None)),
            Some(userns) => confine(&layout, userns),
        };
        init_main(&layout, kept, sources)
    };
    let _guard = sys::spawn_guard();
    let forked = match &pidns {
        None => sys::fork_pid_ns_init(&how, init),
        Some(pidns) => sys::fork_init_of(&how, pidns.as_fd(), init),
    };
    let pid = forked.context("forking the node's init")?;
    let pidfd = sys::pidfd_open(pid).context("a pidfd for the node's init")?;
    let host_pid = sys::host_pid_of(pidfd.as_fd());
    let start_time = (host_pid.and_then(|p| sys::running_since(p as libc::pid_t))).unwrap_or(0);
    drop(pidfd);
    drop(_guard);
    drop(theirs);
    let world = World {
        pid,
        start_time,
        host_pid,
        cgroup,
        restrictions,
    };
    ours.set_read_timeout(Some(SETUP_TIMEOUT))?;
    let mut line = String::new();
    let read = BufReader::new(&ours).read_line(&mut line);
    if line == "ok\n" {
        return Ok(world);
    }
    world.kill();
    let why = match read {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            format!("its init was not done after {SETUP_TIMEOUT:?}, and was killed")
        }
        _ if line.is_empty() => "its init died without a word (see the node's log)".to_string(),
        _ => line.trim_end().to_string(),
    };
    Err(anyhow!("setting up the node's world: {why}"))
}

/// Changes the limits of node `name`'s running world to `limits`, in place (see
/// [`cgroups::FleetGroup::relimit`]).
pub fn relimit(
    name: &str,
    world: &World,
    shared: &Shared,
    limits: &nsfleet_topology::Limits,
) -> anyhow::Result<()> {
    match shared.cgroup.as_ref().map_err(|e| anyhow!("{e}"))? {
        Some(fleet_group) => fleet_group.relimit(name, &world.cgroup.0, limits),
        None => Err(anyhow!(
            "a user's fleet has no cgroups to limit its nodes in"
        )),
    }
}

/// Where a confined node's init keeps its user namespace among its descriptors.
const USERNS_SLOT: usize = 4;

/// A confined node's init, still the host's root in the host's mount namespace: opens
/// what only the host's root may (see [`open_sources`]), then enters the node's user
/// namespace as its root and new mount, UTS, IPC and cgroup namespaces of its own, which
/// that user namespace owns.
fn confine(l: &Layout, userns: std::os::fd::BorrowedFd<'_>) -> Result<Sources, String> {
    let sources = open_sources(l, Some(userns))?;
    sys::userns::become_root_in(userns)
        .map_err(|e| format!("entering the node's user namespace: {e}"))?;
    let new = libc::CLONE_NEWUTS | libc::CLONE_NEWIPC | libc::CLONE_NEWCGROUP;
    sys::unshare_mounts(new, libc::MS_PRIVATE)
        .map_err(|e| format!("new mount, UTS, IPC and cgroup namespaces: {e}"))?;
    Ok(sources)
}

/// An error of the init's, said as what it was doing (`what`) and the kernel's answer: a
/// plain string, as everything the forked init says (see [`setup`]).
fn at(what: &str) -> impl FnOnce(std::io::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// Says `line` (one line) to the supervisor, on the init's descriptor 3.
fn say(kept: &sys::KeptFds, line: &str) {
    if let Some(fd) = kept.get(3).and_then(|fd| fd.try_clone_to_owned().ok()) {
        let _ = File::from(fd).write_all(line.as_bytes());
    }
}

/// The init, in its new mount namespace with what it mounts opened: sets the world up,
/// says "ok" or why not, and runs the init's loop.
fn init_main(l: &Layout, kept: &sys::KeptFds, sources: Result<Sources, String>) -> i32 {
    if let Err(m) = sources.and_then(|s| setup(l, s)) {
        say(kept, &format!("{}\n", m.replace('\n', " ")));
        return 1;
    }
    sys::run_node_init(GRACE, || say(kept, "ok\n"))
}

impl World {
    /// A pidfd of the init: to enter its world by (`setns`), signal it, or see it end.
    /// Opened when needed, not kept: a fleet of 10,000 nodes would hold 10,000 more
    /// descriptors. The pid is the init's for as long as the `World` is: the init is the
    /// supervisor's child, reaped only through such a pidfd ([`World::kill`], the processes
    /// subsystem's teardown): the child watcher waits only for the pids it is given.
    pub fn pidfd(&self) -> std::io::Result<OwnedFd> {
        sys::pidfd_open(self.pid)
    }

    /// Sends the init `sig`.
    pub fn signal(&self, sig: libc::c_int) -> std::io::Result<()> {
        sys::kill_pidfd(self.pidfd()?.as_fd(), sig)
    }

    /// Asks the init to end the node's processes and exit (see `sys::run_node_init`).
    pub fn stop(&self) {
        let _ = self.signal(libc::SIGTERM);
    }

    /// Ends it at once, and reaps it.
    pub fn kill(&self) {
        if let Ok(fd) = self.pidfd() {
            let _ = sys::kill_pidfd(fd.as_fd(), libc::SIGKILL);
            let _ = sys::poll_exited(&[fd.as_fd()], Duration::from_secs(5));
            sys::reap_pidfd(fd.as_fd());
        }
    }
}

/// What a node's processes give up as they start (see `sys::confine`): the capabilities
/// it drops, and with `no-new-privileges`, what exec would give; and for a `confined`
/// node (one in a user namespace of its own: not `privileged`, nor in a fleet brought up
/// `--privileged`), Docker's seccomp filter unless lifted. An unconfined node has none,
/// as Docker's privileged containers.
pub fn restrictions(
    config: &nsfleet_topology::NodeConfig,
    confined: bool,
) -> anyhow::Result<sys::confine::Restrictions> {
    use nsfleet_topology::Seccomp;
    use sys::confine::Filter;
    let s = &config.security;
    let seccomp = match &s.seccomp {
        _ if !confined => Filter::None,
        Seccomp::Unconfined => Filter::None,
        Seccomp::Docker => Filter::Docker,
        Seccomp::Profile(p) => Filter::Profile(seccomp::compile(p, s.drop_capabilities)?),
    };
    Ok(sys::confine::Restrictions {
        drop_capabilities: s.drop_capabilities,
        seccomp,
        no_new_privileges: s.no_new_privileges,
    })
}

/// The node's host name: its `hostname` template filled, else its name.
pub(crate) fn hostname(node: &Node, vars: &Vars<'_>) -> String {
    let config = node.config();
    (config.hostname.as_deref()).map_or(node.name().to_string(), |h| template::expand(h, vars))
}

/// The node's files copied from the host: (its path in the node, the host's file), each
/// template filled; for messages that point at what the user wrote.
pub fn host_files(node: &Node, fleet: &str) -> Vec<(String, String)> {
    let (config, wiring) = (node.config(), node.wiring());
    let vars = vars(node, fleet, &wiring);
    (config.files.iter())
        .filter_map(|f| match &f.source {
            FileSource::Path(p) => {
                Some((template::expand(&f.path, &vars), template::expand(p, &vars)))
            }
            FileSource::Inline(_) => None,
        })
        .collect()
}

/// What a node's templates are filled with.
pub(crate) fn vars<'a>(node: &'a Node, fleet: &'a str, wiring: &'a NodeWiring) -> Vars<'a> {
    Vars {
        name: node.name(),
        number: node.number(),
        fleet,
        wiring,
    }
}

fn layout(node: &Node, fleet: &str, shared: &Shared) -> anyhow::Result<Layout> {
    let (config, wiring) = (node.config(), node.wiring());
    let vars = vars(node, fleet, &wiring);
    let mut files = Vec::new();
    for f in &config.files {
        let text = match &f.source {
            FileSource::Inline(t) => t.clone(),
            FileSource::Path(p) => nsfleet_topology::read_source(&template::expand(p, &vars))
                .map_err(|m| anyhow!(m))?,
        };
        files.push((
            template::expand(&f.path, &vars),
            template::expand(&text, &vars),
        ));
    }
    let hostname = hostname(node, &vars);
    let image = match config.image.as_ref().and_then(|i| i.found.as_ref()) {
        Some(found) => Some(image_layout(found, shared, &hostname)?),
        None => None,
    };
    Ok(Layout {
        users: shared.users,
        image,
        cgroup: Vec::new(),
        cgroup_view: Vec::new(),
        shm_bytes: config.limits.shm_bytes,
        devices: config.security.devices.clone(),
        masks: config.security.system_paths,
        hostname,
        dirs: config.dirs.clone(),
        files,
        binds: config.binds.clone(),
        // The fleet's Open vSwitch resolves no node's name (its controllers are
        // addresses), and ovs-vswitchd's resolver (libunbound) keeps every name of the
        // hosts file it reads: it reads the host's, as a Mininet host's does.
        hosts: (shared.hosts.as_deref())
            .filter(|_| Path::new(HOSTS).is_file() && config.ovs_hub.is_none())
            .map(|p| p.display().to_string()),
    })
}

/// Where the node's root comes from, and what its /etc is given.
fn image_layout(
    found: &nsfleet_topology::ImageRoot,
    shared: &Shared,
    hostname: &str,
) -> anyhow::Result<ImageLayout> {
    let Some(layers_dir) = found.layers.first().and_then(|l| Path::new(l).parent()) else {
        return Err(anyhow!("image {} has no layers", found.id));
    };
    let mut lower = Vec::new();
    for l in found.layers.iter().rev() {
        let l = Path::new(l);
        if l.parent() != Some(layers_dir) {
            return Err(anyhow!(
                "image {}: its layers are not in one folder",
                found.id
            ));
        }
        lower.extend(l.file_name().and_then(|n| n.to_str()));
    }
    Ok(ImageLayout {
        lower: lower.join(":"),
        layers_dir: layers_dir.display().to_string(),
        etc: [
            ("/etc/hostname", format!("{hostname}\n")),
            ("/etc/resolv.conf", shared.resolv_conf.clone()),
        ],
    })
}

/// The host's /etc/resolv.conf without the name servers on its loopback (which a node,
/// in a network namespace of its own, cannot reach), as Docker gives a container.
fn resolv_conf() -> String {
    let host = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    let loopback = |l: &str| {
        let mut w = l.split_whitespace();
        w.next() == Some("nameserver")
            && w.next()
                .is_some_and(|a| a.starts_with("127.") || a == "::1")
    };
    let mut out: String = (host.lines().filter(|l| !loopback(l)))
        .map(|l| format!("{l}\n"))
        .collect();
    out.insert_str(
        0,
        "# nsfleet: the host's name servers, but those on its loopback\n",
    );
    out
}

/// What a node's init mounts or copies of the host's, opened before its mounts change:
/// the fleet's run folder and the host's folders are the host's then. For a confined
/// node (`userns`), while the init is still the host's root, in the host's mount
/// namespace: each is a detached copy of its mount, and an image's layers are seen
/// through the node's ids.
struct Sources {
    hosts: Option<Source>,
    /// Each `dirs_from_host` folder's contents, read as the host's root reads them.
    from_host: Vec<Vec<Copied>>,
    bound: Vec<Source>,
    /// The host's devices a node's own /dev gets: (its path there, the device).
    devices: Vec<(String, Source)>,
    /// The devices made for the node (see [`OWN_DEVICES`]).
    own: Option<OwnDevices>,
    /// An image node's root, as far as it could be made before the node's mounts.
    root: Option<ImageRoot>,
}

/// An image node's root, made by the host's root (see [`build_root`] for why).
enum ImageRoot {
    /// Made detached (see [`detached_root`]), attached in the node's mount namespace:
    /// the tmpfs of its writable layer, the image's layers, the overlay.
    Detached {
        run: OwnedFd,
        layers: OwnedFd,
        overlay: OwnedFd,
    },
    /// Made already in a mount namespace of the host's root's own, which the node's
    /// copies: a confined node's, on a kernel that refuses [`ImageRoot::Detached`].
    Built,
    /// To be made in the node's own mount namespace, from these layers: an unconfined
    /// node's, on such a kernel.
    ToBuild(OwnedFd),
}

fn open_sources(
    l: &Layout,
    userns: Option<std::os::fd::BorrowedFd<'_>>,
) -> Result<Sources, String> {
    let detached = l.image.is_some() || userns.is_some();
    // The hosts file as a detached copy of its mount, always: it is in the fleet's run
    // folder, under /run, and /run is detached below. Where /run is a mount of its own
    // (systemd's tmpfs, an `nsfleet vm` guest), a bind from a descriptor of a path in
    // the detached /run was refused (EINVAL), and no node with a world came up.
    let hosts = (l
        .hosts
        .as_ref()
        .map(|h| Source::open(h, true, false))
        .transpose())
    .map_err(at("the fleet's hosts file"))?;
    let mut from_host = Vec::new();
    for d in l.dirs.iter().filter(|d| d.from_host) {
        let mut tree = Vec::new();
        read_tree(Path::new(&d.path), Path::new(""), &mut tree)
            .map_err(at(&format!("reading the host's {}", d.path)))?;
        from_host.push(tree);
    }
    let mut bound = Vec::new();
    for b in &l.binds {
        let source = Source::open(&b.source, detached, !b.read_only);
        bound.push(source.map_err(at(&format!("bind source {}", b.source)))?);
    }
    let mut devices = Vec::new();
    // A user's fleet may make no device (the kernel makes its mounts `nodev`): its nodes
    // get the host's, bound, those the user may use (the probe refused the others), as
    // rootless podman's containers do.
    let users = l.users;
    let same = |path: String| (path.clone(), path);
    let host_own = (OWN_DEVICES.iter())
        .map(|(path, ..)| same(path.to_string()))
        .filter(|(path, _)| users && sys::may_open(Path::new(path), true).is_ok());
    let given = (l.devices.iter())
        .filter(|_| users)
        .map(|d| (d.path.clone(), d.host.clone()));
    // A /dev of its own, as Docker's containers: an image node's, and a confined node's.
    if detached {
        let ours = DEVICES.iter().map(|d| same(format!("/dev/{d}")));
        for (path, host) in ours.chain(host_own).chain(given) {
            let source = Source::open(&host, true, false).map_err(at(&path))?;
            devices.push((path, source));
        }
    }
    let made: &[nsfleet_topology::Device] = if users { &[] } else { &l.devices };
    let own = match detached {
        true => Some(own_devices(made, !users).map_err(at("the node's own devices"))?),
        false => None,
    };
    let root = (l.image.as_ref())
        .map(|image| image_root(image, userns, l.users))
        .transpose()?;
    Ok(Sources {
        hosts,
        from_host,
        bound,
        devices,
        own,
        root,
    })
}

/// An image node's root, made as far as the host's root must: detached where the kernel
/// lets overlayfs take layers that are not mounted (Linux 6.15), else, for a confined
/// node (`userns`), in a mount namespace of the host's root's own.
fn image_root(
    image: &ImageLayout,
    userns: Option<std::os::fd::BorrowedFd<'_>>,
    users: bool,
) -> Result<ImageRoot, String> {
    let layers = sys::clone_tree(&image.layers_dir, false).map_err(at("the image's layers"))?;
    // A user's layers are on disk as their fleet's ids already (unpacked in a user
    // namespace of the same map: nsfleet-client's `user`), and an idmapped mount of the
    // host's disk is the host's root's to make.
    if let Some(userns) = userns.filter(|_| !users) {
        sys::userns::idmap_tree(layers.as_fd(), userns)
            .map_err(at("the image's layers through the node's ids"))?;
    }
    if let Some((run, overlay)) = detached_root(image, &layers)? {
        return Ok(ImageRoot::Detached {
            run,
            layers,
            overlay,
        });
    }
    if userns.is_none() {
        return Ok(ImageRoot::ToBuild(layers));
    }
    // A mount namespace of the host's root's own for it, which the init's copies.
    sys::unshare_mounts(0, libc::MS_PRIVATE).map_err(at("a new mount namespace"))?;
    build_root(image, layers)?;
    Ok(ImageRoot::Built)
}

/// The devices made for a node: a detached tmpfs that holds them, and where each goes.
struct OwnDevices {
    tmpfs: OwnedFd,
    /// (its path in the node, its name in the tmpfs).
    places: Vec<(String, String)>,
}

/// [`OWN_DEVICES`] that the host has (with `ours`), and the devices the node was given,
/// made.
fn own_devices(given: &[nsfleet_topology::Device], ours: bool) -> std::io::Result<OwnDevices> {
    let ours = (OWN_DEVICES.iter())
        .filter(|(path, ..)| ours && Path::new(path).exists())
        .map(|&(path, major, minor)| nsfleet_topology::Device {
            path: path.to_string(),
            host: path.to_string(),
            block: false,
            major,
            minor,
            mode: 0o666,
        });
    let here: Vec<nsfleet_topology::Device> = ours.chain(given.iter().cloned()).collect();
    // Named by their place in the list in the tmpfs, whose names have no folders.
    let places: Vec<(String, String)> = (here.iter().enumerate())
        .map(|(i, d)| (d.path.clone(), format!("d{i}")))
        .collect();
    let files: Vec<sys::DeviceFile<'_>> = (here.iter().zip(&places))
        .map(|(d, (_, name))| sys::DeviceFile {
            name,
            block: d.block,
            major: d.major,
            minor: d.minor,
            mode: d.mode,
        })
        .collect();
    let tmpfs = sys::device_files(&files)?;
    Ok(OwnDevices { tmpfs, places })
}

/// Mounts the node's own devices at their places (a missing one made, with its folder),
/// each a bind from their tmpfs, attached for the while at [`DEVICES_SCRATCH`], on the
/// node's own /dev. Not a copy of each from the detached tmpfs: kernels before 6.15
/// refuse copies of what is not in the caller's mount namespace.
fn mount_own_devices(own: &OwnDevices) -> std::io::Result<()> {
    let scratch = DEVICES_SCRATCH;
    std::fs::DirBuilder::new().mode(0o700).create(scratch)?;
    sys::attach_tree(own.tmpfs.as_fd(), scratch, false)?;
    for (path, name) in &own.places {
        if let Some(folder) = Path::new(path).parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(folder)?;
        }
        if !Path::new(path).exists() {
            File::create(path)?;
        }
        sys::bind(&format!("{scratch}/{name}"), path, false)?;
    }
    sys::detach(scratch)?;
    std::fs::remove_dir(scratch)
}

/// Runs in the init, in its new mount and UTS namespaces, before anything else is started
/// in the node. Errors are plain strings: this is a forked child, where nothing may take
/// a lock another thread of the supervisor held at the fork (as capturing a backtrace
/// would).
fn setup(l: &Layout, sources: Sources) -> Result<(), String> {
    sys::set_hostname(&l.hostname).map_err(at("setting the host name"))?;
    let Sources {
        hosts,
        from_host,
        bound,
        devices,
        own,
        root,
    } = sources;
    if let Some(image) = &l.image {
        let root = root.ok_or("an image node's root was not made")?;
        let own = own
            .as_ref()
            .ok_or("an image node's devices were not made")?;
        enter_image(image, root, &devices, own, &shm_options(l.shm_bytes))?;
    } else {
        // The host's named network namespaces would be copied into every node's mount
        // namespace (and pinned there) otherwise.
        sys::detach("/run/netns").map_err(at("/run/netns"))?;
        sys::detach(PRIVATE_RUN).map_err(at("/run"))?;
        sys::mount_fs("tmpfs", PRIVATE_RUN, "mode=0755").map_err(at("a private /run"))?;
        sys::mount_fs("proc", "/proc", "").map_err(at("/proc for the node's PID namespace"))?;
        sys::remount_sys().map_err(at("/sys for the node's network namespace"))?;
        match &own {
            // A confined node's /dev is its own, as a container's, over the host's.
            Some(own) => make_dev(&devices, own, &shm_options(l.shm_bytes))?,
            // A privileged one sees the host's, and its /dev/shm unless it asks for one
            // of its own (`shm_size`).
            None if l.shm_bytes.is_some() => {
                sys::mount_fs("tmpfs", "/dev/shm", &shm_options(l.shm_bytes))
                    .map_err(at("/dev/shm"))?
            }
            None => {}
        }
    }
    sys::mount_cgroup_view(&l.cgroup_view).map_err(at("its cgroups at /sys/fs/cgroup"))?;
    if l.masks {
        sys::mask_system_paths().map_err(at("masking /proc and /sys as Docker does"))?;
    }
    let mut from_host = from_host.into_iter();
    for (i, d) in l.dirs.iter().enumerate() {
        let source = if d.from_host { from_host.next() } else { None };
        private_dir(d, &l.dirs[..i], source)
            .map_err(|e| format!("private directory {}: {e}", d.path))?;
    }
    for (path, text) in &l.files {
        write_private(path, text, &l.dirs).map_err(|e| format!("writing {path}: {e}"))?;
    }
    // A bind to /etc/hosts is the node's hosts file instead (mounted below).
    let hosts = hosts.filter(|_| !l.binds.iter().any(|b| b.target == HOSTS));
    if let Some(h) = &hosts {
        h.mount_at(HOSTS, true)
            .map_err(at("the fleet's /etc/hosts"))?;
    }
    // The node's own filesystems (its /run and private folders, or its image's root):
    // the only places a mount point may be made.
    let root = l.image.as_ref().map(|_| "/");
    let own: Vec<u64> = (l.dirs.iter().map(|d| d.path.as_str()).chain([PRIVATE_RUN]))
        .chain(root)
        .filter_map(|p| {
            std::fs::metadata(p)
                .ok()
                .map(|m| std::os::unix::fs::MetadataExt::dev(&m))
        })
        .collect();
    for (b, source) in l.binds.iter().zip(&bound) {
        bind(b, source, &l.dirs, &own, root)
            .map_err(|e| format!("bind {} to {}: {e}", b.source, b.target))?;
    }
    Ok(())
}

/// The options of a node's /dev/shm: `shm_size`'s, else Docker's 64 MB.
fn shm_options(bytes: Option<u64>) -> String {
    format!("mode=1777,size={}", bytes.unwrap_or(64 << 20))
}

/// Where an image node's root is made: a tmpfs of the node's own over the host's /run,
/// in its mount namespace only (left at `pivot_root`), holds its writable layer (`upper`,
/// and overlayfs's `work`), the overlay (`root`) and the image's layers (`layers`, seen
/// through the node's ids for a confined node). There, where any process may pass: a
/// confined node's root may not cross the fleet's run folder.
const IMAGE_DIRS: [&str; 4] = ["upper", "work", "root", "layers"];

/// The node's root made of its image's layers under the node's writable one, detached:
/// the tmpfs that holds [`IMAGE_DIRS`], and the overlay, for the node's mount namespace
/// to attach. Nothing of the host's mount table is copied for it, nor thrown away after
/// (for a confined node, one copy and one wait for an RCU grace period each). None where
/// overlayfs refuses layers that are not mounted in the caller's mount namespace (Linux
/// before 6.15) or one at a time (`lowerdir+`, before 6.8): [`build_root`] makes it then.
fn detached_root(
    image: &ImageLayout,
    layers: &OwnedFd,
) -> Result<Option<(OwnedFd, OwnedFd)>, String> {
    use std::os::fd::AsRawFd;
    let attrs = sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV;
    let run = sys::detached_fs("tmpfs", &[("mode", "0755")], attrs)
        .map_err(at("the node's writable layer"))?;
    let dirs = IMAGE_DIRS.map(|d| format!("/proc/self/fd/{}/{d}", run.as_raw_fd()));
    for (d, path) in IMAGE_DIRS.iter().zip(&dirs) {
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(path)
            .map_err(at(d))?;
    }
    let [upper, work, ..] = &dirs;
    let layers_dir = format!("/proc/self/fd/{}", layers.as_raw_fd());
    std::env::set_current_dir(layers_dir).map_err(at("the image store's layers"))?;
    own_upper(image, upper)?;
    let mut options = vec![("upperdir", upper.as_str()), ("workdir", work.as_str())];
    options.extend(image.lower.split(':').map(|layer| ("lowerdir+", layer)));
    // EINVAL is how overlayfs refuses a layer mounted nowhere, or `lowerdir+`; anything
    // else is this node's own trouble, said as it is.
    match sys::detached_fs("overlay", &options, 0) {
        Ok(overlay) => Ok(Some((run, overlay))),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(None),
        Err(e) => Err(format!("overlayfs: {e}")),
    }
}

/// The node's root made of its image's `layers` under the node's writable one, in the
/// caller's mount namespace (new, its mounts private), where [`detached_root`] cannot:
/// a tmpfs over /run with [`IMAGE_DIRS`], overlayfs in it. The host's root does this,
/// with the trusted xattrs overlayfs reads only for it (an opaque folder): for a
/// confined node, its init's helper before it enters the node's user namespace.
fn build_root(image: &ImageLayout, layers: OwnedFd) -> Result<(), String> {
    sys::mount_fs("tmpfs", PRIVATE_RUN, "mode=0755").map_err(at("the node's writable layer"))?;
    let [upper, work, root, seen] = IMAGE_DIRS.map(|d| format!("{PRIVATE_RUN}/{d}"));
    for d in [&upper, &work, &root, &seen] {
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(d)
            .map_err(at(d))?;
    }
    sys::attach_tree(layers.as_fd(), &seen, false).map_err(at("the image's layers"))?;
    // From there, so that `lower` fits in the page that mount(2) takes its options in
    // (about 60 layers).
    std::env::set_current_dir(&seen).map_err(at("the image store's layers"))?;
    own_upper(image, &upper)?;
    sys::mount_overlay(&image.lower, &upper, &work, &root).map_err(at("overlayfs"))
}

/// The root of the writable layer `upper` is the root of the node's: its owner and mode
/// are those of the image's top layer's root as the node sees it (a confined node's root
/// owns it, through its ids), not those of the host's root that made it. The caller is in
/// the layers' folder.
fn own_upper(image: &ImageLayout, upper: &str) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let at = |e: std::io::Error| format!("{upper}: {e}");
    let top = image.lower.split(':').next().unwrap_or(".");
    let image_root = std::fs::metadata(top).map_err(|e| format!("the image's top layer: {e}"))?;
    std::os::unix::fs::chown(upper, Some(image_root.uid()), Some(image_root.gid())).map_err(at)?;
    std::fs::set_permissions(upper, image_root.permissions()).map_err(at)
}

/// Into the node's root that [`build_root`] made: the kernel's filesystems, the root
/// made the root, a /dev of the node's own with the host's plain devices, and the /etc
/// files nsfleet gives it. Everything after `pivot_root` happens inside the image, where
/// its links (`/etc/resolv.conf -> ...`) lead nowhere else.
fn enter_image(
    image: &ImageLayout,
    made: ImageRoot,
    devices: &[(String, Source)],
    own: &OwnDevices,
    shm: &str,
) -> Result<(), String> {
    let [.., root, layers] = IMAGE_DIRS.map(|d| format!("{PRIVATE_RUN}/{d}"));
    match made {
        ImageRoot::Detached {
            run,
            layers: seen,
            overlay,
        } => {
            sys::attach_tree(run.as_fd(), PRIVATE_RUN, false).map_err(at("a private /run"))?;
            sys::attach_tree(seen.as_fd(), &layers, false).map_err(at("the image's layers"))?;
            sys::attach_tree(overlay.as_fd(), &root, false).map_err(at("the node's root"))?;
        }
        ImageRoot::Built => {
            // A mount of this namespace's own: a confined node's copy of the overlay its
            // helper mounted is locked to its place, and the kernel refuses it as a new
            // root (EINVAL).
            sys::bind(&root, &root, false).map_err(at("the node's root"))?;
        }
        ImageRoot::ToBuild(seen) => build_root(image, seen)?,
    }
    // /proc and /sys before the host's root goes: in a user namespace the kernel mounts
    // them only where a mount of each is already fully visible.
    for d in ["proc", "sys", "dev"] {
        own_dir(&format!("{root}/{d}")).map_err(at(d))?;
    }
    let [proc, sysfs] = ["proc", "sys"].map(|d| format!("{root}/{d}"));
    sys::mount_fs("proc", &proc, "").map_err(at("/proc for the node's PID namespace"))?;
    sys::mount_fs("sysfs", &sysfs, "").map_err(at("/sys for the node's network namespace"))?;
    std::env::set_current_dir(root).map_err(at("the node's root"))?;
    sys::pivot_root_to_cwd().map_err(at("pivot_root into the image"))?;
    make_dev(devices, own, shm)?;
    for (path, text) in &image.etc {
        own_file(path).map_err(at(path))?;
        std::fs::write(path, text).map_err(at(path))?;
    }
    own_file(HOSTS).map_err(at(HOSTS))
}

/// A /dev as Docker gives a container, over whatever /dev the node's root has (the
/// image's folder, or the host's devtmpfs in a host-software node's mount namespace): a
/// tmpfs with the host's plain devices bound (`devices`), the devices made for the node
/// (`own`), a devpts instance of its own, a /dev/shm of `shm`'s size, and the usual links.
fn make_dev(devices: &[(String, Source)], own: &OwnDevices, shm: &str) -> Result<(), String> {
    sys::mount_dev("tmpfs", "/dev", "mode=0755,size=65536k").map_err(at("/dev"))?;
    for (path, source) in devices {
        // /dev/net/tun's folder: the others are at /dev's root.
        if let Some(folder) = Path::new(path).parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(folder)
                .map_err(at(path))?;
        }
        File::create(path).map_err(at(path))?;
        source.mount_at(path, false).map_err(at(path))?;
    }
    mount_own_devices(own).map_err(at("the node's own devices"))?;
    for d in ["/dev/pts", "/dev/shm", "/dev/mqueue"] {
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(d)
            .map_err(at(d))?;
    }
    sys::mount_dev("devpts", "/dev/pts", "newinstance,ptmxmode=0666,mode=0620")
        .map_err(at("/dev/pts"))?;
    sys::mount_fs("tmpfs", "/dev/shm", shm).map_err(at("/dev/shm"))?;
    for (link, to) in [
        ("/dev/ptmx", "pts/ptmx"),
        ("/dev/fd", "/proc/self/fd"),
        ("/dev/stdin", "/proc/self/fd/0"),
        ("/dev/stdout", "/proc/self/fd/1"),
        ("/dev/stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(to, link).map_err(at(link))?;
    }
    Ok(())
}

/// A folder at `path` of the image's root (made if missing): a link there is replaced,
/// as the node's own writable layer takes it.
fn own_dir(path: &str) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(_) => std::fs::remove_file(path)?,
        Err(_) => {}
    }
    std::fs::DirBuilder::new().mode(0o555).create(path)
}

/// A plain file at `path` of the image's root, to mount over: a link there (a
/// `resolv.conf` into a resolver's run folder) is replaced, and its folder made.
fn own_file(path: &str) -> std::io::Result<()> {
    if let Some(parent) = Path::new(path).parent() {
        own_dir(&parent.display().to_string())?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => return Ok(()),
        Ok(m) if m.is_dir() => return Err(std::io::Error::other("the image has a folder there")),
        Ok(_) => std::fs::remove_file(path)?,
        Err(_) => {}
    }
    File::create(path).map(drop)
}

/// Something of the host's to mount in the node: a descriptor of its path, or, in a node
/// whose root is an image, a detached copy of its mount (by the time it is mounted, the
/// host's mounts are no longer in the node's mount namespace, and a bind from them would
/// be refused).
struct Source {
    file: File,
    detached: bool,
}

impl Source {
    /// `path`'s source; with the mounts below it when `recursive` (a read-only bind
    /// leaves them out, as they would stay writable).
    fn open(path: &str, detached: bool, recursive: bool) -> std::io::Result<Source> {
        let file = match detached {
            true => File::from(sys::clone_tree(path, recursive)?),
            false => open_path(path)?,
        };
        Ok(Source { file, detached })
    }

    fn mount_at(&self, target: &str, read_only: bool) -> std::io::Result<()> {
        match self.detached {
            true => sys::attach_tree(self.file.as_fd(), target, read_only),
            false => sys::bind(&through(&self.file), target, read_only),
        }
    }
}

/// A descriptor of a path that mounts can be made from, whatever it is (file, folder,
/// socket).
fn open_path(path: &str) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(path)
}

/// Mounts one of the host's paths at `b.target`; a mount point that does not exist is
/// made, only ever on one of the node's own filesystems (`own`, their devices): never in
/// a host folder that an earlier bind put there.
fn bind(
    b: &Bind,
    source: &Source,
    dirs: &[PrivateDir],
    own: &[u64],
    root: Option<&'static str>,
) -> std::io::Result<()> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    if !Path::new(&b.target).exists() {
        let holder = (private_holder(&b.target, dirs).or(root))
            .ok_or_else(|| std::io::Error::other("nothing there to mount over"))?;
        if !own.contains(&std::fs::metadata(holder)?.dev()) {
            return Err(std::io::Error::other(format!(
                "{holder} is not the node's own (a bind of the host's?): no mount point is made there"
            )));
        }
        let parent = Path::new(&b.target)
            .parent()
            .and_then(Path::to_str)
            .unwrap_or(holder);
        if parent != holder {
            make_dirs_below(holder, parent)?;
        }
        if source.file.metadata()?.is_dir() {
            std::fs::DirBuilder::new().mode(0o755).create(&b.target)?;
        } else {
            let mut o = std::fs::OpenOptions::new();
            o.write(true)
                .create_new(true)
                .mode(0o644)
                .custom_flags(libc::O_NOFOLLOW);
            o.open(&b.target)?;
        }
    }
    source.mount_at(&b.target, b.read_only)
}

/// A path to what `file` was opened on, even once something is mounted over it.
fn through(file: &File) -> String {
    format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(file))
}

/// Mounts one private folder; `outer` are those mounted before it, `source` the host's
/// folder to copy (opened before anything was mounted).
fn private_dir(
    d: &PrivateDir,
    outer: &[PrivateDir],
    source: Option<Vec<Copied>>,
) -> std::io::Result<()> {
    if !Path::new(&d.path).exists() {
        // Made only inside /run or another private folder, never on the host.
        let Some(holder) = private_holder(&d.path, outer) else {
            return Err(std::io::Error::other(
                "the host no longer has it to mount over",
            ));
        };
        make_dirs_below(holder, &d.path)?;
    }
    let (uid, gid) = d.owner.unwrap_or((0, 0));
    let mode = d.mode.unwrap_or(0o755);
    sys::mount_fs(
        "tmpfs",
        &d.path,
        &format!("mode={mode:o},uid={uid},gid={gid}"),
    )?;
    if let Some(source) = source {
        write_tree(&source, Path::new(&d.path))?;
    }
    Ok(())
}

/// Creates the folders from `base` (exclusive) down to `path`, refusing to pass through a
/// symbolic link or onto another filesystem: `base` is a private tmpfs, and a link copied
/// from the host (`/etc/ssl/certs/x.pem -> /usr/share/...`) must not lead a write there.
fn make_dirs_below(base: &str, path: &str) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(base)?.dev();
    let mut at = std::path::PathBuf::from(base);
    for part in Path::new(path)
        .strip_prefix(base)
        .map_err(std::io::Error::other)?
        .components()
    {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() && !m.file_type().is_symlink() && m.dev() == dev => {}
            Ok(_) => {
                return Err(std::io::Error::other(format!(
                    "{} is not a folder of the node's own (a link or a mount)",
                    at.display()
                )))
            }
            Err(_) => std::fs::DirBuilder::new().mode(0o755).create(&at)?,
        }
    }
    Ok(())
}

/// Writes a file of the node's own: inside its private folder (or /run), through no
/// symbolic link, and not onto the host.
fn write_private(path: &str, text: &str, dirs: &[PrivateDir]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let holder = private_holder(path, dirs)
        .ok_or_else(|| std::io::Error::other("not in a private folder"))?;
    let parent = Path::new(path)
        .parent()
        .and_then(Path::to_str)
        .unwrap_or(holder);
    if parent != holder {
        make_dirs_below(holder, parent)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    f.write_all(text.as_bytes())
}

/// One entry of a folder copied from the host: its path below the folder, what it is,
/// and its mode and owner.
struct Copied {
    path: PathBuf,
    what: CopiedKind,
    mode: u32,
    owner: (u32, u32),
}

enum CopiedKind {
    Folder,
    File(Vec<u8>),
    Link(PathBuf),
}

/// Reads the folder `root`'s entries below `below` into `out`, folders before what they
/// hold: by the host's root, before a confined node's init is its own root (who may not
/// read what the host keeps from other users), and written by the init ([`write_tree`]).
/// Sockets, fifos and devices are left out: a copy would not be one.
fn read_tree(root: &Path, below: &Path, out: &mut Vec<Copied>) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    // What the caller may not read (a user's fleet's: /etc/shadow, /etc/ssl/private) is
    // not theirs to give a node: such a file is left out, such a folder copied empty.
    let denied = |e: &std::io::Error| e.kind() == std::io::ErrorKind::PermissionDenied;
    let entries = match std::fs::read_dir(root.join(below)) {
        Err(e) if denied(&e) && !below.as_os_str().is_empty() => return Ok(()),
        r => r?,
    };
    for entry in entries {
        let entry = entry?;
        let path = below.join(entry.file_name());
        let src = root.join(&path);
        let meta = std::fs::symlink_metadata(&src)?;
        let t = meta.file_type();
        let what = if t.is_dir() {
            CopiedKind::Folder
        } else if t.is_file() {
            match std::fs::read(&src) {
                Err(e) if denied(&e) => continue,
                r => CopiedKind::File(r?),
            }
        } else if t.is_symlink() {
            CopiedKind::Link(std::fs::read_link(&src)?)
        } else {
            continue;
        };
        let folder = t.is_dir();
        out.push(Copied {
            path: path.clone(),
            what,
            mode: meta.mode() & 0o7777,
            owner: (meta.uid(), meta.gid()),
        });
        if folder {
            read_tree(root, &path, out)?;
        }
    }
    Ok(())
}

/// Writes what [`read_tree`] read below `to`, with modes and owners: a confined node's
/// owners are its own ids of the same numbers (the host's root is the node's), and one
/// its ids cannot name is left to the node's root.
fn write_tree(tree: &[Copied], to: &Path) -> std::io::Result<()> {
    for c in tree {
        let dst = to.join(&c.path);
        match &c.what {
            CopiedKind::Folder => std::fs::create_dir(&dst)?,
            CopiedKind::File(bytes) => std::fs::write(&dst, bytes)?,
            CopiedKind::Link(target) => std::os::unix::fs::symlink(target, &dst)?,
        }
        match std::os::unix::fs::lchown(&dst, Some(c.owner.0), Some(c.owner.1)) {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            r => r?,
        }
    }
    // Modes last, folders' included: a folder the host keeps read-only still takes what
    // is copied into it.
    for c in tree
        .iter()
        .filter(|c| !matches!(c.what, CopiedKind::Link(_)))
    {
        let mode = std::fs::Permissions::from_mode(c.mode);
        std::fs::set_permissions(to.join(&c.path), mode)?;
    }
    Ok(())
}

/// The fleet's hosts file, in its log folder.
pub const HOSTS_FILE: &str = "hosts";

/// The fleet's /etc/hosts: every node's name beside each of its addresses (loopback
/// first), written into `path`: once per fleet, and again in place (the same file, which
/// the nodes' worlds have bound) when `apply` changes the fleet.
pub fn write_hosts<'a>(path: &Path, nodes: impl Iterator<Item = &'a Node>) -> std::io::Result<()> {
    let mut out = String::from("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n");
    for n in nodes {
        let config = n.config();
        let names = std::iter::once(n.name()).chain(config.aliases.iter().map(String::as_str));
        let names = names.collect::<Vec<_>>().join(" ");
        for a in n.wiring().addrs() {
            out.push_str(&format!("{}\t{names}\n", a.addr));
        }
    }
    std::fs::write(path, out)
}

//! A node's world: what a node that runs software has besides its network namespace, as
//! a container would. Its own PID namespace, whose init (`nsfleet-node`) holds the others
//! and takes every process of the node with it when it goes (daemons that double-fork
//! included); its own UTS namespace (host name = node name); its own mount namespace with
//! a private /run, /proc and /sys of its own, its private directories and files, and the
//! fleet's /etc/hosts.
//!
//! Everything is made inside the new mount namespace, after it is made private: the
//! host's /etc, /run and /var are never written, and nothing mounted survives the node.
//! Used by the `processes` subsystem, which starts the node's commands in the world.

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
use std::sync::OnceLock;
use std::time::Duration;

/// The name of a node's init (`comm`), as `ps -e` shows it.
pub const INIT_NAME: &std::ffi::CStr = c"nsfleet-node";

/// A node's world, alive as long as its init runs.
pub struct World {
    /// The init's pid as the supervisor sees it.
    pub pid: i32,
    /// When it started (with the pid, an identity that a recycled pid does not have).
    pub start_time: u64,
    /// The init's pidfd: what `setns` enters the world by, and how its end is seen.
    pub pidfd: OwnedFd,
}

/// What the init sets up, computed before the fork.
struct Layout {
    hostname: String,
    dirs: Vec<PrivateDir>,
    files: Vec<(String, String)>,
    binds: Vec<Bind>,
    hosts: Option<String>,
    /// The image the node's root is made of, if it runs one.
    image: Option<ImageLayout>,
}

/// A root made of an image's layers and a writable layer of the node's own.
struct ImageLayout {
    /// The layers as overlayfs's `lowerdir` (top first), relative to `layers_dir`.
    lower: String,
    /// The folder the layers share: the init works from there, so that `lower` fits in
    /// the page that mount(2) takes its options in (about 60 layers).
    layers_dir: String,
    /// The fleet's folder of writable layers, over which the init mounts a tmpfs of the
    /// node's own: the node's writes live in memory, as its /run does, and go with it.
    roots: String,
    /// The node's folder in that tmpfs: `upper` (its writes), `work` (overlayfs's) and
    /// `root` (the mount).
    dir: String,
    /// What the node's /etc/hostname and /etc/resolv.conf say.
    etc: [(&'static str, String); 2],
}

/// The host's devices a node with an image gets in its own /dev, as Docker's containers.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// How long a world's init may take to set it up.
const SETUP_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a world's init waits for the node's processes after SIGTERM before it exits
/// (and the kernel kills the rest).
pub const GRACE: Duration = Duration::from_secs(3);

/// What every world of a fleet shares, made once, on the first node's start.
pub struct Shared {
    /// The fleet's hosts file, if it could be written (see [`write_hosts`]).
    pub hosts: Option<PathBuf>,
    /// The fleet's folder of image nodes' writable layers (see [`ROOTS_DIR`]), made on
    /// the first image node's start.
    roots: PathBuf,
    roots_made: OnceLock<Result<(), String>>,
    /// What an image node's /etc/resolv.conf says (see [`resolv_conf`]).
    resolv_conf: String,
}

impl Shared {
    /// For the fleet whose nodes are `peers` and whose logs go to `log_dir`.
    pub fn new<'a>(log_dir: &Path, peers: impl Iterator<Item = &'a Node>) -> Shared {
        let hosts = log_dir.join(HOSTS_FILE);
        Shared {
            hosts: write_hosts(&hosts, peers).ok().map(|()| hosts),
            roots: log_dir.with_file_name(ROOTS_DIR),
            roots_made: OnceLock::new(),
            resolv_conf: resolv_conf(),
        }
    }

    /// The roots folder, made if it is not yet: it only holds the nodes' own tmpfs mounts.
    fn roots(&self) -> anyhow::Result<&Path> {
        let made = self.roots_made.get_or_init(|| {
            let made = std::fs::DirBuilder::new().mode(0o700).create(&self.roots);
            made.or_else(|e| match e.kind() {
                ErrorKind::AlreadyExists => Ok(()),
                _ => Err(format!("making {}: {e}", self.roots.display())),
            })
        });
        made.as_ref().map_err(|e| anyhow!("{e}"))?;
        Ok(&self.roots)
    }
}

/// Builds the world of `node`, whose network namespace the calling thread is in. `log` is
/// where its init's own output goes.
pub fn start(node: &Node, fleet: &str, log: &File, shared: &Shared) -> anyhow::Result<World> {
    let layout = layout(node, fleet, shared)?;
    let (ours, theirs) = UnixStream::pair().context("a socket pair for the node's init")?;
    let null = File::open("/dev/null")?;
    let how = sys::HelperStart {
        name: INIT_NAME,
        fds: &[null.as_fd(), log.as_fd(), log.as_fd(), theirs.as_fd()],
        new_session: true,
        unblock_signals: true,
    };
    let _guard = sys::spawn_guard();
    let pid = sys::fork_pid_ns_init(&how, |kept| {
        let say = |line: &str| {
            if let Some(fd) = kept.get(3).and_then(|fd| fd.try_clone_to_owned().ok()) {
                let _ = File::from(fd).write_all(line.as_bytes());
            }
        };
        if let Err(m) = setup(&layout) {
            say(&format!("{}\n", m.replace('\n', " ")));
            return 1;
        }
        sys::run_node_init(GRACE, || say("ok\n"))
    })
    .context("forking the node's init")?;
    let pidfd = sys::pidfd_open(pid).context("a pidfd for the node's init")?;
    let start_time = sys::started_at(pidfd.as_fd()).unwrap_or(0);
    drop(_guard);
    drop(theirs);
    let world = World {
        pid,
        start_time,
        pidfd,
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

impl World {
    /// Asks the init to end the node's processes and exit (see `sys::run_node_init`).
    pub fn stop(&self) {
        let _ = sys::kill_pidfd(self.pidfd.as_fd(), libc::SIGTERM);
    }

    /// Ends it at once, and reaps it.
    pub fn kill(&self) {
        let _ = sys::kill_pidfd(self.pidfd.as_fd(), libc::SIGKILL);
        let _ = sys::poll_exited(&[self.pidfd.as_fd()], Duration::from_secs(5));
        sys::reap_pidfd(self.pidfd.as_fd());
    }
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
        Some(found) => Some(image_layout(found, shared, node.name(), &hostname)?),
        None => None,
    };
    Ok(Layout {
        image,
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
    node: &str,
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
    let roots = shared.roots()?;
    Ok(ImageLayout {
        lower: lower.join(":"),
        layers_dir: layers_dir.display().to_string(),
        roots: roots.display().to_string(),
        dir: roots.join(node).display().to_string(),
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

/// Runs in the init, before anything else is started in the node. Errors are plain
/// strings: this is a forked child, where nothing may take a lock another thread of the
/// supervisor held at the fork (as capturing a backtrace would).
fn setup(l: &Layout) -> Result<(), String> {
    fn at(what: &str) -> impl FnOnce(std::io::Error) -> String + '_ {
        move |e| format!("{what}: {e}")
    }
    (sys::unshare_mounts(libc::CLONE_NEWUTS, libc::MS_PRIVATE))
        .map_err(at("new mount and UTS namespaces"))?;
    sys::set_hostname(&l.hostname).map_err(at("setting the host name"))?;
    // Opened before anything is mounted over them: the fleet's run folder and the host's
    // folders to copy are the host's.
    let detached = l.image.is_some();
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
    let mut sources = Vec::new();
    for d in l.dirs.iter().filter(|d| d.from_host) {
        sources.push(File::open(&d.path).map_err(at(&format!("opening the host's {}", d.path)))?);
    }
    let mut bound = Vec::new();
    for b in &l.binds {
        let source = Source::open(&b.source, detached, !b.read_only);
        bound.push(source.map_err(at(&format!("bind source {}", b.source)))?);
    }
    if let Some(image) = &l.image {
        enter_image(image)?;
    } else {
        // The host's named network namespaces would be copied into every node's mount
        // namespace (and pinned there) otherwise.
        sys::detach("/run/netns").map_err(at("/run/netns"))?;
        sys::detach(PRIVATE_RUN).map_err(at("/run"))?;
        sys::mount_fs("tmpfs", PRIVATE_RUN, "mode=0755").map_err(at("a private /run"))?;
        sys::mount_fs("proc", "/proc", "").map_err(at("/proc for the node's PID namespace"))?;
        sys::remount_sys().map_err(at("/sys for the node's network namespace"))?;
    }
    let mut sources = sources.into_iter();
    for (i, d) in l.dirs.iter().enumerate() {
        let source = if d.from_host { sources.next() } else { None };
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

/// The node's root made of its image (the init is in its new mount namespace, whose
/// mounts are private): the layers under the node's writable one, overlayfs, made the
/// root; then the kernel's filesystems, a /dev of the node's own with the host's plain
/// devices, and the /etc files nsfleet gives it. Everything after `pivot_root` happens
/// inside the image, where its links (`/etc/resolv.conf -> ...`) lead nowhere else.
fn enter_image(image: &ImageLayout) -> Result<(), String> {
    fn at(what: &str) -> impl FnOnce(std::io::Error) -> String + '_ {
        move |e| format!("{what}: {e}")
    }
    let mut devices = Vec::new();
    for d in DEVICES {
        let path = format!("/dev/{d}");
        devices.push(Source::open(&path, true, false).map_err(at(&path))?);
    }
    // The node's writable layer: a tmpfs of its own, in its mount namespace only.
    sys::mount_fs("tmpfs", &image.roots, "mode=0700").map_err(at("the node's writable layer"))?;
    let [upper, work, root] = ["upper", "work", "root"].map(|d| format!("{}/{d}", image.dir));
    for d in [&upper, &work, &root] {
        (std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(d))
        .map_err(at(d))?;
    }
    std::env::set_current_dir(&image.layers_dir).map_err(at("the image store's layers"))?;
    sys::mount_overlay(&image.lower, &upper, &work, &root).map_err(at("overlayfs"))?;
    std::env::set_current_dir(&root).map_err(at("the node's root"))?;
    sys::pivot_root_to_cwd().map_err(at("pivot_root into the image"))?;
    for d in ["/proc", "/sys", "/dev"] {
        own_dir(d).map_err(at(d))?;
    }
    sys::mount_fs("proc", "/proc", "").map_err(at("/proc for the node's PID namespace"))?;
    sys::remount_sys().map_err(at("/sys for the node's network namespace"))?;
    sys::mount_dev("tmpfs", "/dev", "mode=0755,size=65536k").map_err(at("/dev"))?;
    for (d, source) in DEVICES.iter().zip(&devices) {
        let path = format!("/dev/{d}");
        File::create(&path).map_err(at(&path))?;
        source.mount_at(&path, false).map_err(at(&path))?;
    }
    for d in ["/dev/pts", "/dev/shm", "/dev/mqueue"] {
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(d)
            .map_err(at(d))?;
    }
    sys::mount_dev("devpts", "/dev/pts", "newinstance,ptmxmode=0666,mode=0620")
        .map_err(at("/dev/pts"))?;
    sys::mount_fs("tmpfs", "/dev/shm", "mode=1777,size=65536k").map_err(at("/dev/shm"))?;
    for (link, to) in [
        ("/dev/ptmx", "pts/ptmx"),
        ("/dev/fd", "/proc/self/fd"),
        ("/dev/stdin", "/proc/self/fd/0"),
        ("/dev/stdout", "/proc/self/fd/1"),
        ("/dev/stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(to, link).map_err(at(link))?;
    }
    for (path, text) in &image.etc {
        own_file(path).map_err(at(path))?;
        std::fs::write(path, text).map_err(at(path))?;
    }
    own_file(HOSTS).map_err(at(HOSTS))
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
fn private_dir(d: &PrivateDir, outer: &[PrivateDir], source: Option<File>) -> std::io::Result<()> {
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
        copy_tree(Path::new(&through(&source)), Path::new(&d.path))?;
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

/// Copies a directory's contents (files, folders, symbolic links, with owners and modes).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let meta = std::fs::symlink_metadata(&src)?;
        let t = meta.file_type();
        if t.is_dir() {
            std::fs::create_dir(&dst)?;
            copy_tree(&src, &dst)?;
            std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(meta.mode() & 0o7777))?;
        } else if t.is_file() {
            std::fs::copy(&src, &dst)?;
        } else if t.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
        } else {
            continue; // sockets, fifos, devices: a copy would not be one
        }
        std::os::unix::fs::lchown(&dst, Some(meta.uid()), Some(meta.gid()))?;
    }
    Ok(())
}

/// The folder, beside the fleet's logs, over which each image node mounts the tmpfs of
/// its writable layer, in its own mount namespace: the host sees it empty.
pub const ROOTS_DIR: &str = "roots";

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

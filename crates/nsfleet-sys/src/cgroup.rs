//! cgroups, v2 and v1 alike: which mounted hierarchy holds each controller, a group made
//! in each of the hierarchies asked for (one directory per hierarchy), the files that
//! limit it, joining it, and what it has used.
//!
//! v2 has one hierarchy for every controller; v1 one per controller, or per few mounted
//! together (`cpu,cpuacct`), and a machine may mix them (controllers bound to v1
//! hierarchies, an empty v2 one beside them, as systemd's "hybrid" mode). A [`Group`] is
//! the same path in every hierarchy it uses, and each limit is written in the file of
//! the hierarchy that has its controller, in that version's words (`memory.max` or
//! `memory.limit_in_bytes`).
//!
//! It never decides where a group lives, what it is called or what it limits: that is
//! the caller's (the node's world). It never writes a file outside the groups it is given.

use std::fs;
use std::io::{self, ErrorKind};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub mod delegated;

/// The controllers nsfleet uses: a node's limits, and its usage (`cpuacct`, which v2
/// folds into every group's `cpu.stat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Controller {
    Memory,
    Cpu,
    Cpuset,
    Pids,
    /// v1's CPU accounting; v2 has it in every group (`cpu.stat`).
    Cpuacct,
}

impl Controller {
    pub fn name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Cpu => "cpu",
            Controller::Cpuset => "cpuset",
            Controller::Pids => "pids",
            Controller::Cpuacct => "cpuacct",
        }
    }
}

/// A mounted cgroup hierarchy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hierarchy {
    /// Where it is mounted (its root, as this mount namespace sees it).
    pub mount: PathBuf,
    /// The group `mount` shows, as /proc/PID/cgroup names groups: `/` for a hierarchy
    /// mounted whole; a container's own group where the container is shown only that
    /// (runc binds it so on cgroup v1, as for a Kubernetes pod's containers).
    pub root: PathBuf,
    /// cgroup v2 (the unified hierarchy).
    pub unified: bool,
    /// v1: the controllers bound to it (its mount options). v2: those its root hands to
    /// groups below it (`cgroup.subtree_control`): what a group made at its top may use.
    pub controllers: Vec<String>,
    /// v2: those the kernel has and no v1 hierarchy holds (`cgroup.controllers`), of
    /// which `controllers` is what the root delegates. v1: the same as `controllers`.
    pub available: Vec<String>,
}

impl Hierarchy {
    /// Group `path` (as /proc/PID/cgroup names it) as this mount shows it, `/` being the
    /// mount's top; None when the mount does not show it.
    pub fn shown(&self, path: &Path) -> Option<PathBuf> {
        Some(Path::new("/").join(path.strip_prefix(&self.root).ok()?))
    }

    /// The folder of group `path` (as /proc/PID/cgroup names it), if this mount shows it.
    pub fn folder_of(&self, path: &Path) -> Option<PathBuf> {
        let shown = self.shown(path)?;
        Some(self.mount.join(shown.strip_prefix("/").unwrap_or(&shown)))
    }
}

/// The cgroup hierarchies mounted here, from /proc/self/mountinfo (the first mount of
/// each: a hierarchy bound again elsewhere is the same).
pub fn hierarchies() -> io::Result<Vec<Hierarchy>> {
    let text = fs::read_to_string("/proc/self/mountinfo")?;
    Ok(parse_mountinfo(&text, |mount| {
        let words = |f: &str| {
            let t = fs::read_to_string(mount.join(f)).unwrap_or_default();
            t.split_whitespace().map(String::from).collect::<Vec<_>>()
        };
        (words("cgroup.subtree_control"), words("cgroup.controllers"))
    }))
}

/// The hierarchies of a mountinfo text; `v2_words` reads a v2 root's delegated and
/// available controllers.
fn parse_mountinfo(
    text: &str,
    v2_words: impl Fn(&Path) -> (Vec<String>, Vec<String>),
) -> Vec<Hierarchy> {
    let mut found: Vec<Hierarchy> = Vec::new();
    for line in text.lines() {
        // ID PARENT MAJ:MIN ROOT MOUNT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = left.split(' ').collect();
        let theirs: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(mount), Some(fstype)) =
            (fields.get(3), fields.get(4), theirs.first())
        else {
            continue;
        };
        let root = PathBuf::from(unescape(root));
        let mount = PathBuf::from(unescape(mount));
        let h = match *fstype {
            "cgroup2" => {
                let (controllers, available) = v2_words(&mount);
                Hierarchy {
                    mount,
                    root,
                    unified: true,
                    controllers,
                    available,
                }
            }
            "cgroup" => {
                let options = theirs.get(2).copied().unwrap_or("");
                let controllers: Vec<String> = (options.split(','))
                    .filter(|o| KNOWN_V1.contains(o))
                    .map(String::from)
                    .collect();
                Hierarchy {
                    mount,
                    root,
                    unified: false,
                    available: controllers.clone(),
                    controllers,
                }
            }
            _ => continue,
        };
        let same =
            |o: &Hierarchy| o.unified == h.unified && (h.unified || o.controllers == h.controllers);
        match found.iter().position(same) {
            None => found.push(h),
            // A bind of a group below a hierarchy's root is not the hierarchy: the
            // hierarchy mounted whole is, wherever it comes in the list.
            Some(i) if found[i].root != Path::new("/") && h.root == Path::new("/") => found[i] = h,
            Some(_) => {}
        }
    }
    found
}

/// v1 controllers a mount's options may name (its other options are not controllers).
const KNOWN_V1: &[&str] = &[
    "cpu",
    "cpuacct",
    "cpuset",
    "memory",
    "pids",
    "devices",
    "freezer",
    "blkio",
    "net_cls",
    "net_prio",
    "perf_event",
    "hugetlb",
    "rdma",
    "misc",
];

/// mountinfo's octal escapes (`\040` for a space) undone.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b.get(i + 1..i + 4).and_then(|d| {
            let d = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(d, 8).ok()
        });
        match (b[i], octal) {
            (b'\\', Some(c)) => {
                out.push(c);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where `c` is, among `all`: its v1 hierarchy if one holds it, else the v2 one if the
/// kernel has it there. `Cpuacct` has no v2 controller: every v2 group counts CPU.
pub fn holder(all: &[Hierarchy], c: Controller) -> Option<&Hierarchy> {
    let v1 = all
        .iter()
        .find(|h| !h.unified && h.controllers.iter().any(|n| n == c.name()));
    let v2 = || {
        let name = if c == Controller::Cpuacct {
            "cpu"
        } else {
            c.name()
        };
        (all.iter()).find(|h| h.unified && h.available.iter().any(|n| n == name))
    };
    v1.or_else(v2).or_else(|| {
        // v2 counts every group's CPU, with or without the cpu controller.
        (c == Controller::Cpuacct)
            .then(|| all.iter().find(|h| h.unified))
            .flatten()
    })
}

/// Why `c` cannot be used by a group made at the top of the hierarchies, if it cannot:
/// no hierarchy has it, or v2 has it and its root does not hand it down.
pub fn refusal(all: &[Hierarchy], c: Controller) -> Option<String> {
    let Some(h) = holder(all, c) else {
        return Some(format!(
            "this kernel has no {} cgroup controller mounted (neither a cgroup v1 hierarchy nor the v2 one holds it)",
            c.name()
        ));
    };
    let delegated =
        !h.unified || c == Controller::Cpuacct || h.controllers.iter().any(|n| n == c.name());
    (!delegated).then(|| {
        format!(
            "cgroup v2's root does not enable its {0} controller for the groups below it ({1}/cgroup.subtree_control lacks it); as root: echo +{0} > {1}/cgroup.subtree_control",
            c.name(),
            h.mount.display()
        )
    })
}

/// One directory of a [`Group`]: its path in one hierarchy.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Dir {
    path: PathBuf,
    unified: bool,
    /// v1: the hierarchy's controllers, as a mount of it names them (`cpu,cpuacct`).
    controllers: String,
    /// The controllers of `Group::controllers` this hierarchy holds.
    holds: Vec<Controller>,
}

/// A group: the same path below the root of each hierarchy that holds one of its
/// controllers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    dirs: Vec<Dir>,
}

impl Group {
    /// The group of no hierarchy: what a node of a fleet that makes no cgroups is in
    /// (its processes stay in their parent's; nothing is limited, made or removed).
    pub fn none() -> Group {
        Group { dirs: Vec::new() }
    }
}

/// A hierarchy as a node sees it at /sys/fs/cgroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum View {
    /// cgroup v2, the whole of /sys/fs/cgroup (at `unified` below it beside v1 ones).
    Unified,
    /// A v1 hierarchy, at /sys/fs/cgroup/CONTROLLERS, as Docker and systemd place them.
    V1(String),
}

/// Limits written to a group; `None` leaves that one as the kernel made it (no limit).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of memory, swap included (none beyond it).
    pub memory: Option<u64>,
    /// CPU time per [`CPU_PERIOD_US`], in microseconds: 150,000 is 1.5 CPUs.
    pub cpu_quota_us: Option<u64>,
    /// The CPUs it may run on, as the kernel writes a list (`0-1,3`).
    pub cpuset: Option<String>,
    /// Most tasks (processes and threads) at once.
    pub pids: Option<u64>,
}

/// The period of a CPU quota: Docker's and the kernel's default, 100 ms.
pub const CPU_PERIOD_US: u64 = 100_000;

/// Hands `controllers` (of those `d` holds) to the groups below `d`, a v2 folder: those
/// it does not hand down yet. Nothing is written when it hands them all: a group holding
/// processes of its own (one delegated to a user may) takes no write at all.
fn hand_down_in(d: &Dir, controllers: &[Controller]) -> io::Result<()> {
    let handed = fs::read_to_string(d.path.join("cgroup.subtree_control")).unwrap_or_default();
    let asked: Vec<String> = (d.holds.iter())
        .filter(|c| **c != Controller::Cpuacct && controllers.contains(c))
        .filter(|c| !handed.split_whitespace().any(|n| n == c.name()))
        .map(|c| format!("+{}", c.name()))
        .collect();
    match asked.is_empty() {
        true => Ok(()),
        false => write(&d.path, "cgroup.subtree_control", &asked.join(" ")),
    }
}

/// What a group has used, as its own files count it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    /// CPU time of every task it has had, in nanoseconds.
    pub cpu_ns: u64,
    /// Memory charged to it now, page cache included; `None` when it is in no memory
    /// group of its own (its parent's counts it).
    pub memory_bytes: Option<u64>,
    /// Processes the kernel's OOM killer has killed in it for its memory limit.
    pub oom_kills: u64,
}

impl Group {
    /// `path` (relative, such as `nsfleet/lab/r1`) in each hierarchy of `all` that holds
    /// one of `controllers`; not made yet.
    pub fn at(all: &[Hierarchy], controllers: &[Controller], path: &Path) -> Group {
        let mut dirs: Vec<Dir> = Vec::new();
        for &c in controllers {
            let Some(h) = holder(all, c) else { continue };
            let path = h.mount.join(path);
            match dirs.iter_mut().find(|d| d.path == path) {
                Some(d) => d.holds.push(c),
                None => dirs.push(Dir {
                    path,
                    unified: h.unified,
                    controllers: h.controllers.join(","),
                    holds: vec![c],
                }),
            }
        }
        Group { dirs }
    }

    /// The group called `name` below this one.
    pub fn child(&self, name: &str) -> Group {
        let dirs = (self.dirs.iter())
            .map(|d| Dir {
                path: d.path.join(name),
                ..d.clone()
            })
            .collect();
        Group { dirs }
    }

    /// The same group in only the hierarchies that hold one of `controllers`.
    pub fn only(&self, controllers: &[Controller]) -> Group {
        let dirs = (self.dirs.iter())
            .filter(|d| d.holds.iter().any(|c| controllers.contains(c)))
            .map(|d| Dir {
                holds: (d.holds.iter().copied())
                    .filter(|c| controllers.contains(c))
                    .collect(),
                ..d.clone()
            })
            .collect();
        Group { dirs }
    }

    /// Removes it from each hierarchy where it holds no task now, at once; returns
    /// whether it is gone from all (a task being reaped keeps it a moment longer).
    pub fn try_remove(&self) -> bool {
        let gone = |d: &Dir| match fs::remove_dir(&d.path) {
            Ok(()) => true,
            Err(e) => e.kind() == ErrorKind::NotFound,
        };
        // Every folder tried, whatever the ones before it did.
        self.dirs.iter().filter(|d| !gone(d)).count() == 0
    }

    /// Its directories, one per hierarchy.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.dirs.iter().map(|d| d.path.as_path())
    }

    /// The hierarchies it is in, as a mount of each is made: v2's, or a v1 one's
    /// controllers (see [`crate::mount_cgroup_view`]).
    pub fn views(&self) -> Vec<View> {
        let view = |d: &Dir| match d.unified {
            true => View::Unified,
            false => View::V1(d.controllers.clone()),
        };
        self.dirs.iter().map(view).collect()
    }

    /// Makes it in each hierarchy, where it is not yet, readied to hold groups of its own
    /// with the controllers of `hands_down` (of those it holds): v2 hands them down
    /// (`cgroup.subtree_control`), v1's cpuset gives its CPUs and memory nodes to each
    /// group made below it (`cgroup.clone_children`), where a new group has none.
    /// Returns whether it made any of them.
    pub fn make(&self, hands_down: &[Controller]) -> io::Result<bool> {
        let parent_of = !hands_down.is_empty();
        let mut made = false;
        for d in &self.dirs {
            match fs::create_dir(&d.path) {
                Ok(()) => made = true,
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                Err(e) => return Err(at(&d.path, e)),
            }
            if d.holds.contains(&Controller::Cpuset) && !d.unified {
                // A v1 cpuset group starts with none unless its parent clones its own.
                for f in ["cpuset.cpus", "cpuset.mems"] {
                    let mine = fs::read_to_string(d.path.join(f)).unwrap_or_default();
                    if mine.trim().is_empty() {
                        let theirs = fs::read_to_string(d.path.parent().unwrap_or(&d.path).join(f))
                            .map_err(|e| at(&d.path, e))?;
                        write(&d.path, f, theirs.trim())?;
                    }
                }
                if parent_of {
                    write(&d.path, "cgroup.clone_children", "1")?;
                }
            }
            if parent_of && d.unified {
                hand_down_in(d, hands_down)?;
            }
        }
        Ok(made)
    }

    /// Hands `controllers` (of those it holds) down to the groups below it, on v2 (v1's
    /// groups below it are in each hierarchy they ask for): those already below it get them
    /// too.
    pub fn hand_down(&self, controllers: &[Controller]) -> io::Result<()> {
        (self.dirs.iter().filter(|d| d.unified)).try_for_each(|d| hand_down_in(d, controllers))
    }

    /// Removes it from each hierarchy, once the last of its tasks has left (a task that
    /// has exited leaves at once; one being reaped a little later): waits up to `patience`
    /// for that. What is already gone is fine.
    pub fn remove(&self, patience: Duration) -> io::Result<()> {
        let until = Instant::now() + patience;
        for d in &self.dirs {
            loop {
                match fs::remove_dir(&d.path) {
                    Ok(()) => break,
                    Err(e) if e.kind() == ErrorKind::NotFound => break,
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < until => {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    Err(e) => return Err(at(&d.path, e)),
                }
            }
        }
        Ok(())
    }

    /// Removes it if nothing is in it: neither tasks nor groups (each hierarchy where that
    /// is so). For a folder groups share, which another may be using.
    pub fn remove_if_empty(&self) {
        for d in &self.dirs {
            let _ = fs::remove_dir(&d.path);
        }
    }

    /// Writes `limits` in the files of the hierarchies that hold their controllers, and
    /// none (as the kernel makes a group) for each other controller it holds: a running
    /// node's limits change in place so. A limit whose controller this group does not
    /// use is an error. A memory limit below what the group holds is the kernel's to
    /// refuse (v1, after reclaiming what it could) or to enforce (v2, by reclaim and the
    /// OOM killer), as for `docker update`.
    pub fn limit(&self, limits: &Limits) -> io::Result<()> {
        // The folder to write a controller's limit in: the one that holds it, if it is
        // set (an error where none does) or if one holds it (to lift it).
        let place =
            |c: Controller, set: bool| match (self.dirs.iter().find(|d| d.holds.contains(&c)), set)
            {
                (Some(d), _) => Ok(Some(d)),
                (None, false) => Ok(None),
                (None, true) => Err(io::Error::other(format!(
                    "no {} hierarchy for this group",
                    c.name()
                ))),
            };
        if let Some(d) = place(Controller::Memory, limits.memory.is_some())? {
            limit_memory(d, limits.memory)?;
        }
        if let Some(d) = place(Controller::Cpu, limits.cpu_quota_us.is_some())? {
            limit_cpu(d, limits.cpu_quota_us)?;
        }
        if let Some(d) = place(Controller::Cpuset, limits.cpuset.is_some())? {
            let cpus = match (&limits.cpuset, d.unified) {
                (Some(cpus), _) => cpus.clone(),
                // v2's empty list is its parent's CPUs (a line: write(2) of nothing
                // writes nothing); v1 has no such word.
                (None, true) => "\n".to_string(),
                (None, false) => parent_value(d, "cpuset.cpus")?,
            };
            write(&d.path, "cpuset.cpus", &cpus)?;
        }
        if let Some(d) = place(Controller::Pids, limits.pids.is_some())? {
            let max = limits.pids.map_or("max".to_string(), |n| n.to_string());
            write(&d.path, "pids.max", &max)?;
        }
        Ok(())
    }

    /// The controllers it holds, in every hierarchy.
    pub fn controllers(&self) -> Vec<Controller> {
        self.dirs
            .iter()
            .flat_map(|d| d.holds.iter().copied())
            .collect()
    }

    /// Its folders that `other` (the same group in fewer hierarchies) has not.
    pub fn beyond<'a>(&'a self, other: &'a Group) -> impl Iterator<Item = &'a Path> + 'a {
        (self.paths()).filter(move |p| !other.paths().any(|o| o == *p))
    }

    /// Its folder in the hierarchy that holds its memory controller, if it has one.
    fn memory_dir(&self) -> Option<&Dir> {
        self.dirs
            .iter()
            .find(|d| d.holds.contains(&Controller::Memory))
    }

    /// Its memory limit in bytes, if it has one.
    pub fn memory_limit(&self) -> Option<u64> {
        let d = self.memory_dir()?;
        let file = if d.unified {
            "memory.max"
        } else {
            "memory.limit_in_bytes"
        };
        let v: u64 = fs::read_to_string(d.path.join(file))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        // v1 says "no limit" as the largest page-aligned count.
        (v < i64::MAX as u64 / 2).then_some(v)
    }

    /// The processes the kernel's OOM killer has killed in it: one read, for who needs no
    /// more of [`usage`](Self::usage) (a command's end).
    pub fn oom_kills(&self) -> u64 {
        let Some(d) = self.memory_dir() else { return 0 };
        let file = if d.unified {
            "memory.events"
        } else {
            "memory.oom_control"
        };
        key_of(
            &fs::read_to_string(d.path.join(file)).unwrap_or_default(),
            "oom_kill",
        )
    }

    /// Its `cgroup.procs` files, open for writing: what [`join`] takes, opened before a
    /// process that cannot open them (a node's, once in its namespaces) joins.
    pub fn procs_files(&self) -> io::Result<Vec<OwnedFd>> {
        open_procs(self.paths())
    }

    /// What it has used: its CPU time, its memory and its OOM kills, each from the
    /// hierarchy that counts it (0 where none does).
    pub fn usage(&self) -> Usage {
        let mut u = Usage::default();
        for d in &self.dirs {
            let read = |f: &str| fs::read_to_string(d.path.join(f)).unwrap_or_default();
            if d.unified {
                u.cpu_ns = key_of(&read("cpu.stat"), "usage_usec").saturating_mul(1000);
                if d.holds.contains(&Controller::Memory) {
                    u.memory_bytes = read("memory.current").trim().parse().ok();
                }
                continue;
            }
            if d.holds.contains(&Controller::Cpuacct) {
                u.cpu_ns = read("cpuacct.usage").trim().parse().unwrap_or(0);
            }
            if d.holds.contains(&Controller::Memory) {
                u.memory_bytes = read("memory.usage_in_bytes").trim().parse().ok();
            }
        }
        u.oom_kills = self.oom_kills();
        u
    }
}

/// One descriptor that becomes readable when the kernel's OOM killer may have acted in any
/// group added to it, so that one thread can tell every node's kills as they happen, not
/// only when a command ends: v1 signals an eventfd registered on each group's
/// `memory.oom_control` (through `cgroup.event_control`, as the group enters OOM, before
/// the kill), v2 modifies each group's `memory.events` (an inotify watch each, in one
/// inotify instance; the file changes at every `max` and `high` event too, so a wake-up
/// is a hint to read the counts, not a kill). A group's registration ends with the group.
pub struct OomWatch {
    /// v1's registrations signal it.
    eventfd: OwnedFd,
    /// v2's watches report to it.
    inotify: OwnedFd,
}

impl OomWatch {
    pub fn new() -> io::Result<OomWatch> {
        // SAFETY: eventfd(2) and inotify_init1(2) take integers; each returns a new
        // descriptor that nothing else owns.
        let eventfd = unsafe {
            OwnedFd::from_raw_fd(crate::check(libc::eventfd(
                0,
                libc::EFD_CLOEXEC | libc::EFD_NONBLOCK,
            ))?)
        };
        // SAFETY: as above.
        let inotify = unsafe {
            OwnedFd::from_raw_fd(crate::check(libc::inotify_init1(
                libc::IN_CLOEXEC | libc::IN_NONBLOCK,
            ))?)
        };
        Ok(OomWatch { eventfd, inotify })
    }

    /// Watches `group`'s OOM kills; a group without memory accounting has none to watch.
    pub fn add(&self, group: &Group) -> io::Result<()> {
        let Some(d) = group.memory_dir() else {
            return Ok(());
        };
        if d.unified {
            let path = d.path.join("memory.events");
            let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
                .map_err(|_| io::Error::from(ErrorKind::InvalidInput))?;
            // SAFETY: a NUL-terminated path and a descriptor this watch owns.
            let rc = unsafe {
                libc::inotify_add_watch(self.inotify.as_raw_fd(), c.as_ptr(), libc::IN_MODIFY)
            };
            return crate::check(rc).map(drop).map_err(|e| at(&path, e));
        }
        let control = fs::File::open(d.path.join("memory.oom_control"))?;
        // The kernel keeps the eventfd, not the file: it may close once registered.
        let line = format!("{} {}", self.eventfd.as_raw_fd(), control.as_raw_fd());
        let event_control = d.path.join("cgroup.event_control");
        fs::write(&event_control, line).map_err(|e| at(&event_control, e))
    }

    /// Waits up to `timeout` for a sign of an OOM kill in any group added, and drains it;
    /// returns whether there was one.
    pub fn wait(&self, timeout: Duration) -> io::Result<bool> {
        let ready =
            crate::poll_readable(&[self.eventfd.as_fd(), self.inotify.as_fd()], Some(timeout))?;
        let mut buf = [0u8; 4096];
        for (fd, r) in [&self.eventfd, &self.inotify].into_iter().zip(&ready) {
            // Non-blocking: read until empty (an eventfd's count comes in one read).
            while *r && read_some(fd.as_fd(), &mut buf).is_ok_and(|n| n > 0) {}
        }
        Ok(ready.iter().any(|r| *r))
    }
}

/// read(2) into `buf`.
fn read_some(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for `buf.len()` bytes for the call.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// The value of `key` in a flat-keyed cgroup file (`usage_usec 1234` lines).
fn key_of(text: &str, key: &str) -> u64 {
    (text.lines())
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The `cgroup.procs` files of the groups `dirs`, open for writing (see
/// [`Group::procs_files`]).
pub fn open_procs<'a>(dirs: impl IntoIterator<Item = &'a Path>) -> io::Result<Vec<OwnedFd>> {
    (dirs.into_iter())
        .map(|d| {
            let path = d.join("cgroup.procs");
            let f = fs::OpenOptions::new().write(true).open(&path);
            Ok(OwnedFd::from(f.map_err(|e| at(&path, e))?))
        })
        .collect()
}

/// Moves the calling process into the groups whose `cgroup.procs` are `files` (see
/// [`Group::procs_files`]): writes "0", the writer itself. One write(2) per file, no
/// allocation: safe in a child of `clone(CLONE_VM)` before it execs.
pub fn join(files: &[BorrowedFd<'_>]) -> io::Result<()> {
    for fd in files {
        // SAFETY: write(2) of one byte from a static buffer to a descriptor we borrow.
        let n = unsafe { libc::write(fd.as_raw_fd(), b"0".as_ptr().cast(), 1) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The groups process `pid` is in, among the hierarchies `all`, whose path has a folder
/// named `base` (such as `nsfleet`, at a hierarchy's top or below a group delegated to a
/// user): where another process joins to be counted and limited with it (`nsfleet
/// exec`, as `docker exec` does).
pub fn of_process(all: &[Hierarchy], pid: i32, base: &str) -> io::Result<Vec<PathBuf>> {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup"))?;
    let mut dirs = Vec::new();
    for line in text.lines() {
        // ID:CONTROLLERS:PATH; v2's is 0::PATH.
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(names), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if !Path::new(path).iter().any(|folder| folder == base) {
            continue;
        }
        let names: Vec<&str> = names.split(',').collect();
        let h = all.iter().find(|h| {
            if names == [""] {
                h.unified
            } else {
                !h.unified && h.controllers.iter().any(|c| names.contains(&c.as_str()))
            }
        });
        if let Some(dir) = h.and_then(|h| h.folder_of(Path::new(path))) {
            dirs.push(dir);
        }
    }
    Ok(dirs)
}

/// Moves the calling process into the groups `dirs` (see [`of_process`]), as [`join`].
pub fn join_dirs(dirs: &[PathBuf]) -> io::Result<()> {
    let files = open_procs(dirs.iter().map(PathBuf::as_path))?;
    join(&files.iter().map(|f| f.as_fd()).collect::<Vec<_>>())
}

fn write(dir: &Path, file: &str, value: &str) -> io::Result<()> {
    let path = dir.join(file);
    fs::write(&path, value).map_err(|e| at(&path, e))
}

fn write_if_there(dir: &Path, file: &str, value: &str) -> io::Result<()> {
    match fs::write(dir.join(file), value) {
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        r => r.map_err(|e| at(&dir.join(file), e)),
    }
}

/// Writes a memory limit (`None`: none) in `d`, with no swap beyond it. v1 keeps memory
/// and swap's limit at least memory's, changed in an order that holds at every step:
/// memory and swap's lifted first, then memory's, then memory and swap's.
fn limit_memory(d: &Dir, bytes: Option<u64>) -> io::Result<()> {
    if d.unified {
        let (max, swap) = match bytes {
            Some(b) => (b.to_string(), "0"),
            None => ("max".to_string(), "max"),
        };
        write(&d.path, "memory.max", &max)?;
        return write_if_there(&d.path, "memory.swap.max", swap);
    }
    let v1 = bytes.map_or("-1".to_string(), |b| b.to_string());
    write_if_there(&d.path, "memory.memsw.limit_in_bytes", "-1")?;
    let file = "memory.limit_in_bytes";
    match fs::write(d.path.join(file), &v1) {
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
            let why = format!("the group holds more than {v1} bytes and the kernel could not reclaim enough of it");
            return Err(at(
                &d.path.join(file),
                io::Error::new(e.kind(), format!("{e}: {why}")),
            ));
        }
        r => r.map_err(|e| at(&d.path.join(file), e))?,
    }
    write_if_there(&d.path, "memory.memsw.limit_in_bytes", &v1)
}

/// Writes a CPU quota per [`CPU_PERIOD_US`] (`None`: none) in `d`.
fn limit_cpu(d: &Dir, quota_us: Option<u64>) -> io::Result<()> {
    if d.unified {
        let quota = quota_us.map_or("max".to_string(), |q| q.to_string());
        return write(&d.path, "cpu.max", &format!("{quota} {CPU_PERIOD_US}"));
    }
    write(&d.path, "cpu.cfs_period_us", &CPU_PERIOD_US.to_string())?;
    let quota = quota_us.map_or("-1".to_string(), |q| q.to_string());
    write(&d.path, "cpu.cfs_quota_us", &quota)
}

/// `file` of the group above `d`, read.
fn parent_value(d: &Dir, file: &str) -> io::Result<String> {
    let parent = d.path.parent().unwrap_or(&d.path);
    let text = fs::read_to_string(parent.join(file)).map_err(|e| at(parent, e))?;
    Ok(text.trim().to_string())
}

/// Moves every process of the group `from` (one of its folders) into the folders
/// `into` too, until none is left out: a process forked while the list was read is
/// moved in the next round. For a running node put in a hierarchy it was not in (a
/// limit given to it live, on v1).
pub fn move_processes(from: &Path, into: &[&Path]) -> io::Result<()> {
    let procs = |d: &Path| -> io::Result<Vec<String>> {
        let text = fs::read_to_string(d.join("cgroup.procs")).map_err(|e| at(d, e))?;
        Ok(text.lines().map(str::to_string).collect())
    };
    for _ in 0..MOVE_ROUNDS {
        let all = procs(from)?;
        let mut left_out = false;
        for d in into {
            let there = procs(d)?;
            for pid in all.iter().filter(|p| !there.contains(p)) {
                left_out = true;
                match fs::write(d.join("cgroup.procs"), pid) {
                    // Gone since the list was read.
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                    r => r.map_err(|e| at(d, e))?,
                }
            }
        }
        if !left_out {
            return Ok(());
        }
    }
    Err(io::Error::other(format!(
        "{}: its processes kept forking while they were moved ({MOVE_ROUNDS} rounds)",
        from.display()
    )))
}

/// How many times [`move_processes`] reads a group's processes again before it gives up.
const MOVE_ROUNDS: usize = 20;

/// Readies the top of the cgroup v2 hierarchy mounted here to hand controllers down, when
/// that top is a group of its own (not the machine's root, which has no `cgroup.type`)
/// holding processes: a container's group as its cgroup namespace shows it, where v2
/// hands nothing down from a group that holds a process. Every process of it is moved
/// into the group `leaf` made below it for them, and it then hands down every
/// controller it has (no list of nsfleet's to keep here), as Docker's docker-in-docker
/// entrypoint readies its container. For nsfleet's agent, whose container is its own
/// (on v2 under containerd a privileged one is not: see docs/kubernetes.md); a process
/// that joins the top afterwards is refused by the kernel (runc's `exec` then joins its
/// init's group). Returns the leaf's folder if it moved any; on v1 it does nothing.
pub fn give_processes_a_leaf(leaf: &str) -> io::Result<Option<PathBuf>> {
    let all = hierarchies()?;
    let Some(top) = all.iter().find(|h| h.unified).map(|h| h.mount.clone()) else {
        return Ok(None);
    };
    let read = |f: &str| fs::read_to_string(top.join(f)).map_err(|e| at(&top, e));
    let (held, has) = (read("cgroup.procs")?, read("cgroup.controllers")?);
    let asked: Vec<String> = has.split_whitespace().map(|c| format!("+{c}")).collect();
    // The machine's root, a group of nobody's, or one with no controller (the empty v2
    // hierarchy beside v1's): nothing to hand down, nobody moved.
    if !top.join("cgroup.type").exists() || held.trim().is_empty() || asked.is_empty() {
        return Ok(None);
    }
    let dir = top.join(leaf);
    match fs::create_dir(&dir) {
        Err(e) if e.kind() != ErrorKind::AlreadyExists => return Err(at(&dir, e)),
        _ => {}
    }
    move_processes(&top, &[&dir])?;
    write(&top, "cgroup.subtree_control", &asked.join(" "))?;
    Ok(Some(dir))
}

/// `e` with the path it is about, in the kernel's words.
fn at(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
90 41 0:38 /sub /mnt/bound rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn each_controller_is_found_where_a_hybrid_machine_mounts_it() {
        let all = parse_mountinfo(HYBRID, |_| (vec![], vec!["hugetlb".into()]));
        assert_eq!(all.len(), 6, "{all:?}");
        let mount = |c| holder(&all, c).map(|h| h.mount.clone());
        assert_eq!(
            mount(Controller::Memory),
            Some("/sys/fs/cgroup/memory".into())
        );
        assert_eq!(
            mount(Controller::Cpuacct),
            Some("/sys/fs/cgroup/cpuacct".into())
        );
        assert_eq!(mount(Controller::Cpuset), None);
        assert!(refusal(&all, Controller::Cpuset)
            .unwrap()
            .contains("no cpuset"));
        assert_eq!(refusal(&all, Controller::Pids), None);
        let g = Group::at(
            &all,
            &[Controller::Memory, Controller::Cpu],
            Path::new("nsfleet/f"),
        );
        let paths: Vec<_> = g.child("n").paths().map(Path::to_path_buf).collect();
        assert_eq!(
            paths,
            [
                PathBuf::from("/sys/fs/cgroup/memory/nsfleet/f/n"),
                PathBuf::from("/sys/fs/cgroup/cpu/nsfleet/f/n")
            ]
        );
    }

    #[test]
    fn a_container_shown_only_its_own_groups_uses_them() {
        // runc's cgroup v1 mounts in a privileged container: each its own group.
        let text = "\
1201 1200 0:32 /kubepods/besteffort/pod1/c1 /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
1202 1200 0:36 /kubepods/besteffort/pod1/c1 /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
1203 1200 0:32 / /mnt/whole rw - cgroup cgroup rw,memory
";
        let all = parse_mountinfo(text, |_| (vec![], vec![]));
        assert_eq!(all.len(), 2, "{all:?}");
        // The hierarchy mounted whole wins over a bind of one of its groups.
        let memory = holder(&all, Controller::Memory).unwrap();
        assert_eq!(memory.mount, Path::new("/mnt/whole"));
        let pids = holder(&all, Controller::Pids).unwrap();
        assert_eq!(pids.root, Path::new("/kubepods/besteffort/pod1/c1"));
        let node = Path::new("/kubepods/besteffort/pod1/c1/nsfleet/f.1/n");
        assert_eq!(
            pids.folder_of(node),
            Some("/sys/fs/cgroup/pids/nsfleet/f.1/n".into())
        );
        assert_eq!(pids.folder_of(Path::new("/system.slice")), None);
    }

    #[test]
    fn on_v2_alone_every_controller_is_one_folder_and_must_be_handed_down() {
        let text = "25 1 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
        let words = |_: &Path| {
            let w = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
            (w("memory pids"), w("cpuset cpu memory pids"))
        };
        let all = parse_mountinfo(text, words);
        let g = Group::at(
            &all,
            &[Controller::Memory, Controller::Cpuacct],
            Path::new("x"),
        );
        assert_eq!(g.paths().count(), 1);
        assert_eq!(refusal(&all, Controller::Memory), None);
        assert_eq!(refusal(&all, Controller::Cpuacct), None);
        let why = refusal(&all, Controller::Cpu).unwrap();
        assert!(
            why.contains("echo +cpu > /sys/fs/cgroup/cgroup.subtree_control"),
            "{why}"
        );
    }

    #[test]
    fn flat_keyed_files_are_read_by_key() {
        let text = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        assert_eq!(key_of(text, "oom_kill"), 3);
        assert_eq!(key_of("usage_usec 12\nuser_usec 3\n", "usage_usec"), 12);
        assert_eq!(unescape(r"/a\040b"), "/a b");
    }
}

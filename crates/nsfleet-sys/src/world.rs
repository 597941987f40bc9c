//! A node's world: the mount, UTS and PID namespaces of a node that runs processes, the
//! mounts made in it, entering it, and the loop of its init (PID 1 of its PID namespace).
//!
//! Mounts here are only ever made in a mount namespace the caller has just unshared and
//! made private: nothing propagates to the host, and everything goes when the namespace's
//! last process does.

use crate::cgroup::View;
use crate::check;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::{Duration, Instant};

fn cstr(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::ErrorKind::InvalidInput.into())
}

pub fn set_hostname(name: &str) -> io::Result<()> {
    // SAFETY: sethostname(2) reads exactly `len` bytes from the pointer.
    check(unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) }).map(drop)
}

/// Detaches whatever is mounted at `path` and below (MNT_DETACH); nothing mounted there is
/// not an error.
pub fn detach(path: &str) -> io::Result<()> {
    let p = cstr(path)?;
    // SAFETY: umount2(2) on a NUL-terminated path.
    match check(unsafe { libc::umount2(p.as_ptr(), libc::MNT_DETACH) }) {
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOENT)) => Ok(()),
        r => r.map(drop),
    }
}

/// Mounts a filesystem of type `fstype` (`tmpfs`, `proc`, `sysfs`) at `path`.
pub fn mount_fs(fstype: &str, path: &str, options: &str) -> io::Result<()> {
    mount_with_flags(fstype, path, options, libc::MS_NOSUID | libc::MS_NODEV)
}

/// [`mount_fs`] with mount flags of the caller's.
fn mount_with_flags(
    fstype: &str,
    path: &str,
    options: &str,
    flags: libc::c_ulong,
) -> io::Result<()> {
    let (t, p, o) = (cstr(fstype)?, cstr(path)?, cstr(options)?);
    let data = if options.is_empty() {
        std::ptr::null()
    } else {
        o.as_ptr().cast()
    };
    // SAFETY: mount(2) with NUL-terminated strings that outlive the call.
    check(unsafe { libc::mount(t.as_ptr(), p.as_ptr(), t.as_ptr(), flags, data) }).map(drop)
}

/// Mounts an overlay at `target`: `lower` is overlayfs's `lowerdir` (its layers, top first,
/// `:`-separated; relative paths are the caller's working directory's), `upper` and
/// `work` the writable layer and overlayfs's scratch folder, on one filesystem.
pub fn mount_overlay(lower: &str, upper: &str, work: &str, target: &str) -> io::Result<()> {
    let options = cstr(&format!("lowerdir={lower},upperdir={upper},workdir={work}"))?;
    let t = cstr(target)?;
    // SAFETY: mount(2) with NUL-terminated strings that outlive the call.
    check(unsafe {
        libc::mount(
            c"overlay".as_ptr(),
            t.as_ptr(),
            c"overlay".as_ptr(),
            0,
            options.as_ptr().cast(),
        )
    })
    .map(drop)
}

/// A container's /dev: a tmpfs in which device nodes bound from the host work (not
/// `nodev`, unlike [`mount_fs`]'s), or a devpts instance of its own (`newinstance`).
pub fn mount_dev(fstype: &str, path: &str, options: &str) -> io::Result<()> {
    let (t, p, o) = (cstr(fstype)?, cstr(path)?, cstr(options)?);
    // SAFETY: mount(2) with NUL-terminated strings that outlive the call.
    check(unsafe {
        libc::mount(
            t.as_ptr(),
            p.as_ptr(),
            t.as_ptr(),
            libc::MS_NOSUID | libc::MS_NOEXEC,
            o.as_ptr().cast(),
        )
    })
    .map(drop)
}

/// `open_tree(2)`'s and `move_mount(2)`'s flags (linux/mount.h), which libc does not name.
const OPEN_TREE_CLONE: libc::c_uint = 1;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;

/// A copy of the mount of `path` (with the mounts below it when `recursive`), detached:
/// it can be attached ([`attach_tree`]) after the caller's root has changed and the
/// mount it came from is no longer in the caller's mount namespace, which a bind from a
/// path could not (EINVAL).
pub fn clone_tree(path: &str, recursive: bool) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let p = cstr(path)?;
    let flags = OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint;
    let flags = if recursive {
        flags | AT_RECURSIVE
    } else {
        flags
    };
    // SAFETY: open_tree(2) on a NUL-terminated path; a descriptor it returns is ours.
    let fd = unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, p.as_ptr(), flags) };
    check(fd as libc::c_int)?;
    // SAFETY: a new descriptor nobody else owns.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// `fsconfig(2)`'s commands (linux/mount.h): set a string option, create the superblock.
const FSCONFIG_SET_STRING: libc::c_uint = 1;
const FSCONFIG_CMD_CREATE: libc::c_uint = 6;

/// `fsmount(2)`'s mount attributes (linux/mount.h).
pub const MOUNT_ATTR_NOSUID: libc::c_uint = 0x2;
pub const MOUNT_ATTR_NODEV: libc::c_uint = 0x4;

/// A new filesystem of type `fstype` with its string `options` (each `(key, value)`,
/// set in order: overlayfs's `lowerdir+` is one layer each time), mounted nowhere yet:
/// a descriptor of its mount with the mount attributes `attrs`, for [`attach_tree`]. Its
/// superblock is the caller's, whatever namespaces it is attached in later.
pub fn detached_fs(
    fstype: &str,
    options: &[(&str, &str)],
    attrs: libc::c_uint,
) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let t = cstr(fstype)?;
    // SAFETY: fsopen(2) on a NUL-terminated string; a descriptor it returns is ours.
    let fs = unsafe {
        let fd = check(libc::syscall(libc::SYS_fsopen, t.as_ptr(), 1u32) as libc::c_int)?;
        std::os::fd::OwnedFd::from_raw_fd(fd)
    };
    let null: *const libc::c_char = std::ptr::null();
    for (key, value) in options {
        let (k, v) = (cstr(key)?, cstr(value)?);
        // SAFETY: fsconfig(2) on a descriptor we own, with NUL-terminated strings that
        // outlive the call.
        check(unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                fs.as_raw_fd(),
                FSCONFIG_SET_STRING,
                k.as_ptr(),
                v.as_ptr(),
                0,
            )
        } as libc::c_int)?;
    }
    // SAFETY: fsconfig(2) and fsmount(2) on a descriptor we own; the mount's descriptor
    // is ours.
    unsafe {
        let (fd, create) = (fs.as_raw_fd(), FSCONFIG_CMD_CREATE);
        check(libc::syscall(libc::SYS_fsconfig, fd, create, null, null, 0) as libc::c_int)?;
        let m = libc::syscall(libc::SYS_fsmount, fs.as_raw_fd(), 1u32, attrs);
        Ok(std::os::fd::OwnedFd::from_raw_fd(check(m as libc::c_int)?))
    }
}

/// A device file [`device_files`] makes.
pub struct DeviceFile<'a> {
    /// Its name at the tmpfs's root.
    pub name: &'a str,
    /// A block device, else a character one.
    pub block: bool,
    pub major: u32,
    pub minor: u32,
    /// Its permission bits.
    pub mode: u32,
}

/// A tmpfs of its own, detached (attached nowhere), holding the device files `devices`
/// at its root, each with its mode whatever the umask. Made by the host's root in the
/// host's user namespace, the tmpfs lets its devices be used, where a confined node's own
/// mounts would not (the kernel makes them `nodev`) and a bind of the host's file would
/// keep the host's owner and mode (the host's /dev/net/tun may be its root's alone). A
/// node attaches it ([`attach_tree`]) and binds its devices from there.
pub fn device_files(devices: &[DeviceFile<'_>]) -> io::Result<std::os::fd::OwnedFd> {
    let mount = detached_fs("tmpfs", &[], 0)?;
    for d in devices {
        let n = cstr(d.name)?;
        let kind = if d.block {
            libc::S_IFBLK
        } else {
            libc::S_IFCHR
        };
        // SAFETY: mknodat(2) and fchmodat(2) below a descriptor we own, on a
        // NUL-terminated name; the umask would otherwise narrow the mode.
        unsafe {
            let dev = libc::makedev(d.major, d.minor);
            check(libc::mknodat(
                mount.as_raw_fd(),
                n.as_ptr(),
                kind | d.mode,
                dev,
            ))?;
            check(libc::fchmodat(mount.as_raw_fd(), n.as_ptr(), d.mode, 0))?;
        }
    }
    Ok(mount)
}

/// Attaches a tree [`clone_tree`] made at `target` (read-only when asked: the top mount
/// only, as [`bind`] does).
pub fn attach_tree(tree: BorrowedFd<'_>, target: &str, read_only: bool) -> io::Result<()> {
    let t = cstr(target)?;
    // SAFETY: move_mount(2) of a descriptor borrowed for the call onto a NUL-terminated
    // path.
    unsafe {
        check(libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        ) as libc::c_int)?;
    }
    if read_only {
        remount_read_only(&t)?;
    }
    Ok(())
}

/// Makes the mount at `target` read-only (the mount only: what is below keeps its own).
fn remount_read_only(target: &std::ffi::CStr) -> io::Result<()> {
    let ro = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY;
    let null = std::ptr::null();
    // SAFETY: mount(2) on a NUL-terminated path that outlives the call, and nulls.
    check(unsafe { libc::mount(null, target.as_ptr(), null, ro, null.cast()) }).map(drop)
}

/// The flags of a mount a node may only read: nothing on it runs, opens as a device, or
/// raises privileges.
const READ_ONLY_FLAGS: libc::c_ulong =
    libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;

/// Mounts `views` read-only at /sys/fs/cgroup, as Docker gives a container its cgroups:
/// called in a cgroup namespace of the node's own, each mount's root is the node's group,
/// where a program learns its limits (a runtime sizing its heap or its threads to
/// `memory.max` and `cpu.max`). Read-only, though the node could change nothing there
/// anyway: the files are the host's root's. Several views (v1, or v1 and v2 together)
/// get a read-only tmpfs that holds their folders, and a co-mounted v1 hierarchy a link
/// by each of its names (`cpu -> cpu,cpuacct`), as systemd makes. Nothing for none.
pub fn mount_cgroup_view(views: &[View]) -> io::Result<()> {
    const AT: &str = "/sys/fs/cgroup";
    let ro = READ_ONLY_FLAGS;
    match views {
        [] => return Ok(()),
        [View::Unified] => return mount_with_flags("cgroup2", AT, "", ro),
        _ => {}
    }
    let folders = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    mount_with_flags("tmpfs", AT, "mode=0755,size=64k", folders)?;
    for v in views {
        let (fs, folder, options) = match v {
            View::Unified => ("cgroup2", "unified", ""),
            View::V1(controllers) => ("cgroup", controllers.as_str(), controllers.as_str()),
        };
        let path = format!("{AT}/{folder}");
        std::fs::create_dir(&path).map_err(|e| within(&path, e))?;
        mount_with_flags(fs, &path, options, ro).map_err(|e| within(&path, e))?;
        let names = options.split(',').filter(|n| !n.is_empty() && *n != folder);
        for name in names {
            let link = format!("{AT}/{name}");
            std::os::unix::fs::symlink(folder, &link).map_err(|e| within(&link, e))?;
        }
    }
    remount_read_only(&cstr(AT)?)
}

/// `e` said with the path it is about.
fn within(path: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{path}: {e}"))
}

/// Makes the working directory the root of the calling process's mount namespace, as
/// container runtimes do: `pivot_root(".", ".")` stacks the old root on the new one, which
/// is then detached, so nothing of the host's filesystems stays reachable. The working
/// directory must be a mount point, in a mount namespace whose mounts are private.
pub fn pivot_root_to_cwd() -> io::Result<()> {
    // SAFETY: pivot_root(2) and umount2(2) on static NUL-terminated paths, chdir(2) too.
    unsafe {
        check(libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()) as libc::c_int)?;
        check(libc::umount2(c".".as_ptr(), libc::MNT_DETACH))?;
        check(libc::chdir(c"/".as_ptr()))?;
    }
    Ok(())
}

/// Binds `source` over `target` (with what is mounted below it, as a container engine's
/// bind), or read-only: then without what is below, which a read-only remount of the top
/// would leave writable.
pub fn bind(source: &str, target: &str, read_only: bool) -> io::Result<()> {
    let (s, t) = (cstr(source)?, cstr(target)?);
    let flags = if read_only {
        libc::MS_BIND
    } else {
        libc::MS_BIND | libc::MS_REC
    };
    // SAFETY: mount(2) with NUL-terminated strings that outlive the call.
    check(unsafe {
        libc::mount(
            s.as_ptr(),
            t.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    })?;
    if read_only {
        remount_read_only(&t)?;
    }
    Ok(())
}

/// What Docker hides of /proc and /sys from a container: of the machine, not of the
/// node's namespaces. A file is covered by /dev/null, a folder by an empty read-only
/// tmpfs; each path with whether it is a folder on the kernels Docker's list was made for.
pub const MASKED_PATHS: &[(&str, bool)] = &[
    ("/proc/acpi", true),
    ("/proc/asound", true),
    ("/proc/interrupts", false),
    ("/proc/kcore", false),
    ("/proc/keys", false),
    ("/proc/latency_stats", false),
    ("/proc/sched_debug", false),
    ("/proc/scsi", true),
    ("/proc/timer_list", false),
    ("/proc/timer_stats", false),
    ("/sys/devices/virtual/powercap", true),
    ("/sys/firmware", true),
];

/// What Docker makes read-only in /proc. /proc/sys's `net` stays writable, as the node's
/// own network namespace's sysctls: Docker writes a container's `--sysctl`s before it
/// makes /proc/sys read-only, and a router sets its own as it runs.
pub const READ_ONLY_PATHS: &[&str] = &[
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

/// Masks [`MASKED_PATHS`] and makes [`READ_ONLY_PATHS`] read-only, where they exist, in
/// the caller's mount namespace (its /proc and /sys mounted already, and /dev/null).
/// Made by the node's root in a mount namespace its user namespace owns, the mounts are
/// not locked: the kernel then lets the node mount a proc or sysfs of its own (`ip netns
/// exec`, a container in the node), which it refuses where a locked mount covers part
/// of the ones it has. The node's root may take them away (umount): what they hide is
/// guarded by the user namespace anyway (reading /proc/kcore, writing `kernel.*`, each
/// asks for a capability in the host's); they give a node Docker's view of the machine.
pub fn mask_system_paths() -> io::Result<()> {
    // As runc, but with the kind known: a bind of the wrong kind (/dev/null over a
    // folder) is refused with ENOTDIR only after the kernel has copied the source and
    // thrown the copy away, which waits for an RCU grace period (measured: two such waits
    // per node, each serialised with every other node's mount changes). Nothing there
    // (ENOENT) costs nothing. No look before each: a lookup in the node's new /proc costs
    // as much as the mount. Folders share one empty tmpfs, bound from the first: a
    // superblock each costs the kernel a shrinker and more.
    let mut empty: Option<&str> = None;
    for &(path, folder) in MASKED_PATHS {
        let mut mask = |folder: bool| match (folder, empty) {
            (false, _) => bind("/dev/null", path, false),
            (true, Some(first)) => bind(first, path, false),
            (true, None) => mount_with_flags("tmpfs", path, "size=0", READ_ONLY_FLAGS)
                .inspect(|()| empty = Some(path)),
        };
        // A kernel where the path is of the other kind gets the other mask.
        let masked = match mask(folder) {
            Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => mask(!folder),
            done => done,
        };
        match masked {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            masked => masked.map_err(|e| within(path, e))?,
        }
    }
    // A mount of its own first, which the recursive bind of /proc/sys takes along and
    // the read-only remount of its top leaves writable.
    let net = "/proc/sys/net";
    bind(net, net, false).map_err(|e| within(net, e))?;
    for &path in READ_ONLY_PATHS {
        match bind(path, path, false) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
            bound => bound.map_err(|e| within(path, e))?,
        }
        remount_read_only(&cstr(path)?).map_err(|e| within(path, e))?;
    }
    Ok(())
}

/// Moves the calling thread into the namespace behind `fd`, of type `flags`; or, with a
/// pidfd, into those of its process that `flags` names, all at once. For CLONE_NEWNS the
/// thread must not share its filesystem information ([`unshare_fs`]); CLONE_NEWPID
/// applies to its children.
pub fn setns(fd: BorrowedFd<'_>, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: setns(2) on a descriptor borrowed for the call.
    check(unsafe { libc::setns(fd.as_raw_fd(), flags) }).map(drop)
}

/// Gives the calling thread its own root and working directory, which it must have to
/// change mount namespace in a process with other threads.
pub fn unshare_fs() -> io::Result<()> {
    // SAFETY: unshare(2) with one flag; it affects only the calling thread.
    check(unsafe { libc::unshare(libc::CLONE_FS) }).map(drop)
}

extern "C" fn note_signal(_: libc::c_int) {}

/// Unmaps the anonymous memory a forked init inherited from its fleet's supervisor (the
/// heap, the other threads' stacks) except the stack it runs on. Forked from a supervisor
/// that has grown with its fleet, each init otherwise keeps copy-on-write pages that the
/// supervisor changes later, a private copy each (measured: 2.3 MB per node at 100 BIRD
/// routers, 1.0 MB for 1), and lengthens the kernel's reverse-map walks of every shared
/// page. Only for [`run_node_init`], which from here on makes syscalls on its stack and
/// never touches the heap again (a panic from here on would fault: nothing here panics).
///
/// The list of mappings is on the heap, and the mapping that holds it goes last: a list on
/// the stack would make every init keep its pages (measured: 64 KB of a fixed array, half
/// of an init's memory).
fn let_go_of_inherited_memory() -> io::Result<()> {
    let marker = std::hint::black_box(0u8);
    let here = &marker as *const u8 as usize;
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    {
        let maps = std::fs::read_to_string("/proc/self/maps")?;
        // Where the previous mapping ends, if it is a file's: an anonymous mapping right
        // after one is that program's or library's .bss (libc's own globals among them).
        let mut file_end = None;
        for line in maps.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let Some((a, b)) = f.first().and_then(|r| r.split_once('-')) else {
                continue;
            };
            let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
            else {
                continue;
            };
            let after_file = file_end == Some(a);
            file_end = f.get(5).filter(|p| p.starts_with('/')).map(|_| b);
            // Anonymous or the heap, private: what fork copied. Named mappings (the
            // program, libraries, [stack], [vdso]) stay, and so does .bss.
            let anon = f.len() == 5 || f.get(5) == Some(&"[heap]");
            if !anon || after_file || !f.get(1).is_some_and(|p| p.ends_with('p')) {
                continue;
            }
            if !(a..b).contains(&here) {
                ranges.push((a, b)); // not the stack we run on (with its thread's TLS)
            }
        }
    } // `maps` and `f` are freed here, before their heap goes.
    let list = ranges.as_ptr() as usize;
    let holds_list = |&(a, b): &(usize, usize)| (a..b).contains(&list);
    let last = ranges.iter().copied().find(holds_list);
    for &(a, b) in ranges.iter().filter(|r| !holds_list(r)) {
        // SAFETY: munmap(2) of whole mappings of this process other than the running
        // stack and the one holding `ranges`. Nothing that lives in them is used after
        // this: the caller only makes syscalls on stack values until it exits, and takes
        // no lock and allocates nothing.
        unsafe { libc::munmap(a as *mut libc::c_void, b - a) };
    }
    // Its memory goes with its mapping: it must not be freed into a heap that is gone.
    std::mem::forget(ranges);
    if let Some((a, b)) = last {
        // SAFETY: as above; `a` and `b` are on the stack, and nothing reads `ranges` again.
        unsafe { libc::munmap(a as *mut libc::c_void, b - a) };
    }
    Ok(())
}

/// What a node's init takes as "stop every process of the node" (SIGSTOP, `nsfleet node
/// pause`) and "let them go on" (SIGCONT, `resume`): an init alone can reach exactly its
/// namespace's processes, by kill(-1), whatever their pids look like from outside.
pub const PAUSE: libc::c_int = libc::SIGUSR1;
pub const RESUME: libc::c_int = libc::SIGUSR2;

/// The loop of a node's init, PID 1 of the node's PID namespace: reaps what is orphaned to
/// it (daemons that double-fork end up here) and, on SIGTERM, sends SIGTERM to every
/// process of the namespace, waits up to `grace` for them, and exits. Its exit makes the
/// kernel kill whatever is left: nothing of the node outlives it. Never returns.
///
/// `ready` runs once the init's signals are set up and before it lets go of its inherited
/// memory (the last moment it may allocate): a stop asked for from then on is queued, not
/// lost (a PID namespace's init without a handler drops even SIGTERM from its ancestors).
/// [`PAUSE`] and [`RESUME`] stop and continue the node's other processes.
pub fn run_node_init(grace: Duration, ready: impl FnOnce()) -> ! {
    let signals = [libc::SIGTERM, libc::SIGCHLD, libc::SIGINT, PAUSE, RESUME];
    // SAFETY: sigaction/sigprocmask on stack values. Each signal gets a handler (that does
    // nothing) so that the kernel delivers it to an init, and stays blocked: they are taken
    // by sigtimedwait below.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in signals {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = note_signal as *const () as usize;
            libc::sigaction(s, &act, std::ptr::null_mut());
            libc::sigaddset(&mut set, s);
        }
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    };
    ready();
    // Set up, as nsfleet's work: from now on it is the node's (see prefer_this_thread).
    crate::plain_priority();
    let _ = let_go_of_inherited_memory();
    // SAFETY: sigtimedwait/waitpid/kill on stack values and integers.
    unsafe {
        let reap = || while libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) > 0 {};
        let tick = libc::timespec {
            tv_sec: 0,
            tv_nsec: 20_000_000,
        };
        let forever = libc::timespec {
            tv_sec: 3600,
            tv_nsec: 0,
        };
        loop {
            let sig = libc::sigtimedwait(&set, std::ptr::null_mut(), &forever);
            reap();
            if sig == libc::SIGTERM || sig == libc::SIGINT {
                break;
            }
            // kill(-1) from an init: every other process of the node, and only those.
            if sig == PAUSE {
                libc::kill(-1, libc::SIGSTOP);
            }
            if sig == RESUME {
                libc::kill(-1, libc::SIGCONT);
            }
        }
        libc::kill(-1, libc::SIGTERM);
        // A paused node's processes take their SIGTERM once they run again.
        libc::kill(-1, libc::SIGCONT);
        let deadline = Instant::now() + grace;
        // kill(-1, 0) from an init reaches every other process of its namespace: ESRCH
        // once none is left.
        while libc::kill(-1, 0) == 0 && Instant::now() < deadline {
            libc::sigtimedwait(&set, std::ptr::null_mut(), &tick);
            reap();
        }
        libc::_exit(0)
    }
}

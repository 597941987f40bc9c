//! A node's world: the mount, UTS and PID namespaces of a node that runs processes, the
//! mounts made in it, entering it, and the loop of its init (PID 1 of its PID namespace).
//!
//! Mounts here are only ever made in a mount namespace the caller has just unshared and
//! made private: nothing propagates to the host, and everything goes when the namespace's
//! last process does.

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
    let (t, p, o) = (cstr(fstype)?, cstr(path)?, cstr(options)?);
    let flags = libc::MS_NOSUID | libc::MS_NODEV;
    let data = if options.is_empty() {
        std::ptr::null()
    } else {
        o.as_ptr().cast()
    };
    // SAFETY: mount(2) with NUL-terminated strings that outlive the call.
    check(unsafe { libc::mount(t.as_ptr(), p.as_ptr(), t.as_ptr(), flags, data) }).map(drop)
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
    // SAFETY: mount(2) with NUL-terminated strings that outlive the calls; the second
    // call remounts the bind.
    unsafe {
        check(libc::mount(
            s.as_ptr(),
            t.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        ))?;
        if read_only {
            let ro = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY;
            check(libc::mount(
                std::ptr::null(),
                t.as_ptr(),
                std::ptr::null(),
                ro,
                std::ptr::null(),
            ))?;
        }
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

/// Most mappings an init unmaps: a fixed array on the stack, as the heap goes with them.
const MAX_UNMAPPED: usize = 4096;

/// Unmaps the anonymous memory a forked init inherited from its fleet's supervisor (the
/// heap, the other threads' stacks) except the stack it runs on. Forked from a supervisor
/// that has grown with its fleet, each init otherwise keeps copy-on-write pages that the
/// supervisor changes later, a private copy each (measured: 2.3 MB per node at 100 BIRD
/// routers, 1.0 MB for 1), and lengthens the kernel's reverse-map walks of every shared
/// page. Only for [`run_node_init`], which from here on makes syscalls on its stack and
/// never touches the heap again (a panic from here on would fault: nothing here panics).
fn let_go_of_inherited_memory() -> io::Result<()> {
    let marker = std::hint::black_box(0u8);
    let here = &marker as *const u8 as usize;
    let mut ranges = [(0usize, 0usize); MAX_UNMAPPED];
    let mut n = 0;
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
            if (a..b).contains(&here) || n == MAX_UNMAPPED {
                continue; // the stack we run on (with its thread's TLS)
            }
            ranges[n] = (a, b);
            n += 1;
        }
    } // `maps` and `f` are freed here, before their heap goes.
    for &(a, b) in &ranges[..n] {
        // SAFETY: munmap(2) of whole mappings of this process other than the running
        // stack. Nothing that lives in them is used after this: the caller only makes
        // syscalls on stack values until it exits, and takes no lock and allocates nothing.
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

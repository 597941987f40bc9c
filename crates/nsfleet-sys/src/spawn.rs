//! Starting a node's process: a vfork (`clone` with CLONE_VM | CLONE_VFORK, as glibc's
//! posix_spawn does) whose child makes a few syscalls on a stack of its own and execs.
//!
//! A fork copied the supervisor's page tables, and made each page the supervisor wrote
//! next a copy-on-write fault in whichever of its threads wrote it: measured at 1,000
//! image nodes, fork and exec took 2.0-2.4 ms a spawn, a vfork (glibc's posix_spawn) 0.8
//! ms. std's `Command` spawns by vfork only when no code of ours runs in the child, and a
//! node's process needs some: an empty signal mask (the supervisor's threads block the
//! signals its signal thread waits for, and std leaves the mask as it finds it), and nice
//! 0 right before exec (see [`crate::prefer_this_thread`]).
//!
//! The child shares the caller's memory until it execs or exits, and the caller waits
//! until then: the child only reads what the caller prepared, writes one error number
//! back, and calls the kernel directly where glibc would act for the whole process
//! (set*id would signal the caller's threads). Every signal's action is reset in the
//! child before it unblocks any: a handler of the caller's would run on its memory.

use crate::check;
use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicI32, Ordering};

/// What a node's process is started as.
pub struct Exec<'a> {
    /// The program: a path, or a name looked up in `env`'s PATH (the host's default PATH
    /// if it has none) as execvp looks it up.
    pub program: &'a OsStr,
    /// Its arguments after the program's name.
    pub args: &'a [OsString],
    /// Its whole environment.
    pub env: &'a [(OsString, OsString)],
    /// Its standard input, output and error.
    pub stdio: [BorrowedFd<'a>; 3],
    /// Its working directory.
    pub cwd: Option<&'a OsStr>,
    /// Its user and group ids, without supplementary groups; the caller's when `None`.
    /// In a user namespace (`userns`), ids of that namespace.
    pub ids: Option<(libc::uid_t, libc::gid_t)>,
    /// A confined node's user namespace (its descriptor, or a pidfd of a process in it),
    /// which the process enters as its root before anything else.
    pub userns: Option<BorrowedFd<'a>>,
    /// The `cgroup.procs` files of the groups it joins, before it enters `userns` (see
    /// `cgroup::open_procs`).
    pub cgroups: &'a [BorrowedFd<'a>],
    /// A cgroup namespace it enters once it is root of `userns` (a confined node's, which
    /// that namespace owns; see `userns::cgroup_ns_of`): the caller may be in one it could
    /// not enter again (a user's fleet is in the host's).
    pub cgroupns: Option<BorrowedFd<'a>>,
    /// What it gives up before it execs (see [`crate::confine`]).
    pub restrictions: crate::confine::Restrictions,
}

/// Where execvp looks when PATH is not set (glibc's default, root's part first), and a
/// node's PATH unless its image sets one (Docker's default is the same).
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The child's stack: its few syscalls and the frames that make them.
const CHILD_STACK: usize = 64 << 10;

/// Everything the child reads, made before the clone: it may not allocate.
struct Prepared {
    candidates: Vec<CString>,
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: Option<CString>,
}

/// What the child gets: pointers into [`Prepared`] and the slot its error goes to.
struct ChildArgs<'a> {
    candidates: &'a [CString],
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
    cwd: Option<&'a CStr>,
    stdio: [RawFd; 3],
    ids: Option<(libc::uid_t, libc::gid_t)>,
    userns: Option<BorrowedFd<'a>>,
    cgroups: &'a [BorrowedFd<'a>],
    cgroupns: Option<BorrowedFd<'a>>,
    restrictions: crate::confine::Restrictions,
    /// The errno of the step that failed; 0 while none has.
    error: AtomicI32,
}

/// Starts `exec` in a process group of its own, with no signal blocked, every signal's
/// action the default, at nice 0, and SIGKILL when the calling thread ends. Returns its
/// pid once it has exec'd; an error (the failed step's errno, ENOENT if the program is
/// nowhere) if it could not.
pub fn spawn_node_process(exec: &Exec<'_>) -> io::Result<libc::pid_t> {
    let prepared = prepare(exec)?;
    let argv = pointers(&prepared.argv);
    let envp = pointers(&prepared.envp);
    let args = ChildArgs {
        candidates: &prepared.candidates,
        argv: &argv,
        envp: &envp,
        cwd: prepared.cwd.as_deref(),
        stdio: exec.stdio.map(|fd| fd.as_raw_fd()),
        ids: exec.ids,
        userns: exec.userns,
        cgroupns: exec.cgroupns,
        cgroups: exec.cgroups,
        restrictions: exec.restrictions,
        error: AtomicI32::new(0),
    };
    let mut stack = vec![0u8; CHILD_STACK];
    // The stack grows down from its end, which the ABI wants 16-byte aligned.
    let end = stack.as_mut_ptr_range().end as usize & !15;
    let all = blocked_all()?;
    // SAFETY: clone(2) through glibc's wrapper, which runs `child` on `end`, a stack of
    // CHILD_STACK bytes that outlives the child's use of it (CLONE_VFORK: this thread
    // sleeps until the child execs or exits). The child shares this memory and only reads
    // `args` (alive until then) but for its error slot, an atomic. Every signal is blocked
    // across the clone, so no handler of ours runs in the child before it resets them.
    let pid = unsafe {
        libc::clone(
            child,
            end as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &args as *const ChildArgs as *mut libc::c_void,
        )
    };
    let clone_error = io::Error::last_os_error();
    restore_mask(&all);
    drop(stack);
    if pid < 0 {
        return Err(clone_error);
    }
    match args.error.load(Ordering::Acquire) {
        0 => Ok(pid),
        errno => {
            // It exited at once; ours to reap (the caller holds the spawn guard).
            // SAFETY: waitpid(2) on our own child, with a valid status pointer.
            unsafe { libc::waitpid(pid, &mut 0, 0) };
            Err(io::Error::from_raw_os_error(errno))
        }
    }
}

fn prepare(exec: &Exec<'_>) -> io::Result<Prepared> {
    let c = |s: &OsStr| {
        CString::new(s.as_bytes()).map_err(|_| io::Error::other(format!("{s:?} holds a NUL byte")))
    };
    let program = exec.program.as_bytes();
    let candidates = if program.contains(&b'/') {
        vec![c(exec.program)?]
    } else {
        let path = (exec.env.iter().rev())
            .find(|(k, _)| k == "PATH")
            .map_or(OsStr::new(DEFAULT_PATH), |(_, v)| v.as_os_str());
        // An empty folder is the working directory, as execvp reads it.
        (path.as_bytes().split(|b| *b == b':'))
            .map(|dir| {
                let dir = if dir.is_empty() { b".".as_slice() } else { dir };
                c(OsStr::from_bytes(&[dir, b"/", program].concat()))
            })
            .collect::<io::Result<_>>()?
    };
    let argv = std::iter::once(exec.program)
        .chain(exec.args.iter().map(|a| a.as_os_str()))
        .map(c)
        .collect::<io::Result<_>>()?;
    let envp = (exec.env.iter())
        .map(|(k, v)| {
            c(OsStr::from_bytes(
                &[k.as_bytes(), b"=", v.as_bytes()].concat(),
            ))
        })
        .collect::<io::Result<_>>()?;
    let cwd = exec.cwd.map(c).transpose()?;
    if exec.restrictions.seccomp == crate::confine::Filter::Docker {
        // Built here: the child may not allocate.
        crate::seccomp::filter();
    }
    Ok(Prepared {
        candidates,
        argv,
        envp,
        cwd,
    })
}

/// `strings` as the NULL-terminated array of pointers exec takes.
fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    (strings.iter().map(|s| s.as_ptr()))
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// Blocks every signal in the calling thread; returns the mask it had.
fn blocked_all() -> io::Result<libc::sigset_t> {
    // SAFETY: sigfillset and pthread_sigmask on sigsets of our own stack.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        let rc = libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(old)
    }
}

fn restore_mask(mask: &libc::sigset_t) {
    // SAFETY: pthread_sigmask with a mask this thread had.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, mask, std::ptr::null_mut()) };
}

/// The child: the steps in order, then exec of each candidate until one runs. Never
/// returns: it execs, or exits 127 with the failed step's errno in its slot.
extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the caller's ChildArgs, alive while the caller waits for us.
    let args = unsafe { &*(arg as *const ChildArgs) };
    let errno = match setup(args) {
        Ok(()) => exec_candidates(args),
        Err(e) => e.raw_os_error().unwrap_or(libc::EINVAL),
    };
    args.error.store(errno, Ordering::Release);
    // SAFETY: _exit(2) has no preconditions; exit(3) would run the caller's atexit work.
    unsafe { libc::_exit(127) }
}

fn setup(args: &ChildArgs<'_>) -> io::Result<()> {
    // SAFETY: syscalls on integers, on the caller's prepared strings and on sigsets and
    // sigactions of this stack; none allocates or takes a lock, and set*id go straight to
    // the kernel (glibc's wrappers would signal the caller's threads, whose memory this is).
    unsafe {
        check(libc::setpgid(0, 0))?;
        // While still the host's root: a node's root may not move itself.
        crate::cgroup::join(args.cgroups)?;
        // First: a change of credentials clears the parent-death signal.
        if let Some(ns) = args.userns {
            crate::userns::become_root_in(ns)?;
        }
        if let Some(ns) = args.cgroupns {
            check(libc::setns(ns.as_raw_fd(), libc::CLONE_NEWCGROUP))?;
        }
        check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0))?;
        for (i, fd) in args.stdio.iter().enumerate() {
            if *fd == i as RawFd {
                check(libc::fcntl(*fd, libc::F_SETFD, 0))?;
            } else {
                check(libc::dup2(*fd, i as RawFd))?;
            }
        }
        if let Some(cwd) = args.cwd {
            check(libc::chdir(cwd.as_ptr()))?;
        }
        // While the node's root, with CAP_SYS_ADMIN and CAP_SETPCAP in its namespace.
        args.restrictions.apply()?;
        if let Some((uid, gid)) = args.ids {
            let no_groups: *const libc::gid_t = std::ptr::null();
            syscall(libc::syscall(libc::SYS_setgroups, 0, no_groups))?;
            syscall(libc::syscall(libc::SYS_setresgid, gid, gid, gid))?;
            syscall(libc::syscall(libc::SYS_setresuid, uid, uid, uid))?;
        }
        // Every action back to the default: handlers are the caller's (one would run on
        // its memory), SIGPIPE's SIG_IGN is the Rust runtime's, and others ignored are
        // whatever started nsfleet's. Straight to the kernel, which glibc's sigaction
        // would not let reset its own 32 and 33. An all-zero kernel sigaction is SIG_DFL
        // with no flags; SIGKILL's and SIGSTOP's are refused, and are the default.
        let dfl = [0u64; 4];
        for sig in 1..=64 {
            libc::syscall(libc::SYS_rt_sigaction, sig, dfl.as_ptr(), 0usize, 8usize);
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        let rc = libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        // Last: up to here the child was nsfleet's work; what it execs is the node's.
        libc::setpriority(libc::PRIO_PROCESS, 0, 0);
    }
    Ok(())
}

fn syscall(rc: libc::c_long) -> io::Result<()> {
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Tries each candidate as execvp does: a missing or forbidden one is passed over, and
/// the answer is EACCES if one was forbidden, else the last error.
fn exec_candidates(args: &ChildArgs<'_>) -> libc::c_int {
    let mut errno = libc::ENOENT;
    let mut forbidden = false;
    for path in args.candidates {
        // SAFETY: execve(2) with a NUL-terminated path and NULL-terminated arrays of
        // NUL-terminated strings, all alive in the caller's memory.
        unsafe { libc::execve(path.as_ptr(), args.argv.as_ptr(), args.envp.as_ptr()) };
        errno = io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::ENOENT);
        match errno {
            libc::EACCES => forbidden = true,
            libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {}
            _ => return errno,
        }
    }
    if forbidden {
        libc::EACCES
    } else {
        errno
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn run(exec: &Exec<'_>) -> io::Result<i32> {
        let pid = spawn_node_process(exec)?;
        let mut status = 0;
        // SAFETY: waitpid(2) on the child just spawned, with a valid status pointer.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        Ok(libc::WEXITSTATUS(status))
    }

    #[test]
    fn the_child_starts_clean_where_and_as_whom_it_is_told() {
        let dir = std::env::temp_dir().join(format!("nsfleet-spawn-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out_path = dir.join("out");
        let out = std::fs::File::create(&out_path).unwrap();
        let null = std::fs::File::open("/dev/null").unwrap();
        let script = "grep -E '^Sig(Blk|Ign)' /proc/self/status; pwd; echo $GREETING; id -u; id -g";
        let args = ["-c", script].map(OsString::from);
        let env = [("PATH", "/nowhere::/usr/bin:/bin"), ("GREETING", "hello")]
            .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        // A signal blocked here, as the supervisor's threads block theirs.
        // SAFETY: sigset and thread mask calls on sigsets of this stack (all-zero is a
        // valid sigset_t to start from).
        let old = unsafe {
            let mut term: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut term);
            libc::sigaddset(&mut term, libc::SIGTERM);
            libc::pthread_sigmask(libc::SIG_BLOCK, &term, &mut old);
            old
        };
        let code = run(&Exec {
            program: OsStr::new("sh"),
            args: &args,
            env: &env,
            stdio: [null.as_fd(), out.as_fd(), out.as_fd()],
            cwd: Some(OsStr::new("/")),
            ids: Some((65534, 65534)),
            userns: None,
            cgroupns: None,
            cgroups: &[],
            restrictions: Default::default(),
        });
        // SAFETY: back to the mask this thread had.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
        let text = std::fs::read_to_string(&out_path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(code.unwrap(), 0, "{text}");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "SigBlk:\t0000000000000000",
                "SigIgn:\t0000000000000000",
                "/",
                "hello",
                "65534",
                "65534"
            ]
        );
    }

    #[test]
    fn a_program_found_nowhere_is_not_found() {
        let null = std::fs::File::open("/dev/null").unwrap();
        let env = [(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
        let err = run(&Exec {
            program: OsStr::new("nsfleet-no-such-program"),
            args: &[],
            env: &env,
            stdio: [null.as_fd(), null.as_fd(), null.as_fd()],
            cwd: None,
            ids: None,
            userns: None,
            cgroupns: None,
            cgroups: &[],
            restrictions: Default::default(),
        })
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}

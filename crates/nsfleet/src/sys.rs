//! The engine's syscall boundary: every `unsafe` of the crate lives in this file.
//!
//! Each wrapper does one syscall (or one fixed sequence) and returns `io::Result`; policy
//! (when to switch namespace, whom to signal) belongs to the callers.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Moves the calling thread (only it: namespaces are per task) into a new network namespace.
pub fn unshare_net() -> io::Result<()> {
    // SAFETY: unshare(2) takes no pointers; CLONE_NEWNET affects only the calling thread.
    check(unsafe { libc::unshare(libc::CLONE_NEWNET) }).map(drop)
}

/// Moves the calling thread into the network namespace behind `fd`.
pub fn setns_net(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: setns(2) on a descriptor we borrow for the call; affects only this thread.
    check(unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) }).map(drop)
}

/// A descriptor for the calling thread's current network namespace. It holds a reference
/// to the namespace: the namespace lives at least as long as the descriptor.
pub fn current_netns() -> io::Result<OwnedFd> {
    open_cloexec(c"/proc/thread-self/ns/net")
}

fn open_cloexec(path: &std::ffi::CStr) -> io::Result<OwnedFd> {
    // SAFETY: path is NUL-terminated; the descriptor is checked and then owned.
    let fd = check(unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) })?;
    // SAFETY: fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The inode number of a namespace descriptor: the namespace's identity, as shown in
/// `/proc/PID/ns/net` (`net:[INODE]`).
pub fn inode_of(fd: BorrowedFd<'_>) -> io::Result<u64> {
    // SAFETY: stat is plain data filled by fstat(2).
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor and a valid out-pointer.
    check(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(st.st_ino)
}

/// A pidfd for a child we have not reaped yet.
pub fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open(2) takes a pid and flags; the result is a fresh descriptor.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// A descriptor of our own for descriptor `fd` of the process `pidfd` refers to.
pub fn pidfd_getfd(pidfd: BorrowedFd<'_>, fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_getfd(2) takes a pidfd, a descriptor number and flags; the result is
    // a fresh descriptor.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
}

/// Restores SIGPIPE's default action (the Rust runtime ignores it, which turns a closed
/// pipe into a panic on the next print).
pub fn die_on_sigpipe() {
    // SAFETY: installs the default disposition for one signal; no handler runs.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// Sends `sig` to a whole process group.
pub fn kill_group(pgid: libc::pid_t, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: kill(2) takes plain integers; a negative pid addresses the group.
    check(unsafe { libc::kill(-pgid, sig) }).map(drop)
}

/// One pollfd per descriptor, waiting for it to become readable.
fn pollfds_in(fds: &[BorrowedFd<'_>]) -> Vec<libc::pollfd> {
    fds.iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect()
}

/// Waits until each pidfd is readable (its process exited) or `timeout` passes; returns
/// how many exited.
pub fn poll_exited(pidfds: &[BorrowedFd<'_>], timeout: Duration) -> io::Result<usize> {
    let mut pfds = pollfds_in(pidfds);
    let deadline = std::time::Instant::now() + timeout;
    let mut exited = 0;
    while exited < pfds.len() {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        // SAFETY: pfds is a valid array of the length passed; poll ignores negative fds.
        let rc = unsafe {
            libc::poll(
                pfds.as_mut_ptr(),
                pfds.len() as libc::nfds_t,
                left.as_millis() as i32,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if rc == 0 {
            break;
        }
        // An exited pidfd stays readable: stop polling it so poll() sleeps until the next.
        for p in pfds.iter_mut().filter(|p| p.revents != 0) {
            p.fd = -1;
            p.revents = 0;
            exited += 1;
        }
    }
    Ok(exited)
}

/// Reaps one child by pidfd if it has exited; ECHILD (already reaped elsewhere) is fine.
pub fn reap_pidfd(pidfd: BorrowedFd<'_>) {
    // SAFETY: siginfo_t is plain data; waitid(2) with P_PIDFD and WNOHANG never blocks.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::waitid(
            libc::P_PIDFD,
            pidfd.as_raw_fd() as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG,
        );
    }
}

/// Reaps every exited child without blocking (the duty of a PID namespace's init).
pub fn reap_any() {
    let _no_spawn_in_flight = SPAWNING.write();
    loop {
        let mut status = 0;
        // SAFETY: waitpid(2) with WNOHANG and a valid out-pointer.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return;
        }
    }
}

/// Runs in a freshly forked child before exec: only async-signal-safe syscalls here.
/// Puts the child into its own process group, arranges SIGKILL when the spawning thread
/// dies, and clears the signal mask the supervisor keeps blocked for its signal thread.
/// The child's network namespace is the spawning thread's (fork copies the calling
/// task's namespaces), so a worker inside a node spawns into that node.
fn child_setup() -> io::Result<()> {
    // SAFETY: each call is a plain syscall on integers or on a local sigset; all are
    // async-signal-safe, as required between fork and exec.
    unsafe {
        check(libc::setpgid(0, 0))?;
        check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0))?;
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        let rc = libc::pthread_sigmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
    }
    Ok(())
}

/// A /proc/meminfo field in bytes (0 if unreadable), `key` with its colon ("Slab:").
pub fn meminfo(key: &str) -> i64 {
    meminfo_fields(&[key])[0]
}

/// Several /proc/meminfo fields from one read, in the order of `keys`.
pub fn meminfo_fields<const N: usize>(keys: &[&str; N]) -> [i64; N] {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    keys.map(|key| {
        (text.lines().find_map(|l| l.strip_prefix(key)))
            .and_then(|v| v.split_whitespace().next()?.parse::<i64>().ok())
            .map_or(0, |kb| kb * 1024)
    })
}

/// Why the kernel refused a new network namespace, in the words of the limit that did it.
pub fn explain_new_namespace(e: io::Error) -> anyhow::Error {
    let why = match e.raw_os_error() {
        Some(libc::ENOSPC) => "user.max_net_namespaces is reached: the kernel refuses more network namespaces for this user (sysctl user.max_net_namespaces)",
        Some(libc::ENOMEM) => "the kernel is out of memory for another namespace",
        Some(libc::EMFILE) | Some(libc::ENFILE) => "out of file descriptors (RLIMIT_NOFILE, or fs.file-max machine-wide)",
        Some(libc::EPERM) => "not permitted: creating network namespaces needs root (CAP_SYS_ADMIN)",
        _ => return e.into(),
    };
    anyhow::Error::new(e).context(why)
}

/// RLIMIT_NOFILE in force: (soft, hard).
pub fn nofile_limits() -> (u64, u64) {
    // SAFETY: rlimit is plain data; getrlimit writes into it.
    unsafe {
        let mut rl: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) != 0 {
            return (0, 0);
        }
        (rl.rlim_cur, rl.rlim_max)
    }
}

/// Whether this process has capability `cap` in its effective set (/proc/self/status).
pub fn has_capability(cap: u32) -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let hex = s.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
            u64::from_str_radix(hex.trim(), 16).ok()
        })
        .is_some_and(|caps| caps & (1u64 << cap) != 0)
}

/// Raises RLIMIT_NOFILE so that at least `want` descriptors can be open; the hard limit
/// too when we may (root). Returns the soft limit in force.
pub fn raise_nofile(want: u64) -> io::Result<u64> {
    // SAFETY: rlimit is plain data; getrlimit/setrlimit take valid pointers.
    unsafe {
        let mut rl: libc::rlimit = std::mem::zeroed();
        check(libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl))?;
        if rl.rlim_cur >= want {
            return Ok(rl.rlim_cur);
        }
        let mut new = rl;
        new.rlim_cur = want;
        if new.rlim_max < want {
            new.rlim_max = want;
        }
        if libc::setrlimit(libc::RLIMIT_NOFILE, &new) == 0 {
            return Ok(want);
        }
        new.rlim_cur = rl.rlim_max;
        new.rlim_max = rl.rlim_max;
        check(libc::setrlimit(libc::RLIMIT_NOFILE, &new))?;
        Ok(rl.rlim_max)
    }
}

/// A signal set holding exactly `signals`.
fn sigset(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset/sigaddset only write into it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in signals {
            libc::sigaddset(&mut set, *s);
        }
        set
    }
}

/// Waits for one of `signals` (which must be blocked) and returns it.
pub fn wait_signal(signals: &[libc::c_int]) -> io::Result<libc::c_int> {
    let set = sigset(signals);
    let mut sig = 0;
    // SAFETY: a valid sigset and an out-integer for sigwait(3).
    let rc = unsafe { libc::sigwait(&set, &mut sig) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(sig)
}

/// Waits up to `timeout` for one of `signals` (which must be blocked); takes it if it came.
pub fn take_signal(signals: &[libc::c_int], timeout: Duration) -> io::Result<Option<libc::c_int>> {
    let set = sigset(signals);
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: a valid sigset and timespec; no siginfo is asked for.
    let r = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) };
    match r {
        r if r > 0 => Ok(Some(r)),
        _ => match io::Error::last_os_error() {
            e if e.raw_os_error() == Some(libc::EAGAIN)
                || e.raw_os_error() == Some(libc::EINTR) =>
            {
                Ok(None)
            }
            e => Err(e),
        },
    }
}

/// The command to start as the first process of a new PID namespace.
pub struct InitCommand {
    path: CString,
    argv: Vec<CString>,
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
}

impl InitCommand {
    pub fn new(
        path: &str,
        args: &[String],
        stdin: RawFd,
        stdout: RawFd,
        stderr: RawFd,
    ) -> io::Result<Self> {
        let c = |s: &str| CString::new(s).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput));
        Ok(InitCommand {
            path: c(path)?,
            argv: args.iter().map(|a| c(a)).collect::<io::Result<_>>()?,
            stdin,
            stdout,
            stderr,
        })
    }

    /// Starts the command as PID 1 of a new PID namespace, in a new session. When it dies,
    /// the kernel kills every other process of that namespace: the whole fleet's process
    /// tree, daemons that double-forked included. Returns its pid as seen from here.
    pub fn spawn(&self) -> io::Result<libc::pid_t> {
        let mut argv: Vec<*const libc::c_char> = self.argv.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        #[repr(C)]
        #[derive(Default)]
        struct CloneArgs {
            flags: u64,
            pidfd: u64,
            child_tid: u64,
            parent_tid: u64,
            exit_signal: u64,
            stack: u64,
            stack_size: u64,
            tls: u64,
        }
        let args = CloneArgs {
            flags: libc::CLONE_NEWPID as u64,
            exit_signal: libc::SIGCHLD as u64,
            ..Default::default()
        };
        // SAFETY: clone3 without CLONE_VM behaves like fork: the child gets a copy of
        // our memory and runs on its copy of this stack. Between clone and exec the
        // child only calls async-signal-safe syscalls (dup2, setsid, execv, _exit) on
        // data prepared before the clone, so it is sound even if the parent had threads.
        unsafe {
            let pid = libc::syscall(
                libc::SYS_clone3,
                &args as *const CloneArgs,
                std::mem::size_of::<CloneArgs>(),
            );
            if pid < 0 {
                return Err(io::Error::last_os_error());
            }
            if pid == 0 {
                if libc::dup2(self.stdin, 0) < 0
                    || libc::dup2(self.stdout, 1) < 0
                    || libc::dup2(self.stderr, 2) < 0
                    || libc::setsid() < 0
                {
                    libc::_exit(126);
                }
                libc::execv(self.path.as_ptr(), argv.as_ptr());
                libc::_exit(127);
            }
            Ok(pid as libc::pid_t)
        }
    }
}

/// Our pid as the host sees it. Inside a new PID namespace getpid() says 1, but /proc is
/// the host's, and its `self` link names us in the host's numbering.
pub fn host_pid() -> libc::pid_t {
    std::fs::read_link("/proc/self")
        .ok()
        .and_then(|p| p.to_str().and_then(|s| s.parse().ok()))
        // SAFETY: getpid(2) cannot fail.
        .unwrap_or_else(|| unsafe { libc::getpid() })
}

/// A process's start time in clock ticks since boot (with the pid, an identity that
/// survives pid reuse), or `None` if it no longer runs (gone, or a zombie).
pub fn running_since(pid: libc::pid_t) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which may itself contain spaces: state, then the
    // start time 19 fields later.
    let mut fields = s.rsplit(')').next()?.split_whitespace();
    let state = fields.next()?;
    if state.starts_with(['Z', 'X']) {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

/// A control buffer with room for one descriptor (SCM_RIGHTS).
fn one_fd_cmsg_buf() -> Vec<u8> {
    // SAFETY: CMSG_SPACE is pure arithmetic.
    vec![0u8; unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize]
}

/// A msghdr over one buffer and a control buffer. The pointers it holds are valid as long
/// as `iov` and `cbuf` are: callers pass it to one syscall while both are alive.
fn msghdr_with(iov: &mut libc::iovec, cbuf: &mut [u8]) -> libc::msghdr {
    // SAFETY: msghdr is plain data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = cbuf.len();
    msg
}

/// Sends `payload` and one descriptor over a Unix stream socket (SCM_RIGHTS).
pub fn send_with_fd(sock: BorrowedFd<'_>, payload: &[u8], fd: BorrowedFd<'_>) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: payload.as_ptr() as *mut libc::c_void,
        iov_len: payload.len(),
    };
    let mut cbuf = one_fd_cmsg_buf();
    let msg = msghdr_with(&mut iov, &mut cbuf);
    // SAFETY: msg points at iov and cbuf, both alive for the call; the CMSG_* macros stay
    // inside cbuf, which one_fd_cmsg_buf sized with CMSG_SPACE for one descriptor.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut RawFd, fd.as_raw_fd());
        let rc = libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL);
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Receives up to `buf.len()` bytes and at most one descriptor passed with them.
pub fn recv_with_fd(sock: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(usize, Option<OwnedFd>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let mut cbuf = one_fd_cmsg_buf();
    let mut msg = msghdr_with(&mut iov, &mut cbuf);
    // SAFETY: as in send_with_fd; the received descriptor (if any) is new in our table
    // (MSG_CMSG_CLOEXEC) and owned from here on.
    unsafe {
        let n = libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut fd = None;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if !cmsg.is_null()
            && (*cmsg).cmsg_level == libc::SOL_SOCKET
            && (*cmsg).cmsg_type == libc::SCM_RIGHTS
        {
            let raw = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const RawFd);
            fd = Some(OwnedFd::from_raw_fd(raw));
        }
        Ok((n as usize, fd))
    }
}

/// Like `ip netns exec`: a private mount namespace with /sys remounted, so that
/// /sys/class/net shows the interfaces of the network namespace we just entered.
pub fn remount_sys_for_netns() -> io::Result<()> {
    // SAFETY: unshare/mount/umount2 with NUL-terminated static strings.
    unsafe {
        check(libc::unshare(libc::CLONE_NEWNS))?;
        check(libc::mount(
            c"none".as_ptr(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_SLAVE,
            std::ptr::null(),
        ))?;
        libc::umount2(c"/sys".as_ptr(), libc::MNT_DETACH);
        check(libc::mount(
            c"sysfs".as_ptr(),
            c"/sys".as_ptr(),
            c"sysfs".as_ptr(),
            0,
            std::ptr::null(),
        ))?;
    }
    Ok(())
}

/// Replaces this process with `argv` (searched in PATH). Returns only on failure.
pub fn exec(argv: &[String]) -> io::Error {
    let c: Result<Vec<CString>, _> = argv.iter().map(|a| CString::new(a.as_str())).collect();
    let Ok(c) = c else {
        return io::ErrorKind::InvalidInput.into();
    };
    let mut ptrs: Vec<*const libc::c_char> = c.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: argv is a NULL-terminated array of NUL-terminated strings that outlive the call.
    unsafe { libc::execvp(ptrs[0], ptrs.as_ptr()) };
    io::Error::last_os_error()
}

/// Held shared from fork until the child's pidfd exists, and exclusively by [`reap_any`]:
/// otherwise a child that exits at once could be reaped by a PID-1 orphan sweep before we
/// hold a pidfd for it, and its pid could be recycled under us.
static SPAWNING: parking_lot::RwLock<()> = parking_lot::RwLock::new(());

/// Spawns `cmd` as a node process ([`child_setup`] runs between fork and exec) and
/// returns its pid. The caller holds [`spawn_guard`] until it has opened a pidfd for it.
pub fn spawn_node_process(cmd: &mut std::process::Command) -> io::Result<libc::pid_t> {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure only makes async-signal-safe syscalls (see child_setup), as
    // required of code running in a forked child of a multi-threaded process.
    unsafe { cmd.pre_exec(child_setup) };
    Ok(cmd.spawn()?.id() as libc::pid_t)
}

/// Held from before a spawn until the child's pidfd is open (see `SPAWNING`).
pub fn spawn_guard() -> parking_lot::RwLockReadGuard<'static, ()> {
    SPAWNING.read()
}

/// The pid of a pidfd's process as the host sees it (from /proc, which is the host's).
pub fn host_pid_of(pidfd: BorrowedFd<'_>) -> Option<i64> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd())).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("Pid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Points stdout at /dev/null, so whoever reads our old stdout sees end-of-file.
pub fn redirect_stdout_to_null() -> io::Result<()> {
    let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
    // SAFETY: dup2(2) on two valid descriptors; fd 1 is replaced atomically.
    check(unsafe { libc::dup2(null.as_raw_fd(), 1) }).map(drop)
}

/// Waits for a child and returns its wait status.
pub fn wait_child(pid: libc::pid_t) -> io::Result<libc::c_int> {
    let mut status = 0;
    loop {
        // SAFETY: waitpid(2) with a valid out-pointer.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc >= 0 {
            return Ok(status);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Opens a directory (for `*at` calls below it).
pub fn open_dir(path: &std::ffi::CStr) -> io::Result<OwnedFd> {
    // SAFETY: path is NUL-terminated; the descriptor is checked and then owned.
    let fd = check(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Writes `data` to the file `path` below `dir` (which must exist), in one write.
pub fn write_at(dir: BorrowedFd<'_>, path: &str, data: &[u8]) -> io::Result<()> {
    let c = CString::new(path).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: c is NUL-terminated and dir is a valid directory descriptor.
    let fd = check(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: fresh descriptor owned from here on.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: data is a valid buffer of the length passed.
    let n = unsafe {
        libc::write(
            fd.as_raw_fd(),
            data.as_ptr() as *const libc::c_void,
            data.len(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A weak reference to a namespace: its nsfs file handle (Linux 6.18+). Unlike the inode
/// number, which the kernel hands to the next namespace as soon as this one is gone, the
/// handle names this namespace only, and holding it keeps nothing alive.
#[derive(Clone)]
#[repr(C)]
pub struct NsHandle {
    bytes: u32,
    kind: i32,
    data: [u8; 24],
}

impl NsHandle {
    /// The namespace's inode number, which nsfs puts in its handles after the 64-bit
    /// namespace id and the type (`struct nsfs_file_handle`).
    pub fn inode(&self) -> Option<u64> {
        (self.bytes >= 16).then(|| u32::from_ne_bytes(self.data[12..16].try_into().unwrap()) as u64)
    }
}

/// The file handle of a namespace descriptor; `Unsupported` on kernels without nsfs handles.
pub fn ns_handle(ns: BorrowedFd<'_>) -> io::Result<NsHandle> {
    let mut h = NsHandle {
        bytes: 24,
        kind: 0,
        data: [0; 24],
    };
    let mut mount_id = 0;
    // SAFETY: `h` is a struct file_handle with room for `bytes` bytes of handle; the
    // kernel writes at most that much, and mount_id is a valid out-integer.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_name_to_handle_at,
            ns.as_raw_fd(),
            c"".as_ptr(),
            &mut h as *mut NsHandle,
            &mut mount_id as *mut libc::c_int,
            libc::AT_EMPTY_PATH,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(h)
}

/// Reopens the namespace behind `h`, or `None` once nothing holds it any more (ESTALE).
/// `nsfs` is any namespace descriptor: it names the filesystem the handle belongs to.
pub fn reopen_ns(nsfs: BorrowedFd<'_>, h: &NsHandle) -> io::Result<Option<OwnedFd>> {
    let mut h = h.clone();
    // SAFETY: `h` is a valid struct file_handle as name_to_handle_at filled it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_by_handle_at,
            nsfs.as_raw_fd(),
            &mut h as *mut NsHandle,
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::ESTALE) {
            Ok(None)
        } else {
            Err(e)
        };
    }
    // SAFETY: fresh descriptor owned by nobody else.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) }))
}

/// Gives the calling thread a file-descriptor table of its own (a copy), then closes in
/// that copy every descriptor from `keep_below` up. The rest of the process keeps its table.
pub fn private_fd_table(keep_below: u32) -> io::Result<()> {
    // SAFETY: unshare(2) and close_range(2) take plain integers; after CLONE_FILES they act
    // on this thread's own copy of the table only, which nothing else in the process sees.
    unsafe {
        check(libc::unshare(libc::CLONE_FILES))?;
        if libc::syscall(libc::SYS_close_range, keep_below, u32::MAX, 0) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A path to the calling thread's network namespace that other threads can open. Ids
/// are read from /proc's own `thread-self` link: inside the supervisor's PID namespace
/// gettid() answers in that namespace, while /proc counts in the host's.
pub fn thread_netns_path() -> io::Result<std::path::PathBuf> {
    let me = std::fs::read_link("/proc/thread-self")?;
    Ok(std::path::Path::new("/proc").join(me).join("ns/net"))
}

/// The process's own network namespace (its main thread's), whichever thread asks.
pub fn open_process_netns() -> io::Result<OwnedFd> {
    open_cloexec(c"/proc/self/ns/net")
}

/// Signals blocked for as long as the guard lives; the previous mask comes back on drop,
/// and with it any of these signals that arrived meanwhile.
pub struct SignalsHeld(libc::sigset_t);

impl SignalsHeld {
    /// Blocks `signals` in the calling thread and in every thread it creates meanwhile.
    pub fn new(signals: &[libc::c_int]) -> io::Result<Self> {
        let set = sigset(signals);
        // SAFETY: sigset_t is plain data; pthread_sigmask writes the previous mask into it.
        let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: valid sigsets for the call.
        let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(SignalsHeld(old))
    }
}

impl Drop for SignalsHeld {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved by `new`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

/// Whether we run as root, which creating network and PID namespaces requires.
pub fn is_root() -> bool {
    // SAFETY: geteuid(2) cannot fail and has no side effects.
    unsafe { libc::geteuid() == 0 }
}

/// Waits until one of `fds` is readable; returns which are. `None` waits forever.
pub fn poll_readable(fds: &[BorrowedFd<'_>], timeout: Option<Duration>) -> io::Result<Vec<bool>> {
    let mut pfds = pollfds_in(fds);
    let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
    loop {
        // SAFETY: pfds is a valid array of the length passed.
        let rc = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
        if rc >= 0 {
            return Ok(pfds.iter().map(|p| p.revents != 0).collect());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Turns GRO on or off on an interface of the calling thread's namespace (the legacy
/// ETHTOOL_SGRO ioctl, one call with no family to resolve). On a veth, GRO on makes the
/// device run NAPI, which is what lets its peer hand it XDP frames.
pub fn set_gro(ifname: &str, on: bool) -> io::Result<()> {
    const ETHTOOL_SGRO: u32 = 0x2c;
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    let mut value = EthtoolValue {
        cmd: ETHTOOL_SGRO,
        data: on as u32,
    };
    nsfleet_traffic::sys::interface_ioctl(ifname, libc::SIOCETHTOOL, |req| {
        req.ifr_ifru.ifru_data = (&mut value as *mut EthtoolValue).cast();
    })?;
    Ok(())
}

//! Processes: pidfds, spawning node processes, reaping, signals to groups, identities that
//! survive pid reuse, standard streams. Helpers forked without exec are in [`crate::helper`].

use crate::check;
use crate::poll::pollfds_in;
use nsfleet_locks::{order, Mutex, RwLock};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

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

/// Sends `sig` to a whole process group.
pub fn kill_group(pgid: libc::pid_t, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: kill(2) takes plain integers; a negative pid addresses the group.
    check(unsafe { libc::kill(-pgid, sig) }).map(drop)
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

/// Reaps every exited child without blocking (the duty of a PID namespace's init), except
/// those [`watch_child`] named: their exit status is their watcher's to collect. The
/// kernel answers "which child exited" with the first it finds, so the sweep stops at a
/// watched one; its watcher reaps it soon, and the sweep after the next SIGCHLD goes on
/// (the orphans behind it wait until then).
pub fn reap_any() {
    let _no_spawn_in_flight = SPAWNING.write();
    loop {
        // SAFETY: siginfo_t is plain data; waitid(2) with WNOHANG|WNOWAIT only looks.
        let pid = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
            if libc::waitid(libc::P_ALL, 0, &mut info, flags) < 0 {
                return;
            }
            info.si_pid()
        };
        if pid <= 0 || WATCHED.lock().contains(&pid) {
            return;
        }
        // SAFETY: waitpid(2) of that one child, not blocking.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
    }
}

/// Children whose exit status their spawner collects ([`try_wait_pidfd`]), not
/// [`reap_any`]. Named while [`spawn_guard`] is held, before the child can be swept.
static WATCHED: Mutex<Vec<libc::pid_t>> = Mutex::new(order::WATCHED, Vec::new());

/// Keeps [`reap_any`] off child `pid` until [`unwatch_child`].
pub fn watch_child(pid: libc::pid_t) {
    WATCHED.lock().push(pid);
}

pub fn unwatch_child(pid: libc::pid_t) {
    WATCHED.lock().retain(|p| *p != pid);
}

/// How a child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Exit {
    Code(i32),
    Signal(i32),
    /// It ended, but its status was collected elsewhere.
    Unknown,
}

impl Exit {
    pub fn failed(self) -> bool {
        self != Exit::Code(0)
    }
}

/// Reaps the child behind `pidfd` if it has exited and says how it ended; `None` while it
/// runs (or if someone else reaped it).
pub fn try_wait_pidfd(pidfd: BorrowedFd<'_>) -> Option<Exit> {
    wait_pidfd(pidfd, 0)
}

/// How the child behind `pidfd` ended, if it has, without reaping it: it stays a zombie,
/// and its pid (and process group id) nobody else's, until it is reaped.
pub fn peek_exit_pidfd(pidfd: BorrowedFd<'_>) -> Option<Exit> {
    wait_pidfd(pidfd, libc::WNOWAIT)
}

fn wait_pidfd(pidfd: BorrowedFd<'_>, flags: libc::c_int) -> Option<Exit> {
    // SAFETY: siginfo_t is plain data; waitid(2) with P_PIDFD and WNOHANG never blocks.
    let info = unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let rc = libc::waitid(
            libc::P_PIDFD,
            pidfd.as_raw_fd() as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | flags,
        );
        if rc < 0 || info.si_pid() == 0 {
            return None;
        }
        info
    };
    // SAFETY: waitid filled a SIGCHLD siginfo, whose si_status is valid.
    let status = unsafe { info.si_status() };
    Some(match info.si_code {
        libc::CLD_EXITED => Exit::Code(status),
        _ => Exit::Signal(status),
    })
}

/// Process `pid` and all its descendants (host pids), from /proc, parents first.
pub fn tree_of(pid: i64) -> Vec<i64> {
    let mut tree = vec![pid];
    let mut i = 0;
    while i < tree.len() {
        tree.extend(children_of(tree[i]));
        i += 1;
    }
    tree
}

/// The children of process `pid` (host pids), from /proc.
pub fn children_of(pid: i64) -> Vec<i64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten();
    tasks
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A process's command line as `ps` shows it (arguments joined by spaces).
pub fn cmdline_of(pid: i64) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let words: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// Gives the calling thread, and what it forks until that resets it, more of the CPU than
/// the nodes' processes (nice -10). For nsfleet's workers and spawner: a fleet's own
/// daemons, started as it is built, otherwise starve its construction. Profiled with 306
/// FRR routers on 2 CPUs: each spawn waited for its forked child to reach exec, which at
/// nice 0 queued behind the running daemons' hundreds of threads (deploy 77-88 s; FRR 92%
/// of the CPU, nsfleet under 1%). A spawned child is put back to nice 0 once it has
/// exec'd the node's software, and a node's init once its world is set up.
pub fn prefer_this_thread() -> io::Result<()> {
    // SAFETY: setpriority(2) on the calling thread (id 0): nice is per thread on Linux.
    check(unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, -10) }).map(drop)
}

/// Back to the default priority (nice 0): a node's init, once nsfleet's part is done.
pub fn plain_priority() {
    // SAFETY: setpriority(2) on the calling thread; failing leaves it as it was.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 0) };
}

/// Whether the process (a host pid) is stopped by a signal (state `T` in /proc).
pub fn is_stopped(pid: i64) -> bool {
    state_of(pid) == Some('T')
}

/// Whether the process (a host pid) sleeps, waiting for something (state `S`): not
/// running, not between two steps of its work.
pub fn is_sleeping(pid: i64) -> bool {
    state_of(pid) == Some('S')
}

/// The process's state letter in /proc (R, S, D, T, Z, ...).
fn state_of(pid: i64) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The state follows the command name, which is in parentheses and may hold anything.
    stat.rsplit_once(") ")?.1.chars().next()
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

/// Arranges for `cmd`'s process to be killed (SIGKILL) when the thread that spawns it
/// ends, however it ends: a helper we run (QEMU, apt-get) never outlives us, even after
/// a SIGKILL of ours that no cleanup can answer.
pub fn die_with_spawner(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl(2) on integers is async-signal-safe, as code between fork and exec
    // in a multi-threaded process must be.
    unsafe {
        cmd.pre_exec(|| {
            check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0)).map(drop)
        })
    };
}

/// Held shared from fork until the child's pidfd exists, and exclusively by [`reap_any`]:
/// otherwise a child that exits at once could be reaped by a PID-1 orphan sweep before we
/// hold a pidfd for it, and its pid could be recycled under us.
static SPAWNING: RwLock<()> = RwLock::new(order::SPAWNING, ());

/// Held from before a spawn until the child's pidfd is open (see `SPAWNING`).
pub fn spawn_guard() -> nsfleet_locks::RwLockReadGuard<'static, ()> {
    SPAWNING.read()
}

/// The pid of a pidfd's process as the host sees it (from /proc, which is the host's).
/// Read through `thread-self`: a thread with a descriptor table of its own (the spawner)
/// asks about its own descriptor.
pub fn host_pid_of(pidfd: BorrowedFd<'_>) -> Option<i64> {
    let info =
        std::fs::read_to_string(format!("/proc/thread-self/fdinfo/{}", pidfd.as_raw_fd())).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("Pid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// When the process behind a pidfd started (see [`running_since`]): with its pid, an
/// identity that a process given the same pid later does not have.
pub fn started_at(pidfd: BorrowedFd<'_>) -> Option<u64> {
    running_since(host_pid_of(pidfd)? as libc::pid_t)
}

/// Points stdout at /dev/null, so whoever reads our old stdout sees end-of-file.
pub fn redirect_stdout_to_null() -> io::Result<()> {
    let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
    // SAFETY: dup2(2) on two valid descriptors; fd 1 is replaced atomically.
    check(unsafe { libc::dup2(null.as_raw_fd(), 1) }).map(drop)
}

/// A descriptor of our own for standard stream `n` (0, 1 or 2), as a `File`. Reading or
/// writing through it takes none of std's `Stdin`/`Stdout`/`Stderr` locks and none of
/// their buffers, which a forked helper may have inherited held or half full (see
/// [`crate::helper::fork_helper`]).
pub fn dup_stdio(n: RawFd) -> io::Result<std::fs::File> {
    if !(0..=2).contains(&n) {
        return Err(io::ErrorKind::InvalidInput.into());
    }
    // SAFETY: fcntl(2) duplicating 0, 1 or 2, which std too treats as always borrowable
    // (its `Stdin::as_fd`); the result is a fresh descriptor owned by nobody else.
    let fd = check(unsafe { libc::fcntl(n, libc::F_DUPFD_CLOEXEC, 3) })?;
    // SAFETY: as above, fresh and ours.
    Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Runs `cmd` to its end and returns what it wrote, as `Command::output` does, in a
/// process whose init reaps every orphan ([`reap_any`]): the child is watched from its
/// fork, so that its exit status stays ours to collect.
pub fn output_of(cmd: &mut std::process::Command) -> io::Result<std::process::Output> {
    output_fed(cmd, None)
}

/// As [`output_of`], with `input` (when given) written to the command's standard input
/// through a pipe, which is then closed; else its standard input is /dev/null.
pub fn output_fed(
    cmd: &mut std::process::Command,
    input: Option<&[u8]>,
) -> io::Result<std::process::Output> {
    let stdin = match input {
        Some(_) => std::process::Stdio::piped(),
        None => std::process::Stdio::null(),
    };
    let mut child = {
        let _guard = spawn_guard();
        let child = cmd
            .stdin(stdin)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()?;
        watch_child(child.id() as libc::pid_t);
        child
    };
    let pid = child.id() as libc::pid_t;
    // Written from a thread of its own: a command that writes much before it reads would
    // otherwise wait on us while we wait on it.
    let out = std::thread::scope(|s| {
        if let (Some(data), Some(mut pipe)) = (input, child.stdin.take()) {
            s.spawn(move || {
                use std::io::Write;
                let _ = pipe.write_all(data);
            });
        }
        child.wait_with_output()
    });
    unwatch_child(pid);
    out
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

/// Ends the process at once, as a kill would: no unwinding, no destructors, no flushing.
pub fn exit_now(code: libc::c_int) -> ! {
    // SAFETY: _exit(2) has no preconditions; nothing runs after it.
    unsafe { libc::_exit(code) }
}

/// Clock ticks per second, the unit of /proc/PID/stat's times.
pub fn clock_ticks_per_second() -> i64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) }
}

/// Now on the monotonic clock, in nanoseconds: the clock the kernel stamps its process
/// events with (and `Instant` reads, without saying its value).
pub fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime(2) fills the timespec it is given; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The size of a memory page, in bytes.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as u64 }
}

/// Sends `sig` to the process behind a pidfd (never to a recycled pid).
pub fn kill_pidfd(pidfd: BorrowedFd<'_>, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: pidfd_send_signal(2) with a borrowed descriptor, a signal number and no info.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Asks the kernel to reclaim the pages of process `pid`'s read-only file mappings (its
/// program's and libraries' code and constants) that no other process maps:
/// `process_madvise(2)` with `MADV_PAGEOUT`, which skips a page another process maps
/// too (a library's pages the host's other programs use stay). Those the process still
/// uses come back at its next touch, from the page cache or the file. For a daemon
/// started in the foreground: what it touched only while loading and starting (symbol
/// tables, relocations' lookups, its set-up code) stays mapped in it for good, where a
/// daemon that forks to detach leaves them in its parent. Returns the bytes advised.
/// `pidfd` names the process (its mappings are read through `pid`, which only the
/// pidfd keeps from naming another). Kernels before 5.10 answer `ENOSYS` or `EINVAL`.
pub fn page_out_file_pages(pidfd: BorrowedFd<'_>, pid: libc::pid_t) -> io::Result<usize> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    let ranges: Vec<libc::iovec> = maps.lines().filter_map(read_only_file_range).collect();
    // The kernel takes at most IOV_MAX (1024) ranges a call.
    let mut advised = 0;
    for chunk in ranges.chunks(1024) {
        // SAFETY: process_madvise(2) takes a pidfd, an array of `chunk.len()` iovecs
        // that it only reads (addresses in the other process, never dereferenced
        // here), the advice and flags.
        let r = unsafe {
            libc::syscall(
                libc::SYS_process_madvise,
                pidfd.as_raw_fd(),
                chunk.as_ptr(),
                chunk.len(),
                libc::MADV_PAGEOUT,
                0,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        advised += r as usize;
    }
    Ok(advised)
}

/// The address range of a line of /proc/PID/maps that maps a file read-only
/// (`7f..-7f.. r-xp 00001000 fe:01 1234 /usr/lib/libc.so.6`); `None` for any other.
fn read_only_file_range(line: &str) -> Option<libc::iovec> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?;
    let path = fields.nth(3)?;
    if !path.starts_with('/') || perms.as_bytes().get(1) != Some(&b'-') {
        return None;
    }
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    Some(libc::iovec {
        iov_base: start as *mut libc::c_void,
        iov_len: end - start,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn only_read_only_file_mappings_are_paged_out() {
        let range = |l| read_only_file_range(l).map(|v| (v.iov_base as usize, v.iov_len));
        let text = "7f00a000-7f00c000 r-xp 00001000 fe:01 1234 /usr/lib/libc.so.6";
        assert_eq!(range(text), Some((0x7f00a000, 0x2000)));
        let data = "7f00c000-7f00d000 rw-p 00003000 fe:01 1234 /usr/lib/libc.so.6";
        assert_eq!(range(data), None);
        assert_eq!(range("7f00d000-7f00e000 rw-p 00000000 00:00 0"), None);
        assert_eq!(
            range("7ffd0000-7ffd1000 r--p 00000000 00:00 0 [vvar]"),
            None
        );
    }

    #[test]
    fn a_process_pages_out_its_own_code() {
        let pid = std::process::id() as libc::pid_t;
        let advised = page_out_file_pages(pidfd_open(pid).unwrap().as_fd(), pid).unwrap();
        assert!(advised > 0);
    }
}

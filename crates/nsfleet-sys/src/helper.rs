//! Helper processes (a fleet's supervisor, its namespace holders) forked from the process
//! that runs the engine and never exec'd: they run the engine's own code in whatever
//! program embeds it (the `nsfleet` command, a test binary, a Python extension), where
//! /proc/self/exe is that program and knows nothing of nsfleet.
//!
//! Forking a process that has threads leaves only the calling thread in the child. What
//! the child may then do is the contract of [`fork_helper`]; everything here that runs in
//! a child before its body is async-signal-safe: syscalls on integers and on the stack,
//! no allocation, no lock.

use crate::check;
use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// How a helper starts.
pub struct HelperStart<'a> {
    /// Its name, the kernel's `comm` (at most 15 bytes; longer is cut). It is how `ps -e`,
    /// `pgrep -x` and the tests tell a helper: its command line is its parent's.
    pub name: &'a CStr,
    /// The descriptors it keeps, at 0, 1, 2, ... in this order (at most 64). Every other
    /// descriptor it would inherit is closed: without exec, close-on-exec closes nothing,
    /// and an inherited end of a pipe or socket would keep it from ever seeing end-of-file.
    pub fds: &'a [BorrowedFd<'a>],
    /// Whether it leads a new session, away from the caller's terminal and its Ctrl-C.
    pub new_session: bool,
    /// Whether it starts with no signal blocked, as std's `Command` leaves a child; else
    /// with the forking thread's mask, as exec leaves it. Either way, a signal the caller
    /// handles is reset to its default action, as exec resets it: the caller's handlers are
    /// the caller's.
    pub unblock_signals: bool,
}

/// Most descriptors a helper keeps (the prelude's scratch array is on the stack, and
/// `KeptFds::taken` has a bit for each).
pub const MAX_KEPT: usize = 64;

/// Stack of the thread whose fork becomes a PID namespace's init: the init's main thread
/// is that thread, so it gets what a process's main thread usually has.
const INIT_STACK: usize = 8 << 20;

/// The descriptors a helper kept, at 0, 1, 2, ... (see [`HelperStart::fds`]).
pub struct KeptFds {
    n: usize,
    /// Those [`take`](Self::take)n, one bit each: owned elsewhere from then on.
    taken: std::cell::Cell<u64>,
}

impl KeptFds {
    /// The `i`-th kept descriptor, if there is one and it was not taken.
    pub fn get(&self, i: usize) -> Option<BorrowedFd<'_>> {
        // SAFETY: the prelude put an open descriptor at every number below n, and the
        // helper owns none of them but those taken (checked), so they stay open until it
        // exits; the borrow lives no longer than self.
        self.kept(i)
            .then(|| unsafe { BorrowedFd::borrow_raw(i as RawFd) })
    }

    /// The `i`-th kept descriptor as the helper's own, to close when it is done with it;
    /// `None` if there is none or it was taken already.
    pub fn take(&self, i: usize) -> Option<OwnedFd> {
        if !self.kept(i) {
            return None;
        }
        self.taken.set(self.taken.get() | 1 << i);
        // SAFETY: an open descriptor (see `get`) that nothing else in this process owns:
        // nobody took it before (checked and marked above), and `get` no longer lends it.
        Some(unsafe { OwnedFd::from_raw_fd(i as RawFd) })
    }

    fn kept(&self, i: usize) -> bool {
        i < self.n && self.taken.get() & (1 << i) == 0
    }
}

/// Forks a helper: the child puts `how.fds` at 0, 1, 2, ..., closes every other
/// descriptor, leads a new session if asked, resets its signals as exec would, takes the
/// name `how.name`, runs `body` and exits (`_exit`) with what it returns (101 if it
/// panics). It never returns into the caller's stack. Returns the child's pid, in the
/// parent only; reaping it is the caller's.
///
/// The contract of `body`, which runs in a copy of this process where the calling thread
/// is the only one:
/// - It is glibc's `fork(3)`, whose handlers leave malloc and glibc's own locks usable in
///   the child: the body may allocate, spawn threads and processes.
/// - Every other thread stopped forever at an arbitrary instant. Safe Rust is sound against
///   any thread being suspended anywhere, so this costs liveness, not soundness: a lock
///   another thread held at the fork stays held. The body must not take a lock the
///   caller's other threads may hold: std's `Stdout`/`Stderr`/`Stdin` (the child also
///   inherits their buffers: write through the descriptors instead), std's environment
///   lock against a concurrent `set_var`, parking_lot's global table of parked threads
///   for the instant one parks. A holder's body takes none: it only makes syscalls.
/// - Memory mappings are inherited, copy-on-write: the child keeps alive the pages the
///   parent changes after the fork, and any file or socket a mapping refers to (mark such
///   mappings MADV_DONTFORK).
pub fn fork_helper<F>(how: &HelperStart<'_>, body: F) -> io::Result<libc::pid_t>
where
    F: FnOnce(&KeptFds) -> i32,
{
    let n = how.fds.len();
    if n > MAX_KEPT {
        return Err(io::ErrorKind::InvalidInput.into());
    }
    let mut fds = [-1; MAX_KEPT];
    for (slot, fd) in fds.iter_mut().zip(how.fds) {
        *slot = fd.as_raw_fd();
    }
    // SAFETY: glibc's fork(3), not a raw clone: it runs the atfork handlers (malloc's
    // locks are usable in the child) and gives the child its own thread identity. The
    // child runs only what the contract above allows and never returns from this frame:
    // it ends in _exit below, so no frame of the caller's stack is returned into or
    // unwound twice.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid > 0 {
        return Ok(pid);
    }
    let code = match prelude(&fds[..n], how) {
        Ok(()) => {
            let kept = KeptFds {
                n,
                taken: Default::default(),
            };
            // A panic must not unwind out of the child into the caller's frames.
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&kept))).unwrap_or(101)
        }
        Err(_) => 126,
    };
    // SAFETY: _exit(2) has no preconditions; the child ends here.
    unsafe { libc::_exit(code) }
}

/// Forks a helper (as [`fork_helper`]) as PID 1 of a new PID namespace: when it dies, the
/// kernel kills every other process of that namespace, daemons that double-forked
/// included. Returns its pid as the caller sees it.
///
/// The fork happens on a short-lived thread of its own that first calls
/// `unshare(CLONE_NEWPID)`. That moves only this thread's future children into a new
/// namespace, never the caller's threads or their children; the kernel allows it in a
/// process with threads (unlike CLONE_NEWUSER, which implies CLONE_THREAD), and then
/// refuses that thread new threads, which it never makes. Not clone3(CLONE_NEWPID) on the
/// caller's thread, as nsfleet did when the child exec'd at once: a raw clone skips
/// glibc's fork handlers, which a child that goes on running Rust code needs (malloc's
/// locks, its thread identity).
pub fn fork_pid_ns_init<F>(how: &HelperStart<'_>, body: F) -> io::Result<libc::pid_t>
where
    F: FnOnce(&KeptFds) -> i32 + Send,
{
    fork_init(how, None, body)
}

/// As [`fork_pid_ns_init`], as the init of the PID namespace `pidns`, which has none yet
/// (see `userns::new_pid_ns_in`): the thread enters it (setns), which a process with
/// threads may, instead of making one.
pub fn fork_init_of<F>(
    how: &HelperStart<'_>,
    pidns: BorrowedFd<'_>,
    body: F,
) -> io::Result<libc::pid_t>
where
    F: FnOnce(&KeptFds) -> i32 + Send,
{
    fork_init(how, Some(pidns), body)
}

fn fork_init<F>(
    how: &HelperStart<'_>,
    pidns: Option<BorrowedFd<'_>>,
    body: F,
) -> io::Result<libc::pid_t>
where
    F: FnOnce(&KeptFds) -> i32 + Send,
{
    std::thread::scope(|s| {
        let launcher = std::thread::Builder::new()
            .name("nsfleet-launch".into())
            .stack_size(INIT_STACK)
            .spawn_scoped(s, move || {
                // SAFETY: unshare(2) and setns(2) with one flag (and a borrowed
                // descriptor); they change only this thread's namespace for children,
                // and this thread ends after one fork.
                check(unsafe {
                    match pidns {
                        None => libc::unshare(libc::CLONE_NEWPID),
                        Some(ns) => libc::setns(ns.as_raw_fd(), libc::CLONE_NEWPID),
                    }
                })?;
                fork_helper(how, body)
            })?;
        launcher
            .join()
            .map_err(|_| io::Error::other("the thread starting a PID namespace's init panicked"))?
    })
}

/// The child's first steps, async-signal-safe: descriptors, session, signals, name.
fn prelude(fds: &[RawFd], how: &HelperStart<'_>) -> io::Result<()> {
    let n = fds.len();
    let mut moved = [-1; MAX_KEPT];
    // SAFETY: fcntl, dup2, close_range, setsid, sigaction, sigprocmask and prctl are
    // syscalls on integers and on stack values, async-signal-safe as a forked child of a
    // threaded process requires.
    unsafe {
        // First above every target, so that placing one never overwrites another's source.
        for (m, fd) in moved.iter_mut().zip(fds) {
            *m = check(libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, n as libc::c_int))?;
        }
        for (i, m) in moved[..n].iter().enumerate() {
            check(libc::dup2(*m, i as libc::c_int))?;
        }
        let rc = libc::syscall(
            libc::SYS_close_range,
            n as libc::c_uint,
            libc::c_uint::MAX,
            0,
        );
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        if how.new_session {
            check(libc::setsid())?;
        }
        // Signals 32 and 33 are glibc's own: sigaction refuses them, and they stay.
        for sig in 1..=64 {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction != libc::SIG_DFL
                && old.sa_sigaction != libc::SIG_IGN
            {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
        if how.unblock_signals {
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            check(libc::sigprocmask(
                libc::SIG_SETMASK,
                &none,
                std::ptr::null_mut(),
            ))?;
        }
        check(libc::prctl(libc::PR_SET_NAME, how.name.as_ptr(), 0, 0, 0))?;
    }
    Ok(())
}

/// Closes descriptor number `slot` of a holder, a helper whose descriptors are its socket
/// `sock` and those it received and kept by number (`OwnedFd::into_raw_fd`): there a
/// number names a kept descriptor or nothing, and the descriptor table is the holder's
/// only record of what it keeps. Refuses the socket (EBADF). In any other process it would
/// close whatever has that number: only a holder calls it. Async-signal-safe.
pub fn close_held(sock: BorrowedFd<'_>, slot: RawFd) -> io::Result<()> {
    if slot == sock.as_raw_fd() {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    // SAFETY: close(2) of a number. Memory-safe whatever the number; that nothing else
    // owns it is the caller's part (see above): in a holder nothing does.
    check(unsafe { libc::close(slot) }).map(drop)
}

/// Gives this process the command line `line`, as `ps` and /proc/PID/cmdline show it: a
/// forked helper would otherwise show its parent's (`nsfleet up lab.toml`, long after that
/// `up` returned). The kernel shows the bytes of the process's argument area, so they are
/// rewritten in place (through /proc/self/mem), cut to the whole words that fit; the area
/// itself cannot move without CAP_SYS_RESOURCE. If not even the first word fits, the
/// command line stays as it was. `std::env::args` reads the same bytes: call this
/// only where nothing reads the arguments any more.
pub fn set_cmdline(line: &str) -> io::Result<()> {
    // Fields 48 and 49 of proc(5): arg_start and arg_end.
    let (start, end) = own_area(48)?;
    let room = end.saturating_sub(start) as usize;
    let mut fits = line;
    while fits.len() >= room {
        match fits.rsplit_once(' ') {
            Some((head, _)) => fits = head,
            None => return Ok(()),
        }
    }
    // The text, then NULs to the end: the last byte NUL tells the kernel the area is
    // one plain argument list.
    let mut area = vec![0u8; room];
    let text = fits.as_bytes();
    area[..text.len()].copy_from_slice(text);
    overwrite_own_memory(start, &area)
}

/// Forgets the environment this process was started with, but the variables `keep`
/// names: they are copied out of it first (setenv allocates its own copies), every other
/// one is removed, and the kernel's environment area, which /proc/PID/environ shows to
/// anyone who can read it, is overwritten with NULs. A helper forked from `nsfleet up`
/// otherwise shows the whole environment of the shell that ran it, secrets included, and
/// so does every process forked from it (a node's init). The area cannot be moved or
/// shrunk without CAP_SYS_RESOURCE: it stays, empty. Call it while the process has one
/// thread: std's environment lock and glibc's `environ` are not for two.
pub fn forget_environment(keep: impl Fn(&std::ffi::OsStr) -> bool) -> io::Result<()> {
    let all: Vec<_> = std::env::vars_os().collect();
    for (name, value) in &all {
        if keep(name) {
            std::env::set_var(name, value);
        } else {
            std::env::remove_var(name);
        }
    }
    // Fields 50 and 51 of proc(5): env_start and env_end.
    let (start, end) = own_area(50)?;
    overwrite_own_memory(start, &vec![0u8; end.saturating_sub(start) as usize])
}

/// Two consecutive fields of /proc/self/stat from field `first` (as proc(5) numbers
/// them): the start and end of one of the areas the kernel set up at exec.
fn own_area(first: usize) -> io::Result<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // Counted after the command name, which may hold spaces but ends at the last ')'.
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let field = |n: usize| -> Option<u64> { after.split_whitespace().nth(n - 3)?.parse().ok() };
    match (field(first), field(first + 1)) {
        (Some(start), Some(end)) => Ok((start, end)),
        _ => Err(io::Error::other("no such area in /proc/self/stat")),
    }
}

/// Writes `bytes` at address `at` of this process, through /proc/self/mem: a write the
/// kernel checks, where a store through a pointer to memory Rust does not own would not be.
fn overwrite_own_memory(at: u64, bytes: &[u8]) -> io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    let mut mem = std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/self/mem")?;
    mem.seek(SeekFrom::Start(at))?;
    mem.write_all(bytes)
}

/// Gives the kernel back the free pages of this process's heap (glibc's `malloc_trim`). A
/// helper forked from a program inherits what that program allocated and freed before the
/// fork: freed, those pages stay resident in the child, and every later fork of the child
/// copies their page tables.
pub fn release_free_heap() {
    // SAFETY: malloc_trim(3) only walks glibc's own arenas, each under its lock (reset
    // in a forked child by glibc's fork), and releases pages no allocation holds.
    unsafe { libc::malloc_trim(0) };
}

//! Signals blocked for a dedicated signal thread, and waiting for them.

use std::io;
use std::time::Duration;

/// Restores SIGPIPE's default action (the Rust runtime ignores it, which turns a closed
/// pipe into a panic on the next print).
pub fn die_on_sigpipe() {
    // SAFETY: installs the default disposition for one signal; no handler runs.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// Ignores SIGPIPE: a write to a pipe or socket whose reader is gone fails with EPIPE
/// instead of ending the process (what the Rust runtime sets up in a program's `main`; a
/// forked helper inherits whatever its caller has, `die_on_sigpipe` included).
pub fn ignore_sigpipe() {
    // SAFETY: sets one signal's disposition to SIG_IGN; no handler runs.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
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

/// Makes `cmd` start with no signal blocked, whatever its spawner blocks: a thread that
/// leaves signals to another ([`SignalsHeld`]) must not hand its mask down (a shell whose
/// children cannot be interrupted by Ctrl-C).
pub fn unblocked_in(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: sigemptyset and pthread_sigmask on a local set are async-signal-safe, as
    // code between fork and exec in a multi-threaded process must be.
    unsafe {
        cmd.pre_exec(|| {
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            match libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut()) {
                0 => Ok(()),
                e => Err(io::Error::from_raw_os_error(e)),
            }
        })
    };
}

/// Ignores SIGINT and SIGQUIT in this process (a parent waiting for a child that shares its
/// terminal: the keys are the child's to act on).
pub fn ignore_interrupts() {
    // SAFETY: sets two signals' disposition to SIG_IGN; no handler runs.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
    }
}

/// The process [`forward_signals`] passes signals on to; 0 while there is none.
static FORWARD_TO: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel hands an SA_SIGINFO handler a valid siginfo_t.
    let from_kernel = unsafe { (*info).si_code } == libc::SI_KERNEL;
    let pid = FORWARD_TO.load(std::sync::atomic::Ordering::Relaxed);
    if pid > 0 && !from_kernel {
        // SAFETY: kill(2), which is async-signal-safe, on a pid of our own child.
        unsafe { libc::kill(pid, sig) };
    }
}

/// From now on, each of `signals` this process gets goes to process `pid` instead (a
/// child it waits for, which ends as it sees fit): a handler that only reads an atomic and
/// calls kill(2). A handler, not a thread: a process that has entered another PID
/// namespace may not start one (clone(2) refuses CLONE_THREAD with EINVAL). What the
/// kernel sends (SI_KERNEL: a terminal's Ctrl-C or Ctrl-\, sent to its whole foreground
/// process group, the child included) is not passed on: the child has it already.
pub fn forward_signals(pid: libc::pid_t, signals: &[libc::c_int]) -> io::Result<()> {
    FORWARD_TO.store(pid, std::sync::atomic::Ordering::Relaxed);
    for &s in signals {
        // SAFETY: sigaction is plain data, zeroed then filled; the handler is async-signal
        // safe (a field read, an atomic load and kill(2)).
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = forward as *const () as usize;
            act.sa_flags = libc::SA_RESTART | libc::SA_SIGINFO;
            libc::sigemptyset(&mut act.sa_mask);
            crate::check(libc::sigaction(s, &act, std::ptr::null_mut()))?;
        }
    }
    Ok(())
}

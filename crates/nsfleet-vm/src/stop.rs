//! Ctrl-C and SIGTERM during a run, in every phase: fetching a kernel, writing the
//! initramfs, booting, running. [`Stop::watch`] blocks both signals and takes them on a
//! thread of its own, which at once kills (SIGKILL, through pidfds) the helpers the run
//! registered (QEMU; apt-cache, apt-get and dpkg-deb with their process groups; a
//! bench's nsfleet on the host gets SIGTERM); the run sees [`Stop::signal`] at its next look
//! (its wait loops look every 20 ms), returns [`Interrupted`], and its folders go as
//! their guards drop. The caller exits with 128+signal.
//!
//! Lock: `helpers` protects the list of registered pidfds; it is held only to push,
//! remove or signal them, never across a wait.

use nsfleet_sys::SignalsHeld;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The signals that end a run.
const SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

/// A run ended by a signal: the caller exits with [`Interrupted::exit_code`].
#[derive(Debug)]
pub struct Interrupted(pub libc::c_int);

impl Interrupted {
    pub fn exit_code(&self) -> i32 {
        128 + self.0
    }
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self.0 {
            libc::SIGINT => "SIGINT",
            libc::SIGTERM => "SIGTERM",
            _ => "a signal",
        };
        write!(
            f,
            "stopped by {name}: what the run started is stopped, its folders removed"
        )
    }
}

impl std::error::Error for Interrupted {}

/// A helper to end on a signal.
struct Registered {
    key: u64,
    pidfd: OwnedFd,
    signal: libc::c_int,
    /// The helper leads a process group of its own, which the signal ends whole (a
    /// dpkg-deb's decompressor and tar hold our pipes as long as they live).
    group: Option<libc::pid_t>,
}

impl Registered {
    fn end(&self) {
        let _ = match self.group {
            Some(g) => nsfleet_sys::kill_group(g, self.signal),
            None => nsfleet_sys::kill_pidfd(self.pidfd.as_fd(), self.signal),
        };
    }
}

#[derive(Default)]
struct Shared {
    /// The signal taken, 0 until one is.
    signal: AtomicI32,
    /// Set when the run is over: the thread stops taking signals.
    done: AtomicBool,
    helpers: Mutex<Vec<Registered>>,
}

/// Signals taken for one run (see the module's doc). Dropping it ends the watch and
/// restores the signal mask; a signal that came meanwhile was already taken.
pub struct Stop {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
    _held: SignalsHeld,
}

impl Stop {
    /// Blocks SIGINT and SIGTERM in this thread (and those it starts) and takes them on a
    /// thread of the watch's own.
    pub fn watch() -> std::io::Result<Stop> {
        let held = SignalsHeld::new(&SIGNALS)?;
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("vm-signals".into())
            .spawn(move || take(&s))?;
        Ok(Stop {
            shared,
            thread: Some(thread),
            _held: held,
        })
    }

    /// The signal that stopped the run, if one came.
    pub fn signal(&self) -> Option<libc::c_int> {
        match self.shared.signal.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }

    /// `Err(Interrupted)` once a signal came: what every phase checks before going on.
    pub fn check(&self) -> Result<(), Interrupted> {
        self.signal().map_or(Ok(()), |s| Err(Interrupted(s)))
    }

    /// Registers a helper we started: a signal kills it (SIGKILL). Killed at once if
    /// the signal came already. Dropping the guard unregisters it.
    pub fn helper(&self, pid: u32) -> std::io::Result<Helper<'_>> {
        self.register(pid, libc::SIGKILL, false)
    }

    /// [`Stop::helper`], ended by `sig` instead: for a helper that should end its own
    /// way (another nsfleet, which then ends what it started).
    pub fn helper_ended_by(&self, pid: u32, sig: libc::c_int) -> std::io::Result<Helper<'_>> {
        self.register(pid, sig, false)
    }

    /// Registers helper `pid` (a group leader if `group`), ended by `signal`.
    fn register(&self, pid: u32, signal: libc::c_int, group: bool) -> std::io::Result<Helper<'_>> {
        let helper = Registered {
            key: u64::from(pid),
            pidfd: nsfleet_sys::pidfd_open(pid as libc::pid_t)?,
            signal,
            group: group.then_some(pid as libc::pid_t),
        };
        let key = helper.key;
        self.shared.helpers.lock().unwrap().push(helper);
        // A signal taken before the push found the list without it: it is ended here.
        if self.signal().is_some() {
            kill_helpers(&self.shared);
        }
        Ok(Helper { stop: self, key })
    }

    /// Runs `cmd` as a registered helper, in a process group of its own that a signal
    /// kills whole, and returns its output, or `Interrupted` if a signal killed it.
    pub fn output(&self, cmd: &mut std::process::Command) -> anyhow::Result<std::process::Output> {
        use std::os::unix::process::CommandExt;
        use std::process::Stdio;
        self.check()?;
        nsfleet_sys::die_with_spawner(cmd);
        let mut child = (cmd.stdin(Stdio::null()))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()?;
        let _helper = match self.register(child.id(), libc::SIGKILL, true) {
            Ok(h) => h,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e.into());
            }
        };
        let out = child.wait_with_output()?;
        self.check()?;
        Ok(out)
    }
}

impl Drop for Stop {
    fn drop(&mut self) {
        self.shared.done.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A registered helper; unregistered when dropped (after it was waited for).
pub struct Helper<'a> {
    stop: &'a Stop,
    key: u64,
}

impl Drop for Helper<'_> {
    fn drop(&mut self) {
        let mut helpers = self.stop.shared.helpers.lock().unwrap();
        helpers.retain(|h| h.key != self.key);
    }
}

/// The watch's thread: takes the first signal, kills the helpers, and goes on taking
/// signals (a second Ctrl-C changes nothing) until the run is over.
fn take(shared: &Shared) {
    while !shared.done.load(Ordering::SeqCst) {
        let Ok(Some(sig)) = nsfleet_sys::take_signal(&SIGNALS, Duration::from_millis(50)) else {
            continue;
        };
        let _ = shared
            .signal
            .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
        kill_helpers(shared);
    }
}

fn kill_helpers(shared: &Shared) {
    for h in shared.helpers.lock().unwrap().iter() {
        h.end();
    }
}

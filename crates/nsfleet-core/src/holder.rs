//! Namespace holders: child processes that keep nodes' namespace descriptors when the
//! supervisor may not keep that many itself (RLIMIT_NOFILE's hard limit, which a process
//! without CAP_SYS_RESOURCE cannot raise).
//!
//! A holder only receives descriptors (SCM_RIGHTS), keeps them, and closes one when asked;
//! it exits when the supervisor's end of its socket closes. It is a child in the
//! supervisor's PID namespace, so it dies with the supervisor however that dies, and the
//! kernel's reference count stays the garbage collector. A worker reaches a held namespace
//! through `pidfd_getfd`, a descriptor of its own for as long as it needs one.
//!
//! A holder is forked from the supervisor (not exec'd: the engine may be embedded in a
//! program that is not `nsfleet`) and named `nsfleet-hold`, which is how `ps` and the
//! tests tell it. It never decides which nodes are held: the fleet does.

use nsfleet_locks::{order, Mutex};
use nsfleet_sys as sys;
use std::ffi::CStr;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// The name of a holder process (`comm`), as `ps -e` and `pgrep -x` show it: its command
/// line is its supervisor's.
pub const HOLDER_NAME: &CStr = c"nsfleet-hold";

/// Descriptors a holder keeps below its own limit, for itself.
const HOLDER_SPARE: u64 = 64;

/// The holders of one fleet, started as they are needed.
pub struct Holders {
    /// Most descriptors one holder keeps.
    cap: usize,
    /// Where holders are started: a holder in a node's namespace would keep it alive.
    home: Arc<OwnedFd>,
    /// Protects the list of holders and the choice of one with room (`Holder::held` is
    /// counted under it). Released before talking to the chosen holder.
    list: Mutex<Vec<Arc<Holder>>>,
}

/// Where a node's namespace is held.
pub struct HeldNs {
    holder: Arc<Holder>,
    slot: RawFd,
}

struct Holder {
    /// Protects the request/answer exchange on the holder's socket: one at a time. The
    /// innermost lock of the core.
    conn: Mutex<UnixStream>,
    pidfd: OwnedFd,
    /// Descriptors it holds or is about to: counted under the list's lock, so that no
    /// holder is given more than the cap.
    held: AtomicUsize,
}

impl Holders {
    /// Holders of at most `cap` descriptors each (`None`: as many as a process may hold).
    pub fn new(cap: Option<usize>, home: Arc<OwnedFd>) -> Holders {
        let (_, hard) = sys::nofile_limits();
        let most = hard.saturating_sub(HOLDER_SPARE).max(1) as usize;
        Holders {
            cap: cap.map_or(most, |c| c.clamp(1, most)),
            home,
            list: Mutex::new(order::HOLDERS, Vec::new()),
        }
    }

    /// Hands `fd` to a holder with room, starting one if none has.
    pub fn hold(&self, fd: OwnedFd) -> io::Result<HeldNs> {
        let holder = {
            let mut list = self.list.lock();
            let roomy = list
                .iter()
                .find(|h| h.held.load(Relaxed) < self.cap)
                .cloned();
            let h = match roomy {
                Some(h) => h,
                None => {
                    let h = Arc::new(Holder::start_at_home(self.home.clone())?);
                    list.push(h.clone());
                    h
                }
            };
            h.held.fetch_add(1, Relaxed);
            h
        };
        match holder.hold(fd) {
            Ok(slot) => Ok(HeldNs { holder, slot }),
            Err(e) => {
                holder.held.fetch_sub(1, Relaxed);
                Err(e)
            }
        }
    }
}

impl HeldNs {
    /// A descriptor of the caller's own for the namespace.
    pub fn get(&self) -> io::Result<OwnedFd> {
        sys::pidfd_getfd(self.holder.pidfd.as_fd(), self.slot)
    }

    /// Has the holder let go of the namespace; returns once it has.
    pub fn release(self) -> io::Result<()> {
        let r = self.holder.ask(b'c', self.slot, None).map(drop);
        self.holder.held.fetch_sub(1, Relaxed);
        r
    }
}

impl Holder {
    /// Starts a holder from a thread in the fleet's home namespace: the holder process and
    /// the sockets between us (a socket belongs to its namespace) must not keep the node
    /// whose worker happens to need a new holder.
    fn start_at_home(home: Arc<OwnedFd>) -> io::Result<Holder> {
        std::thread::spawn(move || {
            sys::setns_net(home.as_fd())?;
            Holder::start()
        })
        .join()
        .map_err(|_| io::Error::other("the thread starting a holder panicked"))?
    }

    fn start() -> io::Result<Holder> {
        let (ours, theirs) = UnixStream::pair()?;
        let how = sys::HelperStart {
            name: HOLDER_NAME,
            // Its socket at 0, as stdin was when holders were exec'd; nothing else.
            fds: &[theirs.as_fd()],
            new_session: false,
            unblock_signals: true,
        };
        // Until the pidfd exists: a holder that exits at once must not be reaped by PID 1's
        // orphan sweep and its pid reused under us.
        let guard = sys::spawn_guard();
        let pid = sys::fork_helper(&how, |kept| match kept.get(0) {
            Some(sock) => serve(sock),
            None => 1,
        })?;
        let pidfd = sys::pidfd_open(pid)?;
        drop(guard);
        Ok(Holder {
            conn: Mutex::new(order::HOLDER_CONN, ours),
            pidfd,
            held: AtomicUsize::new(0),
        })
    }

    fn hold(&self, fd: OwnedFd) -> io::Result<RawFd> {
        self.ask(b'h', 0, Some(fd))
    }

    /// One request and its answer: an opcode, a number, maybe a descriptor; the answer is
    /// a number.
    fn ask(&self, op: u8, n: RawFd, fd: Option<OwnedFd>) -> io::Result<RawFd> {
        let mut conn = self.conn.lock();
        let mut msg = [op, 0, 0, 0, 0];
        msg[1..].copy_from_slice(&n.to_le_bytes());
        match &fd {
            Some(fd) => sys::send_with_fd(conn.as_fd(), &msg, fd.as_fd())?,
            None => conn.write_all(&msg)?,
        }
        let mut answer = [0u8; 4];
        conn.read_exact(&mut answer)?;
        match RawFd::from_le_bytes(answer) {
            e if e < 0 => Err(io::Error::from_raw_os_error(-e)),
            v => Ok(v),
        }
    }
}

/// The holder process: serves its socket until it closes, and returns its exit code.
/// No death signal: the thread that started it is gone at once. It ends on end-of-file,
/// which the kernel gives it when the supervisor's end closes however the supervisor dies,
/// and as a process of the supervisor's PID namespace it is killed with it anyway.
///
/// It runs in a child forked from the supervisor's threads, so it is async-signal-safe:
/// syscalls only, on stack buffers, no allocation, no lock, no std I/O. Nor a map of what
/// it keeps: the kernel's descriptor table is the map, a slot is the number the received
/// descriptor got, and closing a slot closes that number.
fn serve(sock: BorrowedFd<'_>) -> i32 {
    let (_, hard) = sys::nofile_limits();
    if sys::raise_nofile(hard).is_err() {
        return 1;
    }
    loop {
        let mut msg = [0u8; 5];
        let mut got = 0;
        let mut fd = None;
        while got < msg.len() {
            match sys::recv_with_fd(sock, &mut msg[got..]) {
                Ok((0, _)) if got == 0 => return 0,
                Ok((0, _)) => return 1,
                Ok((n, received)) => {
                    got += n;
                    // A descriptor comes with a request's first byte; one with a later
                    // byte breaks the protocol and is closed (dropped) here.
                    if fd.is_none() {
                        fd = received;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return 1,
            }
        }
        let arg = RawFd::from_le_bytes([msg[1], msg[2], msg[3], msg[4]]);
        let answer = match (msg[0], fd) {
            // Kept: the descriptor's number is its slot, and nothing closes it but a 'c'.
            (b'h', Some(fd)) => fd.into_raw_fd(),
            (b'c', None) => match sys::close_held(sock, arg) {
                Ok(()) => 0,
                Err(e) => -e.raw_os_error().unwrap_or(libc::EBADF),
            },
            _ => -libc::EINVAL,
        };
        if sys::send_all(sock, &answer.to_le_bytes()).is_err() {
            return 1;
        }
    }
}

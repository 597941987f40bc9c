//! A connection's TCP socket as the stream its request is read from (through TLS or not),
//! with a deadline while the client is unknown: until its request's head is read (the
//! TLS handshake included), every read must come before the deadline, so that a client
//! that trickles bytes cannot hold a thread (and its descriptor) for longer. A socket's
//! read timeout bounds one read; this bounds them all. And clients not yet known are
//! counted ([`Strangers`]): beyond a bound, a new connection is closed at once.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The connections whose request's head has not come yet. Each holds a thread and a
/// descriptor until its deadline; without a bound, clients that connect and say nothing
/// would take every descriptor, and the terminals and captures of those who showed the
/// token would fail to open theirs.
#[derive(Default)]
pub struct Strangers {
    count: AtomicUsize,
    /// Whether the bound was said on standard error since there were last none: once
    /// for a flood, however long it lasts.
    said: AtomicBool,
}

/// One of the [`Strangers`], counted until dropped (once its head is read).
pub struct Stranger(Arc<Strangers>);

impl Strangers {
    /// At most this many at once: far more than a browser opens (six per origin).
    pub const MAX: usize = 128;

    /// One more stranger, counted; none when there are [`Strangers::MAX`] already (the
    /// connection is to be closed).
    pub fn admit(self: &Arc<Self>) -> Option<Stranger> {
        if self.count.fetch_add(1, Ordering::Relaxed) < Self::MAX {
            return Some(Stranger(self.clone()));
        }
        self.count.fetch_sub(1, Ordering::Relaxed);
        if !self.said.swap(true, Ordering::Relaxed) {
            eprintln!(
                "nsfleet: serve: {} clients have connected and not yet sent a request; new connections are closed until they do or their 30 s are up",
                Self::MAX
            );
        }
        None
    }
}

impl Drop for Stranger {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.0.said.store(false, Ordering::Relaxed);
        }
    }
}

pub struct Socket {
    tcp: TcpStream,
    until: Instant,
    /// Whether the deadline holds; [`Deadline::lift`] ends it.
    armed: Arc<AtomicBool>,
}

/// What lifts a [`Socket`]'s deadline, once the client has shown who it is.
pub struct Deadline {
    armed: Arc<AtomicBool>,
    tcp: TcpStream,
}

impl Socket {
    /// `tcp` as a stream whose reads must all be done within `within` from now, and the
    /// handle that lifts that bound.
    pub fn with_deadline(tcp: TcpStream, within: Duration) -> io::Result<(Socket, Deadline)> {
        let armed = Arc::new(AtomicBool::new(true));
        let deadline = Deadline {
            armed: armed.clone(),
            tcp: tcp.try_clone()?,
        };
        let socket = Socket {
            tcp,
            until: Instant::now() + within,
            armed,
        };
        Ok((socket, deadline))
    }

    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.armed.load(Ordering::Relaxed) {
            return self.tcp.read(buf);
        }
        let late = || io::Error::new(io::ErrorKind::TimedOut, "the client took too long");
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(late());
        }
        self.tcp.set_read_timeout(Some(left))?;
        match self.tcp.read(buf) {
            // A blocking socket's timeout is EAGAIN.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(late()),
            r => r,
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tcp.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.tcp.flush()
    }
}

impl Deadline {
    /// Ends the deadline; each read then waits at most `per_read` (streams set their own).
    pub fn lift(self, per_read: Duration) -> io::Result<()> {
        self.armed.store(false, Ordering::Relaxed);
        self.tcp.set_read_timeout(Some(per_read))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn a_client_that_trickles_bytes_is_cut_off_at_the_deadline() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (tcp, _) = listener.accept().unwrap();
        let trickle = std::thread::spawn(move || {
            // One byte every 50 ms: each read is quick, all of them are not.
            while client.write_all(b"x").is_ok() {
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let (mut socket, deadline) =
            Socket::with_deadline(tcp, Duration::from_millis(400)).unwrap();
        let began = Instant::now();
        let mut byte = [0u8; 1];
        let err = loop {
            match socket.read(&mut byte) {
                Ok(n) => assert!(n == 1 && began.elapsed() < Duration::from_secs(5)),
                Err(e) => break e,
            }
        };
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        // Both of the server's descriptors closed: the client's writes fail, and it ends.
        drop((socket, deadline));
        trickle.join().unwrap();
    }

    #[test]
    fn once_lifted_reads_wait_as_long_as_they_need() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (tcp, _) = listener.accept().unwrap();
        let (mut socket, deadline) =
            Socket::with_deadline(tcp, Duration::from_millis(100)).unwrap();
        deadline.lift(Duration::from_secs(30)).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        client.write_all(b"y").unwrap();
        let mut byte = [0u8; 1];
        assert_eq!(socket.read(&mut byte).unwrap(), 1);
        assert_eq!(&byte, b"y");
    }

    #[test]
    fn strangers_are_admitted_up_to_the_bound_and_again_once_one_goes() {
        let strangers = Arc::new(Strangers::default());
        let mut held: Vec<Stranger> = (0..Strangers::MAX)
            .map(|_| strangers.admit().expect("under the bound"))
            .collect();
        assert!(strangers.admit().is_none());
        assert!(strangers.admit().is_none(), "still full");
        held.pop();
        held.push(strangers.admit().expect("one went"));
        held.clear();
        assert_eq!(strangers.count.load(Ordering::Relaxed), 0);
        assert!(
            !strangers.said.load(Ordering::Relaxed),
            "said again at the next flood"
        );
    }
}

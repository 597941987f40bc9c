//! A connection's TCP socket as the stream its request is read from (through TLS or not),
//! with a deadline while the client is unknown: until its request's head is read (the
//! TLS handshake included), every read must come before the deadline, so that a client
//! that trickles bytes cannot hold a thread (and its descriptors) for longer. A socket's
//! read timeout bounds one read; this bounds them all. And clients not yet known are
//! bounded in number ([`Strangers`]): beyond the bound, the one waited on longest is cut
//! off for the newcomer.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The connections whose request's head has not come yet. Each holds a thread and its
/// descriptors until its deadline: without a bound, clients that connect and say nothing
/// would take every descriptor, and the terminals and captures of those who showed the
/// token would fail to open theirs. At the bound, the oldest is cut off rather than the
/// newcomer refused: a flood of silent clients then has to outpace a real client's
/// first bytes, a matter of a millisecond, to keep it out.
#[derive(Default)]
pub struct Strangers {
    /// Taken alone: nothing else is locked while it is held.
    waiting: Mutex<Waiting>,
}

#[derive(Default)]
struct Waiting {
    /// Each stranger's number and a handle on its socket, oldest first.
    sockets: VecDeque<(u64, TcpStream)>,
    next: u64,
    /// Whether the bound was said on standard error since there were last none: once
    /// for a flood, however long it lasts.
    said: bool,
}

/// One of the [`Strangers`], waited on until dropped (once its head is read).
pub struct Stranger {
    strangers: Arc<Strangers>,
    number: u64,
}

impl Strangers {
    /// At most this many at once: far more than a browser opens (six per origin).
    pub const MAX: usize = 128;

    /// `tcp` waited on as a stranger; at the bound, the oldest stranger's socket is shut
    /// down (its thread's read ends, and so does its connection).
    pub fn admit(self: &Arc<Self>, tcp: &TcpStream) -> io::Result<Stranger> {
        let handle = tcp.try_clone()?;
        let mut w = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        if w.sockets.len() >= Self::MAX {
            if let Some((_, oldest)) = w.sockets.pop_front() {
                let _ = oldest.shutdown(Shutdown::Both);
            }
            if !std::mem::replace(&mut w.said, true) {
                eprintln!(
                    "nsfleet: serve: {} clients have connected and not sent a request; each newcomer now cuts off the one waited on longest",
                    Self::MAX
                );
            }
        }
        let number = w.next;
        w.next += 1;
        w.sockets.push_back((number, handle));
        Ok(Stranger {
            strangers: self.clone(),
            number,
        })
    }

    /// How many are waited on now.
    #[cfg(test)]
    fn count(&self) -> usize {
        self.waiting.lock().unwrap().sockets.len()
    }
}

impl Drop for Stranger {
    fn drop(&mut self) {
        let strangers = &self.strangers.waiting;
        let mut w = strangers.lock().unwrap_or_else(|e| e.into_inner());
        // Gone already if it was cut off.
        w.sockets.retain(|(n, _)| *n != self.number);
        if w.sockets.is_empty() {
            w.said = false;
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
    fn at_the_bound_the_stranger_waited_on_longest_is_cut_off_for_the_newcomer() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let strangers = Arc::new(Strangers::default());
        let mut clients = Vec::new();
        let mut held = Vec::new();
        for _ in 0..=Strangers::MAX {
            let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (tcp, _) = listener.accept().unwrap();
            held.push(strangers.admit(&tcp).unwrap());
            clients.push((client, tcp));
        }
        assert_eq!(strangers.count(), Strangers::MAX);
        // The first one's socket is shut down: its reader sees the end; the second's is not.
        let mut byte = [0u8; 1];
        assert_eq!(clients[0].1.read(&mut byte).unwrap(), 0);
        clients[1].1.set_nonblocking(true).unwrap();
        let still = clients[1].1.read(&mut byte).unwrap_err();
        assert_eq!(still.kind(), io::ErrorKind::WouldBlock);
        // Its guard, dropped late, takes nothing from the others.
        held.remove(0);
        assert_eq!(strangers.count(), Strangers::MAX);
        held.clear();
        assert_eq!(strangers.count(), 0);
        assert!(
            !strangers.waiting.lock().unwrap().said,
            "said again at the next flood"
        );
    }
}

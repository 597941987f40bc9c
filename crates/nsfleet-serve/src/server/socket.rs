//! A connection's TCP socket as the stream its request is read from (through TLS or not),
//! with a deadline while the client is unknown: until its request's head is read (the
//! TLS handshake included), every read must come before the deadline, so that a client
//! that trickles bytes cannot hold a thread (and its descriptor) for longer. A socket's
//! read timeout bounds one read; this bounds them all.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
}

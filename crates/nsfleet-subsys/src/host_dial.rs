//! Connections made in the host's network namespace for a user's fleet, whose supervisor
//! lives in a network namespace of its own and may not enter the host's (only the host's
//! root may). The supervisor holds one end of a Unix socket pair ([`HostDialer`]); the
//! other is held by a process of the user's that stayed in the host's namespaces when
//! `up` made the fleet (nsfleet-client's forwarder), which [`answer`]s: it makes each
//! connection asked for and passes it back. A socket keeps the namespace it was made in,
//! so the supervisor then carries the connection as if it had made it there, as the Open
//! vSwitch controller relays do for a controller the user runs on the host.
//!
//! Only the supervisor holds its end (close-on-exec, never handed to a node), and the
//! forwarder dials nothing it is not asked to: it is the user's own process, with the
//! user's rights on the host, no more.

use nsfleet_locks::{order, Mutex};
use nsfleet_sys as sys;
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

/// How long the forwarder tries a connection before it answers that it failed.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The supervisor's end: connections made in the host's namespace, one request at a time.
pub struct HostDialer {
    sock: Mutex<OwnedFd>,
}

impl HostDialer {
    /// Over `sock`, which this keeps close-on-exec (a copy of it: a helper's kept
    /// descriptors are not), so that no program the supervisor runs inherits it.
    pub fn new(sock: OwnedFd) -> io::Result<HostDialer> {
        Ok(HostDialer {
            sock: Mutex::new(order::HOST_DIALER, sock.try_clone()?),
        })
    }

    /// A TCP connection to `to` made in the host's network namespace.
    pub fn dial(&self, to: SocketAddr) -> io::Result<TcpStream> {
        let sock = self.sock.lock();
        sys::send_all(sock.as_fd(), format!("{to}\n").as_bytes())?;
        let mut buf = [0u8; 512];
        let (n, fd) = sys::recv_with_fd(sock.as_fd(), &mut buf)?;
        match fd {
            Some(fd) => Ok(TcpStream::from(fd)),
            None if n == 0 => Err(io::Error::other(
                "the fleet's forwarder in the host's namespaces is gone",
            )),
            None => Err(io::Error::other(
                String::from_utf8_lossy(&buf[..n]).trim_end().to_string(),
            )),
        }
    }
}

/// The forwarder's side: reads one request from `sock` and answers it, a connection made
/// here or why not. `Ok(false)` once the supervisor's end is closed.
pub fn answer(sock: BorrowedFd<'_>) -> io::Result<bool> {
    let mut buf = [0u8; 128];
    let (n, _) = sys::recv_with_fd(sock, &mut buf)?;
    if n == 0 {
        return Ok(false);
    }
    let asked = String::from_utf8_lossy(&buf[..n]);
    let made = (asked.trim_end().parse::<SocketAddr>())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
        .and_then(|to| TcpStream::connect_timeout(&to, CONNECT_TIMEOUT));
    match made {
        Ok(conn) => sys::send_with_fd(sock, b"ok\n", conn.as_fd())?,
        Err(e) => sys::send_all(sock, format!("{e}\n").as_bytes())?,
    }
    Ok(true)
}

//! A synchronous netlink socket (NETLINK_ROUTE unless asked otherwise) that sends a batch of requests in one `sendmsg` and
//! matches the ACKs back to them by sequence number.
//!
//! The socket lives in the network namespace of the thread that called [`NlSocket::open`];
//! it never moves. It is not `Sync`: one socket per worker per namespace.

use crate::msg::{self, Batch, Message};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

const SOL_NETLINK: libc::c_int = 270;
const NETLINK_ADD_MEMBERSHIP: libc::c_int = 1;
const NETLINK_CAP_ACK: libc::c_int = 10;
const NETLINK_EXT_ACK: libc::c_int = 11;

/// The kernel builds every ACK of a batch inside our `sendmsg`, before we read any, so a
/// batch must fit its ACKs in the receive buffer; this many messages per `sendmsg` keeps
/// their worst case (an ACK with extended-ACK text each) well inside [`RCVBUF`].
pub const MAX_BATCH: usize = 256;
const RCVBUF: libc::c_int = 4 << 20;
const SNDBUF_SAFE: usize = 160 << 10;
/// Batches up to this many messages fit their ACKs in the default receive buffer.
const SMALL_BATCH: usize = 32;

/// A kernel error for one request: errno plus the extended-ACK message when the kernel gave one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NlError {
    pub errno: i32,
    pub message: Option<String>,
}

impl std::fmt::Display for NlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", io::Error::from_raw_os_error(self.errno))?;
        if let Some(m) = &self.message {
            write!(f, " ({m})")?;
        }
        Ok(())
    }
}

impl std::error::Error for NlError {}

impl From<io::Error> for NlError {
    fn from(e: io::Error) -> Self {
        NlError {
            errno: e.raw_os_error().unwrap_or(libc::EIO),
            message: None,
        }
    }
}

pub struct NlSocket {
    fd: OwnedFd,
    seq: u32,
    buf: Vec<u8>,
    big_rcvbuf: bool,
}

impl NlSocket {
    /// Opens a route socket in the calling thread's current network namespace.
    pub fn open() -> io::Result<Self> {
        Self::open_protocol(libc::NETLINK_ROUTE)
    }

    /// Opens a socket of a netlink `protocol` (NETLINK_ROUTE, NETLINK_NETFILTER, ...) in
    /// the calling thread's current network namespace.
    pub fn open_protocol(protocol: libc::c_int) -> io::Result<Self> {
        // SAFETY: plain socket(2); the returned descriptor is checked and then owned.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                protocol,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let sock = NlSocket {
            fd,
            seq: 1,
            buf: vec![0; 64 << 10],
            big_rcvbuf: false,
        };

        sock.setsockopt(SOL_NETLINK, NETLINK_EXT_ACK, 1)?;
        sock.setsockopt(SOL_NETLINK, NETLINK_CAP_ACK, 1)?;
        // SAFETY: sockaddr_nl is plain data; zeroed means "let the kernel pick the port id".
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as u16;
        // SAFETY: addr is a valid sockaddr_nl and its size is passed with it.
        let rc = unsafe {
            libc::bind(
                sock.fd.as_raw_fd(),
                &addr as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(sock)
    }

    /// Subscribes to a multicast group (RTNLGRP_*) of this socket's namespace.
    pub fn join_group(&mut self, group: u32) -> io::Result<()> {
        self.grow_rcvbuf();
        self.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, group as libc::c_int)
    }

    /// A receive buffer big enough for a full batch of ACKs or a burst of notifications.
    /// Only sockets that need it pay for it: most send one request and read one ACK.
    fn grow_rcvbuf(&mut self) {
        if self.big_rcvbuf {
            return;
        }
        self.big_rcvbuf = true;
        // Best effort: FORCE needs CAP_NET_ADMIN, the plain option is capped by rmem_max.
        if self
            .setsockopt(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, RCVBUF)
            .is_err()
        {
            let _ = self.setsockopt(libc::SOL_SOCKET, libc::SO_RCVBUF, RCVBUF);
        }
    }

    fn setsockopt(&self, level: libc::c_int, name: libc::c_int, v: libc::c_int) -> io::Result<()> {
        // SAFETY: the option value is a c_int living on this stack frame for the call.
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                level,
                name,
                &v as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as u32,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// A fresh sequence number for the next message of a batch.
    pub fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1).max(1);
        self.seq
    }

    /// Sends the batch and returns one result per message, in batch order. An `Err` of the
    /// outer result means the socket itself failed and nothing is known about the batch.
    pub fn execute(&mut self, batch: &Batch) -> io::Result<Vec<Result<(), NlError>>> {
        self.exchange(batch, None, None)
    }

    /// Sends a transaction (nf_tables': its begin and end unacknowledged, see
    /// [`Batch::begin_unacked`]) and waits for every acknowledged request; the first
    /// failure is the error. A failure of the transaction as a whole (its subsystem
    /// missing, a failed commit) comes back on the begin's sequence number `begin`; so
    /// is a kernel that does not answer within `timeout` an error.
    pub fn execute_transaction(
        &mut self,
        batch: &Batch,
        begin: u32,
        timeout: Duration,
    ) -> Result<(), NlError> {
        for r in self.exchange(batch, Some(begin), Some(timeout))? {
            r?;
        }
        Ok(())
    }

    /// Sends the batch and collects one result per acknowledged message, in batch order.
    /// An error on sequence number `abort` (no message of the batch's own) is every
    /// pending message's result. Each wait for the kernel lasts at most `timeout`.
    fn exchange(
        &mut self,
        batch: &Batch,
        abort: Option<u32>,
        timeout: Option<Duration>,
    ) -> io::Result<Vec<Result<(), NlError>>> {
        let bytes = batch.bytes();
        assert!(
            batch.seqs().len() <= MAX_BATCH && bytes.len() <= SNDBUF_SAFE,
            "netlink batch over {MAX_BATCH} messages or {SNDBUF_SAFE} bytes: split it"
        );
        if batch.seqs().len() > SMALL_BATCH {
            self.grow_rcvbuf();
        }
        let first = *batch.seqs().first().unwrap_or(&0);
        let mut results: Vec<Option<Result<(), NlError>>> = vec![None; batch.seqs().len()];
        if results.is_empty() {
            return Ok(Vec::new());
        }
        self.send(bytes)?;
        let mut pending = results.len();
        while pending > 0 {
            let n = self.recv_raw(timeout)?;
            for m in msg::messages(&self.buf[..n]) {
                let Some((errno, text)) = msg::parse_error(&m) else {
                    continue;
                };
                let result = match errno {
                    0 => Ok(()),
                    _ => Err(NlError {
                        errno,
                        message: text,
                    }),
                };
                if Some(m.seq) == abort {
                    if result.is_err() {
                        for r in results.iter_mut().filter(|r| r.is_none()) {
                            *r = Some(result.clone());
                        }
                        pending = 0;
                    }
                    continue;
                }
                // Sequence numbers of one batch are consecutive, so an ACK's slot is its offset.
                let slot = m.seq.wrapping_sub(first) as usize;
                if slot < results.len() && results[slot].is_none() {
                    results[slot] = Some(result);
                    pending -= 1;
                }
            }
        }
        Ok(results.into_iter().map(Option::unwrap).collect())
    }

    /// Sends a batch whose messages ask for no ACK ([`Batch::begin_unacked`]) and waits
    /// for nothing: the proc connector's subscription, which nothing acknowledges.
    pub fn send_unacked(&mut self, batch: &Batch) -> io::Result<()> {
        assert!(
            batch.seqs().is_empty(),
            "a batch that asks for ACKs: use execute"
        );
        self.send(batch.bytes())
    }

    /// Sends the batch; the first failure (in batch order) is the error.
    pub fn execute_all(&mut self, batch: &Batch) -> Result<(), NlError> {
        for r in self.execute(batch)? {
            r?;
        }
        Ok(())
    }

    fn send(&self, bytes: &[u8]) -> io::Result<()> {
        // SAFETY: sockaddr_nl zeroed addresses the kernel (port 0).
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as u16;
        loop {
            // SAFETY: bytes and addr are valid for the duration of the call.
            let rc = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    bytes.as_ptr() as *const libc::c_void,
                    bytes.len(),
                    0,
                    &addr as *const _ as *const libc::sockaddr,
                    std::mem::size_of::<libc::sockaddr_nl>() as u32,
                )
            };
            if rc >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Receives one datagram into the socket's buffer; `None` waits forever.
    fn recv_raw(&mut self, timeout: Option<Duration>) -> io::Result<usize> {
        if let Some(t) = timeout {
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = t.as_millis().min(i32::MAX as u128) as i32;
            // SAFETY: one valid pollfd.
            let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
            if rc == 0 {
                return Err(io::ErrorKind::TimedOut.into());
            }
        }
        loop {
            // SAFETY: the buffer is ours and its length is passed.
            let rc = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr() as *mut libc::c_void,
                    self.buf.len(),
                    0,
                )
            };
            if rc >= 0 {
                return Ok(rc as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Receives one datagram of notifications and hands each message to `f`. Returns
    /// `TimedOut` when nothing came within `timeout`, and the kernel's `ENOBUFS` when
    /// notifications were dropped because the receive buffer overflowed.
    pub fn recv_each(
        &mut self,
        timeout: Option<Duration>,
        mut f: impl FnMut(&Message<'_>),
    ) -> io::Result<()> {
        let n = self.recv_raw(timeout)?;
        for m in msg::messages(&self.buf[..n]) {
            f(&m);
        }
        Ok(())
    }

    /// Sends one request (a dump, or a get of one object) and hands every reply message to
    /// `f` until NLMSG_DONE or the request's ACK.
    pub fn dump(&mut self, batch: &Batch, mut f: impl FnMut(&Message<'_>)) -> Result<(), NlError> {
        self.send(batch.bytes())?;
        let seq = batch.seqs()[0];
        loop {
            let n = self.recv_raw(None)?;
            for m in msg::messages(&self.buf[..n]) {
                if m.seq != seq {
                    continue;
                }
                match m.ty {
                    msg::NLMSG_DONE => return Ok(()),
                    msg::NLMSG_ERROR => {
                        if let Some((errno, message)) = msg::parse_error(&m) {
                            if errno != 0 {
                                return Err(NlError { errno, message });
                            }
                            return Ok(());
                        }
                    }
                    _ => f(&m),
                }
            }
        }
    }
}

impl AsRawFd for NlSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl std::os::fd::AsFd for NlSocket {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

//! Descriptors passed over Unix sockets (SCM_RIGHTS), one at a time, and who is at the
//! other end of one (SO_PEERCRED).
//!
//! Nothing here allocates and each call is one syscall, so a holder (a forked child that
//! may only make async-signal-safe calls, see [`crate::helper`]) uses these too.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// Room for the control message of one descriptor: CMSG_SPACE(sizeof(int)).
// SAFETY: CMSG_SPACE is pure arithmetic on its argument.
const ONE_FD_SPACE: usize =
    unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;

/// A control buffer for one descriptor, on the stack and aligned for `cmsghdr`.
#[repr(C, align(8))]
struct CmsgBuf([u8; 32]);
const _: () = assert!(ONE_FD_SPACE <= 32);

impl CmsgBuf {
    fn new() -> Self {
        CmsgBuf([0; 32])
    }
}

/// A msghdr over one buffer and a control buffer. The pointers it holds are valid as long
/// as `iov` and `cbuf` are: callers pass it to one syscall while both are alive.
fn msghdr_with(iov: &mut libc::iovec, cbuf: &mut CmsgBuf) -> libc::msghdr {
    // SAFETY: msghdr is plain data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.0.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = ONE_FD_SPACE;
    msg
}

/// Sends `payload` and one descriptor over a Unix stream socket (SCM_RIGHTS).
pub fn send_with_fd(sock: BorrowedFd<'_>, payload: &[u8], fd: BorrowedFd<'_>) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: payload.as_ptr() as *mut libc::c_void,
        iov_len: payload.len(),
    };
    let mut cbuf = CmsgBuf::new();
    let msg = msghdr_with(&mut iov, &mut cbuf);
    // SAFETY: msg points at iov and cbuf, both alive for the call; the CMSG_* macros stay
    // inside cbuf, which holds CMSG_SPACE for one descriptor and is aligned for cmsghdr.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut RawFd, fd.as_raw_fd());
        let rc = libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL);
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Receives up to `buf.len()` bytes and at most one descriptor passed with them.
pub fn recv_with_fd(sock: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(usize, Option<OwnedFd>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let mut cbuf = CmsgBuf::new();
    let mut msg = msghdr_with(&mut iov, &mut cbuf);
    // SAFETY: as in send_with_fd; the received descriptor (if any) is new in our table
    // (MSG_CMSG_CLOEXEC) and owned from here on.
    unsafe {
        let n = libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut fd = None;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if !cmsg.is_null()
            && (*cmsg).cmsg_level == libc::SOL_SOCKET
            && (*cmsg).cmsg_type == libc::SCM_RIGHTS
        {
            let raw = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const RawFd);
            fd = Some(OwnedFd::from_raw_fd(raw));
        }
        Ok((n as usize, fd))
    }
}

/// Sends all of `bytes` on a socket, without SIGPIPE if the peer is gone (EPIPE instead).
pub fn send_all(sock: BorrowedFd<'_>, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: send(2) reads bytes.len() bytes from a live slice.
        let n = unsafe {
            libc::send(
                sock.as_raw_fd(),
                bytes.as_ptr() as *const libc::c_void,
                bytes.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        bytes = &bytes[n as usize..];
    }
    Ok(())
}

/// The user id of the process at the other end of a Unix socket, as the kernel recorded
/// it when the connection was made (SO_PEERCRED): not something the peer can claim.
pub fn peer_uid(sock: BorrowedFd<'_>) -> io::Result<u32> {
    // SAFETY: ucred is plain data; getsockopt writes at most `len` bytes into it.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a valid socket descriptor, and a buffer of `len` bytes for the option.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut libc::ucred as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cred.uid)
}

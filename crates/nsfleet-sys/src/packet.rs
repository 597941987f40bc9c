//! AF_PACKET sockets in the calling thread's network namespace: made, bound to one
//! interface, filtered with classic BPF, read with the kernel's timestamps, and asked for
//! their counters. The traffic engine's sink and TX ring and `nsfleet capture` use them.

use crate::check;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// A raw AF_PACKET socket in the calling thread's namespace. With protocol 0 it receives
/// nothing until it is bound with a protocol: a filter can be attached before the first
/// packet.
pub fn packet_socket(protocol: u16) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; on success the descriptor is new and owned by nobody else.
    let fd = check(unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            protocol.to_be() as i32,
        )
    })?;
    // SAFETY: fd was just returned by socket(2).
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A SOL_PACKET option.
pub fn setsockopt<T>(fd: &OwnedFd, opt: libc::c_int, value: &T) -> io::Result<()> {
    set_option(fd, libc::SOL_PACKET, opt, value)
}

/// A socket option of any level: `value` as the kernel takes it.
pub(crate) fn set_option<T>(
    fd: &OwnedFd,
    level: libc::c_int,
    opt: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` points to a live T of the size passed; the kernel copies it in.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

pub fn set_rcvbuf(fd: &OwnedFd, bytes: i32) -> io::Result<()> {
    set_option(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &bytes)
}

/// Raises the receive buffer past the host's `rmem_max` (root only): a capture keeps what
/// a burst brings instead of dropping it.
pub fn force_rcvbuf(fd: &OwnedFd, bytes: i32) -> io::Result<()> {
    set_option(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &bytes)
}

pub fn attach_filter(fd: &OwnedFd, prog: &[libc::sock_filter]) -> io::Result<()> {
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr().cast_mut(),
    };
    set_option(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &fprog)
}

pub fn bind_packet(fd: &OwnedFd, ifindex: u32, protocol: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain data; all zeroes is a valid value.
    let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sa.sll_family = libc::AF_PACKET as u16;
    sa.sll_protocol = protocol.to_be();
    sa.sll_ifindex = ifindex as i32;
    // SAFETY: `sa` is a live sockaddr_ll of the size passed.
    check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// A packet socket's counters since the last call (the kernel resets them on each read).
#[derive(Clone, Copy, Debug, Default)]
pub struct PacketStats {
    /// Packets that passed the filter, the dropped among them.
    pub packets: u64,
    /// Of those, the ones dropped because the socket's buffer was full.
    pub drops: u64,
}

pub fn packet_stats(fd: &OwnedFd) -> io::Result<PacketStats> {
    let mut st = libc::tpacket_stats {
        tp_packets: 0,
        tp_drops: 0,
    };
    let mut len = size_of::<libc::tpacket_stats>() as libc::socklen_t;
    // SAFETY: `st` and `len` are live and sized as the kernel expects for this option.
    check(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut st as *mut libc::tpacket_stats).cast(),
            &mut len,
        )
    })?;
    Ok(PacketStats {
        packets: st.tp_packets as u64,
        drops: st.tp_drops as u64,
    })
}

/// Has the kernel stamp each packet with the time it was received (CLOCK_REALTIME, in
/// nanoseconds), for [`recv_stamped`].
pub fn enable_timestamps(fd: &OwnedFd) -> io::Result<()> {
    set_option(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &1i32)
}

/// One packet read without waiting.
#[derive(Clone, Copy, Debug)]
pub struct Received {
    /// Its length on the wire; at most `buf.len()` of it was kept.
    pub len: usize,
    /// Since the Unix epoch, as the kernel stamped it.
    pub at: Duration,
    /// Sent by the interface (rather than received by it).
    pub outgoing: bool,
}

/// Reads one packet into `buf` if one is waiting (`None` if none is), with its kernel
/// timestamp ([`enable_timestamps`]) and its length before truncation.
pub fn recv_stamped(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<Option<Received>> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Room for one SCM_TIMESTAMPNS message, aligned as cmsghdr is.
    let mut control = [0u64; 8];
    // SAFETY: sockaddr_ll and msghdr are plain data; all zeroes is a valid value of each.
    let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&mut from as *mut libc::sockaddr_ll).cast();
    msg.msg_namelen = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of::<[u64; 8]>();
    let flags = libc::MSG_DONTWAIT | libc::MSG_TRUNC;
    // SAFETY: `msg` points at `from`, `iov` (over `buf`) and `control`, all live and
    // sized as given; the kernel writes only inside them.
    let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, flags) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock => Ok(None),
            _ => Err(e),
        };
    }
    let mut at = Duration::ZERO;
    // SAFETY: the CMSG_* macros walk the control buffer the kernel filled, within the
    // length it set; a timespec is read only from a message of that type.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::timespec>());
                at = Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok(Some(Received {
        len: n as usize,
        at,
        outgoing: from.sll_pkttype == libc::PACKET_OUTGOING,
    }))
}

/// The names of the calling thread's namespace's interfaces.
pub fn interface_names() -> io::Result<Vec<String>> {
    // SAFETY: if_nameindex returns an array ended by a zero entry, or NULL on failure.
    let list = unsafe { libc::if_nameindex() };
    if list.is_null() {
        return Err(io::Error::last_os_error());
    }
    let mut names = Vec::new();
    // SAFETY: read up to the terminating entry, then freed once with its own function.
    unsafe {
        let mut p = list;
        while (*p).if_index != 0 {
            names.push(
                std::ffi::CStr::from_ptr((*p).if_name)
                    .to_string_lossy()
                    .into_owned(),
            );
            p = p.add(1);
        }
        libc::if_freenameindex(list);
    }
    Ok(names)
}

//! Interface ioctls in the calling thread's network namespace: index, MAC, offloads.

use crate::check;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// An offload of a device's that ethtool's legacy ioctls turn on and off: one call each,
/// with no generic netlink family to resolve.
#[derive(Clone, Copy, Debug)]
pub enum Offload {
    /// Generic receive offload. On a veth, GRO on makes the device run NAPI, which is
    /// what lets its peer hand it XDP frames.
    Gro,
    /// Transmit checksum offload (`ethtool -K IF tx`): off, the kernel computes the
    /// checksums of what it sends there itself (and segments TCP to the MTU).
    TxChecksum,
}

/// Turns `offload` on or off on an interface of the calling thread's namespace.
pub fn set_offload(ifname: &str, offload: Offload, on: bool) -> io::Result<()> {
    const ETHTOOL_STXCSUM: u32 = 0x17;
    const ETHTOOL_SGRO: u32 = 0x2c;
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    let cmd = match offload {
        Offload::Gro => ETHTOOL_SGRO,
        Offload::TxChecksum => ETHTOOL_STXCSUM,
    };
    let mut value = EthtoolValue {
        cmd,
        data: on as u32,
    };
    interface_ioctl(ifname, libc::SIOCETHTOOL, |req| {
        req.ifr_ifru.ifru_data = (&mut value as *mut EthtoolValue).cast();
    })?;
    Ok(())
}

/// An interface's index in the calling thread's namespace.
pub fn ifindex(name: &str) -> io::Result<u32> {
    let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid C string for the duration of the call.
    match unsafe { libc::if_nametoindex(c.as_ptr()) } {
        0 => Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface {name:?} in this namespace"),
        )),
        i => Ok(i),
    }
}

/// One interface ioctl in the calling thread's namespace: `req`'s name is set to `name`,
/// `fill` may set the rest, and the kernel's answer comes back in it.
pub fn interface_ioctl(
    name: &str,
    request: libc::c_ulong,
    fill: impl FnOnce(&mut libc::ifreq),
) -> io::Result<libc::ifreq> {
    // SAFETY: ifreq is plain data; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.len() >= req.ifr_name.len() {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    fill(&mut req);
    // Any socket of the namespace reaches the device ioctls (see `any_socket`).
    let sock = any_socket()?;
    // SAFETY: the request reads ifr_name and whatever `fill` set (the caller keeps any
    // buffer it points to alive across this call) and writes only inside `req`.
    check(unsafe { libc::ioctl(sock.as_raw_fd(), request, &mut req) })?;
    Ok(req)
}

/// An interface's MAC address, in the calling thread's namespace.
pub fn hwaddr(name: &str) -> io::Result<[u8; 6]> {
    let req = interface_ioctl(name, libc::SIOCGIFHWADDR, |_| {})?;
    // SAFETY: the kernel filled the hwaddr member of the union.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (d, s) in mac.iter_mut().zip(sa.sa_data.iter()) {
        *d = *s as u8;
    }
    Ok(mac)
}

/// A socket of the calling thread's namespace, for device ioctls: any socket reaches
/// them, and a UDP socket, unbound, receives nothing meanwhile; ethtool(8) takes the
/// same. Not a packet socket: its close waits for an RCU grace period
/// (`packet_release`), and `up` of a 1,024-host tree on Open vSwitch without TSO, one
/// ioctl per host, spent 7 s of its 9.8 in those waits.
fn any_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; on success the descriptor is new and owned by nobody else.
    let fd =
        check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: fd was just returned by socket(2).
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

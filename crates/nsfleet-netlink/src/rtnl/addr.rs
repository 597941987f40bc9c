//! Addresses (RTM_NEWADDR, RTM_DELADDR).

use crate::msg::{Batch, NLM_F_CREATE, NLM_F_EXCL};
use std::net::IpAddr;

pub const RTM_NEWADDR: u16 = 20;
const RTM_DELADDR: u16 = 21;

const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const IFA_FLAGS: u16 = 8;
/// No duplicate-address detection: an IPv6 address is usable at once instead of staying
/// "tentative" for a second or more.
const IFA_F_NODAD: u32 = 0x02;

/// Adds `addr/prefix` to the link with `index`, usable at once (no DAD).
pub fn new_addr(b: &mut Batch, seq: u32, index: i32, addr: IpAddr, prefix: u8) {
    address(b, seq, RTM_NEWADDR, index, addr, prefix)
}

/// Removes `addr/prefix` from the link with `index`.
pub fn del_addr(b: &mut Batch, seq: u32, index: i32, addr: IpAddr, prefix: u8) {
    address(b, seq, RTM_DELADDR, index, addr, prefix)
}

fn address(b: &mut Batch, seq: u32, kind: u16, index: i32, addr: IpAddr, prefix: u8) {
    let flags = if kind == RTM_NEWADDR {
        NLM_F_CREATE | NLM_F_EXCL
    } else {
        0
    };
    let (family, bytes): (u8, Vec<u8>) = match addr {
        IpAddr::V4(a) => (libc::AF_INET as u8, a.octets().to_vec()),
        IpAddr::V6(a) => (libc::AF_INET6 as u8, a.octets().to_vec()),
    };
    // struct ifaddrmsg
    let mut h = [0u8; 8];
    h[0] = family;
    h[1] = prefix;
    h[2] = IFA_F_NODAD as u8;
    h[4..8].copy_from_slice(&(index as u32).to_ne_bytes());
    b.begin(kind, flags, seq)
        .header(&h)
        .attr(IFA_LOCAL, &bytes)
        .attr(IFA_ADDRESS, &bytes)
        .attr_u32(IFA_FLAGS, IFA_F_NODAD)
        .end();
}

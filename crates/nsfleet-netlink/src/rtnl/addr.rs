//! Addresses (RTM_NEWADDR, RTM_DELADDR), and a dump of them read back.

use crate::msg::{self, Batch, Message, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL};
use std::net::IpAddr;

pub const RTM_NEWADDR: u16 = 20;
const RTM_DELADDR: u16 = 21;
const RTM_GETADDR: u16 = 22;

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

/// A dump of every address (both families) in the socket's namespace.
pub fn dump_addrs(b: &mut Batch, seq: u32) {
    b.begin(RTM_GETADDR, NLM_F_DUMP, seq)
        .header(&[0u8; 8])
        .end();
}

/// An address from a dump: the link's index, the address and its prefix length.
pub fn parse_addr(m: &Message<'_>) -> Option<(i32, IpAddr, u8)> {
    if m.ty != RTM_NEWADDR || m.payload.len() < 8 {
        return None;
    }
    let (family, prefix) = (m.payload[0], m.payload[1]);
    let index = i32::from_ne_bytes(m.payload[4..8].try_into().ok()?);
    let (mut local, mut address) = (None, None);
    for (ty, v) in msg::attrs(&m.payload[8..]) {
        match ty {
            IFA_LOCAL => local = super::route::address(family, v),
            IFA_ADDRESS => address = super::route::address(family, v),
            _ => {}
        }
    }
    // IFA_LOCAL is the address itself; IFA_ADDRESS is the peer's on a point-to-point link.
    Some((index, local.or(address)?, prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dump_reads_back_an_address() {
        let mut b = Batch::new();
        new_addr(&mut b, 1, 7, "10.255.0.9".parse().unwrap(), 32);
        let m = msg::messages(b.bytes()).next().unwrap();
        assert_eq!(parse_addr(&m), Some((7, "10.255.0.9".parse().unwrap(), 32)));
    }
}

//! Routes (RTM_NEWROUTE, RTM_DELROUTE) in the main table.

use crate::msg::{Batch, NLM_F_CREATE, NLM_F_EXCL};
use std::net::IpAddr;

pub const RTM_NEWROUTE: u16 = 24;
const RTM_DELROUTE: u16 = 25;

const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RT_TABLE_MAIN: u8 = 254;
const RTPROT_STATIC: u8 = 4;
const RT_SCOPE_UNIVERSE: u8 = 0;
const RT_SCOPE_LINK: u8 = 253;
const RTN_UNICAST: u8 = 1;

/// A unicast route: to `dst/prefix` via a gateway, out of a device, or both.
#[derive(Clone, Copy, Debug)]
pub struct Route {
    pub dst: IpAddr,
    pub prefix: u8,
    pub via: Option<IpAddr>,
    pub oif: Option<i32>,
}

fn octets(a: IpAddr) -> Vec<u8> {
    match a {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

pub fn new_route(b: &mut Batch, seq: u32, r: &Route) {
    route(b, seq, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, r)
}

/// Removes the route `r` describes (the same destination, gateway and device).
pub fn del_route(b: &mut Batch, seq: u32, r: &Route) {
    route(b, seq, RTM_DELROUTE, 0, r)
}

fn route(b: &mut Batch, seq: u32, kind: u16, flags: u16, r: &Route) {
    let family = if r.dst.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    } as u8;
    let scope = if r.via.is_some() {
        RT_SCOPE_UNIVERSE
    } else {
        RT_SCOPE_LINK
    };
    // struct rtmsg
    let h = [
        family,
        r.prefix,
        0,
        0,
        RT_TABLE_MAIN,
        RTPROT_STATIC,
        scope,
        RTN_UNICAST,
        0,
        0,
        0,
        0,
    ];
    b.begin(kind, flags, seq).header(&h);
    if r.prefix > 0 {
        b.attr(RTA_DST, &octets(r.dst));
    }
    if let Some(gw) = r.via {
        b.attr(RTA_GATEWAY, &octets(gw));
    }
    if let Some(oif) = r.oif {
        b.attr_u32(RTA_OIF, oif as u32);
    }
    b.end();
}

//! Routes (RTM_NEWROUTE, RTM_DELROUTE) in the main table, and a dump of the main
//! table's unicast routes read back as destinations.

use crate::msg::{self, Batch, Message, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const RTM_NEWROUTE: u16 = 24;
/// The multicast group of IPv4 route changes.
pub const RTNLGRP_IPV4_ROUTE: u32 = 7;
const RTM_DELROUTE: u16 = 25;
const RTM_GETROUTE: u16 = 26;

const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_TABLE: u16 = 15;
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

/// A dump of every route of `family` (AF_INET or AF_INET6) in the socket's namespace.
pub fn dump_routes(b: &mut Batch, seq: u32, family: u8) {
    let mut h = [0u8; 12];
    h[0] = family;
    b.begin(RTM_GETROUTE, NLM_F_DUMP, seq).header(&h).end();
}

/// A route as a dump gives it back: where it leads, and out of which device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouteDst {
    pub dst: IpAddr,
    pub prefix: u8,
    /// The output device's index, when the route names one (a multipath route names its
    /// devices in its next hops instead).
    pub oif: Option<i32>,
}

/// A unicast route of the main table from a route dump; anything else (local, broadcast,
/// multicast, other tables) is `None`.
pub fn parse_route(m: &Message<'_>) -> Option<RouteDst> {
    if m.ty != RTM_NEWROUTE || m.payload.len() < 12 {
        return None;
    }
    let (family, prefix, mut table, kind) =
        (m.payload[0], m.payload[1], m.payload[4], m.payload[7]);
    let mut dst = None;
    let mut oif = None;
    for (ty, v) in msg::attrs(&m.payload[12..]) {
        match ty {
            RTA_DST => dst = address(family, v),
            RTA_OIF => {
                oif = v
                    .get(..4)
                    .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            }
            // Tables above 255 are only named here (the header's byte then says 252).
            RTA_TABLE => {
                let id = v
                    .get(..4)
                    .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                table = match id {
                    Some(t) if t == u32::from(RT_TABLE_MAIN) => RT_TABLE_MAIN,
                    _ => 0,
                };
            }
            _ => {}
        }
    }
    if kind != RTN_UNICAST || table != RT_TABLE_MAIN {
        return None;
    }
    let dst = match (dst, family) {
        (Some(d), _) => d,
        (None, f) if f == libc::AF_INET as u8 => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        (None, f) if f == libc::AF_INET6 as u8 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        _ => return None,
    };
    Some(RouteDst { dst, prefix, oif })
}

/// An address attribute's bytes, of the message's family.
pub(crate) fn address(family: u8, v: &[u8]) -> Option<IpAddr> {
    if family == libc::AF_INET as u8 {
        let b: [u8; 4] = v.get(..4)?.try_into().ok()?;
        Some(IpAddr::V4(b.into()))
    } else if family == libc::AF_INET6 as u8 {
        let b: [u8; 16] = v.get(..16)?.try_into().ok()?;
        Some(IpAddr::V6(b.into()))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A route message as the kernel sends it in a dump (the header a request carries).
    fn reply(r: &Route, table: u8, kind: u8) -> Vec<u8> {
        let mut b = Batch::new();
        route(&mut b, 1, RTM_NEWROUTE, 0, r);
        let mut bytes = b.bytes().to_vec();
        // nlmsghdr is 16 bytes; rtmsg's table is its 5th byte and its type the 8th.
        bytes[16 + 4] = table;
        bytes[16 + 7] = kind;
        bytes
    }

    #[test]
    fn a_dump_reads_back_the_main_tables_unicast_routes() {
        let r = Route {
            dst: "10.255.0.7".parse().unwrap(),
            prefix: 32,
            via: Some("10.0.0.1".parse().unwrap()),
            oif: Some(3),
        };
        let bytes = reply(&r, RT_TABLE_MAIN, RTN_UNICAST);
        let m = msg::messages(&bytes).next().unwrap();
        let want = RouteDst {
            dst: r.dst,
            prefix: 32,
            oif: Some(3),
        };
        assert_eq!(parse_route(&m), Some(want));
        // Local routes (the table "local", type local) are not routes to elsewhere.
        let bytes = reply(&r, 255, 2);
        assert_eq!(parse_route(&msg::messages(&bytes).next().unwrap()), None);
        let default = Route {
            dst: "::".parse().unwrap(),
            prefix: 0,
            via: Some("fe80::1".parse().unwrap()),
            oif: None,
        };
        let bytes = reply(&default, RT_TABLE_MAIN, RTN_UNICAST);
        let got = parse_route(&msg::messages(&bytes).next().unwrap()).unwrap();
        assert_eq!((got.dst, got.prefix), ("::".parse().unwrap(), 0));
    }
}

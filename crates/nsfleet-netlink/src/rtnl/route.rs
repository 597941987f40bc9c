//! Routes (RTM_NEWROUTE, RTM_DELROUTE) in the main table, and a dump of the main
//! table's unicast routes read back as destinations and their gateways.

use crate::msg::{self, Batch, Message, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL};
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const RTM_NEWROUTE: u16 = 24;
/// The multicast group of IPv4 route changes.
pub const RTNLGRP_IPV4_ROUTE: u32 = 7;
const RTM_DELROUTE: u16 = 25;
const RTM_GETROUTE: u16 = 26;

const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_MULTIPATH: u16 = 9;
const RTA_TABLE: u16 = 15;
/// `struct rtnexthop`'s size: u16 rtnh_len, u8 flags, u8 hops, i32 ifindex.
const RTNH_LEN: usize = 8;
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

/// A route as a dump gives it back: where it leads, out of which device, through which
/// gateways.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteDst {
    pub dst: IpAddr,
    pub prefix: u8,
    /// The output device's index, when the route names one (a multipath route names its
    /// devices in its next hops instead).
    pub oif: Option<i32>,
    /// Its gateway (RTA_GATEWAY), or a multipath route's next hops' gateways in the
    /// kernel's order; none for a route straight out of a device. A next hop given by
    /// RTA_VIA (an IPv4 route through an IPv6 gateway) is not listed.
    #[serde(default)]
    pub gateways: Vec<IpAddr>,
    /// No packet goes this way: its next hop (each of a multipath route's) is dead or
    /// its device has lost its carrier (RTNH_F_DEAD, RTNH_F_LINKDOWN). The kernel keeps
    /// a connected route of a device without carrier, so marked.
    #[serde(default)]
    pub dead: bool,
}

/// A next hop's flags: dead, or its device without carrier.
const RTNH_F_DEAD: u32 = 1;
const RTNH_F_LINKDOWN: u32 = 16;

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
    let mut gateways = Vec::new();
    let flags = u32::from_ne_bytes([m.payload[8], m.payload[9], m.payload[10], m.payload[11]]);
    let mut dead = flags & (RTNH_F_DEAD | RTNH_F_LINKDOWN) != 0;
    for (ty, v) in msg::attrs(&m.payload[12..]) {
        match ty {
            RTA_DST => dst = address(family, v),
            RTA_GATEWAY => gateways.extend(address(family, v)),
            RTA_MULTIPATH => {
                let hops = next_hops(family, v);
                dead = !hops.is_empty() && hops.iter().all(|h| h.1);
                gateways.extend(hops.into_iter().filter_map(|h| h.0));
            }
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
    Some(RouteDst {
        dst,
        prefix,
        oif,
        gateways,
        dead,
    })
}

/// The next hops of an RTA_MULTIPATH, each as its gateway and whether it is dead (see
/// [`RouteDst::dead`]): each a `struct rtnexthop` (its length first, the header
/// included, then its flags) followed by its own attributes, of which RTA_GATEWAY.
/// Stops at the first malformed one.
fn next_hops(family: u8, mut v: &[u8]) -> Vec<(Option<IpAddr>, bool)> {
    let mut out = Vec::new();
    while v.len() >= RTNH_LEN {
        let len = usize::from(u16::from_ne_bytes([v[0], v[1]]));
        if len < RTNH_LEN || len > v.len() {
            break;
        }
        let gateway = (msg::attrs(&v[RTNH_LEN..len]))
            .find(|(ty, _)| *ty == RTA_GATEWAY)
            .and_then(|(_, a)| address(family, a));
        let dead = u32::from(v[2]) & (RTNH_F_DEAD | RTNH_F_LINKDOWN) != 0;
        out.push((gateway, dead));
        v = &v[msg::align(len).min(v.len())..];
    }
    out
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
            gateways: vec!["10.0.0.1".parse().unwrap()],
            dead: false,
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
        assert_eq!(got.gateways, ["fe80::1".parse::<IpAddr>().unwrap()]);
    }

    /// One `struct rtnexthop` and its attributes, as the kernel lays them in RTA_MULTIPATH.
    fn next_hop(ifindex: i32, attrs: &[(u16, &[u8])]) -> Vec<u8> {
        next_hop_flagged(ifindex, 0, attrs)
    }

    fn next_hop_flagged(ifindex: i32, flags: u8, attrs: &[(u16, &[u8])]) -> Vec<u8> {
        let mut body = Vec::new();
        for (ty, v) in attrs {
            body.extend_from_slice(&((4 + v.len()) as u16).to_ne_bytes());
            body.extend_from_slice(&ty.to_ne_bytes());
            body.extend_from_slice(v);
            body.resize(msg::align(body.len()), 0);
        }
        let mut hop = Vec::new();
        hop.extend_from_slice(&((RTNH_LEN + body.len()) as u16).to_ne_bytes());
        hop.extend_from_slice(&[flags, 0]); // rtnh_flags, rtnh_hops
        hop.extend_from_slice(&ifindex.to_ne_bytes());
        hop.extend_from_slice(&body);
        hop
    }

    #[test]
    fn a_multipath_route_reads_back_each_next_hops_gateway() {
        // 10.9.0.0/16 over two next hops, as `ip route add 10.9.0.0/16 nexthop via
        // 10.0.0.2 dev eth0 nexthop via 10.1.0.2 dev eth1` leaves it: no RTA_OIF nor
        // RTA_GATEWAY of its own; the second hop's gateway after another attribute
        // (RTA_FLOW), which is passed over.
        let mut hops = next_hop(2, &[(RTA_GATEWAY, &[10, 0, 0, 2])]);
        hops.extend(next_hop(
            3,
            &[(11, &7u32.to_ne_bytes()), (RTA_GATEWAY, &[10, 1, 0, 2])],
        ));
        let mut b = Batch::new();
        let h = [
            libc::AF_INET as u8,
            16,
            0,
            0,
            RT_TABLE_MAIN,
            RTPROT_STATIC,
            RT_SCOPE_UNIVERSE,
            RTN_UNICAST,
            0,
            0,
            0,
            0,
        ];
        (b.begin(RTM_NEWROUTE, 0, 1).header(&h))
            .attr_u32(RTA_TABLE, u32::from(RT_TABLE_MAIN))
            .attr(RTA_DST, &[10, 9, 0, 0])
            .attr(RTA_MULTIPATH, &hops)
            .end();
        let got = parse_route(&msg::messages(b.bytes()).next().unwrap());
        let want = RouteDst {
            dst: "10.9.0.0".parse().unwrap(),
            prefix: 16,
            oif: None,
            gateways: vec!["10.0.0.2".parse().unwrap(), "10.1.0.2".parse().unwrap()],
            dead: false,
        };
        assert_eq!(got, Some(want));
        // A next hop cut short ends the list there, with what came before it.
        let mut cut = hops.clone();
        cut.truncate(hops.len() - 2);
        assert_eq!(
            next_hops(libc::AF_INET as u8, &cut),
            [(Some("10.0.0.2".parse::<IpAddr>().unwrap()), false)]
        );
        // The route is dead only when every next hop is (RTNH_F_LINKDOWN: no carrier).
        let linkdown = RTNH_F_LINKDOWN as u8;
        let mut one = next_hop_flagged(2, linkdown, &[(RTA_GATEWAY, &[10, 0, 0, 2])]);
        one.extend(next_hop(3, &[(RTA_GATEWAY, &[10, 1, 0, 2])]));
        let both: Vec<u8> = [2, 3]
            .iter()
            .flat_map(|i| next_hop_flagged(*i, linkdown, &[(RTA_GATEWAY, &[10, 0, 0, 2])]))
            .collect();
        let dead = |hops: &[u8]| next_hops(libc::AF_INET as u8, hops).iter().all(|h| h.1);
        assert!(!dead(&one) && dead(&both));
    }

    #[test]
    fn a_route_dst_without_gateways_reads_from_json() {
        let r: RouteDst =
            serde_json::from_str(r#"{"dst":"10.0.0.0","prefix":24,"oif":2}"#).unwrap();
        assert!(r.gateways.is_empty());
        let again: RouteDst = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(again, r);
    }
}

//! What routers reach, read from their kernels (`--wait converged`): each router's
//! loopback addresses (the addresses on its `lo`, but 127/8 and ::1) and the destinations
//! of its main table's unicast routes, by netlink dumps in its namespace; and which of the
//! other routers' loopbacks each one lacks a route to. The daemons' own views (`vtysh`,
//! `birdc`) are never asked: a route counts once the kernel has it.
//!
//! Reads only. The sockets keep their nodes' namespaces alive: drop a [`Reach`] before
//! the fleet goes down.

use nsfleet_core::Fleet;
use nsfleet_netlink::rtnl::{self, RouteDst};
use nsfleet_netlink::{Batch, NlSocket};
use std::collections::HashSet;
use std::net::IpAddr;

/// A netlink socket in each of some nodes.
pub struct Reach {
    socks: Vec<(String, NlSocket)>,
}

/// The index of `lo` in every network namespace.
const LOOPBACK_INDEX: i32 = 1;

impl Reach {
    /// A socket in each node of `names`, in that order.
    pub fn open(fleet: &Fleet, names: &[String]) -> anyhow::Result<Reach> {
        let mut socks = Vec::with_capacity(names.len());
        for name in names {
            let sock = fleet.on_node(name, |_| Ok(NlSocket::open()?))?;
            socks.push((name.clone(), sock));
        }
        Ok(Reach { socks })
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.socks.iter().map(|(n, _)| n.as_str())
    }

    /// The addresses on node `i`'s `lo` but the loopback ranges: the addresses a router
    /// is known by.
    pub fn loopbacks(&mut self, i: usize) -> anyhow::Result<Vec<IpAddr>> {
        let sock = &mut self.socks[i].1;
        let mut b = Batch::new();
        rtnl::dump_addrs(&mut b, sock.next_seq());
        let mut out = Vec::new();
        sock.dump(&b, |m| {
            if let Some((LOOPBACK_INDEX, addr, _)) = rtnl::parse_addr(m) {
                if !addr.is_loopback() && !out.contains(&addr) {
                    out.push(addr);
                }
            }
        })?;
        Ok(out)
    }

    /// Node `i`'s unicast routes of the main table, both families.
    pub fn routes(&mut self, i: usize) -> anyhow::Result<Vec<RouteDst>> {
        let sock = &mut self.socks[i].1;
        let mut out = Vec::new();
        for family in [libc::AF_INET, libc::AF_INET6] {
            let mut b = Batch::new();
            rtnl::dump_routes(&mut b, sock.next_seq(), family as u8);
            sock.dump(&b, |m| out.extend(rtnl::parse_route(m)))?;
        }
        Ok(out)
    }
}

/// The addresses of `wanted` that no route of `routes` leads to. A default route leads
/// everywhere and so shows nothing learnt: it does not count; nor does a route out of
/// `lo` (a router's own loopback), nor one whose every next hop has lost its carrier
/// (the kernel keeps it, flagged, until a daemon replaces it: a pulled cable's). The routes are indexed by prefix length, so that a
/// thousand routers' thousand routes each are looked up, not scanned, per address.
pub fn unreached(routes: &[RouteDst], wanted: &[IpAddr]) -> Vec<IpAddr> {
    let mut index: HashSet<(bool, u8, u128)> = HashSet::new();
    let mut lengths: Vec<(bool, u8)> = Vec::new();
    for r in routes
        .iter()
        .filter(|r| r.prefix > 0 && r.oif != Some(LOOPBACK_INDEX) && !r.dead)
    {
        let (v6, bits, width) = bits(r.dst);
        if u32::from(r.prefix) > width {
            continue;
        }
        index.insert((v6, r.prefix, masked(bits, r.prefix, width)));
        if !lengths.contains(&(v6, r.prefix)) {
            lengths.push((v6, r.prefix));
        }
    }
    (wanted.iter())
        .filter(|a| {
            let (v6, bits, width) = bits(**a);
            !(lengths.iter().filter(|(f, _)| *f == v6))
                .any(|(_, p)| index.contains(&(v6, *p, masked(bits, *p, width))))
        })
        .copied()
        .collect()
}

/// An address as (IPv6?, its bits, its width).
fn bits(a: IpAddr) -> (bool, u128, u32) {
    match a {
        IpAddr::V4(a) => (false, u32::from(a) as u128, 32),
        IpAddr::V6(a) => (true, u128::from(a), 128),
    }
}

/// `bits` with all but its first `prefix` of `width` bits cleared.
fn masked(bits: u128, prefix: u8, width: u32) -> u128 {
    let shift = width - u32::from(prefix);
    match shift {
        0 => bits,
        s if s >= 128 => 0,
        s => (bits >> s) << s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(dst: &str, prefix: u8, oif: i32) -> RouteDst {
        RouteDst {
            dst: dst.parse().unwrap(),
            prefix,
            oif: Some(oif),
            gateways: Vec::new(),
            dead: false,
        }
    }

    #[test]
    fn a_loopback_is_reached_by_a_route_that_covers_it() {
        let a: IpAddr = "10.255.0.7".parse().unwrap();
        let b: IpAddr = "10.255.0.8".parse().unwrap();
        let v6: IpAddr = "2001:db8::7".parse().unwrap();
        let routes = [
            route("10.255.0.7", 32, 3),
            route("2001:db8::", 64, 3),
            route("0.0.0.0", 0, 2),
        ];
        assert_eq!(unreached(&routes, &[a, b, v6]), vec![b]);
        // A route out of lo is the router's own address, not a way to another.
        assert_eq!(unreached(&[route("10.255.0.8", 32, 1)], &[b]), vec![b]);
        assert_eq!(
            unreached(&[route("10.255.0.0", 16, 4)], &[a, b]),
            Vec::<IpAddr>::new()
        );
        // Families never cover each other.
        assert_eq!(unreached(&[route("::", 1, 4)], &[a]), vec![a]);
        // A route through a device without carrier leads nowhere.
        let dead = RouteDst {
            dead: true,
            ..route("10.255.0.7", 32, 3)
        };
        assert_eq!(unreached(&[dead], &[a]), vec![a]);
    }
}

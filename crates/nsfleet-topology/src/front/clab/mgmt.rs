//! The management network as containerlab builds it: every node's `eth0` on one switch
//! (containerlab's Docker bridge), the `mgmt` subnets (172.20.20.0/24 and
//! 3fff:172:20:20::/64 by default), the gateway (the first address) on the host's end of
//! a host link, so that the host reaches every node, and a default route to it in every
//! node, as Docker gives a container. Addresses go to nodes in file order from the second
//! address on, after those given by `mgmt-ipv4`/`mgmt-ipv6`.

use super::node::NodeDecl;
use super::{keys, Lab};
use crate::decl::EndDecl;
use crate::error::TopologyError;
use crate::front::yaml::Yaml;
use crate::resolve::plan::Plan;
use crate::IpNet;
use std::net::IpAddr;
use std::ops::Range;

/// containerlab's defaults (core/config.go).
const NETWORK: &str = "clab";
const IPV4: &str = "172.20.20.0/24";
const IPV6: &str = "3fff:172:20:20::/64";
/// Docker's bridge MTU, containerlab's management MTU when the host says nothing else.
const MTU: u32 = 1500;

pub(crate) struct Mgmt {
    /// The network's name, which its switch takes.
    pub network: String,
    /// Where `mgmt` (or the file) is written, for errors about the network as a whole.
    pub at: Range<usize>,
    subnets: Vec<(IpNet, IpAddr)>,
    mtu: u32,
    /// The host's end of the host link (containerlab's host bridge).
    host_iface: String,
}

impl Mgmt {
    pub fn read(
        lab: &mut Lab<'_>,
        y: Option<&Yaml>,
        lab_name: &str,
    ) -> Result<Mgmt, TopologyError> {
        let empty = Yaml {
            value: crate::front::yaml::Value::Null,
            span: 0..0,
        };
        let y = y.unwrap_or(&empty);
        lab.map(
            y,
            "the management network: network, ipv4-subnet, ipv6-subnet, ...",
        )?;
        lab.check_keys(y, keys::MGMT, "mgmt")?;
        let text = |key: &str| y.get(key).filter(|v| !v.is_null());
        let network = match text("network") {
            Some(n) => lab.string(n)?,
            None => NETWORK.to_string(),
        };
        let mut subnets = Vec::new();
        let given =
            ["4", "6"].map(|v| text(&format!("ipv{v}-subnet")).or(text(&format!("ipv{v}_subnet"))));
        for (v, (default, subnet)) in ["4", "6"]
            .into_iter()
            .zip([IPV4, IPV6].into_iter().zip(given))
        {
            let net = match subnet {
                Some(s) if s.str() != Some("auto") => parse_net(lab, s)?,
                // Both defaults, only when neither is given (as containerlab).
                _ if given
                    .iter()
                    .all(|g| g.is_none_or(|s| s.str() == Some("auto"))) =>
                {
                    default.parse().unwrap()
                }
                _ => continue,
            };
            if net.addr.is_ipv4() != (v == "4") || net.capacity() < 2 {
                let at = subnet.map_or(y.span.clone(), |s| s.span.clone());
                return Err(lab.err(at, format!("ipv{v}-subnet {net}: expected an IPv{v} subnet with room for a gateway and a node")));
            }
            let gw = match text(&format!("ipv{v}-gw")) {
                Some(g) => {
                    let a: IpAddr = g
                        .str()
                        .and_then(|s| s.parse().ok())
                        .ok_or_else(|| lab.err(g.span.clone(), "expected an address"))?;
                    if !is_host(&net, a) {
                        return Err(lab.err(g.span.clone(), format!("gateway {a} is not in {net}")));
                    }
                    a
                }
                None => net.host(0).addr,
            };
            subnets.push((net, gw));
        }
        let mtu = match text("mtu") {
            Some(m) => match m.int() {
                Some(v @ 68..=65535) => v as u32,
                _ => return Err(lab.err(m.span.clone(), "expected an MTU from 68 to 65535")),
            },
            None => MTU,
        };
        let host_iface = match text("bridge") {
            Some(b) => lab.string(b)?,
            None => format!("clab-{:08x}", fnv(lab_name)),
        };
        crate::check_ifname(&host_iface)
            .map_err(|m| lab.err(text("bridge").map_or(y.span.clone(), |b| b.span.clone()), m))?;
        Ok(Mgmt {
            network,
            at: y.span.clone(),
            subnets,
            mtu,
            host_iface,
        })
    }

    /// The host's end of the network's host link.
    pub fn host_iface(&self) -> &str {
        &self.host_iface
    }

    /// The switch, its host link, every managed node's `eth0` and default routes.
    pub fn wire(
        &self,
        lab: &Lab<'_>,
        nodes: &[&NodeDecl],
        plan: &mut Plan,
    ) -> Result<(), TopologyError> {
        // Without a `mgmt` key the network is containerlab's default, written nowhere:
        // what the kernel or the host refuses of it has no place in the file.
        let at = if self.at.is_empty() {
            crate::Place::default()
        } else {
            lab.cx.place(self.at.clone())
        };
        let gateways: Vec<IpNet> = self
            .subnets
            .iter()
            .map(|(net, gw)| IpNet {
                addr: *gw,
                prefix: net.prefix,
            })
            .collect();
        let host_end = EndDecl {
            node: self.network.clone(),
            iface: Some("host".into()),
            mtu: Some(self.mtu),
            ..EndDecl::default()
        };
        (plan.add_host_link(host_end, self.host_iface.clone(), gateways, at, true))
            .map_err(|m| lab.err(self.at.clone(), m))?;
        let (taken, given) = self.given(lab, nodes)?;
        let mut next: Vec<u64> = vec![0; self.subnets.len()];
        for (n, mine) in nodes.iter().zip(given) {
            let mut addrs = Vec::new();
            for (k, (net, _)) in self.subnets.iter().enumerate() {
                if let Some(a) = mine.iter().find(|a| a.addr.is_ipv6() == net.addr.is_ipv6()) {
                    addrs.push(*a);
                    continue;
                }
                let a = loop {
                    if next[k] >= net.capacity() {
                        return Err(lab.err(
                            self.at.clone(),
                            format!(
                                "management subnet {net} has no address left for node {} (mgmt.ipv{}-subnet: give a larger one)",
                                n.name,
                                if net.addr.is_ipv4() { 4 } else { 6 }
                            ),
                        ));
                    }
                    let a = net.host(next[k]);
                    next[k] += 1;
                    if !taken.contains(&a.addr) {
                        break a;
                    }
                };
                addrs.push(a);
            }
            let end = EndDecl {
                node: n.name.clone(),
                iface: Some("eth0".into()),
                addrs,
                mtu: Some(self.mtu),
                ..EndDecl::default()
            };
            let port = EndDecl {
                node: self.network.clone(),
                mtu: Some(self.mtu),
                ..EndDecl::default()
            };
            let at = lab.cx.place(n.at.clone());
            plan.add_link(end, port, at)
                .map_err(|m| lab.err(n.at.clone(), m))?;
            for (_, gw) in &self.subnets {
                let any = IpNet {
                    addr: if gw.is_ipv4() {
                        "0.0.0.0".parse().unwrap()
                    } else {
                        "::".parse().unwrap()
                    },
                    prefix: 0,
                };
                plan.add_route(&n.name, any, Some(*gw), Some("eth0"), at)
                    .map_err(|m| lab.err(n.at.clone(), m))?;
            }
        }
        Ok(())
    }

    /// The addresses the file gives nodes (`mgmt-ipv4`, `mgmt-ipv6`), per node, and every
    /// address taken so far (the gateways' too): they come first, so that the others go
    /// around them, as containerlab schedules nodes with static addresses first.
    fn given(
        &self,
        lab: &Lab<'_>,
        nodes: &[&NodeDecl],
    ) -> Result<(Vec<IpAddr>, Vec<Vec<IpNet>>), TopologyError> {
        let mut taken: Vec<IpAddr> = self.subnets.iter().map(|(_, gw)| *gw).collect();
        let mut given = Vec::new();
        for n in nodes {
            let mut mine = Vec::new();
            for (key, v6) in [("mgmt-ipv4", false), ("mgmt-ipv6", true)] {
                let Some(y) = n.first(key) else { continue };
                let version = if v6 { 6 } else { 4 };
                let bad = || {
                    lab.err(
                        y.span.clone(),
                        format!("{key}: expected an IPv{version} address"),
                    )
                };
                let a: IpAddr =
                    (y.str().and_then(|s| s.split('/').next()?.parse().ok())).ok_or_else(bad)?;
                let Some((net, _)) = self
                    .subnets
                    .iter()
                    .find(|(net, _)| net.addr.is_ipv6() == v6)
                else {
                    let m = format!("{key} {a}: the management network has no IPv{version} subnet");
                    return Err(lab.err(y.span.clone(), m));
                };
                if !is_host(net, a) || taken.contains(&a) {
                    let m = format!("{key} {a}: expected an address in {net} that is neither the gateway nor another node's");
                    return Err(lab.err(y.span.clone(), m));
                }
                taken.push(a);
                mine.push(IpNet {
                    addr: a,
                    prefix: net.prefix,
                });
            }
            given.push(mine);
        }
        Ok((taken, given))
    }
}

/// Whether `a` is one of `net`'s host addresses (not its network or broadcast address).
fn is_host(net: &IpNet, a: IpAddr) -> bool {
    let bits = |ip: IpAddr| match ip {
        IpAddr::V4(x) => u32::from(x) as u128,
        IpAddr::V6(x) => u128::from(x),
    };
    let first = bits(net.host(0).addr);
    let last = first + net.capacity() as u128 - 1;
    a.is_ipv4() == net.addr.is_ipv4() && (first..=last).contains(&bits(a))
}

fn parse_net(lab: &Lab<'_>, y: &Yaml) -> Result<IpNet, TopologyError> {
    let s = lab.string(y)?;
    crate::values::network_prefix(&s).map_err(|m| lab.err(y.span.clone(), m))
}

/// A short stable hash of the lab's name, for the host interface's name (as Docker's
/// `br-<id>`): two labs of different names get different interfaces.
fn fnv(s: &str) -> u32 {
    s.bytes().fold(0x811c9dc5u32, |h, b| {
        (h ^ b as u32).wrapping_mul(0x01000193)
    })
}

//! One machine's part of a fleet spread over several machines: the nodes placed on it, with
//! every link to a node elsewhere made a VXLAN tunnel to that node's machine.
//!
//! Every machine resolves the same file and keeps its own nodes, so a node keeps its name,
//! its interfaces' names and indexes, its addresses and its routes wherever it lands; only
//! what carries a cut link's frames changes: a veth pair's end becomes a VXLAN device of the
//! same name, made in the machine's own namespace (its packets leave by the machine's
//! routes, as containerlab's `vxlan` links do) and moved into the node. A switch's port
//! stays a port of its bridge. The pair's two ends get one network identifier, chosen by
//! the caller, which also says what MTU the tunnel leaves (the underlay's, less VXLAN's
//! 50 bytes of headers).
//!
//! Pure, as the rest of this crate: which machine a node is on, and the tunnels' numbers,
//! come from the caller (nsfleet-place decides the first).

use crate::link::{HostUnderlay, Link, VxlanEnd};
use crate::{Names, NodeGroup, NodeWiring, Topology};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

/// Bytes a VXLAN tunnel adds to each frame over IPv4: outer IP (20), UDP (8), VXLAN (8),
/// inner Ethernet (14).
pub const VXLAN_OVERHEAD: u32 = 50;

/// A link between two nodes, by its two ends (node, interface name), the first end's node
/// first in the file's order.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeLink {
    pub a: (String, String),
    pub b: (String, String),
}

/// How one cut link crosses: its network identifier, each end's machine address, the
/// tunnel's UDP port and the MTU its ends get.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Crossing {
    pub vni: u32,
    pub port: u16,
    pub mtu: u32,
}

/// The cut links a part is made with: each link's crossing, and its `a` and `b` ends'
/// machine addresses.
pub type Cut = HashMap<NodeLink, (Crossing, IpAddr, IpAddr)>;

/// Every link between two nodes of the fleet (veth pairs, a switch's ports among them):
/// what a placement may cut. Links to the host, VXLAN and dummy devices, and a switch's
/// macvlans are not among them: they go where their node goes (macvlans: see
/// [`glued`](Topology::glued)).
impl Topology {
    pub fn node_links(&self) -> Vec<NodeLink> {
        let mut links = Vec::new();
        for n in self.nodes() {
            for i in &n.wiring.ifaces {
                if let Link::Veth(p) = &i.link {
                    links.push(NodeLink {
                        a: (n.name.clone(), i.name.clone()),
                        b: (p.node.clone(), p.name.clone()),
                    });
                }
            }
        }
        links
    }

    /// Nodes that must share a machine with another, as (node, the node it goes with): an
    /// Open vSwitch switch with the node whose namespace holds it, a node with the switch
    /// that makes its macvlan (a macvlan cannot leave its lower device's machine).
    pub fn glued(&self) -> Vec<(String, String)> {
        let mut glued = Vec::new();
        for n in self.nodes() {
            if let Some(host) = &n.config.netns_of {
                glued.push((n.name.clone(), host.clone()));
            }
            for m in &n.wiring.macvlans {
                glued.push((m.peer.node.clone(), n.name.clone()));
            }
        }
        glued
    }

    /// The part of the fleet on one machine: the nodes `here` keeps, each link in `cut`
    /// (one end here, the other on the machine at the address `cut` gives) a VXLAN tunnel
    /// from `local`. Nodes keep their order, names, numbers (`{i}`) and configurations.
    pub fn part(&self, here: impl Fn(&str) -> bool, local: IpAddr, cut: &Cut) -> Topology {
        // Each cut end here: (node, iface) -> (crossing, far machine's address).
        let mut ends = HashMap::<(&str, &str), (&Crossing, IpAddr)>::new();
        for (link, (crossing, a_at, b_at)) in cut {
            ends.insert((&link.a.0, &link.a.1), (crossing, *b_at));
            ends.insert((&link.b.0, &link.b.1), (crossing, *a_at));
        }
        let narrow = self.narrowed_segments(&ends);
        let mut groups = Vec::new();
        let mut wiring = Vec::new();
        for (g, range) in self.groups.iter().zip(self.group_ranges()) {
            let kept: Vec<(String, u64, usize)> = (g.names.numbered().zip(range))
                .filter(|((name, _), _)| here(name))
                .map(|((name, number), i)| (name, number, i))
                .collect();
            for run in runs(&kept) {
                groups.push(NodeGroup {
                    names: names_of(&g.names, run),
                    config: g.config.clone(),
                });
            }
            if self.wiring.is_empty() {
                continue;
            }
            for (name, _, i) in &kept {
                wiring.push(tunnelled(&self.wiring[*i], name, local, &ends, &narrow));
            }
        }
        Topology {
            name: self.name.clone(),
            groups,
            wiring,
        }
    }

    /// A switch with a port that crosses machines is one segment with the tunnel: every
    /// interface on it (its ports, and the ends linked to them) gets the tunnel's MTU, as
    /// a bridge drops what is larger than its smallest port takes, and OSPF will not
    /// become adjacent across MTUs that differ. (node, iface) -> that MTU.
    fn narrowed_segments(
        &self,
        ends: &HashMap<(&str, &str), (&Crossing, IpAddr)>,
    ) -> HashMap<(String, String), u32> {
        let switches: HashMap<String, u32> = (self.nodes())
            .filter(|n| n.config.switch)
            .filter_map(|n| {
                let mtus = (n.wiring.ifaces.iter())
                    .filter_map(|i| ends.get(&(n.name.as_str(), i.name.as_str())))
                    .map(|(c, _)| c.mtu);
                mtus.min().map(|m| (n.name.clone(), m))
            })
            .collect();
        let mut narrow = HashMap::new();
        if switches.is_empty() {
            return narrow;
        }
        for NodeLink { a, b } in self.node_links() {
            for (end, other) in [(&a, &b), (&b, &a)] {
                if let Some(&m) = switches.get(&other.0) {
                    narrow.insert(end.clone(), m);
                    narrow.insert(other.clone(), m);
                }
            }
        }
        narrow
    }

    /// Each group's nodes' positions in `nodes()` order.
    fn group_ranges(&self) -> Vec<std::ops::Range<usize>> {
        let mut at = 0;
        (self.groups.iter())
            .map(|g| {
                let n = g.names.len() as usize;
                at += n;
                at - n..at
            })
            .collect()
    }
}

/// A node's wiring with each of its cut ends a VXLAN device (the same name, index,
/// addresses and bridge); the node's own `Arc` when none of its links is cut.
fn tunnelled(
    wiring: &Arc<NodeWiring>,
    node: &str,
    local: IpAddr,
    ends: &HashMap<(&str, &str), (&Crossing, IpAddr)>,
    narrow: &HashMap<(String, String), u32>,
) -> Arc<NodeWiring> {
    let narrowed = |iface: &str| {
        // No allocation per interface in the common case: no switch spans machines.
        (!narrow.is_empty())
            .then(|| narrow.get(&(node.to_string(), iface.to_string())).copied())
            .flatten()
    };
    if !(wiring.ifaces.iter())
        .any(|i| ends.contains_key(&(node, i.name.as_str())) || narrowed(&i.name).is_some())
    {
        return wiring.clone();
    }
    let mut w = (**wiring).clone();
    for i in &mut w.ifaces {
        if let Some(m) = narrowed(&i.name) {
            i.mtu = Some(i.mtu.map_or(m, |x| x.min(m)));
        }
        let Some((crossing, remote)) = ends.get(&(node, i.name.as_str())) else {
            continue;
        };
        i.link = Link::Vxlan(VxlanEnd {
            vni: crossing.vni,
            remote: *remote,
            local: Some(local),
            port: crossing.port,
            underlay: None,
            through_host: Some(HostUnderlay::default()),
        });
        i.mtu = Some(i.mtu.map_or(crossing.mtu, |m| m.min(crossing.mtu)));
        // A veth end's impairment was applied on its own side: a tunnel end keeps it.
    }
    Arc::new(w)
}

/// Runs of consecutive numbers among the kept nodes of one group (all of a written node).
fn runs(kept: &[(String, u64, usize)]) -> Vec<&[(String, u64, usize)]> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=kept.len() {
        if i == kept.len() || kept[i].1 != kept[i - 1].1 + 1 {
            if i > start {
                out.push(&kept[start..i]);
            }
            start = i;
        }
    }
    out
}

/// The names of one run of a group's kept nodes: the written name, or the template over
/// the run's numbers (so that `{i}` stays each node's own).
fn names_of(names: &Names, run: &[(String, u64, usize)]) -> Names {
    match names {
        Names::One(n) => Names::One(n.clone()),
        Names::Generated { template, .. } => Names::Generated {
            template: template.clone(),
            start: run[0].1,
            count: run.len() as u64,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse, KernelCaps};

    const LINE: &str = r#"
[fleet]
name = "split"

[[node]]
name = "r{i}"
count = 4
commands = ["echo {i}"]

[[switch]]
name = "lan"

[[link]]
a = { at = "r1:eth0", addrs = ["10.0.0.1/30"] }
b = { at = "r2:eth0", addrs = ["10.0.0.2/30"] }
mtu = 9000

[[link]]
a = { at = "r2:eth1", addrs = ["10.0.0.5/30"] }
b = { at = "r3:eth0", addrs = ["10.0.0.6/30"] }

[[link]]
a = "r3:eth1"
b = "lan"

[[link]]
a = "r4:eth0"
b = "lan"
"#;

    fn crossing(vni: u32) -> Crossing {
        Crossing {
            vni,
            port: 4789,
            mtu: 1450,
        }
    }

    #[test]
    fn a_cut_link_is_a_tunnel_at_each_end() {
        let t = parse("f.toml", LINE, &KernelCaps::assumed()).unwrap();
        let links = t.node_links();
        assert_eq!(links.len(), 4, "{links:?}");
        let (m1, m2): (IpAddr, IpAddr) =
            ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        let on_m1 = |n: &str| n == "r1" || n == "r2";
        // r1-r2 stays on m1; r2-r3 is cut; r3, r4 and lan are on m2.
        let cut: HashMap<_, _> = (links.iter())
            .filter(|l| on_m1(&l.a.0) != on_m1(&l.b.0))
            .map(|l| (l.clone(), (crossing(7), m1, m2)))
            .collect();
        assert_eq!(cut.len(), 1);
        let p1 = t.part(on_m1, m1, &cut);
        let names: Vec<_> = p1.nodes().map(|n| (n.name, n.number)).collect();
        assert_eq!(names, [("r1".to_string(), 1), ("r2".to_string(), 2)]);
        let r2 = p1.nodes().nth(1).unwrap();
        let eth1 = r2.wiring.ifaces.iter().find(|i| i.name == "eth1").unwrap();
        let v = eth1.link.as_vxlan().expect("r2:eth1 is a tunnel");
        assert_eq!((v.vni, v.remote, v.local), (7, m2, Some(m1)));
        assert_eq!(eth1.mtu, Some(1450));
        assert_eq!(eth1.addrs[0].to_string(), "10.0.0.5/30");
        let eth0 = r2.wiring.ifaces.iter().find(|i| i.name == "eth0").unwrap();
        assert!(eth0.link.as_vxlan().is_none() && eth0.mtu == Some(9000));

        let p2 = t.part(|n| !on_m1(n), m2, &cut);
        let names: Vec<_> = p2.nodes().map(|n| (n.name, n.number)).collect();
        assert_eq!(names.len(), 3, "{names:?}");
        assert!(names.contains(&("r3".to_string(), 3)) && names.contains(&("r4".to_string(), 4)));
        let r3 = p2.nodes().find(|n| n.name == "r3").unwrap();
        let v = r3.wiring.ifaces[0]
            .link
            .as_vxlan()
            .expect("r3:eth0 is a tunnel");
        assert_eq!((v.remote, v.local), (m1, Some(m2)));
    }

    #[test]
    fn a_switch_with_a_port_across_machines_is_one_mtu() {
        let t = parse("f.toml", LINE, &KernelCaps::assumed()).unwrap();
        let m1: IpAddr = "192.0.2.1".parse().unwrap();
        let m2: IpAddr = "192.0.2.2".parse().unwrap();
        // lan and r3 on m1, r4 (and r1, r2) on m2: r4's port on lan crosses.
        let on_m1 = |n: &str| n == "lan" || n == "r3";
        let cut: HashMap<_, _> = (t.node_links().into_iter())
            .filter(|l| on_m1(&l.a.0) != on_m1(&l.b.0))
            .map(|l| (l, (crossing(9), m1, m2)))
            .collect();
        let p = t.part(on_m1, m1, &cut);
        for n in p.nodes() {
            for i in &n.wiring.ifaces {
                let on_lan = n.name == "lan" || (n.name == "r3" && i.name == "eth1");
                if on_lan {
                    assert_eq!(i.mtu, Some(1450), "{}:{}", n.name, i.name);
                }
            }
        }
    }

    #[test]
    fn a_part_keeps_each_generated_node_its_number() {
        let t = parse("f.toml", LINE, &KernelCaps::assumed()).unwrap();
        let p = t.part(
            |n| n == "r2" || n == "r4",
            "192.0.2.1".parse().unwrap(),
            &HashMap::new(),
        );
        let names: Vec<_> = p.nodes().map(|n| (n.name, n.number)).collect();
        assert_eq!(names, [("r2".to_string(), 2), ("r4".to_string(), 4)]);
        assert_eq!(p.wiring.len(), 2);
    }
}

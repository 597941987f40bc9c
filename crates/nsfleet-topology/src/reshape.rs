//! How a running fleet becomes another topology (`nsfleet apply`): the nodes to add, the
//! nodes to remove, and the new shape of each kept node that changes. Pure.
//!
//! A topology numbers its interfaces afresh from its own order, but a running node's
//! interfaces already have indexes, and its addresses and routes name them by index. So
//! the new topology is first *aligned* to the running fleet: an interface that stays keeps
//! the index it has in the kernel, and a new interface on a running node gets an index
//! that node does not use. Only then are shapes compared, so that what did not change
//! compares equal.

use crate::{Iface, Link, NodeSpec, NodeWiring};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// What `apply` does to the fleet, node by node.
#[derive(Debug, Default)]
pub struct Reshape {
    /// Nodes the fleet does not have yet, in the file's order.
    pub add: Vec<NodeSpec>,
    /// Running nodes whose configuration or wiring changes: their new shape.
    pub change: Vec<NodeSpec>,
    /// Running nodes the file no longer has.
    pub remove: Vec<String>,
    /// Running nodes the file keeps as they are: their new specs differ at most in where
    /// they are written, which the fleet takes without touching the kernel, so that a
    /// later error about them names the file as it is now.
    pub keep: Vec<NodeSpec>,
}

impl Reshape {
    pub fn is_empty(&self) -> bool {
        self.add.is_empty() && self.change.is_empty() && self.remove.is_empty()
    }
}

/// Whether two ends are the same link as the kernel sees it: what makes the device and how
/// (kind, far end, MTU, MAC, bridge, who sums its checksums). Addresses and impairments
/// are set on a device that stays; its place is where it was written, which an edit moves.
pub fn same_link(a: &Iface, b: &Iface) -> bool {
    (&a.name, a.index, a.mtu, a.mac, a.bridge, &a.link)
        == (&b.name, b.index, b.mtu, b.mac, b.bridge, &b.link)
        && a.software_checksums == b.software_checksums
}

/// Splits `new` (the file's nodes) against `running` into what to add, change and remove,
/// after aligning `new`'s interface indexes to the running ones. Errors name what a live
/// fleet cannot change.
pub fn reshape(running: &[NodeSpec], mut new: Vec<NodeSpec>) -> Result<Reshape, String> {
    let live: Live = (running.iter())
        .map(|n| (n.name.as_str(), Running::of(n)))
        .collect();
    let moved = align(&live, &mut new)?;
    renumber_peers(&mut new, &moved);
    let moved = reindex_remade(&live, &mut new);
    renumber_peers(&mut new, &moved);
    let wanted: BTreeSet<&str> = new.iter().map(|n| n.name.as_str()).collect();
    let remove = (running.iter())
        .filter(|n| !wanted.contains(n.name.as_str()))
        .map(|n| n.name.clone())
        .collect();
    let mut out = Reshape {
        remove,
        ..Default::default()
    };
    for n in new {
        match live.get(n.name.as_str()).map(|r| r.spec) {
            None => out.add.push(n),
            Some(was) if same_shape(was, &n) => out.keep.push(n),
            Some(was) if kind(&was.config) != kind(&n.config) => {
                return Err(format!(
                    "{} would turn from {} into {}: remove it in one apply and add it in the next",
                    n.name,
                    kind(&was.config),
                    kind(&n.config)
                ))
            }
            Some(was) if without_tso(&was.config) != without_tso(&n.config) => {
                return Err(format!(
                    "ovs_tso would change from {} to {}: the fleet's Open vSwitch reads it once, at its start; take the fleet down and up with the new file",
                    !without_tso(&was.config),
                    !without_tso(&n.config)
                ))
            }
            Some(_) => out.change.push(n),
        }
    }
    Ok(out)
}

/// Whether a node is the fleet's Open vSwitch, started without TSO support.
fn without_tso(c: &crate::NodeConfig) -> bool {
    c.ovs_hub.as_ref().is_some_and(|h| h.without_tso)
}

/// What a node is, as far as its devices go: a bridge and an Open vSwitch switch hold
/// their ports differently (see `kind/ovs.rs`).
fn kind(c: &crate::NodeConfig) -> &'static str {
    match (c.switch, c.ovs.is_some()) {
        (true, true) => "an Open vSwitch switch",
        (true, false) => "a switch",
        (false, _) => "a node",
    }
}

/// Equal but for where things were written (which neither compares).
fn same_shape(a: &NodeSpec, b: &NodeSpec) -> bool {
    a.config == b.config && a.wiring == b.wiring
}

/// A running node, with its interfaces by name: every interface of a fleet is looked up
/// once or twice, and a switch may have 50,000 of them.
struct Running<'a> {
    spec: &'a NodeSpec,
    ifaces: HashMap<&'a str, &'a Iface>,
}

impl<'a> Running<'a> {
    fn of(spec: &'a NodeSpec) -> Self {
        let ifaces = (spec.wiring.ifaces.iter())
            .map(|i| (i.name.as_str(), i))
            .collect();
        Running { spec, ifaces }
    }

    fn iface(&self, name: &str) -> Option<&'a Iface> {
        self.ifaces.get(name).copied()
    }
}

/// The running nodes, by name.
type Live<'a> = HashMap<&'a str, Running<'a>>;

/// (node, interface) -> the index it gets, for every interface whose index changed.
type Moved = HashMap<(String, String), i32>;

/// Gives each kept node's interfaces their running indexes, and new ones free
/// indexes; rewrites the node's routes to match. Returns what moved, for the far ends.
fn align(live: &Live<'_>, new: &mut [NodeSpec]) -> Result<Moved, String> {
    let mut moved = Moved::new();
    for n in new.iter_mut() {
        let Some(run) = live.get(n.name.as_str()) else {
            continue;
        };
        let was = run.spec;
        if in_place(run, &n.wiring) {
            continue;
        }
        let w = Arc::make_mut(&mut n.wiring);
        let mut used: BTreeSet<i32> = was.wiring.ifaces.iter().map(|i| i.index).collect();
        let base = floor(&w.ifaces);
        let mut renumber = HashMap::new();
        for i in &mut w.ifaces {
            let made_elsewhere = |i: &Iface| i.link == Link::FarEnd;
            let index = match run.iface(&i.name) {
                // An end that stays on the same side of its pair keeps its index; one
                // that changes sides takes a new one of the other parity (see `plan`).
                Some(old) if made_elsewhere(old) == made_elsewhere(i) => old.index,
                _ => free_index(&mut used, made_elsewhere(i), base),
            };
            if index != i.index {
                renumber.insert(i.index, index);
                moved.insert((n.name.clone(), i.name.clone()), index);
                i.index = index;
            }
        }
        for r in &mut w.routes {
            if let Some(dev) = r.dev.as_mut() {
                *dev = renumber.get(dev).copied().unwrap_or(*dev);
            }
        }
        for i in &mut w.ifaces {
            if let Link::Vxlan(v) = &mut i.link {
                if let Some(u) = v.underlay.as_mut() {
                    *u = renumber.get(u).copied().unwrap_or(*u);
                }
            }
        }
    }
    Ok(moved)
}

/// Whether every interface of `new` is where it runs already (same index): the
/// common case, which must not copy a wiring per node of a large fleet.
fn in_place(running: &Running<'_>, new: &NodeWiring) -> bool {
    (new.ifaces.iter()).all(|i| (running.iface(&i.name)).is_some_and(|o| o.index == i.index))
}

/// Gives a fresh index to each interface of a running node that is made again although
/// nothing of its own says so, and returns them as moved: the far end of a pair whose
/// maker's end is new or changes (an end made from the other side names nothing of its
/// maker), and a VXLAN device whose underlay is made again (the kernel deletes it with
/// its underlay). A fresh index makes the interface differ, so that its node is changed
/// and the interface, with its addresses and routes, made again.
fn reindex_remade(live: &Live<'_>, new: &mut [NodeSpec]) -> Moved {
    let remade_on = |node: &str, i: &Iface| {
        live.get(node)
            .is_none_or(|run| !run.iface(&i.name).is_some_and(|o| same_link(o, i)))
    };
    let at: HashMap<&str, usize> = (new.iter().enumerate())
        .map(|(k, n)| (n.name.as_str(), k))
        .collect();
    let mut redo: Vec<(usize, String)> = Vec::new();
    for n in new.iter() {
        let vxlans: Vec<&Iface> = (n.wiring.ifaces.iter())
            .filter(|v| v.link.as_vxlan().is_some())
            .collect();
        for i in n.wiring.ifaces.iter().filter(|i| remade_on(&n.name, i)) {
            if let Link::Veth(p) = &i.link {
                let far_at = at.get(p.node.as_str());
                let far = far_at.and_then(|k| new[*k].wiring.iface(&p.name));
                if far.is_some_and(|f| !remade_on(&p.node, f)) {
                    redo.push((*far_at.expect("found"), p.name.clone()));
                }
            }
            let over = |v: &&&Iface| v.link.as_vxlan().and_then(|x| x.underlay) == Some(i.index);
            for v in vxlans
                .iter()
                .filter(over)
                .filter(|v| !remade_on(&n.name, v))
            {
                redo.push((at[n.name.as_str()], v.name.clone()));
            }
        }
    }
    let mut moved = Moved::new();
    for (k, iface) in redo {
        let was = live.get(new[k].name.as_str()).expect("a running node").spec;
        let index = reindex(&mut new[k], &was.wiring, &iface);
        moved.insert((new[k].name.clone(), iface), index);
    }
    moved
}

/// Gives interface `name` of `n` an index neither its running wiring nor its new one
/// uses, and makes its routes and VXLAN underlays follow; returns the index.
fn reindex(n: &mut NodeSpec, running: &NodeWiring, name: &str) -> i32 {
    let w = Arc::make_mut(&mut n.wiring);
    let mut used: BTreeSet<i32> = (running.ifaces.iter().chain(&w.ifaces))
        .map(|i| i.index)
        .collect();
    let i = (w.ifaces.iter_mut())
        .find(|i| i.name == name)
        .expect("an interface of n");
    let (from, to) = (
        i.index,
        free_index(&mut used, i.link == Link::FarEnd, i.index),
    );
    i.index = to;
    for r in &mut w.routes {
        if r.dev == Some(from) {
            r.dev = Some(to);
        }
    }
    for i in &mut w.ifaces {
        if let Link::Vxlan(v) = &mut i.link {
            if v.underlay == Some(from) {
                v.underlay = Some(to);
            }
        }
    }
    to
}

/// The lowest index above those in use, even for ends a node makes and odd for ends made
/// from the other side (see `plan`).
fn free_index(used: &mut BTreeSet<i32>, made_elsewhere: bool, floor: i32) -> i32 {
    let mut k = used.last().map_or(floor, |m| (m + 1).max(floor));
    if (k % 2 == 1) != made_elsewhere {
        k += 1;
    }
    used.insert(k);
    k
}

/// Where a node's new indexes start: its index range's, on an Open vSwitch switch (whose
/// ports share a namespace with the other switches', each in a range of its own, see
/// `kind/ovs.rs`); the plan's base elsewhere.
fn floor(ifaces: &[Iface]) -> i32 {
    (ifaces.first())
        .and_then(|i| crate::kind::ovs::range_of(i.index))
        .unwrap_or(crate::resolve::plan::IFACE_BASE)
}

/// The far ends' indexes, as the nodes that make the pairs know them.
fn renumber_peers(new: &mut [NodeSpec], moved: &Moved) {
    if moved.is_empty() {
        return;
    }
    let moved_to = |p: &crate::Peer| moved.get(&(p.node.clone(), p.name.clone())).copied();
    for n in new.iter_mut() {
        let needs = |i: &Iface| i.link.as_veth().is_some_and(|p| moved_to(p).is_some());
        let macvlans = n
            .wiring
            .macvlans
            .iter()
            .any(|m| moved_to(&m.peer).is_some());
        if !macvlans && !n.wiring.ifaces.iter().any(needs) {
            continue;
        }
        let w = Arc::make_mut(&mut n.wiring);
        let veths = (w.ifaces.iter_mut()).filter_map(|i| match &mut i.link {
            Link::Veth(p) => Some(p),
            _ => None,
        });
        for p in veths.chain(w.macvlans.iter_mut().map(|m| &mut m.peer)) {
            if let Some(k) = moved_to(p) {
                p.index = k;
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The nodes of a topology given as text.
    pub(crate) fn nodes(text: &str) -> Vec<NodeSpec> {
        let t = crate::read("t.toml", text)
            .unwrap()
            .check(&crate::KernelCaps::assumed())
            .unwrap();
        t.nodes().collect()
    }

    const OLD: &str = "[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[node]]\nname = \"gone\"\n[[link]]\na = \"a:eth0\"\nb = \"gone:eth0\"\n[[link]]\na = { at = \"a:eth1\", addrs = [\"10.0.0.1/30\"] }\nb = { at = \"b:eth0\", addrs = [\"10.0.0.2/30\"] }\n";

    /// Two OVS switches (one namespace, the fleet's Open vSwitch node's) and `hosts`
    /// hosts on `s1`.
    fn two_ovs(hosts: usize) -> String {
        let mut t = String::from("[fleet]\nname = \"x\"\n[[switch]]\nname = \"s1\"\nkind = \"ovs\"\n[[switch]]\nname = \"s2\"\nkind = \"ovs\"\n[[link]]\na = \"s1\"\nb = \"s2\"\n");
        for h in 1..=hosts {
            t += &format!("[[node]]\nname = \"h{h}\"\n[[link]]\na = \"h{h}:eth0\"\nb = \"s1\"\n");
        }
        t
    }

    #[test]
    fn ovs_switches_share_a_namespace_each_in_an_index_range_of_its_own() {
        let running = nodes(&two_ovs(2));
        let hub = running.iter().find(|n| n.name == "openvswitch").unwrap();
        assert!(hub.config.ovs_hub.is_some() && hub.wiring.ifaces.is_empty());
        let ranges = |specs: &[NodeSpec], name: &str| -> Vec<i32> {
            let n = specs.iter().find(|n| n.name == name).unwrap();
            assert_eq!(n.config.netns_of.as_deref(), Some("openvswitch"));
            (n.wiring.ifaces.iter())
                .map(|i| crate::kind::ovs::range_of(i.index).unwrap())
                .collect()
        };
        let (r1, r2) = (ranges(&running, "s1"), ranges(&running, "s2"));
        assert!(r1.iter().all(|r| *r == r1[0]) && r2.iter().all(|r| *r == r2[0]));
        assert_ne!(r1[0], r2[0], "one namespace: no index twice");
        // A port added to s1 by `apply` stays in s1's range, clear of s2's.
        let r = reshape(&running, nodes(&two_ovs(3))).unwrap();
        let s1 = r.change.iter().find(|n| n.name == "s1").unwrap();
        let added = s1.wiring.iface("s1-p4").unwrap().index;
        assert_eq!(crate::kind::ovs::range_of(added), Some(r1[0]));
        assert!(!r.change.iter().any(|n| n.name == "s2"), "s2 is untouched");
    }

    #[test]
    fn without_tso_the_hosts_on_ovs_sum_their_own_and_a_live_fleet_keeps_its_choice() {
        let lean = two_ovs(2).replace("name = \"x\"\n", "name = \"x\"\novs_tso = false\n");
        let running = nodes(&lean);
        let hub = running.iter().find(|n| n.name == "openvswitch").unwrap();
        assert!(hub.config.ovs_hub.as_ref().unwrap().without_tso);
        let sums = |specs: &[NodeSpec], name: &str| -> Vec<bool> {
            let n = specs.iter().find(|n| n.name == name).unwrap();
            n.wiring
                .ifaces
                .iter()
                .map(|i| i.software_checksums)
                .collect()
        };
        assert_eq!(
            sums(&running, "h1"),
            [true],
            "a host's end on an OVS switch"
        );
        assert!(
            !sums(&running, "s1").contains(&true),
            "the switches' own ends"
        );
        assert_eq!(
            sums(&nodes(&two_ovs(1)), "h1"),
            [false],
            "with TSO, the NIC's"
        );
        // A Linux bridge trunked to an OVS switch sums for the hosts behind it.
        let trunk = format!("{lean}[[switch]]\nname = \"b1\"\n[[link]]\na = \"s2\"\nb = \"b1\"\n");
        assert_eq!(
            sums(&nodes(&trunk), "b1"),
            [true],
            "the bridge's end of the trunk"
        );
        let err = reshape(&running, nodes(&two_ovs(2))).unwrap_err();
        assert!(
            err.contains("ovs_tso would change from false to true"),
            "{err}"
        );
    }

    #[test]
    fn nodes_whose_lines_moved_are_kept_with_their_new_places() {
        let running = nodes(OLD);
        let r = reshape(&running, nodes(&format!("# moved\n\n{OLD}"))).unwrap();
        assert!(r.is_empty(), "nothing to change");
        assert_eq!(r.keep.len(), 3);
        let (was, now) = (&running[0].wiring.ifaces[0], &r.keep[0].wiring.ifaces[0]);
        assert_eq!(was, now, "the same interface");
        assert_eq!(now.at.line, was.at.line + 2, "where the file now writes it");
    }

    #[test]
    fn kept_interfaces_keep_their_indexes_and_new_ones_take_free_ones() {
        let running = nodes(OLD);
        let new = nodes("[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nroutes = [\"10.9.0.0/16 dev eth1\"]\n[[node]]\nname = \"b\"\n[[node]]\nname = \"c\"\n[[link]]\na = { at = \"a:eth1\", addrs = [\"10.0.0.1/30\"] }\nb = { at = \"b:eth0\", addrs = [\"10.0.0.2/30\"] }\n[[link]]\na = \"c:eth0\"\nb = \"a:eth2\"\n");
        let r = reshape(&running, new).unwrap();
        assert_eq!(r.remove, ["gone"]);
        assert_eq!(r.add.len(), 1);
        let a = r.change.iter().find(|n| n.name == "a").unwrap();
        let old_a = running[0].wiring.iface("eth1").unwrap().index;
        let eth1 = a.wiring.iface("eth1").unwrap();
        assert_eq!(eth1.index, old_a, "a kept interface keeps its index");
        assert_eq!(a.wiring.routes[0].dev, Some(old_a), "its routes follow");
        let eth2 = a.wiring.iface("eth2").unwrap();
        let used: Vec<i32> = running[0].wiring.ifaces.iter().map(|i| i.index).collect();
        assert!(
            !used.contains(&eth2.index) && eth2.index % 2 == 1,
            "{eth2:?}"
        );
        // c makes the pair, and knows a's end by its new index.
        let c = &r.add[0].wiring.ifaces[0];
        assert_eq!(c.link.as_veth().unwrap().index, eth2.index);
        assert!(r.change.iter().all(|n| n.name != "b"), "b does not change");
    }

    #[test]
    fn a_pair_made_again_from_its_maker_is_made_again_at_its_far_end() {
        let pair = |mtu: &str| {
            format!("[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\nroutes = [\"10.9.0.0/16 dev eth0\"]\n[[link]]\na = {{ at = \"a:eth0\"{mtu} }}\nb = \"b:eth0\"\n")
        };
        let running = nodes(&pair(""));
        let r = reshape(&running, nodes(&pair(", mtu = 1400"))).unwrap();
        let names: Vec<&str> = r.change.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["a", "b"], "b's end goes with the pair");
        let (a, b) = (&r.change[0].wiring, &r.change[1].wiring);
        let b_eth0 = b.iface("eth0").unwrap();
        assert_ne!(b_eth0.index, running[1].wiring.iface("eth0").unwrap().index);
        assert_eq!(b_eth0.index % 2, 1, "made from the other side: odd");
        assert_eq!(b.routes[0].dev, Some(b_eth0.index), "b's route follows");
        let peer = a.iface("eth0").unwrap().link.as_veth().unwrap();
        assert_eq!(peer.index, b_eth0.index, "a makes it with b's new index");
    }

    #[test]
    fn the_same_file_changes_nothing() {
        let r = reshape(&nodes(OLD), nodes(OLD)).unwrap();
        assert!(r.is_empty(), "{r:?}");
    }
}

//! Switches: a switch node's bridge and its ports on it, and how a big switch is spread
//! over shards. Every interface of a switch is a port of its bridge (`br0`); ports are
//! links of the other kinds (a veth end, a VXLAN device), and this file says where each
//! goes.
//!
//! A switch of more than [`PORTS_PER_SHARD`] ports is spread over several namespaces,
//! its shards: the switch's own node (`lan`) takes the first ports, and each further
//! [`PORTS_PER_SHARD`] go to a shard node of their own (`lan.2`, `lan.3`, ...), joined
//! to the others by trunks (veth pairs between their bridges) into one broadcast domain.
//! Why namespaces and not more bridges in one: the kernel's per-namespace tables grow with
//! the devices and peers a namespace has. Each veth port's notification looks its far
//! end's namespace up in the switch namespace's table of peer ids, a linear scan
//! (`__peernet2id`): with every port in one namespace, port k costs O(k), and a fleet's
//! creation O(n²). Sharded, no namespace's tables grow with the fleet. The shards form a
//! binary tree (shard k's trunk goes up to shard (k - 1) / 2): no loop, so no STP, and a
//! frame crosses at most 2·log2(shards) trunks. A switch's macvlans (`macvlan.rs`) are
//! not ports: they stay in the switch's own namespace and never make shards.

/// Ports per shard, trunks apart: the kernel caps a bridge at 1,024 ports (BR_MAX_PORTS),
/// and a shard's bridge also has up to three trunks (one up, two down).
pub const PORTS_PER_SHARD: usize = 1000;

/// A raw loop's ports per bridge, as a user would spread ports over bridges by hand.
pub const PORTS_PER_BRIDGE: usize = PORTS_PER_SHARD;

const BRIDGE_BASE: i32 = 1 << 24;

/// The interface index of bridge `k` (`br{k}`): a switch node has one, [`BRIDGE`]; a raw
/// loop may make more.
pub const fn bridge_index(k: u16) -> i32 {
    BRIDGE_BASE + k as i32
}

/// A switch node's one bridge: (name, interface index).
pub const BRIDGE: (&str, i32) = ("br0", bridge_index(0));

/// The name a switch's `pos`-th port gets when the file names none (counted over the
/// whole switch, all shards).
pub fn port_name(pos: usize) -> String {
    format!("p{}", pos + 1)
}

/// The node name of shard `k` (0-based) of `switch`: its own name for the first.
pub fn shard_name(switch: &str, k: usize) -> String {
    match k {
        0 => switch.to_string(),
        _ => format!("{switch}.{}", k + 1),
    }
}

/// The shard that shard `k` (k > 0) hangs its trunk from.
pub fn parent_shard(k: usize) -> usize {
    (k - 1) / 2
}

/// The trunk's two ends: (on the parent, on shard `k`).
pub fn trunk_names(k: usize) -> (String, String) {
    (format!("br-s{}", k + 1), "br-up".to_string())
}

/// Whether a port may take `name`: `br0`, `br1`, ... are bridges, and `br-...` trunks.
pub fn check_port_name(name: &str) -> Result<(), String> {
    let digits = name.strip_prefix("br").unwrap_or("");
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "interface name {name:?}: br0, br1, ... are the switch's bridges"
        ));
    }
    if name.starts_with("br-") {
        return Err(format!(
            "interface name {name:?}: br-... names are nsfleet's own devices on a switch (the trunks between a big switch's shards, the lower devices of its macvlans and their ports)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::reshape::tests::nodes;

    fn star(count: u64, extra: &str) -> String {
        format!("[fleet]\nname = \"s\"\n{extra}[[generate]]\nkind = \"star\"\ncount = {count}\nswitch = \"sw\"\npool = \"10.9.0.0/16\"\n")
    }

    #[test]
    fn a_big_switch_is_spread_over_shards_in_a_tree_of_trunks() {
        let all = nodes(&star(2500, ""));
        let names: Vec<&str> = all.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names.len(), 2503);
        assert_eq!(
            names[2501..],
            ["sw.2", "sw.3"],
            "shards after the file's nodes"
        );
        let node = |name: &str| all.iter().find(|n| n.name == name).unwrap();
        let ports = |name: &str| node(name).wiring.ifaces.len();
        assert_eq!(
            (ports("sw"), ports("sw.2"), ports("sw.3")),
            (1002, 1001, 501),
            "1,000 ports a shard, the trunks besides"
        );
        // Both shards hang off the first: sw makes each trunk into its shard's br-up.
        for shard in ["sw.2", "sw.3"] {
            let down = format!("br-s{}", &shard[3..]);
            let trunk = node("sw").wiring.iface(&down).unwrap();
            let peer = trunk.link.as_veth().unwrap();
            assert_eq!((peer.node.as_str(), peer.name.as_str()), (shard, "br-up"));
            let up = node(shard).wiring.iface("br-up").unwrap();
            assert_eq!(up.index, peer.index);
            assert_eq!(
                up.bridge,
                Some(0),
                "the trunk is a port of the shard's bridge"
            );
        }
        // Port names run over the whole switch; h1001's far end is made by sw.2.
        let p1001 = node("sw.2").wiring.iface("p1001").unwrap();
        assert_eq!(p1001.link.as_veth().unwrap().node, "h1001");
        assert!(node("h2500").config.switch.eq(&false));
    }

    #[test]
    fn a_shard_is_configured_as_its_switch_is() {
        // A file's own switch floods; a containerlab management network queries, over
        // all its shards.
        assert!(nodes(&star(1001, "")).iter().all(|n| !n.config.querier));
        let hosts: String = (1..=1001)
            .map(|i| format!("    h{i}: {{kind: linux}}\n"))
            .collect();
        let text = format!("name: m\nmgmt: {{network: net, ipv4-subnet: 10.9.0.0/16}}\ntopology:\n  nodes:\n{hosts}");
        let draft =
            crate::front::clab::read_with("t.clab.yml", &text, crate::front::Software::Host);
        let all: Vec<_> = (draft.unwrap().check(&crate::KernelCaps::assumed()).unwrap())
            .nodes()
            .collect();
        let querier = |name: &str| all.iter().find(|n| n.name == name).unwrap().config.querier;
        assert!(querier("net") && querier("net.2") && !querier("h1"));
    }

    #[test]
    fn a_shard_name_taken_by_a_node_is_refused() {
        let err = crate::read("t.toml", &star(1001, "[[node]]\nname = \"sw.2\"\n"))
            .and_then(|d| d.check(&crate::KernelCaps::assumed()))
            .unwrap_err();
        assert!(
            err.message
                .contains("\"sw.2\": a node already has that name"),
            "{err}"
        );
    }

    #[test]
    fn trunk_names_are_refused_as_port_names() {
        assert!(super::check_port_name("br-up").is_err());
        assert!(super::check_port_name("br7").is_err());
        assert!(super::check_port_name("bridge").is_ok());
    }
}

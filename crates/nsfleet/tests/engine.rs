//! The lifecycle core on the real kernel: create, inspect, destroy, reclaim.

mod common;

use common::*;
use nsfleet::core::holders_of;
use nsfleet::subsys::register_defaults;

#[test]
fn two_hundred_nodes_come_up_configured_and_are_reclaimed() {
    let t = fleet(2);
    register_defaults(&t.fleet).unwrap();
    let topo = topo(
        "[fleet]\nname = \"t200\"\n[defaults]\nsysctls = { \"net.ipv4.ip_forward\" = 1 }\n[[node]]\nname = \"n{i}\"\ncount = 200\n",
    );
    let report = t.fleet.create(&topo, &mut |_, _, _| {}).unwrap();
    assert_eq!(report.nodes, 200);
    let nodes = t.fleet.nodes();
    assert_eq!(nodes.len(), 200);
    let mut inodes: Vec<u64> = nodes.iter().map(|n| n.inode()).collect();
    inodes.sort();
    inodes.dedup();
    assert_eq!(inodes.len(), 200, "every node is its own namespace");
    for name in ["n1", "n100", "n200"] {
        let n = nodes.get(name).unwrap();
        assert!(in_node(n, &["ip", "-o", "link", "show", "lo"]).contains(",UP"));
        assert_eq!(
            in_node(n, &["cat", "/proc/sys/net/ipv4/ip_forward"]).trim(),
            "1"
        );
        assert_eq!(
            in_node(n, &["cat", "/proc/sys/net/ipv6/conf/default/accept_dad"]).trim(),
            "0"
        );
    }
    drop(nodes);
    let done = t.fleet.destroy_all().wait_settled();
    assert_eq!((done.reclaimed, done.held.len()), (200, 0));
    assert!(t.fleet.nodes().is_empty());
    assert_eq!(t.fleet.awaiting_reclaim(), 0);
    assert!(
        holders_of(inodes).is_empty(),
        "no task, descriptor or mount holds a destroyed node"
    );
}

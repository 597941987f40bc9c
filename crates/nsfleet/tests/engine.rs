//! The lifecycle core on the real kernel: create, inspect, destroy, reclaim.

mod common;

use common::*;

#[test]
fn two_hundred_nodes_come_up_configured_and_are_reclaimed() {
    let t = fleet(2);
    t.register_defaults("engine");
    let topo = topo(
                "[fleet]\nname = \"t200\"\n[defaults]\nsysctls = { \"net.ipv4.ip_forward\" = 1 }\n[[node]]\nname = \"n{i}\"\ncount = 199\n[[node]]\nname = \"srv\"\ncommands = [\"exec sleep 1000\"]\n",
    );
    let report = t
        .fleet
        .create(&topo, &mut |_, _, _| std::ops::ControlFlow::Continue(()))
        .unwrap();
    assert_eq!(report.nodes, 200);
    let nodes = t.fleet.nodes();
    assert_eq!(nodes.len(), 200);
    let mut inodes: Vec<u64> = nodes.iter().map(|n| n.inode()).collect();
    inodes.sort();
    inodes.dedup();
    assert_eq!(inodes.len(), 200, "every node is its own namespace");
    let handles: Vec<_> = nodes
        .iter()
        .map(|n| {
            n.with_netns(|fd| nsfleet::sys::ns_handle(fd).unwrap())
                .unwrap()
        })
        .collect();
    for name in ["n1", "n100", "n199", "srv"] {
        let n = nodes.get(name).unwrap();
        assert!(in_node(n, &["ip", "-o", "link", "show", "lo"]).contains(",UP"));
        let seen = in_node(n, &["readlink", "/proc/self/ns/net"]);
        assert_eq!(
            seen.trim(),
            format!("net:[{}]", n.inode()),
            "the node's identity as /proc shows it"
        );

        assert_eq!(
            in_node(n, &["cat", "/proc/sys/net/ipv4/ip_forward"]).trim(),
            "1"
        );
    }
    // DAD is off where something can create interfaces (a node running processes); a
    // node with only lo keeps the kernel default, since nothing on it can run DAD.
    let dad = |n: &str| {
        in_node(
            nodes.get(n).unwrap(),
            &["cat", "/proc/sys/net/ipv6/conf/default/accept_dad"],
        )
    };
    assert_eq!(dad("srv").trim(), "0");
    assert_eq!(dad("n1").trim(), "1");
    drop(nodes);
    let done = t.fleet.destroy_all().wait_settled();
    assert_eq!((done.reclaimed, done.held.len()), (200, 0));
    assert!(t.fleet.nodes().is_empty());
    assert_eq!(t.fleet.awaiting_reclaim(), 0);
    let nsfs = std::fs::File::open("/proc/self/ns/net").unwrap();
    let alive = handles
        .iter()
        .filter(|h| {
            nsfleet::sys::reopen_ns(std::os::fd::AsFd::as_fd(&nsfs), h)
                .unwrap()
                .is_some()
        })
        .count();
    assert_eq!(
        alive, 0,
        "no task, descriptor or mount holds a destroyed node"
    );
}

use nsfleet::core::{InitCtx, Node, Phase, Subsystem};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A subsystem for tests: sets ip_forward in the node (observable from outside), counts
/// its calls, and fails on one chosen node. Its exit undoes the sysctl from outside the
/// node, through nsenter, as an observer would.
#[derive(Clone, Default)]
struct Forwarding {
    fail_on: Option<&'static str>,
    inits: Arc<AtomicUsize>,
    /// Inits run by a registration, which sees the live nodes (a creation's Create phase
    /// sees none: the node is not published yet).
    by_registration: Arc<AtomicUsize>,
    exits: Arc<AtomicUsize>,
    batches: Arc<AtomicUsize>,
}

impl Subsystem for Forwarding {
    type State = bool;
    fn name(&self) -> &'static str {
        "test-forwarding"
    }
    fn phase(&self) -> Phase {
        Phase::Create
    }
    fn init(&self, cx: &mut InitCtx<'_>, on: &mut bool) -> anyhow::Result<()> {
        if Some(cx.node.name()) == self.fail_on {
            anyhow::bail!("refusing {}", cx.node.name());
        }
        std::fs::write("/proc/sys/net/ipv4/ip_forward", "1")?;
        *on = true;
        self.inits.fetch_add(1, Ordering::SeqCst);
        if !cx.peers().is_empty() {
            self.by_registration.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
    fn exit(&self, node: &Node, on: &mut bool) {
        assert!(*on, "exit only where init succeeded");
        if node.with_netns(|_| ()).is_some() {
            in_node(
                node,
                &["sh", "-c", "echo 0 > /proc/sys/net/ipv4/ip_forward"],
            );
        }
        self.exits.fetch_add(1, Ordering::SeqCst);
    }
    fn exit_batch(&self, _batch: &mut [(&Node, &mut bool)]) {
        self.batches.fetch_add(1, Ordering::SeqCst);
    }
}

fn forwarding(node: &Node) -> String {
    in_node(node, &["cat", "/proc/sys/net/ipv4/ip_forward"])
        .trim()
        .to_string()
}

/// A fleet with the default subsystems and 40 bare nodes.
fn live_fleet(name: &str) -> TestFleet {
    let t = fleet(2);
    t.register_defaults("engine");
    let text = format!("[fleet]\nname = \"{name}\"\n[[node]]\nname = \"n{{i}}\"\ncount = 40\n");
    t.fleet
        .create(&topo(&text), &mut |_, _, _| {
            std::ops::ControlFlow::Continue(())
        })
        .unwrap();
    t
}

#[test]
fn registering_on_a_live_fleet_inits_every_node_and_unregistering_exits_them() {
    let t = live_fleet("r");
    let sub = Forwarding::default();
    let id = t.fleet.register(sub.clone()).unwrap();
    assert_eq!(sub.inits.load(Ordering::SeqCst), 40);
    assert!(t.fleet.nodes().iter().all(|n| forwarding(n) == "1"));
    t.fleet.unregister(id).unwrap();
    assert_eq!(sub.exits.load(Ordering::SeqCst), 40);
    assert_eq!(
        sub.batches.load(Ordering::SeqCst),
        1,
        "exit_batch once for the whole fleet"
    );
    assert!(t.fleet.nodes().iter().all(|n| forwarding(n) == "0"));
    assert!(
        t.fleet.unregister(id).is_err(),
        "unregistering twice is an error"
    );
}

#[test]
fn a_registration_whose_init_fails_on_one_node_is_undone_on_every_node() {
    let t = live_fleet("f");
    let sub = Forwarding {
        fail_on: Some("n17"),
        ..Forwarding::default()
    };
    let err = t.fleet.register(sub.clone()).unwrap_err();
    assert!(format!("{err:#}").contains("refusing n17"), "{err:#}");
    let (inits, exits) = (
        sub.inits.load(Ordering::SeqCst),
        sub.exits.load(Ordering::SeqCst),
    );
    assert_eq!(inits, exits, "every node where init ran got exit");
    assert_eq!(sub.batches.load(Ordering::SeqCst), 1);
    assert!(
        t.fleet.nodes().iter().all(|n| forwarding(n) == "0"),
        "undone everywhere"
    );
    assert!(!t.fleet.subsystems().contains(&"test-forwarding"));
    // Nothing of it is left in any node's state: a later registration starts clean.
    let ok = Forwarding::default();
    t.fleet.register(ok.clone()).unwrap();
    assert_eq!(ok.inits.load(Ordering::SeqCst), 40);
}

#[test]
fn a_registration_racing_a_creation_reaches_every_node_exactly_once() {
    let t = Arc::new(fleet(2));
    t.register_defaults("engine");
    let sub = Forwarding::default();
    // The creation says when its first node is made, inside the registry's shared lock,
    // and waits for the registration to be on its way: the race is certain, not left to
    // how long a thread takes to start.
    let (made_one, first_made) = std::sync::mpsc::channel::<()>();
    let (go, going) = std::sync::mpsc::channel::<()>();
    let creator = {
        let t = t.clone();
        std::thread::spawn(move || {
            let mut told = false;
            t.fleet
                .create(
                    &topo("[fleet]\nname = \"race\"\n[[node]]\nname = \"n{i}\"\ncount = 300\n"),
                    &mut |_, done, _| {
                        if !told && done > 0 {
                            told = true;
                            let _ = made_one.send(());
                            let _ = going.recv_timeout(std::time::Duration::from_secs(60));
                        }
                        std::ops::ControlFlow::Continue(())
                    },
                )
                .unwrap();
        })
    };
    first_made
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the creation made its first node");
    // 299 nodes and three phases are still to come: the registration asks for the lock
    // while the creation holds it.
    go.send(()).unwrap();
    t.fleet.register(sub.clone()).unwrap();
    creator.join().unwrap();
    // The creation took its set of subsystems before the registration, so the
    // registration ran every init, on every node the creation published: it waited for
    // them rather than missing any, and no node got init twice or never.
    assert_eq!(sub.inits.load(Ordering::SeqCst), 300);
    assert_eq!(
        sub.by_registration.load(Ordering::SeqCst),
        300,
        "every init by the registration"
    );
    assert!(t.fleet.nodes().iter().all(|n| forwarding(n) == "1"));
}

#[test]
fn a_failing_create_rolls_back_every_node_it_made() {
    let t = fleet(2);
    let defaults = t.register_defaults("engine");
    let _ = defaults;
    let sub = Forwarding {
        fail_on: Some("n33"),
        ..Forwarding::default()
    };
    t.fleet.register(sub.clone()).unwrap();
    let err = t
        .fleet
        .create(
            &topo("[fleet]\nname = \"fc\"\n[[node]]\nname = \"n{i}\"\ncount = 60\n"),
            &mut |_, _, _| std::ops::ControlFlow::Continue(()),
        )
        .unwrap_err();
    assert!(format!("{err:#}").contains("rolled back"), "{err:#}");
    assert!(t.fleet.nodes().is_empty());
    assert_eq!(
        sub.inits.load(Ordering::SeqCst),
        sub.exits.load(Ordering::SeqCst)
    );
    assert_eq!(t.fleet.awaiting_reclaim(), 0);
}

#[test]
fn each_link_kind_unwires_its_interfaces_from_a_live_node() {
    use nsfleet::subsys::link::{veth::Veths, vxlan::Vxlans, LinkKind};
    let t = fleet(2);
    t.register_defaults("unwire");
    let topo = topo(include_str!("../../../examples/vxlan.toml"));
    let go = &mut |_, _, _| std::ops::ControlFlow::Continue(());
    t.fleet.create(&topo, go).unwrap();
    let nodes = t.fleet.nodes();
    let (a, b) = (nodes.get("a").unwrap(), nodes.get("b").unwrap());
    let links = |n| in_node(n, &["ip", "-o", "link", "show"]);
    assert!(links(a).contains(" vx0: ") && links(b).contains(" eth0@"));
    // Each kind removes what it made: the tunnel from a, then the veth pair from a's side,
    // which takes b's end with it.
    let unwire = |kind: &'static dyn LinkKind, iface: &'static str| {
        t.fleet.on_node("a", move |cx| {
            let i = cx.node.wiring().iface(iface).unwrap().clone();
            cx.send_each([i], |out, i| kind.unwire(out, i), |i| i.name.clone())
        })
    };
    // A kind with a host socket lives as long as the fleet's registry would keep it.
    let vxlans: &'static Vxlans = Box::leak(Box::new(Vxlans::new().unwrap()));
    unwire(vxlans, "vx0").unwrap();
    assert!(!links(a).contains(" vx0: "), "{}", links(a));
    unwire(&Veths, "eth0").unwrap();
    assert!(!links(a).contains(" eth0@"), "{}", links(a));
    assert!(!links(b).contains(" eth0@"), "{}", links(b));
}

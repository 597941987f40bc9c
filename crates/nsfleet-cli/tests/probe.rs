//! A node's routes and pings from it (the supervisor's `routes` and `ping` requests, as a
//! scenario's expectations ask them through nsfleet-client's `probe`), end to end on the
//! real kernel: two nodes on a veth, b with addresses in a subnet a reaches only by its
//! static routes.

mod harness;

use harness::*;
use nsfleet::control::Request;
use nsfleet::sys;
use nsfleet::sys::ping::Pinger;
use nsfleet_client::probe::{self, Pinged};
use nsfleet_client::FleetRef;
use std::net::IpAddr;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

const TOPOLOGY: &str = r#"[fleet]
name = "probe"

[[node]]
name = "a"
routes = ["10.255.0.0/24 via 10.0.0.2", "fd00:255::/64 via fd00::2"]

[[node]]
name = "b"

[[link]]
a = { at = "a:eth0", addrs = ["10.0.0.1/24", "fd00::1/64"] }
b = { at = "b:eth0", addrs = ["10.0.0.2/24", "fd00::2/64", "10.255.0.2/24", "fd00:255::2/64"] }
"#;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn a_node_reads_its_routes_and_pings_across_its_link() {
    let env = Env::new("probe");
    let _guard = env.up(TOPOLOGY);
    let fleet = FleetRef {
        name: "probe".into(),
        run_dir: env.run_dir.clone(),
    };

    // Routes: a's connected ones without gateways, its static ones through b, both
    // families; then a multipath route added behind nsfleet's back, read back with each
    // next hop's gateway.
    let routes = probe::routes(&fleet, "a").unwrap();
    let find = |routes: &[nsfleet::control::RouteDst], dst: &str, prefix: u8| {
        (routes.iter())
            .find(|r| r.dst == ip(dst) && r.prefix == prefix)
            .unwrap_or_else(|| panic!("no route to {dst}/{prefix} in {routes:?}"))
            .clone()
    };
    assert!(find(&routes, "10.0.0.0", 24).gateways.is_empty());
    assert!(find(&routes, "10.0.0.0", 24).oif.is_some());
    assert_eq!(find(&routes, "10.255.0.0", 24).gateways, [ip("10.0.0.2")]);
    assert!(find(&routes, "fd00::", 64).gateways.is_empty());
    assert_eq!(find(&routes, "fd00:255::", 64).gateways, [ip("fd00::2")]);
    let add =
        "ip route add 10.9.0.0/16 nexthop via 10.0.0.2 dev eth0 nexthop via 10.0.0.3 dev eth0";
    in_node(&env, &fleet, "a", &add.split(' ').collect::<Vec<_>>());
    let routes = probe::routes(&fleet, "a").unwrap();
    let multipath = find(&routes, "10.9.0.0", 16);
    assert_eq!(multipath.gateways, [ip("10.0.0.2"), ip("10.0.0.3")]);
    assert_eq!(multipath.oif, None);
    // b has no route to 10.9/16: a route dump is per node.
    let b = probe::routes(&fleet, "b").unwrap();
    assert!(b.iter().all(|r| r.dst != ip("10.9.0.0")), "{b:?}");

    // Pings that are answered: across the link, through the routes to b's other subnets, on a's
    // own loopback; both families.
    let ms = Duration::from_millis;
    for (to, count) in [
        ("10.0.0.2", 3),
        ("10.255.0.2", 2),
        ("127.0.0.1", 1),
        ("fd00::2", 3),
        ("fd00:255::2", 2),
        ("::1", 1),
    ] {
        let t = Instant::now();
        let p = probe::ping(&fleet, "a", ip(to), count, ms(20), ms(2000)).unwrap();
        // Done once the last is answered, not at its deadline.
        assert!(t.elapsed() < ms(1500), "{to}: took {:?}", t.elapsed());
        assert_eq!((p.sent, p.received), (count, count), "{to}: {p:?}");
        assert_eq!(p.rtt_ms.len(), count as usize, "{to}: {p:?}");
        assert!(
            p.rtt_ms.iter().all(|r| *r >= 0.0 && *r < 2000.0),
            "{to}: {p:?}"
        );
    }

    // Not answered: a neighbour that is not there (lost once the wait is over), and an
    // address with no route (refused at once). Echoes go on schedule however many are
    // unanswered: 5 of them 20 ms apart with 500 ms each take about 0.6 s, not 2.5.
    let t = Instant::now();
    let p = probe::ping(&fleet, "a", ip("10.0.0.3"), 5, ms(20), ms(500)).unwrap();
    let took = t.elapsed();
    let lost = Pinged {
        sent: 5,
        received: 0,
        rtt_ms: vec![],
    };
    assert_eq!(p, lost);
    assert!(took >= ms(580) && took < ms(1500), "took {took:?}");
    let p = probe::ping(&fleet, "a", ip("192.0.2.1"), 2, ms(10), ms(500)).unwrap();
    assert_eq!((p.sent, p.received), (2, 0));

    // nsfleet-sys's Pinger on its own, from a thread of this test gone into a's
    // namespace: one echo at a time, each waited for.
    let ns = fleet.node_namespace("a").unwrap();
    let echoes = std::thread::spawn(move || {
        sys::setns_net(ns.fd.as_fd()).unwrap();
        let mut v4 = Pinger::open(false).unwrap();
        let mut v6 = Pinger::open(true).unwrap();
        (
            v4.echo(ip("10.255.0.2"), ms(2000)).unwrap(),
            v4.echo(ip("10.0.0.3"), ms(200)).unwrap(),
            v6.echo(ip("fd00::2"), ms(2000)).unwrap(),
            v4.echo(ip("::1"), ms(200)).map_err(|e| e.kind()),
        )
    });
    let (answered, lost, answered6, mixed) = echoes.join().unwrap();
    assert!(answered.is_some_and(|d| d < ms(2000)), "{answered:?}");
    assert_eq!(lost, None);
    assert!(answered6.is_some_and(|d| d < ms(2000)), "{answered6:?}");
    assert_eq!(mixed, Err(std::io::ErrorKind::InvalidInput));

    // Refusals: bounds, and a node that does not exist, with the closest names.
    let e = probe::ping(&fleet, "a", ip("10.0.0.2"), 0, ms(20), ms(100)).unwrap_err();
    assert!(
        format!("{e:#}").contains("1 to 100000 echo requests"),
        "{e:#}"
    );
    let e = probe::ping(&fleet, "a", ip("10.0.0.2"), 1, ms(61_000), ms(100)).unwrap_err();
    assert!(
        format!("{e:#}").contains("interval is 1 to 60000 ms"),
        "{e:#}"
    );
    let e = probe::ping(&fleet, "aa", ip("10.0.0.2"), 1, ms(20), ms(100)).unwrap_err();
    assert!(
        format!("{e:#}").contains("has no node \"aa\": did you mean a"),
        "{e:#}"
    );
    let e = probe::routes(&fleet, "c").unwrap_err();
    assert!(format!("{e:#}").contains("has no node \"c\""), "{e:#}");

    // An asker that hangs up ends its ping: the raw socket it had in a goes with it.
    let raw_sockets = || {
        in_node(&env, &fleet, "a", &["cat", "/proc/net/raw"])
            .lines()
            .count()
            - 1
    };
    let mut c = fleet.connect().unwrap();
    let long = Request::Ping {
        node: "a".into(),
        addr: ip("10.0.0.2"),
        count: 10_000,
        interval_ms: 10,
        timeout_ms: 100,
    };
    c.send(&long).unwrap();
    std::thread::sleep(ms(300));
    assert_eq!(raw_sockets(), 1);
    drop(c);
    let t = Instant::now();
    while raw_sockets() > 0 {
        assert!(t.elapsed() < ms(5000), "the ping goes on without its asker");
        std::thread::sleep(ms(20));
    }

    // A ping under way when the fleet goes down stops there, and lets go of the node's
    // namespace: the `down` is not held up by it.
    let long = {
        let fleet = fleet.clone();
        std::thread::spawn(move || {
            let t = Instant::now();
            let p = probe::ping(&fleet, "a", ip("10.0.0.2"), 10_000, ms(10), ms(100));
            (p, t.elapsed())
        })
    };
    std::thread::sleep(ms(300));
    let t = Instant::now();
    env.ok(&["down", &fleet.name]);
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "down took {:?}",
        t.elapsed()
    );
    let (p, took) = long.join().unwrap();
    let e = p.unwrap_err();
    assert!(
        format!("{e:#}").contains("stopped, the fleet is going down"),
        "{e:#}"
    );
    assert!(took < Duration::from_secs(20), "the ping took {took:?}");
}

/// Runs `cmd` in node `node`'s network namespace (`nsfleet exec`); its output.
fn in_node(env: &Env, fleet: &FleetRef, node: &str, cmd: &[&str]) -> String {
    env.ok(&[&["exec", &fleet.name, node, "--"], cmd].concat())
}

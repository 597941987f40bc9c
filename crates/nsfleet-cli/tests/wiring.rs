//! Wired fleets on the real kernel, observed with iproute2 and ping through `nsfleet exec`:
//! every generator, routing across a line of routers, a star over two bridges, a switch of
//! macvlan ports,
//! impairments, rollback of a failure half-way, host links after a crash, and a VXLAN
//! tunnel over a veth underlay.

mod harness;

use harness::*;
use std::process::Command;

fn example(name: &str) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    std::fs::read_to_string(root.join(name)).unwrap()
}

/// `ip -br addr` of a node, as (interface, addresses) without `lo`.
fn ifaces(env: &Env, fleet: &str, node: &str) -> Vec<(String, String)> {
    env.ok(&["exec", fleet, node, "--", "ip", "-br", "-4", "addr"])
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let name = w.next()?.split('@').next()?.to_string();
            let addrs = w.skip(1).collect::<Vec<_>>().join(" ");
            (name != "lo").then_some((name, addrs))
        })
        .collect()
}

fn ping(env: &Env, fleet: &str, node: &str, addr: &str) -> String {
    env.ok(&[
        "exec", fleet, node, "--", "ping", "-c", "1", "-W", "2", addr,
    ])
}

/// A host interface made by the test, deleted even if the test fails.
struct HostIface(String);

impl HostIface {
    /// A veth pair (this kernel may lack dummy interfaces); deleting one end deletes both.
    fn look_alike(name: &str) -> Self {
        let ok = Command::new("ip")
            .args([
                "link",
                "add",
                name,
                "type",
                "veth",
                "peer",
                "name",
                &format!("{name}p"),
            ])
            .status()
            .unwrap();
        assert!(ok.success());
        HostIface(name.into())
    }
}

impl Drop for HostIface {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.0]).output();
    }
}

fn host_has(name: &str) -> bool {
    Command::new("ip")
        .args(["link", "show", name])
        .output()
        .unwrap()
        .status
        .success()
}

fn host_ifname(tag: &str) -> String {
    format!("nsf{tag}{}", std::process::id() % 100_000)
}

#[test]
fn every_generator_builds_what_iproute2_then_sees() {
    let env = Env::new("generators");
    {
        let _f = env.up(&example("star.toml"));
        assert_eq!(
            ifaces(&env, "star", "h7"),
            [("eth0".into(), "10.1.0.7/24".into())]
        );
        let ports = env.ok(&["exec", "star", "sw", "--", "bridge", "link"]);
        assert_eq!(ports.lines().count(), 50, "{ports}");
        ping(&env, "star", "h1", "10.1.0.50");
    }
    {
        let _f = env.up(&example("ring.toml"));
        let r1 = ifaces(&env, "ring", "r1");
        assert_eq!(r1.len(), 2, "{r1:?}");
        let qdisc = env.ok(&[
            "exec", "ring", "r1", "--", "tc", "qdisc", "show", "dev", "eth0",
        ]);
        assert!(qdisc.contains("tbf") || qdisc.contains("netem"), "{qdisc}");
        // r1 to r5 across the ring: the far side, two hops either way.
        let r5 = ifaces(&env, "ring", "r5");
        ping(&env, "ring", "r1", r5[0].1.split('/').next().unwrap());
    }
    {
        let _f = env.up(&example("tree.toml"));
        assert_eq!(ifaces(&env, "tree", "t1").len(), 3); // the root: three children
        assert_eq!(ifaces(&env, "tree", "t2").len(), 4); // a parent and three children
        assert_eq!(ifaces(&env, "tree", "t40").len(), 1); // a leaf
        let leaf = ifaces(&env, "tree", "t40");
        ping(&env, "tree", "t14", leaf[0].1.split('/').next().unwrap());
    }
    {
        let _f = env.up(&example("mesh.toml"));
        assert_eq!(ifaces(&env, "mesh", "r1").len(), 11);
    }
    {
        let _f = env.up(&example("grid.toml"));
        assert_eq!(ifaces(&env, "grid", "g1").len(), 2); // a corner of the grid
        assert_eq!(ifaces(&env, "grid", "g8").len(), 4); // inside
        assert_eq!(ifaces(&env, "grid", "t1").len(), 4); // the torus wraps around
        let far = ifaces(&env, "grid", "g36");
        ping(&env, "grid", "g1", far[0].1.split('/').next().unwrap());
    }
    {
        let _f = env.up(&example("random.toml"));
        let total: usize = (1..=30)
            .map(|i| ifaces(&env, "random", &format!("r{i}")).len())
            .sum();
        assert_eq!(total, 120); // 60 links, two ends each
    }
    {
        let _f = env.up(&example("linear.toml"));
        let s2 = env.ok(&["exec", "linear", "s2", "--", "bridge", "link"]);
        assert_eq!(s2.lines().count(), 3, "h2, s1 and s3: {s2}");
        ping(&env, "linear", "h1", "10.0.0.20");
    }
    {
        let _f = env.up(nsfleet::topology::DEFAULT_FLEET);
        let r1 = env.ok(&[
            "exec",
            "default",
            "r1",
            "--",
            "cat",
            "/proc/sys/net/ipv4/conf/eth0/forwarding",
        ]);
        assert_eq!(r1.trim(), "1");
        ping(&env, "default", "r1", "10.0.0.100");
    }
}

#[test]
fn a_line_of_10_routers_routes_end_to_end() {
    let env = Env::new("line");
    let _f = env.up(&example("line.toml"));
    let r10 = ifaces(&env, "line", "r10");
    assert_eq!(r10, [("eth0".into(), "10.2.0.34/30".into())]);
    let out = ping(&env, "line", "r1", "10.2.0.34");
    // Eight routers in between: the reply comes back with a TTL 8 below 64.
    assert!(out.contains("ttl=56"), "{out}");
    let routes = env.ok(&["exec", "line", "r5", "--", "ip", "route"]);
    assert!(routes.contains("10.2.0.32/30 via 10.2.0.18"), "{routes}");
}

#[test]
fn a_vxlan_tunnel_carries_pings_over_its_underlay() {
    let env = Env::new("vxlan");
    let _f = env.up(&example("vxlan.toml"));
    let dev = env.ok(&[
        "exec", "vxlan", "a", "--", "ip", "-d", "link", "show", "vx0",
    ]);
    assert!(
        dev.contains("vxlan id 70 remote 10.70.0.2 dev eth0"),
        "{dev}"
    );
    assert!(
        dev.contains("dstport 4789") && dev.contains("mtu 1450"),
        "{dev}"
    );
    let out = ping(&env, "vxlan", "a", "192.168.70.2");
    assert!(out.contains("1 received"), "{out}");
    // The reply came back through the tunnel: b's end received and a's end did too.
    for node in ["a", "b"] {
        let rx = env.ok(&[
            "exec",
            "vxlan",
            node,
            "--",
            "cat",
            "/sys/class/net/vx0/statistics/rx_packets",
        ]);
        assert!(rx.trim().parse::<u64>().unwrap() > 0, "{node}: {rx}");
    }
    // An underlay the node does not have is refused with the table's line, before anything.
    let bad = example("vxlan.toml").replacen("dev = \"eth0\"", "dev = \"eth9\"", 1);
    let file = env.file(
        "bad-vxlan.toml",
        &bad.replace("name = \"vxlan\"", "name = \"vxbad\""),
    );
    let out = env.run(&["up", file.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("bad-vxlan.toml:18:")
            && err.contains("a has no interface \"eth9\" to carry the tunnel"),
        "{err}"
    );
}

/// `ip -br -6 addr` of one interface of a node.
fn addrs6(env: &Env, fleet: &str, node: &str, dev: &str) -> String {
    env.ok(&[
        "exec", fleet, node, "--", "ip", "-br", "-6", "addr", "show", "dev", dev,
    ])
}

#[test]
fn ipv6_from_a_pool_and_link_local_addresses_only_where_ipv6_is_used() {
    let env = Env::new("v6");
    let _f = env.up(r#"
[fleet]
name = "v6"
[[switch]]
name = "sw"
pool = "10.9.0.0/24"
pool6 = "fd09::/64"
[[switch]]
name = "sw4"
pool = "10.8.0.0/24"
[[node]]
name = "a"
[[node]]
name = "b"
[[node]]
name = "c"
commands = ["exec sleep 600"]
[[link]]
a = "a:eth0"
b = "sw"
[[link]]
a = "b:eth0"
b = "sw"
[[link]]
a = "c:eth0"
b = "sw4"
"#);
    let a = addrs6(&env, "v6", "a", "eth0");
    assert!(a.contains("fd09::1/64") && a.contains("fe80::"), "{a}");
    let out = env.ok(&[
        "exec", "v6", "b", "--", "ping", "-6", "-c", "1", "-W", "2", "fd09::1",
    ]);
    assert!(out.contains("1 received"), "{out}");
    // c has no IPv6 address but runs a process, which may want link-local IPv6.
    assert!(addrs6(&env, "v6", "c", "eth0").contains("fe80::"));
    // Switch ports and bridges carry frames only.
    for dev in ["p1", "br0"] {
        let port = addrs6(&env, "v6", "sw", dev);
        assert!(!port.contains("fe80::"), "{dev}: {port}");
    }
    // ... and forwards them without iptables' hooks, where the kernel has bridge
    // netfilter; the host's setting stays as it was.
    let nf = "/proc/sys/net/bridge/bridge-nf-call-iptables";
    if let Ok(host) = std::fs::read_to_string(nf) {
        let sw = env.ok(&["exec", "v6", "sw", "--", "cat", nf]);
        assert_eq!(sw.trim(), "0");
        assert_eq!(std::fs::read_to_string(nf).unwrap(), host);
    }
    let v4 = r#"
[fleet]
name = "v4"
[[switch]]
name = "sw"
pool = "10.7.0.0/24"
[[node]]
name = "d"
[[link]]
a = "d:eth0"
b = "sw"
"#;
    let _g = env.up(v4);
    assert_eq!(
        addrs6(&env, "v4", "d", "eth0").trim(),
        "",
        "an IPv4-only node gets no IPv6"
    );
}

#[test]
fn a_1500_port_star_spans_two_shards_and_pings_end_to_end() {
    let env = Env::new("bigstar");
    let _f = env.up(r#"
[fleet]
name = "bigstar"

[[generate]]
kind = "star"
count = 1500
switch = "sw"
pool = "10.9.0.0/16"
"#);
    let ports = |shard: &str| {
        let links = env.ok(&["exec", "bigstar", shard, "--", "bridge", "link"]);
        let names: Vec<String> = (links.lines())
            .filter(|l| l.contains("master br0 "))
            .map(|l| l.split_whitespace().nth(1).unwrap_or("").to_string())
            .collect();
        names
    };
    let (sw, sw2) = (ports("sw"), ports("sw.2"));
    assert_eq!(sw.len(), 1001, "1,000 ports and the trunk to sw.2");
    assert!(sw.iter().any(|n| n.starts_with("br-s2")), "{sw:?}");
    assert_eq!(sw2.len(), 501, "500 ports and the trunk up to sw");
    assert!(sw2.iter().any(|n| n.starts_with("br-up")), "{sw2:?}");
    // h1 hangs off sw, h1500 off sw.2: across the trunk. Its ARP request is flooded to
    // 1,000 ports, then 500, into backlogs other tests fill too: three tries of one.
    let tries: Vec<bool> = (0..3)
        .map(|_| {
            let args = [
                "exec",
                "bigstar",
                "h1",
                "--",
                "ping",
                "-c",
                "1",
                "-W",
                "2",
                "10.9.5.220",
            ];
            env.run(&args).status.success()
        })
        .take_while(|ok| !ok)
        .collect();
    if tries.len() == 3 {
        // Lost in CI beside other tests, never alone: the trunk and hundreds of ports
        // were still "disabled", their carrier change not yet seen by the kernel's link
        // watch (nsfleet-subsys's `link/linkwatch.rs` now has it seen in Start). What
        // each side saw, should it happen again.
        let look = |node: &str, argv: &[&str]| {
            let mut args = vec!["exec", "bigstar", node, "--"];
            args.extend_from_slice(argv);
            let out = env.run(&args);
            format!(
                "{node}$ {}\n{}{}",
                argv.join(" "),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        };
        let seen = [
            look("h1", &["ip", "-br", "addr"]),
            look("h1", &["ip", "neigh"]),
            look("h1500", &["ip", "-br", "addr"]),
            look("h1500", &["ip", "neigh"]),
            look(
                "sw",
                &[
                    "sh",
                    "-c",
                    "bridge link | grep -v 'state forwarding' | head",
                ],
            ),
            look("sw", &["sh", "-c", "ip -s -br link | grep -E 'br-s2|br0'"]),
            look(
                "sw.2",
                &[
                    "sh",
                    "-c",
                    "bridge link | grep -v 'state forwarding' | head",
                ],
            ),
            look(
                "sw.2",
                &["sh", "-c", "ip -s -br link | grep -E 'br-up|br0'"],
            ),
        ];
        panic!(
            "h1 never reached h1500 across the trunk:\n{}",
            seen.join("\n")
        );
    }
}

#[test]
fn a_2100_router_macvlan_switch_hangs_them_from_three_lowers_and_pings_across() {
    let env = Env::new("mvlan");
    let _f = env.up(r#"
[fleet]
name = "mvlan"

[[generate]]
kind = "fake-routers"
count = 2100
ports = "macvlan"

[[switch]]
name = "edge"

[[node]]
name = "h"

[[link]]
a = "lan"
b = "edge"

[[link]]
a = { at = "h:eth0", addrs = ["10.0.200.1/16"] }
b = "edge"
"#);
    // No device of the switch's own per router, and no shard: three lowers of at most
    // 1,000 macvlans, their pairs' ends ports of the bridge beside the veth to `edge`.
    let links = env.ok(&["exec", "mvlan", "lan", "--", "ip", "-br", "link"]);
    let names: Vec<&str> = (links.lines())
        .filter_map(|l| l.split_whitespace().next()?.split('@').next())
        .collect();
    for want in ["br0", "br-mvl0", "br-mvp0", "br-mvl2", "br-mvp2", "p2101"] {
        assert!(names.contains(&want), "{want} in {names:?}");
    }
    assert!(
        !names.contains(&"p1") && !names.contains(&"br-mvl3"),
        "{names:?}"
    );
    let status = env.status("mvlan");
    let nodes = status["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2103, "no shard node");
    let lan = nodes.iter().find(|n| n["name"] == "lan").unwrap();
    assert_eq!(lan["interfaces"][0], "bridge br0, 1 ports, 2100 macvlans");
    let eth0 = env.ok(&[
        "exec", "mvlan", "r2100", "--", "ip", "-d", "link", "show", "eth0",
    ]);
    assert!(eth0.contains("macvlan mode bridge"), "{eth0}");
    // r1 on lower 0; r1001 (10.0.3.233) on lower 1; r2100 on lower 2; h behind `edge`.
    ping(&env, "mvlan", "r1", "10.0.0.2");
    ping(&env, "mvlan", "r1", "10.0.3.233");
    ping(&env, "mvlan", "r2100", "10.0.0.1");
    ping(&env, "mvlan", "h", "10.0.8.52");
}

#[test]
fn what_a_macvlan_switch_cannot_be_given_is_refused_at_its_line() {
    let env = Env::new("mvbad");
    let cases = [
        ("kind", "[[generate]]\nkind = \"fake-routers\"\ncount = 3\nports = \"bogus\"\n", 6, "ports: expected \"veth\""),
        ("shape", "[[generate]]\nkind = \"ring\"\ncount = 3\nports = \"macvlan\"\n", 6, "ports: a ring has no switch"),
        ("switch end", "[[switch]]\nname = \"sw\"\nports = \"macvlan\"\n[[node]]\nname = \"a\"\n[[link]]\na = \"a:eth0\"\nb = { at = \"sw\", addrs = [\"10.1.0.1/24\"] }\n", 8, "no device on the switch's side"),
        ("mtu", "[[switch]]\nname = \"sw\"\nports = \"macvlan\"\n[[node]]\nname = \"a\"\n[[link]]\na = { at = \"a:eth0\", mtu = 9000 }\nb = \"sw\"\n", 8, "a macvlan's MTU is at most"),
    ];
    for (tag, body, line, expected) in cases {
        let file = env.file(
            &format!("{}.toml", tag.replace(' ', "-")),
            &format!("[fleet]\nname = \"mvbad\"\n{body}"),
        );
        env.refused(tag, &["up", file.to_str().unwrap()], &file, line, expected);
    }
}

#[test]
fn impairments_from_the_file_and_on_a_live_fleet() {
    let env = Env::new("impair");
    let has_netem = nsfleet::subsys::probe::has_netem();
    let delay = if has_netem {
        r#"delay = "20ms""#
    } else {
        r#"rate = "10mbit""#
    };
    let _f = env.up(&format!(
        r#"
[fleet]
name = "imp"

[[node]]
name = "a"

[[node]]
name = "b"

[[link]]
a = {{ at = "a:eth0", addrs = ["10.0.0.1/24"], impair = {{ {delay} }} }}
b = {{ at = "b:eth0", addrs = ["10.0.0.2/24"] }}
"#
    ));
    let qdisc = |node: &str| {
        env.ok(&[
            "exec", "imp", node, "--", "tc", "qdisc", "show", "dev", "eth0",
        ])
    };
    if has_netem {
        assert!(qdisc("a").contains("netem"));
        let out = ping(&env, "imp", "a", "10.0.0.2");
        let rtt: f64 = out
            .split("time=")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(rtt >= 20.0, "netem's 20 ms shows in the RTT: {out}");
        env.ok(&["impair", "imp", "b:eth0", "--delay", "30ms", "--loss", "0%"]);
        assert!(qdisc("b").contains("delay 30ms"));
    } else {
        assert!(
            qdisc("a").contains("tbf") && qdisc("a").contains("10Mbit"),
            "{}",
            qdisc("a")
        );
        let refused = env.run(&["impair", "imp", "b:eth0", "--delay", "30ms"]);
        let err = String::from_utf8_lossy(&refused.stderr);
        assert!(err.contains("no netem qdisc"), "{err}");
        assert!(!qdisc("b").contains("netem"));
    }
    env.ok(&["impair", "imp", "b:eth0", "--rate", "1mbit"]);
    assert!(qdisc("b").contains("1Mbit"), "{}", qdisc("b"));
    let s = env.status("imp");
    let b = s["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "b")
        .unwrap();
    assert_eq!(b["impairments"][0][0], "eth0");
    env.ok(&["impair", "imp", "b:eth0", "--clear"]);
    assert!(!qdisc("b").contains("tbf"));
    let bad = env.run(&["impair", "imp", "b:eth7", "--rate", "1mbit"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("has no interface \"eth7\""));
}

#[test]
fn what_the_kernel_would_refuse_of_the_host_is_refused_before_anything_exists() {
    let env = Env::new("rollback");
    // The host already has an interface of the name the host link wants: refused before
    // anything exists, and the look-alike is not touched.
    let taken = HostIface::look_alike(&host_ifname("rb"));
    let topology = |host_iface: &str, host_addrs: &str| {
        format!(
            r#"
[fleet]
name = "rb"

[[generate]]
kind = "star"
count = 20

[[node]]
name = "mgmt"
host_link = {{ iface = "m0", host_iface = "{host_iface}", host_addrs = [{host_addrs}] }}
"#
        )
    };
    let f = env.file("rb.toml", &topology(&taken.0, ""));
    let args = ["up", f.to_str().unwrap()];
    let expected = format!("host interface {} already exists on the host", taken.0);
    env.refused("host interface", &args, &f, 11, &expected);
    assert!(
        host_has(&taken.0),
        "the look-alike on the host is untouched"
    );
    // An address the kernel refuses on the host's end (a multicast one): refused before
    // anything exists too.
    let fresh = host_ifname("rc");
    let f = env.file("rc.toml", &topology(&fresh, "\"ff02::1234/64\""));
    let args = ["up", f.to_str().unwrap()];
    let expected = format!("the host's {fresh}: ff02::1234/64 is a multicast address");
    env.refused("host address", &args, &f, 11, &expected);
    assert!(!host_has(&fresh), "no host link");

    // A gateway that no address makes reachable, which the kernel would refuse in the
    // Configure phase, is refused before anything exists.
    let f = env.file(
        "gw.toml",
        "[fleet]\nname = \"gw\"\n[[generate]]\nkind = \"star\"\ncount = 5\n[[node]]\nname = \"x\"\nroutes = [\"10.99.0.0/16 via 192.168.77.1\"]\n",
    );
    let args = ["up", f.to_str().unwrap()];
    env.refused(
        "gateway",
        &args,
        &f,
        8,
        "expected a gateway on a connected subnet",
    );
}

#[test]
fn a_host_link_held_after_a_crash_is_removed_by_clean_and_look_alikes_are_not() {
    let env = Env::new("hostlink");
    let name = host_ifname("hl");
    let f = env.up(&format!(
        r#"
[fleet]
name = "hl"

[[node]]
name = "box"
host_link = {{ iface = "mgmt", host_iface = "{name}", addrs = ["192.168.251.2/30"], host_addrs = ["192.168.251.1/30"] }}
"#
    ));
    assert!(host_has(&name));
    // The host's end may get its carrier a moment after `up` returns (the kernel's link
    // watch defers a veth's carrier change on a loaded machine): ping until it answers,
    // within a bound.
    let bound = std::time::Duration::from_secs(10);
    wait_until("the host to reach the node", bound, || {
        let ping = Command::new("ping")
            .args(["-c1", "-W1", "192.168.251.2"])
            .output()
            .unwrap();
        if ping.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&ping.stdout).into_owned())
        }
    });
    // Someone keeps the node's namespace (and so the host link) alive past the crash: once
    // the exec'd sleep is in box's namespace, not after a guess at how long that takes
    // (without it, the assertion below could still pass, on the kernel's slowness alone).
    let mut holder = env.spawn(&["exec", "hl", "box", "--", "sleep", "60"]);
    let box_inode = env.status("hl")["nodes"][0]["netns_inode"].as_u64();
    let holder_pid = holder.id();
    wait_until(
        "the exec'd sleep to hold box's namespace",
        std::time::Duration::from_secs(10),
        || {
            let cmdline =
                std::fs::read_to_string(format!("/proc/{holder_pid}/cmdline")).unwrap_or_default();
            let inode = netns_inode_of(holder_pid);
            if cmdline.starts_with("sleep") && inode.is_some() && inode == box_inode {
                Ok(())
            } else {
                Err(format!(
                    "{cmdline:?} in net:[{inode:?}], box is net:[{box_inode:?}]"
                ))
            }
        },
    );
    let pid = f.pid();
    signal(pid, libc::SIGKILL);
    wait_gone(pid);
    assert!(
        host_has(&name),
        "held: the host end outlives the supervisor"
    );
    env.ok(&["clean", "hl"]);
    assert!(!host_has(&name), "clean removed the journalled host link");
    let _ = holder.kill();
    let _ = holder.wait();
    drop(f);

    // A fleet whose host link went with it; then a look-alike of the same name appears.
    let f2 = env.up(&format!(
        "[fleet]\nname = \"hl2\"\n[[node]]\nname = \"box\"\nhost_link = {{ iface = \"m\", host_iface = \"{name}\" }}\n"
    ));
    let pid = f2.pid();
    signal(pid, libc::SIGKILL);
    wait_gone(pid);
    // The host end goes with its node, once the kernel's asynchronous cleanup gets to it.
    wait_until(
        "the host end to go with its node",
        std::time::Duration::from_secs(20),
        || {
            if host_has(&name) {
                Err(format!("{name} is still on the host"))
            } else {
                Ok(())
            }
        },
    );
    let look_alike = HostIface::look_alike(&name);
    env.ok(&["clean", "hl2"]);
    assert!(
        host_has(&look_alike.0),
        "clean never deletes an interface that is not its own"
    );
}

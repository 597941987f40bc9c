//! `nsfleet apply` on a live fleet: only what differs changes, untouched nodes keep their
//! processes and counters, a failure at any kernel operation puts the fleet back as it
//! was, a thousand routers join a running thousand, apply races every other command on
//! the fleet, and bad requests change nothing.

mod harness;

use harness::*;
use serde_json::Value;
use std::collections::BTreeMap;

/// A switch with three hosts, and `old` linked straight to h1.
const BASE: &str = r#"[fleet]
name = "NAME"
[[switch]]
name = "s"
pool = "10.70.0.0/24"
[[node]]
name = "h1"
commands = ["exec sleep 600"]
[[node]]
name = "h2"
commands = ["exec sleep 600"]
[[node]]
name = "h3"
commands = ["exec sleep 600"]
[[node]]
name = "old"
[[link]]
a = "h1:eth0"
b = "s"
[[link]]
a = "h2:eth0"
b = "s"
[[link]]
a = "h3:eth0"
b = "s"
[[link]]
a = { at = "h1:eth1", addrs = ["10.71.0.1/30"] }
b = { at = "old:eth0", addrs = ["10.71.0.2/30"] }
"#;

/// BASE changed in every way apply knows: `old` gone, `n` new (on the switch and to h1),
/// h1 with a route, a sysctl and an impairment, h2 running another command.
const CHANGED: &str = r#"[fleet]
name = "NAME"
[[switch]]
name = "s"
pool = "10.70.0.0/24"
[[node]]
name = "h1"
commands = ["exec sleep 600"]
routes = ["10.99.0.0/16 via 10.72.0.2"]
sysctls = { "net.ipv4.ip_forward" = 1 }
[[node]]
name = "h2"
commands = ["exec sleep 601"]
[[node]]
name = "h3"
commands = ["exec sleep 600"]
[[node]]
name = "n"
commands = ["exec sleep 600"]
[[link]]
a = "h1:eth0"
b = "s"
[[link]]
a = "h2:eth0"
b = "s"
[[link]]
a = "h3:eth0"
b = "s"
[[link]]
a = "n:eth0"
b = "s"
[[link]]
a = { at = "h1:eth1", addrs = ["10.72.0.1/30"], impair = { rate = "10mbit" } }
b = { at = "n:eth1", addrs = ["10.72.0.2/30"] }
"#;

fn named(text: &str, name: &str) -> String {
    text.replace("NAME", name)
}

/// Each node's processes, as (command, pid).
fn processes(env: &Env, fleet: &str) -> BTreeMap<String, Vec<(String, i64)>> {
    let s = env.status(fleet);
    (s["nodes"].as_array().unwrap().iter())
        .map(|n| {
            let procs = (n["processes"].as_array().unwrap().iter())
                .map(|p| {
                    let cmd = p["command"].as_str().unwrap().to_string();
                    (cmd, p["pid"].as_i64().unwrap_or(0))
                })
                .collect();
            (n["name"].as_str().unwrap().to_string(), procs)
        })
        .collect()
}

fn sh(env: &Env, fleet: &str, node: &str, cmd: &str) -> String {
    env.ok(&["exec", fleet, node, "--", "sh", "-c", cmd])
}

fn pings(env: &Env, fleet: &str, node: &str, to: &str) -> bool {
    // Three probes, one answer enough: a single one to a node just added back went
    // unanswered once in a cold CI run (both CPUs busy), and was answered in 7 runs after.
    (env.run(&["exec", fleet, node, "--", "ping", "-c3", "-i0.5", "-W2", to])
        .status)
        .success()
}

/// eth0's received packets and index in `node`.
fn rx(env: &Env, fleet: &str, node: &str) -> (u64, u64) {
    let v: Value = serde_json::from_str(&sh(env, fleet, node, "ip -j -s link show eth0")).unwrap();
    let l = &v[0];
    (
        l["stats64"]["rx"]["packets"].as_u64().unwrap(),
        l["ifindex"].as_u64().unwrap(),
    )
}

#[test]
fn apply_changes_only_what_differs_and_untouched_nodes_keep_processes_and_counters() {
    let env = Env::new("apply");
    let _fleet = env.up(&named(BASE, "aw"));
    assert!(pings(&env, "aw", "h3", "10.70.0.1"));
    let before = processes(&env, "aw");
    let (h3_rx, h3_index) = rx(&env, "aw", "h3");
    // Subscribed once it says so: every event from here on is seen. (After a fixed wait,
    // a loaded machine could let `apply` go first, and its events be missed.)
    let events = env.events("aw");
    let changed = env.file("changed.toml", &named(CHANGED, "aw"));
    let out: Value =
        serde_json::from_str(&env.ok(&["apply", changed.to_str().unwrap(), "--json"])).unwrap();
    assert_eq!(out["applied"], true, "{out}");
    assert_eq!(
        (&out["report"]["added"], &out["report"]["removed"]),
        (&Value::from(1), &Value::from(1)),
        "{out}"
    );
    let after = processes(&env, "aw");
    let names: Vec<&String> = after.keys().collect();
    assert_eq!(names, ["h1", "h2", "h3", "n", "s"]);
    // What did not change kept running; what changed started again.
    assert_eq!(after["h1"], before["h1"], "h1's process is untouched");
    assert_eq!(after["h3"], before["h3"], "h3 is untouched");
    assert_eq!(after["h2"][0].0, "exec sleep 601");
    assert_ne!(after["h2"][0].1, before["h2"][0].1);
    let (rx_now, index_now) = rx(&env, "aw", "h3");
    assert!(
        index_now == h3_index && rx_now >= h3_rx,
        "h3's counters were kept"
    );
    // The new node is wired both ways, and h1 has its route, sysctl and impairment.
    assert!(pings(&env, "aw", "n", "10.72.0.1"));
    assert!(pings(&env, "aw", "n", "10.70.0.1"));
    let h1 = sh(
        &env,
        "aw",
        "h1",
        "ip route; sysctl -n net.ipv4.ip_forward; tc qdisc show dev eth1; ip -br addr",
    );
    assert!(h1.contains("10.99.0.0/16 via 10.72.0.2"), "{h1}");
    assert!(h1.contains("\n1\n") && h1.contains("tbf"), "{h1}");
    assert!(!h1.contains("10.71.0.1"), "h1's old address went: {h1}");
    // The fleet's /etc/hosts, which every world binds, names the new node.
    let hosts = sh(&env, "aw", "h1", "cat /etc/hosts");
    assert!(
        hosts.contains("10.72.0.2\tn\n") && !hosts.contains("\told\n"),
        "{hosts}"
    );
    // And back: `old` returns, wired as it was; the sysctl is the kernel's default again.
    let base = env.file("base.toml", &named(BASE, "aw"));
    env.ok(&["apply", base.to_str().unwrap()]);
    assert!(pings(&env, "aw", "old", "10.71.0.1"));
    let h1 = sh(&env, "aw", "h1", "ip route; sysctl -n net.ipv4.ip_forward");
    assert!(!h1.contains("10.99.0.0") && h1.contains("\n0\n"), "{h1}");
    assert_eq!(processes(&env, "aw")["h3"], before["h3"]);
    let same = env.ok(&["apply", base.to_str().unwrap()]);
    assert!(same.contains("nothing to change"), "{same}");
    // The events stream saw the nodes and interfaces come and go, and ends with the fleet.
    env.ok(&["down", "aw"]);
    let seen = events.finish();
    let text = format!("{seen:?}");
    let saw = |event: &str, node: &str, action: &str| {
        seen.iter()
            .any(|e| e["event"] == event && e["node"] == node && e["action"] == action)
    };
    assert!(
        saw("node", "n", "added") && saw("node", "old", "removed"),
        "{text}"
    );
    assert!(
        saw("node", "old", "added") && saw("node", "h2", "changed"),
        "{text}"
    );
    assert!(
        saw("interface", "s", "added") && saw("interface", "s", "removed"),
        "{text}"
    );
    assert_eq!(seen.last().unwrap()["event"], "fleet_down", "{text}");
}

#[test]
fn a_pair_changed_at_one_end_and_addresses_changed_under_a_route_keep_working() {
    let env = Env::new("applypair");
    let pair = |mtu: &str, a: &str, b: &str| {
        format!("[fleet]\nname = \"ap2\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\nroutes = [\"10.9.0.0/16 via 10.1.0.1\"]\n[[link]]\na = {{ at = \"a:eth0\", addrs = [\"{a}\"]{mtu} }}\nb = {{ at = \"b:eth0\", addrs = [\"{b}\"] }}\n")
    };
    let _fleet = env.up(&pair("", "10.1.0.1/30", "10.1.0.2/30"));
    // Only the maker's end changes: the pair is made again, and b's end with it.
    let mtu = env.file(
        "mtu.toml",
        &pair(", mtu = 1400", "10.1.0.1/30", "10.1.0.2/30"),
    );
    env.ok(&["apply", mtu.to_str().unwrap()]);
    let b = sh(
        &env,
        "ap2",
        "b",
        "ip -br link show eth0; ip -br addr show eth0; ip route",
    );
    assert!(b.contains("LOWER_UP") && b.contains("10.1.0.2/30"), "{b}");
    assert!(b.contains("10.9.0.0/16 via 10.1.0.1"), "{b}");
    assert!(sh(&env, "ap2", "a", "ip link show eth0").contains("mtu 1400"));
    assert!(pings(&env, "ap2", "b", "10.1.0.1"));
    // New addresses under b's route: the route is there after, through the new subnet.
    let wider = env.file(
        "wider.toml",
        &pair(", mtu = 1400", "10.1.0.1/29", "10.1.0.3/29"),
    );
    env.ok(&["apply", wider.to_str().unwrap()]);
    let b = sh(&env, "ap2", "b", "ip -br addr show eth0; ip route");
    assert!(b.contains("10.1.0.3/29") && !b.contains("10.1.0.2/"), "{b}");
    assert!(b.contains("10.9.0.0/16 via 10.1.0.1"), "{b}");
    assert!(pings(&env, "ap2", "b", "10.1.0.1"));
}

#[test]
fn a_thousand_routers_join_a_running_thousand() {
    let env = Env::new("apply1000");
    let line = |count: u32| {
        format!("[fleet]\nname = \"ak\"\n[[generate]]\nkind = \"line\"\ncount = {count}\npool = \"10.80.0.0/16\"\n")
    };
    let _fleet = env.up(&line(1000));
    assert!(pings(&env, "ak", "r1", "10.80.0.2"));
    let (r1_rx, r1_index) = rx(&env, "ak", "r1");
    let more = env.file("more.toml", &line(2000));
    let out: Value =
        serde_json::from_str(&env.ok(&["apply", more.to_str().unwrap(), "--json"])).unwrap();
    assert_eq!(
        (&out["report"]["added"], &out["report"]["changed"]),
        (&Value::from(1000), &Value::from(1)),
        "only r1000 changes, by its new link: {}",
        out["report"]
    );
    assert_eq!(env.status("ak")["nodes"].as_array().unwrap().len(), 2000);
    // The seam and the far end are wired; r1 was not touched.
    let r1001 = sh(&env, "ak", "r1001", "ip -br -4 addr show eth0");
    let peer = r1001
        .split_whitespace()
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    let peer: std::net::Ipv4Addr = peer.parse().unwrap();
    let r1000_end = std::net::Ipv4Addr::from(u32::from(peer) - 1);
    assert!(
        pings(&env, "ak", "r1001", &r1000_end.to_string()),
        "{r1001}"
    );
    assert!(pings(&env, "ak", "r2000", "127.0.0.1"));
    let (rx_now, index_now) = rx(&env, "ak", "r1");
    assert!(index_now == r1_index && rx_now >= r1_rx);
}

#[test]
fn a_macvlan_switch_grows_a_lower_shrinks_and_grows_again_while_running() {
    let env = Env::new("applymv");
    let fleet = |count: u32| {
        format!("[fleet]\nname = \"am\"\n[[generate]]\nkind = \"fake-routers\"\ncount = {count}\nports = \"macvlan\"\n")
    };
    let _fleet = env.up(&fleet(1500));
    let (more, fewer) = (
        env.file("more.toml", &fleet(2100)),
        env.file("fewer.toml", &fleet(1500)),
    );
    let apply = |f: &std::path::Path| -> Value {
        serde_json::from_str(&env.ok(&["apply", f.to_str().unwrap(), "--json"])).unwrap()
    };
    // Right after `up`, while the kernel's link watch still works through the 1,500
    // macvlans' events: r2001..r2100 hang from a new lower, which must carry frames at once.
    let out = apply(&more);
    assert_eq!(
        out["report"]["changed"], 1,
        "only the switch: {}",
        out["report"]
    );
    assert!(
        pings(&env, "am", "r2100", "10.0.0.1"),
        "a new lower to the first"
    );
    assert!(
        pings(&env, "am", "r1", "10.0.8.51"),
        "the first to a new lower"
    );
    apply(&fewer);
    assert!(!pings(&env, "am", "r1", "10.0.8.51"), "r2100 is gone");
    // The lower left without macvlans stays, and takes them again when they come back.
    assert!(sh(&env, "am", "lan", "ip -br link").contains("br-mvl2"));
    apply(&more);
    assert!(pings(&env, "am", "r2050", "10.0.0.1"));
}

#[test]
fn a_macvlan_port_whose_node_end_changes_its_mac_is_made_again() {
    let env = Env::new("applymvmac");
    let fleet = |mac: &str| {
        format!("[fleet]\nname = \"amac\"\n[[switch]]\nname = \"sw\"\nports = \"macvlan\"\npool = \"10.77.0.0/24\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = {{ at = \"a:eth0\", mac = \"{mac}\" }}\nb = \"sw\"\n[[link]]\na = \"b:eth0\"\nb = \"sw\"\n")
    };
    let _fleet = env.up(&fleet("02:00:00:00:00:0a"));
    assert!(pings(&env, "amac", "a", "10.77.0.2"));
    let changed = env.file("changed.toml", &fleet("02:00:00:00:00:0b"));
    env.ok(&["apply", changed.to_str().unwrap()]);
    let link = sh(&env, "amac", "a", "ip -d link show eth0");
    assert!(
        link.contains("02:00:00:00:00:0b") && link.contains("macvlan"),
        "{link}"
    );
    assert!(pings(&env, "amac", "a", "10.77.0.2"));
}

#[test]
fn apply_refuses_another_fleets_file_a_bad_file_and_removing_a_node_exec_runs_in() {
    let env = Env::new("applybad");
    let _fleet = env.up(&named(BASE, "ab"));
    let before = processes(&env, "ab");
    let other = env.file("other.toml", &named(BASE, "zz"));
    let out = env.run(&["apply", other.to_str().unwrap(), "--name", "ab"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is fleet \"zz\", not \"ab\""), "{err}");
    let bad = env.file(
        "bad.toml",
        &named(BASE, "ab").replace("a = \"h3:eth0\"", "a = \"h9:eth0\""),
    );
    let out = env.run(&["apply", bad.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{}:", bad.display())) && err.contains("h9"),
        "{err}"
    );
    // What the kernel alone refuses (an IPv6 MTU above eth0's, which a scratch
    // namespace's `lo` accepts when the file is checked) is named at its place in the
    // file, as text and as JSON fields; nothing changes.
    let mtu = "sysctls = { \"net.ipv6.conf.eth0.mtu\" = 9000 }";
    let text = named(BASE, "ab").replace("name = \"h2\"\n", &format!("name = \"h2\"\n{mtu}\n"));
    let line = 1 + text.lines().position(|l| l == mtu).unwrap();
    let kernel = env.file("mtu.toml", &text);
    env.refused_in_place(
        "apply",
        &["apply", kernel.to_str().unwrap()],
        &kernel,
        line,
        "sysctl net.ipv6.conf.eth0.mtu = 9000: Invalid argument",
    );
    assert_eq!(processes(&env, "ab"), before, "nothing changed");
    // A shell in `old` (once it says it is there), then a file without `old`.
    let ready = env.files.join("in-old");
    let script = format!("touch {}; exec sleep 60", ready.display());
    let mut shell = env.spawn(&["exec", "ab", "old", "--", "sh", "-c", &script]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !ready.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the exec never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let changed = env.file("changed.toml", &named(CHANGED, "ab"));
    let out = env.run(&["apply", changed.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let _ = shell.kill();
    let _ = shell.wait();
    assert!(
        err.contains("remove node old, which nsfleet exec runs in"),
        "{err}"
    );
    assert_eq!(processes(&env, "ab"), before, "nothing changed");
    // The traffic generator sending from `old`: refused while it runs, fine once stopped
    // (it lets go of the node's sockets, which would keep the node from being reclaimed).
    env.ok(&[
        "gen",
        "ab",
        "--dev",
        "old:eth0",
        "--dst",
        "10.71.0.1",
        "--rate",
        "1000",
        "--duration",
        "60s",
        "--keep",
    ]);
    let out = env.run(&["apply", changed.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("which the traffic generator is sending on"),
        "{err}"
    );
    assert_eq!(processes(&env, "ab"), before, "nothing changed");
    env.ok(&["gen", "ab", "--stop"]);
    env.ok(&["apply", changed.to_str().unwrap()]);
    assert!(!processes(&env, "ab").contains_key("old"));
}

#[test]
fn apply_link_node_impair_gen_exec_and_status_at_once_each_all_or_nothing() {
    let env = Env::new("applyrace");
    let _fleet = env.up(&named(BASE, "ar"));
    let base = env.file("base.toml", &named(BASE, "ar"));
    let changed = env.file("changed.toml", &named(CHANGED, "ar"));
    let (base, changed) = (base.to_str().unwrap(), changed.to_str().unwrap());
    let before: Vec<&str> = vec!["h1", "h2", "h3", "old", "s"];
    let after: Vec<&str> = vec!["h1", "h2", "h3", "n", "s"];
    let ok = |args: &[&str]| env.ok(args);
    std::thread::scope(|t| {
        t.spawn(|| {
            for _ in 0..4 {
                ok(&["apply", changed]);
                ok(&["apply", base]);
            }
        });
        t.spawn(|| {
            for _ in 0..10 {
                ok(&["link", "ar", "h3:eth0", "down"]);
                ok(&["link", "ar", "h3:eth0", "up"]);
            }
        });
        t.spawn(|| {
            for _ in 0..5 {
                ok(&["node", "ar", "h1", "restart"]);
            }
        });
        t.spawn(|| {
            for _ in 0..10 {
                ok(&["impair", "ar", "h3:eth0", "--rate", "10mbit"]);
                ok(&["impair", "ar", "h3:eth0", "--clear"]);
            }
        });
        t.spawn(|| {
            for _ in 0..10 {
                ok(&["exec", "ar", "h3", "--", "true"]);
            }
        });
        t.spawn(|| {
            for _ in 0..3 {
                ok(&[
                    "gen",
                    "ar",
                    "--dev",
                    "h3:eth0",
                    "--dst",
                    "10.70.0.1",
                    "--count",
                    "1000",
                ]);
            }
        });
        t.spawn(|| {
            // The fleet before an apply or after it, never a mix.
            for _ in 0..30 {
                let s = env.status("ar");
                let mut names: Vec<&str> = (s["nodes"].as_array().unwrap().iter())
                    .map(|n| n["name"].as_str().unwrap())
                    .collect();
                names.sort();
                assert!(names == before || names == after, "{names:?}");
            }
        });
    });
    let s = env.status("ar");
    let names: Vec<&str> = (s["nodes"].as_array().unwrap().iter())
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 5, "{names:?}");
    assert!(names.contains(&"old"), "the last apply was of the base");
    assert!(pings(&env, "ar", "old", "10.71.0.1"));
    assert!(
        pings(&env, "ar", "h3", "10.70.0.1"),
        "h3's cable is plugged back"
    );
}

/// Everything of a node that `apply` may touch, as the kernel shows it, but for what a
/// re-made link cannot keep: its MAC (and so its link-local address) and counters.
#[cfg(feature = "fault-injection")]
fn picture(env: &Env, fleet: &str) -> BTreeMap<String, String> {
    let nodes = env.status(fleet)["nodes"].as_array().unwrap().clone();
    let mut out = BTreeMap::new();
    for n in nodes {
        let name = n["name"].as_str().unwrap().to_string();
        let procs: Vec<&str> = (n["processes"].as_array().unwrap().iter())
            .map(|p| p["command"].as_str().unwrap())
            .collect();
        let kernel = sh(
            env,
            fleet,
            &name,
            "ip -o link | sed -E 's/ link\\/ether.*//; s/@[^:]*:/:/; s/state [A-Z]+ //'; \
             ip -o addr | grep -v fe80 | awk '{print $2, $4}'; ip route; \
             tc qdisc | grep -v noqueue; sysctl -n net.ipv4.ip_forward",
        );
        out.insert(name, format!("{procs:?}\n{kernel}"));
    }
    out
}

#[cfg(feature = "fault-injection")]
#[test]
fn apply_failing_at_any_kernel_operation_puts_the_fleet_back_as_it_was() {
    let env = Env::new("applyfault");
    let base = env.file("af.toml", &named(BASE, "af"));
    let changed = env.file("changed.toml", &named(CHANGED, "af"));
    let mut walked = 0;
    for n in 1.. {
        assert!(n < 200, "the fault walk never reached the end of apply");
        let guard = Fleet {
            env: &env,
            name: "af".into(),
        };
        let up = (env.cmd(&["up", base.to_str().unwrap()]))
            .env("NSFLEET_FAULT", format!("{n}:fail@reshape"))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(
            up.status.success(),
            "{}",
            String::from_utf8_lossy(&up.stderr)
        );
        let before = picture(&env, "af");
        let out = env.run(&["apply", changed.to_str().unwrap()]);
        if out.status.success() {
            assert!(
                walked >= 10,
                "only {walked} fault points: apply is not covered"
            );
            eprintln!("apply fault points walked: {walked}");
            assert!(picture(&env, "af").contains_key("n"));
            return;
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("injected fault") && err.contains("rolled back: the fleet is as it was"),
            "{n}: {err}"
        );
        assert_eq!(picture(&env, "af"), before, "after fault {n}: {err}");
        drop(guard);
        walked = n;
    }
}

//! `nsfleet stats`: every interface's counters and every process's CPU and memory, read
//! from the kernel, checked against traffic the test sends and a process it keeps busy;
//! `--watch --json` refreshes; a node or interface that does not exist is named with the
//! closest ones.

mod harness;

use harness::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::Stdio;

const FLEET: &str = "[fleet]\nname = \"st\"\n[[generate]]\nkind = \"line\"\ncount = 3\n[[node]]\nname = \"busy\"\ncommands = [\"exec sh -c 'while :; do :; done'\"]\n[[switch]]\nname = \"sw\"\n[[node]]\nname = \"h\"\n[[link]]\na = { at = \"h:eth0\", addrs = [\"10.9.0.1/24\"] }\nb = \"sw\"\n[[link]]\na = { at = \"busy:eth0\", addrs = [\"10.9.0.2/24\"] }\nb = \"sw\"\n";

fn stats(env: &Env, args: &[&str]) -> Value {
    serde_json::from_str(&env.ok(&[&["stats", "st"], args, &["--json"]].concat())).unwrap()
}

/// Interface `iface` of node `node` in a stats reading.
fn iface<'a>(s: &'a Value, node: &str, iface: &str) -> &'a Value {
    let n = (s["nodes"].as_array().unwrap().iter())
        .find(|n| n["name"] == node)
        .unwrap_or_else(|| panic!("no {node} in {s}"));
    (n["interfaces"].as_array().unwrap().iter())
        .find(|i| i["name"] == iface)
        .unwrap_or_else(|| panic!("no {node}:{iface} in {s}"))
}

#[test]
fn counters_follow_the_packets_sent_and_processes_show_their_cpu() {
    let env = Env::new("stats");
    let _f = env.up(FLEET);
    let before = stats(&env, &[]);
    env.ok(&[
        "exec", "st", "r1", "--", "ping", "-c", "5", "-i", "0.1", "10.0.0.2",
    ]);
    let after = stats(&env, &[]);
    let delta = |node, name, key: &str| {
        iface(&after, node, name)[key].as_u64().unwrap()
            - iface(&before, node, name)[key].as_u64().unwrap()
    };
    // Five echo requests out of r1:eth0 and into r2:eth0, and perhaps an ARP exchange.
    for (node, name, key) in [("r1", "eth0", "tx_packets"), ("r2", "eth0", "rx_packets")] {
        let d = delta(node, name, key);
        assert!((5..=7).contains(&d), "{node}:{name} {key} grew by {d}");
    }
    assert!(
        delta("r1", "eth0", "tx_bytes") >= 5 * 98,
        "an echo request is 98 bytes on the wire"
    );
    assert_eq!(delta("r3", "eth0", "rx_packets"), 0, "nothing reached r3");
    assert_eq!(iface(&after, "r2", "eth1")["up"], true);

    // A switch's ports, counted without a link dump (see the supervisor's `stats`).
    let sw_before = stats(&env, &["sw"]);
    env.ok(&[
        "exec", "st", "h", "--", "ping", "-c", "4", "-i", "0.1", "10.9.0.2",
    ]);
    let sw_after = stats(&env, &["sw"]);
    let grew = |name| {
        iface(&sw_after, "sw", name)["rx_packets"].as_u64().unwrap()
            - iface(&sw_before, "sw", name)["rx_packets"]
                .as_u64()
                .unwrap()
    };
    assert!(
        (4..=6).contains(&grew("p1")),
        "h's pings into port p1: {}",
        grew("p1")
    );
    iface(&sw_after, "sw", "br0");

    let busy = (after["nodes"].as_array().unwrap().iter())
        .find(|n| n["name"] == "busy")
        .unwrap();
    let p = &busy["processes"][0];
    assert!(p["cpu_seconds"].as_f64().unwrap() > 0.0, "{busy}");
    assert!(p["rss_bytes"].as_u64().unwrap() > 0, "{busy}");

    // One node, one interface; a table for people.
    let one = stats(&env, &["r2:eth1"]);
    assert_eq!(one["nodes"].as_array().unwrap().len(), 1);
    assert_eq!(one["nodes"][0]["interfaces"].as_array().unwrap().len(), 1);
    let table = env.ok(&["stats", "st", "--sort", "cpu"]);
    assert!(table.starts_with("INTERFACE  RX PKTS  TX PKTS"), "{table}");
    assert!(
        table.contains("r2:eth1") && table.contains("busy"),
        "{table}"
    );
}

#[test]
fn watch_refreshes_with_rates_and_json_lines() {
    let env = Env::new("statswatch");
    let _f = env.up(FLEET);
    let mut child = env
        .cmd(&["stats", "st", "--watch", "--interval", "0.3", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let second: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let at = |v: &Value| v["at"].as_f64().unwrap();
    assert!(at(&second) - at(&first) >= 0.25, "{first} {second}");
    assert_eq!(second["nodes"].as_array().unwrap().len(), 6);

    // For people: rates between readings, redrawn. Read as it comes, until two frames
    // are in, rather than for a fixed time that a loaded machine may not draw one in.
    let mut out = env
        .cmd(&["stats", "st", "--watch", "--interval", "0.2"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = out.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = std::io::Read::read(&mut stdout, &mut buf) {
            if tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut bytes = Vec::new();
    let text = wait_until(
        "two frames of `stats --watch`",
        std::time::Duration::from_secs(30),
        || {
            bytes.extend(rx.try_iter().flatten());
            let text = String::from_utf8_lossy(&bytes).into_owned();
            if text.matches("\x1b[H\x1b[2J").count() >= 2 {
                Ok(text)
            } else {
                Err(text)
            }
        },
    );
    signal(out.id() as i32, libc::SIGINT);
    out.wait().unwrap();
    reader.join().unwrap();
    assert!(text.contains("RX PPS") && text.contains("CPU"), "{text}");
}

#[test]
fn a_node_or_interface_that_does_not_exist_is_named_with_the_closest() {
    let env = Env::new("statsbad");
    let _f = env.up(FLEET);
    for (target, expected) in [
        ("r9", "has no node \"r9\": did you mean"),
        (
            "r2:eth7",
            "node r2 has no interface \"eth7\" (it has eth0, eth1; did you mean eth0 or eth1?)",
        ),
    ] {
        env.fails(&["stats", "st", target], expected);
    }
    assert_eq!(
        env.run(&["stats", "st", "--sort", "size"]).status.code(),
        Some(2)
    );
}

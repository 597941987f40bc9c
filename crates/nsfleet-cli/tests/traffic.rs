//! The traffic generator on real veths between fleet nodes: exact counts at the receiver
//! for each method, ranges checked by capture (tcpdump), control while running, and bad
//! parameters refused before anything changes.

mod harness;

use harness::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::Stdio;

/// Two nodes, two links: tx:eth0 - rx:eth0 and tx:eth1 - rx:eth1.
fn pair(name: &str) -> String {
    format!(
        r#"[fleet]
name = "{name}"
[[node]]
name = "tx"
[[node]]
name = "rx"
[[link]]
a = {{ at = "tx:eth0", addrs = ["10.30.0.1/24"] }}
b = {{ at = "rx:eth0", addrs = ["10.30.0.2/24"] }}
[[link]]
a = {{ at = "tx:eth1", addrs = ["10.31.0.1/24"] }}
b = {{ at = "rx:eth1", addrs = ["10.31.0.2/24"] }}
"#
    )
}

fn gen(env: &Env, args: &[&str]) -> Value {
    let mut all = vec!["gen"];
    all.extend_from_slice(args);
    all.push("--json");
    serde_json::from_str(&env.ok(&all)).unwrap()
}

fn device<'a>(r: &'a Value, dev: &str) -> &'a Value {
    (r["results"]["threads"].as_array().unwrap().iter())
        .flat_map(|t| t["devices"].as_array().unwrap())
        .find(|d| d["dev"] == dev)
        .unwrap_or_else(|| panic!("no {dev} in {r:#}"))
}

fn delivered(r: &Value, dev: &str) -> u64 {
    let d = r["delivered"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["dev"] == dev);
    d.and_then(|d| d["sink"].as_u64())
        .unwrap_or_else(|| panic!("no sink count for {dev}: {r:#}"))
}

#[test]
fn a_fixed_count_arrives_exactly_by_every_method() {
    let env = Env::new("gen-exact");
    let _f = env.up(&pair("gx"));
    let send = |more: &[&str]| {
        let mut args = vec!["gx", "--dev", "tx:eth0", "--dst", "10.30.0.2"];
        args.extend_from_slice(more);
        gen(&env, &args)
    };
    for method in ["ring", "auto"] {
        let r = send(&["--count", "100k", "--sink", "--method", method]);
        let d = device(&r, "tx:eth0");
        assert_eq!(d["state"], "done", "{method}: {r:#}");
        assert_eq!(d["sent"], 100_000, "{method}");
        assert_eq!(
            delivered(&r, "tx:eth0"),
            100_000,
            "{method}: counted at the receiver"
        );
        assert!(d["pps"].as_f64().unwrap() > 0.0);
    }
    // The receiver's GRO (turned on for XDP frames) is turned off again by the next reset.
    send(&["--count", "1", "--method", "ring"]);
    let features = env.ok(&["exec", "gx", "rx", "--", "ethtool", "-k", "eth0"]);
    assert!(
        features.contains("generic-receive-offload: off"),
        "{features}"
    );
}

#[test]
fn ranges_produce_the_packets_expected() {
    let env = Env::new("gen-ranges");
    let _f = env.up(&pair("gr"));
    let pcap = env.file("cap.pcap", "");
    let mut cap = env
        .cmd(&[
            "exec",
            "gr",
            "rx",
            "--",
            "tcpdump",
            "-i",
            "eth0",
            "-n",
            "-U",
            "-c",
            "16",
            "-w",
            pcap.to_str().unwrap(),
            "udp",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(cap.stderr.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("listening"), "tcpdump: {line}");
    gen(
        &env,
        &[
            "gr",
            "--dev",
            "tx:eth0",
            "--dst-min",
            "10.30.0.2",
            "--dst-max",
            "10.30.0.5",
            "--udp-dst-min",
            "1000",
            "--udp-dst-max",
            "1001",
            "--count",
            "16",
            "--pkt-size",
            "100",
        ],
    );
    assert!(cap.wait().unwrap().success());
    let out = std::process::Command::new("tcpdump")
        .args(["-r", pcap.to_str().unwrap(), "-n", "-e"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut seen: Vec<String> = (text.lines())
        .map(|l| {
            // pkt_size counts the FCS, as pktgen does: 100 on the wire is 96 captured.
            assert!(l.contains("length 96:"), "frame size: {l}");
            let to = l.split(" > ").nth(2).unwrap();
            to.split(':').next().unwrap().to_string()
        })
        .collect();
    seen.sort();
    let mut want: Vec<String> = (2..=5)
        .flat_map(|h| [1000, 1001].map(|p| format!("10.30.0.{h}.{p}")))
        .flat_map(|x| [x.clone(), x])
        .collect();
    want.sort();
    assert_eq!(
        seen, want,
        "every address and port combination twice, in 16 packets"
    );
}

#[test]
fn control_while_running_keeps_every_count() {
    let env = Env::new("gen-control");
    let _f = env.up(&pair("gc"));
    // An endless device, paced, followed by its own `gen` until stopped.
    let first = env
        .cmd(&[
            "gen",
            "gc",
            "--dev",
            "tx:eth0",
            "--dst",
            "10.30.0.2",
            "--count",
            "0",
            "--ratep",
            "20k",
            "--sink",
            "--threads",
            "2",
            "--json",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // What the generator says of a device now, without changing anything.
    let now = |dev: &str| -> Result<Value, String> {
        let out = env.run(&["gen", "gc", "--results", "--json"]);
        let r: Value = serde_json::from_slice(&out.stdout).map_err(|_| {
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
        (r["results"]["threads"].as_array().into_iter().flatten())
            .flat_map(|t| t["devices"].as_array().into_iter().flatten())
            .find(|d| d["dev"] == dev)
            .cloned()
            .ok_or_else(|| format!("no {dev} yet: {r}"))
    };
    // The first device runs (its `gen` has reset, added and started it) before the second
    // is added: otherwise that reset could come after, and nothing would run "while".
    wait_until(
        "tx:eth0 to be sending",
        std::time::Duration::from_secs(20),
        || match now("tx:eth0") {
            Ok(d) if d["state"] == "running" && d["sent"].as_u64() > Some(0) => Ok(()),
            Ok(d) => Err(d.to_string()),
            Err(e) => Err(e),
        },
    );
    // A device added on the other thread while the first runs.
    let more = env.file(
        "more.conf",
        "thread 1 add_device tx:eth1\ndev tx:eth1 dst 10.31.0.2\ndev tx:eth1 count 5000\nstart\n",
    );
    gen(
        &env,
        &["gc", "--keep", "--sink", "--file", more.to_str().unwrap()],
    );
    // Stopped only once the second is done and the first has sent enough to judge by,
    // still running all along.
    wait_until(
        "tx:eth1 done while tx:eth0 still runs",
        std::time::Duration::from_secs(20),
        || {
            let (a, b) = (now("tx:eth0")?, now("tx:eth1")?);
            let a_runs = a["state"] == "running" && a["sent"].as_u64() > Some(1000);
            if a_runs && b["state"] == "done" {
                Ok(())
            } else {
                Err(format!("{a} {b}"))
            }
        },
    );
    let stopped = gen(&env, &["gc", "--stop"]);
    let out = first.wait_with_output().unwrap();
    assert!(out.status.success());
    let followed: Value = serde_json::from_slice(&out.stdout).unwrap();
    for r in [&stopped, &followed] {
        let a = device(r, "tx:eth0");
        assert_eq!(a["state"], "stopped");
        assert!(a["sent"].as_u64().unwrap() > 1000, "{a}");
        let b = device(r, "tx:eth1");
        assert_eq!(b["state"], "done");
        assert_eq!(b["sent"], 5000);
        assert_eq!(delivered(r, "tx:eth1"), 5000);
    }
    // Stopping loses no accounting: what was sent is what arrived.
    let again = gen(&env, &["gc", "--results"]);
    assert_eq!(
        Some(device(&again, "tx:eth0")["sent"].as_u64().unwrap()),
        Some(delivered(&again, "tx:eth0"))
    );
}

#[test]
fn bad_parameters_are_refused_and_change_nothing() {
    let env = Env::new("gen-bad");
    let _f = env.up(&pair("gb"));
    let bad_file = env.file(
        "bad.conf",
        "thread 0 add_device tx:eth0\ndev tx:eth0 pkt_size 9000\n",
    );
    let cases: [(&[&str], &str); 8] = [
        (
            &["--dev", "tx:eth0", "--dst", "10.30.0.2", "--pkt-size", "20"],
            "64 to 1518",
        ),
        (
            &["--dev", "nope:eth0", "--dst", "10.30.0.2"],
            "no node named \"nope\"",
        ),
        (
            &["--dev", "tx:eth7", "--dst", "10.30.0.2"],
            "has no interface \"eth7\"",
        ),
        (&["--dev", "tx:eth0", "--dst", "10.99.0.1"], "set dst_mac"),
        (&["--dev", "tx:eth0"], "no destination"),
        (
            &[
                "--dev",
                "tx:eth0",
                "--dst",
                "10.30.0.2",
                "--udp-dst-max",
                "99",
                "--method",
                "xdp",
            ],
            "method ring",
        ),
        (
            &["--file", bad_file.to_str().unwrap()],
            "bad.conf:2: pkt_size",
        ),
        (
            &["--dev", "tx:eth0", "--dst", "10.30.0.2", "--count", "ten"],
            "--count: expected a number",
        ),
    ];
    for (args, want) in cases {
        let mut all = vec!["gen", "gb"];
        all.extend_from_slice(args);
        let out = env.run(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(err.contains(want), "{args:?}: expected {want:?} in: {err}");
    }
    // Nothing ran: the generator has no device sending.
    let r = gen(&env, &["gb", "--results"]);
    let sent: u64 = (r["results"]["threads"].as_array().unwrap().iter())
        .map(|t| t["sent"].as_u64().unwrap())
        .sum();
    assert_eq!(sent, 0, "{r:#}");
}

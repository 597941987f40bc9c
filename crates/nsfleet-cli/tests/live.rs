//! A live fleet: cables pulled and plugged back while it runs, seen from both ends, and
//! bad names answered with the closest existing ones.

mod harness;

use harness::*;
use std::time::{Duration, Instant};

/// `ip -o link show IFACE` in a node.
fn link_line(env: &Env, fleet: &str, node: &str, iface: &str) -> String {
    env.ok(&["exec", fleet, node, "--", "ip", "-o", "link", "show", iface])
}

fn pings(env: &Env, fleet: &str, node: &str, to: &str) -> bool {
    env.run(&["exec", fleet, node, "--", "ping", "-c1", "-W1", to])
        .status
        .success()
}

#[test]
fn a_pulled_cable_takes_carrier_from_the_peer_and_plugging_it_back_restores_the_link() {
    let env = Env::new("cable");
    let _fleet = env.up("[fleet]\nname = \"cb\"\n[[generate]]\nkind = \"line\"\ncount = 3\npool = \"10.2.0.0/16\"\n");
    assert!(pings(&env, "cb", "r1", "10.2.0.2"));
    let out = env.ok(&["link", "cb", "r2:eth0", "down"]);
    assert!(
        out.contains("r2:eth0  DOWN") && out.contains("peer r1:eth0  UP, NO-CARRIER"),
        "{out}"
    );
    // The kernel's own view, from the peer: carrier gone, still administratively up.
    wait_until(
        "r1:eth0 to lose its carrier",
        Duration::from_secs(20),
        || {
            let line = link_line(&env, "cb", "r1", "eth0");
            if line.contains("NO-CARRIER") {
                Ok(())
            } else {
                Err(line)
            }
        },
    );
    assert!(
        !pings(&env, "cb", "r1", "10.2.0.2"),
        "no packet crosses a pulled cable"
    );
    // Addresses stay, as on an unplugged port; the other links are untouched.
    let r2 = env.ok(&[
        "exec", "cb", "r2", "--", "ip", "-br", "addr", "show", "eth0",
    ]);
    assert!(r2.contains("10.2.0.2/30"), "{r2}");
    assert!(pings(&env, "cb", "r3", "10.2.0.5"));
    let json: serde_json::Value =
        serde_json::from_str(&env.ok(&["link", "cb", "r1:eth0", "--json"])).unwrap();
    assert_eq!(
        (
            json["end"]["up"].as_bool(),
            json["end"]["carrier"].as_bool()
        ),
        (Some(true), Some(false)),
        "{json}"
    );
    assert_eq!(json["far"]["node"], "r2");
    env.ok(&["link", "cb", "r2:eth0", "up"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !pings(&env, "cb", "r1", "10.2.0.2") {
        assert!(Instant::now() < deadline, "the link is back");
    }
    let json: serde_json::Value =
        serde_json::from_str(&env.ok(&["link", "cb", "r1:eth0", "--json"])).unwrap();
    assert!(
        json["end"]["counters"]["rx_packets"].as_u64().unwrap() > 0,
        "{json}"
    );
}

#[test]
fn a_link_or_node_that_does_not_exist_is_answered_with_the_closest_names() {
    let env = Env::new("cablenames");
    let _fleet = env.up("[fleet]\nname = \"cn\"\n[[generate]]\nkind = \"line\"\ncount = 3\npool = \"10.2.0.0/16\"\n");
    let err = |args: &[&str]| {
        let out = env.run(args);
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = err(&["link", "cn", "r2:eth9", "down"]);
    assert!(
        e.contains("r2 has no interface \"eth9\" (did you mean eth0 or eth1?)"),
        "{e}"
    );
    let e = err(&["link", "cn", "r4:eth0"]);
    assert!(e.contains("has no node \"r4\": did you mean"), "{e}");
    let e = err(&["link", "cn", "r2", "down"]);
    assert!(e.contains("expected NODE:IFACE"), "{e}");
    // Nothing changed.
    assert!(pings(&env, "cn", "r1", "10.2.0.2"));
}

/// The node's processes as `status --json` has them: (pid, running, paused).
fn processes(env: &Env, fleet: &str, node: &str) -> Vec<(i64, bool, bool)> {
    let s = env.status(fleet);
    let n = (s["nodes"].as_array().unwrap().iter())
        .find(|n| n["name"] == node)
        .unwrap();
    (n["processes"].as_array().unwrap().iter())
        .map(|p| {
            (
                p["pid"].as_i64().unwrap(),
                p["running"] == true,
                p["paused"] == true,
            )
        })
        .collect()
}

fn proc_state(pid: i64) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(") ")
        .and_then(|(_, r)| r.chars().next())
        .unwrap_or('?')
}

#[test]
fn a_node_s_processes_stop_start_restart_pause_and_resume_while_its_links_stay() {
    let env = Env::new("nodeops");
    let _fleet = env.up(
        "[fleet]\nname = \"no\"\n[[generate]]\nkind = \"line\"\ncount = 2\npool = \"10.2.0.0/16\"\n[[node]]\nname = \"w\"\ncommands = [\"exec sleep 1000\", \"setsid sh -c 'exec sleep 1001' &\"]\n",
    );
    let first = processes(&env, "no", "w");
    let pid = first[0].0;
    // Pause: every process of the node stopped, the daemon that left its command too.
    let out = env.ok(&["node", "no", "w", "pause"]);
    assert!(out.contains("paused"), "{out}");
    let all: Vec<i64> = (processes(&env, "no", "w").iter())
        .filter(|p| p.1)
        .map(|p| p.0)
        .collect();
    assert!(all.len() >= 2, "{all:?}");
    for p in &all {
        assert_eq!(proc_state(*p), 'T', "pid {p} stopped");
    }
    let listed = processes(&env, "no", "w");
    assert!(
        listed.iter().filter(|p| p.1).all(|p| p.2),
        "status says paused: {listed:?}"
    );
    env.ok(&["node", "no", "w", "resume"]);
    assert_ne!(proc_state(pid), 'T');
    // Stop: nothing of the node runs; its namespace stays.
    env.ok(&["node", "no", "w", "stop"]);
    assert!(processes(&env, "no", "w").is_empty());
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists() || proc_state(pid) == 'Z');
    let again = env.run(&["node", "no", "w", "stop"]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("stopped already"));
    env.ok(&["exec", "no", "w", "--", "ip", "link", "show", "lo"]);
    // Start and restart: new processes each time.
    env.ok(&["node", "no", "w", "start"]);
    let started = processes(&env, "no", "w");
    assert!(started[0].1 && started[0].0 != pid, "{started:?}");
    env.ok(&["node", "no", "w", "restart"]);
    let restarted = processes(&env, "no", "w");
    assert!(
        restarted[0].1 && restarted[0].0 != started[0].0,
        "{restarted:?}"
    );
    // The other nodes and their link never noticed.
    assert!(pings(&env, "no", "r1", "10.2.0.2"));
    let bad = env.run(&["node", "no", "r1", "stop"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("runs no processes"));
}

#[test]
fn events_stream_link_process_and_node_changes_until_the_fleet_ends() {
    let env = Env::new("events");
    let fleet = env.up(
        "[fleet]\nname = \"ev\"\n[[generate]]\nkind = \"line\"\ncount = 2\npool = \"10.2.0.0/16\"\n[[node]]\nname = \"w\"\ncommands = [\"exec sleep 1000\"]\n",
    );
    let mut watch = env.events("ev");
    env.ok(&["link", "ev", "r2:eth0", "down"]);
    env.ok(&["link", "ev", "r2:eth0", "up"]);
    env.ok(&["node", "ev", "w", "restart"]);
    let link_is = |e: &serde_json::Value, node: &str, state: &str| {
        e["event"] == "link" && e["node"] == node && e["iface"] == "eth0" && e["state"] == state
    };
    // The link events come from the kernel's notifications in the nodes, read by the
    // supervisor on a thread of its own: down before they are read would lose them.
    for (node, state) in [
        ("r1", "no-carrier"),
        ("r2", "down"),
        ("r1", "up"),
        ("r2", "up"),
    ] {
        let link = |e: &serde_json::Value| link_is(e, node, state);
        if !watch.seen.iter().any(link) {
            watch.wait_for(&format!("{node} {state}"), Duration::from_secs(20), link);
        }
    }
    // A cable pulled just before `down`: its notification is queued in the node by the
    // time `link` returns, and the watch reads what is queued before it stops.
    env.ok(&["link", "ev", "r1:eth0", "down"]);
    drop(fleet); // down: the stream ends by itself
    let events = watch.finish();
    let has = |f: &dyn Fn(&serde_json::Value) -> bool| events.iter().any(f);
    let link = |node: &str, state: &str| events.iter().any(|e| link_is(e, node, state));
    assert!(link("r1", "down"), "the last pull: {events:?}");
    assert!(link("r1", "no-carrier") && link("r2", "down"), "{events:?}");
    assert!(link("r1", "up") && link("r2", "up"), "{events:?}");
    assert!(
        has(&|e| e["event"] == "process_exited" && e["node"] == "w" && e["exit"]["signal"] == 15),
        "{events:?}"
    );
    assert!(
        has(&|e| e["event"] == "process_started" && e["node"] == "w"),
        "{events:?}"
    );
    assert!(
        has(&|e| e["event"] == "node" && e["action"] == "restarted"),
        "{events:?}"
    );
    assert_eq!(events.last().unwrap()["event"], "fleet_down", "{events:?}");
    assert!(events.iter().all(|e| e["at"].as_f64().is_some()));
}

#[test]
fn link_node_impair_exec_and_status_at_once_on_one_fleet_each_all_or_nothing() {
    let env = Env::new("liveconc");
    let _fleet = env.up(
        "[fleet]\nname = \"lc\"\n[[generate]]\nkind = \"star\"\ncount = 6\n[[node]]\nname = \"w\"\ncommands = [\"exec sleep 1000\"]\n",
    );
    let env = &env;
    std::thread::scope(|s| {
        let ok = |args: Vec<String>| {
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            env.ok(&a)
        };
        for h in 1..=4 {
            s.spawn(move || {
                for _ in 0..6 {
                    ok(vec![
                        "link".into(),
                        "lc".into(),
                        format!("h{h}:eth0"),
                        "down".into(),
                    ]);
                    ok(vec![
                        "link".into(),
                        "lc".into(),
                        format!("h{h}:eth0"),
                        "up".into(),
                    ]);
                }
            });
        }
        s.spawn(move || {
            for _ in 0..4 {
                ok(vec![
                    "node".into(),
                    "lc".into(),
                    "w".into(),
                    "restart".into(),
                ]);
            }
        });
        s.spawn(move || {
            for _ in 0..4 {
                ok(vec![
                    "impair".into(),
                    "lc".into(),
                    "h5:eth0".into(),
                    "--rate".into(),
                    "10mbit".into(),
                ]);
                ok(vec![
                    "impair".into(),
                    "lc".into(),
                    "h5:eth0".into(),
                    "--clear".into(),
                ]);
            }
        });
        s.spawn(move || {
            for _ in 0..8 {
                ok(vec![
                    "exec".into(),
                    "lc".into(),
                    "h6".into(),
                    "--".into(),
                    "ip".into(),
                    "link".into(),
                ]);
                let st: serde_json::Value =
                    serde_json::from_str(&ok(vec!["status".into(), "lc".into(), "--json".into()]))
                        .unwrap();
                assert_eq!(
                    st["fleets"][0]["nodes"].as_array().unwrap().len(),
                    8,
                    "every node, always"
                );
            }
        });
    });
    // Every cable is back, the node runs its command once, in one world.
    for h in 1..=6 {
        let j: serde_json::Value =
            serde_json::from_str(&env.ok(&["link", "lc", &format!("h{h}:eth0"), "--json"]))
                .unwrap();
        assert_eq!(
            (j["end"]["up"].as_bool(), j["far"]["carrier"].as_bool()),
            (Some(true), Some(true)),
            "h{h}: {j}"
        );
    }
    let running = processes(env, "lc", "w")
        .into_iter()
        .filter(|p| p.1)
        .count();
    assert_eq!(running, 1);
    let sup = env.status("lc")["pid"].as_i64().unwrap();
    let inits = std::fs::read_dir("/proc").unwrap().flatten().filter(|e| {
        let p = e.path();
        std::fs::read_to_string(p.join("comm")).is_ok_and(|c| c.trim() == "nsfleet-node")
            && std::fs::read_to_string(p.join("stat")).is_ok_and(|s| {
                s.rsplit_once(") ")
                    .is_some_and(|(_, r)| r.split(' ').nth(1) == Some(&sup.to_string()))
            })
    });
    assert_eq!(
        inits.count(),
        1,
        "one world for w, none left over from its restarts"
    );
}

#[test]
fn apply_dry_run_shows_the_plan_against_the_running_fleet_and_changes_nothing() {
    let env = Env::new("applyplan");
    let base = "[fleet]\nname = \"ap\"\n[[generate]]\nkind = \"line\"\ncount = 3\npool = \"10.2.0.0/16\"\n";
    let _fleet = env.up(base);
    let same = env.file("same.toml", base);
    let out = env.ok(&["apply", same.to_str().unwrap(), "--dry-run"]);
    assert!(out.contains("nothing to change"), "{out}");
    // What runs, not what was created: a live impairment shows as a change.
    env.ok(&["impair", "ap", "r2:eth0", "--rate", "10mbit"]);
    let more = env.file(
        "more.toml",
        &format!("{base}[[node]]\nname = \"x\"\nsysctls = {{ \"net.ipv4.ip_forward\" = 1 }}\n"),
    );
    let plan: serde_json::Value =
        serde_json::from_str(&env.ok(&["apply", more.to_str().unwrap(), "--dry-run", "--json"]))
            .unwrap();
    let changes: Vec<(String, String)> = (plan["changes"].as_array().unwrap().iter())
        .map(|c| {
            (
                c["op"].as_str().unwrap().to_string(),
                c["object"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        changes.contains(&("add".into(), "node x".into())),
        "{changes:?}"
    );
    assert!(
        changes.contains(&("change".into(), "r2:eth0".into())),
        "{changes:?}"
    );
    // A bad file is refused with its line; the fleet is as it was.
    let bad = env.file(
        "bad.toml",
        "[fleet]\nname = \"ap\"\n[[node]]\nname = \"a;b\"\n",
    );
    let out = env.run(&["apply", bad.to_str().unwrap(), "--dry-run"]);
    let err = String::from_utf8_lossy(&out.stderr);
    let at = format!("{}:4:", bad.display());
    assert!(
        err.contains(&at) && err.contains("may contain only"),
        "{err}"
    );
    let other = env.file(
        "other.toml",
        "[fleet]\nname = \"zz\"\n[[node]]\nname = \"a\"\n",
    );
    let out = env.run(&[
        "apply",
        other.to_str().unwrap(),
        "--name",
        "ap",
        "--dry-run",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("is fleet \"zz\", not \"ap\""));
    assert_eq!(env.status("ap")["nodes"].as_array().unwrap().len(), 3);
}

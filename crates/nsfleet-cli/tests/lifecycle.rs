//! `up`, `status`, `exec`, `down` of a real fleet, and what `kill -9` leaves (nothing).

mod harness;

use harness::*;

const FLEET_200: &str = r#"
[fleet]
name = "big"

[defaults]
sysctls = { "net.ipv4.ip_forward" = 1 }

[[node]]
name = "n{i}"
count = 199

[[node]]
name = "server"
commands = ["echo ready in $(cat /proc/sys/net/ipv4/ip_forward); exec sleep 1000"]
"#;

#[test]
fn a_200_node_fleet_comes_up_is_inspected_and_goes_down_reclaimed() {
    let env = Env::new("lifecycle");
    let fleet = env.up(FLEET_200);
    let s = env.status("big");
    assert_eq!(s["name"], "big");
    assert_eq!(s["state"], "up");
    assert_eq!(s["node_count"], 200);
    assert!(s["pid"].as_i64().unwrap() > 1);
    let names: Vec<&str> = s["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.first(), Some(&"n1"));
    assert!(names.contains(&"server"));
    assert_eq!(s["processes_running"], 1);

    let lo = env.ok(&[
        "exec", "big", "n150", "--", "ip", "-o", "link", "show", "lo",
    ]);
    assert!(lo.contains(",UP"), "{lo}");
    let fwd = env.ok(&[
        "exec",
        "big",
        "n7",
        "--",
        "cat",
        "/proc/sys/net/ipv4/ip_forward",
    ]);
    assert_eq!(fwd.trim(), "1");
    let log = std::fs::read_to_string(env.run_dir.join("big/logs/server.log")).unwrap();
    assert_eq!(log.trim(), "ready in 1");

    let (_, pids) = fleet.footprint();
    let sup = fleet.pid();
    let namespaces = netns_held_by(sup);
    assert_eq!(
        namespaces.len(),
        201,
        "200 nodes and the fleet's hub, held by descriptors"
    );
    let out = env.ok(&["down", "big", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["nodes"], 200);
    assert_eq!(v["reclaimed"], 200, "{out}");
    assert!(v["reclaimed_ms"].as_f64().unwrap() >= v["teardown_ms"].as_f64().unwrap());
    std::mem::forget(fleet);
    wait_gone(sup);
    assert!(pids.iter().all(|p| !alive(*p)), "node processes reaped");
    assert_eq!(
        still_alive(&namespaces),
        0,
        "every namespace of the fleet is gone"
    );
    assert!(env.fleet_dirs().is_empty(), "run folder removed");
}

#[test]
fn exec_connects_stdin_and_passes_the_exit_status_through() {
    let env = Env::new("exec");
    let _fleet = env.up("[fleet]\nname = \"ex\"\n[[node]]\nname = \"a\"\n");
    let out = env.run_with_stdin(
        &["exec", "ex", "a", "--", "sh", "-c", "tr a-z A-Z; exit 7"],
        b"hello\n",
    );
    assert_eq!(out.status.code(), Some(7));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "HELLO\n");
    let nets = env.ok(&["exec", "ex", "a", "--", "ls", "/sys/class/net"]);
    assert_eq!(
        nets.trim(),
        "lo",
        "/sys shows the node's interfaces, as under ip netns exec"
    );
    let missing = env.run(&["exec", "ex", "a", "--", "/no/such/command"]);
    assert_eq!(missing.status.code(), Some(127));
    let bad = env.run(&["exec", "ex", "zz", "--", "true"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("has no node \"zz\""));
}

#[test]
fn processes_are_started_logged_and_reaped_at_down() {
    let env = Env::new("procs");
    let fleet = env.up(
        "[fleet]\nname = \"pr\"\n[defaults]\ncommands = [\"echo out; echo err >&2; exec sleep 1000\", \"trap '' TERM; sleep 1000\"]\n[[node]]\nname = \"p{i}\"\ncount = 3\n",
    );
    let s = env.status("pr");
    assert_eq!(s["processes_running"], 6);
    let log = std::fs::read_to_string(env.run_dir.join("pr/logs/p2.log")).unwrap();
    assert!(log.contains("out") && log.contains("err"), "{log}");
    let (_, pids) = fleet.footprint();
    assert_eq!(pids.len(), 6);
    // The supervisor blocks its signals for its signal thread; its children must not
    // inherit that, or they would never see the SIGTERM of `down`.
    let status = std::fs::read_to_string(format!("/proc/{}/status", pids[0])).unwrap();
    assert!(status.contains("SigBlk:\t0000000000000000"), "{status}");

    // The second command ignores SIGTERM: down escalates to SIGKILL after the grace period.
    env.ok(&["down", "pr"]);
    std::mem::forget(fleet);
    assert!(pids.iter().all(|p| !alive(*p)));
}

#[test]
fn kill_9_of_the_supervisor_leaves_no_namespace_process_or_mount() {
    let env = Env::new("kill9");
    let fleet = env.up(
        "[fleet]\nname = \"k9\"\n[defaults]\ncommands = [\"exec sleep 1000\", \"setsid sh -c 'sleep 1001 & sleep 1002' & exit 0\"]\n[[node]]\nname = \"k{i}\"\ncount = 20\n",
    );
    let (_, pids) = fleet.footprint();
    let sup = fleet.pid();
    let namespaces = netns_held_by(sup);
    assert_eq!(namespaces.len(), 21);
    // The daemonised sleeps (`sleep 1001` and `sleep 1002`, two per node) escaped their
    // process group and their parent; find them too, by the nodes' network namespaces they
    // are in. They are forked after `up` returns: wait until all 40 exist (`exec sleep
    // 1000`, the nodes' own commands, are in `pids` and not counted here).
    let inodes: Vec<u64> = namespaces.iter().filter_map(|h| h.inode()).collect();
    let in_fleet = |p: i32| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(format!("/proc/{p}/ns/net")).is_ok_and(|m| inodes.contains(&m.ino()))
    };
    let daemons = || -> Vec<i32> {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|p| {
                std::fs::read_to_string(format!("/proc/{p}/cmdline")).is_ok_and(|c| {
                    c.starts_with("sleep\u{0}1001\u{0}") || c.starts_with("sleep\u{0}1002\u{0}")
                }) && in_fleet(*p)
            })
            .collect()
    };
    let escaped = wait_until(
        "the 40 daemonised sleeps in the fleet's nodes",
        std::time::Duration::from_secs(20),
        || {
            let found = daemons();
            if found.len() >= 40 {
                Ok(found)
            } else {
                Err(found)
            }
        },
    );
    assert_eq!(escaped.len(), 40, "daemons found: {escaped:?}");
    signal(sup, libc::SIGKILL);
    wait_gone(sup);
    // The kernel kills the PID namespace's processes and frees the namespaces (a closed
    // socket lets go of its namespace a grace period later) asynchronously: wait for it.
    wait_until(
        "every process and namespace of the fleet to die with the supervisor",
        std::time::Duration::from_secs(20),
        || {
            let left: Vec<i32> = (pids.iter().chain(&escaped).copied())
                .filter(|p| alive(*p))
                .collect();
            let namespaces_left = still_alive(&namespaces);
            if left.is_empty() && namespaces_left == 0 {
                Ok(())
            } else {
                Err(format!(
                    "processes alive: {left:?}; namespaces alive: {namespaces_left}"
                ))
            }
        },
    );
    assert!(
        !std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .contains("nsfs"),
        "no namespace mount"
    );
    let s = env.status("k9");
    assert_eq!(s["state"], "dead");
    env.ok(&["clean", "k9"]);
    assert!(env.fleet_dirs().is_empty());
    std::mem::forget(fleet);
}

#[test]
fn a_second_up_of_a_name_already_up_is_refused() {
    let env = Env::new("twice");
    let text = "[fleet]\nname = \"dup\"\n[[node]]\nname = \"a\"\n";
    let _fleet = env.up(text);
    let f = env.file("again.toml", text);
    let out = env.run(&["up", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already up"));
    assert_eq!(
        env.status("dup")["state"],
        "up",
        "the running fleet is untouched"
    );
}

#[test]
fn a_failure_half_way_through_up_rolls_everything_back() {
    let env = Env::new("rollback");
    // Valid on paper (an interface's sysctl values are probed on a scratch namespace's
    // `lo`, whose MTU is 65536), but the kernel refuses an IPv6 MTU above the link's once
    // eth0 exists: the Configure phase fails after 30 namespaces and their links are made.
    let f = env.file(
        "bad.toml",
        "[fleet]\nname = \"rb\"\n[[generate]]\nkind = \"line\"\ncount = 30\nnode = { sysctls = { \"net.ipv6.conf.eth0.mtu\" = 9000 }, commands = [\"sleep 1000\"] }\n",
    );
    // The kernel's refusal, half-way, names the file, the line and the column of the
    // sysctl (as text, and as JSON fields), and nothing is left in the run directory.
    let args = ["up", f.to_str().unwrap()];
    let refusal = "sysctl net.ipv6.conf.eth0.mtu = 9000: Invalid argument";
    env.refused("half-way", &args, &f, 6, refusal);
    let err = String::from_utf8_lossy(&env.run(&args).stderr).into_owned();
    assert!(
        err.contains("rolled back: every node this run created is gone"),
        "{err}"
    );
    assert!(err.contains(&format!("{}:6:49: ", f.display())), "{err}");
}

#[test]
fn clean_never_touches_a_running_fleet_or_a_folder_that_is_not_ours() {
    let env = Env::new("clean");
    let _fleet = env.up("[fleet]\nname = \"live\"\n[[node]]\nname = \"a\"\n");
    let lookalike = env.run_dir.join("lookalike");
    std::fs::create_dir_all(&lookalike).unwrap();
    std::fs::write(lookalike.join("control.sock"), "").unwrap();
    assert_eq!(env.run(&["clean", "live"]).status.code(), Some(1));
    env.ok(&["clean", "--all"]);
    assert!(
        lookalike.join("control.sock").exists(),
        "not ours, not touched"
    );
    assert_eq!(env.status("live")["state"], "up");
    let down_unknown = env.run(&["down", "nope"]);
    assert!(String::from_utf8_lossy(&down_unknown.stderr).contains("no fleet named \"nope\""));
}

#[test]
fn down_names_whoever_still_holds_a_node_namespace() {
    let env = Env::new("held");
    let fleet = env.up("[fleet]\nname = \"hd\"\n[[node]]\nname = \"n{i}\"\ncount = 2\n");
    // A user's shell, left running inside n1, keeps n1's namespace alive past `down`.
    let mut shell = env.spawn(&["exec", "hd", "n1", "--", "sleep", "30"]);
    let shell_pid = shell.id();
    wait_until(
        "the exec'd sleep to run in n1",
        std::time::Duration::from_secs(10),
        || {
            let cmdline =
                std::fs::read_to_string(format!("/proc/{shell_pid}/cmdline")).unwrap_or_default();
            if cmdline.starts_with("sleep") {
                Ok(())
            } else {
                Err(cmdline)
            }
        },
    );
    let out = env.ok(&["down", "hd", "--json"]);
    std::mem::forget(fleet);
    shell.kill().unwrap();
    shell.wait().unwrap();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["reclaimed"], 1, "{out}");
    assert_eq!(v["held"][0]["node"], "n1", "{out}");
    let who = v["held"][0]["holders"][0].as_str().unwrap();
    assert_eq!(who, format!("pid {} (sleep)", shell.id()), "{out}");
}

/// Polls `status` until the supervisor itself answers with `state` (the run folder alone
/// can say "starting" too, before there is a supervisor); returns its pid.
fn wait_for_state(env: &Env, name: &str, state: &str) -> i32 {
    for _ in 0..400 {
        let out = env.run(&["status", name, "--json"]);
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&out.stdout) {
            let from_supervisor = v["fleets"][0]["workers"].as_u64().unwrap_or(0) > 0;
            if v["fleets"][0]["state"] == state && from_supervisor {
                return v["fleets"][0]["pid"].as_i64().unwrap() as i32;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("fleet {name} never reached state {state}");
}

#[test]
fn ctrl_c_of_up_during_creation_rolls_the_fleet_back() {
    let env = Env::new("ctrlc");
    let f = env.file(
        "big.toml",
        "[fleet]\nname = \"cc\"\n[[node]]\nname = \"n{i}\"\ncount = 3000\n",
    );
    let mut up = env.spawn(&["up", f.to_str().unwrap()]);
    let sup = wait_for_state(&env, "cc", "starting");
    signal(up.id() as i32, libc::SIGINT);
    up.wait().unwrap();
    wait_gone(sup);
    assert!(
        env.fleet_dirs().is_empty(),
        "nothing of the cancelled fleet is left"
    );
}

#[test]
fn sigterm_to_the_supervisor_ends_the_fleet_cleanly() {
    let env = Env::new("sigterm");
    let fleet = env.up("[fleet]\nname = \"st\"\n[[node]]\nname = \"n{i}\"\ncount = 10\ncommands = [\"exec sleep 1000\"]\n");
    let (_, pids) = fleet.footprint();
    let sup = fleet.pid();
    let namespaces = netns_held_by(sup);
    signal(sup, libc::SIGTERM);
    wait_gone(sup);
    std::mem::forget(fleet);
    assert!(pids.iter().all(|p| !alive(*p)));
    assert_eq!(still_alive(&namespaces), 0);
    assert!(
        env.fleet_dirs().is_empty(),
        "a clean end leaves no folder to clean"
    );
}

#[test]
fn a_fleet_with_an_owner_goes_down_when_its_owner_ends_however_it_ends() {
    let env = Env::new("owner");
    for (k, sig) in [libc::SIGKILL, libc::SIGTERM, libc::SIGHUP]
        .into_iter()
        .enumerate()
    {
        let mut owner = std::process::Command::new("sleep");
        owner.arg("1000");
        // With the signals' default actions: a suite started under nohup (SIGHUP
        // ignored) must still see what each does to the owner.
        // SAFETY: signal(2) between fork and exec, async-signal-safe; it touches no
        // memory of the parent.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut owner, || {
                for sig in [libc::SIGHUP, libc::SIGTERM, libc::SIGINT] {
                    libc::signal(sig, libc::SIG_DFL);
                }
                Ok(())
            });
        }
        let mut owner = owner.spawn().unwrap();
        let name = format!("ow{k}");
        let file = env.file(
            &format!("{name}.toml"),
            &format!("[fleet]\nname = \"{name}\"\n[[node]]\nname = \"n{{i}}\"\ncount = 5\ncommands = [\"exec sleep 1000\"]\n"),
        );
        env.ok(&[
            "up",
            file.to_str().unwrap(),
            "--owner",
            &owner.id().to_string(),
        ]);
        let fleet = Fleet { env: &env, name };
        let (_, pids) = fleet.footprint();
        let sup = fleet.pid();
        let namespaces = netns_held_by(sup);
        assert!(alive(sup), "the fleet lives while its owner does");
        signal(owner.id() as i32, sig);
        owner.wait().unwrap();
        wait_gone(sup);
        std::mem::forget(fleet);
        assert!(pids.iter().all(|p| !alive(*p)), "signal {sig}");
        wait_freed(&namespaces);
        wait_until(
            "the fleet's folder removed",
            std::time::Duration::from_secs(10),
            || {
                env.fleet_dirs()
                    .is_empty()
                    .then_some(())
                    .ok_or(env.fleet_dirs())
            },
        );
    }
    // An owner that is not there is refused, and nothing is made.
    let file = env.file(
        "gone.toml",
        "[fleet]\nname = \"gone\"\n[[node]]\nname = \"n\"\n",
    );
    let err = env.fails(
        &["up", file.to_str().unwrap(), "--owner", "4194303"],
        "--owner 4194303: no such process",
    );
    assert!(env.fleet_dirs().is_empty(), "{err}");
}

#[test]
fn down_no_wait_returns_before_reclamation_and_the_supervisor_finishes_alone() {
    let env = Env::new("nowait");
    let fleet = env.up("[fleet]\nname = \"nw\"\n[[node]]\nname = \"n{i}\"\ncount = 50\n");
    let sup = fleet.pid();
    let namespaces = netns_held_by(sup);
    let out = env.ok(&["down", "nw", "--no-wait", "--json"]);
    std::mem::forget(fleet);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["nodes"], 50);
    assert!(
        v.get("reclaimed").is_none(),
        "--no-wait does not wait for reclamation: {out}"
    );
    wait_gone(sup);
    assert_eq!(still_alive(&namespaces), 0);
    assert!(env.fleet_dirs().is_empty());
}

/// Waits until the fleet's folder is gone, or is left behind by owners that are all dead
/// (a leak, which the caller's assertion then reports). The supervisor is found by the pid
/// in the record: forked without exec, it always shows the command line of the `up` that
/// forked it. A folder without a record is being created or removed.
fn wait_folder_settled(env: &Env, name: &str) {
    let dir = env.run_dir.join(name);
    for _ in 0..400 {
        if !dir.exists() {
            return;
        }
        let rec = std::fs::read_to_string(dir.join("fleet.json")).unwrap_or_default();
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&rec) {
            let owner_alive = ["supervisor", "creator"]
                .iter()
                .filter_map(|k| v[k]["pid"].as_i64())
                .any(|p| alive(p as i32));
            if !owner_alive {
                return;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
}

#[test]
fn ctrl_c_of_up_at_any_moment_leaves_nothing() {
    let env = Env::new("ctrlc-early");
    let f = env.file(
        "f.toml",
        "[fleet]\nname = \"ce\"\n[[node]]\nname = \"n{i}\"\ncount = 300\n",
    );
    for delay_ms in [0, 1, 3, 6, 10, 20, 40] {
        let mut up = env.spawn(&["up", f.to_str().unwrap()]);
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        signal(up.id() as i32, libc::SIGINT);
        let finished = up.wait().unwrap().success();
        if finished {
            // Too late to interrupt: the fleet came up. Take it down for the next round.
            env.ok(&["down", "ce"]);
        }
        wait_folder_settled(&env, "ce");
        let left =
            |f: &str| std::fs::read_to_string(env.run_dir.join("ce").join(f)).unwrap_or_default();
        assert!(
            env.fleet_dirs().is_empty(),
            "after {delay_ms} ms: {:?} is left; record {}; supervisor log {}",
            env.fleet_dirs(),
            left("fleet.json"),
            left("supervisor.log")
        );
    }
}

/// The holder processes of a supervisor: its live children named `nsfleet-hold` (forked,
/// not exec'd, so their command line is the supervisor's).
fn holders_of(sup: i32) -> Vec<i32> {
    let procs = std::fs::read_dir("/proc").unwrap().flatten();
    procs
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| {
            let status = std::fs::read_to_string(format!("/proc/{p}/status")).unwrap_or_default();
            let name = nsfleet::core::holder::HOLDER_NAME.to_str().unwrap();
            status.contains(&format!("\nPPid:\t{sup}\n"))
                && status.starts_with(&format!("Name:\t{name}\n"))
                && !status.contains("\nState:\tZ")
        })
        .collect()
}

#[test]
fn holder_processes_keep_namespaces_work_and_die_with_the_supervisor() {
    let env = Env::new("holders");
    let file = env.file(
        "hd.toml",
        "[fleet]\nname = \"hd\"\n[[generate]]\nkind = \"line\"\ncount = 12\npool = \"10.9.0.0/24\"\nroutes = true\n",
    );
    let up = || {
        let out = env
            .cmd(&["up", file.to_str().unwrap()])
            .env("NSFLEET_HOLDER_CAP", "5")
            .output()
            .unwrap();
        // Taken down (or cleaned up after) even if the test fails.
        let guard = Fleet {
            env: &env,
            name: "hd".into(),
        };
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(err.contains("holder processes keep"), "{err}");
        guard
    };
    let fleet = up();
    let sup = fleet.pid();
    let holders = holders_of(sup);
    assert_eq!(holders.len(), 3, "12 nodes, at most 5 per holder");
    let held: Vec<_> = holders.iter().flat_map(|h| netns_held_by(*h)).collect();
    assert_eq!(held.len(), 12, "every node's namespace is in a holder");
    assert!(netns_held_by(sup).len() < 12, "and not in the supervisor");
    // Workers reach held namespaces: the line is wired and routed end to end.
    let far = env.ok(&[
        "exec", "hd", "r12", "--", "ip", "-4", "-br", "addr", "show", "eth0",
    ]);
    let addr = far
        .split_whitespace()
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    env.ok(&[
        "exec", "hd", "r1", "--", "ping", "-c", "1", "-W", "2", &addr,
    ]);
    let down = env.ok(&["down", "hd"]);
    std::mem::forget(fleet);
    assert!(down.contains("reclaimed 12 of 12"), "{down}");
    assert_eq!(still_alive(&held), 0);
    for h in &holders {
        wait_gone(*h);
    }

    // However the supervisor dies, its holders and their namespaces go with it.
    let fleet = up();
    let sup = fleet.pid();
    let holders = holders_of(sup);
    let held: Vec<_> = holders.iter().flat_map(|h| netns_held_by(*h)).collect();
    assert_eq!(held.len(), 12);
    signal(sup, libc::SIGKILL);
    wait_gone(sup);
    for h in &holders {
        wait_gone(*h);
    }
    // Freed by the kernel asynchronously once nothing holds them: wait for it.
    wait_until(
        "every namespace to die with the supervisor",
        std::time::Duration::from_secs(20),
        || match still_alive(&held) {
            0 => Ok(()),
            n => Err(format!("{n} of {} namespaces still alive", held.len())),
        },
    );
    env.ok(&["clean", "hd"]);
}

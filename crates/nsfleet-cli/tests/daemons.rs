//! Nodes that run real network software: a node's world (its name, private directories
//! and files, the fleet's /etc/hosts, its PID namespace), and real FRR and BIRD routers
//! generated from one template, brought to full reachability and taken down to nothing.

mod harness;

use harness::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// Copies `examples/PATH` to the same path beside the test's topology files.
fn copy_example(env: &Env, path: &str) {
    let to = env.files.join(path);
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(examples().join(path), to).unwrap();
}

/// The nodes' network namespace inodes, as `status` reports them.
fn netns_inodes(env: &Env, fleet: &str) -> Vec<u64> {
    let s = env.status(fleet);
    (s["nodes"].as_array().unwrap().iter())
        .map(|n| n["netns_inode"].as_u64().unwrap())
        .collect()
}

/// Processes whose network namespace is one of `inodes`, with their names. Only while
/// those namespaces live: once freed, their inode numbers go to new namespaces (a
/// parallel test's) at once.
fn processes_in(inodes: &[u64]) -> Vec<(i32, String)> {
    use std::os::unix::fs::MetadataExt;
    let pids = std::fs::read_dir("/proc").unwrap().flatten();
    pids.filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| {
            std::fs::metadata(format!("/proc/{p}/ns/net")).is_ok_and(|m| inodes.contains(&m.ino()))
        })
        .map(|p| {
            let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
            (p, comm)
        })
        .collect()
}

/// Mount points of this (the host's) mount namespace.
fn host_mounts() -> Vec<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    info.lines()
        .filter_map(|l| l.split(' ').nth(4).map(str::to_string))
        .collect()
}

/// Polls until every router pings every target, or `within` passes.
fn wait_full_reachability(
    env: &Env,
    fleet: &str,
    routers: &[String],
    targets: &[String],
    within: Duration,
) {
    let script = format!(
        "for a in {}; do ping -c1 -W1 $a >/dev/null || {{ echo $a; exit 1; }}; done",
        targets.join(" ")
    );
    let deadline = Instant::now() + within;
    for r in routers {
        loop {
            let out = env.run(&["exec", fleet, r, "--", "sh", "-c", &script]);
            if out.status.success() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{r} still cannot reach {} after {within:?}",
                String::from_utf8_lossy(&out.stdout)
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// Brings a fleet down and checks that nothing of it is left: every namespace reclaimed
/// (none held by a daemon), no process in its namespaces, nothing mounted on the host.
fn down_to_nothing(env: &Env, fleet: Fleet<'_>, mounts_before: &[String]) {
    let inodes = netns_inodes(env, &fleet.name);
    let n = inodes.len();
    // Listed while the namespaces are the fleet's (see `processes_in`); a process that
    // came later would hold its namespace, which "reclaimed n of n" rules out.
    let inside = processes_in(&inodes);
    let out = env.ok(&["down", &fleet.name]);
    std::mem::forget(fleet);
    assert!(
        out.contains(&format!("reclaimed {n} of {n} namespaces")),
        "{out}"
    );
    let left: Vec<&(i32, String)> = inside.iter().filter(|(p, _)| alive(*p)).collect();
    assert!(left.is_empty(), "still running after down: {left:?}");
    assert_eq!(
        host_mounts(),
        mounts_before,
        "the host's mounts are as they were"
    );
}

#[test]
fn a_node_has_its_own_name_files_and_hosts_and_its_daemons_go_at_down() {
    let env = Env::new("world");
    let shared = env.files.join("shared");
    std::fs::create_dir_all(shared.join("sub")).unwrap();
    std::fs::write(shared.join("sub/original"), "from the host").unwrap();
    env.file(
        "app.tpl",
        "I am {name}, number {i} of {fleet}, at {addr.lo}; BIRD says { area 0 }\n",
    );
    let mounts = host_mounts();
    // A secret of the shell that runs `up`, which no node may see.
    env.set_var("BAR_SECRET_TOKEN", "s3cr3t");
    let fleet = env.up(&format!(
        r#"[fleet]
name = "wo"
[[node]]
name = "w{{i}}"
count = 2
loopback = "10.77.0.0/24"
hostname = "host-{{name}}"
dirs = ["/mnt"]
dirs_from_host = ["{shared}"]
files = {{ "/mnt/who" = {{ content = "{{name}} {{i}} {{fleet}}" }}, "/run/app/conf" = "app.tpl" }}
commands = ["env > /run/app/environ; echo $NSFLEET_NODE $NSFLEET_INDEX $NSFLEET_FLEET $(hostname) > /run/app/env; exec sleep 1000", "setsid sh -c 'sleep 1003 &'"]
"#,
        shared = shared.display()
    ));
    let exec = |node: &str, cmd: &str| env.ok(&["exec", "wo", node, "--", "sh", "-c", cmd]);
    // The first command writes the file once it runs, which may be after `up` returned:
    // wait for the whole line.
    let written = wait_until(
        "w2's first command to write /run/app/env",
        Duration::from_secs(20),
        || {
            let out = env.run(&["exec", "wo", "w2", "--", "cat", "/run/app/env"]);
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if out.status.success() && text.ends_with('\n') {
                Ok(text)
            } else {
                Err(format!("{text}{}", String::from_utf8_lossy(&out.stderr)))
            }
        },
    );
    assert_eq!(written, "w2 2 wo host-w2\n");
    // The node's own environment, as a container's, for its processes and for exec:
    // nothing of the shell that ran `up` (the harness gives nsfleet NSFLEET_RUN_DIR).
    for environ in [exec("w2", "cat /run/app/environ"), exec("w2", "env")] {
        let vars: Vec<&str> = environ.lines().collect();
        for expected in [
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME=/root",
            "HOSTNAME=host-w2",
            "NSFLEET_FLEET=wo",
            "NSFLEET_NODE=w2",
            "NSFLEET_INDEX=2",
        ] {
            assert!(vars.contains(&expected), "{expected} in {vars:?}");
        }
        assert!(!environ.contains("NSFLEET_RUN_DIR"), "{environ}");
    }
    // Nor do the nodes' inits show anything of that shell (to the host: a confined
    // node's root may not read its init, nsfleet's), not its environment, not its working
    // directory (the test's), and neither does the supervisor.
    let sup = fleet.pid();
    let inits = inits_of(sup);
    assert_eq!(inits.len(), 2, "{inits:?}");
    for pid in inits.into_iter().chain([sup]) {
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
        assert!(
            environ.iter().all(|b| *b == 0),
            "{}",
            String::from_utf8_lossy(&environ)
        );
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap();
        assert_eq!(cwd, Path::new("/"));
    }
    assert!(exec("w2", "cat /proc/1/environ 2>&1 || true").contains("Permission denied"));
    // exec's command carries the mark by which `apply` will not remove its node.
    assert!(exec("w2", "env").lines().any(|l| l == "NSFLEET_EXEC=wo"));
    assert_eq!(exec("w1", "hostname"), "host-w1\n");
    assert_eq!(
        exec("w2", "echo $NSFLEET_FLEET $NSFLEET_NODE $NSFLEET_INDEX"),
        "wo w2 2\n"
    );
    assert_eq!(exec("w1", "cat /mnt/who"), "w1 1 wo");
    assert_eq!(
        exec("w2", "cat /run/app/conf"),
        "I am w2, number 2 of wo, at 10.77.0.2; BIRD says { area 0 }\n"
    );
    // The fleet's /etc/hosts names every node.
    assert!(exec("w1", "getent hosts w2").starts_with("10.77.0.2"));
    // A copy of the host's folder, private: writes stay in the node.
    let s = shared.display();
    assert_eq!(
        exec(
            "w1",
            &format!("cat {s}/sub/original; touch {s}/new /mnt/new")
        ),
        "from the host"
    );
    assert!(
        !shared.join("new").exists()
            && !Path::new("/mnt/new").exists()
            && !Path::new("/mnt/who").exists()
    );
    // Its own PID namespace: the node's init is 1, the daemon (`sleep 1003`, which left
    // its parent; `exec sleep 1000` is not it) is there once forked, the host is not.
    let ps = wait_until("w1's daemon, sleep 1003", Duration::from_secs(20), || {
        let ps = exec("w1", "ps -e -o pid=,comm=,args=");
        if ps.contains("sleep 1003") {
            Ok(ps)
        } else {
            Err(ps)
        }
    });
    assert!(ps.contains("1 nsfleet-node"), "{ps}");
    assert!(ps.lines().count() < 10, "only the node's processes: {ps}");
    down_to_nothing(&env, fleet, &mounts);
}

#[test]
fn a_generated_frr_ring_converges_and_leaves_nothing() {
    let env = Env::new("frr");
    let text = std::fs::read_to_string(examples().join("frr-ospf-ring.toml")).unwrap();
    copy_example(&env, "frr/ospf.conf");
    let mounts = host_mounts();
    let fleet = env.up(&text.replace("name = \"ospf\"", "name = \"ospf-t\""));
    let routers: Vec<String> = (1..=8).map(|i| format!("r{i}")).collect();
    let loopbacks: Vec<String> = (1..=8).map(|i| format!("10.255.0.{i}")).collect();
    wait_full_reachability(
        &env,
        "ospf-t",
        &routers,
        &loopbacks,
        Duration::from_secs(60),
    );
    // Both of r1's adjacencies Full. Waited for: `vtysh -b` applies frr.conf once the
    // daemons run, and may take an adjacency back to ExStart after the routes came (seen
    // once in a CI run, both of r1's adjacencies 0.8 s old).
    wait_until("r1's two adjacencies Full", Duration::from_secs(60), || {
        let neighbors = env.ok(&[
            "exec",
            "ospf-t",
            "r1",
            "--",
            "vtysh",
            "-c",
            "show ip ospf neighbor",
        ]);
        match neighbors.matches("Full").count() {
            2 => Ok(()),
            _ => Err(neighbors),
        }
    });
    let running = env.ok(&[
        "exec",
        "ospf-t",
        "r3",
        "--",
        "vtysh",
        "-c",
        "show running-config",
    ]);
    assert!(
        running.contains("hostname r3") && running.contains("ospf router-id 10.255.0.3"),
        "{running}"
    );
    assert_eq!(
        env.ok(&[
            "exec",
            "ospf-t",
            "r3",
            "--",
            "sysctl",
            "-n",
            "net.ipv4.ip_forward"
        ]),
        "1\n"
    );
    down_to_nothing(&env, fleet, &mounts);
}

/// A router behaves as FRR does when its user works in it: `write memory` saves the
/// running configuration to the node's own /etc/frr/frr.conf (the file it came from on
/// the host is not touched), and FRR's `frr-reload` (frr-pythontools) applies an edit of
/// that file live.
#[test]
fn vtysh_write_saves_in_the_node_and_frr_reload_applies_an_edit() {
    assert!(
        Path::new("/usr/lib/frr/frr-reload.py").exists(),
        "frr-reload needs FRR's Python tools: apt-get install frr-pythontools"
    );
    let env = Env::new("frr-reload");
    let source = "frr defaults traditional\nrouter ospf\n ospf router-id 10.255.0.1\n";
    let conf = env.file("r.conf", source);
    let mounts = host_mounts();
    let fleet = env.up(&format!(
        "[fleet]\nname = \"frr-reload\"\n[[node]]\nname = \"r1\"\nkind = \"frr\"\nconfig = {conf:?}\ndaemons = [\"ospfd\"]\n"
    ));
    env.ok(&["wait", "frr-reload", "started"]);
    let vtysh = |args: &[&str]| {
        let mut all = vec!["exec", "frr-reload", "r1", "--", "vtysh"];
        for a in args {
            all.extend(["-c", a]);
        }
        env.ok(&all)
    };
    vtysh(&[
        "conf t",
        "router ospf",
        "auto-cost reference-bandwidth 1000",
        "end",
        "write memory",
    ]);
    let saved = env.ok(&["exec", "frr-reload", "r1", "--", "cat", "/etc/frr/frr.conf"]);
    assert!(
        saved.contains("auto-cost reference-bandwidth 1000"),
        "{saved}"
    );
    assert_eq!(
        std::fs::read_to_string(&conf).unwrap(),
        source,
        "the host's file"
    );
    let edit = "sed -i 's/reference-bandwidth 1000/reference-bandwidth 2000/' /etc/frr/frr.conf";
    env.ok(&["exec", "frr-reload", "r1", "--", "sh", "-c", edit]);
    env.ok(&["exec", "frr-reload", "r1", "--", "/usr/lib/frr/frr-reload"]);
    let running = vtysh(&["show running-config"]);
    assert!(
        running.contains("auto-cost reference-bandwidth 2000"),
        "{running}"
    );
    down_to_nothing(&env, fleet, &mounts);
}

/// The daemons each router runs now, by program name.
fn daemons_of(env: &Env, fleet: &str, node: &str) -> Vec<String> {
    let s = env.status(fleet);
    let n = (s["nodes"].as_array().unwrap().iter())
        .find(|n| n["name"] == node)
        .unwrap()
        .clone();
    (n["processes"].as_array().unwrap().iter())
        .filter(|p| p["daemon"] == true)
        .filter_map(|p| p["command"].as_str()?.split_whitespace().next())
        .map(|c| c.rsplit('/').next().unwrap().to_string())
        .collect()
}

#[test]
fn up_waits_until_every_router_has_every_loopback_and_says_so_as_an_event() {
    let env = Env::new("frr-wait");
    let text = std::fs::read_to_string(examples().join("frr-ospf-ring.toml")).unwrap();
    copy_example(&env, "frr/ospf.conf");
    let mounts = host_mounts();
    let file = env.file(
        "ring.toml",
        &text.replace("name = \"ospf\"", "name = \"ospf-w\""),
    );
    let fleet = Fleet {
        env: &env,
        name: "ospf-w".into(),
    };
    let out = env.ok(&[
        "up",
        file.to_str().unwrap(),
        "--wait",
        "converged",
        "--wait-timeout",
        "60",
    ]);
    assert!(out.contains("fleet \"ospf-w\" is converged"), "{out}");
    // Converged as read from the kernels: every router reaches every loopback now,
    // without waiting.
    let routers: Vec<String> = (1..=8).map(|i| format!("r{i}")).collect();
    let loopbacks: Vec<String> = (1..=8).map(|i| format!("10.255.0.{i}")).collect();
    wait_full_reachability(&env, "ospf-w", &routers, &loopbacks, Duration::from_secs(2));
    // No static route in the file: no staticd.
    assert_eq!(daemons_of(&env, "ospf-w", "r1"), ["zebra", "ospfd"]);
    // `wait` on a live fleet, and the event it leaves.
    let mut events = env.events("ospf-w");
    let out = env.ok(&["wait", "ospf-w", "converged", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ready"]["condition"], "converged", "{out}");
    events.wait_for("the wait's event", Duration::from_secs(10), |e| {
        e["event"] == "ready" && e["condition"] == "converged" && e["met"] == true
    });
    drop(events);
    down_to_nothing(&env, fleet, &mounts);
}

#[test]
fn a_configuration_frr_refuses_is_said_at_its_line_and_the_fleet_goes() {
    let env = Env::new("frr-refused");
    env.file(
        "r.conf",
        "frr defaults traditional\nip route 192.0.2.0/24 Null0\nrouter ospf\n no-such-command 7\n",
    );
    let conf = env.files.join("r.conf");
    let file = env.file(
        "bad.toml",
        &format!("[fleet]\nname = \"frr-bad\"\n[[node]]\nname = \"r1\"\nkind = \"frr\"\nconfig = {conf:?}\ndaemons = [\"ospfd\"]\n"),
    );
    let fleet = Fleet {
        env: &env,
        name: "frr-bad".into(),
    };
    let err = env.fails(
        &["up", file.to_str().unwrap(), "--wait", "started"],
        "node r1: its command",
    );
    let line = format!(
        "{}:4 (/etc/frr/frr.conf): % Unknown command",
        conf.display()
    );
    assert!(err.contains(&line), "{err}");
    assert!(
        err.contains("the fleet was taken down: nothing of it is left"),
        "{err}"
    );
    assert!(env.fleet_dirs().is_empty(), "{:?}", env.fleet_dirs());
    // The same file, its line mended: the static route starts staticd.
    std::fs::write(
        &conf,
        "frr defaults traditional\nip route 192.0.2.0/24 Null0\n",
    )
    .unwrap();
    let mounts = host_mounts();
    let out = env.ok(&["up", file.to_str().unwrap(), "--wait", "started", "--json"]);
    // One object, for machines: the fleet's, with what the wait found.
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(v["name"], "frr-bad", "{out}");
    assert_eq!(v["ready"]["condition"], "started", "{out}");
    assert_eq!(
        daemons_of(&env, "frr-bad", "r1"),
        ["zebra", "staticd", "ospfd"]
    );
    let routes = env.ok(&["exec", "frr-bad", "r1", "--", "ip", "route"]);
    assert!(routes.contains("blackhole 192.0.2.0/24"), "{routes}");
    down_to_nothing(&env, fleet, &mounts);
}

#[test]
fn a_daemon_that_exits_at_start_ends_the_wait_with_its_words() {
    let env = Env::new("exits-at-start");
    let file = env.file(
        "exits.toml",
        "[fleet]\nname = \"exits\"\n[[node]]\nname = \"d{i}\"\ncount = 2\ncommands = [\"exec sleep 1000\"]\n[[node]]\nname = \"bad\"\ncommands = [\"echo 'cannot bind 0.0.0.0:179: in use' >&2; exit 3\"]\n",
    );
    let _guard = Fleet {
        env: &env,
        name: "exits".into(),
    };
    let err = env.fails(
        &["up", file.to_str().unwrap(), "--wait", "converged"],
        "node bad: its command `echo 'cannot bind 0.0.0.0:179: in use' >&2; exit 3` exited with status 3",
    );
    assert!(err.contains("  cannot bind 0.0.0.0:179: in use"), "{err}");
    assert!(err.contains("nothing of it is left"), "{err}");
    assert!(env.fleet_dirs().is_empty(), "{:?}", env.fleet_dirs());
}

#[test]
fn a_wait_that_is_never_met_names_the_routers_that_lack_routes_and_leaves_the_fleet_up() {
    let env = Env::new("frr-unmet");
    // Two routers with loopbacks and no link between them: neither ever reaches the other.
    let conf = env.file("lo.conf", "frr defaults traditional\n");
    let file = env.file(
        "apart.toml",
        &format!("[fleet]\nname = \"frr-apart\"\n[[node]]\nname = \"r{{i}}\"\ncount = 2\nkind = \"frr\"\nconfig = {conf:?}\nloopback = \"10.255.9.0/24\"\n"),
    );
    let mounts = host_mounts();
    let fleet = Fleet {
        env: &env,
        name: "frr-apart".into(),
    };
    let err = env.fails(
        &[
            "up",
            file.to_str().unwrap(),
            "--wait",
            "converged",
            "--wait-timeout",
            "3",
        ],
        "fleet \"frr-apart\" is not converged after 3 s: 2 of 2 routers lack routes",
    );
    assert!(err.contains("r1 has no route to r2 ("), "{err}");
    assert!(err.contains("the fleet is left up to look into"), "{err}");
    assert_eq!(env.status("frr-apart")["state"], "up");
    down_to_nothing(&env, fleet, &mounts);
}

#[test]
fn a_bird_line_converges_and_leaves_nothing() {
    let env = Env::new("bird");
    copy_example(&env, "bird/ospf.conf");
    let mounts = host_mounts();
    let fleet = env.up(
        "[fleet]\nname = \"bl\"\n[[generate]]\nkind = \"line\"\ncount = 5\npool = \"10.0.0.0/24\"\nnode = { kind = \"bird\", config = \"bird/ospf.conf\", loopback = \"10.255.0.0/24\" }\n",
    );
    let routers: Vec<String> = (1..=5).map(|i| format!("r{i}")).collect();
    let loopbacks: Vec<String> = (1..=5).map(|i| format!("10.255.0.{i}")).collect();
    wait_full_reachability(&env, "bl", &routers, &loopbacks, Duration::from_secs(60));
    let neighbors = env.ok(&[
        "exec",
        "bl",
        "r3",
        "--",
        "birdc",
        "show",
        "ospf",
        "neighbors",
    ]);
    assert_eq!(neighbors.matches("Full").count(), 2, "{neighbors}");
    down_to_nothing(&env, fleet, &mounts);
}

#[test]
fn a_failed_command_restarts_with_backoff_and_status_shows_how_each_ended() {
    let env = Env::new("restart");
    let began = Instant::now();
    let fleet = env.up(
        "[fleet]\nname = \"rs\"\n[[node]]\nname = \"n1\"\nrestart = \"on-failure\"\ncommands = [\"echo run >> /run/count; exit 3\", \"exit 0\", \"setsid sh -c 'sleep 1005' & exec sleep 1006\"]\n",
    );
    // Failed at once, then again after 1 s and 2 s: the third run (second restart) starts
    // no sooner than 3 s after `up` began, and fails at once; the next restart is 4 s
    // after that. Wait for the third run's end rather than sleeping past it.
    let procs = wait_until(
        "the failing command's third run to end",
        Duration::from_secs(30),
        || {
            let s = env.status("rs");
            let procs = (s["nodes"][0]["processes"].as_array().cloned()).unwrap_or_default();
            let third_ended = procs.len() == 3
                && procs[0]["restarts"] == 2
                && procs[0]["exit"]["code"] == 3
                && procs[1]["exit"]["code"] == 0;
            if third_ended {
                Ok(procs)
            } else {
                Err(procs)
            }
        },
    );
    // The backoff: 1 s, then 2 s, between the runs.
    let took = began.elapsed();
    assert!(
        took >= Duration::from_secs(3),
        "restarted twice within {took:?}"
    );
    assert_eq!(procs[0]["exit"]["code"], 3, "{procs:?}");
    assert_eq!(procs[0]["restarts"], 2, "{procs:?}");
    assert_eq!(procs[1]["exit"]["code"], 0, "{procs:?}");
    assert_eq!(
        procs[1]["restarts"], 0,
        "exit 0 is not a failure: {procs:?}"
    );
    assert_eq!(procs[2]["running"], true, "{procs:?}");
    let runs = env.ok(&["exec", "rs", "n1", "--", "cat", "/run/count"]);
    assert_eq!(runs.lines().count(), 3, "{runs}");
    let text = env.ok(&["status", "rs"]);
    assert!(text.contains("exited 3, restarted 2x"), "{text}");
    down_to_nothing(&env, fleet, &host_mounts());
}

#[test]
fn a_file_is_never_written_through_a_link_copied_from_the_host() {
    let env = Env::new("links");
    let victim_dir = env.files.join("victim");
    std::fs::create_dir_all(&victim_dir).unwrap();
    std::fs::write(victim_dir.join("file"), "the host's").unwrap();
    let copied = env.files.join("copied");
    std::fs::create_dir_all(&copied).unwrap();
    std::os::unix::fs::symlink(victim_dir.join("file"), copied.join("link")).unwrap();
    std::os::unix::fs::symlink(&victim_dir, copied.join("dirlink")).unwrap();
    let c = copied.display();
    for target in [format!("{c}/link"), format!("{c}/dirlink/new")] {
        let f = env.file(
            "l.toml",
            &format!("[fleet]\nname = \"ln\"\n[[node]]\nname = \"a\"\ndirs_from_host = [\"{c}\"]\nfiles = {{ \"{target}\" = {{ content = \"the node's\" }} }}\n"),
        );
        let out = env.run(&["up", f.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{target}: {err}");
        assert!(err.contains("rolled back"), "{err}");
    }
    assert_eq!(
        std::fs::read_to_string(victim_dir.join("file")).unwrap(),
        "the host's"
    );
    assert!(!victim_dir.join("new").exists());
    assert!(
        env.fleet_dirs().is_empty(),
        "rolled back: {:?}",
        env.fleet_dirs()
    );
}

/// A script run in a mount namespace of its own whose /run is a tmpfs mount, as systemd
/// mounts it (and as an `nsfleet vm` guest has it), with the fleet's run folder in it.
const RUN_ON_TMPFS: &str = r#"
set -eu
mount --make-rprivate /
mount -t tmpfs tmpfs /run
export NSFLEET_RUN_DIR=/run/nsfleet
"$NSFLEET" up "$TOPOLOGY" >/dev/null
echo "hostname: $("$NSFLEET" exec rt a -- hostname)"
echo "hosts: $("$NSFLEET" exec rt a -- grep -c localhost /etc/hosts)"
"$NSFLEET" down rt >/dev/null
"#;

#[test]
fn a_node_with_a_world_comes_up_where_run_is_a_mount_of_its_own() {
    let env = Env::new("run-tmpfs");
    let topology = env.file(
        "rt.toml",
        "[fleet]\nname = \"rt\"\n[[node]]\nname = \"a\"\ncommands = [\"exec sleep 1000\"]\n",
    );
    let text = in_own_mount_namespace(RUN_ON_TMPFS, &[("TOPOLOGY", &topology)]);
    assert!(
        text.contains("hostname: a\n") && text.contains("hosts: 2\n"),
        "{text}"
    );
}

/// `healthcheck` in a TOML file, as in a containerlab one: `up --wait healthy` returns
/// once the check passes in the node (here once its command has made the file the check
/// looks for, in a folder private to the node); a bad one is refused at its line before
/// anything exists.
#[test]
fn a_toml_healthcheck_is_waited_for_and_a_bad_one_is_refused_at_its_line() {
    let env = Env::new("toml-health");
    let file = env.file(
        "health.toml",
        "[fleet]\nname = \"toml-health\"\n[[node]]\nname = \"a\"\ndirs = [\"/run/app\"]\ncommands = [\"sleep 1; touch /run/app/ready\"]\nhealthcheck = { test = \"test -e /run/app/ready\", interval = 1, retries = 30 }\n[[node]]\nname = \"b\"\nhealthcheck = { test = [\"CMD\", \"ip\", \"link\", \"show\", \"lo\"] }\n",
    );
    let mounts = host_mounts();
    let fleet = Fleet {
        env: &env,
        name: "toml-health".into(),
    };
    let out = env.ok(&["up", file.to_str().unwrap(), "--wait", "healthy"]);
    assert!(out.contains("fleet \"toml-health\" is healthy"), "{out}");
    env.ok(&[
        "exec",
        "toml-health",
        "a",
        "--",
        "test",
        "-e",
        "/run/app/ready",
    ]);
    down_to_nothing(&env, fleet, &mounts);

    let bad = env.file(
        "bad.toml",
        "[fleet]\nname = \"toml-health-bad\"\n[[node]]\nname = \"a\"\nhealthcheck = { test = 5 }\n",
    );
    env.refused(
        "toml-healthcheck",
        &["up", bad.to_str().unwrap()],
        &bad,
        5,
        "healthcheck: test: expected a shell line",
    );
}

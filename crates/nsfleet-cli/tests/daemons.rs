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

/// Processes whose network namespace is one of `inodes`.
fn processes_in(inodes: &[u64]) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let pids = std::fs::read_dir("/proc").unwrap().flatten();
    pids.filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| {
            std::fs::metadata(format!("/proc/{p}/ns/net")).is_ok_and(|m| inodes.contains(&m.ino()))
        })
        .map(|p| std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default())
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
    let out = env.ok(&["down", &fleet.name]);
    std::mem::forget(fleet);
    assert!(
        out.contains(&format!("reclaimed {n} of {n} namespaces")),
        "{out}"
    );
    assert_eq!(processes_in(&inodes), Vec::<String>::new());
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
commands = ["echo $NSFLEET_NODE $NSFLEET_INDEX $NSFLEET_FLEET $(hostname) > /run/app/env; exec sleep 1000", "setsid sh -c 'sleep 1003 &'"]
"#,
        shared = shared.display()
    ));
    let exec = |node: &str, cmd: &str| env.ok(&["exec", "wo", node, "--", "sh", "-c", cmd]);
    assert_eq!(
        exec("w2", "sleep 0.2; cat /run/app/env"),
        "w2 2 wo host-w2\n"
    );
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
    // Its own PID namespace: the node's init is 1, the daemon is there, the host is not.
    let ps = exec("w1", "ps -e -o pid=,comm=");
    assert!(
        ps.contains("1 nsfleet-node") && ps.contains("sleep"),
        "{ps}"
    );
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
    let neighbors = env.ok(&[
        "exec",
        "ospf-t",
        "r1",
        "--",
        "vtysh",
        "-c",
        "show ip ospf neighbor",
    ]);
    assert_eq!(neighbors.matches("Full").count(), 2, "{neighbors}");
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
    let fleet = env.up(
        "[fleet]\nname = \"rs\"\n[[node]]\nname = \"n1\"\nrestart = \"on-failure\"\ncommands = [\"echo run >> /run/count; exit 3\", \"exit 0\", \"setsid sh -c 'sleep 1005' & exec sleep 1006\"]\n",
    );
    std::thread::sleep(Duration::from_millis(3500));
    let s = env.status("rs");
    let procs = s["nodes"][0]["processes"].as_array().unwrap().clone();
    // Failed at once, then again after 1 s and 2 s: started 3 times by now.
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

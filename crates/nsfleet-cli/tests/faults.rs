//! Fault injection (the `fault-injection` feature, on in `scripts/test`): every kernel
//! operation of bringing up a small fleet that uses every subsystem (nodes, a switch, an
//! Open vSwitch switch with a controller, links, addresses, routes, an impairment,
//! sysctls, a process, a host link) is made to
//! fail, then made to kill the supervisor, one at a time. After each, `up` has failed,
//! `nsfleet clean` has run, and the host is exactly as before: namespaces, host links,
//! nsfs mounts, processes (Open vSwitch's daemons among them), and files under the run
//! directory. Past the last operation
//! the fleet comes up whole. And the kernel's own exhaustion errors half-way (ENOSPC,
//! ENOMEM, EMFILE, ENOBUFS) are explained and rolled back.
#![cfg(feature = "fault-injection")]

mod harness;

use harness::*;
use std::collections::BTreeSet;
use std::process::Command;

fn topology(host_if: &str) -> String {
    format!(
        r#"[fleet]
name = "fw"
[[switch]]
name = "sw"
pool = "10.61.0.0/24"
[[switch]]
name = "ov"
kind = "ovs"
controller = ["tcp:127.0.0.1:9"]
[[node]]
name = "a"
router = true
sysctls = {{ "net.ipv4.tcp_syncookies" = 0 }}
commands = ["exec sleep 600"]
routes = ["10.62.0.0/24 via 10.61.0.2"]
host_link = {{ iface = "mgmt", host_iface = "{host_if}", addrs = ["192.168.61.2/30"], host_addrs = ["192.168.61.1/30"] }}
[[node]]
name = "b"
[[link]]
a = "a:eth0"
b = "sw"
[[link]]
a = "b:eth0"
b = "sw"
[[link]]
a = {{ at = "a:eth1", addrs = ["10.63.0.1/30"], impair = {{ rate = "10mbit" }} }}
b = {{ at = "b:eth1", addrs = ["10.63.0.2/30"] }}
[[link]]
a = {{ at = "b:eth2", addrs = ["10.64.0.2/24"] }}
b = "ov"
"#
    )
}

/// The tests here compare the whole host before and after: they must not overlap.
static HOST: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// What a leaky run could leave on the host.
#[derive(Debug, PartialEq, Eq)]
struct Host {
    netns: BTreeSet<String>,
    links: BTreeSet<String>,
    mounts: BTreeSet<String>,
    supervisors: usize,
    /// Open vSwitch's daemons (this test's switches' are its only ones).
    open_vswitch: usize,
    run_files: Vec<String>,
    /// The cgroups of this test's fleets (`nsfleet/fw.PID`, in every hierarchy).
    cgroups: Vec<String>,
}

fn host(env: &Env) -> Host {
    let mut netns = BTreeSet::new();
    for p in std::fs::read_dir("/proc").unwrap().flatten() {
        let p = p.path();
        if let Ok(l) = std::fs::read_link(p.join("ns/net")) {
            netns.insert(l.display().to_string());
        }
        for f in std::fs::read_dir(p.join("fd"))
            .into_iter()
            .flatten()
            .flatten()
        {
            if let Ok(l) = std::fs::read_link(f.path()) {
                let l = l.display().to_string();
                if l.starts_with("net:") {
                    netns.insert(l);
                }
            }
        }
    }
    let out = |cmd: &str, args: &[&str]| {
        String::from_utf8_lossy(&Command::new(cmd).args(args).output().unwrap().stdout).into_owned()
    };
    let links = out("ip", &["-o", "link", "show"])
        .lines()
        .filter_map(|l| Some(l.split(": ").nth(1)?.split('@').next()?.to_string()))
        .collect();
    let mounts = out("findmnt", &["-rn", "-t", "nsfs", "-o", "TARGET"])
        .lines()
        .map(String::from)
        .collect();
    // Supervisors of this test's run directory: named `nsfleet-sup` (forked, not exec'd,
    // their command line is the `up`'s), their stderr a log under the run directory.
    let supervisors = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|p| {
            let p = p.path();
            let name = nsfleet::supervisor::SUPERVISOR_NAME.to_str().unwrap();
            std::fs::read_to_string(p.join("comm")).is_ok_and(|c| c.trim_end() == name)
                && std::fs::read_link(p.join("fd/2")).is_ok_and(|log| log.starts_with(&env.run_dir))
        })
        .count();
    let open_vswitch = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|p| {
            let comm = std::fs::read_to_string(p.path().join("comm")).unwrap_or_default();
            matches!(comm.trim_end(), "ovsdb-server" | "ovs-vswitchd")
        })
        .count();
    let mut run_files: Vec<String> = walk(&env.run_dir);
    run_files.sort();
    let all = nsfleet::sys::cgroup::hierarchies().unwrap();
    let mut cgroups: Vec<String> = (all.iter())
        .flat_map(|h| {
            std::fs::read_dir(h.mount.join("nsfleet"))
                .into_iter()
                .flatten()
        })
        .flatten()
        .map(|e| e.path().display().to_string())
        .filter(|p| p.contains("/nsfleet/fw."))
        .collect();
    cgroups.sort();
    Host {
        netns,
        links,
        mounts,
        supervisors,
        open_vswitch,
        run_files,
        cgroups,
    }
}

fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        out.push(e.path().display().to_string());
        if e.path().is_dir() {
            out.extend(walk(&e.path()));
        }
    }
    out
}

/// The host settles a moment after a failed `up`: the kernel drops a dead supervisor's
/// namespaces and the host end of its link asynchronously.
fn settled(env: &Env, before: &Host) -> Host {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let now = host(env);
        if &now == before || std::time::Instant::now() > deadline {
            return now;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn every_kernel_operation_of_up_failing_or_killing_leaves_the_host_as_it_was() {
    let _alone = HOST.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("faults");
    let host_if = format!("nsffw{}", std::process::id() % 1_000_000);
    let file = env.file("fw.toml", &topology(&host_if));
    let file = file.to_str().unwrap();
    let before = host(&env);
    let up = |n: u64, action: &str| {
        let out = (env.cmd(&["up", file]))
            .env("NSFLEET_FAULT", format!("{n}:{action}"))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.success(), err)
    };
    let mut walked = 0;
    for n in 1.. {
        assert!(n < 500, "the fault walk never reached the end");
        for action in ["fail", "kill"] {
            let (ok, err) = up(n, action);
            if ok {
                // Operation n is past the last one: the fleet is whole. The guard first,
                // so that a failed assertion still takes the fleet down.
                let _fleet = Fleet {
                    env: &env,
                    name: "fw".into(),
                };
                assert_eq!(
                    action, "fail",
                    "{n}:kill: the supervisor survived its death"
                );
                let s = env.status("fw");
                // Four of the file's, and the fleet's Open vSwitch.
                assert_eq!(s["nodes"].as_array().unwrap().len(), 5, "{s}");
                assert!(
                    walked >= 10,
                    "only {walked} fault points: the walk is not covering up"
                );
                eprintln!("fault points walked: {walked} (each failed, then killed)");
                return;
            }
            let expect = if action == "fail" {
                "injected fault"
            } else {
                "supervisor died"
            };
            assert!(err.contains(expect), "{n}:{action}: {err}");
            env.run(&["clean", "fw"]);
            let now = settled(&env, &before);
            assert_eq!(now, before, "after fault {n}:{action}: {err}");
        }
        walked = n;
    }
}

/// The numbers of the fault points of one `up` that do `what`, from `NSFLEET_FAULT=count`.
fn points(env: &Env, file: &str, what: &str) -> Vec<u64> {
    // One worker: with two, the operations of parallel nodes interleave differently from
    // run to run, and a number would not name the same operation twice.
    let out = (env.cmd(&["up", file, "--workers", "1"]))
        .env("NSFLEET_FAULT", "count")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let _fleet = Fleet {
        env,
        name: "fw".into(),
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The supervisor's stderr is its log; `up` keeps it under the run directory.
    let log = std::fs::read_to_string(env.run_dir.join("fw/supervisor.log")).unwrap_or_default();
    log.lines()
        .filter(|l| l.ends_with(what))
        .filter_map(|l| {
            l.strip_prefix("nsfleet: fault point ")?
                .split(':')
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

#[test]
fn exhaustion_half_way_is_explained_and_rolled_back() {
    let _alone = HOST.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("exhaust");
    let host_if = format!("nsfex{}", std::process::id() % 1_000_000);
    let file = env.file("fw.toml", &topology(&host_if));
    let file = file.to_str().unwrap();
    let namespaces = points(&env, file, "creating a namespace");
    let batches = points(&env, file, "sending a netlink batch");
    assert!(
        namespaces.len() >= 3 && batches.len() >= 3,
        "{namespaces:?} {batches:?}"
    );
    let before = host(&env);
    // Half-way: the second node's namespace, and a batch in the middle of the wiring.
    let cases = [
        (
            namespaces[1],
            "ENOSPC",
            "user.max_net_namespaces is reached",
        ),
        (namespaces[1], "ENOMEM", "out of memory"),
        (namespaces[1], "EMFILE", "out of file descriptors"),
        (
            batches[batches.len() / 2],
            "ENOMEM",
            "Cannot allocate memory",
        ),
        (batches[batches.len() / 2], "ENOBUFS", "No buffer space"),
    ];
    for (n, errno, expect) in cases {
        let out = (env.cmd(&["up", file, "--workers", "1"]))
            .env("NSFLEET_FAULT", format!("{n}:fail:{errno}"))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{n}:{errno}");
        assert!(
            err.contains(expect) && err.contains("rolled back"),
            "{n}:{errno}: {err}"
        );
        assert_eq!(settled(&env, &before), before, "after {n}:{errno}: {err}");
    }
}

//! Limits that hold: a node that runs software is a cgroup of its own below its fleet's
//! (`nsfleet/FLEET/NODE`, in every hierarchy the host mounts: v1's several or v2's one),
//! whose memory, CPU, CPU set and task limits the kernel enforces. What a node runs out
//! of stays in it; `status`, `events`, `stats` and the node's log say so; the groups go
//! with the fleet, a killed one's with `clean`.

mod harness;

use harness::*;
use std::path::PathBuf;
use std::time::Duration;

/// The cgroup folders of process `pid` below nsfleet's, one per hierarchy (as
/// /proc/PID/cgroup names them, found where their hierarchy is mounted).
fn cgroups_of(pid: i32) -> Vec<PathBuf> {
    let all = nsfleet::sys::cgroup::hierarchies().unwrap();
    nsfleet::sys::cgroup::of_process(&all, pid, "nsfleet").unwrap()
}

/// The first of `dirs` that has `file`, read.
fn read_in(dirs: &[PathBuf], files: &[&str]) -> String {
    (dirs
        .iter()
        .flat_map(|d| files.iter().map(move |f| d.join(f))))
    .find_map(|p| std::fs::read_to_string(p).ok())
    .unwrap_or_else(|| panic!("none of {files:?} in {dirs:?}"))
    .trim()
    .to_string()
}

/// Every folder of a cgroup of fleet `fleet` (`nsfleet/FLEET.PID`) that exists, in every
/// hierarchy: this test's fleets have names of their own.
fn fleet_groups(fleet: &str) -> Vec<PathBuf> {
    let all = nsfleet::sys::cgroup::hierarchies().unwrap();
    (all.iter())
        .flat_map(|h| {
            std::fs::read_dir(h.mount.join("nsfleet"))
                .into_iter()
                .flatten()
        })
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.rsplit_once('.').is_some_and(|(f, _)| f == fleet)
        })
        .collect()
}

/// The node's init, the one child of the fleet's supervisor whose cgroup is `node`'s.
fn init_of(f: &Fleet<'_>, node: &str) -> i32 {
    let inits = inits_of(f.pid());
    *(inits.iter())
        .find(|p| cgroups_of(**p).iter().any(|d| d.ends_with(node)))
        .unwrap_or_else(|| panic!("no init of {node} among {inits:?}"))
}

#[test]
fn a_node_out_of_memory_is_killed_alone_and_said_so() {
    let env = Env::new("limits-oom");
    // The hog waits for its cue, so that `events` is listening when it is killed.
    let f = env.up(
        "[fleet]\nname = \"lmo\"\n[[node]]\nname = \"hog\"\nmemory = \"32M\"\ncommands = [\"while [ ! -e /run/go ]; do sleep 0.05; done; head -c 300M /dev/zero | tail > /dev/null\"]\n[[node]]\nname = \"calm\"\ncommands = [\"exec sleep 1000\"]\n[[node]]\nname = \"keeper\"\nmemory = \"32M\"\ncommands = [\"while [ ! -e /run/go ]; do sleep 0.05; done; head -c 300M /dev/zero | tail > /dev/null; exec sleep 1000\"]\n",
    );
    let hog = cgroups_of(init_of(&f, "hog"));
    assert!(
        !hog.is_empty(),
        "the hog's init is in no cgroup of nsfleet's"
    );
    let limit = read_in(&hog, &["memory.max", "memory.limit_in_bytes"]);
    assert_eq!(limit, (32u64 << 20).to_string());
    let mut events = env.events("lmo");
    env.ok(&["exec", "lmo", "hog", "--", "touch", "/run/go"]);
    let said = events.wait_for("the hog's OOM kill", Duration::from_secs(60), |e| {
        e["event"] == "out_of_memory"
    });
    assert_eq!(said["node"], "hog");
    assert_eq!(said["limit_bytes"], 32u64 << 20);
    events.wait_for("the hog's command to end", Duration::from_secs(10), |e| {
        e["event"] == "process_exited" && e["node"] == "hog"
    });
    // A kill that ends no command (a daemon's child) is told as it happens.
    env.ok(&["exec", "lmo", "keeper", "--", "touch", "/run/go"]);
    let said = events.wait_for("the keeper's OOM kill", Duration::from_secs(60), |e| {
        e["event"] == "out_of_memory" && e["node"] == "keeper"
    });
    assert!(said["command"].is_null(), "{said}");
    drop(events);
    let run_dir = env.status("lmo")["run_dir"].as_str().unwrap().to_string();
    let log = std::fs::read_to_string(format!("{run_dir}/logs/hog.log")).unwrap();
    assert!(log.contains("killed: out of memory, limit 32 MB"), "{log}");
    let status = env.status("lmo");
    let node = |n: &str| {
        (status["nodes"].as_array().unwrap().iter())
            .find(|x| x["name"] == n)
            .unwrap()
            .clone()
    };
    assert!(node("hog")["usage"]["oom_kills"].as_u64().unwrap() >= 1);
    assert_eq!(node("calm")["usage"]["oom_kills"], 0);
    assert!(env
        .ok(&["status", "lmo"])
        .contains("killed: out of memory, limit 32 MB"));
    // Its neighbour runs on, untouched, as does the keeper's command.
    let calm = &node("calm")["processes"][0];
    assert_eq!(calm["running"], true, "{calm}");
    let keeper = &node("keeper")["processes"][0];
    assert_eq!(keeper["running"], true, "{keeper}");
    let log = std::fs::read_to_string(format!("{run_dir}/logs/keeper.log")).unwrap();
    assert!(log.contains("killed: out of memory, limit 32 MB"), "{log}");
    // `stats` reads each node from its cgroup: the whole node, its limits.
    let stats: serde_json::Value =
        serde_json::from_str(&env.ok(&["stats", "lmo", "--json"])).unwrap();
    let hog_stats = (stats["nodes"].as_array().unwrap().iter())
        .find(|n| n["name"] == "hog")
        .unwrap();
    assert_eq!(hog_stats["limits"]["memory"], 32u64 << 20);
    assert!(
        hog_stats["usage"]["cpu_ns"].as_u64().unwrap() > 0,
        "{hog_stats}"
    );
    assert!(hog_stats["usage"]["memory_bytes"].as_u64().unwrap() > 0);
    // A node without a memory limit has no memory cgroup of its own (each costs the
    // kernel a slot per superblock on the machine): its fleet's counts it.
    let calm_stats = (stats["nodes"].as_array().unwrap().iter())
        .find(|n| n["name"] == "calm")
        .unwrap();
    assert!(
        calm_stats["usage"]["memory_bytes"].is_null(),
        "{calm_stats}"
    );
    assert!(
        calm_stats["usage"]["cpu_ns"].as_u64().is_some(),
        "{calm_stats}"
    );
    let all = nsfleet::sys::cgroup::hierarchies().unwrap();
    let v1_memory = |p: &PathBuf| {
        (all.iter()).any(|h| {
            !h.unified && p.starts_with(&h.mount) && h.controllers.iter().any(|c| c == "memory")
        })
    };
    for p in cgroups_of(init_of(&f, "calm"))
        .iter()
        .filter(|p| v1_memory(p))
    {
        assert!(
            !p.ends_with("calm"),
            "calm has a memory cgroup: {}",
            p.display()
        );
    }
    // A confined node sees its own limit where Docker's containers look for it.
    let seen = env.ok(&[
        "exec",
        "lmo",
        "keeper",
        "--",
        "sh",
        "-c",
        "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes; \
         mkdir /sys/fs/cgroup/x 2>&1 || true",
    ]);
    assert!(seen.starts_with(&format!("{}\n", 32u64 << 20)), "{seen}");
    assert!(seen.contains("Read-only file system"), "{seen}");
    // And the kernel takes every node back at `down`: the OOM watch's thread, once
    // started inside the first limited node, kept its namespace alive.
    let down: serde_json::Value =
        serde_json::from_str(&env.ok(&["down", "lmo", "--json"])).unwrap();
    assert_eq!(down["reclaimed"], 3, "{down}");
    std::mem::forget(f);
}

/// `apply` of another seccomp filter, with other limits: the plan says both, and the
/// node starts again (a filter is a process's for life) in a group of the new limits,
/// its commands under the new filter; a node that did not change runs on.
#[test]
fn apply_changes_a_nodes_filter_by_starting_it_again() {
    let env = Env::new("limits-apply");
    let base = "[fleet]\nname = \"lma\"\n[[node]]\nname = \"a\"\nmemory = \"32M\"\npids = 50\ncommands = [\"exec sleep 1000\"]\n[[node]]\nname = \"b\"\nmemory = \"32M\"\ncommands = [\"exec sleep 1000\"]\n";
    let f = env.up(base);
    let b_before = init_of(&f, "b");
    let changed = env.file(
        "changed.toml",
        &base.replacen(
            "memory = \"32M\"\npids = 50\n",
            "memory = \"64M\"\npids = 50\nsecurity_opt = [\"seccomp=unconfined\"]\n",
            1,
        ),
    );
    let plan = env.ok(&["apply", changed.to_str().unwrap(), "--dry-run"]);
    assert!(
        plan.contains("a limits")
            && plan.contains("memory 33554432, pids 50 -> memory 67108864, pids 50"),
        "{plan}"
    );
    assert!(
        plan.contains("a security") && plan.contains("seccomp unconfined"),
        "{plan}"
    );
    assert!(!plan.contains("b limits"), "{plan}");
    env.ok(&["apply", changed.to_str().unwrap()]);
    let a = cgroups_of(init_of(&f, "a"));
    let limit = read_in(&a, &["memory.max", "memory.limit_in_bytes"]);
    assert_eq!(limit, (64u64 << 20).to_string());
    assert_eq!(read_in(&a, &["pids.max"]), "50");
    let seccomp = env.ok(&[
        "exec",
        "lma",
        "a",
        "--",
        "grep",
        "^Seccomp:",
        "/proc/self/status",
    ]);
    assert_eq!(seccomp.split_whitespace().last(), Some("0"), "{seccomp}");
    assert_eq!(init_of(&f, "b"), b_before, "b did not change and ran on");
}

/// `apply` of other limits alone changes them in place, as `docker update`: the node's
/// world and processes run on, in every group of its new limits (on v1, a hierarchy it
/// was not in, its processes moved there), a process started later included; and back.
#[test]
fn apply_changes_a_nodes_limits_in_place() {
    let env = Env::new("limits-live");
    // Two commands: one with a child of its own, one that ends when told and starts
    // again (restart = "on-failure"), as a process started after the change.
    let base = "[fleet]\nname = \"lml\"\n[[node]]\nname = \"a\"\nmemory = \"32M\"\npids = 50\nrestart = \"on-failure\"\ncommands = [\"sleep 1000 & exec sleep 1000\", \"while [ ! -e /run/end ]; do sleep 0.05; done; rm /run/end; exit 1\"]\n";
    let f = env.up(base);
    let init = init_of(&f, "a");
    // Memory raised, pids lifted, and a CPU quota: on v1, a hierarchy it was not in.
    let changed = env.file(
        "changed.toml",
        &base
            .replace("pids = 50\n", "")
            .replace("32M", "64M")
            .replace("restart =", "cpu = 0.5\nrestart ="),
    );
    let plan = env.ok(&["apply", changed.to_str().unwrap(), "--dry-run"]);
    assert!(
        plan.contains("a limits")
            && plan.contains("memory 33554432, pids 50 -> memory 67108864, cpu 0.5"),
        "{plan}"
    );
    env.ok(&["apply", changed.to_str().unwrap()]);
    assert_eq!(init_of(&f, "a"), init, "the node's world ran on");
    let groups = cgroups_of(init);
    let memory = read_in(&groups, &["memory.max", "memory.limit_in_bytes"]);
    assert_eq!(memory, (64u64 << 20).to_string());
    let quota = read_in(&groups, &["cpu.max", "cpu.cfs_quota_us"]);
    assert_eq!(quota.split(' ').next(), Some("50000"), "{quota}");
    // Each process the node had is in each of its groups, the new one included.
    let procs = |d: &PathBuf| std::fs::read_to_string(d.join("cgroup.procs")).unwrap();
    let all: Vec<PathBuf> = groups.clone();
    let first = procs(&all[0]);
    assert!(first.lines().count() >= 4, "{first}");
    for d in &all[1..] {
        let here = procs(d);
        assert!(
            first.lines().all(|p| here.lines().any(|q| q == p)),
            "{d:?}: {here} against {first}"
        );
    }
    let pids_max = (all.iter()).find_map(|d| std::fs::read_to_string(d.join("pids.max")).ok());
    assert!(
        matches!(pids_max.as_deref(), None | Some("max\n")),
        "{pids_max:?}"
    );
    // A process started after the change (the command's restart) joins them too.
    env.ok(&["exec", "lml", "a", "--", "touch", "/run/end"]);
    let restarted = wait_until("the command's restart", Duration::from_secs(20), || {
        let status = env.status("lml");
        let p = status["nodes"][0]["processes"][1].clone();
        match p["restarts"].as_u64() >= Some(1) && p["running"] == true {
            true => Ok(p["pid"].as_i64().unwrap()),
            false => Err(p),
        }
    });
    assert_eq!(
        cgroups_of(restarted as i32),
        groups,
        "the restarted command's groups"
    );
    // And back, the same way: the CPU quota lifted, pids limited again.
    env.ok(&["apply", env.file("base.toml", base).to_str().unwrap()]);
    assert_eq!(init_of(&f, "a"), init);
    let quota = read_in(&groups, &["cpu.max", "cpu.cfs_quota_us"]);
    assert!(quota.starts_with("max") || quota == "-1", "{quota}");
    assert_eq!(read_in(&cgroups_of(init), &["pids.max"]), "50");
}

/// A memory limit below what a node holds, which v1 cannot reclaim: `apply` fails, says
/// why, and puts the node back as it was, running.
#[test]
fn a_memory_limit_below_what_a_node_holds_is_put_back_on_v1() {
    let env = Env::new("limits-below");
    let base = "[fleet]\nname = \"lmb\"\n[[node]]\nname = \"a\"\nmemory = \"64M\"\ncommands = [\"exec python3 -c 'import time; b = bytearray(40 << 20); time.sleep(1000)'\"]\n";
    let f = env.up(base);
    let init = init_of(&f, "a");
    let groups = cgroups_of(init);
    if !groups
        .iter()
        .any(|d| d.join("memory.limit_in_bytes").exists())
    {
        // v2 takes such a limit and enforces it (reclaim, then the OOM killer), as it
        // does for `docker update`: nothing to put back.
        return;
    }
    wait_until("the node's 40 MB", Duration::from_secs(20), || {
        let used: u64 = read_in(&groups, &["memory.usage_in_bytes"])
            .parse()
            .unwrap();
        if used > 40 << 20 {
            Ok(())
        } else {
            Err(used)
        }
    });
    let lower = env.file(
        "lower.toml",
        &base
            .replace("64M", "16M")
            .replace("memory =", "pids = 20\nmemory ="),
    );
    let out = env.run(&["apply", lower.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("rolled back") && said.contains("could not reclaim"),
        "{said}"
    );
    // As it was: its limit, its processes, every one of them in each of its groups.
    assert_eq!(init_of(&f, "a"), init);
    let now = cgroups_of(init);
    assert_eq!(
        read_in(&now, &["memory.limit_in_bytes"]),
        (64u64 << 20).to_string()
    );
    assert_eq!(
        env.status("lmb")["nodes"][0]["processes"][0]["running"],
        true
    );
}

/// `memory = "unlimited"`: a memory group of the node's own that limits nothing, so that
/// `stats` and `status` show its memory; a node without the key is counted with its
/// fleet. A word that is neither a size nor that is refused at its line.
#[test]
fn a_node_whose_memory_is_unlimited_is_counted_apart() {
    let env = Env::new("limits-counted");
    let f = env.up(
        "[fleet]\nname = \"lmu\"\n[[node]]\nname = \"counted\"\nmemory = \"unlimited\"\ncommands = [\"exec sleep 1000\"]\n[[node]]\nname = \"plain\"\ncommands = [\"exec sleep 1000\"]\n",
    );
    let groups = cgroups_of(init_of(&f, "counted"));
    let limit: u64 = read_in(&groups, &["memory.max", "memory.limit_in_bytes"])
        .parse()
        .unwrap_or(u64::MAX);
    assert!(limit > 1 << 50, "{limit}");
    let stats: serde_json::Value =
        serde_json::from_str(&env.ok(&["stats", "lmu", "--json"])).unwrap();
    let node = |n: &str| {
        (stats["nodes"].as_array().unwrap().iter())
            .find(|x| x["name"] == n)
            .unwrap()
            .clone()
    };
    assert!(node("counted")["usage"]["memory_bytes"].as_u64().unwrap() > 0);
    assert_eq!(node("counted")["limits"]["memory_counted"], true);
    assert!(node("plain")["usage"]["memory_bytes"].is_null());
    assert!(env
        .ok(&["status", "lmu"])
        .contains("limits: memory unlimited ("));
    drop(f);
    let bad = env.file(
        "bad.toml",
        "[fleet]\nname = \"lmx\"\n[[node]]\nname = \"a\"\nmemory = \"unlimted\"\ncommands = [\"exec sleep 1000\"]\n",
    );
    let out = env.run(&["up", bad.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        said.contains("bad.toml:5:10") && said.contains("\"unlimited\""),
        "{said}"
    );
}

#[test]
fn a_fork_bomb_stays_in_its_node() {
    let env = Env::new("limits-pids");
    let f = env.up(
        "[fleet]\nname = \"lmp\"\n[[node]]\nname = \"bomb\"\npids = 24\ncpu = 0.2\ncommands = [\"exec sleep 1000\"]\n[[node]]\nname = \"calm\"\ncommands = [\"exec sleep 1000\"]\n[[node]]\nname = \"keeper\"\nmemory = \"32M\"\ncommands = [\"while [ ! -e /run/go ]; do sleep 0.05; done; head -c 300M /dev/zero | tail > /dev/null; exec sleep 1000\"]\n",
    );
    let bomb = cgroups_of(init_of(&f, "bomb"));
    assert_eq!(read_in(&bomb, &["pids.max"]), "24");
    let quota = read_in(&bomb, &["cpu.max", "cpu.cfs_quota_us"]);
    assert_eq!(quota.split(' ').next(), Some("20000"), "{quota}");
    // The bomb forks until its node has 24 tasks, and no further, for a few seconds.
    let out = env.run(&[
        "exec",
        "lmp",
        "bomb",
        "--",
        "timeout",
        "-s",
        "KILL",
        "3",
        "sh",
        "-c",
        "b() { b | b & }; b; wait",
    ]);
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("Resource temporarily unavailable") || text.contains("fork"),
        "{text}"
    );
    let peak: u64 = read_in(&bomb, &["pids.peak", "pids.current"])
        .parse()
        .unwrap();
    assert!(peak <= 24, "{peak}");
    // The neighbour and the host fork as before.
    assert_eq!(
        env.ok(&["exec", "lmp", "calm", "--", "sh", "-c", "echo ok"]),
        "ok\n"
    );
    drop(f);
    assert!(fleet_groups("lmp").is_empty(), "{:?}", fleet_groups("lmp"));
}

#[test]
fn exec_runs_in_the_nodes_cgroup_and_the_groups_go_with_the_fleet() {
    let env = Env::new("limits-exec");
    let f = env.up(
        "[fleet]\nname = \"lme\"\n[[node]]\nname = \"n1\"\nmemory = \"48M\"\ncommands = [\"exec sleep 1000\"]\n",
    );
    // In the node's cgroup namespace, its own group is the root: an exec'd command
    // outside it would see "/../..".
    let seen = env.ok(&["exec", "lme", "n1", "--", "cat", "/proc/self/cgroup"]);
    let ours: Vec<&str> = (seen.lines())
        .filter(|l| l.contains("memory") || l.starts_with("0::"))
        .collect();
    assert!(
        !ours.is_empty() && ours.iter().all(|l| !l.contains("..")),
        "{seen}"
    );
    assert!(!fleet_groups("lme").is_empty());
    // A killed supervisor's groups stay until `clean`, which says it removed them.
    let pid = f.pid();
    signal(pid, libc::SIGKILL);
    wait_gone(pid);
    std::mem::forget(f);
    let groups = fleet_groups("lme");
    assert!(!groups.is_empty());
    let said = env.ok(&["clean", "lme"]);
    assert!(said.contains("removed the cgroup"), "{said}");
    assert!(fleet_groups("lme").is_empty(), "{:?}", fleet_groups("lme"));
    // And a `down` leaves none.
    drop(env.up(
        "[fleet]\nname = \"lme\"\n[[node]]\nname = \"n1\"\ncommands = [\"exec sleep 1000\"]\n",
    ));
    assert!(fleet_groups("lme").is_empty(), "{:?}", fleet_groups("lme"));
}

#[test]
fn containerlab_limits_are_dockers() {
    let env = Env::new("limits-clab");
    let file = env.file(
        "lmc.clab.yml",
        // A management subnet of its own: the default one may be another test's fleet's
        // at the same moment (CI once refused this `up` for it).
        "name: lmc\nmgmt: {ipv4-subnet: 172.31.92.0/24}\ntopology:\n  nodes:\n    a:\n      kind: linux\n      memory: 1Gb\n      cpu: 1.5\n      cpu-set: \"0\"\n      shm-size: 128MB\n",
    );
    let g = Fleet {
        env: &env,
        name: "lmc".into(),
    };
    env.ok(&["up", file.to_str().unwrap(), "--host-software"]);
    let a = cgroups_of(init_of(&g, "a"));
    assert_eq!(
        read_in(&a, &["memory.max", "memory.limit_in_bytes"]),
        (1u64 << 30).to_string()
    );
    let quota = read_in(&a, &["cpu.max", "cpu.cfs_quota_us"]);
    assert!(quota == "150000" || quota == "150000 100000", "{quota}");
    assert_eq!(read_in(&a, &["cpuset.cpus"]), "0");
    let shm = env.ok(&["exec", "lmc", "a", "--", "df", "-k", "/dev/shm"]);
    assert!(shm.contains(&(128 * 1024).to_string()), "{shm}");
}

#[test]
fn a_limit_that_cannot_hold_is_refused_at_its_line_and_nothing_is_made() {
    let env = Env::new("limits-bad");
    let cases = [
        ("memory = \"64x\"", "expected a size like"),
        ("memory = \"1k\"", "at least 6 MB"),
        ("cpu = \"lots\"", "expected a number of CPUs"),
        ("cpu = 0", "from 0.01 to 4096"),
        (
            "cpuset = \"0-4095\"",
            "this machine has no CPU 0-4095 online",
        ),
        ("cpuset = \"3-1\"", "expected CPUs like"),
        ("pids = 0", "a whole number from 1"),
        ("shm_size = \"1\"", "at least a page"),
    ];
    for (i, (line, expected)) in cases.iter().enumerate() {
        let text = format!(
            "[fleet]\nname = \"lmb{i}\"\n[[node]]\nname = \"a\"\ncommands = [\"exec sleep 1\"]\n{line}\n"
        );
        let file = env.file(&format!("lmb{i}.toml"), &text);
        env.refused(line, &["up", file.to_str().unwrap()], &file, 6, expected);
        assert!(fleet_groups(&format!("lmb{i}")).is_empty());
    }
}

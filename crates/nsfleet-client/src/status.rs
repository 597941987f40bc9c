//! `nsfleet status`: every fleet under the run directory (or one), asked of its supervisor;
//! a fleet whose supervisor is gone shows as dead.

use super::{connect, human_bytes};
use anyhow::bail;
use nsfleet::control::{FleetStatus, Reply, Request};
use nsfleet::rundir::RunDir;
use std::path::PathBuf;
use std::time::Duration;

pub struct StatusArgs {
    pub name: Option<String>,
    pub json: bool,
    pub run_dir: PathBuf,
}

pub fn status(a: StatusArgs) -> anyhow::Result<()> {
    let rd = RunDir::new(&a.run_dir);
    let names = match &a.name {
        Some(n) if rd.record(n).is_none() => {
            bail!(
                "no fleet named {n:?} under {} (`nsfleet status` lists them)",
                rd.root().display()
            )
        }
        Some(n) => vec![n.clone()],
        None => rd.fleets(),
    };
    let fleets: Vec<FleetStatus> = names.iter().map(|n| query(&rd, n)).collect();
    if a.json {
        println!("{}", serde_json::json!({ "fleets": fleets }));
    } else if a.name.is_some() {
        print_one(&fleets[0]);
    } else {
        print_table(&fleets, &rd);
    }
    Ok(())
}

/// The supervisor's answer, or what the run folder says when there is no supervisor.
pub fn query(rd: &RunDir, name: &str) -> FleetStatus {
    let asked = connect(rd, name).and_then(|mut c| {
        c.set_timeout(Some(Duration::from_secs(10)));
        c.call(&Request::Status)
    });
    match asked {
        Ok(Reply::Status(s)) => s,
        _ => {
            let r = rd.record(name);
            let starting = r
                .as_ref()
                .is_some_and(|r| r.supervisor.is_none() && r.owner_alive());
            let alive = r.as_ref().is_some_and(|r| r.owner_alive());
            FleetStatus {
                name: name.to_string(),
                state: if starting {
                    "starting"
                } else if alive {
                    "unreachable"
                } else {
                    "dead"
                }
                .into(),
                pid: r.and_then(|r| r.supervisor).map_or(0, |s| s.pid),
                run_dir: rd.fleet_dir(name).display().to_string(),
                ..FleetStatus::default()
            }
        }
    }
}

fn print_table(fleets: &[FleetStatus], rd: &RunDir) {
    if fleets.is_empty() {
        println!("no fleets under {}", rd.root().display());
        return;
    }
    println!(
        "{:<20} {:<8} {:>8} {:>7} {:>6} {:>11} {:>8}",
        "FLEET", "STATE", "PID", "NODES", "PROCS", "KERNEL MEM", "RECLAIM"
    );
    for f in fleets {
        println!(
            "{:<20} {:<8} {:>8} {:>7} {:>6} {:>11} {:>8}",
            f.name,
            f.state,
            f.pid,
            f.node_count,
            f.processes_running,
            human_bytes(f.kernel_mem_bytes),
            f.awaiting_reclaim
        );
    }
    if fleets.iter().any(|f| f.state == "dead") {
        println!(
            "dead fleets left only their run folder behind; `nsfleet clean --all` removes them"
        );
    }
}

fn print_one(f: &FleetStatus) {
    println!("fleet {:?}: {} (supervisor pid {})", f.name, f.state, f.pid);
    if f.state == "dead" {
        println!("  its namespaces and processes died with the supervisor; `nsfleet clean {}` removes {}", f.name, f.run_dir);
        return;
    }
    println!(
        "  nodes {}  processes running {}  workers {}",
        f.node_count, f.processes_running, f.workers
    );
    println!(
        "  kernel memory ~{}  awaiting reclamation {}",
        human_bytes(f.kernel_mem_bytes),
        f.awaiting_reclaim
    );
    println!("  subsystems: {}", f.subsystems.join(", "));
    println!("  run folder: {} (node logs in logs/)", f.run_dir);
    const SHOWN: usize = 20;
    for n in f.nodes.iter().take(SHOWN) {
        let procs: Vec<String> = n.processes.iter().map(describe_process).collect();
        println!(
            "  {:<16} net:[{}] {}",
            n.name,
            n.netns_inode,
            procs.join("; ")
        );
        if let Some(line) = limits_line(&n.limits, n.usage.as_ref()) {
            println!("      {line}");
        }
        if let Some(u) = n.usage.filter(|u| u.oom_kills > 0) {
            let line = nsfleet::subsys::process::oom_line(u.oom_kills, n.limits.memory);
            println!("      {line}");
        }
        for i in &n.interfaces {
            println!("      {i}");
        }
        for (iface, imp) in &n.impairments {
            println!("      {iface} impaired: {imp}");
        }
    }
    if f.nodes.len() > SHOWN {
        println!(
            "  ... and {} more (--json lists all)",
            f.nodes.len() - SHOWN
        );
    }
}

/// "limits: memory 64 MB, cpu 0.5, cpuset 0-1, pids 50 (3.1 MB used)": a node's limits,
/// if it has any.
fn limits_line(
    l: &nsfleet::topology::Limits,
    u: Option<&nsfleet::sys::cgroup::Usage>,
) -> Option<String> {
    let words = limit_words(l);
    if words.is_empty() {
        return None;
    }
    let used = (u.and_then(|u| u.memory_bytes)).map_or(String::new(), |b| {
        format!(" ({} used)", human_bytes(b as i64))
    });
    Some(format!("limits: {}{used}", words.join(", ")))
}

/// Each of a node's limits in words (`memory 64 MB`, `cpu 0.5`): `status` and `stats`
/// say them alike.
pub(crate) fn limit_words(l: &nsfleet::topology::Limits) -> Vec<String> {
    use nsfleet_values::{cpu_list_text, memory_text};
    let mut words = Vec::new();
    words.extend(l.memory.map(|m| format!("memory {}", memory_text(m))));
    if l.memory_unlimited() {
        words.push("memory unlimited".into());
    }
    words.extend(l.cpu_milli.map(|c| format!("cpu {}", c as f64 / 1000.0)));
    words.extend(
        l.cpuset
            .as_ref()
            .map(|c| format!("cpuset {}", cpu_list_text(c))),
    );
    words.extend(l.pids.map(|p| format!("pids {p}")));
    words.extend(l.shm_bytes.map(|b| format!("/dev/shm {}", memory_text(b))));
    words
}

/// `zebra -d ... [4242, daemon]`, `sleep 9 [4243, exited 1, restarted 2x]`.
pub(crate) fn describe_process(p: &nsfleet::subsys::process::ProcInfo) -> String {
    use nsfleet::sys::Exit;
    let mut state = vec![p.pid.to_string()];
    if p.daemon {
        state.push("daemon".into());
    }
    match p.exit {
        Some(Exit::Code(c)) => state.push(format!("exited {c}")),
        Some(Exit::Signal(s)) => state.push(format!("killed by signal {s}")),
        Some(Exit::Unknown) => state.push("exited".into()),
        None => {}
    }
    if p.paused {
        state.push("paused".into());
    }
    if p.restarts > 0 {
        state.push(format!("restarted {}x", p.restarts));
    }
    format!("{} [{}]", p.command, state.join(", "))
}

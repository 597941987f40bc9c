//! `nsfleet bench daemons`: N routers running BIRD OSPF in a grid (examples/bird/ospf.conf,
//! one template), from `nsfleet up` to full convergence (every router has a route to
//! every other router's loopback), memory per router (kernel, daemon, nsfleet's init), and
//! `down` to full reclamation. The convergence time is split into what nsfleet spends
//! (`up`: namespaces, links, worlds, daemons started) and what the daemons spend after
//! (OSPF's own timers: hello 2 s, dead 120 s, SPF on a 5 s tick, and its flooding), so
//! each can be judged against its own.

use super::{emit, machine, metric, need_root, note, rss_of, which, Cli, Common};
use anyhow::{bail, Context};
use nsfleet::core::mem_available;
use nsfleet::sys;
use nsfleet_results::{Better, Results};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

pub struct DaemonsArgs {
    pub count: u64,
    /// Give up on convergence after this long.
    pub timeout: Duration,
    pub common: Common,
}

/// The template every router of the grid runs (its router id is its loopback).
const BIRD_CONF: &str = include_str!("../../../examples/bird/ospf.conf");

#[derive(Default)]
struct Samples {
    up_s: Vec<f64>,
    converged_after_up_s: Vec<f64>,
    total_s: Vec<f64>,
    down_s: Vec<f64>,
    kernel_kb: Vec<f64>,
    bird_kb: Vec<f64>,
    init_kb: Vec<f64>,
    all_in_kb: Vec<f64>,
}

pub fn daemons(a: DaemonsArgs) -> anyhow::Result<()> {
    need_root("daemons")?;
    if !which("bird") {
        bail!("bench daemons runs BIRD, which is not installed here: apt-get install bird2");
    }
    let c = &a.common;
    let want = c.size(a.count, 16);
    let rows = ((want as f64).sqrt().round() as u64).max(2);
    let cols = want.div_ceil(rows).max(2);
    let count = rows * cols;
    let mut s = Samples::default();
    for r in 0..c.repetitions() {
        note(&format!(
            "run {}/{}: a {rows} x {cols} grid of BIRD routers",
            r + 1,
            c.repetitions()
        ));
        run(&mut s, rows, cols, a.timeout, c.workers)?;
    }
    let mut res = Results::new(
        "daemons",
        machine(),
        serde_json::json!({"count": count, "rows": rows, "cols": cols, "runs": c.repetitions(),
            "workers": c.workers, "quick": c.quick, "daemon": "bird", "ospf_hello_s": 2, "ospf_dead_s": 120, "ospf_spf_tick_s": 5}),
    );
    use Better::*;
    let figures: [(&str, &str, Better, &Vec<f64>); 8] = [
        ("nsfleet_up_s", "s", Lower, &s.up_s),
        (
            "ospf_converged_after_up_s",
            "s",
            Neither,
            &s.converged_after_up_s,
        ),
        ("up_to_converged_s", "s", Lower, &s.total_s),
        ("down_to_reclaimed_s", "s", Lower, &s.down_s),
        ("kernel_per_router_kb", "KB", Lower, &s.kernel_kb),
        ("bird_pss_per_router_kb", "KB", Neither, &s.bird_kb),
        ("nsfleet_init_pss_per_router_kb", "KB", Lower, &s.init_kb),
        ("memory_all_in_per_router_kb", "KB", Lower, &s.all_in_kb),
    ];
    for (name, unit, better, v) in figures {
        res.metric(name, metric(unit, better, v.clone()));
    }
    let share: Vec<f64> = s.up_s.iter().zip(&s.total_s).map(|(u, t)| u / t).collect();
    res.metric("nsfleet_share_of_convergence", metric("x", Lower, share));
    emit(
        &res,
        c,
        &format!(
            "{count} BIRD OSPF routers in a {rows} x {cols} grid, up to converged to reclaimed"
        ),
    )
}

fn run(
    s: &mut Samples,
    rows: u64,
    cols: u64,
    timeout: Duration,
    workers: usize,
) -> anyhow::Result<()> {
    let count = rows * cols;
    let cli = Cli::new()?;
    let conf = cli.file("ospf.conf", BIRD_CONF)?;
    let body = format!(
        "[[generate]]\nkind = \"grid\"\nrows = {rows}\ncols = {cols}\npool = \"10.0.0.0/16\"\nnode = {{ kind = \"bird\", config = {conf:?}, loopback = \"10.255.0.0/16\" }}\n"
    );
    let before = mem_available();
    let t = Instant::now();
    let mut up = cli.up_with(&body, workers)?;
    let up_s = t.elapsed().as_secs_f64();
    let status = up.cli.status()?;
    let birds: Vec<i64> = (status["nodes"].as_array().into_iter().flatten())
        .filter_map(|n| n["processes"][0]["pid"].as_i64())
        .collect();
    if birds.len() as u64 != count {
        bail!(
            "expected {count} BIRD processes, status shows {}",
            birds.len()
        );
    }
    wait_converged(&birds, count, t, timeout)?;
    let total_s = t.elapsed().as_secs_f64();
    let all_in = (before - mem_available()) as f64 / 1e3 / count as f64;
    // The nodes' inits are the supervisor's children named nsfleet-node.
    let sup = status["pid"].as_i64().unwrap_or(0);
    let inits: Vec<i64> = (sys::children_of(sup).into_iter())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm"))
                .is_ok_and(|c| c.trim() == "nsfleet-node")
        })
        .collect();
    let pss = |pids: &[i64]| pids.iter().map(|p| pss_kb(*p)).sum::<f64>() / count as f64;
    s.bird_kb.push(pss(&birds));
    s.init_kb.push(pss(&inits));
    s.kernel_kb.push(up.kernel_bytes / 1e3 / count as f64);
    s.all_in_kb.push(all_in);
    s.up_s.push(up_s);
    s.total_s.push(total_s);
    s.converged_after_up_s.push(total_s - up_s);
    note(&format!(
        "up in {up_s:.1} s, converged {:.1} s later; supervisor RSS {:.0} MB",
        total_s - up_s,
        rss_of(sup) / 1e6
    ));
    let t = Instant::now();
    up.cli.down()?;
    s.down_s.push(t.elapsed().as_secs_f64());
    Ok(())
}

/// Polls every router's routing table until each has a route to every other router's
/// loopback (10.255.0.0/16), every 1 s plus 4 ms per router (the resolution of the
/// convergence time). Reads /proc/net/route from a thread that visits each
/// router's network namespace: a few microseconds per router, no process per check.
fn wait_converged(
    birds: &[i64],
    count: u64,
    since: Instant,
    timeout: Duration,
) -> anyhow::Result<()> {
    let birds = birds.to_vec();
    std::thread::spawn(move || -> anyhow::Result<()> {
        let mut pending: Vec<i64> = birds;
        let mut last_note = Instant::now();
        // Each check formats every routing table it reads (a few ms per thousand routes):
        // at a thousand routers, once a second would take a CPU from the daemons.
        let every = Duration::from_millis(1000 + count * 4);
        while !pending.is_empty() {
            pending.retain(|pid| loopback_routes(*pid).is_none_or(|n| n + 1 < count));
            if pending.is_empty() {
                break;
            }
            if since.elapsed() > timeout {
                bail!(
                    "{} routers still lack routes to some loopbacks after {timeout:?}",
                    pending.len()
                );
            }
            if last_note.elapsed() > Duration::from_secs(5) {
                note(&format!(
                    "{} routers not converged yet ({:.0} s)",
                    pending.len(),
                    since.elapsed().as_secs_f64()
                ));
                last_note = Instant::now();
            }
            std::thread::sleep(every);
        }
        Ok(())
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the convergence checker panicked"))?
    .context("waiting for OSPF to converge")
}

/// Routes in the main table of `pid`'s network namespace to distinct /32s of 10.255/16.
/// Runs on the checker's one thread, which it moves into that namespace (the thread ends
/// with the wait, before the fleet goes down).
fn loopback_routes(pid: i64) -> Option<u64> {
    let ns = std::fs::File::open(format!("/proc/{pid}/ns/net")).ok()?;
    sys::setns_net(ns.as_fd()).ok()?;
    let table = std::fs::read_to_string("/proc/thread-self/net/route").ok()?;
    // Destination and mask in hex, the address's bytes in memory order.
    let n = table
        .lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let dst = f
                .get(1)
                .and_then(|d| u32::from_str_radix(d, 16).ok())
                .map(u32::from_be);
            let mask = f.get(7).and_then(|m| u32::from_str_radix(m, 16).ok());
            // A router's own loopback may be routed to its `lo` too: not a route to another.
            f.first() != Some(&"lo")
                && dst.is_some_and(|d| d >> 16 == 0x0aff)
                && mask == Some(u32::MAX)
        })
        .count();
    Some(n as u64)
}

/// Proportional set size: a process's own pages plus its share of those it shares (a
/// forked init shares most of its supervisor's).
fn pss_kb(pid: i64) -> f64 {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    rollup
        .lines()
        .find(|l| l.starts_with("Pss:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0.0)
}

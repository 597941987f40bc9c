//! `nsfleet bench create`, seed 000's experiment: N bare nodes (loopback up) brought up
//! and down with this binary's own `nsfleet up` and `nsfleet down`, as a user would, with
//! 1 to K workers; against a raw in-process `unshare(CLONE_NEWNET)` loop that keeps each
//! descriptor (alone, and with lo brought up so that it holds the same kernel objects as
//! nsfleet's nodes), seed 000's `unshare -n bash -c exit` and an `ip netns add` loop.
//! Rates, per-operation latency distributions, and teardown to full reclamation.

use super::{
    cdf_points, emit, machine, metric, need_root, note, raw_namespaces, versus, which, Cli, Common,
    Ratio,
};
use anyhow::{bail, Context};
use nsfleet::core::{Fleet, FleetOptions};
use nsfleet::sys;
use nsfleet_results::{Axis, Better, Chart, Results, Series};
use std::process::Command;
use std::time::Instant;

pub struct CreateArgs {
    pub count: u64,
    pub shell_count: u64,
    pub common: Common,
}

/// Every contender's samples over the repetitions.
#[derive(Default)]
struct Samples {
    /// Per worker count (1..=K): nodes/s.
    nsfleet_rate: Vec<Vec<f64>>,
    nsfleet_down_s: Vec<f64>,
    rss_per_node: Vec<f64>,
    kernel_per_node: Vec<f64>,
    raw_rate: Vec<f64>,
    raw_down_s: Vec<f64>,
    raw_lo_rate: Vec<f64>,
    raw_lo_down_s: Vec<f64>,
    shell_rate: Vec<f64>,
    ip_rate: Vec<f64>,
    /// Per-operation latencies of the last repetition, microseconds (percentiles for nsfleet).
    nsfleet_lat: Vec<f64>,
    raw_lat: Vec<f64>,
    shell_lat: Vec<f64>,
    ip_lat: Vec<f64>,
}

pub fn create(a: CreateArgs) -> anyhow::Result<()> {
    need_root("create")?;
    let c = &a.common;
    let (count, shell_count) = (c.size(a.count, 200), c.size(a.shell_count, 40));
    sys::raise_nofile(count + nsfleet::preflight::SPARE_DESCRIPTORS)
        .context("raising RLIMIT_NOFILE")?;
    // Only for its reclamation barrier, which times the raw loops' teardown.
    let fleet = Fleet::new(FleetOptions::default())?;
    let baseline = baseline_rss(c.workers)?;
    let peers = which("unshare") && which("bash") && which("ip");
    let mut s = Samples {
        nsfleet_rate: vec![Vec::new(); c.workers],
        ..Samples::default()
    };
    for r in 0..c.repetitions() {
        note(&format!(
            "run {}/{}: {count} nodes each",
            r + 1,
            c.repetitions()
        ));
        // Alternate who goes first, so neither always meets a kernel the other just loaded.
        if r % 2 == 1 {
            raw_both(&mut s, &fleet, count)?;
        }
        for w in 1..=c.workers {
            let (rate, last) = (w == c.workers, &mut s);
            measure_nsfleet(last, count, w, baseline, rate)?;
        }
        if r % 2 == 0 {
            raw_both(&mut s, &fleet, count)?;
        }
        if peers && shell_count > 0 {
            let (rate, lat) = per_op(shell_count, |_| {
                run_quiet(Command::new("unshare").args(["-n", "bash", "-c", "exit"]))
            })?;
            s.shell_rate.push(rate);
            s.shell_lat = lat;
            let (rate, lat) = ip_netns_add(shell_count)?;
            s.ip_rate.push(rate);
            s.ip_lat = lat;
        }
    }
    let mut res = Results::new(
        "create",
        machine(),
        serde_json::json!({"count": count, "shell_count": shell_count, "runs": c.repetitions(), "workers": c.workers, "quick": c.quick}),
    );
    metrics(&mut res, &s, c.workers);
    charts(&mut res, &s);
    emit(&res, c, &format!("{count} bare nodes (lo up)"))
}

fn metrics(res: &mut Results, s: &Samples, workers: usize) {
    use Better::*;
    use Ratio::*;
    let best = &s.nsfleet_rate[workers - 1];
    for (w, v) in s.nsfleet_rate.iter().enumerate() {
        res.metric(
            &format!("nsfleet_{}_workers_nodes_per_s", w + 1),
            metric("nodes/s", Higher, v.clone()),
        );
    }
    // nsfleet's best rate against each peer's; the shell and `ip netns add` where measured.
    let mut peers = vec![
        (
            "nodes/s",
            "raw_nodes_per_s",
            &s.raw_rate,
            "nsfleet_vs_raw",
            Some(">= 0.8"),
        ),
        (
            "nodes/s",
            "raw_lo_nodes_per_s",
            &s.raw_lo_rate,
            "nsfleet_vs_raw_lo_up",
            None,
        ),
    ];
    if !s.shell_rate.is_empty() {
        peers.extend([
            (
                "ops/s",
                "shell_ops_per_s",
                &s.shell_rate,
                "nsfleet_vs_shell",
                Some(">= 5"),
            ),
            (
                "ops/s",
                "ip_netns_add_per_s",
                &s.ip_rate,
                "nsfleet_vs_ip_netns_add",
                None,
            ),
        ]);
    }
    let m = &mut res.metrics;
    for (unit, name, theirs, ratio, target) in peers {
        versus(
            m,
            unit,
            (None, best),
            (Some(name), theirs),
            OursPerTheirs(ratio, Higher),
        )
        .target = target.map(String::from);
    }
    versus(
        m,
        "s",
        (Some("nsfleet_down_s"), &s.nsfleet_down_s),
        (Some("raw_lo_down_s"), &s.raw_lo_down_s),
        TheirsPerOurs("nsfleet_teardown_vs_raw_lo", Higher),
    )
    .target = Some(">= 0.9 (same kernel objects)".into());
    res.metric(
        "supervisor_rss_per_node_bytes",
        metric("bytes", Lower, s.rss_per_node.clone()).with_target("<= 2048"),
    )
    .metric(
        "kernel_per_node_bytes",
        metric("bytes", Lower, s.kernel_per_node.clone()),
    );
    for (name, lat) in [
        ("nsfleet", &s.nsfleet_lat),
        ("raw", &s.raw_lat),
        ("shell", &s.shell_lat),
        ("ip_netns_add", &s.ip_lat),
    ] {
        let better = if name == "nsfleet" { Lower } else { Neither };
        let p = nsfleet_results::percentiles(lat);
        if let (Some(&p50), Some(&p99)) = (p.get(50), p.get(99)) {
            res.metric(
                &format!("{name}_latency_p50_us"),
                metric("us", better, vec![p50]),
            )
            .metric(
                &format!("{name}_latency_p99_us"),
                metric("us", better, vec![p99]),
            );
        }
    }
}

fn charts(res: &mut Results, s: &Samples) {
    let by_workers = s
        .nsfleet_rate
        .iter()
        .enumerate()
        .map(|(w, v)| ((w + 1) as f64, nsfleet_results::median(v)));
    res.charts.push(Chart {
        id: "create-workers".into(),
        title: "Bare nodes: creation rate against workers".into(),
        x: Axis::linear("workers"),
        y: Axis::linear("nodes/s"),
        series: vec![Series {
            name: "nsfleet".into(),
            points: by_workers.collect(),
        }],
    });
    let cdf = |name: &str, lat: &[f64]| Series {
        name: name.into(),
        points: cdf_points(lat),
    };
    res.charts.push(Chart {
        id: "create-latency".into(),
        title: "Bare nodes: one creation's latency (cumulative)".into(),
        x: Axis::log("microseconds"),
        y: Axis::linear("percent of operations"),
        series: vec![
            cdf("nsfleet (one node on its worker)", &s.nsfleet_lat),
            cdf("raw unshare loop", &s.raw_lat),
            cdf("unshare -n bash -c exit", &s.shell_lat),
            cdf("ip netns add", &s.ip_lat),
        ],
    });
}

fn raw_both(s: &mut Samples, fleet: &Fleet, count: u64) -> anyhow::Result<()> {
    let (up, down, lat) = measure_raw(fleet, count, false)?;
    s.raw_rate.push(count as f64 / up);
    s.raw_down_s.push(down);
    s.raw_lat = lat;
    let (up, down, _) = measure_raw(fleet, count, true)?;
    s.raw_lo_rate.push(count as f64 / up);
    s.raw_lo_down_s.push(down);
    Ok(())
}

/// nsfleet as a user runs it: `nsfleet up` of a bare fleet (a real supervisor) with
/// `workers`, then `nsfleet down`, each timed from the outside. With `full`, also records
/// teardown, memory and latency.
fn measure_nsfleet(
    s: &mut Samples,
    count: u64,
    workers: usize,
    baseline_rss: f64,
    full: bool,
) -> anyhow::Result<()> {
    let t = Instant::now();
    let mut up = Cli::new()?.up(count, workers)?;
    let up_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    up.cli.down()?;
    s.nsfleet_rate[workers - 1].push(count as f64 / up_s);
    if full {
        s.nsfleet_down_s.push(t.elapsed().as_secs_f64());
        s.rss_per_node
            .push((up.rss - baseline_rss) / (count.max(2) - 1) as f64);
        s.kernel_per_node.push(up.kernel_bytes / count as f64);
        s.nsfleet_lat = up.create_latency_us;
    }
    Ok(())
}

/// The supervisor's resident memory with a one-node fleet: what per-node figures are
/// measured beyond.
fn baseline_rss(workers: usize) -> anyhow::Result<f64> {
    let mut up = Cli::new()?.up(1, workers)?;
    let rss = up.rss;
    up.cli.down()?;
    Ok(rss)
}

/// The raw loop (`raw_namespaces`): (up seconds, teardown to full reclamation,
/// per-operation microseconds).
fn measure_raw(fleet: &Fleet, count: u64, lo_up: bool) -> anyhow::Result<(f64, f64, Vec<f64>)> {
    let t = Instant::now();
    let (fds, lat) = raw_namespaces(count, lo_up)?;
    let up = t.elapsed();
    let t = Instant::now();
    drop(fds);
    fleet.reclaim_barrier()?;
    Ok((up.as_secs_f64(), t.elapsed().as_secs_f64(), lat))
}

/// Runs `op` `n` times; returns (operations per second, each one's microseconds).
fn per_op(
    n: u64,
    mut op: impl FnMut(u64) -> anyhow::Result<()>,
) -> anyhow::Result<(f64, Vec<f64>)> {
    let mut lat = Vec::with_capacity(n as usize);
    let t = Instant::now();
    for i in 0..n {
        let o = Instant::now();
        op(i)?;
        lat.push(o.elapsed().as_secs_f64() * 1e6);
    }
    Ok((n as f64 / t.elapsed().as_secs_f64(), lat))
}

fn run_quiet(cmd: &mut Command) -> anyhow::Result<()> {
    let st = cmd.stdout(std::process::Stdio::null()).status()?;
    if !st.success() {
        bail!("{cmd:?} failed: {st}");
    }
    Ok(())
}

/// `ip netns add` per namespace (a named, bind-mounted namespace each), timed per call;
/// then exactly those names are deleted, untimed.
fn ip_netns_add(n: u64) -> anyhow::Result<(f64, Vec<f64>)> {
    let name = |i: u64| format!("nsfbench{}-{i}", std::process::id());
    let made = per_op(n, |i| {
        run_quiet(Command::new("ip").args(["netns", "add", &name(i)]))
    });
    for i in 0..n {
        let _ = Command::new("ip")
            .args(["netns", "del", &name(i)])
            .stderr(std::process::Stdio::null())
            .status();
    }
    made
}

//! `nsfleet bench setns`, seed 003's other measurement: what it costs a worker thread to
//! move between namespaces, per `setns` call, with N namespaces alive, against moving by a
//! process per move (`nsenter --net=... true`, as `ip netns exec` does). Seed 003's kernel
//! waited an RCU grace period in every switch; a kernel that does not costs microseconds.

use super::{cdf_points, emit, machine, metric, need_root, note, raw_namespaces, which, Common};
use anyhow::{bail, Context};
use nsfleet::sys;
use nsfleet_results::{Axis, Better, Chart, Results, Series};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::process::Command;
use std::time::Instant;

pub struct SetnsArgs {
    /// setns calls per repetition.
    pub calls: u64,
    /// Namespaces alive (and visited in turn).
    pub alive: u64,
    /// Moves by a process per move.
    pub process_calls: u64,
    pub common: Common,
}

pub fn setns(a: SetnsArgs) -> anyhow::Result<()> {
    need_root("setns")?;
    let c = &a.common;
    let (calls, alive, procs) = (
        c.size(a.calls, 20_000),
        c.size(a.alive, 100),
        c.size(a.process_calls, 50),
    );
    sys::raise_nofile(alive + nsfleet::preflight::SPARE_DESCRIPTORS)
        .context("raising RLIMIT_NOFILE")?;
    let (fds, _) = raw_namespaces(alive, false)?;
    let (mut per_call, mut p99, mut proc_us, mut lat) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for r in 0..c.repetitions() {
        note(&format!(
            "run {}/{}: {calls} setns calls over {alive} namespaces",
            r + 1,
            c.repetitions()
        ));
        lat = moves(&fds, calls)?;
        per_call.push(lat.iter().sum::<f64>() / lat.len() as f64);
        p99.push(nsfleet_results::percentiles(&lat)[99]);
        if procs > 0 && which("nsenter") {
            proc_us.push(by_process(&fds, procs)? / 1e3);
        }
    }
    let mut res = Results::new(
        "setns",
        machine(),
        serde_json::json!({"calls": calls, "alive": alive, "process_calls": procs, "runs": c.repetitions(), "quick": c.quick}),
    );
    use Better::*;
    res.metric("setns_ns_per_call", metric("ns", Lower, per_call.clone()))
        .metric("setns_p99_ns", metric("ns", Lower, p99));
    if !proc_us.is_empty() {
        let ratio = proc_us
            .iter()
            .zip(&per_call)
            .map(|(p, s)| p * 1e3 / s)
            .collect();
        res.metric(
            "nsenter_process_us_per_move",
            metric("us", Neither, proc_us),
        )
        .metric("setns_vs_process_per_move", metric("x", Higher, ratio));
    }
    res.charts.push(Chart {
        id: "setns-latency".into(),
        title: format!("One setns call, {alive} namespaces alive (cumulative)"),
        x: Axis::log("nanoseconds"),
        y: Axis::linear("percent of calls"),
        series: vec![Series {
            name: "setns(CLONE_NEWNET)".into(),
            points: cdf_points(&lat),
        }],
    });
    emit(
        &res,
        c,
        &format!("moving a thread between {alive} namespaces"),
    )
}

/// Each call's nanoseconds, visiting the namespaces in turn on a thread of its own.
fn moves(fds: &[OwnedFd], calls: u64) -> anyhow::Result<Vec<f64>> {
    std::thread::scope(|s| {
        s.spawn(|| -> anyhow::Result<Vec<f64>> {
            let mut lat = Vec::with_capacity(calls as usize);
            for i in 0..calls as usize {
                let fd = fds[i % fds.len()].as_fd();
                let t = Instant::now();
                sys::setns_net(fd)?;
                lat.push(t.elapsed().as_nanos() as f64);
            }
            Ok(lat)
        })
        .join()
        .map_err(|_| anyhow::anyhow!("setns thread panicked"))?
    })
}

/// Mean nanoseconds per move made by a process of its own (`nsenter`).
fn by_process(fds: &[OwnedFd], n: u64) -> anyhow::Result<f64> {
    let me = std::process::id();
    let t = Instant::now();
    for i in 0..n as usize {
        let path = format!("--net=/proc/{me}/fd/{}", fds[i % fds.len()].as_raw_fd());
        let st = Command::new("nsenter")
            .args([path.as_str(), "true"])
            .status()?;
        if !st.success() {
            bail!("nsenter failed: {st}");
        }
    }
    Ok(t.elapsed().as_nanos() as f64 / n as f64)
}

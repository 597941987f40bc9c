//! `nsfleet bench teardown`, seed 001's experiment: N namespaces (loopback up) torn down
//! by nsfleet's reaper, which drops them all and lets `cleanup_net` take them in batches,
//! against one at a time, each waited for until the kernel has reclaimed it, as teardown
//! went before the kernel batched it. Both wait with the same reclamation barrier. Also
//! the raw all-at-once drop (the kernel's own batching with nothing around it), the memory
//! each gives back, and MemAvailable over the teardown.

use super::{
    emit, machine, metric, need_root, note, ratio, raw_namespaces, Cli, Common, MemSampler,
};
use anyhow::{bail, Context};
use nsfleet::core::{mem_available, Fleet, FleetOptions};
use nsfleet::sys;
use nsfleet_results::{Axis, Better, Chart, Results, Series};
use std::time::Instant;

pub struct TeardownArgs {
    pub count: u64,
    pub common: Common,
}

#[derive(Default)]
struct Samples {
    nsfleet_s: Vec<f64>,
    one_by_one_s: Vec<f64>,
    raw_batch_s: Vec<f64>,
    nsfleet_returned: Vec<f64>,
    one_by_one_returned: Vec<f64>,
    /// MemAvailable given back over time in the last repetition: (seconds, MB).
    curves: Vec<(String, Vec<(f64, f64)>)>,
}

pub fn teardown(a: TeardownArgs) -> anyhow::Result<()> {
    need_root("teardown")?;
    let c = &a.common;
    let count = c.size(a.count, 100);
    if count == 0 || c.runs == 0 {
        bail!("--count and --runs must be at least 1");
    }
    sys::raise_nofile(count + nsfleet::preflight::SPARE_DESCRIPTORS)
        .context("raising RLIMIT_NOFILE")?;
    let fleet = Fleet::new(FleetOptions::default())?;
    let mut s = Samples::default();
    for r in 0..c.repetitions() {
        note(&format!(
            "run {}/{}: {count} namespaces, nsfleet",
            r + 1,
            c.repetitions()
        ));
        s.curves.clear();
        nsfleet(&mut s, count, c.workers)?;
        note(&format!(
            "run {}/{}: {count} namespaces, one at a time",
            r + 1,
            c.repetitions()
        ));
        let (secs, returned, curve) = raw(&fleet, count, true)?;
        s.one_by_one_s.push(secs);
        s.one_by_one_returned.push(returned);
        s.curves
            .push(("one at a time, each waited for".into(), curve));
        let (secs, _, curve) = raw(&fleet, count, false)?;
        s.raw_batch_s.push(secs);
        s.curves.push(("raw: all dropped at once".into(), curve));
    }
    let mut res = Results::new(
        "teardown",
        machine(),
        serde_json::json!({"count": count, "runs": c.repetitions(), "workers": c.workers, "quick": c.quick}),
    );
    use Better::*;
    let figures: [(&str, &str, Better, &Vec<f64>); 5] = [
        ("nsfleet_down_to_reclaimed_s", "s", Lower, &s.nsfleet_s),
        ("one_at_a_time_s", "s", Neither, &s.one_by_one_s),
        ("raw_all_at_once_s", "s", Neither, &s.raw_batch_s),
        (
            "nsfleet_memory_returned_mb",
            "MB",
            Neither,
            &s.nsfleet_returned,
        ),
        (
            "one_at_a_time_memory_returned_mb",
            "MB",
            Neither,
            &s.one_by_one_returned,
        ),
    ];
    for (name, unit, better, v) in figures {
        res.metric(name, metric(unit, better, v.clone()));
    }
    res.metric(
        "nsfleet_vs_one_at_a_time",
        ratio(Higher, &s.one_by_one_s, &s.nsfleet_s).with_target(">= 5 at 4,000"),
    )
    .metric(
        "nsfleet_vs_raw_all_at_once",
        ratio(Higher, &s.raw_batch_s, &s.nsfleet_s),
    );
    res.charts.push(Chart {
        id: "teardown-memory".into(),
        title: format!("Teardown of {count} namespaces: memory given back"),
        x: Axis::linear("seconds since teardown began"),
        y: Axis::linear("MemAvailable regained (MB)"),
        series: s
            .curves
            .iter()
            .map(|(n, p)| Series {
                name: n.clone(),
                points: p.clone(),
            })
            .collect(),
    });
    emit(
        &res,
        c,
        &format!("{count} namespaces torn down to full reclamation"),
    )
}

/// `nsfleet up` of `count` bare nodes, then `nsfleet down`, which returns once the kernel
/// has reclaimed them.
fn nsfleet(s: &mut Samples, count: u64, workers: usize) -> anyhow::Result<()> {
    let mut up = Cli::new()?.up(count, workers)?;
    let before = mem_available();
    let sampler = MemSampler::start(before);
    let t = Instant::now();
    up.cli.down()?;
    s.nsfleet_s.push(t.elapsed().as_secs_f64());
    s.nsfleet_returned
        .push((mem_available() - before) as f64 / 1e6);
    s.curves
        .insert(0, ("nsfleet down (batched)".into(), sampler.stop()));
    Ok(())
}

/// (seconds, MB given back, MemAvailable regained over time).
type Teardown = (f64, f64, Vec<(f64, f64)>);

/// `count` namespaces with lo up made on this thread, then dropped one at a time, each
/// waited for (`one_by_one`), or all at once and waited for once. Returns (seconds,
/// MB given back, the curve of it).
fn raw(fleet: &Fleet, count: u64, one_by_one: bool) -> anyhow::Result<Teardown> {
    let (fds, _) = raw_namespaces(count, true)?;
    let before = mem_available();
    let sampler = MemSampler::start(before);
    let t = Instant::now();
    if one_by_one {
        for fd in fds {
            drop(fd);
            fleet.reclaim_barrier()?;
        }
    } else {
        drop(fds);
        fleet.reclaim_barrier()?;
    }
    let secs = t.elapsed().as_secs_f64();
    Ok((
        secs,
        (mem_available() - before) as f64 / 1e6,
        sampler.stop(),
    ))
}

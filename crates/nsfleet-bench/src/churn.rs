//! `nsfleet bench churn`, seed 002's experiment: M namespaces created and destroyed in a
//! loop (in batches, through the library's fleet), with MemAvailable and Slab sampled
//! through the run: once with the reaper's bound on namespaces the kernel has yet to
//! reclaim, once without. Without a bound, creation outruns `cleanup_net` and freed but
//! unreclaimed namespaces pile up in memory; with it, creation waits for the kernel. And
//! in the same run, the raw loop: each batch made by one thread (`unshare`, lo up) and
//! dropped all at once, with nothing around it.

use super::{emit, machine, metric, need_root, note, ratio, raw_namespaces, Common, MemSampler};
use anyhow::Context;
use nsfleet::core::{mem_available, Fleet, FleetOptions};
use nsfleet::subsys::loopback::Loopback;
use nsfleet::sys;
use nsfleet::topology::{Names, NodeConfig, NodeGroup, Topology};
use nsfleet_results::{Axis, Better, Chart, Results, Series};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;

pub struct ChurnArgs {
    pub cycles: u64,
    /// Nodes per create call.
    pub batch: u64,
    /// The reaper's bound for the bounded run.
    pub bound: usize,
    pub common: Common,
}

/// A figure of both runs: (name, unit, direction, how to read it off a run, target).
type Figure = (
    &'static str,
    &'static str,
    Better,
    fn(&Run) -> f64,
    Option<&'static str>,
);

/// One run of the loop.
struct Run {
    cycles_per_s: f64,
    /// Until the kernel had reclaimed everything.
    total_s: f64,
    peak_drop_mb: f64,
    peak_slab_mb: f64,
    /// (seconds, MemAvailable drop in MB).
    curve: Vec<(f64, f64)>,
}

pub fn churn(a: ChurnArgs) -> anyhow::Result<()> {
    need_root("churn")?;
    let c = &a.common;
    let cycles = c.size(a.cycles, 2000);
    sys::raise_nofile(a.bound as u64 + a.batch + nsfleet::preflight::SPARE_DESCRIPTORS)
        .context("raising RLIMIT_NOFILE")?;
    let (mut bounded, mut unbounded, mut raw) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..c.repetitions() {
        note(&format!(
            "run {}/{}: {cycles} cycles, raw, {} per batch dropped at once",
            r + 1,
            c.repetitions(),
            a.batch
        ));
        raw.push(raw_run(cycles, a.batch)?);
        let modes = [(true, a.bound), (false, usize::MAX)];
        // Alternate who goes first, so neither always meets a kernel the other just loaded.
        let order = if r % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let (is_bounded, bound) = modes[i];
            let label = if is_bounded {
                format!("bounded at {bound}")
            } else {
                "unbounded".into()
            };
            note(&format!(
                "run {}/{}: {cycles} cycles, {label}",
                r + 1,
                c.repetitions()
            ));
            let run = run(cycles, a.batch, bound, c.workers)?;
            if is_bounded {
                bounded.push(run)
            } else {
                unbounded.push(run)
            }
        }
    }
    let mut res = Results::new(
        "churn",
        machine(),
        serde_json::json!({"cycles": cycles, "batch": a.batch, "bound": a.bound, "runs": c.repetitions(), "workers": c.workers, "quick": c.quick}),
    );
    let f = |runs: &[Run], get: fn(&Run) -> f64| runs.iter().map(get).collect::<Vec<_>>();
    use Better::*;
    // Each figure for both runs: judged in the bounded one, kept beside it in the other.
    let figures: [Figure; 4] = [
        ("cycles_per_s", "cycles/s", Higher, |r| r.cycles_per_s, None),
        (
            "peak_memavailable_drop_mb",
            "MB",
            Lower,
            |r| r.peak_drop_mb,
            Some("<= 256 at 50,000 cycles"),
        ),
        ("peak_slab_growth_mb", "MB", Lower, |r| r.peak_slab_mb, None),
        ("to_reclaimed_s", "s", Lower, |r| r.total_s, None),
    ];
    for (name, unit, better, get, target) in figures {
        let mut judged = metric(unit, better, f(&bounded, get));
        judged.target = target.map(String::from);
        res.metric(&format!("bounded_{name}"), judged);
        res.metric(
            &format!("unbounded_{name}"),
            metric(unit, Neither, f(&unbounded, get)),
        );
        res.metric(
            &format!("raw_all_at_once_{name}"),
            metric(unit, Neither, f(&raw, get)),
        );
    }
    let rate = |runs: &[Run]| f(runs, |r| r.cycles_per_s);
    res.metric(
        "bounded_vs_unbounded_throughput",
        ratio(Higher, &rate(&bounded), &rate(&unbounded)).with_target(">= 0.8"),
    )
    .metric(
        "bounded_vs_raw_throughput",
        ratio(Higher, &rate(&bounded), &rate(&raw)),
    );
    let last = |runs: &[Run], name: String| Series {
        name,
        points: runs.last().map(|r| r.curve.clone()).unwrap_or_default(),
    };
    res.charts.push(Chart {
        id: "churn-memory".into(),
        title: format!("{cycles} create/destroy cycles: memory held by the kernel"),
        x: Axis::linear("seconds"),
        y: Axis::linear("MemAvailable drop (MB)"),
        series: vec![
            last(&bounded, format!("bounded at {}", a.bound)),
            last(&unbounded, "unbounded".into()),
            last(&raw, "raw, dropped at once".into()),
        ],
    });
    emit(
        &res,
        c,
        &format!(
            "{cycles} namespaces created and destroyed, {} per batch",
            a.batch
        ),
    )
}

fn run(cycles: u64, batch: u64, bound: usize, workers: usize) -> anyhow::Result<Run> {
    let fleet = Fleet::new(FleetOptions {
        workers,
        max_unreclaimed: bound,
        ..FleetOptions::default()
    })?;
    fleet.register(Loopback)?;
    measured(&fleet, cycles, batch, |done, n| {
        fleet.create(&bare(done, n), &mut |_, _, _| ControlFlow::Continue(()))?;
        fleet.destroy_all();
        Ok(())
    })
}

/// The raw loop: each batch made on this thread and dropped at once, no bound.
fn raw_run(cycles: u64, batch: u64) -> anyhow::Result<Run> {
    let fleet = Fleet::new(FleetOptions::default())?; // for its reclamation barrier
    measured(&fleet, cycles, batch, |_, n| {
        drop(raw_namespaces(n, true)?.0);
        Ok(())
    })
}

/// Runs `cycle(done, n)` over batches until `cycles` namespaces were made and dropped,
/// then waits for the kernel to reclaim them, sampling memory throughout.
fn measured(
    fleet: &Fleet,
    cycles: u64,
    batch: u64,
    mut cycle: impl FnMut(u64, u64) -> anyhow::Result<()>,
) -> anyhow::Result<Run> {
    let (base, slab0) = (mem_available(), nsfleet::sys::meminfo("Slab:"));
    let sampler = MemSampler::start(base);
    let t = Instant::now();
    let mut done = 0;
    while done < cycles {
        let n = batch.min(cycles - done);
        cycle(done, n)?;
        done += n;
    }
    let loop_s = t.elapsed().as_secs_f64();
    fleet.reclaim_barrier()?;
    let total_s = t.elapsed().as_secs_f64();
    let samples = sampler.stop_full();
    let peak = |f: &dyn Fn(&(f64, i64, i64)) -> f64| samples.iter().map(f).fold(0.0, f64::max);
    Ok(Run {
        cycles_per_s: cycles as f64 / loop_s,
        total_s,
        peak_drop_mb: peak(&|s| (base - s.1) as f64 / 1e6),
        peak_slab_mb: peak(&|s| (s.2 - slab0) as f64 / 1e6),
        curve: samples
            .iter()
            .map(|s| (s.0, (base - s.1) as f64 / 1e6))
            .collect(),
    })
}

/// `n` bare nodes named c{start+1}...
fn bare(start: u64, n: u64) -> Topology {
    Topology {
        name: "churn".into(),
        groups: vec![NodeGroup {
            names: Names::Generated {
                template: "c{i}".into(),
                start: start + 1,
                count: n,
            },
            config: Arc::new(NodeConfig::default()),
        }],
        wiring: Vec::new(),
    }
}

//! `nsfleet bench apply`: K routers added to a running fleet of N by `nsfleet apply`,
//! against `up` of the same K routers in a fleet of their own, in the same run: the rate
//! per added node of each and their ratio (issue 17 asks for apply at up's pace). The
//! fleet is a line of routers (`[[generate]] kind = "line"`), so the K new routers join
//! the line at its end: one running router changes (its new link), the rest are new.
//! Each run adds the K routers, then removes them again (also timed), so the next run
//! starts from the same N. Times are end to end, as a user sees them: the command's wall
//! time.

use super::{emit, machine, metric, need_root, note, ratio, Cli, Common};
use anyhow::bail;
use nsfleet_results::{Better, Results};
use std::time::Instant;

pub struct ApplyArgs {
    /// Sizes of the running fleet.
    pub sizes: Vec<u64>,
    /// Routers added to it.
    pub adds: Vec<u64>,
    pub common: Common,
}

fn line(count: u64) -> String {
    format!("[[generate]]\nkind = \"line\"\ncount = {count}\npool = \"10.0.0.0/8\"\n")
}

pub fn apply(a: ApplyArgs) -> anyhow::Result<()> {
    need_root("apply")?;
    let c = &a.common;
    let sizes: Vec<u64> = a.sizes.iter().map(|n| c.size(*n, 100)).collect();
    let adds: Vec<u64> = a.adds.iter().map(|k| c.size(*k, 50)).collect();
    let mut res = Results::new(
        "apply",
        machine(),
        serde_json::json!({"sizes": sizes, "adds": adds, "runs": c.repetitions(), "workers": c.workers, "quick": c.quick}),
    );
    for &k in &adds {
        let up: Vec<f64> = (0..c.repetitions())
            .map(|_| up_rate(k, c.workers))
            .collect::<anyhow::Result<_>>()?;
        for &n in &sizes {
            note(&format!(
                "fleet of {n}, {k} routers added and removed, {} run(s)",
                c.repetitions()
            ));
            let (add, remove) = apply_rates(n, k, c)?;
            res.metric(
                &format!("apply_add_n{n}_k{k}_per_s"),
                metric("nodes/s", Better::Higher, add.clone()),
            );
            res.metric(
                &format!("apply_remove_n{n}_k{k}_per_s"),
                metric("nodes/s", Better::Higher, remove),
            );
            res.metric(
                &format!("apply_vs_up_n{n}_k{k}"),
                ratio(Better::Higher, &add, &up),
            );
        }
        res.metric(
            &format!("up_k{k}_per_s"),
            metric("nodes/s", Better::Higher, up),
        );
    }
    emit(
        &res,
        c,
        "routers added to a running line by apply, vs up of as many in a fleet of their own",
    )
}

/// Routers per second of `up` of a line of `k`, wall time of the command.
fn up_rate(k: u64, workers: usize) -> anyhow::Result<f64> {
    let cli = Cli::new()?;
    let t = Instant::now();
    let mut up = cli.up_with(&line(k), workers)?;
    let took = t.elapsed().as_secs_f64();
    up.cli.down()?;
    Ok(k as f64 / took)
}

/// A line of `n` up, then per run: `k` routers added by apply, and removed again; the
/// rates (routers per second) of each.
fn apply_rates(n: u64, k: u64, c: &Common) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    let mut up = Cli::new()?.up_with(&line(n), c.workers)?;
    let cli = &up.cli;
    let file = |count: u64| {
        cli.file(
            &format!("line{count}.toml"),
            &format!("[fleet]\nname = \"bench\"\n{}", line(count)),
        )
    };
    let (grown, back) = (file(n + k)?, file(n)?);
    let timed = |path: &str, want: &str| -> anyhow::Result<f64> {
        let t = Instant::now();
        let v = cli.run(&["apply", path, "--json"])?;
        let took = t.elapsed().as_secs_f64();
        if v["report"][want] != k {
            bail!("apply {path}: expected {k} {want}, got {}", v["report"]);
        }
        Ok(k as f64 / took)
    };
    let (mut add, mut remove) = (Vec::new(), Vec::new());
    for _ in 0..c.repetitions() {
        add.push(timed(&grown, "added")?);
        remove.push(timed(&back, "removed")?);
    }
    up.cli.down()?;
    Ok((add, remove))
}

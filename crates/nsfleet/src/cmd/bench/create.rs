//! `nsfleet bench create` is seed 000's experiment: N bare nodes (loopback up) brought up and down with
//! this binary's own `nsfleet up` and `nsfleet down`, as a user would, against a raw
//! in-process `unshare(CLONE_NEWNET)` loop that keeps each descriptor (alone, and with lo
//! brought up so that it holds the same kernel objects as nsfleet's nodes), and against
//! seed 000's `unshare -n bash -c exit` shell loop. Teardown: `nsfleet down` to full
//! reclamation, against closing every raw descriptor at once and waiting for the kernel
//! with the same reclamation barrier.

use super::{machine, median, note, which, Cli};
use crate::core::{Fleet, FleetOptions};
use crate::sys;
use anyhow::{bail, Context};
use nsfleet_netlink::{rtnl, Batch, NlSocket};
use serde::Serialize;
use std::os::fd::AsFd;
use std::process::Command;
use std::time::Instant;

pub struct CreateArgs {
    pub count: u64,
    pub shell_count: u64,
    pub runs: usize,
    pub workers: usize,
    pub json: bool,
}

/// One repetition of every contender.
#[derive(Clone, Debug, Serialize)]
struct Run {
    nsfleet_up_s: f64,
    nsfleet_down_s: f64,
    rss_per_node_bytes: f64,
    kernel_per_node_bytes: f64,
    raw_up_s: f64,
    raw_down_s: f64,
    raw_lo_up_s: f64,
    raw_lo_down_s: f64,
    shell_s: Option<f64>,
}

pub fn create(a: CreateArgs) -> anyhow::Result<()> {
    if !sys::is_root() {
        bail!("bench create creates network namespaces: run it as root");
    }

    if a.count == 0 || a.runs == 0 {
        bail!("--count and --runs must be at least 1");
    }
    sys::raise_nofile(a.count + 4096).context("raising RLIMIT_NOFILE")?;
    // Only for its reclamation barrier, which times the raw loops' teardown.
    let fleet = Fleet::new(FleetOptions::default())?;
    let baseline = baseline_rss(a.workers)?;
    let shell = a.shell_count > 0 && which("unshare") && which("bash");
    let mut runs = Vec::with_capacity(a.runs);
    for r in 0..a.runs {
        note(
            a.json,
            &format!("run {}/{}: {} nodes each", r + 1, a.runs, a.count),
        );
        // Alternate who goes first, so neither always meets a kernel the other just loaded.
        let (nsfleet, raw, raw_lo) = if r % 2 == 0 {
            let n = measure_nsfleet(a.count, a.workers, baseline)?;
            (
                n,
                measure_raw(&fleet, a.count, false)?,
                measure_raw(&fleet, a.count, true)?,
            )
        } else {
            let raw_lo = measure_raw(&fleet, a.count, true)?;
            let raw = measure_raw(&fleet, a.count, false)?;
            (measure_nsfleet(a.count, a.workers, baseline)?, raw, raw_lo)
        };
        let shell_s = shell.then(|| shell_loop(a.shell_count)).transpose()?;
        runs.push(Run {
            nsfleet_up_s: nsfleet.0,
            nsfleet_down_s: nsfleet.1,
            rss_per_node_bytes: nsfleet.2,
            kernel_per_node_bytes: nsfleet.3,
            raw_up_s: raw.0,
            raw_down_s: raw.1,
            raw_lo_up_s: raw_lo.0,
            raw_lo_down_s: raw_lo.1,
            shell_s,
        });
    }
    report(&a, &runs, a.workers, shell);

    Ok(())
}

/// nsfleet as a user runs it: `nsfleet up` of a bare fleet (a real supervisor), then
/// `nsfleet down`, each timed from the outside. Returns (up, down to full reclamation,
/// supervisor RSS per node beyond a one-node fleet's, kernel memory per node).
fn measure_nsfleet(
    count: u64,
    workers: usize,
    baseline_rss: f64,
) -> anyhow::Result<(f64, f64, f64, f64)> {
    let t = Instant::now();
    let mut up = Cli::new()?.up(count, workers)?;
    let up_s = t.elapsed().as_secs_f64();
    let rss = (up.rss - baseline_rss) / (count.max(2) - 1) as f64;
    let t = Instant::now();
    up.cli.down()?;
    Ok((
        up_s,
        t.elapsed().as_secs_f64(),
        rss,
        up.kernel_bytes / count as f64,
    ))
}

/// The supervisor's resident memory with a one-node fleet: what per-node figures are
/// measured beyond.
fn baseline_rss(workers: usize) -> anyhow::Result<f64> {
    let mut up = Cli::new()?.up(1, workers)?;
    let rss = up.rss;
    up.cli.down()?;
    Ok(rss)
}

/// The kernel's own pace: one thread, unshare and keep the descriptor; with `lo_up`, also
/// bring loopback up (one netlink request), so that the namespaces hold the same kernel
/// objects as nsfleet's bare nodes and cost the same to destroy.
fn measure_raw(fleet: &Fleet, count: u64, lo_up: bool) -> anyhow::Result<(f64, f64)> {
    let home = sys::current_netns()?;
    let mut fds = Vec::with_capacity(count as usize);
    let t = Instant::now();
    for _ in 0..count {
        sys::unshare_net()?;
        fds.push(sys::current_netns()?);
        if lo_up {
            let mut s = NlSocket::open()?;
            let mut b = Batch::new();
            rtnl::set_link(&mut b, s.next_seq(), 1, true, None);
            s.execute_all(&b)?;
        }
    }
    sys::setns_net(home.as_fd())?;
    let up = t.elapsed();
    let t = Instant::now();
    drop(fds);
    fleet.reclaim_barrier()?;
    Ok((up.as_secs_f64(), t.elapsed().as_secs_f64()))
}

/// Seed 000's loop, verbatim.
fn shell_loop(n: u64) -> anyhow::Result<f64> {
    let t = Instant::now();
    let status = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "for i in $(seq {n}); do unshare -n bash -c exit; done"
        ))
        .status()?;
    if !status.success() {
        bail!("the shell loop failed: {status}");
    }
    Ok(t.elapsed().as_secs_f64())
}

fn report(a: &CreateArgs, runs: &[Run], workers: usize, shell: bool) {
    let n = a.count as f64;
    let med = |f: &dyn Fn(&Run) -> f64| median(runs.iter().map(f).collect());
    let nsfleet_rate = med(&|r| n / r.nsfleet_up_s);
    let raw_rate = med(&|r| n / r.raw_up_s);
    let shell_rate = shell.then(|| med(&|r| a.shell_count as f64 / r.shell_s.unwrap_or(f64::NAN)));
    let (ns_down, raw_down, ns_up) = (
        med(&|r| r.nsfleet_down_s),
        med(&|r| r.raw_down_s),
        med(&|r| r.nsfleet_up_s),
    );
    let (raw_lo_rate, raw_lo_down) = (med(&|r| n / r.raw_lo_up_s), med(&|r| r.raw_lo_down_s));
    let rss = med(&|r| r.rss_per_node_bytes);
    let kernel = med(&|r| r.kernel_per_node_bytes);
    let ratios = serde_json::json!({
        "nsfleet_vs_raw_create": nsfleet_rate / raw_rate,
        "nsfleet_vs_shell_create": shell_rate.map(|s| nsfleet_rate / s),
                "nsfleet_down_vs_raw_teardown": ns_down / raw_down,
        "nsfleet_vs_raw_lo_create": nsfleet_rate / raw_lo_rate,
        "nsfleet_down_vs_raw_lo_teardown": ns_down / raw_lo_down,
        "nsfleet_down_vs_up": ns_down / ns_up,
    });
    if a.json {
        let v = serde_json::json!({
            "bench": "create", "count": a.count, "runs": a.runs, "workers": workers,
            "shell_count": a.shell_count, "machine": machine(),
            "median": {
                "nsfleet_nodes_per_s": nsfleet_rate, "raw_nodes_per_s": raw_rate, "shell_nodes_per_s": shell_rate,
                                "nsfleet_up_s": ns_up, "nsfleet_down_s": ns_down, "raw_down_s": raw_down,
                "raw_lo_nodes_per_s": raw_lo_rate, "raw_lo_down_s": raw_lo_down,
                "supervisor_rss_per_node_bytes": rss, "kernel_per_node_bytes": kernel,
            },
            "ratios": ratios, "samples": runs,
        });
        println!("{v}");
        return;
    }
    let m = machine();
    println!(
        "bench create: {} bare nodes, median of {} runs; kernel {}, {} CPUs",
        a.count,
        a.runs,
        m["kernel"].as_str().unwrap_or("?"),
        m["cpus"]
    );
    println!(
        "  {:<34} {:>10} {:>10} {:>14}",
        "", "nodes/s", "up (s)", "down+reclaim (s)"
    );
    println!(
        "  {:<34} {:>10.0} {:>10.2} {:>14.2}",
        format!("nsfleet up/down ({workers} workers)"),
        nsfleet_rate,
        ns_up,
        ns_down
    );
    println!(
        "  {:<34} {:>10.0} {:>10.2} {:>14.2}",
        "raw unshare loop (1 thread, keep fd)",
        raw_rate,
        n / raw_rate,
        raw_down
    );
    println!(
        "  {:<34} {:>10.0} {:>10.2} {:>14.2}",
        "raw loop + lo up (same kernel work)",
        raw_lo_rate,
        n / raw_lo_rate,
        raw_lo_down
    );
    match shell_rate {
        Some(s) => println!(
            "  {:<34} {:>10.0}",
            format!("unshare -n bash -c exit (x{})", a.shell_count),
            s
        ),
        None => println!("  shell loop skipped (--shell-count 0, or unshare/bash missing)"),
    }
    println!("  ratios:");
    println!(
        "    create, nsfleet / raw loop        {:>6.2}x  (target >= 0.8)",
        nsfleet_rate / raw_rate
    );
    if let Some(s) = shell_rate {
        println!(
            "    create, nsfleet / shell loop      {:>6.2}x  (target >= 5)",
            nsfleet_rate / s
        );
    }
    println!(
        "    create, nsfleet / raw + lo up     {:>6.2}x",
        nsfleet_rate / raw_lo_rate
    );
    println!(
        "    teardown, nsfleet / raw           {:>6.2}x  (target <= 1.1)",
        ns_down / raw_down
    );
    println!(
        "    teardown, nsfleet / raw + lo up   {:>6.2}x  (same kernel objects; target <= 1.1)",
        ns_down / raw_lo_down
    );

    println!(
        "    nsfleet down / nsfleet up         {:>6.2}x  (target < 1)",
        ns_down / ns_up
    );
    println!("  supervisor RSS per node {:.0} B beyond a 1-node fleet (target <= 2048); kernel memory per node ~{:.0} KB", rss, kernel / 1e3);
}

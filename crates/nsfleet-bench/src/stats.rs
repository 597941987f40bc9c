//! `nsfleet bench stats`: what one `nsfleet stats` refresh of a big fleet costs. A star of
//! N hosts (N + 1 nodes, a switch of N ports); each refresh's CPU time, the supervisor's
//! (a link dump in each node, over its workers) and the client's, against reading the
//! same counters with a process per node (`nsfleet exec NODE -- ip -s -j link`, as
//! `docker exec` or `ip netns exec` per node would) over K of the same nodes, in the same
//! run, per node.

use super::{cpu_of, emit, machine, metric, need_root, note, versus, Cli, Common, Ratio};
use anyhow::bail;
use nsfleet_results::{Better, Results};
use std::time::Instant;

pub struct StatsArgs {
    /// Hosts on the switch.
    pub count: u64,
    /// Nodes read by a process each, for the comparison.
    pub peer_count: u64,
    pub common: Common,
}

/// Refreshes timed per run; their median is the run's figure.
const REFRESHES: usize = 5;

pub fn stats(a: StatsArgs) -> anyhow::Result<()> {
    need_root("stats")?;
    let c = &a.common;
    let count = c.size(a.count, 200);
    let peers = c.size(a.peer_count, 20).min(count);
    let (mut cpu, mut wall, mut own, mut theirs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for r in 0..c.repetitions() {
        note(&format!(
            "run {}/{}: a star of {count} hosts",
            r + 1,
            c.repetitions()
        ));
        let run = run(count, peers, c.workers)?;
        cpu.push(run.cpu_s);
        wall.push(run.wall_s);
        own.push(run.cpu_s / (count + 1) as f64 * 1e3);
        theirs.push(run.peer_cpu_s / peers as f64 * 1e3);
    }
    let mut res = Results::new(
        "stats",
        machine(),
        serde_json::json!({"count": count, "peer_count": peers, "refreshes": REFRESHES,
            "runs": c.repetitions(), "workers": c.workers, "quick": c.quick}),
    );
    let mut refresh = metric("s", Better::Lower, cpu);
    if count >= 10_000 {
        refresh.target = Some("< 1".into());
    }
    res.metric(&format!("refresh_cpu_s_at_{count}"), refresh);
    res.metric(
        &format!("refresh_wall_s_at_{count}"),
        metric("s", Better::Lower, wall),
    );
    versus(
        &mut res.metrics,
        "ms",
        (Some("nsfleet_cpu_ms_per_node"), &own),
        (Some("process_per_node_cpu_ms_per_node"), &theirs),
        Ratio::TheirsPerOurs("process_per_node_vs_nsfleet", Better::Higher),
    );
    emit(
        &res,
        c,
        &format!(
            "one stats refresh of {} nodes, against a process per node",
            count + 1
        ),
    )
}

struct Run {
    /// Median over the refreshes: CPU seconds of the supervisor and the client together.
    cpu_s: f64,
    wall_s: f64,
    /// CPU seconds of the processes that read `peers` nodes, one each.
    peer_cpu_s: f64,
}

fn run(count: u64, peers: u64, workers: usize) -> anyhow::Result<Run> {
    let body = format!("[[generate]]\nkind = \"star\"\ncount = {count}\n");
    let up = Cli::new()?.up_with(&body, workers)?;
    let pid = up.cli.status()?["pid"].as_i64().unwrap_or(0);
    let busy = |pid: i64| {
        let (u, s) = cpu_of(pid);
        u + s
    };
    let (mut cpu, mut wall) = (Vec::new(), Vec::new());
    for _ in 0..REFRESHES {
        let (sup, kids, t) = (busy(pid), children_cpu(), Instant::now());
        let out = up.cli.command(&["stats", "bench", "--json"]).output()?;
        if !out.status.success() {
            bail!(
                "nsfleet stats: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        wall.push(t.elapsed().as_secs_f64());
        cpu.push(busy(pid) - sup + children_cpu() - kids);
    }
    let kids = children_cpu();
    for k in 1..=peers {
        let node = format!("h{k}");
        let out = (up
            .cli
            .command(&["exec", "bench", &node, "--", "ip", "-s", "-j", "link"]))
        .output()?;
        if !out.status.success() {
            bail!(
                "ip -s link in {node}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
    let peer_cpu_s = children_cpu() - kids;
    Ok(Run {
        cpu_s: median(cpu),
        wall_s: median(wall),
        peer_cpu_s,
    })
}

/// CPU seconds of this process's children that have been waited for (cutime + cstime).
fn children_cpu() -> f64 {
    nsfleet::sys::usage_of("self").map_or(0.0, |u| u.children_seconds)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

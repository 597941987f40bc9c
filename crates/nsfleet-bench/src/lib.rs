//! `nsfleet bench`: the seeds' experiments, nsfleet and its peers measured in the same
//! run, repeated, reported as medians and ranges, ratios and charts, in the result format
//! of `nsfleet-results`. Benchmarks, not tests: nothing here asserts a time.
//!
//! The bench lab is a client of the engine: it drives `nsfleet::core` in process, runs the
//! `nsfleet` command and its peers (`ip`, `unshare`, Mininet, trafgen) as programs, and
//! never changes the engine's behaviour to measure it.

mod apply;
pub mod browser;
mod cable;
mod churn;
mod clab_peer;
mod create;
mod daemons;
mod images;
pub mod kernels;
mod mininet;
mod phases;
mod raw;
mod routers;
mod serve;
mod setns;
mod stats;
mod teardown;
pub mod tls;
mod traffic;
mod user;

pub use apply::{apply, ApplyArgs};
pub use cable::{cable, CableArgs};
pub use churn::{churn, ChurnArgs};
pub use clab_peer::{clab_peer, ClabPeerArgs};
pub use create::{create, CreateArgs};
pub use daemons::{daemons, DaemonsArgs, Suite};
pub use images::{images, ImagesArgs};
pub use mininet::{mininet, MininetArgs};
/// How `compare` judges: against the baseline's median or its range.
pub use nsfleet_results::Against;
pub use routers::{routers, RoutersArgs};
pub use serve::{serve, ServeArgs};
pub use setns::{setns, SetnsArgs};
pub use stats::{stats, StatsArgs};
pub use teardown::{teardown, TeardownArgs};
pub use traffic::{traffic, TrafficArgs};
pub use user::{user, UserArgs};

use anyhow::{bail, Context};
use nsfleet_results::{Machine, Metric, Results};
use std::collections::{btree_map::Entry, BTreeMap};
use std::io::IsTerminal;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::Command;

/// What every scenario takes besides its own sizes.
#[derive(Clone, Debug)]
pub struct Common {
    /// Repetitions of the whole measurement; medians are reported.
    pub runs: usize,
    pub workers: usize,
    /// Print the result file on stdout instead of the summary.
    pub json: bool,
    /// Also write the result file here.
    pub output: Option<PathBuf>,
    /// A smoke run: small sizes, one repetition, well under a minute.
    pub quick: bool,
}

impl Common {
    /// `full` normally, `quick` for a smoke run.
    pub(crate) fn size(&self, full: u64, quick: u64) -> u64 {
        if self.quick {
            quick.min(full)
        } else {
            full
        }
    }

    pub(crate) fn repetitions(&self) -> usize {
        if self.quick {
            1
        } else {
            self.runs.max(1)
        }
    }
}

/// `nsfleet bench all`: every scenario in turn, each result written to `dir/SCENARIO.json`.
pub fn all(c: &Common, dir: &std::path::Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let with = |name: &str| Common {
        output: Some(dir.join(format!("{name}.json"))),
        ..c.clone()
    };
    let defaults = Defaults::default();
    create(CreateArgs {
        count: defaults.create_count,
        shell_count: defaults.shell_count,
        common: with("create"),
    })?;
    teardown(TeardownArgs {
        count: defaults.teardown_count,
        common: with("teardown"),
    })?;
    churn(ChurnArgs {
        cycles: defaults.churn_cycles,
        batch: defaults.churn_batch,
        bound: defaults.churn_bound,
        common: with("churn"),
    })?;
    routers(RoutersArgs {
        steps: vec![defaults.routers_count],
        script_count: defaults.script_count,
        mininet_count: defaults.mininet_count,
        common: with("routers"),
    })?;
    setns(SetnsArgs {
        calls: defaults.setns_calls,
        alive: defaults.setns_alive,
        process_calls: defaults.process_calls,
        common: with("setns"),
    })?;
    traffic(TrafficArgs {
        seconds: defaults.traffic_seconds,
        loop_packets: defaults.loop_packets,
        common: with("traffic"),
    })?;
    daemons(DaemonsArgs {
        suite: Suite::Bird,
        count: defaults.daemons_count,
        timeout: defaults.daemons_timeout,
        common: with("daemons"),
    })?;
    cable(CableArgs {
        count: defaults.cable_count,
        common: with("cable"),
    })?;
    stats(StatsArgs {
        count: defaults.stats_count,
        peer_count: defaults.stats_peer_count,
        common: with("stats"),
    })?;
    apply(ApplyArgs {
        sizes: defaults.apply_sizes.clone(),
        adds: defaults.apply_adds.clone(),
        common: with("apply"),
    })?;
    images(ImagesArgs {
        counts: defaults.image_counts.clone(),
        common: with("images"),
    })?;
    daemons(DaemonsArgs {
        suite: Suite::FrrClab,
        count: defaults.clab_count,
        timeout: defaults.daemons_timeout,
        common: with("clab"),
    })
}

/// The scenarios' default sizes: the CLI's defaults and `bench all`'s.
pub struct Defaults {
    pub create_count: u64,
    pub shell_count: u64,
    pub teardown_count: u64,
    pub churn_cycles: u64,
    pub churn_batch: u64,
    pub churn_bound: usize,
    pub routers_count: u64,
    pub script_count: u64,
    pub mininet_count: u64,
    pub setns_calls: u64,
    pub setns_alive: u64,
    pub process_calls: u64,
    pub traffic_seconds: f64,
    pub daemons_count: u64,
    pub daemons_timeout: std::time::Duration,
    pub clab_count: u64,
    pub cable_count: u64,
    pub stats_count: u64,
    pub stats_peer_count: u64,
    pub apply_sizes: Vec<u64>,
    pub apply_adds: Vec<u64>,
    pub loop_packets: u64,
    pub image_counts: Vec<u64>,
    pub user_counts: Vec<u64>,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            create_count: 2000,
            shell_count: 500,
            teardown_count: 4000,
            churn_cycles: 50_000,
            churn_batch: 100,
            churn_bound: 4096,
            routers_count: 1000,
            script_count: 1000,
            mininet_count: 200,
            setns_calls: 1_000_000,
            setns_alive: 1000,
            process_calls: 200,
            traffic_seconds: 3.0,
            daemons_count: 1000,
            daemons_timeout: std::time::Duration::from_secs(600),
            clab_count: 100,
            cable_count: 1000,
            stats_count: 10_000,
            stats_peer_count: 200,
            apply_sizes: vec![1000, 10_000],
            apply_adds: vec![100, 1000],
            loop_packets: 50_000_000,
            image_counts: vec![100, 1000],
            user_counts: vec![1000, 10_000],
        }
    }
}

/// `nsfleet bench compare`: the exit code `git bisect run` acts on. 0: no metric
/// regressed beyond `threshold` (past the baseline's median, or its range: `against`);
/// 1: one did; 125: the candidate could not be measured (missing, unreadable, or nothing
/// finite in it: skip this commit); 128: the baseline is unusable, or the two runs were
/// of different scenarios or sizes (aborts a bisect rather than misjudging every commit).
pub fn compare(
    base: &std::path::Path,
    cand: &std::path::Path,
    (threshold, against): (f64, Against),
    only: &[String],
    json: bool,
) -> i32 {
    let base = match Results::load(base) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("nsfleet: baseline: {e:#}");
            return 128;
        }
    };
    let cand = match Results::load(cand) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("nsfleet: candidate not measured: {e:#}");
            return 125;
        }
    };
    let cmp = match nsfleet_results::compare_against(&base, &cand, threshold, only, against) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("nsfleet: {e:#}");
            return 128;
        }
    };
    if json {
        let rows: Vec<serde_json::Value> = cmp
            .rows
            .iter()
            .map(|r| {
                let mut row = serde_json::json!({
                    "metric": r.metric, "unit": r.unit, "baseline": r.base, "candidate": r.cand,
                    "change": r.change, "verdict": format!("{:?}", r.verdict).to_lowercase(),
                });
                if against == Against::Range {
                    row["baseline_range"] = serde_json::json!([r.base_range.0, r.base_range.1]);
                }
                row
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({"scenario": cmp.scenario, "threshold": threshold, "regressed": cmp.regressed(), "rows": rows})
        );
    } else {
        print!("{}", cmp.render());
    }
    if !cmp.measured() {
        eprintln!("nsfleet: the candidate measured nothing comparable");
        125
    } else if cmp.regressed() {
        1
    } else {
        0
    }
}

/// Hands a scenario's results to the user: the file (`-o`), JSON on stdout (`--json`), or
/// a summary table.
pub(crate) fn emit(r: &Results, c: &Common, title: &str) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(r)?;
    if let Some(path) = &c.output {
        std::fs::write(path, &text).with_context(|| format!("writing {}", path.display()))?;
    }
    if c.json {
        println!("{text}");
        return Ok(());
    }
    let m = &r.machine;
    println!(
        "bench {}: {title}; median of {} run(s); kernel {}, {} CPUs",
        r.scenario,
        c.repetitions(),
        m.kernel,
        m.cpus
    );
    let w = r.metrics.keys().map(|k| k.len()).max().unwrap_or(6);
    println!(
        "  {:<w$} {:>12} {:>25} {:<10} target",
        "metric", "median", "range", "unit"
    );
    for (name, x) in &r.metrics {
        println!(
            "  {:<w$} {:>12} {:>25} {:<10} {}",
            name,
            fig(x.median),
            format!("{} - {}", fig(x.min), fig(x.max)),
            x.unit,
            x.target.as_deref().unwrap_or("")
        );
    }
    if let Some(path) = &c.output {
        println!(
            "  written to {} (nsfleet report, nsfleet bench compare)",
            path.display()
        );
    }
    Ok(())
}

pub(crate) fn fig(v: f64) -> String {
    match v.abs() {
        a if !a.is_finite() => "-".into(),
        a if a >= 100.0 => format!("{v:.0}"),
        a if a >= 1.0 => format!("{v:.2}"),
        _ => format!("{v:.4}"),
    }
}

/// A metric from samples; shorthand for the scenarios.
pub(crate) fn metric(unit: &str, better: nsfleet_results::Better, samples: Vec<f64>) -> Metric {
    Metric::new(unit, better, samples)
}

/// Run-by-run ratios of two contenders' samples (the same repetitions, in order).
pub(crate) fn ratios(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x / y).collect()
}

/// A ratio of two contenders' samples, run by run, as a metric in "x".
pub(crate) fn ratio(better: nsfleet_results::Better, a: &[f64], b: &[f64]) -> Metric {
    metric("x", better, ratios(a, b))
}

/// Which way a ratio of nsfleet to a peer divides, with its name and its direction.
pub(crate) enum Ratio<'a> {
    /// nsfleet's samples over the peer's: a rate's multiple, or a time's overhead.
    OursPerTheirs(&'a str, nsfleet_results::Better),
    /// The peer's samples over nsfleet's: how many times faster nsfleet is, from times.
    TheirsPerOurs(&'a str, nsfleet_results::Better),
}

/// nsfleet measured against a peer on one figure in `unit`: nsfleet's metric, the peer's
/// and their ratio, each named (a side named `None` is among the metrics already). The
/// peer's figure is kept for the record (`Neither`); nsfleet's is judged the way its ratio
/// reads. Returns the ratio, for a target.
pub(crate) fn versus<'m>(
    metrics: &'m mut BTreeMap<String, Metric>,
    unit: &str,
    (ours_name, ours): (Option<&str>, &[f64]),
    (theirs_name, theirs): (Option<&str>, &[f64]),
    ratio_of: Ratio<'_>,
) -> &'m mut Metric {
    use nsfleet_results::Better::*;
    let (name, ours_better, value) = match ratio_of {
        Ratio::OursPerTheirs(name, better) => (name, better, ratio(better, ours, theirs)),
        Ratio::TheirsPerOurs(name, better) => {
            let flipped = match better {
                Higher => Lower,
                Lower => Higher,
                Neither => Neither,
            };
            (name, flipped, ratio(better, theirs, ours))
        }
    };
    if let Some(n) = ours_name {
        metrics.insert(n.to_string(), metric(unit, ours_better, ours.to_vec()));
    }
    if let Some(n) = theirs_name {
        metrics.insert(n.to_string(), metric(unit, Neither, theirs.to_vec()));
    }
    match metrics.entry(name.to_string()) {
        Entry::Occupied(mut e) => {
            e.insert(value);
            e.into_mut()
        }
        Entry::Vacant(e) => e.insert(value),
    }
}

/// Refuses to run a scenario without root, where it would fail half-way instead.
pub(crate) fn need_root(scenario: &str) -> anyhow::Result<()> {
    if !nsfleet::sys::is_root() {
        bail!("bench {scenario} creates network namespaces: run it as root");
    }
    Ok(())
}

/// Runs this very binary's `up` and `down` against a private run directory.
pub(crate) struct Cli {
    run_dir: std::path::PathBuf,
    /// The run folder's hold: removed when the bench ends, or by the next bench (or
    /// `nsfleet clean --all`) when a signal ended it first.
    _scratch: nsfleet_vm::scratch::Scratch,
    exe: std::path::PathBuf,
    /// The image store its commands use, when not the default.
    images: Option<std::path::PathBuf>,
    /// Its fleets come up `--privileged` (their nodes unconfined).
    privileged: bool,
    /// A fleet is up that nobody has taken down yet (the guard's `Drop` does then).
    up: bool,
    /// The user (uid, gid) its commands run as; root when `None`.
    user: Option<(u32, u32)>,
}

pub(crate) struct UpResult {
    pub cli: Cli,
    pub rss: f64,
    /// The supervisor's (user, system) CPU seconds so far.
    pub cpu: (f64, f64),
    pub kernel_bytes: f64,
    /// Percentiles 0..=100 of one node's creation on its worker, microseconds.
    pub create_latency_us: Vec<f64>,
}

impl Cli {
    pub(crate) fn new() -> anyhow::Result<Self> {
        sweep();
        // Numbered: a bench may drive several fleets at once (`--switch ovs-controller`
        // runs the controllers' own beside the switches').
        static MADE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let scratch = nsfleet_vm::scratch::Scratch::new(
            &std::env::temp_dir(),
            &format!("{RUN_PREFIX}{}-{n}", nsfleet_vm::scratch::me()?),
        )?;
        let run_dir = scratch.path().to_path_buf();
        // Root's alone, whatever the umask: a run directory others can write is refused.
        std::fs::set_permissions(
            &run_dir,
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )?;
        Ok(Cli {
            run_dir,
            _scratch: scratch,
            exe: std::env::current_exe()?,
            images: None,
            privileged: false,
            up: false,
            user: None,
        })
    }

    /// Its commands run as the user `uid` (group `gid`), whose run folder it then is,
    /// with a copy of this binary they may run (the build's folder may be root's alone).
    pub(crate) fn run_by(mut self, uid: u32, gid: u32) -> anyhow::Result<Self> {
        let exe = self.run_dir.join("nsfleet");
        if std::fs::hard_link(&self.exe, &exe).is_err() {
            std::fs::copy(&self.exe, &exe)?;
        }
        std::os::unix::fs::chown(&self.run_dir, Some(uid), Some(gid))?;
        self.exe = exe;
        self.user = Some((uid, gid));
        Ok(self)
    }

    /// `nsfleet ARGS` against this bench's run folder, to be run by the caller.
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.exe);
        cmd.args(args).env("NSFLEET_RUN_DIR", &self.run_dir);
        if let Some((uid, gid)) = self.user {
            use std::os::unix::process::CommandExt;
            cmd.uid(uid).gid(gid).current_dir(&self.run_dir);
        }
        if let Some(store) = &self.images {
            cmd.env("NSFLEET_IMAGES", store);
        }
        cmd
    }

    /// Its commands use the image store at `store`.
    pub(crate) fn with_image_store(mut self, store: &std::path::Path) -> Self {
        self.images = Some(store.to_path_buf());
        self
    }

    /// Its fleets come up `--privileged` when `yes`.
    pub(crate) fn privileged(mut self, yes: bool) -> Self {
        self.privileged = yes;
        self
    }

    /// This bench's run folder (removed with it).
    pub(crate) fn run_dir(&self) -> &std::path::Path {
        &self.run_dir
    }

    /// The control socket of fleet `name` run by this bench.
    pub(crate) fn socket(&self, name: &str) -> std::path::PathBuf {
        nsfleet::rundir::RunDir::new(&self.run_dir).socket(name)
    }

    /// A file in this bench's run folder (removed with it); returns its path.
    pub(crate) fn file(&self, name: &str, text: &str) -> anyhow::Result<String> {
        let path = self.run_dir.join(name);
        std::fs::write(&path, text)?;
        Ok(path.to_string_lossy().into_owned())
    }

    pub(crate) fn run(&self, args: &[&str]) -> anyhow::Result<serde_json::Value> {
        let out = self.command(args).output()?;
        if !out.status.success() {
            bail!(
                "nsfleet {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(serde_json::from_slice(&out.stdout)?)
    }

    /// `nsfleet up` of a fleet of `count` bare nodes.
    pub(crate) fn up(self, count: u64, workers: usize) -> anyhow::Result<UpResult> {
        let body = format!("[[node]]\nname = \"n{{i}}\"\ncount = {count}\n");
        self.up_with(&body, workers)
    }

    /// `nsfleet up` of a fleet named "bench" whose tables (after `[fleet]`) are `body`.
    pub(crate) fn up_with(self, body: &str, workers: usize) -> anyhow::Result<UpResult> {
        let file = self.file("bench.toml", &format!("[fleet]\nname = \"bench\"\n{body}"))?;
        self.up_file(&file, workers)
    }

    /// `nsfleet up FILE` of a fleet named "bench" (its format as its name says).
    pub(crate) fn up_file(mut self, file: &str, workers: usize) -> anyhow::Result<UpResult> {
        let workers = workers.to_string();
        let mut args = vec!["up", file, "--json", "--workers", &workers];
        if self.privileged {
            args.push("--privileged");
        }
        let v = self.run(&args)?;
        self.up = true;
        let pid = v["pid"].as_i64().unwrap_or(0);
        Ok(UpResult {
            cli: self,
            rss: rss_of(pid),
            cpu: cpu_of(pid),
            kernel_bytes: v["kernel_mem_bytes"].as_f64().unwrap_or(0.0),
            create_latency_us: serde_json::from_value(v["create_latency_us"].clone())
                .unwrap_or_default(),
        })
    }

    /// `nsfleet status bench --json`: the fleet's entry.
    pub(crate) fn status(&self) -> anyhow::Result<serde_json::Value> {
        let v = self.run(&["status", "bench", "--json"])?;
        Ok(v["fleets"][0].clone())
    }

    /// `nsfleet down`, to full reclamation; returns its JSON report.
    pub(crate) fn down(&mut self) -> anyhow::Result<serde_json::Value> {
        self.up = false;
        self.run(&["down", "bench", "--json"])
    }
}

impl Drop for Cli {
    /// Its fleet down; then its run folder goes with `_scratch`.
    fn drop(&mut self) {
        if self.up {
            let _ = self.down();
        }
    }
}

/// What names a bench's run folder in the temporary folder (then `PID-START`).
const RUN_PREFIX: &str = "nsfleet-bench-";

/// Removes the run folders of benches a signal ended (their process gone, by the folder's
/// owner record); returns them. For the next bench and `nsfleet clean --all`.
pub fn sweep() -> Vec<std::path::PathBuf> {
    nsfleet_vm::scratch::sweep(&std::env::temp_dir(), RUN_PREFIX)
}

/// MemAvailable and Slab sampled every 20 ms on a thread of its own, through a run.
pub(crate) struct MemSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Vec<(f64, i64, i64)>>,
    base: i64,
}

impl MemSampler {
    /// `base` is the MemAvailable that [`stop`](Self::stop) reports changes against.
    pub(crate) fn start(base: i64) -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let t = std::time::Instant::now();
            let mut out = Vec::new();
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let [available, slab] = nsfleet::sys::meminfo_fields(&["MemAvailable:", "Slab:"]);
                out.push((t.elapsed().as_secs_f64(), available, slab));
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            out
        });
        MemSampler { stop, thread, base }
    }

    /// (seconds, MemAvailable, Slab) samples, in bytes.
    pub(crate) fn stop_full(self) -> Vec<(f64, i64, i64)> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }

    /// (seconds, MB of MemAvailable above the base) samples.
    pub(crate) fn stop(self) -> Vec<(f64, f64)> {
        let base = self.base;
        let s = self.stop_full();
        s.into_iter()
            .map(|(t, m, _)| (t, (m - base) as f64 / 1e6))
            .collect()
    }
}

/// The kernel's own pace, the raw loop of several scenarios: `count` namespaces made on
/// this thread with unshare, each descriptor kept, with loopback brought up when `lo_up`
/// (one netlink request: then they hold the same kernel objects as nsfleet's bare nodes).
/// The thread returns to its namespace. Returns them and each one's microseconds.
pub(crate) fn raw_namespaces(count: u64, lo_up: bool) -> anyhow::Result<(Vec<OwnedFd>, Vec<f64>)> {
    let home = nsfleet::sys::current_netns()?;
    let mut fds = Vec::with_capacity(count as usize);
    let mut lat = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let op = std::time::Instant::now();
        nsfleet::sys::unshare_net()?;
        fds.push(nsfleet::sys::current_netns()?);
        if lo_up {
            let mut s = nsfleet_netlink::NlSocket::open()?;
            let mut b = nsfleet_netlink::Batch::new();
            nsfleet_netlink::rtnl::set_link(&mut b, s.next_seq(), 1, true, None);
            s.execute_all(&b)?;
        }
        lat.push(op.elapsed().as_secs_f64() * 1e6);
    }
    nsfleet::sys::setns_net(std::os::fd::AsFd::as_fd(&home))?;
    Ok((fds, lat))
}

/// The `p`-th percentile of `v` (nearest rank).
pub(crate) fn percentile(v: &[f64], p: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * s.len() as f64).ceil().max(1.0) as usize;
    s[rank.min(s.len()) - 1]
}

/// A cumulative distribution of `v` as (value, percent at or below) at 101 points.
pub(crate) fn cdf_points(v: &[f64]) -> Vec<(f64, f64)> {
    let p = nsfleet_results::percentiles(v);
    p.into_iter().zip(0..).map(|(x, i)| (x, i as f64)).collect()
}

/// Progress, on stderr (stdout carries the results).
pub(crate) fn note(s: &str) {
    if std::io::stderr().is_terminal() {
        eprintln!("  {s}");
    }
}

pub(crate) fn rss_of(pid: i64) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))?
                .split_whitespace()
                .nth(1)?
                .parse::<f64>()
                .ok()
        })
        .map_or(0.0, |kb| kb * 1024.0)
}

pub(crate) fn which(cmd: &str) -> bool {
    nsfleet::sys::host::which(cmd).is_some()
}

/// What a result depends on besides the code: kernel, its config, CPUs, memory.
pub(crate) fn machine() -> Machine {
    let release = nsfleet_vm::kernel::running_release();
    Machine {
        kernel: release,
        cpu_model: cpu_model(),
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        mem_total_bytes: nsfleet::sys::meminfo("MemTotal:").max(0) as u64,
        config: kernel_config(),
    }
}

/// The first CPU's model name in /proc/cpuinfo.
fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    (info.lines())
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|v| v.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default()
}

/// The config options these results depend on, from /proc/config.gz or
/// /boot/config-RELEASE (whichever is readable; none is fine).
fn kernel_config() -> BTreeMap<String, String> {
    const KEYS: [&str; 7] = [
        "CONFIG_PREEMPT",
        "CONFIG_PREEMPT_VOLUNTARY",
        "CONFIG_PREEMPT_NONE",
        "CONFIG_PREEMPT_RCU",
        "CONFIG_RCU_NOCB_CPU",
        "CONFIG_HZ",
        "CONFIG_NET_NS",
    ];
    let release = nsfleet_vm::kernel::running_release();
    let text = std::fs::File::open("/proc/config.gz")
        .ok()
        .and_then(|f| std::io::read_to_string(flate2::read::GzDecoder::new(f)).ok())
        .or_else(|| std::fs::read_to_string(format!("/boot/config-{release}")).ok())
        .unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| KEYS.contains(k))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A process's (user, system) CPU seconds; zeros once it is gone.
pub(crate) fn cpu_of(pid: i64) -> (f64, f64) {
    let u = nsfleet::sys::usage_of(&pid.to_string()).unwrap_or_default();
    (u.user_seconds, u.system_seconds)
}

//! `nsfleet bench routers`: seed 003's fleet of fake routers (lo up, an `eth0` veth to one
//! shared switch, an address, forwarding on), built by nsfleet and, in the same run:
//!
//! - a raw in-process loop doing the same kernel work on one thread (the kernel's pace at
//!   each count: its own rate falls as namespaces accumulate);
//! - nsfleet's fake routers on a switch of macvlan ports (`ports = "macvlan"`: one device
//!   per router where a veth pair and a bridge port are three kernel objects), against
//!   the same raw loop, and a raw loop of macvlans (what that design allows);
//! - seed 003's shell script, one `ip` command per step;
//! - Mininet's LinearTopo(k) with Linux bridges and no controller (when Mininet is
//!   installed), against nsfleet's `linear` generator of the same shape and a raw loop
//!   building that topology (what the kernel work alone allows against Mininet).
//!
//! The fleets and raw loops are measured at each of `--steps`, after a warm-up, in
//! interleaved rounds, with each curve's flatness against the raw loop's (see [`curve`]).

mod curve;

use super::{emit, machine, metric, need_root, note, ratio, raw, which, Cli, Common};
use anyhow::{bail, Context};
use nsfleet::core::{Fleet, FleetOptions};
use nsfleet::sys;
use nsfleet_results::{Better, Results};
use std::process::Command;
use std::time::Instant;

pub struct RoutersArgs {
    /// Router counts to measure nsfleet and the raw loop at.
    pub steps: Vec<u64>,
    pub script_count: u64,
    pub mininet_count: u64,
    pub common: Common,
}

const MININET: &str = r#"
import sys, time
from mininet.net import Mininet
from mininet.topo import LinearTopo
from mininet.nodelib import LinuxBridge
from mininet.log import setLogLevel
setLogLevel("error")
t = time.time()
net = Mininet(topo=LinearTopo(k=int(sys.argv[1])), switch=LinuxBridge, controller=None)
net.start()
up = time.time() - t
t = time.time()
net.stop()
print(up, time.time() - t)
"#;

pub fn routers(a: RoutersArgs) -> anyhow::Result<()> {
    need_root("routers")?;
    let c = &a.common;
    let mut steps: Vec<u64> = a.steps.iter().map(|&n| c.size(n, 100)).collect();
    // Ascending: flatness is against the smallest step, and a count measured twice
    // would only overwrite its own figures.
    steps.sort_unstable();
    steps.dedup();
    let (script_count, mininet_count) = (c.size(a.script_count, 20), c.size(a.mininet_count, 10));
    let most = *steps.iter().max().unwrap_or(&1);
    let spare = nsfleet::preflight::SPARE_DESCRIPTORS;
    let limit = sys::raise_nofile(2 * most + spare).context("raising RLIMIT_NOFILE")?;
    // The raw loop holds every router's namespace in this one process; nsfleet does not
    // need to (holder processes), so beyond this process's limit only nsfleet is measured.
    let raw_fits = |count: u64| count + spare <= limit;
    if !raw_fits(most) {
        note(&format!(
            "the raw loop holds a descriptor per router in one process, and this one may hold {limit}: it is skipped above {} routers",
            limit.saturating_sub(spare)
        ));
    }
    let fleet = Fleet::new(FleetOptions::default())?; // for its reclamation barrier
    let measured = curve::measure(&steps, c, &fleet, raw_fits)?;
    let script = (script_count > 0).then(|| {
        note(&format!("seed 003's ip script, {script_count} routers"));
        let ns = fake_routers(script_count, c.workers, "veth");
        ip_script(script_count).and_then(|ip| Ok((ns?, ip)))
    });
    let script = script.transpose()?;
    // A peer that cannot run here (Mininet installed without bridge-utils, say) is
    // reported as unavailable, with its reason; the others are measured all the same.
    let mut unavailable = serde_json::Map::new();
    let mininet = match (mininet_count > 0 && which("mn"))
        .then(|| mininet_vs_linear(mininet_count, c, &fleet))
    {
        Some(Err(e)) => {
            eprintln!("nsfleet: bench routers: Mininet unavailable, measured without it: {e:#}");
            unavailable.insert("mininet".into(), format!("{e:#}").into());
            None
        }
        m => m.transpose()?,
    };
    let mut res = Results::new(
        "routers",
        machine(),
        serde_json::json!({"steps": steps, "script_count": script_count, "mininet_count": mininet_count,
            "runs": c.repetitions(), "workers": c.workers, "quick": c.quick, "unavailable": unavailable,
            "warm_up": curve::warm_up_count(&steps)}),
    );
    curve::metrics(&mut res, &measured);
    if let Some((ns, (up, down))) = script {
        let n = script_count as f64;
        use Better::*;
        res.metric(
            "ip_script_routers_per_s",
            metric("routers/s", Neither, vec![n / up]),
        )
        .metric("ip_script_teardown_s", metric("s", Neither, vec![down]))
        .metric(
            "nsfleet_vs_ip_script",
            metric("x", Higher, vec![up / ns.up_s]).with_target(">= 25 at 1,000"),
        );
    }
    if let Some(m) = mininet {
        mininet_metrics(&mut res, &m);
    }
    let title = format!("fake routers at {steps:?}; the ip script at {script_count}; Mininet LinearTopo({mininet_count})");
    emit(&res, c, &title)?;
    if !c.json && steps.len() > 1 {
        print!("{}", curve::table(&res, &steps));
    }
    Ok(())
}

struct Built {
    up_s: f64,
    /// `down` until the kernel has reclaimed everything.
    down_s: f64,
    /// `down` until the fleet has let go of everything (what Mininet's stop measures).
    drop_s: f64,
    user_share: f64,
    kernel_bytes: f64,
    /// The supervisor's resident memory once up.
    rss: f64,
}

fn nsfleet_up_down(body: &str, workers: usize) -> anyhow::Result<Built> {
    let t = Instant::now();
    let mut up = Cli::new()?.up_with(body, workers)?;
    let up_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let down = up.cli.down()?;
    let (user, system) = up.cpu;
    Ok(Built {
        up_s,
        down_s: t.elapsed().as_secs_f64(),
        drop_s: down["teardown_ms"].as_f64().unwrap_or(f64::NAN) / 1e3,
        user_share: user / (user + system).max(1e-9),
        kernel_bytes: up.kernel_bytes,
        rss: up.rss,
    })
}

/// nsfleet's fake routers, their switch's `ports` of `ports` (veth or macvlan).
fn fake_routers(count: u64, workers: usize, ports: &str) -> anyhow::Result<Built> {
    let body =
        format!("[[generate]]\nkind = \"fake-routers\"\ncount = {count}\nports = \"{ports}\"\n");
    nsfleet_up_down(&body, workers)
}

/// Seed 003's script: one `ip` (or `sysctl`) process per step. Returns (up, down) seconds.
fn ip_script(count: u64) -> anyhow::Result<(f64, f64)> {
    let p = format!("nsfb{}", std::process::id());
    let up = format!(
        r#"set -e
ip netns add {p}-sw
ip -n {p}-sw link add br0 type bridge
ip -n {p}-sw link set br0 up
for i in $(seq {count}); do
  ip netns add {p}-r$i
  ip -n {p}-sw link add p$i type veth peer name eth0 netns {p}-r$i
  ip -n {p}-sw link set p$i master br0
  ip -n {p}-sw link set p$i up
  ip -n {p}-r$i link set lo up
  ip -n {p}-r$i link set eth0 up
  ip -n {p}-r$i addr add 10.0.$((i / 256)).$((i % 256))/16 dev eth0
  ip netns exec {p}-r$i sysctl -qw net.ipv4.ip_forward=1
done"#
    );
    let down = format!("for i in $(seq {count}); do ip netns del {p}-r$i 2>/dev/null || true; done; ip netns del {p}-sw 2>/dev/null || true");
    let t = Instant::now();
    let ok = Command::new("bash").arg("-c").arg(&up).status()?.success();
    let up_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    // Exactly the names this script made, even after a failure half-way.
    Command::new("bash").arg("-c").arg(&down).status()?;
    let down_s = t.elapsed().as_secs_f64();
    if !ok {
        bail!("the ip script failed (see above)");
    }
    Ok((up_s, down_s))
}

/// Mininet's LinearTopo(k) against nsfleet's `linear` of the same shape, run after run,
/// with the raw loop building the same topology and the kernel's floor for its links
/// alone measured in each run. Each starts on a machine that has reclaimed the last.
#[derive(Default, serde::Serialize)]
struct MininetRuns {
    mininet_up_s: Vec<f64>,
    mininet_down_s: Vec<f64>,
    nsfleet_up_s: Vec<f64>,
    /// `down` until nsfleet has let go of everything (what Mininet's stop measures).
    nsfleet_drop_s: Vec<f64>,
    /// `down` until the kernel has reclaimed everything.
    nsfleet_down_s: Vec<f64>,
    /// The raw loop's start: the kernel work of the whole topology, on one thread.
    raw_up_s: Vec<f64>,
    links_floor_s: Vec<f64>,
}

fn mininet_vs_linear(k: u64, c: &Common, fleet: &Fleet) -> anyhow::Result<MininetRuns> {
    let body = format!(
        "[[generate]]\nkind = \"linear\"\ncount = {k}\nname = \"h{{i}}\"\nswitch = \"s{{i}}\"\npool = \"10.0.0.0/8\"\n"
    );
    let mut m = MininetRuns::default();
    for r in 0..c.repetitions() {
        note(&format!(
            "Mininet LinearTopo({k}), run {}/{}",
            r + 1,
            c.repetitions()
        ));
        let (up, down) = mininet(k)?;
        m.mininet_up_s.push(up);
        m.mininet_down_s.push(down);
        fleet.reclaim_barrier()?;
        let raw_first = r % 2 == 1;
        if raw_first {
            m.raw_up_s.push(raw::linear(fleet, k)?.0);
        }
        let ns = nsfleet_up_down(&body, c.workers)?;
        m.nsfleet_up_s.push(ns.up_s);
        m.nsfleet_drop_s.push(ns.drop_s);
        m.nsfleet_down_s.push(ns.down_s);
        if !raw_first {
            m.raw_up_s.push(raw::linear(fleet, k)?.0);
        }
        m.links_floor_s.push(raw::links_floor(fleet, 2 * k - 1)?);
    }
    Ok(m)
}

fn mininet_metrics(res: &mut Results, m: &MininetRuns) {
    use Better::*;
    for (name, better, v) in [
        ("mininet_start_s", Neither, &m.mininet_up_s),
        ("mininet_stop_s", Neither, &m.mininet_down_s),
        ("nsfleet_linear_start_s", Lower, &m.nsfleet_up_s),
        ("nsfleet_linear_stop_s", Lower, &m.nsfleet_drop_s),
        (
            "nsfleet_linear_stop_to_reclaimed_s",
            Lower,
            &m.nsfleet_down_s,
        ),
        ("raw_linear_start_s", Neither, &m.raw_up_s),
        ("linear_links_kernel_floor_s", Neither, &m.links_floor_s),
    ] {
        res.metric(name, metric("s", better, v.clone()));
    }
    // Each as how many times faster than the slower: its seconds over the faster's.
    let (mininet_up, mininet_down) = (&m.mininet_up_s, &m.mininet_down_s);
    for (name, better, slower, faster, target) in [
        (
            "nsfleet_vs_mininet_start",
            Higher,
            mininet_up,
            &m.nsfleet_up_s,
            Some(">= 50"),
        ),
        (
            "nsfleet_vs_mininet_stop",
            Higher,
            mininet_down,
            &m.nsfleet_drop_s,
            Some(">= 50"),
        ),
        (
            "nsfleet_to_reclaimed_vs_mininet_stop",
            Higher,
            mininet_down,
            &m.nsfleet_down_s,
            None,
        ),
        (
            "nsfleet_vs_raw_linear_start",
            Higher,
            &m.raw_up_s,
            &m.nsfleet_up_s,
            None,
        ),
        (
            "raw_linear_vs_mininet_start",
            Neither,
            mininet_up,
            &m.raw_up_s,
            Some("the kernel work alone, on one thread"),
        ),
        (
            "kernel_floor_vs_mininet_start",
            Neither,
            mininet_up,
            &m.links_floor_s,
            Some("the links alone: no tool can pass this"),
        ),
    ] {
        let mut r = ratio(better, slower, faster);
        r.target = target.map(String::from);
        res.metric(name, r);
    }
}

/// Mininet's (start, stop) seconds for LinearTopo(k).
fn mininet(k: u64) -> anyhow::Result<(f64, f64)> {
    let out = Command::new("/usr/bin/python3")
        .args(["-c", MININET, &k.to_string()])
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let nums: Vec<f64> = text
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    if !out.status.success() || nums.len() != 2 {
        bail!(
            "Mininet failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok((nums[0], nums[1]))
}

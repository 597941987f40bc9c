//! `nsfleet bench routers`: seed 003's fleet of fake routers (lo up, an `eth0` veth to one
//! shared switch, an address, forwarding on), built by nsfleet and, in the same run:
//!
//! - a raw in-process loop doing the same kernel work on one thread (the kernel's pace at
//!   each count: its own rate falls as namespaces accumulate);
//! - seed 003's shell script, one `ip` command per step;
//! - Mininet's LinearTopo(k) with Linux bridges and no controller (when Mininet is
//!   installed), against nsfleet's `linear` generator of the same shape.

use super::{machine, median, note, which, Cli};
use crate::core::{Fleet, FleetOptions};
use crate::sys;
use crate::topology::{bridge_index, IpNet, PORTS_PER_BRIDGE};
use anyhow::{bail, Context};
use nsfleet_netlink::rtnl::{self, LinkSpec};
use nsfleet_netlink::socket::MAX_BATCH;
use nsfleet_netlink::{Batch, NlSocket};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::Instant;

pub struct RoutersArgs {
    /// Router counts to measure nsfleet and the raw loop at.
    pub steps: Vec<u64>,
    pub script_count: u64,
    pub mininet_count: u64,
    pub runs: usize,
    pub workers: usize,
    pub json: bool,
}

#[derive(Default, Clone, serde::Serialize)]
struct Step {
    count: u64,
    nsfleet_up_s: Vec<f64>,
    nsfleet_down_s: Vec<f64>,
    user_cpu_share: Vec<f64>,
    kernel_per_router_bytes: Vec<f64>,
    raw_up_s: Vec<f64>,
    raw_down_s: Vec<f64>,
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
    if !sys::is_root() {
        bail!("bench routers creates network namespaces: run it as root");
    }
    if a.steps.is_empty() || a.steps.contains(&0) || a.runs == 0 {
        bail!("--count/--steps and --runs must be at least 1");
    }
    let most = *a.steps.iter().max().unwrap_or(&1);
    sys::raise_nofile(2 * most + 4096).context("raising RLIMIT_NOFILE")?;
    let fleet = Fleet::new(FleetOptions::default())?; // for its reclamation barrier
    let mut steps: Vec<Step> = Vec::new();
    for &count in &a.steps {
        let mut s = Step {
            count,
            ..Step::default()
        };
        for r in 0..a.runs {
            note(
                a.json,
                &format!("{count} routers, run {}/{}", r + 1, a.runs),
            );
            let nsfleet_first = r % 2 == 0;
            if !nsfleet_first {
                push_raw(&mut s, &fleet, count)?;
            }
            let b = fake_routers(count, a.workers)?;
            s.nsfleet_up_s.push(b.up_s);
            s.nsfleet_down_s.push(b.down_s);
            s.user_cpu_share.push(b.user_share);
            s.kernel_per_router_bytes
                .push(b.kernel_bytes / count as f64);
            if nsfleet_first {
                push_raw(&mut s, &fleet, count)?;
            }
        }
        steps.push(s);
    }
    let script = (a.script_count > 0).then(|| {
        note(
            a.json,
            &format!("seed 003's ip script, {} routers", a.script_count),
        );
        let ns = fake_routers(a.script_count, a.workers);
        ip_script(a.script_count).and_then(|ip| Ok((ns?, ip)))
    });
    let script = script.transpose()?;
    let mininet = (a.mininet_count > 0 && which("mn")).then(|| mininet_vs_linear(&a, &fleet));
    let mininet = mininet.transpose()?;
    report(&a, &steps, script, mininet);
    Ok(())
}

fn push_raw(s: &mut Step, fleet: &Fleet, count: u64) -> anyhow::Result<()> {
    let (up, down) = raw_routers(fleet, count)?;
    s.raw_up_s.push(up);
    s.raw_down_s.push(down);
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
    })
}

fn fake_routers(count: u64, workers: usize) -> anyhow::Result<Built> {
    let body = format!("[[generate]]\nkind = \"fake-routers\"\ncount = {count}\n");
    nsfleet_up_down(&body, workers)
}

/// The same kernel work as nsfleet's fake routers, on one thread with nothing around it:
/// a switch namespace with its bridges; per router a namespace, a veth from the switch
/// with its peer placed in the router, then lo and eth0 up, the address and forwarding.
/// Like nsfleet, no IPv6 link-local address on the port, the bridge or eth0.
fn raw_routers(fleet: &Fleet, count: u64) -> anyhow::Result<(f64, f64)> {
    let (up, fds) = std::thread::spawn(move || -> anyhow::Result<_> {
        sys::unshare_net()?;
        let switch = sys::current_netns()?;
        let mut sw = NlSocket::open()?;
        let bridges = (count as usize).div_ceil(PORTS_PER_BRIDGE) as u16;
        let mut b = Batch::new();
        for k in 0..bridges {
            let spec = LinkSpec {
                name: &format!("br{k}"),
                index: bridge_index(k),
                ..Default::default()
            };
            rtnl::new_bridge(&mut b, sw.next_seq(), &spec);
            rtnl::no_link_local(&mut b, sw.next_seq(), spec.index);
            rtnl::set_link(&mut b, sw.next_seq(), spec.index, true, None);
        }
        sw.execute_all(&b)?;
        let pool: IpNet = "10.0.0.0/16".parse().expect("a valid pool");
        let mut fds = vec![switch];
        let t = Instant::now();
        for i in 0..count {
            sys::unshare_net()?;
            let fd = sys::current_netns()?;
            let mut b = Batch::new();
            let port = LinkSpec {
                name: &format!("p{}", i + 1),
                index: 1000 + 2 * i as i32,
                up: true,
                master: Some(bridge_index((i as usize / PORTS_PER_BRIDGE) as u16)),
                ..Default::default()
            };
            let eth0 = LinkSpec {
                name: "eth0",
                index: 1001,
                netns_fd: Some(fd.as_raw_fd()),
                ..Default::default()
            };
            rtnl::new_veth(&mut b, sw.next_seq(), &port, &eth0);
            rtnl::no_link_local(&mut b, sw.next_seq(), port.index);
            sw.execute_all(&b)?;
            let mut r = NlSocket::open()?;
            b.clear();
            rtnl::set_link(&mut b, r.next_seq(), 1, true, None);
            rtnl::no_link_local(&mut b, r.next_seq(), 1001);
            rtnl::set_link(&mut b, r.next_seq(), 1001, true, None);
            let a = pool.host(i);
            rtnl::new_addr(&mut b, r.next_seq(), 1001, a.addr, a.prefix);
            rtnl::set_forwarding(&mut b, r.next_seq(), 1001, true);
            r.execute_all(&b)?;
            fds.push(fd);
        }
        Ok((t.elapsed().as_secs_f64(), fds))
    })
    .join()
    .map_err(|_| anyhow::anyhow!("raw loop thread panicked"))??;
    let t = Instant::now();
    drop(fds);
    fleet.reclaim_barrier()?;
    Ok((up, t.elapsed().as_secs_f64()))
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
/// with the kernel's floor for its links measured in each run.
#[derive(Default, serde::Serialize)]
struct MininetRuns {
    mininet_up_s: Vec<f64>,
    mininet_down_s: Vec<f64>,
    nsfleet_up_s: Vec<f64>,
    /// `down` until nsfleet has let go of everything (what Mininet's stop measures).
    nsfleet_drop_s: Vec<f64>,
    /// `down` until the kernel has reclaimed everything.
    nsfleet_down_s: Vec<f64>,
    links_floor_s: Vec<f64>,
}

fn mininet_vs_linear(a: &RoutersArgs, fleet: &Fleet) -> anyhow::Result<MininetRuns> {
    let k = a.mininet_count;
    let body = format!(
        "[[generate]]\nkind = \"linear\"\ncount = {k}\nname = \"h{{i}}\"\nswitch = \"s{{i}}\"\npool = \"10.0.0.0/8\"\n"
    );
    let mut m = MininetRuns::default();
    for r in 0..a.runs {
        note(
            a.json,
            &format!("Mininet LinearTopo({k}), run {}/{}", r + 1, a.runs),
        );
        let (up, down) = mininet(k)?;
        m.mininet_up_s.push(up);
        m.mininet_down_s.push(down);
        let ns = nsfleet_up_down(&body, a.workers)?;
        m.nsfleet_up_s.push(ns.up_s);
        m.nsfleet_drop_s.push(ns.drop_s);
        m.nsfleet_down_s.push(ns.down_s);
        m.links_floor_s.push(links_floor(2 * k - 1)?);
        fleet.reclaim_barrier()?;
    }
    Ok(m)
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

/// The kernel's floor for a topology's links: `pairs` veth pairs created in one scratch
/// namespace, a full batch per `sendmsg`, and nothing else (no namespaces, bridges,
/// addresses). No tool builds those links faster on this machine, so Mininet's start
/// over this is the best ratio any tool could reach.
fn links_floor(pairs: u64) -> anyhow::Result<f64> {
    std::thread::spawn(move || -> anyhow::Result<f64> {
        sys::unshare_net()?;
        let mut sock = NlSocket::open()?;
        let mut b = Batch::new();
        let t = Instant::now();
        for i in 0..pairs {
            let (a, z) = (format!("a{i}"), format!("z{i}"));
            let end = |name| LinkSpec {
                name,
                ..Default::default()
            };
            rtnl::new_veth(&mut b, sock.next_seq(), &end(&a), &end(&z));
            if b.seqs().len() == MAX_BATCH {
                sock.execute_all(&b)?;
                b.clear();
            }
        }
        sock.execute_all(&b)?;
        Ok(t.elapsed().as_secs_f64())
    })
    .join()
    .map_err(|_| anyhow::anyhow!("links floor thread panicked"))?
}

type ScriptResult = (Built, (f64, f64));

fn report(
    a: &RoutersArgs,
    steps: &[Step],
    script: Option<ScriptResult>,
    mininet: Option<MininetRuns>,
) {
    let med = |v: &[f64]| median(v.to_vec());
    let rows: Vec<serde_json::Value> = steps
        .iter()
        .map(|s| {
            let n = s.count as f64;
            serde_json::json!({
                "count": s.count,
                "nsfleet_routers_per_s": n / med(&s.nsfleet_up_s),
                "raw_routers_per_s": n / med(&s.raw_up_s),
                "nsfleet_vs_raw": med(&s.raw_up_s) / med(&s.nsfleet_up_s),
                "nsfleet_down_s": med(&s.nsfleet_down_s),
                "raw_down_s": med(&s.raw_down_s),
                "user_cpu_share": med(&s.user_cpu_share),
                "kernel_per_router_bytes": med(&s.kernel_per_router_bytes),
                "samples": s,
            })
        })
        .collect();
    let script_v = script.as_ref().map(|(ns, (up, down))| {
        let n = a.script_count as f64;
        serde_json::json!({
            "count": a.script_count, "nsfleet_routers_per_s": n / ns.up_s, "ip_script_routers_per_s": n / up,
            "speedup": up / ns.up_s, "nsfleet_down_s": ns.down_s, "ip_script_down_s": down,
        })
    });
    let mininet_v = mininet.map(|m| {
        let (mu, md) = (med(&m.mininet_up_s), med(&m.mininet_down_s));
        let (up, drop, down) = (
            med(&m.nsfleet_up_s),
            med(&m.nsfleet_drop_s),
            med(&m.nsfleet_down_s),
        );
        let floor = med(&m.links_floor_s);
        serde_json::json!({
            "k": a.mininet_count, "mininet_up_s": mu, "mininet_down_s": md, "nsfleet_up_s": up,
            "nsfleet_down_s": down, "nsfleet_drop_s": drop, "start_speedup": mu / up,
            "stop_speedup": md / drop, "stop_to_reclaimed_speedup": md / down,
            "links_floor_s": floor, "best_possible_start_speedup": mu / floor, "samples": m,
        })
    });
    if a.json {
        let v = serde_json::json!({
            "bench": "routers", "runs": a.runs, "workers": a.workers, "machine": machine(),
            "steps": rows, "ip_script": script_v, "mininet": mininet_v,
        });
        println!("{v}");
        return;
    }
    let m = machine();
    println!(
        "bench routers: fake routers (lo up, eth0 on a shared switch, an address, forwarding); median of {} runs; kernel {}, {} CPUs",
        a.runs,
        m["kernel"].as_str().unwrap_or("?"),
        m["cpus"]
    );
    println!(
        "  {:>8} {:>12} {:>12} {:>8} {:>10} {:>10} {:>9} {:>12}",
        "routers",
        "nsfleet/s",
        "raw loop/s",
        "ratio",
        "down (s)",
        "raw down",
        "user CPU",
        "kernel/router"
    );
    for r in &rows {
        println!(
            "  {:>8} {:>12.0} {:>12.0} {:>7.2}x {:>10.2} {:>10.2} {:>8.1}% {:>10.0} KB",
            r["count"],
            r["nsfleet_routers_per_s"].as_f64().unwrap_or(0.0),
            r["raw_routers_per_s"].as_f64().unwrap_or(0.0),
            r["nsfleet_vs_raw"].as_f64().unwrap_or(0.0),
            r["nsfleet_down_s"].as_f64().unwrap_or(0.0),
            r["raw_down_s"].as_f64().unwrap_or(0.0),
            100.0 * r["user_cpu_share"].as_f64().unwrap_or(0.0),
            r["kernel_per_router_bytes"].as_f64().unwrap_or(0.0) / 1e3,
        );
    }
    println!("  (ratio: nsfleet's rate over the raw loop's at the same count, target >= 0.8; user CPU: the supervisor's user share of its CPU time, target < 15%)");
    match script_v {
        Some(v) => println!(
            "  {} routers: nsfleet {:.0}/s, seed 003's ip script {:.1}/s: {:.1}x (target >= 25); teardown {:.2} s vs {:.1} s",
            v["count"],
            v["nsfleet_routers_per_s"].as_f64().unwrap_or(0.0),
            v["ip_script_routers_per_s"].as_f64().unwrap_or(0.0),
            v["speedup"].as_f64().unwrap_or(0.0),
            v["nsfleet_down_s"].as_f64().unwrap_or(0.0),
            v["ip_script_down_s"].as_f64().unwrap_or(0.0),
        ),
        None => println!("  ip script skipped (--script-count 0)"),
    }
    match mininet_v {
        Some(v) => {
            let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
            println!(
                "  Mininet LinearTopo({}): start {:.2} s vs nsfleet {:.3} s: {:.0}x (target >= 50)",
                v["k"],
                f("mininet_up_s"),
                f("nsfleet_up_s"),
                f("start_speedup")
            );
            println!(
                "    the kernel's floor for its {} veth pairs alone (one namespace, nothing else): {:.3} s, so no tool can beat {:.0}x here",
                2 * a.mininet_count - 1,
                f("links_floor_s"),
                f("best_possible_start_speedup")
            );
            println!(
                "    stop {:.2} s vs nsfleet down {:.3} s: {:.0}x (target >= 50); to full kernel reclamation, which Mininet never waits for, {:.3} s: {:.1}x",
                f("mininet_down_s"),
                f("nsfleet_drop_s"),
                f("stop_speedup"),
                f("nsfleet_down_s"),
                f("stop_to_reclaimed_speedup")
            );
        }
        None => println!("  Mininet skipped (--mininet-count 0, or not installed: apt-get install mininet bridge-utils)"),
    }
}

//! `nsfleet bench mininet`: Mininet's tree1024 network (`TreeNet(depth=2, fanout=32)`:
//! 1,024 hosts under 33 switches) from start to pingAll-ready (the first host reaches the
//! last) and stop, three ways in the same run: nsfleet's Mininet API (`nsfleet.mininet`,
//! Python), Mininet itself (Linux bridges, no controller, where it is installed), and
//! nsfleet's own `up` of the same topology (the file the API writes). The ratios: Mininet
//! over the API, and the API over `up`: what the Python layer adds (target: under 10%).

use crate::{emit, machine, metric, need_root, note, ratios, Cli, Common};
use anyhow::{bail, Context};
use nsfleet_results::{Better::*, Results};
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

pub struct MininetArgs {
    pub depth: u64,
    pub fanout: u64,
    pub common: Common,
}

const DRIVER: &str = include_str!("mininet_driver.py");

/// Seconds from the start to pingAll-ready, and of the stop.
#[derive(Default)]
struct Times {
    ready: Vec<f64>,
    start: Vec<f64>,
    stop: Vec<f64>,
}

pub fn mininet(a: MininetArgs) -> anyhow::Result<()> {
    need_root("mininet")?;
    let c = &a.common;
    let fanout = c.size(a.fanout, 4);
    let python =
        nsfleet::sys::host::python_with("nsfleet.mininet.net").map_err(anyhow::Error::msg)?;
    let (mut api, mut up, mut mn) = (Times::default(), Times::default(), Times::default());
    let mut unavailable = serde_json::Map::new();
    let mut mininet_ok = true;
    for r in 0..c.repetitions() {
        note(&format!(
            "TreeNet(depth={}, fanout={fanout}), run {}/{}",
            a.depth,
            r + 1,
            c.repetitions()
        ));
        let cli = Cli::new()?;
        let topo = cli.file("tree.toml", "")?;
        let v = driver(
            &python,
            "nsfleet.mininet",
            a.depth,
            fanout,
            Some(&topo),
            &cli,
        )?;
        push(&mut api, &v);
        push_up(&mut up, cli, &topo, c.workers)?;
        if mininet_ok {
            match driver(
                &PathBuf::from("/usr/bin/python3"),
                "mininet",
                a.depth,
                fanout,
                None,
                &Cli::new()?,
            ) {
                Ok(v) => push(&mut mn, &v),
                Err(e) => {
                    eprintln!(
                        "nsfleet: bench mininet: Mininet unavailable, measured without it: {e:#}"
                    );
                    unavailable.insert("mininet".into(), format!("{e:#}").into());
                    mininet_ok = false;
                }
            }
        }
    }
    let mut res = Results::new(
        "mininet",
        machine(),
        serde_json::json!({"depth": a.depth, "fanout": fanout, "runs": c.repetitions(), "unavailable": unavailable}),
    );
    let m = |u: &str, v: &[f64]| metric(u, Neither, v.to_vec());
    res.metric("api_start_s", m("s", &api.start))
        .metric("api_ready_s", m("s", &api.ready))
        .metric("api_stop_s", m("s", &api.stop))
        .metric("up_ready_s", m("s", &up.ready))
        .metric("up_stop_s", m("s", &up.stop))
        .metric(
            "api_over_up_ready",
            metric("x", Lower, ratios(&api.ready, &up.ready)).with_target("< 1.10"),
        );
    if !mn.ready.is_empty() {
        res.metric("mininet_ready_s", m("s", &mn.ready))
            .metric("mininet_stop_s", m("s", &mn.stop))
            .metric(
                "api_vs_mininet_ready",
                metric("x", Higher, ratios(&mn.ready, &api.ready)),
            )
            .metric(
                "api_vs_mininet_stop",
                metric("x", Higher, ratios(&mn.stop, &api.stop)),
            );
    }
    let title = format!(
        "Mininet's TreeNet(depth={}, fanout={fanout}): nsfleet's Mininet API, Mininet, nsfleet up",
        a.depth
    );
    emit(&res, c, &title)
}

fn push(t: &mut Times, v: &serde_json::Value) {
    t.start.push(v["start_s"].as_f64().unwrap_or(f64::NAN));
    t.ready.push(v["ready_s"].as_f64().unwrap_or(f64::NAN));
    t.stop.push(v["stop_s"].as_f64().unwrap_or(f64::NAN));
}

/// `nsfleet up` of the file the API wrote, to the first host reaching the last, and down.
fn push_up(t: &mut Times, cli: Cli, topo: &str, workers: usize) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(topo)?;
    let last = last_host_address(&text).context("the written topology has no host address")?;
    let start = Instant::now();
    let mut fleet = cli.up_file(topo, workers)?;
    t.start.push(start.elapsed().as_secs_f64());
    for _ in 0..60 {
        let out = fleet
            .cli
            .command(&["exec", "bench", "h1", "--", "ping", "-c1", "-W1", &last])
            .output()?;
        if out.status.success() {
            break;
        }
    }
    t.ready.push(start.elapsed().as_secs_f64());
    let stop = Instant::now();
    fleet.cli.down()?;
    t.stop.push(stop.elapsed().as_secs_f64());
    Ok(())
}

/// The address of the last `addrs` in a topology file: the last host's.
fn last_host_address(toml: &str) -> Option<String> {
    let line = toml.lines().rev().find(|l| l.contains("addrs = [\""))?;
    let addr = line.split("addrs = [\"").nth(1)?.split('/').next()?;
    Some(addr.to_string())
}

/// Runs the driver with `python` over the modules under `prefix`; its JSON line.
fn driver(
    python: &PathBuf,
    prefix: &str,
    depth: u64,
    fanout: u64,
    topo: Option<&str>,
    cli: &Cli,
) -> anyhow::Result<serde_json::Value> {
    let mut cmd = Command::new(python);
    cmd.args([
        "-c",
        DRIVER,
        prefix,
        &depth.to_string(),
        &fanout.to_string(),
    ])
    .args(topo)
    .env("NSFLEET_RUN_DIR", &cli.run_dir)
    .env("NSFLEET_BIN", &cli.exe);
    let out = cmd
        .output()
        .with_context(|| format!("starting {}", python.display()))?;
    if !out.status.success() {
        bail!("{prefix}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .context("the driver printed no result")?;
    Ok(serde_json::from_str(line)?)
}

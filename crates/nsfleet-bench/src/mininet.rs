//! `nsfleet bench mininet`: Mininet's tree1024 network (`TreeNet(depth=2, fanout=32)`:
//! 1,024 hosts under 33 switches) from start to pingAll-ready (the first host reaches the
//! last) and stop, three ways in the same run: nsfleet's Mininet API (`nsfleet.mininet`,
//! Python), Mininet itself (Linux bridges, no controller, where it is installed), and
//! nsfleet's own `up` of the same topology (the file the API writes). The ratios: Mininet
//! over the API, and the API over `up`: what the Python layer adds (target: under 10%).

use crate::{emit, machine, metric, need_root, note, versus, Cli, Common, Ratio::*};
use anyhow::{bail, Context};
use nsfleet_results::{Better::*, Results};
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

pub struct MininetArgs {
    pub depth: u64,
    pub fanout: u64,
    /// The switches: "bridge" (Linux bridges), "ovs" (Mininet's OVSBridge) or
    /// "ovs-controller" (OVSSwitch under Mininet's OVSController).
    pub switch: String,
    pub common: Common,
}

impl MininetArgs {
    /// Whether the switches are Open vSwitch's.
    fn ovs(&self) -> bool {
        self.switch != "bridge"
    }

    /// What the switches are, in the results' title.
    fn switches(&self) -> &'static str {
        match self.switch.as_str() {
            "bridge" => "Linux bridges",
            "ovs" => "Open vSwitch",
            _ => "Open vSwitch under ovs-testcontroller",
        }
    }
}

/// Mininet with Open vSwitch needs the host's ovsdb-server and ovs-vswitchd: the bench
/// runs its own, in a mount namespace of its own where Open vSwitch's folders are empty
/// tmpfs mounts (the host's daemons, if any, and their files are never seen), and stops
/// them after, waiting until they are gone. Mininet's switches are in the host's
/// namespace, as Mininet makes them.
const OWN_OPEN_VSWITCH: &str = r#"
set -e
mount --make-rprivate /
mount -t tmpfs tmpfs /run
for d in /etc/openvswitch /var/log/openvswitch /var/lib/openvswitch; do mount -t tmpfs tmpfs "$d"; done
mkdir -p /run/openvswitch
ovsdb-tool create /etc/openvswitch/conf.db /usr/share/openvswitch/vswitch.ovsschema
ovsdb-server --remote=punix:/run/openvswitch/db.sock --pidfile --detach --no-chdir
ovs-vsctl --no-wait init
ovs-vswitchd --pidfile --detach --no-chdir
# Gone before the bench goes on (up to 10 s each, then killed): the next run's driver
# refuses to start beside another network's daemons.
stop() {
  pids=$(cat /run/openvswitch/*.pid 2>/dev/null || true)
  for p in $pids; do kill "$p" 2>/dev/null || true; done
  for p in $pids; do
    n=0
    while kill -0 "$p" 2>/dev/null && [ $n -lt 200 ]; do sleep 0.05; n=$((n + 1)); done
    kill -9 "$p" 2>/dev/null || true
  done
}
trap stop EXIT
trap 'stop; exit 130' INT TERM HUP
"$@"
"#;

const DRIVER: &str = include_str!("mininet_driver.py");

/// One kind of samples of a contender's runs.
type Samples = fn(&Times) -> &[f64];

/// Seconds from the start to pingAll-ready, and of the stop.
#[derive(Default)]
struct Times {
    ready: Vec<f64>,
    start: Vec<f64>,
    stop: Vec<f64>,
    /// Open vSwitch's daemons' proportional memory (PSS) per switch, where the switches
    /// are OVS.
    switch_pss: Vec<f64>,
    /// Their anonymous memory per switch (see the driver's `ovs_memory_mb`).
    switch_anon: Vec<f64>,
}

pub fn mininet(a: MininetArgs) -> anyhow::Result<()> {
    need_root("mininet")?;
    let c = &a.common;
    let fanout = c.size(a.fanout, 4);
    let python =
        nsfleet::sys::host::python_with("nsfleet.mininet.net").map_err(anyhow::Error::msg)?;
    let (mut api, mut up, mut mn) = (Times::default(), Times::default(), Times::default());
    // With Open vSwitch: the API's network again, its Open vSwitch without TSO support
    // (`ovsTso=False`), as Mininet's runs.
    let mut api_lean = Times::default();
    // With Open vSwitch: `up` of the same network on Linux bridges, in the same run.
    let mut bridges = Times::default();
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
        // Under a controller, `up` of the written file would find the API's controllers
        // gone with its network: the API and Mininet only.
        let with_up = a.switch != "ovs-controller";
        let written = with_up.then_some(topo.as_str());
        let v = driver(&python, "nsfleet.mininet", &a, fanout, written, &cli, true)?;
        push(&mut api, &v);
        if a.ovs() {
            let v = driver(
                &python,
                "nsfleet.mininet",
                &a,
                fanout,
                None,
                &Cli::new()?,
                false,
            )?;
            push(&mut api_lean, &v);
        }
        if with_up {
            // Read before `cli` goes (with its folder) at the end of its `up`.
            let on_bridges = match a.ovs() {
                true => Some(std::fs::read_to_string(format!("{topo}.bridge.toml"))?),
                false => None,
            };
            push_up(&mut up, cli, &topo, c.workers)?;
            if let Some(text) = on_bridges {
                let cli = Cli::new()?;
                let file = cli.file("bridges.toml", &text)?;
                push_up(&mut bridges, cli, &file, c.workers)?;
            }
        }
        if mininet_ok {
            match driver(
                &PathBuf::from("/usr/bin/python3"),
                "mininet",
                &a,
                fanout,
                None,
                &Cli::new()?,
                false,
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
        serde_json::json!({"depth": a.depth, "fanout": fanout, "switch": a.switch, "runs": c.repetitions(), "unavailable": unavailable}),
    );
    let m = |u: &str, v: &[f64]| metric(u, Neither, v.to_vec());
    res.metric("api_start_s", m("s", &api.start))
        .metric("api_ready_s", m("s", &api.ready))
        .metric("api_stop_s", m("s", &api.stop));
    let (api_ready, api_stop) = ((None, &api.ready[..]), (None, &api.stop[..]));
    if !up.ready.is_empty() {
        res.metric("up_stop_s", m("s", &up.stop));
        let up_ready = (Some("up_ready_s"), &up.ready[..]);
        let ratio = OursPerTheirs("api_over_up_ready", Lower);
        versus(&mut res.metrics, "s", api_ready, up_ready, ratio).target = Some("< 1.10".into());
    }
    if !mn.ready.is_empty() {
        let mn_ready = (Some("mininet_ready_s"), &mn.ready[..]);
        let mn_stop = (Some("mininet_stop_s"), &mn.stop[..]);
        let ratio = TheirsPerOurs("api_vs_mininet_ready", Higher);
        versus(&mut res.metrics, "s", api_ready, mn_ready, ratio);
        let ratio = TheirsPerOurs("api_vs_mininet_stop", Higher);
        versus(&mut res.metrics, "s", api_stop, mn_stop, ratio);
    }
    if !bridges.ready.is_empty() {
        res.metric("up_bridges_stop_s", m("s", &bridges.stop));
        let up_ready = (None, &up.ready[..]);
        let bridges_ready = (Some("up_bridges_ready_s"), &bridges.ready[..]);
        let ratio = OursPerTheirs("up_ovs_over_bridges_ready", Lower);
        versus(&mut res.metrics, "s", up_ready, bridges_ready, ratio);
    }
    if a.ovs() {
        let kinds: [(&str, Samples); 2] =
            [("pss", |t| &t.switch_pss), ("anon", |t| &t.switch_anon)];
        for (kind, of) in kinds {
            res.metric(&format!("api_switch_{kind}_mb"), m("MB", of(&api)));
            let lean = format!("api_no_tso_switch_{kind}_mb");
            res.metric(&lean, m("MB", of(&api_lean)));
            if of(&mn).is_empty() {
                continue;
            }
            res.metric(&format!("mininet_switch_{kind}_mb"), m("MB", of(&mn)));
            for (ours, name) in [(&api, "api"), (&api_lean, "api_no_tso")] {
                let ratio_name = format!("{name}_vs_mininet_switch_{kind}");
                let ratio = TheirsPerOurs(&ratio_name, Higher);
                versus(
                    &mut res.metrics,
                    "MB",
                    (None, of(ours)),
                    (None, of(&mn)),
                    ratio,
                );
            }
        }
    }
    let title = format!(
        "Mininet's TreeNet(depth={}, fanout={fanout}) with {}: nsfleet's Mininet API, Mininet, nsfleet up",
        a.depth,
        a.switches()
    );
    emit(&res, c, &title)
}

fn push(t: &mut Times, v: &serde_json::Value) {
    t.start.push(v["start_s"].as_f64().unwrap_or(f64::NAN));
    t.ready.push(v["ready_s"].as_f64().unwrap_or(f64::NAN));
    t.stop.push(v["stop_s"].as_f64().unwrap_or(f64::NAN));
    if let Some(pss) = v["ovs_pss_mb_per_switch"].as_f64() {
        t.switch_pss.push(pss);
    }
    if let Some(anon) = v["ovs_anon_mb_per_switch"].as_f64() {
        t.switch_anon.push(anon);
    }
}

/// `nsfleet up` of the file the API wrote, to the first host reaching the last, and down.
fn push_up(t: &mut Times, cli: Cli, topo: &str, workers: usize) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(topo)?;
    let last = last_host_address(&text).context("the written topology has no host address")?;
    let start = Instant::now();
    let mut fleet = cli.up_file(topo, workers)?;
    t.start.push(start.elapsed().as_secs_f64());
    let mut reached = false;
    for _ in 0..60 {
        let out = fleet
            .cli
            .command(&["exec", "bench", "h1", "--", "ping", "-c1", "-W1", &last])
            .output()?;
        if out.status.success() {
            reached = true;
            break;
        }
    }
    if !reached {
        bail!("nsfleet up: h1 never reached {last}");
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

/// Runs the driver with `python` over the modules under `prefix`; its JSON line. With
/// `ovs_tso` false, nsfleet's API runs its Open vSwitch without TSO support.
fn driver(
    python: &PathBuf,
    prefix: &str,
    a: &MininetArgs,
    fanout: u64,
    topo: Option<&str>,
    cli: &Cli,
    ovs_tso: bool,
) -> anyhow::Result<serde_json::Value> {
    let switch = a.switch.as_str();
    let mut cmd = match a.ovs() && prefix == "mininet" {
        true => {
            let mut c = Command::new("unshare");
            c.args(["-m", "sh", "-c", OWN_OPEN_VSWITCH, "sh"])
                .arg(python);
            c
        }
        false => Command::new(python),
    };
    cmd.args([
        "-c",
        DRIVER,
        prefix,
        &a.depth.to_string(),
        &fanout.to_string(),
        switch,
    ])
    .args(topo)
    .env("NSFLEET_BENCH_OVS_TSO", if ovs_tso { "1" } else { "0" })
    .env("NSFLEET_RUN_DIR", &cli.run_dir)
    .env("NSFLEET_BIN", &cli.exe);
    // The host's own mount namespace, whose Open vSwitch daemons the driver leaves out
    // of its count (the driver may not read pid 1's).
    if let Ok(mnt) = std::fs::read_link("/proc/self/ns/mnt") {
        cmd.env("NSFLEET_BENCH_HOST_MNT", mnt);
    }
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

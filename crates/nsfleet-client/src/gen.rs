//! `nsfleet gen`: drive the fleet's traffic generator and report like pktgen.
//!
//! Flags and a command file become the same pktgen-style commands (one mechanism): reset,
//! the file's lines, then `thread N add_device` and `dev D param value` for the flags, then
//! `start` (with `--keep`: no reset, and devices already running go on). It then follows the run until every device is done (or `--duration` ends it, or
//! Ctrl-C stops it), and prints what was sent and what arrived.

use super::FleetRef;
use anyhow::{anyhow, bail, Context};
use nsfleet::control::{Client, Reply, Request};
use nsfleet::sys;
use nsfleet::traffic::GenReport;
use nsfleet_traffic::{Command, Param};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub struct GenArgs {
    pub fleet: FleetRef,
    /// `node:iface`, spread over the threads in turn.
    pub devs: Vec<String>,
    /// (pktgen parameter, value) for every device: ("dst", "10.0.0.2").
    pub params: Vec<(&'static str, String)>,
    pub file: Option<PathBuf>,
    pub threads: Option<usize>,
    pub device_list: Option<String>,
    pub sink: bool,
    pub duration: Option<Duration>,
    /// Only stop what runs, and report.
    pub stop: bool,
    /// Only report.
    pub results: bool,
    /// Apply on top of what runs (no reset) and return without following the run.
    pub keep: bool,
    pub json: bool,
}

pub fn gen(a: GenArgs) -> anyhow::Result<()> {
    let only = match (a.stop, a.results) {
        (true, _) => Some(vec![Command::Stop]),
        (_, true) => Some(vec![]),
        _ => None,
    };
    let commands = match only {
        Some(c) => c,
        None => commands(&a)?,
    };
    let run = commands.contains(&Command::Start) && !a.keep;
    // Held before the first thread: Ctrl-C becomes "stop", never an abandoned generator.
    let _held = sys::SignalsHeld::new(&[libc::SIGINT, libc::SIGTERM])?;
    let threads = (!a.stop && !a.results).then(|| default_threads(a.threads));
    let mut report = call(&a.fleet, commands, threads, a.sink)?;
    if run {
        report = follow(&a, report)?;
    }
    print(&a, &report)
}

/// The commands the flags and the file say, checked here before anything is sent.
fn commands(a: &GenArgs) -> anyhow::Result<Vec<Command>> {
    let mut out = if a.keep { vec![] } else { vec![Command::Reset] };
    if let Some(mode) = &a.device_list {
        out.extend(
            Command::parse(&format!("device_list {mode}"))
                .map_err(|e| anyhow!("--device-list: {e}"))?,
        );
    }
    if let Some(f) = &a.file {
        let text =
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        let path = f.display().to_string();
        out.extend(Command::parse_file(&path, &text).map_err(|e| anyhow!(e))?);
    }
    if a.devs.is_empty() && a.file.is_none() {
        bail!("nothing to send from: give --dev NODE:IFACE (or --file with add_device lines)");
    }
    let threads = default_threads(a.threads);
    for (i, dev) in a.devs.iter().enumerate() {
        let add = Command::parse(&format!("thread {} add_device {dev}", i % threads));
        out.extend(add.map_err(|e| anyhow!("--dev: {e}"))?);
        for (k, v) in &a.params {
            let p = Param::parse(k, v).map_err(|e| {
                let why = e.strip_prefix(&format!("{k}: ")).unwrap_or(&e).to_string();
                anyhow!("--{}: {why}", k.replace('_', "-"))
            })?;
            out.push(Command::Set {
                dev: dev.clone(),
                set: p,
            });
        }
    }
    if !out.contains(&Command::Start) {
        out.push(Command::Start);
    }
    Ok(out)
}

/// One thread per CPU unless told otherwise.
fn default_threads(asked: Option<usize>) -> usize {
    asked.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

fn call(
    fleet: &FleetRef,
    commands: Vec<Command>,
    threads: Option<usize>,
    sink: bool,
) -> anyhow::Result<GenReport> {
    let mut client: Client = fleet.connect()?;
    match client.call(&Request::Gen {
        commands,
        threads,
        sink,
    })? {
        Reply::Gen(r) => Ok(r),
        other => bail!("unexpected reply from the supervisor: {other:?}"),
    }
}

/// Polls until every device has ended; stops it all on Ctrl-C or at the end of
/// `--duration`.
fn follow(a: &GenArgs, mut report: GenReport) -> anyhow::Result<GenReport> {
    let started = Instant::now();
    let tty = std::io::stderr().is_terminal() && !a.json;
    loop {
        let ended = report
            .results
            .threads
            .iter()
            .flat_map(|t| &t.devices)
            .all(|d| !matches!(d.state.as_str(), "new" | "idle" | "running"));
        if ended {
            break;
        }
        let out_of_time = a.duration.is_some_and(|d| started.elapsed() >= d);
        let interrupted =
            sys::take_signal(&[libc::SIGINT, libc::SIGTERM], Duration::from_millis(200))?;
        let stop = out_of_time || interrupted.is_some();
        let cmds = if stop { vec![Command::Stop] } else { vec![] };
        report = call(&a.fleet, cmds, None, false)?;
        if tty {
            let (sent, pps): (u64, f64) =
                (report.results.threads.iter()).fold((0, 0.0), |(s, p), t| (s + t.sent, p + t.pps));
            eprint!("\r\x1b[K  {sent} packets sent, {:.0} pps", pps);
        }
        if stop {
            break;
        }
    }
    if tty {
        eprint!("\r\x1b[K");
    }
    Ok(report)
}

fn print(a: &GenArgs, r: &GenReport) -> anyhow::Result<()> {
    if a.json {
        println!("{}", serde_json::to_string_pretty(r)?);
        return Ok(());
    }
    let res = &r.results;
    println!(
        "fleet {}: {} thread(s), device list {:?}{}",
        a.fleet.name,
        res.threads.len(),
        res.list_mode,
        if res.running { ", running" } else { "" }
    );
    println!(
        "{:<16} {:>6} {:<7} {:<8} {:>12} {:>12} {:>9} {:>7} {:<16} {:>12} {:>7}",
        "DEVICE",
        "THREAD",
        "METHOD",
        "STATE",
        "SENT",
        "PPS",
        "MBIT/S",
        "ERRORS",
        "RECEIVER",
        "DELIVERED",
        "LOSS"
    );
    let mut notes = Vec::new();
    for t in &res.threads {
        for d in &t.devices {
            let got = r.delivered.iter().find(|x| x.dev == d.dev);
            let delivered = got.map(|g| g.sink.unwrap_or(g.rx_packets));
            let loss = delivered.map_or(String::from("-"), |n| {
                format!(
                    "{:.2}%",
                    100.0 * (d.sent.saturating_sub(n)) as f64 / d.sent.max(1) as f64
                )
            });
            println!(
                "{:<16} {:>6} {:<7} {:<8} {:>12} {:>12.0} {:>9.1} {:>7} {:<16} {:>12} {:>7}",
                d.dev,
                format!("{}/cpu{}", t.id, t.cpu),
                d.method.map_or("-", |m| m.name()),
                d.state,
                d.sent,
                d.pps,
                d.bps / 1e6,
                d.errors,
                got.map_or("-", |g| g.receiver.as_str()),
                delivered.map_or(String::from("-"), |n| n.to_string()),
                loss
            );
            if let Some(n) = &d.note {
                notes.push(format!("{}: {n}", d.dev));
            }
        }
    }
    for n in notes {
        println!("  note: {n}");
    }
    let failed = res
        .threads
        .iter()
        .flat_map(|t| &t.devices)
        .any(|d| d.state == "failed");
    if failed {
        bail!("a device failed (see its note)");
    }
    Ok(())
}

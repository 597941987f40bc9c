//! `nsfleet events`: what happens in a live fleet as it happens (links up, down or without
//! carrier, from the kernel's notifications in each node; processes started and exited;
//! node actions; nodes and interfaces `apply` adds, changes or removes), until the fleet
//! ends. `--json`: the supervisor's lines as they come.

use super::FleetRef;
use anyhow::bail;
use nsfleet::control::{Reply, Request};
use serde_json::Value;
use std::io::Write;

pub struct EventsArgs {
    pub fleet: FleetRef,
    pub json: bool,
}

pub fn events(a: EventsArgs) -> anyhow::Result<()> {
    let mut client = a.fleet.connect()?;
    match client.call(&Request::Events)? {
        Reply::Watching => {}
        other => bail!("unexpected reply from the supervisor: {other:?}"),
    }
    let mut out = std::io::stdout().lock();
    // From here on nothing is missed: a script can wait for this line.
    if a.json {
        writeln!(
            out,
            "{}",
            serde_json::json!({ "event": "watching", "fleet": a.fleet.name })
        )?;
        out.flush()?;
    } else {
        eprintln!(
            "watching fleet {:?} until it ends (Ctrl-C to stop)",
            a.fleet.name
        );
    }
    while let Some(e) = client.next_as::<Value>()? {
        let line = if a.json { e.to_string() } else { describe(&e) };
        // A reader that went away (`| head`) ends us quietly.
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            break;
        }
    }
    Ok(())
}

/// How a process ended, for people.
fn how(exit: &Value) -> String {
    match (exit["code"].as_i64(), exit["signal"].as_i64()) {
        (Some(c), _) => format!("status {c}"),
        (_, Some(s)) => format!("signal {s}"),
        _ => "status unknown".into(),
    }
}

/// One event for people: `12:04:31.250  link  r1:eth0 no-carrier`.
fn describe(e: &Value) -> String {
    let s = |k: &str| e[k].as_str().unwrap_or("").to_string();
    let at = e["at"].as_f64().unwrap_or(0.0);
    let secs = at as u64 % 86_400;
    let time = format!(
        "{:02}:{:02}:{:02}.{:03}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        ((at.fract()) * 1e3) as u64
    );
    let what = match s("event").as_str() {
        "link" => format!("link     {}:{} {}", s("node"), s("iface"), s("state")),
        "node" => format!("node     {} {}", s("node"), s("action")),
        "interface" => format!("iface    {}:{} {}", s("node"), s("iface"), s("action")),
        "process_started" => format!(
            "process  {} started [{}] {}",
            s("node"),
            e["pid"],
            s("command")
        ),
        "process_exited" => format!(
            "process  {} exited [{}] {} ({})",
            s("node"),
            e["pid"],
            s("command"),
            how(&e["exit"])
        ),
        "out_of_memory" => format!(
            "memory   {} killed: out of memory, limit {} ({})",
            s("node"),
            (e["limit_bytes"].as_u64()).map_or("none".into(), nsfleet_values::memory_text),
            match e["command"].as_str() {
                Some(c) => format!("{c} ended with it"),
                None => "its commands run on".into(),
            }
        ),
        "controller" => match e["reason"].as_str() {
            Some(why) => format!(
                "control  {} {} {} ({why})",
                s("node"),
                s("controller"),
                s("state")
            ),
            None => format!("control  {} {} {}", s("node"), s("controller"), s("state")),
        },
        "ready" => format!(
            "ready    {} {} ({:.1} s after up)",
            s("condition"),
            if e["met"].as_bool() == Some(true) {
                "met"
            } else {
                "not met"
            },
            e["since_up_s"].as_f64().unwrap_or(0.0)
        ),
        "fleet_down" => "fleet    going down".to_string(),
        other => format!("{other} {e}"),
    };
    format!("{time} UTC  {what}")
}

//! `up --wait`, `deploy --wait` and `nsfleet wait`: until a live fleet is ready by a
//! condition (`started`, `converged`: see nsfleet-supervisor's `ready`), its standing on
//! stderr as it goes, and what was missing when it is not. The supervisor does the
//! checking and tells `nsfleet events` the end too; this only asks and says.

use super::connect;
use anyhow::bail;
use nsfleet::control::{Reply, Request};
use nsfleet::ready::{Condition, Standing};
use nsfleet::rundir::RunDir;
use std::io::IsTerminal;
use std::time::Duration;

/// What `--wait` asks: the condition, and how long to wait for it.
#[derive(Clone, Copy, Debug)]
pub struct Wait {
    pub until: Condition,
    pub bound: Duration,
}

/// `--wait`'s value: started or converged.
pub fn parse_condition(s: &str) -> Result<Condition, String> {
    match s {
        "started" => Ok(Condition::Started),
        "converged" => Ok(Condition::Converged),
        other => Err(format!(
            "unknown condition {other:?}: expected started (every node's commands have run) or converged (every router has routes to every other router's loopbacks)"
        )),
    }
}

/// How a wait ended, when it did not hold: the fleet is left as it is, for the caller
/// to keep or take down.
#[derive(Debug)]
pub enum NotReady {
    /// Nodes whose commands failed (the fleet is not what its file says), each message
    /// whole.
    Failed(Vec<String>),
    /// The bound came first.
    Unmet(String),
}

impl std::fmt::Display for NotReady {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotReady::Failed(m) => write!(f, "{}", m.join("\n")),
            NotReady::Unmet(m) => write!(f, "{m}"),
        }
    }
}

/// Waits for fleet `name`; the time it took, since its supervisor started, once it
/// holds.
pub fn wait(rd: &RunDir, name: &str, w: Wait, json: bool) -> anyhow::Result<Result<f64, NotReady>> {
    let mut c = connect(rd, name)?;
    c.send(&Request::Wait {
        until: w.until,
        bound_ms: w.bound.as_millis() as u64,
    })?;
    let live = std::io::stderr().is_terminal() && !json;
    while let Some(reply) = c.next_reply()? {
        match reply {
            Reply::Waiting {
                standing,
                elapsed_s,
            } => say(&standing, elapsed_s, live),
            Reply::Ready { since_up_s, .. } => {
                end_line(live);
                return Ok(Ok(since_up_s));
            }
            Reply::Unready {
                condition,
                failed,
                standing,
                elapsed_s,
            } => {
                end_line(live);
                if !failed.is_empty() {
                    return Ok(Err(NotReady::Failed(failed)));
                }
                let s = standing.unwrap_or_default();
                return Ok(Err(NotReady::Unmet(unmet(name, condition, &s, elapsed_s))));
            }
            Reply::Error { message, .. } => bail!("{message}"),
            other => bail!("unexpected reply from the supervisor: {other:?}"),
        }
    }
    bail!(
        "fleet {name:?} went down while waiting for it to be {}",
        w.until.name()
    )
}

/// The fleet is ready: said for people, or as a JSON object.
pub fn say_ready(name: &str, until: Condition, since_up_s: f64, json: bool) {
    let condition = until.name();
    match json {
        true => println!(
            "{}",
            serde_json::json!({"ready": {"fleet": name, "condition": condition, "since_up_s": since_up_s}})
        ),
        false => println!(
            "fleet {name:?} is {condition}, {since_up_s:.1} s after its supervisor started"
        ),
    }
}

/// A line of progress: rewritten in place on a terminal, one a second otherwise.
fn say(s: &Standing, elapsed_s: f64, live: bool) {
    let what = match s.stage.as_str() {
        "converged" => "routers with a route to every other router's loopback",
        _ => "nodes started",
    };
    let line = format!("waiting: {}/{} {what} ({elapsed_s:.0} s)", s.done, s.of);
    if live {
        eprint!("\r\x1b[K{line}");
    } else {
        eprintln!("{line}");
    }
}

fn end_line(live: bool) {
    if live {
        eprint!("\r\x1b[K");
    }
}

/// What was missing at the bound.
fn unmet(name: &str, until: Condition, s: &Standing, elapsed_s: f64) -> String {
    let what = match s.stage.as_str() {
        "converged" => "routers lack routes to other routers' loopbacks",
        _ => "nodes have not started",
    };
    let mut m = format!(
        "fleet {name:?} is not {} after {elapsed_s:.0} s: {} of {} {what}:",
        until.name(),
        s.of - s.done,
        s.of
    );
    for l in &s.lacking {
        m += &format!("\n  {l}");
    }
    if s.of - s.done > s.lacking.len() {
        m += &format!("\n  and {} more", s.of - s.done - s.lacking.len());
    }
    m
}

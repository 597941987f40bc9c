//! `up --wait`, `deploy --wait` and `nsfleet wait`: until a live fleet is ready by a
//! condition (`started`, `healthy`, `converged`: see nsfleet-supervisor's `ready`), its standing on
//! stderr as it goes, and what was missing when it is not. The supervisor does the
//! checking and tells `nsfleet events` the end too; this only asks and says.

use super::FleetRef;
use anyhow::bail;
use nsfleet::control::{Reply, Request};
use nsfleet::ready::{Condition, Standing};
use std::io::IsTerminal;
use std::time::Duration;

/// What `--wait` asks: the condition, and how long to wait for it.
#[derive(Clone, Copy, Debug)]
pub struct Wait {
    pub until: Condition,
    pub bound: Duration,
}

/// `--wait`'s value: started, healthy or converged.
pub fn parse_condition(s: &str) -> Result<Condition, String> {
    match s {
        "started" => Ok(Condition::Started),
        "healthy" => Ok(Condition::Healthy),
        "converged" => Ok(Condition::Converged),
        other => Err(format!(
            "unknown condition {other:?}: expected started (every node's commands have run), healthy (and each node's health check has passed) or converged (and every router has routes to every other router's loopbacks)"
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
    /// The caller stopped waiting (see [`wait_or_stop`]).
    Stopped,
}

impl std::fmt::Display for NotReady {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotReady::Failed(m) => write!(f, "{}", m.join("\n")),
            NotReady::Unmet(m) => write!(f, "{m}"),
            NotReady::Stopped => write!(f, "stopped before it was ready"),
        }
    }
}

/// A wait that ended with its condition holding.
#[derive(Clone, Copy, Debug)]
pub struct Ready {
    pub until: Condition,
    /// Seconds since the fleet's supervisor started.
    pub since_up_s: f64,
    /// The nodes it was checked on (routers, for `converged`).
    pub of: usize,
}

/// Waits for the fleet: how it holds, or what is missing. Progress goes to stderr,
/// but with `json`.
pub fn wait(fleet: &FleetRef, w: Wait, json: bool) -> anyhow::Result<Result<Ready, NotReady>> {
    wait_or_stop(fleet, w, json, &mut || false)
}

/// [`wait`], asking `stop` about every quarter of a second: once it says so, the wait
/// ends with [`NotReady::Stopped`] (a scenario stopped by a signal). The supervisor's
/// wait ends with the connection.
pub fn wait_or_stop(
    fleet: &FleetRef,
    w: Wait,
    json: bool,
    stop: &mut dyn FnMut() -> bool,
) -> anyhow::Result<Result<Ready, NotReady>> {
    let name = &fleet.name;
    let mut c = fleet.connect()?;
    c.send(&Request::Wait {
        until: w.until,
        bound_ms: w.bound.as_millis() as u64,
    })?;
    c.set_timeout(Some(Duration::from_millis(250)));
    let live = std::io::stderr().is_terminal() && !json;
    loop {
        let reply = match c.next_reply() {
            Ok(Some(reply)) => reply,
            Ok(None) => break,
            // A quiet quarter of a second (a line cut by it is finished by the next read).
            Err(e) if timed_out(&e) => match stop() {
                true => return Ok(Err(NotReady::Stopped)),
                false => continue,
            },
            Err(e) => return Err(e),
        };
        if stop() {
            return Ok(Err(NotReady::Stopped));
        }
        match reply {
            Reply::Waiting {
                standing,
                elapsed_s,
            } if !json => say(&standing, elapsed_s, live),
            Reply::Waiting { .. } => {}
            Reply::Ready { since_up_s, of, .. } => {
                end_line(live);
                return Ok(Ok(Ready {
                    until: w.until,
                    since_up_s,
                    of,
                }));
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

/// Whether a read from the supervisor failed only because its timeout passed.
fn timed_out(e: &anyhow::Error) -> bool {
    let io = e.root_cause().downcast_ref::<std::io::Error>();
    io.is_some_and(|e| {
        matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        )
    })
}

/// The fleet is ready: said for people, or as a JSON object.
pub fn say_ready(name: &str, r: &Ready, json: bool) {
    let condition = r.until.name();
    if json {
        println!("{}", serde_json::json!({ "ready": ready_json(name, r) }));
        return;
    }
    println!(
        "fleet {name:?} is {condition}, {:.1} s after its supervisor started",
        r.since_up_s
    );
    if r.until == Condition::Converged && r.of == 0 {
        println!("  it has no router (kind frr or bird, or router = true): started was all there was to wait for");
    }
}

/// What a met wait says to machines: {"fleet", "condition", "since_up_s", "of"}.
pub fn ready_json(name: &str, r: &Ready) -> serde_json::Value {
    serde_json::json!({"fleet": name, "condition": r.until.name(), "since_up_s": r.since_up_s, "of": r.of})
}

/// A line of progress: rewritten in place on a terminal, one a second otherwise.
fn say(s: &Standing, elapsed_s: f64, live: bool) {
    let what = match s.stage.as_str() {
        "converged" => "routers with a route to every other router's loopback",
        "healthy" => "nodes healthy",
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
        "healthy" => "nodes are not healthy",
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

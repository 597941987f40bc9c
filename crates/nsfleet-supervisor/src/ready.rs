//! Whether the fleet is ready (`up --wait`, `nsfleet wait`), by one of three conditions,
//! each including `started`:
//! - `started`: every node's commands have run (see `Procs::started`); a command that
//!   failed ends the wait at once, with the end of its log, and where a host file it was
//!   given says what it refused ("r1.conf:11: % Unknown command").
//! - `healthy`: started, and each node's health check (containerlab's `healthcheck`, or TOML's) has
//!   passed once: run once the node has started, then every interval, each within its
//!   timeout; its retries failed in a row (not counting those in its start period) end
//!   the wait, with the check's output.
//! - `converged`: started, and every router has a route in its kernel to every other
//!   router's loopback addresses (nsfleet-subsys's `reach`).
//!
//! A wait reads; it changes nothing and takes no lock of the fleet's changes. Rounds come
//! as often as their own cost allows (a pause of nine times a round's length, 100 ms to
//! 1 s), so that a wait takes at most a tenth of a CPU from the daemons it waits for.

use crate::Supervisor;
use nsfleet_subsys::process::{CheckRun, Procs, Started};
use nsfleet_subsys::reach::{self, Reach};
use nsfleet_sys::Exit;
use nsfleet_topology::HealthCheck;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// What `--wait` waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    Started,
    Healthy,
    Converged,
}

impl Condition {
    pub fn name(self) -> &'static str {
        match self {
            Condition::Started => "started",
            Condition::Healthy => "healthy",
            Condition::Converged => "converged",
        }
    }
}

/// Where a wait stands: `done` of `of` nodes (routers, for `converged`) are there.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Standing {
    /// "started", "healthy" or "converged": the condition being checked now.
    pub stage: String,
    pub done: usize,
    pub of: usize,
    /// Those not there yet, each with why (at most [`SHOWN`]).
    pub lacking: Vec<String>,
}

/// How a wait ended.
pub enum Outcome {
    /// It holds; `of`: the nodes (routers, for `converged`) it was checked on.
    Met { of: usize },
    /// A node's command failed: the fleet is not what its file says.
    Failed(Vec<String>),
    /// The bound came first, or a node's health check failed its retries; where it
    /// stood then.
    Unmet(Standing),
    /// The fleet went down meanwhile.
    Gone,
    /// The wait itself failed (a socket it could not open): the fleet is as it was.
    Error(String),
}

/// A wait under way (or a `ping`'s echoes), counted in `Supervisor::waits` until it is
/// dropped: the teardown gives it a moment to let go of the namespaces it reads.
pub(crate) struct Waiting<'a>(&'a Supervisor);

impl<'a> Waiting<'a> {
    pub(crate) fn new(sup: &'a Supervisor) -> Self {
        sup.waits.fetch_add(1, Ordering::SeqCst);
        Waiting(sup)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waits.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How many nodes a message names before "and N more".
const SHOWN: usize = 8;

impl Supervisor {
    /// Waits until `until` holds or `bound` has passed, telling `progress` where it
    /// stands about once a second.
    pub(crate) fn wait_ready(
        &self,
        until: Condition,
        bound: Duration,
        mut progress: impl FnMut(&Standing) -> bool,
    ) -> Outcome {
        // Declared first, dropped last: after the routers' sockets.
        let _counted = Waiting::new(self);
        let start = Instant::now();
        let mut told = Instant::now();
        let mut routers: Option<Routers> = None;
        let mut health: Option<Health> = None;
        // Rounds in a row that found every node started (see `Procs::started`).
        let mut settled = 0;
        let outcome = loop {
            let round = Instant::now();
            if self.going() {
                break Outcome::Gone;
            }
            // Each condition is checked once the one before it holds.
            let standing = match self.started() {
                Err(failures) => break Outcome::Failed(failures),
                Ok(s) if s.done < s.of => {
                    settled = 0;
                    s
                }
                Ok(s) if settled < 1 => {
                    settled += 1;
                    Standing {
                        done: s.done.saturating_sub(1),
                        ..s
                    }
                }
                Ok(s) => match until {
                    Condition::Started => s,
                    Condition::Healthy => {
                        let h = health.get_or_insert_with(|| Health::new(self));
                        match h.round(self) {
                            Ok(s) => s,
                            Err(unhealthy) => break Outcome::Unmet(unhealthy),
                        }
                    }
                    Condition::Converged => {
                        let r = match routers.as_mut() {
                            Some(r) => r,
                            None => match Routers::open(self) {
                                Ok(r) => routers.insert(r),
                                Err(e) => {
                                    break Outcome::Error(format!(
                                        "reading the routers' tables: {e:#}"
                                    ))
                                }
                            },
                        };
                        r.check()
                    }
                },
            };
            if standing.done == standing.of {
                break Outcome::Met { of: standing.of };
            }
            if start.elapsed() >= bound {
                break Outcome::Unmet(match (standing.stage.as_str(), routers.as_mut()) {
                    ("converged", Some(r)) => r.full_look(),
                    _ => standing,
                });
            }
            if told.elapsed() >= Duration::from_secs(1) {
                told = Instant::now();
                if !progress(&standing) {
                    break Outcome::Gone;
                }
            }
            let pause =
                (round.elapsed() * 9).clamp(Duration::from_millis(100), Duration::from_secs(1));
            self.pause(pause.min(bound.saturating_sub(start.elapsed())));
        };
        // Checks still running end with `health` (a `CheckRun` kills and reaps on drop).
        outcome
    }

    /// Whether the fleet is going down (or gone): a wait ends then, and lets go of the
    /// namespaces it reads. A fleet still starting is waited for.
    pub(crate) fn going(&self) -> bool {
        !matches!(*self.state.lock(), "up" | "starting")
    }

    /// Sleeps `d`, or less if the fleet starts going down meanwhile.
    fn pause(&self, d: Duration) {
        let until = Instant::now() + d;
        while !self.going() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            std::thread::sleep(left.min(Duration::from_millis(50)));
        }
    }

    /// Returns once no wait is under way, or after `bound` (for the teardown: a wait
    /// notices within 50 ms that the fleet is going down).
    pub(crate) fn waits_ended(&self, bound: Duration) {
        let until = Instant::now() + bound;
        while self.waits.load(Ordering::SeqCst) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Every node's commands as `started` sees them; the failures, if any failed.
    fn started(&self) -> Result<Standing, Vec<String>> {
        let nodes = self.fleet.nodes();
        let mut s = Standing {
            stage: "started".into(),
            of: nodes.len(),
            ..Standing::default()
        };
        let mut failures = Vec::new();
        for n in nodes.iter() {
            let state = n.inspect::<Procs, _>(self.defaults.process, |p| p.started());
            // A node with a world but no processes' state has been stopped.
            let stopped = || match n.config().has_world() {
                true => Started::Not(format!(
                    "stopped (`nsfleet node {} {} start`)",
                    self.name,
                    n.name()
                )),
                false => Started::Yes,
            };
            match state.unwrap_or_else(stopped) {
                Started::Yes => s.done += 1,
                Started::Not(why) => note(&mut s.lacking, format!("{}: {why}", n.name())),
                Started::Failed { command, exit, log } => {
                    let files = nsfleet_subsys::world::host_files(n, &self.name);
                    failures.push(failure(n.name(), &command, exit, &log, &files));
                }
            }
        }
        if failures.is_empty() {
            Ok(s)
        } else {
            Err(failures)
        }
    }
}

/// Adds a line to a list of at most [`SHOWN`].
fn note(list: &mut Vec<String>, line: String) {
    if list.len() < SHOWN {
        list.push(line);
    }
}

/// The nodes' health checks, as far as a wait has run them.
struct Health {
    checks: Vec<Checked>,
    /// Nodes without a health check: healthy once started.
    unchecked: usize,
    /// When the checks began (their start periods count from here).
    began: Instant,
}

/// One node's health check.
struct Checked {
    node: String,
    check: HealthCheck,
    running: Option<(CheckRun, Instant)>,
    next: Instant,
    failures: u32,
    last: String,
    healthy: bool,
    /// Failed its retries, or its check could not run: said as unhealthy.
    gave_up: bool,
}

impl Health {
    fn new(sup: &Supervisor) -> Health {
        let nodes = sup.fleet.nodes();
        let checks: Vec<Checked> = (nodes.iter())
            .filter_map(|n| {
                Some(Checked {
                    node: n.name().to_string(),
                    check: n.config().healthcheck.clone()?,
                    running: None,
                    next: Instant::now(),
                    failures: 0,
                    last: String::new(),
                    healthy: false,
                    gave_up: false,
                })
            })
            .collect();
        Health {
            unchecked: nodes.len() - checks.len(),
            checks,
            began: Instant::now(),
        }
    }

    /// Ends the checks that run, starts those that are due; a node that failed its
    /// retries is the error, with its check's output.
    fn round(&mut self, sup: &Supervisor) -> Result<Standing, Standing> {
        let now = Instant::now();
        let mut unhealthy = Vec::new();
        for c in self.checks.iter_mut().filter(|c| !c.healthy) {
            if let Some((run, deadline)) = c.running.take() {
                let exit = match run.ended() {
                    Some(exit) => Some((exit, run.log.clone())),
                    None if now >= deadline => {
                        let log = run.log.clone();
                        drop(run);
                        c.last = format!("timed out after {} s", c.check.timeout_s);
                        c.failed(self.began, &log, &mut unhealthy);
                        None
                    }
                    None => {
                        c.running = Some((run, deadline));
                        None
                    }
                };
                match exit {
                    Some((Exit::Code(0), _)) => c.healthy = true,
                    Some((exit, log)) => {
                        c.last = how(exit);
                        c.failed(self.began, &log, &mut unhealthy);
                    }
                    None => {}
                }
            }
            if !c.healthy && c.running.is_none() && now >= c.next {
                let node = sup.fleet.nodes().get(&c.node).cloned();
                let started = node
                    .and_then(|n| n.inspect::<Procs, _>(sup.defaults.process, |p| p.start_check()));
                match started.flatten() {
                    Some(Ok(run)) => {
                        let deadline = now + Duration::from_secs(c.check.timeout_s.into());
                        c.running = Some((run, deadline));
                        c.next = now + Duration::from_secs(c.check.interval_s.into());
                    }
                    Some(Err(e)) => {
                        c.gave_up = true;
                        unhealthy.push(format!("{}: its health check could not start: {e}", c.node))
                    }
                    None => {
                        c.gave_up = true;
                        unhealthy.push(format!(
                            "{}: it has no world to run its health check in",
                            c.node
                        ))
                    }
                }
            }
        }
        let healthy = self.checks.iter().filter(|c| c.healthy).count();
        let failed = !unhealthy.is_empty();
        // The unhealthy first, then those not healthy yet: every node named is one of the
        // `of - done`, so "and N more" counts the rest of them.
        let mut s = Standing {
            stage: "healthy".into(),
            of: self.checks.len() + self.unchecked,
            done: healthy + self.unchecked,
            lacking: unhealthy,
        };
        for c in self.checks.iter().filter(|c| !c.healthy && !c.gave_up) {
            let last = match c.last.as_str() {
                "" => "not checked yet".to_string(),
                l => format!("{} failures, the last {l}", c.failures),
            };
            note(&mut s.lacking, format!("{}: {last}", c.node));
        }
        if failed {
            return Err(s);
        }
        Ok(s)
    }
}

impl Checked {
    /// A failed check: counted unless within the start period; the node is unhealthy
    /// once its retries have failed in a row.
    fn failed(&mut self, began: Instant, log: &std::path::Path, unhealthy: &mut Vec<String>) {
        if began.elapsed() < Duration::from_secs(self.check.start_period_s.into()) {
            return;
        }
        self.failures += 1;
        if self.failures >= self.check.retries {
            self.gave_up = true;
            let out = last_lines(log, 4).join("\n    ");
            unhealthy.push(format!(
                "{}: unhealthy: its health check `{}` failed {} times in a row (the last: {}); its output ({}) ends:\n    {out}",
                self.node,
                self.check.argv.join(" "),
                self.failures,
                self.last,
                log.display()
            ));
        }
    }
}

/// The fleet's routers (nodes whose `router` is on), a socket in each, and what the
/// rounds so far found.
struct Routers {
    reach: Reach,
    /// Each router's loopbacks, read again while it has none.
    loopbacks: Vec<Vec<IpAddr>>,
    /// Routers found with every other loopback since the last full look.
    complete: Vec<bool>,
}

impl Routers {
    fn open(sup: &Supervisor) -> anyhow::Result<Routers> {
        let names: Vec<String> = (sup.fleet.nodes().iter())
            .filter(|n| n.config().router && !n.is_tenant())
            .map(|n| n.name().to_string())
            .collect();
        Ok(Routers {
            reach: Reach::open(&sup.fleet, &names)?,
            loopbacks: vec![Vec::new(); names.len()],
            complete: vec![false; names.len()],
        })
    }

    /// A round. Routers converge at about the same time, so a round looks at routers not
    /// yet complete only until it finds one that still lacks a route: a thousand
    /// routers' tables are not all read on every round. Once every router has been
    /// found complete, one full look (every loopback and table read again) decides.
    fn check(&mut self) -> Standing {
        let n = self.complete.len();
        for i in 0..n {
            if self.loopbacks[i].is_empty() {
                self.loopbacks[i] = self.reach.loopbacks(i).unwrap_or_default();
            }
        }
        for i in 0..n {
            if !self.complete[i] {
                if !self.lacking(i).is_empty() {
                    return self.standing(Vec::new());
                }
                self.complete[i] = true;
            }
        }
        self.full_look()
    }

    /// Every router's loopbacks and table read again; which lack what.
    fn full_look(&mut self) -> Standing {
        let n = self.complete.len();
        for i in 0..n {
            self.loopbacks[i] = self.reach.loopbacks(i).unwrap_or_default();
        }
        let mut lacking = Vec::new();
        for i in 0..n {
            let missing = self.lacking(i);
            self.complete[i] = missing.is_empty();
            if !missing.is_empty() && lacking.len() < SHOWN {
                lacking.push(self.say_missing(i, &missing));
            }
        }
        self.standing(lacking)
    }

    fn standing(&self, lacking: Vec<String>) -> Standing {
        Standing {
            stage: "converged".into(),
            of: self.complete.len(),
            done: self.complete.iter().filter(|c| **c).count(),
            lacking,
        }
    }

    /// The other routers' loopbacks router `i` has no route to (an address it has on
    /// its own `lo` too, anycast, it has).
    fn lacking(&mut self, i: usize) -> Vec<IpAddr> {
        let own = &self.loopbacks[i];
        let others: Vec<IpAddr> = (self.loopbacks.iter().enumerate())
            .filter(|(j, _)| *j != i)
            .flat_map(|(_, l)| l.iter().copied())
            .filter(|a| !own.contains(a))
            .collect();
        match self.reach.routes(i) {
            Ok(routes) => reach::unreached(&routes, &others),
            Err(_) => others,
        }
    }

    /// "r3 has no route to r7 (10.255.0.7), r9 (10.255.0.9) and 12 more".
    fn say_missing(&self, i: usize, missing: &[IpAddr]) -> String {
        let names: Vec<&str> = self.reach.names().collect();
        let owner = |a: &IpAddr| {
            (self.loopbacks.iter().position(|l| l.contains(a))).map_or("?", |j| names[j])
        };
        let shown: Vec<String> = (missing.iter().take(3))
            .map(|a| format!("{} ({a})", owner(a)))
            .collect();
        let more = match missing.len() {
            n if n > 3 => format!(" and {} more", n - 3),
            _ => String::new(),
        };
        format!("{} has no route to {}{more}", names[i], shown.join(", "))
    }
}

/// What to say of a node whose command failed: the command, how it ended, and the end of
/// its log, each `line N:` of a file the node was given from the host said as that file's
/// own line.
fn failure(
    node: &str,
    command: &str,
    exit: Exit,
    log: &std::path::Path,
    files: &[(String, String)],
) -> String {
    let how = how(exit);
    let lines = last_lines(log, 6);
    // The node file the log names, as the host file it came from.
    let named =
        (files.iter()).find(|(inside, _)| lines.iter().any(|l| l.contains(inside.as_str())));
    let said: Vec<String> = (lines.iter())
        .map(|l| match (named, line_number(l)) {
            (Some((inside, host)), Some((n, rest))) => format!("  {host}:{n} ({inside}): {rest}"),
            _ => format!("  {l}"),
        })
        .collect();
    format!(
        "node {node}: its command `{command}` {how}; the end of its log:\n{}",
        said.join("\n")
    )
}

/// The last `n` lines of a log that are not blank (from its last 4 KB).
fn last_lines(log: &std::path::Path, n: usize) -> Vec<String> {
    let text = std::fs::read(log).unwrap_or_default();
    let tail = String::from_utf8_lossy(&text[text.len().saturating_sub(4096)..]).into_owned();
    let lines: Vec<&str> = tail.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| l.to_string())
        .collect()
}

/// How a process ended, said.
fn how(exit: Exit) -> String {
    match exit {
        Exit::Code(c) => format!("exited with status {c}"),
        Exit::Signal(s) => format!("was killed by signal {s}"),
        Exit::Unknown => "ended".to_string(),
    }
}

/// "line 11: % Unknown command: x" as (11, "% Unknown command: x").
fn line_number(l: &str) -> Option<(u32, &str)> {
    let rest = l.trim_start().strip_prefix("line ")?;
    let (n, rest) = rest.split_once(':')?;
    Some((n.trim().parse().ok()?, rest.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_line_is_said_as_the_users_file_and_line() {
        let dir = std::env::temp_dir().join(format!("nsfleet-ready-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("r1.log");
        let text = "ZEBRA: starting\nline 11: % Unknown command[41]:  bogus 1\nConfiguration file[/etc/frr/frr.conf] processing failure: 2\n";
        std::fs::write(&log, text).unwrap();
        let files = [("/etc/frr/frr.conf".to_string(), "/lab/r1.conf".to_string())];
        let m = failure("r1", "vtysh -b", Exit::Code(2), &log, &files);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            m.starts_with("node r1: its command `vtysh -b` exited with status 2"),
            "{m}"
        );
        assert!(
            m.contains("/lab/r1.conf:11 (/etc/frr/frr.conf): % Unknown command[41]:  bogus 1"),
            "{m}"
        );
        assert!(m.contains("processing failure: 2"), "{m}");
    }
}

//! Whether the fleet is ready (`up --wait`, `nsfleet wait`), by one of two conditions,
//! the second including the first:
//! - `started`: every node's commands have run (see `Procs::started`); a command that
//!   failed ends the wait at once, with the end of its log, and where a host file it was
//!   given says what it refused ("r1.conf:11: % Unknown command").
//! - `converged`: started, and every router has a route in its kernel to every other
//!   router's loopback addresses (nsfleet-subsys's `reach`).
//!
//! A wait reads; it changes nothing and takes no lock of the fleet's changes. Rounds come
//! as often as their own cost allows (a pause of nine times a round's length, 100 ms to
//! 1 s), so that a wait takes at most a tenth of a CPU from the daemons it waits for.

use crate::Supervisor;
use nsfleet_subsys::process::{Procs, Started};
use nsfleet_subsys::reach::{self, Reach};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// What `--wait` waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    Started,
    Converged,
}

impl Condition {
    pub fn name(self) -> &'static str {
        match self {
            Condition::Started => "started",
            Condition::Converged => "converged",
        }
    }
}

/// Where a wait stands: `done` of `of` nodes (routers, for `converged`) are there.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Standing {
    /// "started" or "converged": the condition being checked now.
    pub stage: String,
    pub done: usize,
    pub of: usize,
    /// Those not there yet, each with why (at most [`SHOWN`]).
    pub lacking: Vec<String>,
}

/// How a wait ended.
pub enum Outcome {
    Met,
    /// A node's command failed: the fleet is not what its file says.
    Failed(Vec<String>),
    /// The bound came first; where it stood then.
    Unmet(Standing),
    /// The fleet went down meanwhile.
    Gone,
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
        let start = Instant::now();
        let mut told = Instant::now();
        let mut routers: Option<Routers> = None;
        // Rounds in a row that found every node started (see `Procs::started`).
        let mut settled = 0;
        loop {
            let round = Instant::now();
            if *self.state.lock() != "up" {
                return Outcome::Gone;
            }
            // Each condition is checked once the one before it holds.
            let standing = match self.started() {
                Err(failures) => return Outcome::Failed(failures),
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
                Ok(s) if until == Condition::Started => s,
                Ok(_) => {
                    let r = match routers.as_mut() {
                        Some(r) => r,
                        None => match Routers::open(self) {
                            Ok(r) => routers.insert(r),
                            Err(e) => return Outcome::Failed(vec![format!("{e:#}")]),
                        },
                    };
                    r.check()
                }
            };
            if standing.done == standing.of {
                return Outcome::Met;
            }
            if start.elapsed() >= bound {
                return Outcome::Unmet(match (standing.stage.as_str(), routers.as_mut()) {
                    ("converged", Some(r)) => r.full_look(),
                    _ => standing,
                });
            }
            if told.elapsed() >= Duration::from_secs(1) {
                told = Instant::now();
                if !progress(&standing) {
                    return Outcome::Gone;
                }
            }
            let pause =
                (round.elapsed() * 3).clamp(Duration::from_millis(100), Duration::from_secs(1));
            std::thread::sleep(pause.min(bound.saturating_sub(start.elapsed())));
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
            match state.unwrap_or(Started::Yes) {
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

    /// The other routers' loopbacks router `i` has no route to.
    fn lacking(&mut self, i: usize) -> Vec<IpAddr> {
        let others: Vec<IpAddr> = (self.loopbacks.iter().enumerate())
            .filter(|(j, _)| *j != i)
            .flat_map(|(_, l)| l.iter().copied())
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
    exit: nsfleet_sys::Exit,
    log: &std::path::Path,
    files: &[(String, String)],
) -> String {
    let how = match exit {
        nsfleet_sys::Exit::Code(c) => format!("exited with status {c}"),
        nsfleet_sys::Exit::Signal(s) => format!("was killed by signal {s}"),
        nsfleet_sys::Exit::Unknown => "ended".to_string(),
    };
    let text = std::fs::read(log).unwrap_or_default();
    let tail = String::from_utf8_lossy(&text[text.len().saturating_sub(4096)..]).into_owned();
    let lines: Vec<&str> = tail.lines().filter(|l| !l.trim().is_empty()).collect();
    let lines = &lines[lines.len().saturating_sub(6)..];
    // The node file the log names, as the host file it came from.
    let named = files
        .iter()
        .find(|(inside, _)| tail.contains(inside.as_str()));
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
        let m = failure("r1", "vtysh -b", nsfleet_sys::Exit::Code(2), &log, &files);
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

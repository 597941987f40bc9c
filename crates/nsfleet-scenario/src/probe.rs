//! An expectation checked on the live fleet, again and again until it holds or its
//! `within` has passed: pings and routes read by the fleet's supervisor in the node
//! (nsfleet-client's `probe`), commands run by `nsfleet exec`. On a pattern of nodes, each
//! round tries every node it has not yet held on, side by side, and the expectation holds
//! once it has held on each.
//!
//! Changes nothing in the fleet.

use crate::check::Shape;
use crate::run::Watch;
use crate::step::Expect;
use nsfleet_client::FleetRef;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// How an expectation is checked, besides what it expects.
pub struct How<'a> {
    pub within: Duration,
    /// What an `exec`'s output must match.
    pub output: Option<&'a regex::Regex>,
    /// How long a `loss` expectation's probes run, each time it is tried.
    pub window: Duration,
}

/// What an expectation came to.
#[derive(Debug, Default)]
pub struct Seen {
    pub ok: bool,
    /// The evidence, for people.
    pub said: String,
    /// On a pattern: each node's seconds from the step's start to holding there.
    pub nodes: BTreeMap<String, f64>,
    /// Seconds from the step's start to holding (on the last node, on a pattern).
    pub after_s: f64,
}

impl Seen {
    pub fn failed(said: String) -> Seen {
        Seen {
            said,
            ..Seen::default()
        }
    }
}

/// Probes sent a second's worth apart at most, so that the moment an expectation comes
/// true is seen within that much.
fn period(e: &Expect) -> Duration {
    match e {
        Expect::Route { .. } => Duration::from_millis(50),
        Expect::Ping { .. } => Duration::from_millis(100),
        Expect::Exec { .. } => Duration::from_millis(200),
        Expect::Loss { .. } => Duration::ZERO,
    }
}

/// How long an echo's answer is waited for: an address that does not answer within it
/// does not answer (`no ping`).
const ECHO_TIMEOUT: Duration = Duration::from_secs(1);

/// Pings for `loss` go this often.
const LOSS_INTERVAL: Duration = Duration::from_millis(20);

/// The longest `loss` window: the supervisor sends at most 100,000 echoes in one ping.
pub const MOST_WINDOW: Duration = Duration::from_secs(2000);

/// Checks `e` from `start` until it holds or `how.within` has passed.
pub fn expect(
    fleet: &FleetRef,
    shape: &Shape,
    e: &Expect,
    how: &How<'_>,
    start: Instant,
    watch: &mut dyn Watch,
) -> Seen {
    let nodes = shape.nodes_matching(e.node());
    if nodes.is_empty() {
        return Seen::failed(format!("{:?} names no node of the fleet now", e.node()));
    }
    let deadline = start + how.within;
    let mut held: BTreeMap<String, f64> = BTreeMap::new();
    let mut last: BTreeMap<String, String> = BTreeMap::new();
    loop {
        let round = Instant::now();
        let pending: Vec<&String> = nodes.iter().filter(|n| !held.contains_key(*n)).collect();
        // Each node's try, and when it answered (a node's time is its own, not the
        // round's).
        let results: Vec<(String, bool, String, f64)> = std::thread::scope(|s| {
            let tries: Vec<_> = (pending.iter())
                .map(|n| {
                    s.spawn(move || {
                        let r = attempt(fleet, n, e, how, deadline);
                        (n.to_string(), r, start.elapsed().as_secs_f64())
                    })
                })
                .collect();
            (tries.into_iter())
                .map(|t| {
                    let (n, r, at) = t.join().expect("a probe does not panic");
                    match r {
                        Ok((ok, said)) => (n, ok, said, at),
                        Err(err) => (n, false, format!("{err:#}"), at),
                    }
                })
                .collect()
        });
        for (n, ok, said, at) in results {
            if ok {
                held.insert(n.clone(), at);
            }
            last.insert(n, said);
        }
        if held.len() == nodes.len() {
            let at = held.values().copied().fold(0.0, f64::max);
            return holds(nodes, held, last, at);
        }
        if Instant::now() >= deadline {
            return misses(&nodes, &held, &last, how.within);
        }
        let rest = period(e).saturating_sub(round.elapsed());
        if !watch.pause(rest.min(deadline.saturating_duration_since(Instant::now()))) {
            return Seen::failed("interrupted".into());
        }
    }
}

fn holds(
    nodes: Vec<String>,
    held: BTreeMap<String, f64>,
    last: BTreeMap<String, String>,
    now: f64,
) -> Seen {
    let said = match nodes.len() {
        1 => last.into_values().next().unwrap_or_default(),
        n => {
            let (slowest, t) = (held.iter())
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map(|(k, v)| (k.clone(), *v))
                .unwrap_or_default();
            format!("held on all {n} nodes, the last ({slowest}) after {t:.3}s")
        }
    };
    Seen {
        ok: true,
        said,
        nodes: if nodes.len() > 1 {
            held
        } else {
            BTreeMap::new()
        },
        after_s: now,
    }
}

fn misses(
    nodes: &[String],
    held: &BTreeMap<String, f64>,
    last: &BTreeMap<String, String>,
    within: Duration,
) -> Seen {
    let missing: Vec<String> = (nodes.iter())
        .filter(|n| !held.contains_key(*n))
        .take(5)
        .map(|n| match nodes.len() {
            1 => last.get(n).cloned().unwrap_or_default(),
            _ => format!("{n}: {}", last.get(n).map_or("", String::as_str)),
        })
        .collect();
    let not = nodes.len() - held.len();
    let more = if not > 5 {
        format!("; and {} more", not - 5)
    } else {
        String::new()
    };
    let on = match nodes.len() {
        1 => String::new(),
        n => format!(" on {not} of {n} nodes"),
    };
    Seen {
        said: format!(
            "not true after {}s{on}: {}{more}",
            within.as_secs_f64(),
            missing.join("; ")
        ),
        nodes: held.clone(),
        ..Seen::default()
    }
}

/// One try of `e` on `node`: whether it holds there now, and what was seen.
fn attempt(
    fleet: &FleetRef,
    node: &str,
    e: &Expect,
    how: &How<'_>,
    deadline: Instant,
) -> anyhow::Result<(bool, String)> {
    // A try begun just before the deadline still gets its full time: a ping cut to a
    // few milliseconds would say "no answer" of an address that answers.
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(ECHO_TIMEOUT);
    match e {
        Expect::Ping { addr, reach, .. } => {
            let p = nsfleet_client::probe::ping(
                fleet,
                node,
                *addr,
                1,
                Duration::from_millis(1),
                ECHO_TIMEOUT,
            )?;
            let said = match p.rtt_ms.first() {
                Some(rtt) => format!("{addr} answered in {rtt:.2} ms"),
                None => format!(
                    "no answer from {addr} within {}s",
                    ECHO_TIMEOUT.as_secs_f64()
                ),
            };
            Ok((*reach == (p.received > 0), said))
        }
        Expect::Route {
            prefix,
            via,
            present,
            ..
        } => {
            let routes = nsfleet_client::probe::routes(fleet, node)?;
            let same = |r: &&nsfleet::control::RouteDst| {
                r.prefix == prefix.prefix && same_network(r.dst, prefix)
            };
            // A route whose every next hop has lost its carrier leads nowhere: none.
            let found = routes.iter().filter(same).find(|r| !r.dead);
            let said = match found {
                None if routes.iter().any(|r| same(&r)) => {
                    format!("no route to {prefix} but through a device without carrier")
                }
                None => format!("no route to {prefix}"),
                Some(r) if r.gateways.is_empty() => format!("{prefix} directly connected"),
                Some(r) => format!(
                    "{prefix} via {}",
                    r.gateways
                        .iter()
                        .map(IpAddr::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            let ok = match (found, via) {
                (None, _) => !present,
                (Some(_), None) => *present,
                (Some(r), Some(v)) => r.gateways.contains(v),
            };
            Ok((ok, said))
        }
        Expect::Exec { command, .. } => exec(fleet, node, command, how.output, left),
        Expect::Loss { addr, below, .. } => {
            let count = (how.window.as_millis() / LOSS_INTERVAL.as_millis()).max(1) as u32;
            let p = nsfleet_client::probe::ping(
                fleet,
                node,
                *addr,
                count,
                LOSS_INTERVAL,
                Duration::from_millis(500),
            )?;
            let lost = 100.0 * f64::from(p.sent - p.received) / f64::from(p.sent.max(1));
            Ok((
                lost < *below,
                format!("{lost:.1}% of {} echoes to {addr} lost", p.sent),
            ))
        }
    }
}

/// Whether `dst` is the network `prefix` names.
fn same_network(dst: IpAddr, prefix: &nsfleet_values::IpNet) -> bool {
    nsfleet_values::IpNet {
        addr: dst,
        prefix: prefix.prefix,
    }
    .network()
        == prefix.network()
}

/// `nsfleet exec FLEET NODE -- COMMAND`, ended at `left`: whether it exited 0 (and its
/// output matched), and its status with its output's last line.
fn exec(
    fleet: &FleetRef,
    node: &str,
    command: &[String],
    output: Option<&regex::Regex>,
    left: Duration,
) -> anyhow::Result<(bool, String)> {
    use anyhow::Context;
    use std::process::{Command, Stdio};
    let me = std::env::current_exe().context("finding the nsfleet program")?;
    let mut child = Command::new(me)
        .args(["exec", &fleet.name, node, "--"])
        .args(command)
        .env("NSFLEET_RUN_DIR", &fleet.run_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting nsfleet exec")?;
    let (stdout, stderr) = (
        Collected::of(child.stdout.take()),
        Collected::of(child.stderr.take()),
    );
    let end = Instant::now() + left;
    let status = loop {
        if let Some(status) = child.try_wait().context("waiting for nsfleet exec")? {
            break status;
        }
        if Instant::now() >= end {
            end_command(&mut child);
            return Ok((
                false,
                format!("still running after {:.1}s: ended", left.as_secs_f64()),
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // What the command left running in the node (`sleep 600 &`) keeps our pipes open:
    // what the command wrote is in them already, and is what counts; what runs on is
    // not waited for.
    let until = Instant::now() + Duration::from_millis(200);
    let out = std::process::Output {
        status,
        stdout: stdout.until(until),
        stderr: stderr.until(until),
    };
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let last = |b: &[u8]| {
        String::from_utf8_lossy(b)
            .lines()
            .last()
            .unwrap_or("")
            .to_string()
    };
    let status = out
        .status
        .code()
        .map_or("killed by a signal".to_string(), |c| format!("exit {c}"));
    let matched = output.is_none_or(|re| re.is_match(&text));
    let said = match (out.status.success(), matched, output) {
        (true, false, Some(re)) => format!(
            "exit 0, but the output does not match /{re}/: {:?}",
            last(&out.stdout)
        ),
        (true, _, _) => format!("exit 0: {:?}", last(&out.stdout)),
        (false, _, _) => format!(
            "{status}: {:?}",
            last(if out.stderr.is_empty() {
                &out.stdout
            } else {
                &out.stderr
            })
        ),
    };
    Ok((out.status.success() && matched, said))
}

/// Ends `nsfleet exec` and its command: SIGTERM first, which `nsfleet exec` passes on to
/// the command it forked in the node (SIGKILL would end only `nsfleet exec`, and leave the
/// command running there), then SIGKILL after a second.
fn end_command(child: &mut std::process::Child) {
    let pidfd = nsfleet::sys::pidfd_open(child.id() as libc::pid_t);
    if let Ok(fd) = &pidfd {
        use std::os::fd::AsFd;
        let _ = nsfleet::sys::kill_pidfd(fd.as_fd(), libc::SIGTERM);
    }
    let grace = Instant::now() + Duration::from_secs(1);
    while Instant::now() < grace {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// What a pipe has given so far, read by a thread of its own until the pipe ends.
struct Collected {
    bytes: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    ended: std::sync::mpsc::Receiver<()>,
}

impl Collected {
    fn of(r: Option<impl std::io::Read + Send + 'static>) -> Collected {
        let bytes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (tx, ended) = std::sync::mpsc::channel();
        let into = bytes.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            if let Some(mut r) = r {
                while let Ok(n @ 1..) = r.read(&mut chunk) {
                    into.lock()
                        .expect("output lock")
                        .extend_from_slice(&chunk[..n]);
                }
            }
            let _ = tx.send(());
        });
        Collected { bytes, ended }
    }

    /// What was read by the time the pipe ended, or by `until`, whichever came first.
    fn until(self, until: Instant) -> Vec<u8> {
        let _ = self
            .ended
            .recv_timeout(until.saturating_duration_since(Instant::now()));
        std::mem::take(&mut self.bytes.lock().expect("output lock"))
    }
}

//! Where a router grid's time goes between `deploy` (or `up`) and converged, router by
//! router, recorded as it happens rather than sampled:
//!
//! - **processes**: when each router's daemons and `vtysh -b` were started, and when each
//!   returned (a daemon started with `-d` returns once it is ready; `vtysh -b` once the
//!   configuration is applied), from the kernel's process events, which the kernel
//!   stamps itself;
//! - **routes**: when each router's first route to another router's loopback came in, and
//!   when the last of them did, from a route socket in its namespace, opened as its
//!   routing daemon is started (before that daemon can have installed anything);
//! - **the protocol** (FRR): when each router's adjacencies went Full, how many SPF runs
//!   it made, when its last one ran and how long it took, read from ospfd once the grid
//!   has converged;
//! - **CPU**: each daemon's user and kernel time at converged, what the nodes' start
//!   commands used (`vtysh -b`, the daemons' launchers), and nsfleet's own.
//!
//! It watches and reads; it changes nothing in the fleet. Every socket it opened in a
//! router's namespace is closed when the recording ends, before the bench takes the
//! fleet down: a socket holds its namespace. While it records, a routing daemon started
//! in any namespace gets a socket (the fleet's namespaces are known only once it is up);
//! only the fleet's are counted.

use crate::{metric, note, Cli};
use anyhow::Context;
use nsfleet::sys;
use nsfleet_netlink::proc_events::{self, ProcEventKind, CN_IDX_PROC, NETLINK_CONNECTOR};
use nsfleet_netlink::{rtnl, Batch, NlSocket};
use nsfleet_results::{Better, Results};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The programs a router suite starts, in the order they start.
pub(crate) struct Programs {
    pub names: &'static [&'static str],
    /// The one whose start opens the router's route socket: the daemon that computes the
    /// routes, started before anything can install one.
    pub routing: &'static str,
}

pub(crate) const FRR: Programs = Programs {
    names: &["zebra", "staticd", "ospfd", "vtysh"],
    routing: "ospfd",
};

pub(crate) const BIRD: Programs = Programs {
    names: &["bird"],
    routing: "bird",
};

/// A recording under way: a thread of its own listens to the kernel.
pub(crate) struct Recorder {
    stop: Arc<AtomicBool>,
    /// Taken by [`Recorder::into_phases`]; a recording dropped unfinished (a failed run) is
    /// ended by its drop, so that its sockets let the routers' namespaces go.
    thread: Option<JoinHandle<anyhow::Result<Seen>>>,
    t0_ns: u64,
}

/// One started program, in a router's namespace.
struct Exec {
    tgid: i32,
    program: &'static str,
    netns: u64,
    started_ns: u64,
    returned_ns: Option<u64>,
}

/// One router's routes to other routers' loopbacks, as they came.
#[derive(Default)]
struct Routes {
    loopbacks: HashSet<Ipv4Addr>,
    first_ns: u64,
    /// When each count of distinct loopbacks was first reached (index = count - 1).
    reached_ns: Vec<u64>,
}

/// What the recording saw, on the monotonic clock.
#[derive(Default)]
struct Seen {
    execs: Vec<Exec>,
    routes: HashMap<u64, Routes>,
    /// Events the kernel dropped for want of room in a socket's buffer.
    lost: u64,
}

impl Recorder {
    /// Starts listening; what happens from now on is recorded, relative to now.
    pub(crate) fn start(programs: &'static Programs) -> anyhow::Result<Self> {
        let mut cn = NlSocket::open_protocol(NETLINK_CONNECTOR)
            .context("opening the kernel's process events (the proc connector)")?;
        cn.join_group(CN_IDX_PROC)?;
        let mut b = Batch::new();
        proc_events::listen(&mut b, cn.next_seq());
        cn.send_unacked(&b)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("phases".into())
            .spawn(move || listen(cn, programs, &stopped))?;
        Ok(Recorder {
            stop,
            thread: Some(thread),
            t0_ns: sys::monotonic_ns(),
        })
    }

    /// Ends the recording (its sockets closed), keeps what happened in the fleet's
    /// namespaces (`fleet`, their inodes), and asks the routers' ospfd for the protocol's
    /// side: `routers`, FRR's, by node name in fleet "bench" (none for BIRD).
    pub(crate) fn into_phases(
        mut self,
        cli: &Cli,
        routers: &[String],
        fleet: &HashSet<u64>,
        count: u64,
    ) -> Phases {
        let mut seen = match self.end() {
            Some(Ok(seen)) => seen,
            Some(Err(e)) => {
                note(&format!("phases: the recording failed: {e:#}"));
                Seen::default()
            }
            None => Seen::default(),
        };
        seen.execs.retain(|x| fleet.contains(&x.netns));
        seen.routes.retain(|ns, _| fleet.contains(ns));
        let ospf = routers.iter().filter_map(|r| ospf_of(cli, r)).collect();
        Phases::new(seen, ospf, self.t0_ns, count)
    }

    /// Stops the thread and waits for it (its sockets closed); `None` if it panicked.
    fn end(&mut self) -> Option<anyhow::Result<Seen>> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take()?.join().ok()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.end();
    }
}

/// The recording thread: process events and route notifications, until told to stop;
/// then the connector is told this listener is done, however the recording ended.
fn listen(
    mut cn: NlSocket,
    programs: &'static Programs,
    stop: &AtomicBool,
) -> anyhow::Result<Seen> {
    let seen = record_until_stopped(&mut cn, programs, stop);
    let mut b = Batch::new();
    proc_events::ignore(&mut b, cn.next_seq());
    let counted_out = cn.send_unacked(&b);
    let seen = seen?;
    counted_out.context("telling the proc connector this listener is done")?;
    Ok(seen)
}

fn record_until_stopped(
    cn: &mut NlSocket,
    programs: &'static Programs,
    stop: &AtomicBool,
) -> anyhow::Result<Seen> {
    let host = sys::current_netns()?;
    let host_ino = sys::inode_of(host.as_fd())?;
    let mut seen = Seen::default();
    let mut watched: Vec<(u64, NlSocket)> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let ready = {
            let fds: Vec<BorrowedFd<'_>> = std::iter::once(cn.as_fd())
                .chain(watched.iter().map(|(_, s)| s.as_fd()))
                .collect();
            sys::poll_readable(&fds, Some(Duration::from_millis(100)))?
        };
        if ready[0] {
            let mut events = Vec::new();
            if receive(cn, |m| events.extend(proc_events::parse_proc_event(m))) {
                seen.lost += 1;
            }
            for e in events {
                let routing = seen.record(e, programs, host_ino);
                if let Some(ns) = routing.filter(|ns| !watched.iter().any(|(w, _)| w == ns)) {
                    // The process may be gone already; its routes then go unrecorded.
                    if let Some(s) = route_socket_in(e.tgid, host.as_fd())? {
                        watched.push((ns, s));
                    }
                }
            }
        }
        for ((ns, s), _) in watched.iter_mut().zip(&ready[1..]).filter(|(_, r)| **r) {
            let now = sys::monotonic_ns();
            let routes = seen.routes.entry(*ns).or_default();
            if receive(s, |m| routes.note(m, now)) {
                seen.lost += 1;
            }
        }
    }
    Ok(seen)
}

/// One datagram from a socket known to be readable, each message to `f`; whether the
/// kernel said it had dropped some (ENOBUFS), which is counted, not fatal.
fn receive(s: &mut NlSocket, f: impl FnMut(&nsfleet_netlink::Message<'_>)) -> bool {
    matches!(s.recv_each(None, f), Err(e) if e.raw_os_error() == Some(libc::ENOBUFS))
}

/// A socket subscribed to IPv4 route changes in process `pid`'s namespace, opened from
/// this thread, which goes there and comes back to `host`; `None` when the process (or
/// the socket) could not be had. Failing to come back is the error: the thread would
/// hold a router's namespace.
fn route_socket_in(pid: i32, host: BorrowedFd<'_>) -> anyhow::Result<Option<NlSocket>> {
    let Ok(ns) = std::fs::File::open(format!("/proc/{pid}/ns/net")) else {
        return Ok(None);
    };
    if sys::setns_net(ns.as_fd()).is_err() {
        return Ok(None);
    }
    let opened = NlSocket::open().and_then(|mut s| {
        s.join_group(rtnl::RTNLGRP_IPV4_ROUTE)?;
        Ok(s)
    });
    sys::setns_net(host).context("returning to the host's namespace")?;
    Ok(opened.ok())
}

impl Seen {
    /// Records an exec or exit of a router's program; returns the router's namespace when
    /// it is its routing daemon that was started.
    fn record(
        &mut self,
        e: proc_events::ProcEvent,
        programs: &'static Programs,
        host_ino: u64,
    ) -> Option<u64> {
        match e.kind {
            ProcEventKind::Exit { .. } => {
                let started = self.execs.iter_mut().rev().find(|x| x.tgid == e.tgid);
                if let Some(x) = started.filter(|x| x.returned_ns.is_none()) {
                    x.returned_ns = Some(e.monotonic_ns);
                }
                None
            }
            ProcEventKind::Exec => {
                let comm = std::fs::read_to_string(format!("/proc/{}/comm", e.tgid)).ok()?;
                let program = *programs.names.iter().find(|p| **p == comm.trim())?;
                let netns = sys::netns_of_pid(e.tgid.into()).filter(|n| *n != host_ino)?;
                let exec = Exec {
                    tgid: e.tgid,
                    program,
                    netns,
                    started_ns: e.monotonic_ns,
                    returned_ns: None,
                };
                // Read late, a shell's exec (`sh -c "... && vtysh -b"` execs vtysh in its
                // place) shows the program it became: the later exec is that program's.
                let unended = (self.execs.iter_mut().rev())
                    .find(|x| x.tgid == e.tgid && x.returned_ns.is_none());
                match unended {
                    Some(x) => *x = exec,
                    None => self.execs.push(exec),
                }
                (program == programs.routing).then_some(netns)
            }
        }
    }
}

impl Routes {
    /// A route notification: a new /32 of 10.255/16 that does not leave by `lo` (index 1
    /// in every namespace) is a route to another router's loopback.
    fn note(&mut self, m: &nsfleet_netlink::Message<'_>, now: u64) {
        let Some(r) = rtnl::parse_route(m) else {
            return;
        };
        let IpAddr::V4(dst) = r.dst else { return };
        if r.prefix != 32 || dst.octets()[..2] != [10, 255] || r.oif == Some(1) {
            return;
        }
        if self.loopbacks.is_empty() {
            self.first_ns = now;
        }
        if self.loopbacks.insert(dst) {
            self.reached_ns.push(now);
        }
    }
}

/// What ospfd says of one router once converged, with the moment it said it: taken as
/// `nsfleet exec` returns, so that the times derived from it ("so many ms ago") are late
/// by at most the exec's own length (tens of ms).
struct Ospf {
    asked_ns: u64,
    /// How long ago each neighbour went Full, in ms.
    full_ago_ms: Vec<f64>,
    spf_runs: f64,
    spf_last_ago_ms: f64,
    spf_last_took_ms: f64,
}

/// ospfd's neighbours and SPF counters of router `name`, through `nsfleet exec`.
fn ospf_of(cli: &Cli, name: &str) -> Option<Ospf> {
    let out = cli
        .command(&["exec", "bench", name, "--", "vtysh"])
        .args(["-c", "show ip ospf neighbor detail json"])
        .args(["-c", "show ip ospf json"])
        .output()
        .ok()?;
    let asked_ns = sys::monotonic_ns();
    let mut docs = serde_json::Deserializer::from_slice(&out.stdout).into_iter();
    let neighbours: serde_json::Value = docs.next()?.ok()?;
    let ospf: serde_json::Value = docs.next()?.ok()?;
    let full_ago_ms = (neighbours["neighbors"].as_object()?.values())
        .flat_map(|n| n.as_array().cloned().unwrap_or_default())
        .filter(|n| {
            n["nbrState"]
                .as_str()
                .is_some_and(|s| s.starts_with("Full"))
        })
        .filter_map(|n| n["lastPrgrsvChangeMsec"].as_f64())
        .collect();
    let area = &ospf["areas"]["0.0.0.0"];
    Some(Ospf {
        asked_ns,
        full_ago_ms,
        spf_runs: area["spfExecutedCounter"].as_f64()?,
        spf_last_ago_ms: ospf["spfLastExecutedMsecs"].as_f64()?,
        spf_last_took_ms: ospf["spfLastDurationMsecs"].as_f64()?,
    })
}

/// The recording as phases: per router, seconds since the recording began (or counts).
pub(crate) struct Phases {
    /// In the order things happen to a router.
    rows: Vec<(String, Vec<f64>)>,
    lost: u64,
}

impl Phases {
    /// The rows in the order things happen to a router: its programs, its adjacencies,
    /// its routes and SPF, then the counts.
    fn new(seen: Seen, ospf: Vec<Ospf>, t0_ns: u64, count: u64) -> Self {
        let since = |ns: u64| ns.saturating_sub(t0_ns) as f64 / 1e9;
        let mut rows = program_rows(&seen.execs, since);
        let at = |o: &Ospf, ago_ms: f64| since(o.asked_ns) - ago_ms / 1e3;
        let fulls = |pick: fn(&[f64]) -> Option<f64>| -> Vec<f64> {
            (ospf.iter())
                .filter_map(|o| Some(at(o, pick(&o.full_ago_ms)?)))
                .collect()
        };
        let asked = !ospf.is_empty();
        if asked {
            // The first adjacency is the one Full longest ago.
            rows.push(("first adjacency Full".into(), fulls(max_of)));
            rows.push(("last adjacency Full".into(), fulls(min_of)));
        }
        let routes: Vec<&Routes> = seen.routes.values().collect();
        rows.push((
            "first route to another's loopback".into(),
            (routes.iter().filter(|r| r.first_ns > 0))
                .map(|r| since(r.first_ns))
                .collect(),
        ));
        if asked {
            let last_spf = ospf.iter().map(|o| at(o, o.spf_last_ago_ms)).collect();
            rows.push(("last SPF run".into(), last_spf));
        }
        let others = count.saturating_sub(1) as usize;
        rows.push((
            "every other loopback routed".into(),
            (routes.iter())
                .filter_map(|r| r.reached_ns.get(others.checked_sub(1)?))
                .map(|ns| since(*ns))
                .collect(),
        ));
        if asked {
            rows.push(("SPF runs".into(), ospf.iter().map(|o| o.spf_runs).collect()));
            let took = ospf.iter().map(|o| o.spf_last_took_ms).collect();
            rows.push(("last SPF took (ms)".into(), took));
        }
        Phases {
            rows,
            lost: seen.lost,
        }
    }

    /// Puts the bench's own marks around the phases: when `up`/`deploy` returned, and when
    /// `nsfleet wait converged` did.
    pub(crate) fn bracket(&mut self, returned_s: f64, converged_s: f64) {
        self.rows
            .insert(0, ("up/deploy returned".into(), vec![returned_s]));
        (self.rows).push(("converged (nsfleet wait)".into(), vec![converged_s]));
    }

    /// The phases, on stderr: median and range across the routers, and how many routers
    /// each is known for.
    pub(crate) fn print(&self, count: u64) {
        note(&format!(
            "where the time went, in s since the deploy began (across the {count} routers: median [min-max], routers seen):"
        ));
        for (label, v) in self.rows.iter().filter(|(_, v)| !v.is_empty()) {
            // The results' own median and range, as the metrics have them.
            let m = metric("", Better::Neither, v.clone());
            note(&format!(
                "  {label:<36} {:>8.2} [{:.2}-{:.2}]  {}",
                m.median,
                m.min,
                m.max,
                v.len()
            ));
        }
        if self.lost > 0 {
            note(&format!(
                "  ({} times the kernel dropped events for want of buffer: some phases are incomplete)",
                self.lost
            ));
        }
    }

    /// The phases as metrics, `phase_<label>` (seconds, or a count), every router a sample.
    pub(crate) fn add_to(&self, samples: &mut BTreeMap<String, Vec<f64>>) {
        for (label, v) in &self.rows {
            samples.entry(label.clone()).or_default().extend(v);
        }
    }
}

/// Metrics from [`Phases::add_to`]'s samples, each named after its phase.
pub(crate) fn metrics(res: &mut Results, samples: &BTreeMap<String, Vec<f64>>) {
    for (label, v) in samples {
        let (name, unit) = match label.strip_suffix(" (ms)") {
            Some(l) => (l, "ms"),
            None if label == "SPF runs" => (label.as_str(), "runs"),
            None => (label.as_str(), "s"),
        };
        let slug: String = (name.chars())
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .collect();
        res.metric(
            &format!("phase_{}", slug.trim_matches('_').replace("__", "_")),
            metric(unit, Better::Neither, v.clone()),
        );
    }
}

/// Each program's "started" and "returned" rows: every router's first start of it (a
/// restart is not a phase), in the order the programs were first seen.
fn program_rows(execs: &[Exec], since: impl Fn(u64) -> f64) -> Vec<(String, Vec<f64>)> {
    let mut programs: Vec<&'static str> = Vec::new();
    for x in execs {
        if !programs.contains(&x.program) {
            programs.push(x.program);
        }
    }
    let mut rows = Vec::new();
    for p in programs {
        let mut first: BTreeMap<u64, &Exec> = BTreeMap::new();
        for x in execs.iter().filter(|x| x.program == p) {
            first.entry(x.netns).or_insert(x);
        }
        let label = if p == "vtysh" { "vtysh -b" } else { p };
        let started = first.values().map(|x| since(x.started_ns)).collect();
        rows.push((format!("{label} started"), started));
        let returned: Vec<f64> = (first.values())
            .filter_map(|x| x.returned_ns.map(&since))
            .collect();
        if !returned.is_empty() {
            rows.push((format!("{label} returned"), returned));
        }
    }
    rows
}

fn max_of(v: &[f64]) -> Option<f64> {
    v.iter().copied().reduce(f64::max)
}

fn min_of(v: &[f64]) -> Option<f64> {
    v.iter().copied().reduce(f64::min)
}

/// CPU per router at converged, on stderr: each daemon's (user, kernel) since it forked
/// off its launcher; the start commands (a daemon's launcher builds it before it forks,
/// then `vtysh -b` configures it), which the supervisor reaps; and nsfleet's own.
pub(crate) fn print_cpu(daemons: &[i64], inits: &[i64], supervisor: i64, count: u64) {
    let mut by: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for pid in daemons {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        let u = sys::usage_of(&pid.to_string()).unwrap_or_default();
        let e = by.entry(comm.trim().to_string()).or_default();
        *e = (e.0 + u.user_seconds, e.1 + u.system_seconds);
    }
    let inits: f64 = (inits.iter())
        .filter_map(|p| sys::usage_of(&p.to_string()))
        .map(|u| u.cpu_seconds())
        .sum();
    let sup = sys::usage_of(&supervisor.to_string()).unwrap_or_default();
    let per = |s: f64| 1e3 * s / count as f64;
    let mut line = String::from("CPU per router until converged:");
    for (comm, (user, kernel)) in &by {
        line.push_str(&format!(
            " {comm} {:.0} ms ({:.0}% kernel);",
            per(user + kernel),
            100.0 * kernel / (user + kernel).max(1e-9)
        ));
    }
    line.push_str(&format!(
        " start commands (daemons until they fork, vtysh -b) {:.0} ms; nsfleet {:.1} ms (supervisor {:.1}, inits {:.1})",
        per(sup.children_seconds),
        per(sup.cpu_seconds() + inits),
        per(sup.cpu_seconds()),
        per(inits)
    ));
    note(&line);
}

//! `nsfleet bench daemons`: N routers running BIRD OSPF in a grid (examples/bird/ospf.conf,
//! one template), from `nsfleet up` to full convergence (every router has a route to
//! every other router's loopback, as `nsfleet wait converged` reads it from the kernels),
//! memory per router (kernel, daemon, nsfleet's init), and `down` to full reclamation.
//! `nsfleet bench clab` is the same experiment as a user of containerlab would write it:
//! FRR routers in a grid, a `.clab.yml` file and a startup configuration per router,
//! `nsfleet deploy` to converged to `destroy`. The convergence time is split into what
//! nsfleet spends (`up`: namespaces, links, worlds, daemons started) and what the daemons
//! spend after; and set against the protocol's floor on this machine: the same routers,
//! their daemons running, every link pulled and then plugged back at once, timed from the
//! plug to converged again. Each run also brings the same routers up `--privileged`
//! (unconfined, as nsfleet ran them before): what confinement costs, in the same run.

use super::{
    emit, machine, metric, need_root, note, rss_of, versus, which, Cli, Common, Ratio, UpResult,
};
use crate::phases;
use anyhow::{bail, Context};
use nsfleet::core::mem_available;
use nsfleet::sys;
use nsfleet_netlink::{rtnl, Batch, NlSocket};
use nsfleet_results::{Better, Results};
use std::collections::HashSet;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// The routing suite, and the file format the grid is written in.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    /// BIRD, from nsfleet's own format (one template for every router).
    Bird,
    /// FRR, from a containerlab file (one startup configuration per router).
    FrrClab,
}

impl Suite {
    fn scenario(self) -> &'static str {
        match self {
            Suite::Bird => "daemons",
            Suite::FrrClab => "clab",
        }
    }

    fn daemon(self) -> &'static str {
        match self {
            Suite::Bird => "bird",
            Suite::FrrClab => "frr",
        }
    }

    /// Interfaces the floor's pull leaves alone: containerlab's management interface.
    fn kept(self) -> &'static [&'static str] {
        match self {
            Suite::Bird => &[],
            Suite::FrrClab => &["eth0"],
        }
    }

    /// The programs the phases follow.
    fn programs(self) -> &'static phases::Programs {
        match self {
            Suite::Bird => &phases::BIRD,
            Suite::FrrClab => &phases::FRR,
        }
    }

    /// The routers ospfd can be asked about, by node name (FRR's).
    fn asked(self, count: u64) -> Vec<String> {
        match self {
            Suite::Bird => Vec::new(),
            Suite::FrrClab => (0..count).map(|i| format!("r{i}")).collect(),
        }
    }

    fn check_installed(self) -> anyhow::Result<()> {
        match self {
            Suite::Bird if !which("bird") => {
                bail!("bench daemons runs BIRD, which is not installed here: apt-get install bird2")
            }
            Suite::FrrClab if !std::path::Path::new("/usr/lib/frr/ospfd").exists() => {
                bail!("bench clab runs FRR, which is not installed here: apt-get install frr")
            }
            _ => Ok(()),
        }
    }

    /// Brings the grid up; the file says how.
    fn up(self, cli: Cli, rows: u64, cols: u64, workers: usize) -> anyhow::Result<UpResult> {
        match self {
            Suite::Bird => {
                let conf = cli.file("ospf.conf", BIRD_CONF)?;
                let body = format!(
                    "[[generate]]\nkind = \"grid\"\nrows = {rows}\ncols = {cols}\npool = \"10.0.0.0/16\"\nnode = {{ kind = \"bird\", config = {conf:?}, loopback = \"10.255.0.0/16\" }}\n"
                );
                cli.up_with(&body, workers)
            }
            Suite::FrrClab => {
                let lab = frr_grid_lab(&cli, rows, cols)?;
                cli.up_file(&lab, workers)
            }
        }
    }
}

/// The rows and columns of a grid of about `want` routers, as close to square as the
/// count allows (at least 2 x 2).
pub(crate) fn square(want: u64) -> (u64, u64) {
    let rows = ((want as f64).sqrt().round() as u64).max(2);
    (rows, want.div_ceil(rows).max(2))
}

/// A grid's wiring: each router's interfaces (name, /31 address) and the file's links.
pub(crate) struct Grid {
    pub ifaces: Vec<Vec<(String, String)>>,
    pub yaml_links: String,
}

/// `rows` x `cols` routers, each linked to its right and lower neighbours: a /31 per
/// link from 10.0/16, interfaces eth1, eth2, ... in link order.
pub(crate) fn grid(rows: u64, cols: u64) -> Grid {
    let at = |r: u64, c: u64| r * cols + c;
    let mut links = Vec::new();
    for r in 0..rows {
        for c in 0..cols {
            if c + 1 < cols {
                links.push((at(r, c), at(r, c + 1)));
            }
            if r + 1 < rows {
                links.push((at(r, c), at(r + 1, c)));
            }
        }
    }
    let mut ifaces: Vec<Vec<(String, String)>> = vec![Vec::new(); (rows * cols) as usize];
    let mut yaml_links = String::new();
    for (k, (a, b)) in links.iter().enumerate() {
        let base = 2 * k as u64;
        for (end, node) in [(0, a), (1, b)] {
            let list = &mut ifaces[*node as usize];
            let name = format!("eth{}", list.len() + 1);
            let addr = format!("10.0.{}.{}/31", (base + end) / 256, (base + end) % 256);
            list.push((name, addr));
        }
        let (na, nb) = (&ifaces[*a as usize], &ifaces[*b as usize]);
        yaml_links.push_str(&format!(
            "    - endpoints: [\"r{a}:{}\", \"r{b}:{}\"]\n",
            na.last().map_or("", |i| i.0.as_str()),
            nb.last().map_or("", |i| i.0.as_str())
        ));
    }
    Grid { ifaces, yaml_links }
}

/// Router `i`'s FRR configuration: loopback 10.255.x.y/32, OSPF area 0 on everything,
/// hellos every 2 s on point-to-point links.
pub(crate) fn ospf_conf(i: usize, ifaces: &[(String, String)]) -> String {
    let lo = format!("10.255.{}.{}", i / 256, i % 256);
    let mut conf =
        format!("frr defaults traditional\nhostname r{i}\ninterface lo\n ip address {lo}/32\n");
    for (name, addr) in ifaces {
        conf.push_str(&format!("interface {name}\n ip address {addr}\n ip ospf network point-to-point\n ip ospf hello-interval 2\n ip ospf dead-interval 40\n"));
    }
    conf.push_str(&format!(
        "router ospf\n ospf router-id {lo}\n network 10.0.0.0/8 area 0\n"
    ));
    conf
}

/// A containerlab file of `rows` x `cols` FRR routers in a grid (see [`grid`]), and each
/// router's startup configuration beside it, as a containerlab user writes them.
fn frr_grid_lab(cli: &Cli, rows: u64, cols: u64) -> anyhow::Result<String> {
    let Grid { ifaces, yaml_links } = grid(rows, cols);
    let mut nodes = String::new();
    for (i, list) in ifaces.iter().enumerate() {
        cli.file(&format!("r{i}.conf"), &ospf_conf(i, list))?;
        nodes.push_str(&format!("    r{i}: {{startup-config: r{i}.conf}}\n"));
    }
    // containerlab's management /24 has 253 node addresses.
    let mgmt = if rows * cols > 250 {
        "mgmt:\n  ipv4-subnet: 172.20.0.0/16\n  ipv6-subnet: 3fff:172:20:20::/64\n"
    } else {
        ""
    };
    let text = format!(
        "name: bench\n{mgmt}topology:\n  kinds:\n    frr:\n      image: quay.io/frrouting/frr:10.5.1\n  defaults:\n    kind: frr\n  nodes:\n{nodes}  links:\n{yaml_links}"
    );
    cli.file("bench.clab.yml", &text)
}

pub struct DaemonsArgs {
    pub suite: Suite,
    pub count: u64,
    /// Give up on convergence after this long.
    pub timeout: Duration,
    pub common: Common,
}

/// The template every router of the grid runs (its router id is its loopback).
const BIRD_CONF: &str = include_str!("../../../examples/bird/ospf.conf");

#[derive(Default)]
struct Samples {
    up_s: Vec<f64>,
    converged_after_up_s: Vec<f64>,
    total_s: Vec<f64>,
    down_s: Vec<f64>,
    kernel_kb: Vec<f64>,
    bird_kb: Vec<f64>,
    init_kb: Vec<f64>,
    all_in_kb: Vec<f64>,
    floor_s: Vec<f64>,
    /// Each phase's per-router samples, every run's.
    phases: std::collections::BTreeMap<String, Vec<f64>>,
}

pub fn daemons(a: DaemonsArgs) -> anyhow::Result<()> {
    need_root(a.suite.scenario())?;
    a.suite.check_installed()?;
    let c = &a.common;
    let want = c.size(a.count, 16);
    let (rows, cols) = square(want);
    let count = rows * cols;
    let mut s = Samples::default();
    let mut privileged = Samples::default();
    for r in 0..c.repetitions() {
        note(&format!(
            "run {}/{}: a {rows} x {cols} grid of {} routers, confined and --privileged",
            r + 1,
            c.repetitions(),
            a.suite.daemon()
        ));
        // Alternated: each first in turn.
        for unconfined in [r % 2 == 1, r % 2 == 0] {
            let into = if unconfined { &mut privileged } else { &mut s };
            run(into, a.suite, rows, cols, a.timeout, c.workers, unconfined)?;
        }
    }
    let params = match a.suite {
        Suite::Bird => {
            serde_json::json!({"ospf_hello_s": 2, "ospf_dead_s": 120, "ospf_spf_tick_s": 5})
        }
        Suite::FrrClab => {
            serde_json::json!({"ospf_hello_s": 2, "ospf_dead_s": 40, "format": "containerlab"})
        }
    };
    let mut res = Results::new(
        a.suite.scenario(),
        machine(),
        serde_json::json!({"count": count, "rows": rows, "cols": cols, "runs": c.repetitions(),
            "workers": c.workers, "quick": c.quick, "daemon": a.suite.daemon(), "ospf": params}),
    );
    let daemon_pss = format!("{}_pss_per_router_kb", a.suite.daemon());
    use Better::*;
    let figures: [(&str, &str, Better, &Vec<f64>); 9] = [
        ("nsfleet_up_s", "s", Lower, &s.up_s),
        (
            "ospf_converged_after_up_s",
            "s",
            Neither,
            &s.converged_after_up_s,
        ),
        ("up_to_converged_s", "s", Lower, &s.total_s),
        ("protocol_floor_s", "s", Neither, &s.floor_s),
        ("down_to_reclaimed_s", "s", Lower, &s.down_s),
        ("kernel_per_router_kb", "KB", Lower, &s.kernel_kb),
        (&daemon_pss, "KB", Neither, &s.bird_kb),
        ("nsfleet_init_pss_per_router_kb", "KB", Lower, &s.init_kb),
        ("memory_all_in_per_router_kb", "KB", Lower, &s.all_in_kb),
    ];
    for (name, unit, better, v) in figures {
        res.metric(name, metric(unit, better, v.clone()));
    }
    let share: Vec<f64> = s.up_s.iter().zip(&s.total_s).map(|(u, t)| u / t).collect();
    res.metric("nsfleet_share_of_convergence", metric("x", Lower, share));
    let over: Vec<f64> = (s.total_s.iter().zip(&s.floor_s))
        .map(|(t, f)| t / f)
        .collect();
    res.metric("converged_over_floor", metric("x", Lower, over));
    // What confinement costs: the same routers `--privileged`.
    for (name, unit, ours, theirs, target) in [
        ("nsfleet_up_s", "s", &s.up_s, &privileged.up_s, "<= 1.1"),
        (
            "down_to_reclaimed_s",
            "s",
            &s.down_s,
            &privileged.down_s,
            "<= 1.1",
        ),
        (
            "memory_all_in_per_router_kb",
            "KB",
            &s.all_in_kb,
            &privileged.all_in_kb,
            "<= 1.05",
        ),
    ] {
        versus(
            &mut res.metrics,
            unit,
            (None, ours),
            (Some(&format!("privileged_{name}")), theirs),
            Ratio::OursPerTheirs(&format!("confined_vs_privileged_{name}"), Lower),
        )
        .target = Some(target.into());
    }
    phases::metrics(&mut res, &s.phases);
    emit(
        &res,
        c,
        &format!(
            "{count} {} OSPF routers in a {rows} x {cols} grid, up to converged to reclaimed",
            a.suite.daemon()
        ),
    )
}

fn run(
    s: &mut Samples,
    suite: Suite,
    rows: u64,
    cols: u64,
    timeout: Duration,
    workers: usize,
    privileged: bool,
) -> anyhow::Result<()> {
    let count = rows * cols;
    let cli = Cli::new()?.privileged(privileged);
    let before = mem_available();
    // Declared before the recorder, so dropped after it: a run that fails after `up` ends
    // the recording (whose sockets hold the routers' namespaces) before `up`'s drop takes
    // the fleet down. (An `up` that fails itself rolls back while the recorder may hold
    // some of its routers: those namespaces go when the recorder ends, just after.)
    let mut up: UpResult;
    let recorder = phases::Recorder::start(suite.programs())?;
    let t = Instant::now();
    up = suite.up(cli, rows, cols, workers)?;
    let up_s = t.elapsed().as_secs_f64();
    wait_converged(&up.cli, timeout)?;
    let total_s = t.elapsed().as_secs_f64();
    let all_in = (before - mem_available()) as f64 / 1e3 / count as f64;
    let status = up.cli.status()?;
    // The nodes' inits (the supervisor's children named nsfleet-node) live as long as
    // their routers: the links are pulled and plugged in each router's namespace by its
    // init.
    let sup = status["pid"].as_i64().unwrap_or(0);
    let inits: Vec<i64> = (sys::children_of(sup).into_iter())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm"))
                .is_ok_and(|c| c.trim() == "nsfleet-node")
        })
        .collect();
    if inits.len() as u64 != count {
        bail!("expected {count} routers, found {} node inits", inits.len());
    }
    // The routing daemons: BIRD, or FRR's zebra, ospfd (and staticd where a router has
    // static routes) once `vtysh -b` has exited, as the supervisor sees them now.
    let daemons: Vec<i64> = (status["nodes"].as_array().into_iter().flatten())
        .flat_map(|n| n["processes"].as_array().cloned().unwrap_or_default())
        .filter(|p| p["running"].as_bool() == Some(true))
        .filter_map(|p| p["pid"].as_i64())
        .collect();
    // CPU before ospfd is asked anything.
    phases::print_cpu(&daemons, &inits, sup, count);
    let fleet: HashSet<u64> = inits.iter().filter_map(|p| sys::netns_of_pid(*p)).collect();
    let mut phases = recorder.into_phases(&up.cli, &suite.asked(count), &fleet, count);
    phases.bracket(up_s, total_s);
    phases.print(count);
    phases.add_to(&mut s.phases);
    let pss = |pids: &[i64]| pids.iter().map(|p| pss_kb(*p)).sum::<f64>() / count as f64;
    s.bird_kb.push(pss(&daemons));
    s.init_kb.push(pss(&inits));
    s.kernel_kb.push(up.kernel_bytes / 1e3 / count as f64);
    s.all_in_kb.push(all_in);
    s.up_s.push(up_s);
    s.total_s.push(total_s);
    s.converged_after_up_s.push(total_s - up_s);
    let floor_s = floor(&inits, suite.kept(), timeout, || {
        wait_converged(&up.cli, timeout)
    })?;
    s.floor_s.push(floor_s);
    note(&format!(
        "up in {up_s:.1} s, converged {:.1} s later; the protocol's floor {floor_s:.1} s; supervisor RSS {:.0} MB",
        total_s - up_s,
        rss_of(sup) / 1e6
    ));
    let t = Instant::now();
    up.cli.down()?;
    s.down_s.push(t.elapsed().as_secs_f64());
    Ok(())
}

/// `nsfleet wait bench converged`: every router with a route to every other router's
/// loopbacks, read from the kernels by nsfleet itself.
fn wait_converged(cli: &Cli, timeout: Duration) -> anyhow::Result<()> {
    let secs = timeout.as_secs().max(1).to_string();
    cli.run(&["wait", "bench", "converged", "--json", "--timeout", &secs])
        .context("waiting for OSPF to converge")?;
    Ok(())
}

/// The protocol's own pace on this machine: the same routers, their daemons running and
/// quiet, every link pulled, then all plugged back at once; the time from the plug to
/// converged. Pulled until no router has a route to another's loopback, then 10 s more
/// for OSPF's hold timers (SPF's backoff, the 5 s between a router's own LSAs) to
/// settle, so that the plug starts them as a fresh start would. `pids`: a process in
/// each router's namespace; `kept`: interfaces left alone; `converged`: returns once the
/// routers have converged again.
pub(crate) fn floor(
    pids: &[i64],
    kept: &[&str],
    timeout: Duration,
    converged: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<f64> {
    set_links(pids, kept, false)?;
    let t = Instant::now();
    while any_routes(pids)? {
        if t.elapsed() > timeout {
            bail!(
                "routes to other routers' loopbacks stayed {timeout:?} after every link was pulled"
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(10));
    let t = Instant::now();
    set_links(pids, kept, true)?;
    converged()?;
    Ok(t.elapsed().as_secs_f64())
}

/// Every interface of each router but `lo` and `kept` up or down, from a few threads,
/// each entering routers' namespaces (by their inits' pids) in turn.
fn set_links(inits: &[i64], kept: &[&str], up: bool) -> anyhow::Result<()> {
    let chunk = inits.len().div_ceil(4).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (inits.chunks(chunk))
            .map(|pids| {
                scope.spawn(move || pids.iter().try_for_each(|p| set_links_of(*p, kept, up)))
            })
            .collect();
        workers.into_iter().try_for_each(|w| {
            w.join()
                .map_err(|_| anyhow::anyhow!("a link setter panicked"))?
        })
    })
}

/// [`set_links`] in one router, from the calling thread, which stays in its namespace
/// (the scoped threads end with their work).
fn set_links_of(pid: i64, kept: &[&str], up: bool) -> anyhow::Result<()> {
    let ns = std::fs::File::open(format!("/proc/{pid}/ns/net"))?;
    sys::setns_net(ns.as_fd())?;
    let mut sock = NlSocket::open()?;
    let mut b = Batch::new();
    rtnl::dump_links(&mut b, sock.next_seq());
    let mut links = Vec::new();
    sock.dump(&b, |m| links.extend(rtnl::parse_link(m)))?;
    let mut b = Batch::new();
    for l in links
        .iter()
        .filter(|l| l.name != "lo" && !kept.contains(&l.name.as_str()))
    {
        rtnl::set_link(&mut b, sock.next_seq(), l.index, up, None);
    }
    if !b.is_empty() {
        sock.execute_all(&b)?;
    }
    Ok(())
}

/// Whether any router still has a route to another's loopback.
fn any_routes(inits: &[i64]) -> anyhow::Result<bool> {
    Ok(inits.iter().any(|p| loopback_routes(*p).unwrap_or(0) > 0))
}

/// How many routes to other routers' loopbacks (IPv4 /32s into 10.255/16 that do not
/// leave by `lo`) the main table of `pid`'s namespace has; `None` once `pid` is gone.
/// Read from /proc/PID/net/route, which shows the process's namespace and holds nothing:
/// the same reader serves a container of another tool (`bench clab --peer`), which
/// nsfleet's own `reach` (a socket in a node of a fleet) cannot.
pub(crate) fn loopback_routes(pid: i64) -> Option<u64> {
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/route")).ok()?;
    let n = (table.lines().skip(1))
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // Destination and mask in hex, the address's bytes in memory order.
            let hex = |i: usize| f.get(i).and_then(|v| u32::from_str_radix(v, 16).ok());
            f.first() != Some(&"lo")
                && hex(1).is_some_and(|d| d.to_ne_bytes()[..2] == [10, 255])
                && hex(7) == Some(u32::MAX)
        })
        .count();
    Some(n as u64)
}

/// Proportional set size: a process's own pages plus its share of those it shares (a
/// forked init shares most of its supervisor's).
fn pss_kb(pid: i64) -> f64 {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    rollup
        .lines()
        .find(|l| l.starts_with("Pss:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0.0)
}

//! `nsfleet stats`: every interface's packets, bytes, drops and errors and every process's
//! CPU and memory, of a fleet, a node or one interface; once, or refreshed like `top`
//! with rates between two readings. The supervisor reads the counters (one link dump in
//! each node's namespace, spread over its workers); this side sorts and prints.

use super::{human_bytes, FleetRef};
use anyhow::bail;
use nsfleet::control::{FleetStats, IfaceStats, NodeStats, ProcUsage, Reply, Request};
use std::collections::HashMap;
use std::time::Duration;

/// What rows are sorted by: counters once, rates with `--watch`; largest first but
/// for `name`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortKey {
    Name,
    Rx,
    Tx,
    Drops,
    Errors,
    Cpu,
    Mem,
}

impl std::str::FromStr for SortKey {
    type Err = String;
    fn from_str(s: &str) -> Result<SortKey, String> {
        Ok(match s {
            "name" => SortKey::Name,
            "rx" => SortKey::Rx,
            "tx" => SortKey::Tx,
            "drops" => SortKey::Drops,
            "errors" => SortKey::Errors,
            "cpu" => SortKey::Cpu,
            "mem" => SortKey::Mem,
            _ => {
                return Err(format!(
                    "expected name, rx, tx, drops, errors, cpu or mem, not {s:?}"
                ))
            }
        })
    }
}

pub struct StatsArgs {
    pub fleet: FleetRef,
    /// NODE or NODE:IFACE; the whole fleet without it.
    pub target: Option<String>,
    pub watch: bool,
    pub interval: Duration,
    pub json: bool,
    pub sort: SortKey,
    /// Rows shown of each table (all without it).
    pub limit: Option<usize>,
}

pub fn stats(a: StatsArgs) -> anyhow::Result<()> {
    let (node, iface) = match a.target.as_deref().map(|t| t.split_once(':')) {
        None => (None, None),
        Some(None) => (a.target.clone(), None),
        Some(Some((n, i))) => (Some(n.to_string()), Some(i.to_string())),
    };
    let read = || -> anyhow::Result<FleetStats> {
        let mut s = ask(&a.fleet, node.clone())?;
        if let Some(i) = &iface {
            only_interface(&mut s, i)?;
        }
        Ok(s)
    };
    let mut last = read()?;
    if !a.watch {
        if a.json {
            println!("{}", serde_json::to_string(&last)?);
        } else {
            print!("{}", Table::counters(&last, a.sort).render(a.limit));
        }
        return Ok(());
    }
    loop {
        std::thread::sleep(a.interval);
        let now = read()?;
        if a.json {
            println!("{}", serde_json::to_string(&now)?);
        } else {
            let table = Table::rates(&last, &now, a.sort);
            let every = a.interval.as_secs_f64();
            let head = format!(
                "fleet {}: {} nodes, every {every}s, sorted by {} (Ctrl-C ends)\n\n",
                a.fleet.name,
                now.nodes.len(),
                format!("{:?}", a.sort).to_lowercase()
            );
            // Home and clear, as top redraws.
            print!("\x1b[H\x1b[2J{head}{}", table.render(a.limit.or(Some(20))));
        }
        use std::io::Write;
        std::io::stdout().flush()?;
        last = now;
    }
}

fn ask(fleet: &FleetRef, node: Option<String>) -> anyhow::Result<FleetStats> {
    let mut c = fleet.connect()?;
    c.set_timeout(Some(Duration::from_secs(60)));
    match c.call(&Request::Stats { node })? {
        Reply::Stats(s) => Ok(s),
        _ => bail!("unexpected reply from the supervisor"),
    }
}

/// Keeps only interface `iface` of the one node read, or says which it has.
fn only_interface(s: &mut FleetStats, iface: &str) -> anyhow::Result<()> {
    let Some(node) = s.nodes.first_mut() else {
        return Ok(());
    };
    if node.interfaces.iter().any(|i| i.name == iface) {
        node.interfaces.retain(|i| i.name == iface);
        return Ok(());
    }
    let have: Vec<&str> = node.interfaces.iter().map(|i| i.name.as_str()).collect();
    let close = nsfleet::topology::closest(iface, &have);
    let hint = match close.is_empty() {
        true => String::new(),
        false => format!("; did you mean {}?", close.join(" or ")),
    };
    bail!(
        "node {} has no interface {iface:?} (it has {}{hint})",
        node.name,
        have.join(", ")
    )
}

/// Three tables, interfaces, nodes (what each one's cgroup counts, every process of it
/// included) and processes, as rows of cells with a key to sort by.
struct Table {
    ifaces: Vec<(f64, Vec<String>)>,
    nodes: Vec<(f64, Vec<String>)>,
    procs: Vec<(f64, Vec<String>)>,
    iface_head: [&'static str; 7],
    node_head: [&'static str; 4],
    proc_head: [&'static str; 5],
    by_name: bool,
}

impl Table {
    /// Counters since each interface was made; CPU time since each process started.
    fn counters(s: &FleetStats, sort: SortKey) -> Table {
        let mut t = Table::new(
            sort,
            [
                "INTERFACE",
                "RX PKTS",
                "TX PKTS",
                "RX BYTES",
                "TX BYTES",
                "DROPS",
                "ERRORS",
            ],
            ["NODE", "PID", "CPU TIME", "MEMORY", "COMMAND"],
        );
        for (node, i) in interfaces(s) {
            let key = iface_key(
                sort,
                i.counters.rx_packets as f64,
                i.counters.tx_packets as f64,
                drops(i) as f64,
                errors(i) as f64,
            );
            let cells = vec![
                format!("{node}:{}", i.name),
                i.counters.rx_packets.to_string(),
                i.counters.tx_packets.to_string(),
                human_bytes(i.counters.rx_bytes as i64),
                human_bytes(i.counters.tx_bytes as i64),
                drops(i).to_string(),
                errors(i).to_string(),
            ];
            t.ifaces.push((key, cells));
        }
        t.node_head[1] = "CPU TIME";
        for (n, u) in usages(s) {
            let cpu = u.cpu_ns as f64 / 1e9;
            let key = proc_key(sort, cpu, u.memory_bytes.unwrap_or(0) as f64);
            t.nodes.push((key, node_cells(n, u, format!("{cpu:.2}s"))));
        }
        for (node, p) in processes(s) {
            let key = proc_key(sort, p.cpu_seconds, p.rss_bytes as f64);
            t.procs
                .push((key, proc_cells(node, p, format!("{:.2}s", p.cpu_seconds))));
        }
        t
    }

    /// Rates between two readings: packets and bits per second, drops and errors per
    /// second, CPU as a share of one core.
    fn rates(was: &FleetStats, now: &FleetStats, sort: SortKey) -> Table {
        let mut t = Table::new(
            sort,
            [
                "INTERFACE",
                "RX PPS",
                "TX PPS",
                "RX BIT/S",
                "TX BIT/S",
                "DROPS/S",
                "ERRORS/S",
            ],
            ["NODE", "PID", "CPU", "MEMORY", "COMMAND"],
        );
        let dt = (now.at - was.at).max(1e-3);
        let before: HashMap<(&str, &str), &IfaceStats> = interfaces(was)
            .map(|(n, i)| ((n, i.name.as_str()), i))
            .collect();
        for (node, i) in interfaces(now) {
            let Some(b) = before.get(&(node, i.name.as_str())) else {
                continue;
            };
            let per = |x: u64, y: u64| x.saturating_sub(y) as f64 / dt;
            let (rx, tx) = (
                per(i.counters.rx_packets, b.counters.rx_packets),
                per(i.counters.tx_packets, b.counters.tx_packets),
            );
            let (rxb, txb) = (
                per(i.counters.rx_bytes, b.counters.rx_bytes) * 8.0,
                per(i.counters.tx_bytes, b.counters.tx_bytes) * 8.0,
            );
            let (d, e) = (per(drops(i), drops(b)), per(errors(i), errors(b)));
            let cells = vec![
                format!("{node}:{}", i.name),
                rate(rx),
                rate(tx),
                bits(rxb),
                bits(txb),
                rate(d),
                rate(e),
            ];
            t.ifaces.push((iface_key(sort, rx, tx, d, e), cells));
        }
        let node_before: HashMap<&str, u64> = usages(was)
            .map(|(n, u)| (n.name.as_str(), u.cpu_ns))
            .collect();
        for (n, u) in usages(now) {
            let Some(b) = node_before.get(n.name.as_str()) else {
                continue;
            };
            let share = u.cpu_ns.saturating_sub(*b) as f64 / 1e9 / dt;
            let key = proc_key(sort, share, u.memory_bytes.unwrap_or(0) as f64);
            t.nodes
                .push((key, node_cells(n, u, format!("{:.1}%", share * 100.0))));
        }
        let cpu_before: HashMap<i64, f64> = processes(was)
            .map(|(_, p)| (p.pid, p.cpu_seconds))
            .collect();
        for (node, p) in processes(now) {
            let share = (p.cpu_seconds - cpu_before.get(&p.pid).copied().unwrap_or(p.cpu_seconds))
                .max(0.0)
                / dt;
            let key = proc_key(sort, share, p.rss_bytes as f64);
            t.procs
                .push((key, proc_cells(node, p, format!("{:.1}%", share * 100.0))));
        }
        t
    }

    fn new(sort: SortKey, iface_head: [&'static str; 7], proc_head: [&'static str; 5]) -> Table {
        Table {
            ifaces: Vec::new(),
            nodes: Vec::new(),
            procs: Vec::new(),
            iface_head,
            node_head: ["NODE", "CPU", "MEMORY", "LIMITS"],
            proc_head,
            by_name: sort == SortKey::Name,
        }
    }

    /// Both tables, sorted, `limit` rows of each at most.
    fn render(mut self, limit: Option<usize>) -> String {
        let mut out = String::new();
        for (head, rows) in [
            (&self.iface_head[..], &mut self.ifaces),
            (&self.node_head[..], &mut self.nodes),
            (&self.proc_head[..], &mut self.procs),
        ] {
            if rows.is_empty() {
                continue;
            }
            if !self.by_name {
                // Largest first; the file's order among equals.
                rows.sort_by(|a, b| b.0.total_cmp(&a.0));
            }
            let shown: Vec<&Vec<String>> = rows
                .iter()
                .map(|(_, c)| c)
                .take(limit.unwrap_or(usize::MAX))
                .collect();
            out.push_str(&crate::columns(head, &shown));
            if shown.len() < rows.len() {
                out.push_str(&format!("... and {} more\n", rows.len() - shown.len()));
            }
            out.push('\n');
        }
        out
    }
}

fn interfaces(s: &FleetStats) -> impl Iterator<Item = (&str, &IfaceStats)> {
    (s.nodes.iter())
        .flat_map(|n: &NodeStats| n.interfaces.iter().map(move |i| (n.name.as_str(), i)))
}

fn processes(s: &FleetStats) -> impl Iterator<Item = (&str, &ProcUsage)> {
    (s.nodes.iter()).flat_map(|n: &NodeStats| n.processes.iter().map(move |p| (n.name.as_str(), p)))
}

/// Each node with a cgroup, and what it counts.
fn usages(s: &FleetStats) -> impl Iterator<Item = (&NodeStats, &nsfleet::sys::cgroup::Usage)> {
    (s.nodes.iter()).filter_map(|n| Some((n, n.usage.as_ref()?)))
}

fn node_cells(n: &NodeStats, u: &nsfleet::sys::cgroup::Usage, cpu: String) -> Vec<String> {
    let mut limits = crate::status::limit_words(&n.limits);
    if u.oom_kills > 0 {
        limits.push(format!("{} OOM kills", u.oom_kills));
    }
    vec![
        n.name.clone(),
        cpu,
        // A node without a memory group of its own (a limit, or `memory = "unlimited"`)
        // is counted in its fleet's (see `world::cgroups`).
        u.memory_bytes.map_or("-".into(), |b| human_bytes(b as i64)),
        if limits.is_empty() {
            "-".into()
        } else {
            limits.join(", ")
        },
    ]
}

fn drops(i: &IfaceStats) -> u64 {
    i.counters.rx_dropped + i.counters.tx_dropped
}

fn errors(i: &IfaceStats) -> u64 {
    i.counters.rx_errors + i.counters.tx_errors
}

fn iface_key(sort: SortKey, rx: f64, tx: f64, drops: f64, errors: f64) -> f64 {
    match sort {
        SortKey::Tx => tx,
        SortKey::Drops => drops,
        SortKey::Errors => errors,
        // rx, and the process keys, which leave interfaces by their receive side.
        _ => rx,
    }
}

fn proc_key(sort: SortKey, cpu: f64, mem: f64) -> f64 {
    match sort {
        SortKey::Mem => mem,
        _ => cpu,
    }
}

fn proc_cells(node: &str, p: &ProcUsage, cpu: String) -> Vec<String> {
    vec![
        node.to_string(),
        p.pid.to_string(),
        cpu,
        human_bytes(p.rss_bytes as i64),
        p.command.clone(),
    ]
}

fn rate(x: f64) -> String {
    match x {
        x if x >= 1e6 => format!("{:.1}M", x / 1e6),
        x if x >= 1e3 => format!("{:.1}k", x / 1e3),
        x => format!("{x:.0}"),
    }
}

fn bits(x: f64) -> String {
    match x {
        x if x >= 1e9 => format!("{:.2}G", x / 1e9),
        x if x >= 1e6 => format!("{:.1}M", x / 1e6),
        x if x >= 1e3 => format!("{:.1}k", x / 1e3),
        x => format!("{x:.0}"),
    }
}

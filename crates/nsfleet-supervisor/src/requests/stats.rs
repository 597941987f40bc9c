//! `stats`: every interface's counters and every process's usage, read in the nodes.

use crate::control::{self, Reply};
use crate::Supervisor;
use nsfleet_core::Node;
use nsfleet_subsys::process::Procs;
use nsfleet_sys as sys;
use std::collections::HashMap;
use std::sync::Arc;

impl Supervisor {
    /// Counters of every interface and usage of every process, of node `only` or of all:
    /// one link dump in each node's namespace, spread over the workers; the processes from
    /// /proc. Never waits for a change: a node removed meanwhile says so.
    pub(super) fn stats(&self, only: Option<&str>) -> anyhow::Result<Reply> {
        use nsfleet_netlink::{rtnl, Batch};
        let table = self.fleet.nodes();
        let nodes: Vec<Arc<Node>> = match only {
            Some(n) => vec![self.known_node(n)?],
            None => table.iter().cloned().collect(),
        };
        let usage = |n: &Node| -> Vec<control::ProcUsage> {
            let procs = n.inspect::<Procs, _>(self.defaults.process, |p| p.describe());
            (procs.unwrap_or_default().into_iter())
                .filter(|p| p.running)
                .filter_map(|p| {
                    let u = sys::usage_of(&p.pid.to_string())?;
                    Some(control::ProcUsage {
                        pid: p.pid,
                        command: p.command,
                        cpu_seconds: u.cpu_seconds(),
                        rss_bytes: u.rss_bytes,
                    })
                })
                .collect()
        };
        // One read of each counter in the node's cgroup: exact, daemons included.
        let cgroup = |n: &Node| {
            let usage = n.inspect::<Procs, _>(self.defaults.process, |p| p.cgroup_usage());
            (usage.flatten(), n.config().limits.clone())
        };
        let processes: Vec<_> = (nodes.iter())
            .map(|n| (usage(n), self.impairments(n), cgroup(n)))
            .collect();
        let order: HashMap<String, usize> = (nodes.iter().enumerate())
            .map(|(i, n)| (n.name().to_string(), i))
            .collect();
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        // A switch's ports by the counters alone (see `rtnl::dump_stats`), named from its
        // wiring; their state is read at the other end. Any other node by a link dump, but
        // the fleet's Open vSwitch node, whose namespace holds its switches' ports (told
        // as theirs) and has none of its own.
        let names: HashMap<String, HashMap<i32, String>> = (nodes.iter())
            .filter(|n| n.config().switch || n.config().ovs_hub.is_some())
            .map(|n| (n.name().to_string(), port_names(&n.wiring())))
            .collect();
        let mut read = self.fleet.in_each(nodes, move |name, sock| {
            let mut b = Batch::new();
            let Some(ports) = names.get(name) else {
                rtnl::dump_links(&mut b, sock.next_seq());
                let mut links = Vec::new();
                sock.dump(&b, |m| links.extend(rtnl::parse_link(m)))?;
                return Ok(links
                    .iter()
                    .filter(|l| l.name != "lo")
                    .map(iface_stats)
                    .collect());
            };
            rtnl::dump_stats(&mut b, sock.next_seq());
            let mut ports_seen = Vec::new();
            sock.dump(&b, |m| {
                let Some((index, stats)) = rtnl::parse_stats(m) else {
                    return;
                };
                if let Some(name) = ports.get(&index) {
                    ports_seen.push(control::IfaceStats {
                        name: name.clone(),
                        up: true,
                        carrier: true,
                        counters: stats.into(),
                    });
                }
            })?;
            Ok(ports_seen)
        });
        read.sort_by_key(|(name, _)| order[name]);
        let nodes = (read.into_iter().zip(processes))
            .map(
                |((name, interfaces), (processes, impairments, (usage, limits)))| match interfaces {
                    Ok(interfaces) => control::NodeStats {
                        name,
                        interfaces,
                        processes,
                        usage,
                        limits,
                        impairments,
                        error: None,
                    },
                    Err(e) => control::NodeStats {
                        name,
                        error: Some(format!("{e:#}")),
                        ..Default::default()
                    },
                },
            )
            .collect();
        Ok(Reply::Stats(control::FleetStats { at, nodes }))
    }
}

/// A link's state and counters as `nsfleet stats` shows them.
fn iface_stats(l: &nsfleet_netlink::rtnl::LinkInfo) -> control::IfaceStats {
    control::IfaceStats {
        name: l.name.clone(),
        up: l.flags & nsfleet_netlink::rtnl::IFF_UP != 0,
        carrier: l.carrier.unwrap_or(false),
        counters: l.stats.into(),
    }
}

/// A switch's interfaces by index: its ports (trunks to its other shards included) and
/// its bridge.
fn port_names(w: &nsfleet_topology::NodeWiring) -> HashMap<i32, String> {
    let ports = w.ifaces.iter().map(|i| (i.index, i.name.clone()));
    let (name, index) = nsfleet_topology::BRIDGE;
    let bridge = (index, name.to_string());
    ports.chain([bridge]).collect()
}

//! `status`: the fleet, its nodes, their processes, interfaces and impairments.

use crate::control::{FleetStatus, NodeStatus};
use crate::Supervisor;
use nsfleet_core::Node;
use nsfleet_subsys::process::Procs;
use nsfleet_sys as sys;

impl Supervisor {
    pub(super) fn status(&self) -> FleetStatus {
        let nodes = self.fleet.nodes();
        let nodes: Vec<NodeStatus> = nodes
            .iter()
            .map(|n| NodeStatus {
                name: n.name().to_string(),
                netns_inode: n.inode(),
                processes: n
                    .inspect::<Procs, _>(self.defaults.process, |p| p.describe())
                    .unwrap_or_default(),
                interfaces: (describe_ifaces(n).into_iter())
                    .chain(nsfleet_subsys::ovs::controller_lines(
                        n,
                        self.defaults.ovs_controllers,
                    ))
                    .collect(),
                impairments: self.impairments(n),
                clab: n.config().clab.clone(),
                limits: n.config().limits.clone(),
                usage: n
                    .inspect::<Procs, _>(self.defaults.process, |p| p.cgroup_usage())
                    .flatten(),
            })
            .collect();
        // Read alone: in the literal below, their guards (leaves) would live to its end,
        // across the registry's lock that `subsystems` takes.
        let state = self.state.lock().to_string();
        let kernel_mem_bytes = *self.kernel_bytes.lock();
        FleetStatus {
            name: self.name.clone(),
            state,
            pid: sys::host_pid(),
            node_count: nodes.len(),
            processes_running: nodes
                .iter()
                .flat_map(|n| &n.processes)
                .filter(|p| p.running)
                .count(),
            kernel_mem_bytes,
            awaiting_reclaim: self.fleet.awaiting_reclaim(),
            workers: self.fleet.workers(),
            subsystems: self
                .fleet
                .subsystems()
                .into_iter()
                .map(String::from)
                .collect(),
            run_dir: self.run_dir.fleet_dir(&self.name).display().to_string(),
            ids: self.ids.map(|r| crate::control::FleetIds {
                first: r.first,
                count: r.count,
            }),
            nodes,
        }
    }
}

/// A node's interfaces for `status`; a switch's ports are many and say little.
fn describe_ifaces(n: &Node) -> Vec<String> {
    if n.config().switch {
        let w = n.wiring();
        let mut line = match n.config().ovs {
            Some(_) => format!(
                "Open vSwitch bridge {}, {} ports",
                nsfleet_subsys::ovs::bridge_name(n),
                w.ifaces.len()
            ),
            None => format!(
                "bridge {}, {} ports",
                nsfleet_topology::BRIDGE.0,
                w.ifaces.len()
            ),
        };
        if !w.macvlans.is_empty() {
            line += &format!(", {} macvlans", w.macvlans.len());
        }
        return vec![line];
    }
    (n.wiring().ifaces.iter())
        .map(|i| {
            let addrs: Vec<String> = i.addrs.iter().map(|a| a.to_string()).collect();
            format!("{} {}", i.name, addrs.join(" "))
                .trim_end()
                .to_string()
        })
        .collect()
}

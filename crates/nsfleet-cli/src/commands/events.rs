//! `nsfleet events`: what happens in a live fleet, as it happens.

use super::args::FleetName;
use clap::Args;
use nsfleet_client as cmd;
use std::path::PathBuf;

/// Stream what happens in a live fleet until it ends
///
/// Stream what happens in a live fleet until it ends: links up, down or without
/// carrier (the kernel's own notifications in each node, not polling), processes
/// started and exited with their status, node actions, nodes and interfaces added,
/// changed or removed by `apply`, Open vSwitch switches connecting to their
/// OpenFlow controllers, losing them, or failing to reach them (once per change), and
/// waits for the fleet to be ready (`up --wait`, `nsfleet wait`) ending, met or not.
///
///   nsfleet events lab            # 12:04:31.250 UTC  link     r1:eth0 no-carrier
///   nsfleet events lab --json     # {"event":"link","node":"r1","iface":"eth0","state":"no-carrier","at":...}
#[derive(Args)]
#[command(verbatim_doc_comment)]
pub struct EventsCommand {
    #[command(flatten)]
    fleet: FleetName,
    /// One JSON object per line: {"event": "link" | "node" | "interface" |
    /// "process_started" | "process_exited" | "out_of_memory" | "controller" | "ready" | "fleet_down",
    /// "at": seconds since the epoch, ...}; a controller's: {"node", "controller":
    /// "tcp:IP:PORT", "state": "connected" | "disconnected" | "unreachable", "reason"?};
    /// a wait's: {"condition": "started" | "healthy" | "converged", "met", "since_up_s"};
    /// an OOM kill's, as the kernel makes it: {"node", "kills", "limit_bytes", "command":
    /// the one that ended with it, or null while the node's commands run on}.
    #[arg(long)]
    json: bool,
}

impl EventsCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        let EventsCommand { fleet, json } = self;
        cmd::events::events(cmd::events::EventsArgs {
            fleet: fleet.under(run_dir),
            json,
        })
    }
}

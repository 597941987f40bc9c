//! `nsfleet status`: every fleet, or one with its nodes.

use super::args::KubeArgs;
use clap::Args;
use nsfleet_client as cmd;
use std::path::PathBuf;

/// Show fleets, their nodes and processes, and kernel memory
///
/// Fleets, their nodes and processes, kernel memory, namespaces awaiting reclamation.
#[derive(Args)]
pub struct StatusCommand {
    /// One fleet, with its nodes; without it, a line per fleet.
    name: Option<String>,
    /// {"fleets": [{"name", "pid", "state", "nodes": [{"name", ...}], ...}]}
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    kube: KubeArgs,
}

impl StatusCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        let StatusCommand { name, json, kube } = self;
        kube.backend().status(cmd::status::StatusArgs {
            name,
            json,
            run_dir,
        })
    }
}

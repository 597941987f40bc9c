//! `nsfleet apply`: change a running fleet into a topology file, only where they differ.

use super::args::{parse_format, ImageArgs, KubeArgs};
use clap::Args;
use nsfleet_client as cmd;
use std::path::PathBuf;

/// Change a running fleet into a topology file, only where they differ
///
/// Change a running fleet into FILE, only where they differ: nodes and switches
/// added or removed, interfaces, addresses, routes, impairments, sysctls and processes
/// of the others changed. Nodes the change does not touch keep their processes and
/// counters; a node whose processes' commands, files or environment change restarts
/// them; a node's memory, cpu, cpuset and pids limits change in place, its processes
/// running on (as `docker update`). All or nothing: a failure half-way puts the fleet
/// back as it was. The fleet is the file's; nodes are removed last, once nothing can
/// fail.
///
///   nsfleet apply lab.toml --dry-run   # the plan: + added, - removed, ~ changed
///   nsfleet apply lab.toml             # make it so
///   nsfleet apply lab.toml --kube      # on Kubernetes: each machine changes its part;
///                                      # nodes stay on their machines, new ones join
///                                      # their neighbours
///
/// Refused, with nothing changed: a file for another fleet, an invalid file, a switch
/// that would need more bridges, and removing a node that `nsfleet exec` runs in or
/// the traffic generator sends from. `status` waits for an apply in progress.
#[derive(Args)]
#[command(verbatim_doc_comment)]
pub struct ApplyCommand {
    /// The topology file (TOML or containerlab's YAML), as for `up` (at most 16 MiB).
    file: PathBuf,
    /// The file's language when its name does not say: toml or clab.
    #[arg(long, value_parser = parse_format)]
    format: Option<nsfleet::topology::Format>,
    /// The running fleet, when it is not the file's name.
    #[arg(long)]
    name: Option<String>,
    /// Show the plan; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// {"fleet", "dry_run", "applied", "changes": [{"op": "add" | "remove" | "change",
    /// "object", "detail"}], "report": {"added", "changed", "removed", "steps"} | null}.
    /// Errors go to stderr as {"error": {"message", "file", "line", "column"}} objects,
    /// one per line (a kernel refusal of the change is placed in FILE too).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    images: ImageArgs,
    #[command(flatten)]
    kube: KubeArgs,
}

impl ApplyCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        let ApplyCommand {
            file,
            format,
            name,
            dry_run,
            json,
            images,
            kube,
        } = self;
        kube.backend().apply(cmd::apply::ApplyArgs {
            file,
            format,
            name,
            dry_run,
            json,
            run_dir,
            software: images.software(),
            images: images.store(),
        })
    }
}

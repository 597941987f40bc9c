//! `nsfleet down`: end a fleet and, unless told not to, wait for the kernel to reclaim it.

use super::args::KubeArgs;
use clap::Args;
use nsfleet_client as cmd;
use std::path::PathBuf;

/// Tear a fleet down and wait for the kernel to reclaim it
///
/// Tear a fleet down; by default returns when the kernel has reclaimed every namespace.
#[derive(Args)]
pub struct DownCommand {
    /// The fleet: its [fleet] name, or the --name it was brought up with.
    name: String,
    /// Return as soon as every namespace is dropped, before the kernel reclaims them.
    #[arg(long)]
    no_wait: bool,
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    kube: KubeArgs,
}

impl DownCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        let DownCommand {
            name,
            no_wait,
            json,
            kube,
        } = self;
        kube.backend().down(cmd::down::DownArgs {
            fleet: cmd::FleetRef { name, run_dir },
            no_wait,
            json,
        })
    }
}

//! `nsfleet destroy`: containerlab's `destroy`, a `down` of the lab's fleet.

use super::args::LabArgs;
use clap::Args;
use nsfleet_clab as clab;
use std::path::PathBuf;

/// Take a containerlab lab down (containerlab's verb for `down`)
///
/// Take a containerlab lab down (containerlab's verb for `down`): returns once the
/// kernel has reclaimed every namespace. Nothing is left on the host.
#[derive(Args)]
pub struct DestroyCommand {
    #[command(flatten)]
    lab: LabArgs,
    /// Accepted for containerlab's sake: nsfleet writes no lab directory to clean.
    #[arg(short = 'c', long)]
    cleanup: bool,
    #[arg(long)]
    json: bool,
}

impl DestroyCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        let DestroyCommand {
            lab,
            cleanup: _,
            json,
        } = self;
        clab::lab::destroy(clab::lab::DestroyArgs {
            lab: lab.into(),
            json,
            run_dir,
        })
    }
}

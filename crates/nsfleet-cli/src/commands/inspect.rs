//! `nsfleet inspect`: containerlab's `inspect`, a lab's nodes in its table or JSON.

use super::args::LabArgs;
use clap::Args;
use nsfleet_clab as clab;
use std::path::PathBuf;

/// List a lab's nodes as containerlab shows them
///
/// A lab's nodes as containerlab shows them: Name (clab-LAB-NODE), Kind/Image,
/// State, IPv4/6 Address (eth0's, on the management network).
#[derive(Args)]
pub struct InspectCommand {
    #[command(flatten)]
    lab: LabArgs,
    /// Each cell on one line.
    #[arg(short = 'w', long)]
    wide: bool,
    /// containerlab's JSON: {"LAB": [{"lab_name", "name", "kind", "image", "state",
    /// "ipv4_address", "ipv6_address"}]}.
    #[arg(long)]
    json: bool,
}

impl InspectCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        let InspectCommand { lab, wide, json } = self;
        clab::lab::inspect(clab::lab::InspectArgs {
            lab: lab.into(),
            json,
            wide,
            run_dir,
        })
    }
}

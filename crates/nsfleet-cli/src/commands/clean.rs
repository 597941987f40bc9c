//! `nsfleet clean`: remove what crashed fleets left behind; with --all, what killed
//! `nsfleet vm` runs left too.

use clap::Args;
use nsfleet_client as cmd;
use std::path::PathBuf;

/// Remove what crashed fleets left behind
///
/// Remove what crashed fleets left behind (run folders, stale sockets). Never touches
/// a running fleet or anything without an nsfleet record.
#[derive(Args)]
pub struct CleanCommand {
    /// The dead fleet to clean up after.
    name: Option<String>,
    /// Every dead fleet under the run directory, and what killed `nsfleet vm` runs left
    /// (their scratch folders, a kernel half unpacked in the cache) and killed `nsfleet
    /// bench` runs (their run folders).
    #[arg(long)]
    all: bool,
}

impl CleanCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        let CleanCommand { name, all } = self;
        let fleets = cmd::clean::clean(cmd::clean::CleanArgs {
            name,
            all,
            run_dir,
            sweeps: vec![
                nsfleet_netlab::netlab::STALE,
                nsfleet_serve::server::LEFT_BEHIND,
            ],
        });
        // The kernel lab's own leftovers: folders of `nsfleet vm` runs that were killed.
        if all {
            for r in nsfleet_vm::scratch::sweep_all() {
                println!(
                    "removed {} (an `nsfleet vm` run, its process gone)",
                    r.display()
                );
            }
            for r in nsfleet_bench::sweep() {
                println!(
                    "removed {} (an `nsfleet bench` run, its process gone)",
                    r.display()
                );
            }
        }
        fleets
    }
}

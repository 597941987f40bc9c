//! `nsfleet wait`: until a live fleet is ready, as `up --wait` waits.

use super::args::{duration, FleetName};
use clap::Args;
use nsfleet_client as cmd;
use std::path::PathBuf;
use std::time::Duration;

/// Wait until a live fleet is ready: started, healthy or converged
///
/// Wait until a live fleet is ready, its progress on stderr, as `up --wait` does:
/// `started` (every node's commands have run: each exited with status 0, or runs on as
/// a daemon in the foreground), `healthy` (started, and each node's health check,
/// containerlab's `healthcheck` or the same in TOML, has passed: the first run once the node has started,
/// then every interval) or `converged` (started, and every router has a route in its
/// kernel to every other router's loopback addresses, those on its `lo`). Exits 0 once
/// it holds; 1 with what is missing when a node's command failed (its log's last lines,
/// a refused configuration line as its file's line), a health check failed its retries
/// (its output), or at --timeout; the fleet stays as it is. `nsfleet events` says when
/// a wait ended.
///
///   nsfleet deploy -t ospf.clab.yml && nsfleet wait ospf converged --timeout 60   # the lab's name
#[derive(Args)]
#[command(verbatim_doc_comment)]
pub struct WaitCommand {
    #[command(flatten)]
    fleet: FleetName,
    /// started, healthy or converged.
    #[arg(value_parser = cmd::ready::parse_condition)]
    until: nsfleet::ready::Condition,
    /// Seconds to wait at most.
    #[arg(long, value_parser = duration, default_value = "300")]
    timeout: Duration,
    /// No progress; the result as one JSON object: {"ready": {"fleet", "condition",
    /// "since_up_s", "of"}} ("of": the nodes it was checked on, routers for converged).
    #[arg(long)]
    json: bool,
}

impl WaitCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        let fleet = self.fleet.under(run_dir);
        let w = cmd::ready::Wait {
            until: self.until,
            bound: self.timeout,
        };
        match cmd::ready::wait(&fleet, w, self.json)? {
            Ok(ready) => {
                cmd::ready::say_ready(&fleet.name, &ready, self.json);
                Ok(())
            }
            Err(not) => Err(anyhow::anyhow!("{not}")),
        }
    }
}

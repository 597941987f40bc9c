//! `nsfleet stats`: a live fleet's interface and process counters, once or refreshed.

use super::args::{duration, within_usize, FleetName};
use clap::Args;
use nsfleet_client as cmd;
use std::path::PathBuf;

/// Show a live fleet's interface and process counters, once or like top
///
/// Per-interface packets, bytes, drops and errors, and per-process CPU and memory, of
/// a live fleet: once, or refreshed like top with rates (--watch).
///
/// Each refresh is one netlink dump in each node's namespace, spread over the
/// supervisor's workers (no process per node).
///
/// The nodes' table reads each node's cgroup: CPU time always, memory where the node
/// has a memory limit (`-` elsewhere, null in --json: its fleet's group counts it, as
/// a memory cgroup per node costs the kernel more the larger the fleet).
///
///   nsfleet stats lab                     # every interface and process, counters
///   nsfleet stats lab r1                  # one node
///   nsfleet stats lab r1:eth0 --json      # one interface, for machines
///   nsfleet stats lab --watch --sort rx   # the busiest interfaces, every second
#[derive(Args)]
#[command(verbatim_doc_comment)]
pub struct StatsCommand {
    #[command(flatten)]
    fleet: FleetName,
    /// NODE or NODE:IFACE; the whole fleet without it.
    target: Option<String>,
    /// Refresh until Ctrl-C, showing rates between two readings.
    #[arg(long)]
    watch: bool,
    /// Seconds between refreshes with --watch.
    #[arg(long, default_value = "1", value_parser = duration)]
    interval: std::time::Duration,
    /// Sort rows by name, rx, tx, drops, errors (interfaces) or cpu, mem (processes);
    /// largest first.
    #[arg(long, default_value = "name")]
    sort: cmd::stats::SortKey,
    /// Show at most this many rows of each table (20 with --watch).
    #[arg(long, value_parser = within_usize::<1, 1_000_000>)]
    limit: Option<usize>,
    /// {"at": seconds since the epoch, "nodes": [{"name", "interfaces": [{"name",
    /// "rx_packets", ...}], "processes": [{"pid", "command", "cpu_seconds",
    /// "rss_bytes"}]}]}; one per line with --watch.
    #[arg(long)]
    json: bool,
}

impl StatsCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        let StatsCommand {
            fleet,
            target,
            watch,
            interval,
            sort,
            limit,
            json,
        } = self;
        cmd::stats::stats(cmd::stats::StatsArgs {
            fleet: fleet.under(run_dir),
            target,
            watch,
            interval,
            json,
            sort,
            limit,
        })
    }
}

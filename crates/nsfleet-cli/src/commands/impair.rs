//! `nsfleet impair`: set or clear one interface's impairment; the flags given become
//! the settings, those not given are left out.

use super::args::{given, FleetName};
use clap::Args;
use nsfleet_client as cmd;
use std::path::PathBuf;

/// Impair one interface of a live fleet (tc netem)
///
/// Impair one interface of a live fleet (tc netem; on kernels without netem, only
/// --rate, with tbf). Replaces the interface's current impairment.
#[derive(Args)]
pub struct ImpairCommand {
    #[command(flatten)]
    fleet: FleetName,
    /// The interface, as NODE:IFACE (`nsfleet status NAME` lists them).
    target: String,
    /// Added delay of each packet, e.g. 20ms.
    #[arg(long)]
    delay: Option<String>,
    /// Random variation of the delay, e.g. 5ms (needs --delay).
    #[arg(long)]
    jitter: Option<String>,
    /// Packets dropped, e.g. 1%.
    #[arg(long)]
    loss: Option<String>,
    /// Packets sent twice, e.g. 0.5%.
    #[arg(long)]
    duplicate: Option<String>,
    /// Packets with a flipped bit, e.g. 0.1%.
    #[arg(long)]
    corrupt: Option<String>,
    /// Packets sent at once, ahead of those --delay holds back, e.g. 25% (needs
    /// --delay).
    #[arg(long)]
    reorder: Option<String>,
    /// Bandwidth limit, e.g. 100mbit, 1gbit, 10mbps (bytes).
    #[arg(long)]
    rate: Option<String>,
    /// Remove the interface's impairment.
    #[arg(long)]
    clear: bool,
    #[arg(long)]
    json: bool,
}

impl ImpairCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        let ImpairCommand {
            fleet,
            target,
            delay,
            jitter,
            loss,
            duplicate,
            corrupt,
            reorder,
            rate,
            clear,
            json,
        } = self;
        let set = given([
            ("delay", delay),
            ("jitter", jitter),
            ("loss", loss),
            ("duplicate", duplicate),
            ("corrupt", corrupt),
            ("reorder", reorder),
            ("rate", rate),
        ]);
        cmd::impair::impair(cmd::impair::ImpairArgs {
            fleet: fleet.under(run_dir),
            target,
            set,
            clear,
            json,
        })
    }
}

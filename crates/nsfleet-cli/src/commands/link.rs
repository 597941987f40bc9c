//! `nsfleet link`: pull a link's cable, plug it back, or look at the link.

use super::args::{FleetName, KubeArgs};
use clap::Args;
use nsfleet_client as cmd;
use std::path::PathBuf;

/// Pull a link's cable, plug it back, or look at the link
///
/// Pull a link's cable and plug it back, on a live fleet; or look at the link.
///
/// `down` takes the end NODE:IFACE down: its peer loses carrier (NO-CARRIER), as a
/// port whose cable is pulled; addresses stay. `up` plugs it back. Without either,
/// shows both ends (up, carrier, counters) and the impairment.
///
///   nsfleet link lab r1:eth1 down
///   nsfleet link lab r1:eth1            # r1:eth1 DOWN ...; peer r2:eth1 UP, NO-CARRIER
///   nsfleet link lab r1:eth1 up
///   nsfleet link lab r1:eth1 down --kube  # on r1's machine; across machines (VXLAN),
///                                         # the far end keeps its carrier
#[derive(Args)]
#[command(verbatim_doc_comment)]
pub struct LinkCommand {
    #[command(flatten)]
    fleet: FleetName,
    /// One end of the link, as NODE:IFACE (`nsfleet status NAME` lists them).
    target: String,
    /// down (pull the cable) or up (plug it back); nothing to look.
    #[arg(value_parser = ["down", "up"])]
    action: Option<String>,
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    kube: KubeArgs,
}

impl LinkCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        let LinkCommand {
            fleet,
            target,
            action,
            json,
            kube,
        } = self;
        kube.backend().link(cmd::link::LinkArgs {
            fleet: fleet.under(run_dir),
            target,
            action,
            json,
        })
    }
}

//! `nsfleet node`: stop, start, restart, pause or resume one node's processes.

use super::args::FleetName;
use clap::Args;
use nsfleet_client as cmd;
use std::path::PathBuf;

/// Stop, start, restart, pause or resume one node's processes
///
/// Stop, start, restart, pause or resume one node's processes on a live fleet; its
/// namespace, links and addresses stay.
///
/// stop ends them (SIGTERM, SIGKILL after 3 s) and the node's world with them; start
/// brings them up as `up` did (a new world, the node's commands); restart is both.
/// pause stops every process of the node (SIGSTOP, through its init), resume lets them
/// go on; `status` shows them paused.
///
///   nsfleet node lab r1 restart
///   nsfleet node lab r1 pause
#[derive(Args)]
#[command(verbatim_doc_comment)]
pub struct NodeCommand {
    #[command(flatten)]
    fleet: FleetName,
    /// The node (`nsfleet status NAME` lists them).
    node: String,
    #[arg(value_parser = node_actions())]
    action: nsfleet::control::NodeAction,
    #[arg(long)]
    json: bool,
}

impl NodeCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        let NodeCommand {
            fleet,
            node,
            action,
            json,
        } = self;
        cmd::node::node(cmd::node::NodeArgs {
            fleet: fleet.under(run_dir),
            node,
            action,
            json,
        })
    }
}

/// `nsfleet node`'s actions: listed in --help, checked by clap.
fn node_actions() -> impl clap::builder::TypedValueParser<Value = nsfleet::control::NodeAction> {
    use clap::builder::{PossibleValuesParser, TypedValueParser};
    let names = PossibleValuesParser::new(nsfleet::control::NodeAction::names());
    names.map(|s| s.parse().expect("clap checked the name"))
}

//! `nsfleet exec`: run a command inside a node.

use clap::Args;
use nsfleet_client as cmd;
use std::path::PathBuf;

/// Run a command inside a node, like `ip netns exec`: stdio and exit status pass through.
///
/// In a node that runs software, the command runs in the node's whole world (its PID,
/// mount and UTS namespaces too), so `vtysh`, `birdc`, `ps` and `hostname` see the
/// node, with NSFLEET_FLEET, NSFLEET_NODE and NSFLEET_INDEX set.
#[derive(Args)]
pub struct ExecCommand {
    /// The fleet: its [fleet] name, or the --name it was brought up with.
    name: String,
    /// The node to run in, by name (`nsfleet status NAME` lists them), or by its
    /// containerlab container name (clab-LAB-NODE).
    node: String,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

impl ExecCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        let ExecCommand {
            name,
            node,
            command,
        } = self;
        cmd::exec::exec(cmd::exec::ExecArgs {
            name,
            node,
            command,
            run_dir,
        })
        .map(|_| ())
    }
}

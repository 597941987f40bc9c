//! `nsfleet exec`: run a command inside a node, or (containerlab's form) commands on
//! every node of a lab that matches labels.

use super::args::KubeArgs;
use clap::Args;
use nsfleet_clab as clab;
use nsfleet_client as cmd;
use std::path::PathBuf;

/// Run a command inside a node, like `ip netns exec`
///
/// Run a command inside a node, like `ip netns exec`: stdio and exit status pass through.
///
/// In a node that runs software, the command runs in the node's whole world (its PID,
/// mount and UTS namespaces too), so `vtysh`, `birdc`, `ps` and `hostname` see the
/// node, with the node's environment only (as `docker exec` has the container's).
///
/// containerlab's form, `nsfleet exec -t FILE --cmd 'ip -br addr' [--label KEY=VALUE]`,
/// runs each --cmd (split into words as containerlab splits it; no shell: use
/// `--cmd "sh -c '...'"`) on every node of the lab whose labels match every --label
/// (containerlab's own, such as clab-node-name, clab-node-kind, clab-node-group, and the
/// file's `labels`), one node after another. Without -t, --label looks at every
/// deployed lab. A failing command is reported and the rest still run, as in
/// containerlab; a filter that matches no node is an error.
#[derive(Args)]
#[command(
    override_usage = "nsfleet exec NAME NODE -- COMMAND [ARGS]...\n       nsfleet exec [-t FILE] --cmd CMD [--cmd CMD]... [--label KEY[=VALUE]]... [-f plain|json]"
)]
pub struct ExecCommand {
    /// The fleet: its [fleet] name, or the --name it was brought up with.
    #[arg(required_unless_present = "cmds", conflicts_with_all = ["cmds", "topo", "labels"])]
    name: Option<String>,
    /// The node to run in, by name (`nsfleet status NAME` lists them), or by its
    /// containerlab container name (clab-LAB-NODE).
    #[arg(requires = "name")]
    node: Option<String>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required_unless_present = "cmds")]
    command: Vec<String>,
    /// containerlab's form: the lab's topology file (or a folder with one).
    #[arg(short = 't', long = "topo")]
    topo: Option<PathBuf>,
    /// containerlab's form: a command to run on every matching node (repeat for more).
    #[arg(long = "cmd", id = "cmds", value_name = "CMD")]
    cmds: Vec<String>,
    /// containerlab's form: only nodes with this label (KEY=VALUE), or that have it (KEY).
    #[arg(
        long = "label",
        id = "labels",
        value_name = "KEY[=VALUE]",
        requires = "cmds"
    )]
    labels: Vec<String>,
    /// containerlab's form: `plain` (each node's output in turn) or `json`
    /// ({CONTAINER: [{cmd, return-code, stdout, stderr}]}, containerlab's).
    #[arg(short = 'f', long, default_value = "plain", value_parser = ["plain", "table", "json"], requires = "cmds")]
    format: String,
    #[command(flatten)]
    kube: KubeArgs,
}

impl ExecCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        let ExecCommand {
            name,
            node,
            command,
            topo,
            cmds,
            labels,
            format,
            kube,
        } = self;
        if !cmds.is_empty() && kube.kube {
            anyhow::bail!("containerlab's form (--cmd) with --kube: not offered; give the node: nsfleet exec NAME NODE --kube -- COMMAND");
        }
        if !cmds.is_empty() {
            return clab::exec::exec_labs(clab::exec::ExecLabsArgs {
                topo,
                labels,
                cmds,
                json: format == "json",
                run_dir,
            });
        }
        let (Some(name), Some(node)) = (name, node) else {
            anyhow::bail!("give the fleet and the node: nsfleet exec NAME NODE -- COMMAND");
        };
        let code = kube.backend().exec(cmd::exec::ExecArgs {
            fleet: cmd::FleetRef { name, run_dir },
            node,
            command,
        })?;
        std::process::exit(code)
    }
}

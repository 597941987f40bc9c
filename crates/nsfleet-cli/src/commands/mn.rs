//! `nsfleet mn`: run a Mininet script on nsfleet's Python package.

use clap::Args;
use nsfleet_client as cmd;

/// Run a script written for Mininet unchanged on nsfleet: its `mininet.*` imports are
/// answered by nsfleet's Python package (`nsfleet.mininet`: Mininet, Topo, TreeTopo,
/// Host, TCLink, CLI...). Needs the package (`pip install .` in nsfleet's repository);
/// the Python beside this executable is used, else python3 on PATH. A feature nsfleet
/// lacks (RemoteController, xterms, CPULimitedHost) is refused at the script's line
/// before the network is built.
///
///   sudo nsfleet mn /usr/share/doc/mininet/examples/linuxrouter.py
#[derive(Args)]
#[command(verbatim_doc_comment)]
pub struct MnCommand {
    /// The script and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "SCRIPT.py [ARGS]"
    )]
    script: Vec<String>,
}

impl MnCommand {
    pub fn run(self) -> anyhow::Result<()> {
        let MnCommand { script } = self;
        cmd::mn::mn(&script)
    }
}

//! `nsfleet mn`: run a Mininet script on nsfleet's Python package.

use clap::Args;

/// Run a Mininet script, or Mininet's `mn`, on nsfleet
///
/// Run a script written for Mininet unchanged on nsfleet: its `mininet.*` imports are
/// answered by nsfleet's Python package (`nsfleet.mininet`: Mininet, Topo, TreeTopo,
/// Host, OVSSwitch, RemoteController, TCLink, CLI...). Needs the package (`pip install .`
/// in nsfleet's repository); the Python beside this executable is used, else python3 on
/// PATH. A feature nsfleet lacks (xterms, CPULimitedHost) is refused at the script's
/// line before the network is built.
///
/// Without a script, the options are Mininet's own `mn` command's (its --topo, --switch,
/// --controller, --link, --test...): Debian's mininet package's `mn` is run the same way,
/// so that its network is nsfleet's. `nsfleet mn /usr/bin/mn --help` lists its options.
///
///   sudo nsfleet mn /usr/share/doc/mininet/examples/linuxrouter.py
///   sudo nsfleet mn --topo tree,depth=2,fanout=8 --test pingall
///   sudo nsfleet mn --switch ovs,protocols=OpenFlow13 --controller remote,ip=127.0.0.1
#[derive(Args)]
#[command(verbatim_doc_comment)]
pub struct MnCommand {
    /// The script and its arguments; or, without a script, Mininet's `mn` options.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "SCRIPT.py [ARGS] | MN-OPTIONS"
    )]
    script: Vec<String>,
}

impl MnCommand {
    pub fn run(self) -> anyhow::Result<()> {
        let MnCommand { script } = self;
        nsfleet_mininet::mn(&script)
    }
}

//! `nsfleet mn`: run a Mininet script on nsfleet's Python package.

use clap::Args;

/// Run a Mininet script, or Mininet's `mn`, on nsfleet
///
/// Run a script written for Mininet unchanged on nsfleet: its `mininet.*` imports are
/// answered by nsfleet's Python package (`nsfleet.mininet`: Mininet, Topo, TreeTopo,
/// Host, OVSSwitch, RemoteController, TCLink, CLI...). Needs the package (`pip install .`
/// in nsfleet's repository); the Python beside this executable is used, else python3 on
/// PATH. A feature nsfleet lacks (xterms, addNAT) is refused at the script's line
/// before the network is built.
///
/// Hosts are confined (root in their node, an id of no user on the host; see
/// docs/confinement.md): the script's folders, its Python and PATH's folders stay in
/// their reach even under root's 0700 home. --privileged makes them the host's root, as
/// Mininet's hosts are: a network of 1,024 hosts then starts in a third of the time.
///
/// Without a script, the options are Mininet's own `mn` command's (its --topo, --switch,
/// --controller, --link, --test...): Debian's mininet package's `mn` is run the same way,
/// so that its network is nsfleet's. `nsfleet mn /usr/bin/mn --help` lists its options.
///
///   sudo nsfleet mn /usr/share/doc/mininet/examples/linuxrouter.py
///   sudo nsfleet mn --topo tree,depth=2,fanout=8 --test pingall
///   sudo nsfleet mn --switch ovs,protocols=OpenFlow13 --controller remote,ip=127.0.0.1
///   nsfleet mn --switch lxbr --controller none --test pingall    # as any user
///
/// As a user (docs/rootless.md), the network is the user's: Open vSwitch switches run
/// where the user may open /dev/net/tun, and reach a controller on the host through the
/// fleet's forwarder; Linux bridges run anywhere.
#[derive(Args)]
#[command(verbatim_doc_comment)]
pub struct MnCommand {
    /// Every host the host's root, as Mininet's: not confined
    #[arg(long)]
    privileged: bool,
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
        let MnCommand { script, privileged } = self;
        nsfleet_mininet::mn(&script, privileged)
    }
}

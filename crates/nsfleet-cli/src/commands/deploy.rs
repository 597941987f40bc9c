//! `nsfleet deploy`: containerlab's `deploy -t FILE`, an `up` of the lab's file.

use super::args::LaunchArgs;
use clap::Args;
use nsfleet_clab as clab;
use nsfleet_client as cmd;
use std::path::PathBuf;

/// Run a containerlab topology file (containerlab's verb for `up`)
///
/// Run a containerlab topology file as it is, without Docker or any container engine:
/// nodes run their images from nsfleet's own image store (see `nsfleet image --help`),
/// or with --host-software the host's programs (containerlab's verb for `up`).
///
/// The lab is a fleet named after the file's `name`. Kinds: linux (its entrypoint and
/// cmd, then its exec lines), frr (the host's FRR with the startup-config), linux with
/// FRR's image (the image; with --host-software, the host's FRR with the frr.conf and
/// daemons it binds), bridge (a switch in a namespace of its own, not a bridge on the
/// host), ovs-bridge (a bridge of the lab's own Open vSwitch), host. Vendor kinds (srl,
/// ceos, crpd, vr-*, ...) are refused. Every node gets eth0 on the management network
/// (172.20.20.0/24 and 3fff:172:20:20::/64 by default, addresses from .2 in file
/// order), which the host reaches through a host link holding the gateway; nodes' names
/// (and clab-LAB-NODE) are in the fleet's /etc/hosts, never the host's. An image the
/// store lacks is pulled first (with --host-software images are only recorded and
/// shown); binds are mounted in the node's world only. Keys nsfleet does not apply are
/// warned about with file:line; keys that would change the lab (pid-mode, network-mode
/// host or container:NAME; user on a node that runs the host's software) are refused.
/// Example: examples/clab/frr01/frr01.clab.yml (containerlab's own lab-examples/frr01).
#[derive(Args)]
pub struct DeployCommand {
    /// The topology file (or a folder with one); without it, the only *.clab.yml in
    /// the current folder. At most 16 MiB of UTF-8 text, as for `up`.
    #[arg(short = 't', long = "topo")]
    topo: Option<PathBuf>,
    /// Destroy the lab first if it is deployed.
    #[arg(short = 'c', long)]
    reconfigure: bool,
    /// Name each node's network namespace after its container, as containerlab does:
    /// /run/netns/clab-LAB-NODE, for `ip netns exec` (netlab uses it). The names go with
    /// the lab (`destroy`, or `clean` after a supervisor was killed: a name holds its
    /// namespace alive); a name that exists already is refused before anything is made.
    /// /run/netns becomes a shared mount point of its own, as the first `ip netns add`
    /// makes it, and stays so.
    #[arg(long)]
    netns_names: bool,
    /// The file is a Go template (as containerlab renders it): its variables from these
    /// YAML or JSON files, merged in order. Without it, the files beside the topology
    /// file named after it (`lab.clab_vars.yml`, `.yaml`, `.json`) are used, if any.
    /// Subtemplates are `clab_templates/*.gotmpl` beside it.
    #[arg(long, value_name = "FILE")]
    vars: Vec<PathBuf>,
    #[command(flatten)]
    launch: LaunchArgs,
}

impl DeployCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        let DeployCommand {
            topo,
            reconfigure,
            netns_names,
            vars,
            launch,
        } = self;
        let up = cmd::up::UpArgs {
            netns_names,
            vars,
            ..launch.up(None, None, None, run_dir)
        };
        clab::lab::deploy(clab::lab::DeployArgs {
            topo,
            reconfigure,
            up,
        })
    }
}

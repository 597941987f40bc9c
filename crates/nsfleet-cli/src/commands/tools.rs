//! `nsfleet tools`: containerlab's `tools` on a running lab's nodes, named as
//! containers (clab-LAB-NODE).

use clap::{Args, Subcommand};
use nsfleet_clab as clab;
use std::path::PathBuf;

/// containerlab's tools: netem and veth on the nodes of running labs
///
/// containerlab's tools: netem (impairments) and veth (links made by hand), on the
/// nodes of running labs named as containers (clab-LAB-NODE). `vxlan` is refused, saying
/// what to use instead.
#[derive(Subcommand)]
pub enum ToolsCommand {
    #[command(subcommand)]
    Netem(NetemCommand),
    #[command(subcommand)]
    Veth(VethCommand),
    #[command(subcommand)]
    Vxlan(VxlanCommand),
}

/// An interface's impairment, as `nsfleet impair` sets it
///
/// An interface's impairment, as `nsfleet impair` sets it (on kernels without netem,
/// only --rate, with tbf).
#[derive(Subcommand)]
pub enum NetemCommand {
    Set(NetemSet),
    Show(NetemShow),
    Reset(NetemReset),
}

/// Set an interface's impairment
///
/// Set an interface's impairment: the flags given become it (none: no impairment).
///
///   nsfleet tools netem set -n clab-lab-r1 -i eth1 --delay 10ms --jitter 2ms --loss 1
#[derive(Args)]
pub struct NetemSet {
    /// The node, as its container (clab-LAB-NODE).
    #[arg(short = 'n', long)]
    node: String,
    /// Its interface.
    #[arg(short = 'i', long)]
    interface: String,
    /// Delay of each outgoing packet (10ms, 1.5s).
    #[arg(long)]
    delay: Option<String>,
    /// Variation of the delay (needs --delay).
    #[arg(long)]
    jitter: Option<String>,
    /// Packets lost, in percent (0.1 is 0.1%).
    #[arg(long)]
    loss: Option<f64>,
    /// Rate limit, in kbit/s.
    #[arg(long)]
    rate: Option<u64>,
    /// Packets corrupted, in percent.
    #[arg(long)]
    corruption: Option<f64>,
}

/// Show a node's impairments
///
/// Show a node's impairments: every interface (table), or the impaired ones (json).
#[derive(Args)]
pub struct NetemShow {
    /// The node, as its container (clab-LAB-NODE).
    #[arg(short = 'n', long)]
    node: String,
    /// table, or json ({CONTAINER: [{interface, delay, jitter, packet_loss, rate,
    /// corruption}]}, containerlab's).
    #[arg(short = 'f', long, default_value = "table", value_parser = ["table", "json"])]
    format: String,
}

/// Remove an interface's impairment.
#[derive(Args)]
pub struct NetemReset {
    #[arg(short = 'n', long)]
    node: String,
    #[arg(short = 'i', long)]
    interface: String,
}

/// Veth pairs made by hand between lab nodes, or a node and the host
///
/// Veth pairs made by hand between nodes of running labs, or a node and the host.
#[derive(Subcommand)]
pub enum VethCommand {
    Create(VethCreate),
}

/// Make a veth pair between two lab nodes, or a node and the host
///
/// Make a veth pair between two nodes of running labs, or a node and the host.
///
/// Ends are CONTAINER:IFACE, bridge:BRIDGE:IFACE (a port of the bridge of a lab's
/// `kind: bridge` node BRIDGE, the bridge that node stands for in containerlab; a bridge
/// of the host's gets no port from nsfleet), ovs-bridge:BRIDGE:IFACE (a port of a lab's
/// `kind: ovs-bridge` node, a bridge of the lab's own Open vSwitch: added with
/// `ovs-vsctl add-port`, the pair undone if Open vSwitch refuses it) or host:IFACE. The
/// pair is made straight into the nodes' namespaces and is not in the lab's record, as
/// in containerlab: it goes with its node (a host end too).
///
///   nsfleet tools veth create -a clab-lab-r1:eth9 -b clab-lab-r2:eth9 --mtu 1500
///
///   nsfleet tools veth create -a clab-lab-r3:eth1 -b ovs-bridge:ovsbr1:ovsp3
#[derive(Args)]
pub struct VethCreate {
    #[arg(short = 'a', long = "a-endpoint")]
    a: String,
    #[arg(short = 'b', long = "b-endpoint")]
    b: String,
    /// The pair's MTU (the kernel's default without it).
    #[arg(short = 'm', long)]
    mtu: Option<u32>,
}

/// containerlab's VXLAN tunnels on the host: refused
///
/// containerlab's VXLAN tunnels stitched on the host: refused, with what to use instead.
#[derive(Subcommand)]
pub enum VxlanCommand {
    /// Refused: a `type: vxlan` link in the file makes the same tunnel
    ///
    /// Refused: containerlab makes a VXLAN device on the host and ties it to a host
    /// interface with tc; nsfleet makes the same tunnel from a `type: vxlan` link.
    Create {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        args: Vec<String>,
    },
    /// Refused, as `create` is.
    Delete {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        args: Vec<String>,
    },
}

impl ToolsCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        match self {
            ToolsCommand::Netem(NetemCommand::Set(s)) => {
                clab::tools::netem_set(clab::tools::NetemSetArgs {
                    container: s.node,
                    iface: s.interface,
                    delay: s.delay,
                    jitter: s.jitter,
                    loss: s.loss,
                    rate: s.rate,
                    corruption: s.corruption,
                    run_dir,
                })
            }
            ToolsCommand::Netem(NetemCommand::Show(s)) => {
                clab::tools::netem_show(&s.node, s.format == "json", run_dir)
            }
            ToolsCommand::Netem(NetemCommand::Reset(r)) => {
                clab::tools::netem_reset(&r.node, &r.interface, run_dir)
            }
            ToolsCommand::Vxlan(_) => anyhow::bail!(
                "nsfleet does not stitch VXLAN tunnels on the host (containerlab's tools vxlan: a VXLAN device on the host tied to a host interface with tc, outside the lab's record and left behind by a kill): give the link `type: vxlan` in the file (remote, vni, dst-port), the same tunnel made from the host into the node and gone with it"
            ),
            ToolsCommand::Veth(VethCommand::Create(v)) => {
                clab::tools::veth_create(clab::tools::VethCreateArgs {
                    a: v.a,
                    b: v.b,
                    mtu: v.mtu,
                    run_dir,
                })
            }
        }
    }
}

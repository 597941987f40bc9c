//! The fleet's Open vSwitch (nsfleet-topology's `kind/ovs.rs`): one ovsdb-server and one
//! ovs-vswitchd, started by the first command of the fleet's Open vSwitch node (the hub,
//! `hub.rs`) inside its world: Open vSwitch's folders are that node's private
//! ones, its sockets and its datapath's ports are in that node's namespace, and nothing
//! reaches an Open vSwitch the host may run. Every OVS switch node lives in the hub's
//! namespace (a tenant, see nsfleet-core's `node.rs`), where its ports are; [`Bridges`]
//! makes its bridge in the hub's database, [`Ready`] waits until ovs-vswitchd has taken
//! its ports. They end with the hub's world, as any daemon of a node does.
//!
//! The switches' controllers are addresses as the host sees them (or as the fleet's node
//! that has the address does), which the hub's namespace cannot reach: for each, a relay
//! ([`Controllers`]) listens inside the hub's namespace on the controller's own address
//! and port (an address other than the loopback's put on the namespace's `lo`), so that
//! a bridge's controller is the file's, as `ovs-vsctl get-controller` shows it, and makes
//! each connection it takes again from the host's namespace (or that node's). Which
//! switch a connection is from, the relay reads from the OpenFlow handshake (the
//! datapath id of the switch's features reply). When the fleet goes, or its supervisor
//! dies, the relays' sockets close and the switches are in their fail mode, as with a
//! controller that went away.
//!
//! One file a job: `hub.rs` (the daemons' start line, and what the host sees of them),
//! `vsctl.rs` (the `ovs-vsctl` transactions that make, change and delete bridges),
//! `bridges.rs` (the `ovs-bridges` subsystem, and [`Switches`], the bridges made),
//! `ready.rs` (`ovs-ready`: a switch's ports taken) and `relay.rs` (`ovs-controllers`:
//! the OpenFlow relays). Here: what they all share, the bridge's name and whether a
//! datapath is the kernel's. Nothing here, or below, starts a process in a node or enters
//! the hub's world: the hub's start line is run by `process`, as any node's command, and
//! what became of it is read through [`crate::Commands`], which `process` answers: this
//! module imports nothing of `process`.

mod bridges;
mod hub;
mod ready;
mod relay;
mod vsctl;

pub use bridges::{Bridges, Switches};
pub(crate) use hub::start_command;
pub use ready::Ready;
pub use relay::{controller_lines, ControllerEvent, Controllers, Relays};

use nsfleet_core::Node;
use nsfleet_topology::Datapath;

/// The bridge's name: the switch's, as Mininet's `dpctl` and `ovs-ofctl dump-flows s1`
/// expect (the topology checked that it can name a device: the bridge's own port is one).
pub fn bridge_name(node: &Node) -> &str {
    node.name()
}

/// Whether an OVS switch on `datapath` forwards in the kernel.
pub fn in_kernel(datapath: Datapath) -> bool {
    match datapath {
        Datapath::Kernel => true,
        Datapath::User => false,
        Datapath::Auto => crate::probe::has_ovs_kernel_datapath(),
    }
}

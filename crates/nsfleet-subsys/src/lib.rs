//! The subsystems: each file implements [`Subsystem`](nsfleet_core::Subsystem) for one
//! aspect of a node and knows nothing of the others. Adding one is adding a file and a
//! line in [`register_defaults`]. What one needs of another goes through here, as data or
//! as an interface that `register_defaults` hands over: the hub's start line to `process`
//! (`process::StartLine`), what became of it back to `ovs` ([`Commands`]).

pub mod addresses;
pub mod cable;
pub mod forwarding;
pub mod host_dial;
pub mod impair;
pub mod ipv6_dad;
pub mod link;
pub mod loopback;
pub mod netns_names;
pub mod outbound;
pub mod ovs;
pub mod ports;
pub mod probe;
pub mod process;
pub mod reach;
pub mod routes;
mod spawner;
pub mod sysctl;
pub mod world;

use link::Wired;
use nsfleet_core::{Fleet, Node, Requests, SubsysId};
use nsfleet_netlink::rtnl;
use nsfleet_topology::{Iface, NodeWiring};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;

/// What subsystems tell whoever watches the fleet (`nsfleet events`): each is one JSON
/// line, its own `event` tag first.
#[derive(Clone, Debug, serde::Serialize, PartialEq)]
#[serde(untagged)]
pub enum Event {
    Process(process::ProcessEvent),
    Controller(ovs::ControllerEvent),
}

/// Where subsystems' events go; called from workers and from subsystems' own threads
/// (the process watcher, the controller relays), so it must not block for long.
pub type Events = Arc<dyn Fn(Event) + Send + Sync>;

/// A node's commands as the host sees them, for a subsystem that reads what it had
/// another start: `ovs` gives `process` the hub's start line, and asks through this
/// whether it runs, and where the hub's world is. `process` answers
/// (`process::Lookup`, its state of each node), and [`register_defaults`] hands the
/// answer to `ovs`: neither imports the other, and the core, which keeps each node's
/// states, learns nothing of what they hold. Only looks: nothing here starts, enters or
/// signals a process.
pub trait Commands: Send + Sync {
    /// The pid of the node's init in the host's /proc (its world's root is
    /// `/proc/PID/root`); `None` while it has no world.
    fn world_pid(&self, node: &Node) -> Option<i64>;

    /// The node's command `command` (as `status` names it): its pid as the host sees it,
    /// or how it ended; `None` if the node has no such command.
    fn run_of(&self, node: &Node, command: &str) -> Option<Result<i64, nsfleet_sys::Exit>>;

    /// While `command` runs: its pidfd, and its pid as the host sees it.
    fn running(&self, node: &Node, command: &str) -> Option<(Arc<OwnedFd>, i64)>;

    /// Whether the node's commands are still held: not yet taken down (with the node, or
    /// by `nsfleet node stop`), whether they run or have ended.
    fn held(&self, node: &Node) -> bool;
}

/// Handles of the default subsystems that callers query for reports or live changes.
pub struct Defaults {
    pub process: SubsysId,
    pub impair: SubsysId,
    /// Open vSwitch switches' controller relays (`status` says whether they connect).
    pub ovs_controllers: SubsysId,
}

/// Registers the default subsystems in their order of `init` within each phase (`exit`
/// runs in reverse). `host_journal` and `cgroup_journal` are where host links and the
/// fleet's cgroup are journalled for `clean`; `host`, a user's fleet's way to the host's
/// network namespace.
pub fn register_defaults(
    fleet: &Fleet,
    fleet_name: &str,
    host_journal: PathBuf,
    cgroup_journal: PathBuf,
    events: Option<Events>,
    host: Option<host_dial::HostDialer>,
) -> anyhow::Result<Defaults> {
    probe::has_ipv6(); // looked up here, in the host, rather than inside a node
                       // Create
    fleet.register(ipv6_dad::Ipv6Dad)?;
    fleet.register(loopback::Loopback)?;
    fleet.register(link::bridge::Bridges)?;
    // Wire
    fleet.register(Wired(link::veth::Veths))?;
    fleet.register(link::macvlan::Macvlans)?;
    fleet.register(Wired(link::dummy::Dummies))?;
    fleet.register(Wired(link::host::HostLinks::new(host_journal, fleet_name)?))?;
    // Configure: links that need every veth, before the addresses they carry
    fleet.register(Wired(link::veth::FarEnds))?;
    fleet.register(Wired(link::vxlan::Vxlans::new()?))?;
    fleet.register(sysctl::Sysctls)?;
    fleet.register(addresses::Addresses)?;
    fleet.register(forwarding::Forwarding)?;
    fleet.register(routes::Routes)?;
    fleet.register(ports::Ports::new(fleet_name)?)?;
    let impair = fleet.register(impair::Impairments)?;
    // Start
    fleet.register(link::linkwatch::LinkWatchNow)?;
    let switches = ovs::Switches::default();
    let ovs_controllers = fleet.register(ovs::Controllers::new(
        events.clone(),
        switches.clone(),
        host.map(Arc::new),
    ))?;
    // The Open vSwitch hub's start line comes to `process` as data (`StartLine`), so that
    // `process` imports nothing of `ovs`.
    let processes =
        process::Processes::new(fleet_name, events, vec![ovs::start_command], cgroup_journal);
    let process = fleet.register(processes)?;
    // What became of it goes back to `ovs` as answers to `Commands`, so that `ovs`
    // imports nothing of `process` either.
    let commands: Arc<dyn Commands> = Arc::new(process::Lookup(process));
    // Ready
    fleet.register(ovs::Bridges::new(commands.clone(), switches))?;
    fleet.register(ovs::Ready { commands })?;
    Ok(Defaults {
        process,
        impair,
        ovs_controllers,
    })
}

/// How a node stands with IPv6, which decides what its links need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ipv6 {
    /// No IPv6 in the node: the kernel has none, or the node is a switch that uses none
    /// (`bridges` turns it off before its first bridge). Its links need nothing.
    Off,
    /// IPv6 on, unused: no link-local addresses. Each would send duplicate-address probes,
    /// multicast reports and router solicitations, which a switch floods to every port,
    /// and keep the kernel's address-configuration work (under the RTNL lock) busy
    /// through creation and teardown.
    Quiet,
    /// The node uses IPv6 (`topology::uses_ipv6`): link-local addresses, except on links
    /// that carry frames only.
    Used,
}

/// "r1 has no interface "eth9" (did you mean eth0 or eth1?)": the error of a name that
/// is not one of the node's interfaces.
pub(crate) fn no_interface(node: &Node, iface: &str) -> anyhow::Error {
    let wiring = node.wiring();
    let have: Vec<&str> = (wiring.ifaces.iter()).map(|i| i.name.as_str()).collect();
    let close = nsfleet_topology::closest(iface, &have);
    let hint = if close.is_empty() {
        format!("it has: {}", have.join(", "))
    } else {
        format!("did you mean {}?", close.join(" or "))
    };
    anyhow::anyhow!("{} has no interface {iface:?} ({hint})", node.name())
}

/// Whether interface `i` of a node's new shape is the same device as in its old wiring
/// `was` (so that what is on it stays).
pub(crate) fn kept(was: &NodeWiring, i: &Iface) -> bool {
    was.iface(&i.name)
        .is_some_and(|o| nsfleet_topology::reshape::same_link(o, i))
}

pub(crate) fn ipv6(node: &Node) -> Ipv6 {
    if !probe::has_ipv6() {
        Ipv6::Off
    } else if node.config().ovs.is_some() {
        // Its ports carry frames for ovs-vswitchd; its commands are Open vSwitch's.
        Ipv6::Quiet
    } else if nsfleet_topology::uses_ipv6(&node.config(), &node.wiring()) {
        Ipv6::Used
    } else if node.config().switch {
        Ipv6::Off
    } else {
        Ipv6::Quiet
    }
}

/// Appends, where the node's [`Ipv6`] calls for it, a request that keeps link `index`
/// from getting an IPv6 link-local address; `frames_only` for bridges, their joins and
/// their ports, which carry frames, never addresses. It must go before the link is up
/// with carrier.
pub(crate) fn link_local_policy(
    out: &mut Requests<'_>,
    index: i32,
    frames_only: bool,
    ipv6: Ipv6,
) -> anyhow::Result<()> {
    match ipv6 {
        Ipv6::Quiet => out.add(|b, seq| rtnl::no_link_local(b, seq, index)),
        Ipv6::Used if frames_only => out.add(|b, seq| rtnl::no_link_local(b, seq, index)),
        Ipv6::Off | Ipv6::Used => Ok(()),
    }
}

//! The lock order of the whole engine, written once: every lock that is ever held while
//! another is taken, outermost first (a lower level is taken first), then the leaves.
//! Each lock also says next to its data what it protects; this list says only where it
//! stands. A thread holding one of these may take only locks further down the list.
//!
//! Locks that are leaves and wait on a condition variable (`Backlog::count`,
//! `Ticket::state`, `ReclaimWatch::awaited`) and the traffic engine's locks (each taken
//! alone, one of them per packet in the locked-list ablation) stay parking_lot's own and
//! are not checked; they are listed at the end for completeness.

use crate::Rank;

/// The supervisor's `changes`: one change to the live fleet at a time (`apply`,
/// `impair`, `link`, `node`); `status` and `events` read between changes.
pub const CHANGES: Rank = Rank::ordered(10, "Supervisor::changes");
/// The supervisor's `traffic`: the generator and its control (pktgen_thread_lock).
pub const TRAFFIC: Rank = Rank::ordered(20, "Supervisor::traffic");
/// `Watchers::links`: the link watch (a socket in every node) of `nsfleet events`.
pub const WATCH_LINKS: Rank = Rank::ordered(30, "Watchers::links");
/// `Registry::list` (pernet_ops_rwsem): shared by creation, reshape and the reaper
/// (which takes it recursively: a creation holding it may wait for the reaper in
/// `admit`), exclusive for registration.
pub const REGISTRY: Rank = Rank::ordered(40, "Registry::list");
/// `Fleet::table`: writers of the node table (readers take an `ArcSwap` snapshot).
pub const FLEET_TABLE: Rank = Rank::ordered(50, "Fleet::table");
/// `Bridges::making`: one maker of Open vSwitch bridges at a time (it reads nodes' states).
pub const OVS_MAKING: Rank = Rank::ordered(55, "ovs::Bridges::making");
/// `Node::states`: one node's subsystem states (net_generic), one node's at a time.
pub const NODE_STATES: Rank = Rank::ordered(60, "Node::states");
/// `Proc::run`: one command's current run; `exit_batch` holds a batch's at once.
pub const PROC_RUN: Rank = Rank::several(70, "Proc::run");
/// `Node::netns`: the node's one hold on its namespace.
pub const NODE_NETNS: Rank = Rank::ordered(80, "Node::netns");
/// `Holders::list`: the holder processes, released before a holder's `conn`.
pub const HOLDERS: Rank = Rank::ordered(90, "Holders::list");
/// `Holder::conn`: one exchange on a holder's socket.
pub const HOLDER_CONN: Rank = Rank::ordered(100, "Holder::conn");
/// nsfleet-sys's `SPAWNING`: shared from a child's fork until its pidfd is open,
/// exclusive while reaping orphans.
pub const SPAWNING: Rank = Rank::ordered(110, "SPAWNING");
/// nsfleet-sys's `WATCHED`: children whose exit status is their watcher's.
pub const WATCHED: Rank = Rank::ordered(120, "WATCHED");
/// A controller relay's `reach`: whether its switch is connected, changed and told one
/// change at a time, in the order they happen (held while the event is published, which
/// takes `Watchers::subs`; so `status`, which reads it, may wait for a slow watcher's
/// write, whose timeout bounds it).
pub const RELAY_REACH: Rank = Rank::ordered(130, "Relay::reach");

/// The supervisor's `state` ("starting", "up", ...).
pub const STATE: Rank = Rank::leaf("Supervisor::state");
/// The supervisor's `kernel_bytes`.
pub const KERNEL_BYTES: Rank = Rank::leaf("Supervisor::kernel_bytes");
/// `Watchers::subs`: the connections of `nsfleet events`, written to under it.
pub const WATCH_SUBS: Rank = Rank::leaf("Watchers::subs");
/// `LinkWatch::socks`: each watched node's link-notification socket.
pub const LINK_SOCKS: Rank = Rank::leaf("LinkWatch::socks");
/// `Watcher::procs`: the commands the process watcher watches.
pub const WATCHED_PROCS: Rank = Rank::leaf("Watcher::procs");
/// nsfleet-sys's `seccomp::KEPT`: the seccomp programs kept for the process's life.
pub const SECCOMP_KEPT: Rank = Rank::leaf("seccomp::KEPT");
/// `OomTeller::counts`: the nodes whose OOM kills the teller tells as they happen.
pub const OOM_COUNTS: Rank = Rank::leaf("OomTeller::counts");
/// `Switches`: the fleet's Open vSwitch switches whose bridges are made, by name.
pub const OVS_SWITCHES: Rank = Rank::leaf("ovs::Switches");
/// `Relay::conns`: an Open vSwitch controller relay's open connections.
pub const RELAY_CONNS: Rank = Rank::leaf("Relay::conns");
/// `HostDialer::sock`: a user's fleet's line to its forwarder in the host's namespaces,
/// held from a request to its reply.
pub const HOST_DIALER: Rank = Rank::leaf("HostDialer::sock");
/// `HostLinks::host`: the netlink socket in the host's namespace.
pub const HOST_SOCKET: Rank = Rank::leaf("HostLinks::host");
/// `Vxlans::host`: the netlink socket in the host's namespace that makes tunnels through
/// the host.
pub const VXLAN_HOST_SOCKET: Rank = Rank::leaf("Vxlans::host");
/// `Ports::host`: the published ports' nf_tables and route sockets in the host's
/// namespace, and what they have made.
pub const PORTS_HOST: Rank = Rank::leaf("Ports::host");
/// `Fleet::hub`: the fleet's hub namespace.
pub const FLEET_HUB: Rank = Rank::leaf("Fleet::hub");
/// `CurrentGroup`: a node's cgroup as a live change of its limits leaves it.
pub const NODE_CGROUP: Rank = Rank::leaf("CurrentGroup");
/// The supervisor's `images`: its hold on the images its nodes run.
pub const IMAGES_HELD: Rank = Rank::leaf("Supervisor::images");

// Leaves not checked (parking_lot's own, see above): `Backlog::count`, `Ticket::state`,
// `ReclaimWatch::{awaited, hub, wake, listener}`, `Fleet::on_node`'s hand-off cell, the
// traffic engine's `DeviceList::current`, `GenThread::{retired, handle}` and
// `Device::{params, note}`, and nsfleet-vm's `Shared::helpers` (another program path).

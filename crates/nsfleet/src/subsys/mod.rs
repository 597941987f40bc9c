//! The subsystems: each file implements [`Subsystem`](crate::core::Subsystem) for one
//! aspect of a node and knows nothing of the others. Adding one is adding a file and a
//! line in [`register_defaults`].

pub mod addresses;
pub mod bridges;
pub mod forwarding;
pub mod hostlink;
pub mod impair;
pub mod ipv6_dad;
pub mod links;
pub mod loopback;
pub mod peer_ends;
pub mod process;
pub mod routes;
pub mod sysctl;

use crate::core::{Fleet, Node, Requests, SubsysId};
use crate::topology::Iface;
use nsfleet_netlink::rtnl;
use std::path::PathBuf;
use std::sync::OnceLock;

/// Handles of the default subsystems that callers query for reports or live changes.
pub struct Defaults {
    pub process: SubsysId,
    pub impair: SubsysId,
}

/// Registers the default subsystems in their order of `init` within each phase (`exit`
/// runs in reverse). `host_journal` is where host links are journalled for `clean`.
pub fn register_defaults(
    fleet: &Fleet,
    fleet_name: &str,
    host_journal: PathBuf,
) -> anyhow::Result<Defaults> {
    kernel_has_ipv6(); // looked up here, in the host, rather than inside a node
                       // Create
    fleet.register(ipv6_dad::Ipv6Dad)?;
    fleet.register(loopback::Loopback)?;
    fleet.register(bridges::Bridges)?;
    // Wire
    fleet.register(links::Links)?;
    fleet.register(hostlink::HostLinks::new(host_journal, fleet_name)?)?;
    // Configure
    fleet.register(peer_ends::PeerEnds)?;
    fleet.register(sysctl::Sysctls)?;
    fleet.register(addresses::Addresses)?;
    fleet.register(forwarding::Forwarding)?;
    fleet.register(routes::Routes)?;
    let impair = fleet.register(impair::Impairments)?;
    // Start
    let process = fleet.register(process::Processes::default())?;
    Ok(Defaults { process, impair })
}

/// Whether the kernel has IPv6 (was not booted with ipv6.disable=1). Looked up once: a
/// /proc/sys lookup costs more the more namespaces there are.
pub(crate) fn kernel_has_ipv6() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| std::path::Path::new("/proc/sys/net/ipv6").exists())
}

/// Whether a node's interfaces get IPv6 link-local addresses: only where it uses IPv6
/// (`topology::uses_ipv6`). Elsewhere each new link would send duplicate-address probes,
/// multicast reports and router solicitations, which a switch floods to every port, and
/// would keep the kernel's address-configuration work, which takes the RTNL lock, busy
/// through creation and teardown.
pub(crate) fn link_local(node: &Node) -> bool {
    kernel_has_ipv6() && crate::topology::uses_ipv6(node.config(), node.wiring())
}

/// Appends a request that keeps link `index` from getting an IPv6 link-local address;
/// it must go before the link is up with carrier.
pub(crate) fn no_link_local(out: &mut Requests<'_>, index: i32) -> anyhow::Result<()> {
    if kernel_has_ipv6() {
        out.add(|b, seq| rtnl::no_link_local(b, seq, index))?;
    }
    Ok(())
}

/// [`no_link_local`] for an interface of a node, unless it should have one: its node uses
/// IPv6 (`node_link_local`, [`link_local`] of the node) and it is not a bridge port (a
/// port carries frames, not addresses).
pub(crate) fn link_local_policy(
    out: &mut Requests<'_>,
    iface: &Iface,
    node_link_local: bool,
) -> anyhow::Result<()> {
    if !node_link_local || iface.bridge.is_some() {
        no_link_local(out, iface.index)?;
    }
    Ok(())
}

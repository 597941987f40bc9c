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

use crate::core::{Fleet, SubsysId};
use std::path::PathBuf;

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
    // Create
    fleet.register(ipv6_dad::Ipv6Dad::new())?;
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

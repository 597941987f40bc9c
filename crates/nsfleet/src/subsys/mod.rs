//! The subsystems: each file implements [`Subsystem`](crate::core::Subsystem) for one
//! aspect of a node and knows nothing of the others. Adding one is adding a file and a
//! line in [`register_defaults`].

pub mod ipv6_dad;
pub mod loopback;
pub mod process;
pub mod sysctl;

use crate::core::{Fleet, SubsysId};

/// Handles of the default subsystems that callers query for reports.
pub struct Defaults {
    pub process: SubsysId,
}

/// Registers the default subsystems in their order of `init` (`exit` runs in reverse).
pub fn register_defaults(fleet: &Fleet) -> anyhow::Result<Defaults> {
    fleet.register(ipv6_dad::Ipv6Dad::new())?;
    fleet.register(loopback::Loopback)?;
    fleet.register(sysctl::Sysctls)?;
    let process = fleet.register(process::Processes::default())?;
    Ok(Defaults { process })
}

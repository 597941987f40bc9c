//! IPv6 duplicate-address detection off. With it on, every IPv6 address a node gets stays
//! "tentative" for about a second before it can be used, which on a fleet means seconds of
//! readiness per interface. Set on `all` and `default` before any interface exists, so
//! every interface the fleet creates later inherits it.

use super::write_sysctl;
use crate::core::{InitCtx, Phase, Subsystem};
use anyhow::Context;

pub struct Ipv6Dad;

const KEYS: [&str; 2] = [
    "net/ipv6/conf/all/accept_dad",
    "net/ipv6/conf/default/accept_dad",
];

impl Subsystem for Ipv6Dad {
    type State = ();

    fn name(&self) -> &'static str {
        "ipv6-dad-off"
    }

    fn phase(&self) -> Phase {
        Phase::Create
    }

    fn wants(&self, _: &crate::topology::NodeConfig) -> bool {
        // A kernel booted with ipv6.disable=1 has nothing to switch off.
        std::path::Path::new("/proc/sys/net/ipv6").exists()
    }

    fn init(&self, _cx: &mut InitCtx<'_>, _: &mut ()) -> anyhow::Result<()> {
        for k in KEYS {
            write_sysctl(k, "0").with_context(|| format!("writing {k}"))?;
        }
        Ok(())
    }
}

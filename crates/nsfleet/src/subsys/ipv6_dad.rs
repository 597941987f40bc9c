//! IPv6 duplicate-address detection off. With it on, every IPv6 address an interface gets
//! stays "tentative" for about a second before it can be used: on a fleet, seconds of
//! readiness per interface. Set on `all` and `default` before any interface exists, so
//! that every interface created later inherits it.
//!
//! Only for nodes where something can create an interface (nodes that run processes)
//! or that have IPv6 addresses (whose link-local addresses would stay tentative; the
//! addresses nsfleet adds itself skip DAD with IFA_F_NODAD). A node with only `lo` has nothing that runs DAD, and writing a sysctl costs
//! a lookup that grows with the number of namespaces on the machine (see
//! `Worker::write_sysctl`): bare nodes stay at the kernel's own creation rate.

use crate::core::{InitCtx, Node, Phase, Subsystem};

use anyhow::Context;

pub struct Ipv6Dad {
    /// False on a kernel booted with ipv6.disable=1: nothing to switch off. Looked up once
    /// here rather than per node, where it would cost the lookup this file avoids.
    ipv6: bool,
}

impl Ipv6Dad {
    pub fn new() -> Self {
        Ipv6Dad {
            ipv6: std::path::Path::new("/proc/sys/net/ipv6").exists(),
        }
    }
}

impl Default for Ipv6Dad {
    fn default() -> Self {
        Self::new()
    }
}

const KEYS: [&str; 2] = [
    "net.ipv6.conf.all.accept_dad",
    "net.ipv6.conf.default.accept_dad",
];

impl Subsystem for Ipv6Dad {
    type State = ();

    fn name(&self) -> &'static str {
        "ipv6-dad-off"
    }

    fn phase(&self) -> Phase {
        Phase::Create
    }

    fn wants(&self, node: &Node) -> bool {
        let has_v6 =
            || (node.wiring().ifaces.iter()).any(|i| i.addrs.iter().any(|a| a.addr.is_ipv6()));
        self.ipv6 && (!node.config().commands.is_empty() || has_v6())
    }

    fn init(&self, cx: &mut InitCtx<'_>, _: &mut ()) -> anyhow::Result<()> {
        for k in KEYS {
            cx.write_sysctl(k, "0")
                .with_context(|| format!("writing {k}"))?;
        }
        Ok(())
    }
}

//! IPv6 duplicate-address detection off. With it on, every IPv6 address an interface gets
//! stays "tentative" for about a second before it can be used: on a fleet, seconds of
//! readiness per interface. Set on `all` and `default` before any interface exists, so
//! that every interface created later inherits it.
//!
//! Only for nodes that use IPv6 (`crate::ipv6`): the others' interfaces get no
//! link-local address, so nothing in them runs DAD; and writing a sysctl costs a lookup
//! that grows with the number of namespaces on the machine (see `Worker::write_sysctl`).
//! The addresses nsfleet adds itself skip DAD anyway (IFA_F_NODAD).

use nsfleet_core::{InitCtx, Node, Phase, Subsystem};

use anyhow::Context;

pub struct Ipv6Dad;

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
        super::ipv6(node) == super::Ipv6::Used
    }

    fn init(&self, cx: &mut InitCtx<'_>, _: &mut ()) -> anyhow::Result<()> {
        for k in KEYS {
            cx.write_sysctl(k, "0")
                .with_context(|| format!("writing {k}"))?;
        }
        Ok(())
    }
    // A node that comes to use IPv6 through `apply` runs `init` then (the core's rule for
    // a subsystem that newly wants a node): nothing to retire or extend.
}

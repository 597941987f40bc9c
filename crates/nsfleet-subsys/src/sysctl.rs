//! Per-node sysctls from the topology (`sysctls = { "net.ipv4.ip_forward" = 1 }`), in the
//! Configure phase so that per-interface keys find their interfaces.

use nsfleet_core::{InitCtx, Node, Phase, Subsystem};

use anyhow::Context;

pub struct Sysctls;

impl Subsystem for Sysctls {
    type State = ();

    fn name(&self) -> &'static str {
        "sysctls"
    }

    fn phase(&self) -> Phase {
        Phase::Configure
    }

    fn wants(&self, node: &Node) -> bool {
        let config = node.config();
        !config.sysctls.is_empty()
    }

    fn init(&self, cx: &mut InitCtx<'_>, _: &mut ()) -> anyhow::Result<()> {
        let config = cx.node.config();
        for (key, value) in &config.sysctls {
            cx.write_sysctl(key, value)
                .with_context(|| format!("sysctl {key} = {value}"))?;
        }
        Ok(())
    }

    // No exit: the values die with the namespace.
}

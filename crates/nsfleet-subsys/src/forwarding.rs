//! Forwarding on router nodes. IPv4 forwards what arrives on a device whose own
//! `forwarding` is on, so it is set per interface over netlink (IFLA_AF_SPEC) and never
//! through /proc/sys, whose lookup cost grows with the number of namespaces (see
//! `Worker::write_sysctl`). IPv6 has no per-device netlink switch: routers with IPv6
//! addresses pay for the one sysctl, and so do routers that run software for
//! `net.ipv4.ip_forward`, which daemons read.

use anyhow::Context;
use nsfleet_core::{InitCtx, Node, Phase, Subsystem};
use nsfleet_netlink::rtnl;

pub struct Forwarding;

impl Subsystem for Forwarding {
    type State = ();

    fn name(&self) -> &'static str {
        "forwarding"
    }

    fn phase(&self) -> Phase {
        Phase::Configure
    }

    fn wants(&self, node: &Node) -> bool {
        node.config().router && !node.wiring().ifaces.is_empty()
    }

    fn init(&self, cx: &mut InitCtx<'_>, _: &mut ()) -> anyhow::Result<()> {
        let node = cx.node;
        let ifaces = &node.wiring().ifaces;
        cx.send_each(
            ifaces,
            |out, i| out.add(|b, seq| rtnl::set_forwarding(b, seq, i.index, true)),
            |i| format!("forwarding on {}:{}", node.name(), i.name),
        )?;
        // Routing daemons read the switch itself (zebra, BIRD's users): nodes that run
        // software pay for the one sysctl, fleets of plain routers keep to netlink.
        if node.config().has_world() {
            cx.write_sysctl("net.ipv4.ip_forward", "1")
                .context("IPv4 forwarding")?;
        }
        if node.wiring().addrs().any(|a| a.addr.is_ipv6()) {
            cx.write_sysctl("net.ipv6.conf.all.forwarding", "1")
                .context("IPv6 forwarding")?;
        }
        Ok(())
    }
}

//! Forwarding on router nodes. IPv4 forwards what arrives on a device whose own
//! `forwarding` is on, so it is set per interface over netlink (IFLA_AF_SPEC) and never
//! through /proc/sys, whose lookup cost grows with the number of namespaces (see
//! `Worker::write_sysctl`). IPv6 has no per-device netlink switch: routers with IPv6
//! addresses pay for the one sysctl, and so do routers that run software for
//! `net.ipv4.ip_forward`, which daemons read.

use anyhow::Context;
use nsfleet_core::{InitCtx, Node, Phase, Shape, Subsystem};
use nsfleet_netlink::rtnl;
use nsfleet_topology::{Iface, NodeWiring, Subject};

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
        let (config, wiring) = (cx.node.config(), cx.node.wiring());
        let all: Vec<&Iface> = wiring.ifaces.iter().collect();
        // Routing daemons read the switch itself (zebra, BIRD's users): nodes that run
        // software pay for the one sysctl, fleets of plain routers keep to netlink.
        let switches = Switches {
            ipv4: config.has_world(),
            ipv6: has_ipv6(&wiring),
        };
        turn(cx, &all, switches, true)
    }

    /// A node that stops routing stops forwarding on the devices it keeps.
    fn retire(&self, cx: &mut InitCtx<'_>, _: &mut (), was: &Shape) -> anyhow::Result<()> {
        if !was.config.router || cx.node.config().router {
            return Ok(());
        }
        let now = cx.node.wiring();
        let kept: Vec<&Iface> = (now.ifaces.iter())
            .filter(|i| crate::kept(&was.wiring, i))
            .collect();
        let switches = Switches {
            ipv4: was.config.has_world(),
            ipv6: has_ipv6(&was.wiring),
        };
        turn(cx, &kept, switches, false)
    }

    /// A router forwards on its new devices. (A node that becomes a router runs `init`:
    /// the core's rule for a subsystem that newly wants a node.)
    fn extend(&self, cx: &mut InitCtx<'_>, _: &mut (), was: &Shape) -> anyhow::Result<()> {
        let (config, wiring) = (cx.node.config(), cx.node.wiring());
        if !config.router {
            return Ok(());
        }
        let new: Vec<&Iface> = (wiring.ifaces.iter())
            .filter(|i| !crate::kept(&was.wiring, i))
            .collect();
        let switches = Switches {
            ipv4: config.has_world() && !was.config.has_world(),
            ipv6: has_ipv6(&wiring) && !has_ipv6(&was.wiring),
        };
        turn(cx, &new, switches, true)
    }
}

/// The namespace-wide sysctls to write besides the devices' own switches.
#[derive(Clone, Copy)]
struct Switches {
    ipv4: bool,
    ipv6: bool,
}

fn has_ipv6(w: &NodeWiring) -> bool {
    w.addrs().any(|a| a.addr.is_ipv6())
}

/// Forwarding on (or off) on `ifaces`, and on the namespace-wide `switches`.
fn turn(
    cx: &mut InitCtx<'_>,
    ifaces: &[&Iface],
    switches: Switches,
    on: bool,
) -> anyhow::Result<()> {
    let node = cx.node;
    cx.send_each(
        ifaces,
        |out, i| out.add(|b, seq| rtnl::set_forwarding(b, seq, i.index, on)),
        |i| Subject::new(format!("forwarding on {}:{}", node.name(), i.name), i.at),
    )?;
    let value = if on { "1" } else { "0" };
    if switches.ipv4 {
        cx.write_sysctl("net.ipv4.ip_forward", value)
            .context("IPv4 forwarding")?;
    }
    if switches.ipv6 {
        cx.write_sysctl("net.ipv6.conf.all.forwarding", value)
            .context("IPv6 forwarding")?;
    }
    Ok(())
}

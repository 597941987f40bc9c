//! Addresses on a node's interfaces, usable at once: IFA_F_NODAD skips IPv6 duplicate
//! address detection, which would keep each address tentative for a second or more.

use nsfleet_core::{InitCtx, Node, Phase, Subsystem};
use nsfleet_netlink::rtnl;
use nsfleet_topology::{Iface, IpNet};

pub struct Addresses;

/// `lo` is the first interface of every network namespace.
const LOOPBACK_INDEX: i32 = 1;

impl Subsystem for Addresses {
    type State = ();

    fn name(&self) -> &'static str {
        "addresses"
    }

    fn phase(&self) -> Phase {
        Phase::Configure
    }

    fn wants(&self, node: &Node) -> bool {
        let w = node.wiring();
        !w.loopback.is_empty() || w.ifaces.iter().any(|i| !i.addrs.is_empty())
    }

    fn init(&self, cx: &mut InitCtx<'_>, _: &mut ()) -> anyhow::Result<()> {
        let node = cx.node;
        cx.send_each(
            &node.wiring().loopback,
            |out, a| out.add(|b, seq| rtnl::new_addr(b, seq, LOOPBACK_INDEX, a.addr, a.prefix)),
            |a| format!("address {a} on {}:lo", node.name()),
        )?;
        let addrs =
            (node.wiring().ifaces.iter()).flat_map(|i| i.addrs.iter().map(move |a| (i, *a)));
        cx.send_each(
            addrs,
            |out, (i, a): &(&Iface, IpNet)| {
                out.add(|b, seq| rtnl::new_addr(b, seq, i.index, a.addr, a.prefix))
            },
            |(i, a)| {
                format!(
                    "address {a} on {}:{} (topology line {})",
                    node.name(),
                    i.name,
                    i.line
                )
            },
        )
    }

    // No exit: addresses go with their interfaces.
}

//! Addresses on a node's interfaces, usable at once: IFA_F_NODAD skips IPv6 duplicate
//! address detection, which would keep each address tentative for a second or more.

use nsfleet_core::{InitCtx, Node, Phase, Subsystem};
use nsfleet_netlink::rtnl;
use nsfleet_topology::IpNet;

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
        let w = node.wiring();
        // (interface index, its name, the address, the topology line), `lo` first: one
        // netlink burst for all of them.
        let on_lo = w.loopback.iter().map(|a| (LOOPBACK_INDEX, "lo", *a, None));
        let on_ifaces = (w.ifaces.iter()).flat_map(|i| {
            i.addrs
                .iter()
                .map(move |a| (i.index, &*i.name, *a, Some(i.line)))
        });
        cx.send_each(
            on_lo.chain(on_ifaces),
            |out, &(index, _, a, _): &(i32, &str, IpNet, Option<u32>)| {
                out.add(|b, seq| rtnl::new_addr(b, seq, index, a.addr, a.prefix))
            },
            |(_, name, a, line)| {
                let at = line.map_or(String::new(), |l| format!(" (topology line {l})"));
                format!("address {a} on {}:{name}{at}", node.name())
            },
        )
    }

    // No exit: addresses go with their interfaces.
}

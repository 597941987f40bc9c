//! Addresses on a node's interfaces, usable at once: IFA_F_NODAD skips IPv6 duplicate
//! address detection, which would keep each address tentative for a second or more.

use nsfleet_core::{InitCtx, Node, Phase, Shape, Subsystem};
use nsfleet_netlink::rtnl;
use nsfleet_topology::{Iface, IpNet, NodeWiring, Place, Subject};

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
        let w = cx.node.wiring();
        send(cx, rtnl::new_addr, &on(&w, |_, _| true))
    }

    /// Removes the addresses of devices that stay but no longer have them (a device that
    /// goes takes its own).
    fn retire(&self, cx: &mut InitCtx<'_>, _: &mut (), was: &Shape) -> anyhow::Result<()> {
        let now = cx.node.wiring();
        send(
            cx,
            rtnl::del_addr,
            &on(&was.wiring, |i, a| !has(&now, i, a)),
        )
    }

    /// Adds the addresses new on a device, and all of a device made anew.
    fn extend(&self, cx: &mut InitCtx<'_>, _: &mut (), was: &Shape) -> anyhow::Result<()> {
        let now = cx.node.wiring();
        send(
            cx,
            rtnl::new_addr,
            &on(&now, |i, a| !has(&was.wiring, i, a)),
        )
    }

    // No exit: addresses go with their interfaces.
}

/// One address of a node: (interface index, its name, the address, where the topology
/// file wrote it).
type Addr<'a> = (i32, &'a str, IpNet, Option<Place>);

/// The addresses of `w` that `pick` picks, given their interface (`None`: `lo`), `lo`'s
/// first.
fn on<'a>(w: &'a NodeWiring, pick: impl Fn(Option<&Iface>, &IpNet) -> bool) -> Vec<Addr<'a>> {
    let on_lo = (w.loopback.iter())
        .filter(|a| pick(None, a))
        .map(|a| (LOOPBACK_INDEX, "lo", *a, None));
    let on_ifaces = (w.ifaces.iter()).flat_map(|i| {
        (i.addrs.iter())
            .filter(|a| pick(Some(i), a))
            .map(move |a| (i.index, &*i.name, *a, Some(i.at)))
    });
    on_lo.chain(on_ifaces).collect()
}

/// Whether `w` has address `a` on the same device as `i` (`None`: on `lo`).
fn has(w: &NodeWiring, i: Option<&Iface>, a: &IpNet) -> bool {
    match i {
        None => w.loopback.contains(a),
        Some(i) => crate::kept(w, i) && w.iface(&i.name).is_some_and(|o| o.addrs.contains(a)),
    }
}

/// One netlink burst of `request` (add or delete) for `addrs`.
fn send(
    cx: &mut InitCtx<'_>,
    request: fn(&mut nsfleet_netlink::Batch, u32, i32, std::net::IpAddr, u8),
    addrs: &[Addr<'_>],
) -> anyhow::Result<()> {
    let node = cx.node;
    cx.send_each(
        addrs,
        |out, &&(index, _, a, _)| out.add(|b, seq| request(b, seq, index, a.addr, a.prefix)),
        |&&(_, name, a, at)| Subject {
            text: format!("address {a} on {}:{name}", node.name()),
            at,
        },
    )
}

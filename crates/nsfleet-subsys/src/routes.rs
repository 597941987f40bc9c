//! Static routes, once addresses exist (a gateway must be on a connected subnet).

use nsfleet_core::{InitCtx, Node, Phase, Shape, Subsystem};
use nsfleet_netlink::rtnl::{self, Route};
use nsfleet_topology::{NodeWiring, RouteSpec};

pub struct Routes;

impl Subsystem for Routes {
    type State = ();

    fn name(&self) -> &'static str {
        "routes"
    }

    fn phase(&self) -> Phase {
        Phase::Configure
    }

    fn wants(&self, node: &Node) -> bool {
        !node.wiring().routes.is_empty()
    }

    fn init(&self, cx: &mut InitCtx<'_>, _: &mut ()) -> anyhow::Result<()> {
        let w = cx.node.wiring();
        send(cx, rtnl::new_route, w.routes.iter())
    }

    /// Removes the routes the node no longer has; all of them if a device goes or is
    /// re-made or an address changes, since the kernel drops the routes through a device
    /// that goes and those whose gateway or source an address change leaves unreachable
    /// (and which device a gateway's route leaves by is the kernel's choice).
    fn retire(&self, cx: &mut InitCtx<'_>, _: &mut (), was: &Shape) -> anyhow::Result<()> {
        let now = cx.node.wiring();
        let all = !routes_stay(&was.wiring, &now);
        let gone = (was.wiring.routes.iter()).filter(|r| all || !has(&now, r));
        send(cx, rtnl::del_route, gone)
    }

    /// Adds the routes new to the node; all of them after a device or an address changed.
    fn extend(&self, cx: &mut InitCtx<'_>, _: &mut (), was: &Shape) -> anyhow::Result<()> {
        let now = cx.node.wiring();
        let all = !routes_stay(&was.wiring, &now);
        let new = (now.routes.iter()).filter(|r| all || !has(&was.wiring, r));
        send(cx, rtnl::new_route, new)
    }

    // No exit: routes go with the namespace.
}

/// Whether the routes of `was` all survive the change to `now`: every device and every
/// address is still there, the same.
fn routes_stay(was: &NodeWiring, now: &NodeWiring) -> bool {
    let same_addrs =
        |i: &nsfleet_topology::Iface| now.iface(&i.name).is_some_and(|n| n.addrs == i.addrs);
    was.loopback == now.loopback
        && (was.ifaces.iter()).all(|i| crate::kept(now, i) && same_addrs(i))
}

fn has(w: &NodeWiring, r: &RouteSpec) -> bool {
    (w.routes.iter()).any(|o| (o.dst, o.via, o.dev) == (r.dst, r.via, r.dev))
}

/// One netlink burst of `request` (add or delete) for `routes`.
fn send<'r>(
    cx: &mut InitCtx<'_>,
    request: fn(&mut nsfleet_netlink::Batch, u32, &Route),
    routes: impl Iterator<Item = &'r RouteSpec>,
) -> anyhow::Result<()> {
    let node = cx.node;
    cx.send_each(
        routes,
        |out, r| {
            let route = Route {
                dst: r.dst.addr,
                prefix: r.dst.prefix,
                via: r.via,
                oif: r.dev,
            };
            out.add(|b, seq| request(b, seq, &route))
        },
        |r| nsfleet_topology::Subject::new(format!("route {r} on {}", node.name()), r.at),
    )
}

//! Static routes, once addresses exist (a gateway must be on a connected subnet).

use nsfleet_core::{InitCtx, Node, Phase, Subsystem};
use nsfleet_netlink::rtnl::{self, Route};

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
        let node = cx.node;
        cx.send_each(
            &node.wiring().routes,
            |out, r| {
                out.add(|b, seq| {
                    let route = Route {
                        dst: r.dst.addr,
                        prefix: r.dst.prefix,
                        via: r.via,
                        oif: r.dev,
                    };
                    rtnl::new_route(b, seq, &route)
                })
            },
            |r| format!("route {r} on {} (topology line {})", node.name(), r.line),
        )
    }

    // No exit: routes go with the namespace.
}

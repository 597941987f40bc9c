//! Interfaces created from the other end of their veth pair. The kernel cannot bring a
//! veth's far end up in the request that creates it (the end cannot open before the pair
//! is joined), nor enslave it there; so once every link exists, each node brings those
//! ends up itself, and a switch enslaves them to their bridge, one request per end.

use nsfleet_core::{InitCtx, Node, Phase, Subsystem};
use nsfleet_netlink::rtnl;
use nsfleet_topology::{bridge_index, Iface};

pub struct PeerEnds;

fn created_elsewhere(i: &Iface) -> bool {
    i.peer.is_none()
}

impl Subsystem for PeerEnds {
    type State = ();

    fn name(&self) -> &'static str {
        "peer-ends"
    }

    fn phase(&self) -> Phase {
        Phase::Configure
    }

    fn wants(&self, node: &Node) -> bool {
        node.wiring().ifaces.iter().any(created_elsewhere)
    }

    fn init(&self, cx: &mut InitCtx<'_>, _: &mut ()) -> anyhow::Result<()> {
        let node = cx.node;
        let ends = node.wiring().ifaces.iter().filter(|i| created_elsewhere(i));
        let ipv6 = super::ipv6(node);
        cx.send_each(
            ends,
            |out, i| {
                super::link_local_policy(out, i.index, i.bridge.is_some(), ipv6)?;
                out.add(|b, seq| rtnl::set_link(b, seq, i.index, true, i.bridge.map(bridge_index)))
            },
            |i| format!("{}:{} up (topology line {})", node.name(), i.name, i.line),
        )
    }
}

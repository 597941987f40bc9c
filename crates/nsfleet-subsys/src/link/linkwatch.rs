//! The kernel's link watch, done now for each veth end of a node rather than when the
//! kernel's worker gets to it. A veth end gets carrier when its peer opens, and what
//! follows from that waits for the link watch: the end's queueing discipline (until then
//! it drops every frame it sends), its operational state, and a bridge port's move to
//! forwarding. The worker is one for the whole machine and takes the RTNL lock; with
//! other fleets making and removing thousands of links beside this one, it was seen
//! still behind 10 s after `up` ended, a switch's trunk and hundreds of its ports still
//! "disabled", and a ping across the fleet unanswered. A request for the link makes the
//! kernel run that link's pending work first (Linux 6.7 and later; older kernels answer
//! and leave it to the worker).
//!
//! In the Start phase: once every node is configured, so both ends of every pair are up,
//! and before any node's software sends its first frame.

use nsfleet_core::{InitCtx, Node, Phase, Shape, Subsystem};
use nsfleet_netlink::rtnl;
use nsfleet_topology::{Iface, Link, Subject};

pub struct LinkWatchNow;

/// A veth end, whichever node made it.
fn is_veth_end(iface: &Iface) -> bool {
    matches!(iface.link, Link::Veth(_) | Link::FarEnd | Link::Host(_))
}

/// Has the kernel do the link watch's work for `ifaces` of the node now.
fn sync<'i>(cx: &mut InitCtx<'_>, ifaces: impl Iterator<Item = &'i Iface>) -> anyhow::Result<()> {
    let node = cx.node;
    cx.send_each(
        ifaces.filter(|i| is_veth_end(i)),
        |out, i| out.add(|b, seq| rtnl::sync_link(b, seq, i.index)),
        |i| Subject::new(format!("{}:{} carrier", node.name(), i.name), i.at),
    )
}

impl Subsystem for LinkWatchNow {
    type State = ();

    fn name(&self) -> &'static str {
        "link-watch"
    }

    fn phase(&self) -> Phase {
        Phase::Start
    }

    fn wants(&self, node: &Node) -> bool {
        node.wiring().ifaces.iter().any(is_veth_end)
    }

    fn init(&self, cx: &mut InitCtx<'_>, _: &mut ()) -> anyhow::Result<()> {
        let wiring = cx.node.wiring();
        sync(cx, wiring.ifaces.iter())
    }

    fn extend(&self, cx: &mut InitCtx<'_>, _: &mut (), was: &Shape) -> anyhow::Result<()> {
        let now = cx.node.wiring();
        sync(
            cx,
            now.ifaces.iter().filter(|i| !crate::kept(&was.wiring, i)),
        )
    }
}

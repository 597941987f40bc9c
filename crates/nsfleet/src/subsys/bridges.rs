//! A switch node's bridges. The kernel caps a bridge at 1,024 ports, so a switch with more
//! ports gets several bridges (`br0`, `br1`, ...), chained by veth pairs inside the
//! switch's namespace (`brj0a` in br0 to `brj0b` in br1, ...): one broadcast domain for
//! the user. No loop, so no STP. Created with the namespace, so that ports find them.

use crate::core::{InitCtx, Node, Phase, Subsystem};
use crate::topology::{bridge_index, join_indices};
use nsfleet_netlink::rtnl::{self, LinkSpec};

pub struct Bridges;

/// One request of the switch's setup, in the order the kernel must see them.
enum Step {
    Bridge(u16),
    /// The veth joining bridge k to bridge k + 1; its far end is enslaved next.
    Join(u16),
    JoinFarEnd(u16),
}

impl Subsystem for Bridges {
    type State = ();

    fn name(&self) -> &'static str {
        "bridges"
    }

    fn phase(&self) -> Phase {
        Phase::Create
    }

    fn wants(&self, node: &Node) -> bool {
        node.config().switch
    }

    fn init(&self, cx: &mut InitCtx<'_>, _: &mut ()) -> anyhow::Result<()> {
        let n = cx.node.wiring().bridges.max(1);
        let steps = (0..n)
            .map(Step::Bridge)
            .chain((0..n - 1).flat_map(|k| [Step::Join(k), Step::JoinFarEnd(k)]));
        cx.send_each(
            steps,
            |b, seq, step| match *step {
                Step::Bridge(k) => rtnl::new_bridge(
                    b,
                    seq,
                    &LinkSpec {
                        name: &format!("br{k}"),
                        index: bridge_index(k),
                        up: true,
                        ..Default::default()
                    },
                ),
                Step::Join(k) => {
                    let (a, z) = join_indices(k);
                    let local = LinkSpec {
                        name: &format!("brj{k}a"),
                        index: a,
                        up: true,
                        master: Some(bridge_index(k)),
                        ..Default::default()
                    };
                    let far = LinkSpec {
                        name: &format!("brj{k}b"),
                        index: z,
                        up: true,
                        ..Default::default()
                    };
                    rtnl::new_veth(b, seq, &local, &far)
                }
                Step::JoinFarEnd(k) => {
                    let far = join_indices(k).1;
                    rtnl::set_link(b, seq, far, true, Some(bridge_index(k + 1)))
                }
            },
            |step| match *step {
                Step::Bridge(k) => format!("bridge br{k}"),
                Step::Join(k) | Step::JoinFarEnd(k) => format!("joining br{k} to br{}", k + 1),
            },
        )
    }

    // No exit: bridges and ports go with the namespace, in cleanup_net's own batch.
}

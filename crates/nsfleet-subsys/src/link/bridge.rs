//! A switch node's bridges. The kernel caps a bridge at 1,024 ports, so a switch with more
//! ports gets several bridges (`br0`, `br1`, ...), chained by veth pairs inside the
//! switch's namespace (`brj0a` in br0 to `brj0b` in br1, ...): one broadcast domain for
//! the user. No loop, so no STP. Created with the namespace, so that ports find them.
//! Ports are the other kinds' ends, enslaved through [`master`] as they are made.

use crate::Ipv6;
use anyhow::Context;
use nsfleet_core::{InitCtx, Node, Phase, Requests, Subsystem};
use nsfleet_netlink::rtnl::{self, LinkSpec};
use nsfleet_topology::{bridge_index, join_indices, Iface};

pub struct Bridges;

/// The bridge a switch's interface is enslaved to: a port, whatever kind of link made it.
pub fn master(iface: &Iface) -> Option<i32> {
    iface.bridge.map(bridge_index)
}

/// One element of the switch's setup, in the order the kernel must see them.
enum Step {
    Bridge(u16),
    /// The veth joining bridge k to bridge k + 1.
    Join(u16),
}

/// A bridge and its joins carry frames, never addresses: none of them gets an IPv6
/// link-local address (which the bridge would otherwise announce on every port).
fn build(out: &mut Requests<'_>, step: &Step, ipv6: Ipv6) -> anyhow::Result<()> {
    match *step {
        Step::Bridge(k) => {
            let spec = LinkSpec {
                name: &format!("br{k}"),
                index: bridge_index(k),
                ..Default::default()
            };
            out.add(|b, seq| rtnl::new_bridge(b, seq, &spec))?;
            // Up only after: a new link counts as ready until the kernel's link watch
            // first looks at it, so one created up gets its link-local address at once.
            crate::link_local_policy(out, spec.index, true, ipv6)?;
            out.add(|b, seq| rtnl::set_link(b, seq, spec.index, true, None))
        }
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
                ..Default::default()
            };
            out.add(|b, seq| rtnl::new_veth(b, seq, &local, &far))?;
            crate::link_local_policy(out, a, true, ipv6)?;
            crate::link_local_policy(out, z, true, ipv6)?;
            // The far end can come up and be enslaved only once the pair exists.
            out.add(|b, seq| rtnl::set_link(b, seq, z, true, Some(bridge_index(k + 1))))
        }
    }
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
        // A switch without IPv6 addresses has no use for IPv6, and pays for it per port:
        // each port coming up adds its ff00::/8 route to the switch's one IPv6 table and
        // walks the whole table (addrconf_add_mroute, rt6_sync_up), under the RTNL lock.
        // That is quadratic in ports: perf at 50,000 routers showed the link watch doing
        // nothing else for minutes. Off before the first port exists.
        let ipv6 = crate::ipv6(cx.node);
        if ipv6 == Ipv6::Off && crate::probe::has_ipv6() {
            for key in [
                "net.ipv6.conf.all.disable_ipv6",
                "net.ipv6.conf.default.disable_ipv6",
            ] {
                cx.write_sysctl(key, "1")
                    .with_context(|| format!("setting {key} = 1"))?;
            }
        }
        let n = cx.node.wiring().bridges.max(1);
        let steps = (0..n).map(Step::Bridge).chain((0..n - 1).map(Step::Join));
        let build = |out: &mut Requests<'_>, step: &Step| build(out, step, ipv6);
        cx.send_each(steps, build, |step| match *step {
            Step::Bridge(k) => format!("bridge br{k}"),
            Step::Join(k) => format!("joining br{k} to br{}", k + 1),
        })
    }

    // No exit: bridges and ports go with the namespace, in cleanup_net's own batch.
}

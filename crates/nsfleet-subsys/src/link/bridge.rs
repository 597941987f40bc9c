//! A switch node's bridge, `br0`, created with the namespace so that ports find it. Ports
//! are the other kinds' ends, enslaved through [`master`] as they are made. A big switch
//! is several switch nodes (its shards, see nsfleet-topology's `link/bridge.rs`), each
//! with its bridge, joined by trunks that are veth ports like any other.

use crate::Ipv6;
use anyhow::Context;
use nsfleet_core::{InitCtx, Node, Phase, Requests, Subsystem};
use nsfleet_netlink::rtnl::{self, LinkSpec};
use nsfleet_topology::{Iface, BRIDGE};

pub struct Bridges;

/// What sends bridged frames through iptables', ip6tables' and arptables' hooks.
const BRIDGE_NETFILTER: [&str; 3] = [
    "net.bridge.bridge-nf-call-iptables",
    "net.bridge.bridge-nf-call-ip6tables",
    "net.bridge.bridge-nf-call-arptables",
];

/// The bridge a switch's interface is enslaved to: a port, whatever kind of link made it.
pub fn master(iface: &Iface) -> Option<i32> {
    iface.bridge.map(nsfleet_topology::bridge_index)
}

/// The switch's bridge, up. It carries frames, never addresses: it gets no IPv6
/// link-local address (which it would otherwise announce on every port).
fn build(out: &mut Requests<'_>, ipv6: Ipv6) -> anyhow::Result<()> {
    let spec = LinkSpec {
        name: BRIDGE.0,
        index: BRIDGE.1,
        ..Default::default()
    };
    out.add(|b, seq| rtnl::new_bridge(b, seq, &spec))?;
    // Up only after: a new link counts as ready until the kernel's link watch first looks
    // at it, so one created up gets its link-local address at once.
    crate::link_local_policy(out, spec.index, true, ipv6)?;
    out.add(|b, seq| rtnl::set_link(b, seq, spec.index, true, None))
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
        // A switch forwards frames; it does not filter them as IP packets. Bridge
        // netfilter, where the kernel has it, starts on in every new namespace and passes
        // each frame a bridge forwards through iptables' hooks (br_nf_*), empty here: at
        // 1,000 image nodes on one management switch, perf put 5% of `deploy` there.
        if crate::probe::has_bridge_netfilter() {
            for key in BRIDGE_NETFILTER {
                cx.write_sysctl(key, "0")
                    .with_context(|| format!("setting {key} = 0"))?;
            }
        }
        cx.send_each(
            [()],
            |out, _| build(out, ipv6),
            |_| format!("bridge {}", BRIDGE.0),
        )
    }

    // No exit: bridges and ports go with the namespace, in cleanup_net's own batch.
}

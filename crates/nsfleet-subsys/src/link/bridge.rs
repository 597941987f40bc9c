//! A switch node's bridge, `br0`, created with the namespace so that ports find it. Ports
//! are the other kinds' ends, enslaved through [`master`] as they are made. A big switch
//! is several switch nodes (its shards, see nsfleet-topology's `link/bridge.rs`), each
//! with its bridge, joined by trunks that are veth ports like any other.

use crate::Ipv6;
use anyhow::Context;
use nsfleet_core::{InitCtx, Node, Phase, Requests, Subsystem};
use nsfleet_netlink::rtnl::{self, LinkSpec, Snooping};
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
/// link-local address (which it would otherwise announce on every port). A querier
/// switch's bridge snoops (see [`querier`]).
fn build(out: &mut Requests<'_>, ipv6: Ipv6, querier: bool) -> anyhow::Result<()> {
    let spec = LinkSpec {
        name: BRIDGE.0,
        index: BRIDGE.1,
        ..Default::default()
    };
    let snooping = querier.then_some(&QUERIER_SNOOPING);
    out.add(|b, seq| rtnl::new_bridge(b, seq, &spec, snooping))?;
    // Up only after: a new link counts as ready until the kernel's link watch first looks
    // at it, so one created up gets its link-local address at once.
    let ipv6 = if querier { Ipv6::Quiet } else { ipv6 };
    crate::link_local_policy(out, spec.index, true, ipv6)?;
    out.add(|b, seq| rtnl::set_link(b, seq, spec.index, true, None))
}

/// A querier's snooping. Answers to its queries are awaited 100 ms (the kernel's default
/// is 10 s): the bridge trusts its own querier only after that long, and floods every
/// report meanwhile. With 1 s, the management switch of 1,000 image nodes still flooded
/// the reports of the nodes wired in that second: the first node received 1,032 frames
/// while `deploy` ran, against 373 with 100 ms.
const QUERIER_SNOOPING: Snooping = Snooping {
    query_response_interval_cs: 10,
};

/// The bridge as its segment's querier, once it is up: an MLD query needs an IPv6 source
/// address on the bridge, without which the bridge keeps flooding.
fn query(out: &mut Requests<'_>) -> anyhow::Result<()> {
    out.add(|b, seq| rtnl::new_addr(b, seq, BRIDGE.1, QUERIER_ADDR.into(), 64))?;
    out.add(|b, seq| rtnl::bridge_querier(b, seq, BRIDGE.1))
}

/// The source of a querier's MLD queries: the switch's namespace routes nothing, and no
/// node sees this address but as the queries' source.
const QUERIER_ADDR: std::net::Ipv6Addr = std::net::Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);

/// Whether `node`'s bridge snoops and queries ([`nsfleet_topology::NodeConfig::querier`]).
/// A node that runs software has IPv6 link-local addresses, as a container has, and sends
/// multicast listener reports and router solicitations; a bridge that floods them sends
/// each to every other port. Measured at 1,000 image nodes on a containerlab management
/// switch: what the first node received while `deploy` ran went from 4,900 frames to 373,
/// and `deploy` from 10.1 s to 5.3-5.9 s (perf: the receivers' fib6_node_lookup,
/// ip6_pol_route, ipv6_chk_mcast_addr, and br_flood, gone). Its queries stay MLDv1, the
/// kernel's default: hosts then answer with v1 reports, which go to routers only (with v2
/// queries each node still received 4,800 frames). Not for every switch: snooping makes
/// each port that comes up re-arm the other ports' multicast timers (configure 0.33 -> 0.5
/// s there), and a lab switch that floods is what users of the others expect.
fn querier(node: &Node) -> bool {
    node.config().querier
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
        // An Open vSwitch switch's ports are ovs-vswitchd's (see `ovs.rs`).
        node.config().switch && node.config().ovs.is_none()
    }

    fn init(&self, cx: &mut InitCtx<'_>, _: &mut ()) -> anyhow::Result<()> {
        // A switch without IPv6 addresses has no use for IPv6, and pays for it per port:
        // each port coming up adds its ff00::/8 route to the switch's one IPv6 table and
        // walks the whole table (addrconf_add_mroute, rt6_sync_up), under the RTNL lock.
        // That is quadratic in ports: perf at 50,000 routers showed the link watch doing
        // nothing else for minutes. Off before the first port exists.
        let ipv6 = crate::ipv6(cx.node);
        let querier = querier(cx.node) && crate::probe::has_ipv6();
        // A querier's bridge keeps IPv6, for its queries: only its ports go without
        // (`default`, written once the bridge exists).
        if ipv6 == Ipv6::Off && crate::probe::has_ipv6() && !querier {
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
        let name = |_: &()| format!("bridge {}", BRIDGE.0);
        cx.send_each([()], |out, _| build(out, ipv6, querier), name)?;
        if querier {
            cx.send_each([()], |out, _| query(out), name)?;
            // Its ports without IPv6, as any switch's.
            if ipv6 == Ipv6::Off {
                let key = "net.ipv6.conf.default.disable_ipv6";
                cx.write_sysctl(key, "1")
                    .with_context(|| format!("setting {key} = 1"))?;
            }
        }
        Ok(())
    }

    // No exit: bridges and ports go with the namespace, in cleanup_net's own batch.
}

//! Dummy interfaces. Made in the Wire phase, like a veth, in the node itself: nothing else
//! is needed. Made down, told about link-local addresses, then brought up, as a VXLAN
//! device is; the addresses subsystem gives it its addresses.

use super::{At, LinkKind};
use nsfleet_core::{Node, Phase, Requests};
use nsfleet_netlink::rtnl::{self, LinkSpec};
use nsfleet_topology::{Iface, Link, Subject};

pub struct Dummies;

impl LinkKind for Dummies {
    fn name(&self) -> &'static str {
        "dummy"
    }

    fn phase(&self) -> Phase {
        Phase::Wire
    }

    fn makes(&self, iface: &Iface) -> bool {
        iface.link == Link::Dummy
    }

    fn wire(&self, out: &mut Requests<'_>, at: &At<'_>, i: &Iface) -> anyhow::Result<()> {
        let spec = LinkSpec {
            name: &i.name,
            index: i.index,
            mtu: i.mtu,
            mac: i.mac,
            ..Default::default()
        };
        out.add(|b, seq| rtnl::new_dummy(b, seq, &spec))?;
        crate::link_local_policy(out, i.index, false, at.ipv6)?;
        out.add(|b, seq| rtnl::set_link(b, seq, i.index, true, None))
    }

    fn describe(&self, node: &Node, i: &Iface) -> Subject {
        Subject::new(format!("dummy {}:{}", node.name(), i.name), i.at)
    }
}

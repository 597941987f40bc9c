//! VXLAN tunnel endpoints. Made in the Configure phase: the underlay may be a veth made
//! from the other side, which exists only once the Wire phase is over everywhere; and
//! before the addresses subsystem, which gives the device its own addresses. The device is
//! made down, told about link-local addresses, then brought up (a device made up gets its
//! link-local address before any later request could stop it). On a switch it is a port.

use super::{bridge, At, LinkKind};
use nsfleet_core::{Node, Phase, Requests};
use nsfleet_netlink::rtnl::{self, LinkSpec};
use nsfleet_topology::{Iface, Subject};

pub struct Vxlans;

impl LinkKind for Vxlans {
    fn name(&self) -> &'static str {
        "vxlan"
    }

    fn phase(&self) -> Phase {
        Phase::Configure
    }

    fn makes(&self, iface: &Iface) -> bool {
        iface.link.as_vxlan().is_some()
    }

    fn wire(&self, out: &mut Requests<'_>, at: &At<'_>, i: &Iface) -> anyhow::Result<()> {
        let v = i.link.as_vxlan().expect("made by this kind");
        let spec = LinkSpec {
            name: &i.name,
            index: i.index,
            mtu: i.mtu,
            mac: i.mac,
            master: bridge::master(i),
            ..Default::default()
        };
        let vx = rtnl::Vxlan {
            vni: v.vni,
            remote: v.remote,
            local: v.local,
            port: v.port,
            underlay: v.underlay,
        };
        out.add(|b, seq| rtnl::new_vxlan(b, seq, &spec, &vx))?;
        crate::link_local_policy(out, i.index, i.bridge.is_some(), at.ipv6)?;
        out.add(|b, seq| rtnl::set_link(b, seq, i.index, true, None))
    }

    fn describe(&self, node: &Node, i: &Iface) -> Subject {
        let v = i.link.as_vxlan().expect("made by this kind");
        let text = format!(
            "vxlan {}:{} (vni {}, remote {})",
            node.name(),
            i.name,
            v.vni,
            v.remote,
        );
        Subject::new(text, i.at)
    }
}

//! Veth pairs between nodes. Each pair is one request, sent from the node that makes it
//! (a switch, for its ports): the local end is named, numbered, enslaved to its bridge and
//! up; the far end is placed straight into its node's namespace (IFLA_NET_NS_FD) with its
//! own name, index and up flag. No create-then-move-then-rename, and a switch's ports go
//! out a full batch per `sendmsg`.
//!
//! The kernel cannot bring a veth's far end up in the request that creates it (the end
//! cannot open before the pair is joined), nor enslave it there: so once every link
//! exists, each node brings its far ends up itself ([`FarEnds`]), and a switch enslaves
//! them to their bridge, one request per end.

use super::{bridge, At, LinkKind};
use nsfleet_core::{Node, Phase, Requests};
use nsfleet_netlink::rtnl::{self, LinkSpec};
use nsfleet_sys as sys;
use nsfleet_topology::{Iface, Link, Subject};

/// The ends a node makes.
pub struct Veths;

/// The ends made from the other side.
pub struct FarEnds;

impl LinkKind for Veths {
    fn name(&self) -> &'static str {
        "links"
    }

    fn phase(&self) -> Phase {
        Phase::Wire
    }

    fn makes(&self, iface: &Iface) -> bool {
        iface.link.as_veth().is_some()
    }

    fn wire(&self, out: &mut Requests<'_>, at: &At<'_>, iface: &Iface) -> anyhow::Result<()> {
        let peer = iface.link.as_veth().expect("made by this kind");
        let fd = super::peer_netns(out, at, &peer.node)?;
        let local = LinkSpec {
            name: &iface.name,
            index: iface.index,
            up: true,
            mtu: iface.mtu,
            mac: iface.mac,
            master: bridge::master(iface),
            ..Default::default()
        };
        let far = LinkSpec {
            name: &peer.name,
            index: peer.index,
            up: true,
            mtu: peer.mtu,
            mac: peer.mac,
            netns_fd: Some(fd),
            ..Default::default()
        };
        out.add(|b, seq| rtnl::new_veth(b, seq, &local, &far))?;
        // Before the far end comes up and gives this end carrier.
        crate::link_local_policy(out, iface.index, iface.bridge.is_some(), at.ipv6)
    }

    fn describe(&self, node: &Node, iface: &Iface) -> Subject {
        let peer = iface.link.as_veth().expect("made by this kind");
        let text = format!(
            "link {}:{} <-> {}:{}",
            node.name(),
            iface.name,
            peer.node,
            peer.name,
        );
        Subject::new(text, iface.at)
    }
}

impl LinkKind for FarEnds {
    fn name(&self) -> &'static str {
        "peer-ends"
    }

    fn phase(&self) -> Phase {
        Phase::Configure
    }

    fn makes(&self, iface: &Iface) -> bool {
        iface.link == Link::FarEnd
    }

    fn wire(&self, out: &mut Requests<'_>, at: &At<'_>, i: &Iface) -> anyhow::Result<()> {
        crate::link_local_policy(out, i.index, i.bridge.is_some(), at.ipv6)?;
        out.add(|b, seq| rtnl::set_link(b, seq, i.index, true, bridge::master(i)))
    }

    /// In the node's namespace (its worker entered it): an end whose node sums its own
    /// checksums has its transmit checksum offload turned off.
    fn finish(&self, _node: &Node, i: &Iface) -> anyhow::Result<()> {
        if i.software_checksums {
            sys::set_offload(&i.name, sys::Offload::TxChecksum, false)
                .map_err(|e| anyhow::anyhow!("turning its transmit checksum offload off: {e}"))?;
        }
        Ok(())
    }

    fn describe(&self, node: &Node, i: &Iface) -> Subject {
        Subject::new(format!("{}:{} up", node.name(), i.name), i.at)
    }
}

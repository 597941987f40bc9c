//! Veth pairs between nodes. Each pair is one request, sent from the node that creates it
//! (a switch, for its ports): the local end is named, numbered, enslaved to its bridge and
//! up; the peer end is placed straight into its node's namespace (IFLA_NET_NS_FD) with its
//! own name, index and up flag. No create-then-move-then-rename, and a switch's ports go
//! out a full batch per `sendmsg`.

use crate::core::{InitCtx, Node, Phase, Subsystem};
use crate::topology::{bridge_index, Iface, PeerNs};
use anyhow::anyhow;
use nsfleet_netlink::rtnl::{self, LinkSpec};
use std::os::fd::{AsRawFd, OwnedFd};

pub struct Links;

fn peer_node(iface: &Iface) -> Option<&str> {
    match &iface.peer.as_ref()?.ns {
        PeerNs::Node(n) => Some(n),
        PeerNs::Host { .. } => None,
    }
}

impl Subsystem for Links {
    type State = ();

    fn name(&self) -> &'static str {
        "links"
    }

    fn phase(&self) -> Phase {
        Phase::Wire
    }

    fn wants(&self, node: &Node) -> bool {
        node.wiring().ifaces.iter().any(|i| peer_node(i).is_some())
    }

    fn init(&self, cx: &mut InitCtx<'_>, _: &mut ()) -> anyhow::Result<()> {
        let node = cx.node;
        // A descriptor of each peer's namespace, held only while its request is in flight.
        let mut pairs: Vec<(&Iface, OwnedFd)> = Vec::new();
        for iface in &node.wiring().ifaces {
            let Some(peer) = peer_node(iface) else {
                continue;
            };
            let fd = cx
                .peer(peer)
                .and_then(|p| p.dup_netns())
                .ok_or_else(|| anyhow!("link {} to {peer}: {peer} is gone", iface.name))?;
            pairs.push((iface, fd));
        }
        let link_local = super::link_local(node);
        cx.send_each(
            pairs,
            |out, (iface, fd)| {
                out.add(|b, seq| {
                    let peer = iface.peer.as_ref().expect("filtered above");
                    let local = LinkSpec {
                        name: &iface.name,
                        index: iface.index,
                        up: true,
                        mtu: iface.mtu,
                        mac: iface.mac,
                        master: iface.bridge.map(bridge_index),
                        ..Default::default()
                    };
                    let far = LinkSpec {
                        name: &peer.name,
                        index: peer.index,
                        up: true,
                        mtu: peer.mtu,
                        mac: peer.mac,
                        netns_fd: Some(fd.as_raw_fd()),
                        ..Default::default()
                    };
                    rtnl::new_veth(b, seq, &local, &far)
                });
                // Before the far end comes up and gives this end carrier.
                super::link_local_policy(out, iface, link_local);
            },
            |(iface, _)| {
                let peer = iface.peer.as_ref().expect("filtered above");
                format!(
                    "link {}:{} <-> {}:{} (topology line {})",
                    node.name(),
                    iface.name,
                    peer_node(iface).unwrap_or("host"),
                    peer.name,
                    iface.line
                )
            },
        )
    }

    // No exit: deleting either end of a veth deletes the pair, and every end lives in a
    // node's namespace, which cleanup_net takes down with its devices in one batch.
}

//! Veth pairs between nodes. Each pair is one request, sent from the node that creates it
//! (a switch, for its ports): the local end is named, numbered, enslaved to its bridge and
//! up; the peer end is placed straight into its node's namespace (IFLA_NET_NS_FD) with its
//! own name, index and up flag. No create-then-move-then-rename, and a switch's ports go
//! out a full batch per `sendmsg`.

use anyhow::{anyhow, Context};
use nsfleet_core::{InitCtx, Node, Phase, Subsystem};
use nsfleet_netlink::rtnl::{self, LinkSpec};
use nsfleet_topology::{bridge_index, Iface, PeerNs};
use std::sync::Arc;

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
        let (nodes, ipv6) = (cx.peers(), super::ipv6(node));
        let ifaces = node.wiring().ifaces.iter();
        let pairs = ifaces.filter_map(|i| Some((i, peer_node(i)?)));
        cx.send_each(
            pairs,
            |out, (iface, peer_name)| {
                // A descriptor of the peer's namespace, open only while its batch is.
                let dup = |p: &Arc<Node>| p.with_netns(|fd| fd.try_clone_to_owned());
                let fd = (nodes.get(peer_name).and_then(dup))
                    .ok_or_else(|| anyhow!("{peer_name} is gone"))?
                    .with_context(|| format!("a descriptor of {peer_name}'s namespace"))?;
                let fd = out.hold(fd);
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
                    netns_fd: Some(fd),
                    ..Default::default()
                };
                out.add(|b, seq| rtnl::new_veth(b, seq, &local, &far))?;
                // Before the far end comes up and gives this end carrier.
                super::link_local_policy(out, iface.index, iface.bridge.is_some(), ipv6)
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

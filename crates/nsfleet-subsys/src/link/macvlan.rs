//! The macvlans a switch with macvlan ports makes, one per node linked to it, each placed
//! straight into its node's namespace (IFLA_NET_NS_FD) with its name, index, MTU and MAC,
//! a full batch per `sendmsg`, as veth ports are. The node brings its end up and
//! configures it like a veth's far end ([`super::veth::FarEnds`]).
//!
//! They hang from lower devices of their own, each one end of a veth pair whose other end
//! is a port of the switch's bridge, made before the macvlans on it (why lowers of a
//! thousand, and not the bridge itself: nsfleet-topology's `link/macvlan.rs`). A
//! macvlan's frames to a sibling go straight to it; the others go through its lower's
//! pair to the bridge, which joins every lower and the switch's other ports.

use super::At;
use anyhow::Context;
use nsfleet_core::{InitCtx, Node, Phase, Requests, Shape, Subsystem};
use nsfleet_netlink::rtnl::{self, LinkSpec};
use nsfleet_netlink::Batch;
use nsfleet_topology::link::macvlan::{lower, lower_port};
use nsfleet_topology::{MacvlanPort, Peer, Subject, BRIDGE};
use std::collections::HashSet;

pub struct Macvlans;

/// Lower `k` and its pair's end on the bridge, made down; [`open_lower`] brings them up.
fn make_lower(out: &mut Requests<'_>, k: u16) -> anyhow::Result<()> {
    let ((port_name, port), (lower_name, low)) = (lower_port(k), lower(k));
    let port_spec = LinkSpec {
        name: &port_name,
        index: port,
        master: Some(BRIDGE.1),
        ..Default::default()
    };
    let lower_spec = LinkSpec {
        name: &lower_name,
        index: low,
        ..Default::default()
    };
    out.add(|b, seq| rtnl::new_veth(b, seq, &port_spec, &lower_spec))?;
    // They carry frames, never addresses.
    out.add(|b, seq| rtnl::no_link_local(b, seq, port))?;
    out.add(|b, seq| rtnl::no_link_local(b, seq, low))
}

/// Brings lower `k`'s pair up in an order that leaves nothing to the kernel's link
/// watch. A device gets its queueing discipline when it opens with carrier, or else when
/// the link watch gets to its carrier event; a veth end has carrier only once both ends
/// are up, so the end opened first would wait for the link watch, which may have
/// thousands of macvlans' events before it (it works through 100 a second), and drop
/// every frame meanwhile. So the lower opens, the port opens (with carrier), and the
/// lower opens again (with carrier). The port, enslaved down, is enabled as it comes up.
fn open_lower(out: &mut Requests<'_>, k: u16) -> anyhow::Result<()> {
    let (port, low) = (lower_port(k).1, lower(k).1);
    for (index, up) in [(low, true), (port, true), (low, false), (low, true)] {
        out.add(|b, seq| rtnl::set_link(b, seq, index, up, None))?;
    }
    Ok(())
}

/// Whether the node has a link of index `index`.
fn has_link(cx: &mut InitCtx<'_>, index: i32) -> anyhow::Result<bool> {
    let sock = cx.rtnl().context("a netlink socket in the switch")?;
    let mut b = Batch::new();
    rtnl::get_link(&mut b, sock.next_seq(), index);
    match sock.dump(&b, |_| {}) {
        Ok(()) => Ok(true),
        Err(e) if e.errno == libc::ENODEV => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// How many lowers `ports` hang from (lowers are numbered from 0, in port order).
fn lowers(ports: &[MacvlanPort]) -> u16 {
    ports.iter().map(|p| p.lower + 1).max().unwrap_or(0)
}

impl Macvlans {
    /// Makes lowers `from..` of the node's ports, then `ports`.
    fn make<'p>(
        &self,
        cx: &mut InitCtx<'_>,
        from: u16,
        ports: impl Iterator<Item = &'p MacvlanPort>,
    ) -> anyhow::Result<()> {
        let node = cx.node;
        let wiring = node.wiring();
        let describe_lower =
            |k: &u16| format!("{}:{} (a lower of its macvlans)", node.name(), lower(*k).0);
        cx.send_each(
            from..lowers(&wiring.macvlans),
            |out, k| make_lower(out, *k),
            describe_lower,
        )?;
        cx.send_each(
            from..lowers(&wiring.macvlans),
            |out, k| open_lower(out, *k),
            describe_lower,
        )?;
        let at = At {
            node,
            peers: cx.peers(),
            ipv6: crate::ipv6(node),
        };
        cx.send_each(
            ports,
            |out, p| {
                let fd = super::peer_netns(out, &at, &p.peer.node)?;
                let spec = LinkSpec {
                    name: &p.peer.name,
                    index: p.peer.index,
                    mtu: p.peer.mtu,
                    mac: p.peer.mac,
                    netns_fd: Some(fd),
                    ..Default::default()
                };
                out.add(|b, seq| rtnl::new_macvlan(b, seq, &spec, lower(p.lower).1))
            },
            |p| describe(node, p),
        )
    }
}

/// A port as errors name it, with where the topology file wrote its link.
fn describe(node: &Node, p: &MacvlanPort) -> Subject {
    let text = format!(
        "macvlan {}:{} -> {}:{}",
        node.name(),
        p.name,
        p.peer.node,
        p.peer.name,
    );
    Subject::new(text, p.at)
}

impl Subsystem for Macvlans {
    type State = ();

    fn name(&self) -> &'static str {
        "macvlans"
    }

    /// Once every node exists (the far ends' namespaces), after the bridge (Create).
    fn phase(&self) -> Phase {
        Phase::Wire
    }

    fn wants(&self, node: &Node) -> bool {
        !node.wiring().macvlans.is_empty()
    }

    fn init(&self, cx: &mut InitCtx<'_>, _: &mut ()) -> anyhow::Result<()> {
        let wiring = cx.node.wiring();
        self.make(cx, 0, wiring.macvlans.iter())
    }

    /// Makes the lowers and ports that are new in the switch's shape. A port that goes
    /// is removed from its node's side, where the macvlan is (the node's end goes, in
    /// `FarEnds`); a lower left without macvlans stays until the switch goes (removing it
    /// would take the macvlans of nodes not yet removed with it, which an undo could not
    /// put back).
    fn extend(&self, cx: &mut InitCtx<'_>, _: &mut (), was: &Shape) -> anyhow::Result<()> {
        let now = cx.node.wiring();
        let old = &was.wiring.macvlans;
        // A far end changed (its MAC, say) is made again: its node deleted the old one.
        // In a set: a switch may have 50,000 of them.
        let had: HashSet<&Peer> = old.iter().map(|p| &p.peer).collect();
        let new = (now.macvlans.iter()).filter(|p| !had.contains(&p.peer));
        // A lower outlives its last macvlan (a shrunk switch keeps it, see above).
        let mut from = lowers(old);
        while from < lowers(&now.macvlans) && has_link(cx, lower(from).1)? {
            from += 1;
        }
        self.make(cx, from, new)
    }

    // No exit: a macvlan dies with its node's namespace, or with its lower's.
}

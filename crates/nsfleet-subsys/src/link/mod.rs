//! Making links in the kernel, one file per kind of link behind one interface
//! ([`LinkKind`]): [`veth`] (pairs between nodes, and their far ends), [`host`] (pairs to
//! the host's namespace), [`vxlan`] (tunnel endpoints) and [`dummy`] (interfaces that lead
//! nowhere); and [`bridge`], a switch's
//! bridges, which the other kinds' ends on a switch are ports of, and [`macvlan`], the
//! macvlans a switch makes for its nodes, on lower devices joined to its bridge
//! (subsystems of their own, not `LinkKind`s: neither is an interface of the node that
//! makes it), and [`linkwatch`], which has the kernel finish each veth end's carrier
//! change before any node's software runs. The
//! same names in nsfleet-topology's `link/` hold each kind's syntax and plan; here is how
//! each is wired and unwired.
//!
//! A kind is a subsystem through [`Wired`]: the adapter enters the node, lets the kind
//! prepare, sends each interface's requests in full batches (one `sendmsg` per batch),
//! and lets the kind finish. A kind knows nothing of the others.

pub mod bridge;
pub mod dummy;
pub mod host;
pub mod linkwatch;
pub mod loose;
pub mod macvlan;
pub mod veth;
pub mod vxlan;

use crate::Ipv6;
use anyhow::{anyhow, Context};
use nsfleet_core::{InitCtx, Node, NodeTable, Phase, Requests, Shape, Subsystem};
use nsfleet_netlink::rtnl;
use nsfleet_topology::{Iface, Subject};
use std::os::fd::RawFd;

/// Where a link is being made: the node, the fleet's nodes (for the far ends' namespaces),
/// and the node's IPv6 policy, which decides the new links' link-local addresses.
pub struct At<'a> {
    pub node: &'a Node,
    pub peers: &'a NodeTable,
    pub ipv6: Ipv6,
}

/// A descriptor of node `peer`'s namespace, for a request that places a device there;
/// open only while the batch that names it is.
pub(crate) fn peer_netns(out: &mut Requests<'_>, at: &At<'_>, peer: &str) -> anyhow::Result<RawFd> {
    let node = at
        .peers
        .get(peer)
        .ok_or_else(|| anyhow!("{peer} is gone"))?;
    let fd = (node.with_netns(|fd| fd.try_clone_to_owned()))
        .ok_or_else(|| anyhow!("{peer} is gone"))?
        .with_context(|| format!("a descriptor of {peer}'s namespace"))?;
    Ok(out.hold(fd))
}

/// One kind of link, as the kernel sees it.
pub trait LinkKind: Send + Sync + 'static {
    /// The subsystem's name.
    fn name(&self) -> &'static str;

    /// When its interfaces are made: once the nodes exist (Wire), or once every veth
    /// exists (Configure: an underlay is needed, or the interface was made from elsewhere).
    fn phase(&self) -> Phase;

    /// Whether this kind makes `iface` from the interface's own node.
    fn makes(&self, iface: &Iface) -> bool;

    /// Before any request for `iface` (host links journal the host's end here).
    fn prepare(&self, _node: &Node, _iface: &Iface) -> anyhow::Result<()> {
        Ok(())
    }

    /// Appends the requests, at most [`Requests::MOST`], that make `iface` in `at.node`.
    fn wire(&self, out: &mut Requests<'_>, at: &At<'_>, iface: &Iface) -> anyhow::Result<()>;

    /// Once every interface of this kind on the node exists (host links set up the host's
    /// end here).
    fn finish(&self, _node: &Node, _iface: &Iface) -> anyhow::Result<()> {
        Ok(())
    }

    /// Appends the request that removes `iface` from a live node (a changed fleet). Not
    /// needed at teardown: every device dies with its namespace, in cleanup_net's batch.
    /// Deleting either end of a pair deletes both, so an end made from elsewhere is
    /// deleted from its own node too: the node that made it may be going away whole.
    fn unwire(&self, out: &mut Requests<'_>, iface: &Iface) -> anyhow::Result<()> {
        out.add(|b, seq| rtnl::del_link(b, seq, iface.index))
    }

    /// The interface as an error names it, with where the topology file wrote it.
    fn describe(&self, node: &Node, iface: &Iface) -> Subject;
}

/// A link kind as a subsystem.
pub struct Wired<K>(pub K);

impl<K: LinkKind> Subsystem for Wired<K> {
    type State = ();

    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn phase(&self) -> Phase {
        self.0.phase()
    }

    fn wants(&self, node: &Node) -> bool {
        node.wiring().ifaces.iter().any(|i| self.0.makes(i))
    }

    fn init(&self, cx: &mut InitCtx<'_>, _: &mut ()) -> anyhow::Result<()> {
        let wiring = cx.node.wiring();
        self.make(cx, wiring.ifaces.iter().filter(|i| self.0.makes(i)))
    }

    /// Removes this kind's devices that the node's new shape does not keep as they are.
    fn retire(&self, cx: &mut InitCtx<'_>, _: &mut (), was: &Shape) -> anyhow::Result<()> {
        let (node, now) = (cx.node, cx.node.wiring());
        let gone = (was.wiring.ifaces.iter()).filter(|i| self.0.makes(i) && !crate::kept(&now, i));
        cx.send_each(
            gone,
            |out, i| self.0.unwire(out, i),
            |i| self.0.describe(node, i),
        )
    }

    /// Makes this kind's devices that are new in the node's shape (or changed: re-made).
    fn extend(&self, cx: &mut InitCtx<'_>, _: &mut (), was: &Shape) -> anyhow::Result<()> {
        let now = cx.node.wiring();
        let new = (now.ifaces.iter()).filter(|i| self.0.makes(i) && !crate::kept(&was.wiring, i));
        self.make(cx, new)
    }

    // No exit: a node's devices go with its namespace, in cleanup_net's own batch.
}

impl<K: LinkKind> Wired<K> {
    /// Prepares, wires and finishes `ifaces` of the node, in batches.
    fn make<'i>(
        &self,
        cx: &mut InitCtx<'_>,
        ifaces: impl Iterator<Item = &'i Iface>,
    ) -> anyhow::Result<()> {
        let node = cx.node;
        let ifaces: Vec<&Iface> = ifaces.collect();
        // Errors name the interface as the kernel's errors do: with its topology place.
        let named = |i: &Iface, e: anyhow::Error| nsfleet_core::about(e, self.0.describe(node, i));
        for i in &ifaces {
            self.0.prepare(node, i).map_err(|e| named(i, e))?;
        }
        let at = At {
            node,
            peers: cx.peers(),
            ipv6: crate::ipv6(node),
        };
        cx.send_each(
            ifaces.iter().copied(),
            |out, i| self.0.wire(out, &at, i),
            |i| self.0.describe(node, i),
        )?;
        for i in &ifaces {
            match self.0.finish(node, i) {
                // An undo making again what is still there (a host end's addresses).
                Err(e) if cx.tolerates(&e) => {}
                r => r.map_err(|e| named(i, e))?,
            }
        }
        Ok(())
    }
}

//! VXLAN tunnel endpoints. Made in the Configure phase: the underlay may be a veth made
//! from the other side, which exists only once the Wire phase is over everywhere; and
//! before the addresses subsystem, which gives the device its own addresses. The device is
//! made down, told about link-local addresses, then brought up (a device made up gets its
//! link-local address before any later request could stop it). On a switch it is a port.
//!
//! A tunnel through the host (containerlab's `type: vxlan`) is made from the host's
//! namespace straight into the node's (IFLA_NET_NS_FD): its UDP socket stays the host's,
//! so its packets leave as the host routes them, and the device is the node's from the
//! start (it never appears among the host's interfaces); it goes with the node.

use super::{bridge, At, LinkKind};
use anyhow::{anyhow, Context};
use nsfleet_core::{Node, Phase, Requests};
use nsfleet_locks::{order, Mutex};
use nsfleet_netlink::rtnl::{self, LinkSpec};
use nsfleet_netlink::{Batch, NlSocket};
use nsfleet_topology::{Iface, Subject, VxlanEnd};
use std::os::fd::AsRawFd;

pub struct Vxlans {
    /// A socket in the host's namespace, for tunnels through the host.
    host: Mutex<NlSocket>,
}

impl Vxlans {
    /// Must be called from a thread in the host's namespace.
    pub fn new() -> std::io::Result<Self> {
        Ok(Vxlans {
            host: Mutex::new(order::VXLAN_HOST_SOCKET, NlSocket::open()?),
        })
    }

    /// A tunnel through the host, made from there into the node, down.
    fn make_from_host(&self, node: &Node, i: &Iface, v: &VxlanEnd) -> anyhow::Result<()> {
        let parent = v.through_host.as_ref().and_then(|h| h.parent.as_deref());
        let ns = (node.with_netns(|fd| fd.try_clone_to_owned()))
            .ok_or_else(|| anyhow!("{} is gone", node.name()))?
            .context("a descriptor of the node's namespace")?;
        let mut sock = self.host.lock();
        let underlay = match parent {
            Some(p) => Some(
                (super::host::lookup(&mut sock, p)?)
                    .ok_or_else(|| anyhow!("the host has no interface {p}"))?
                    .index,
            ),
            None => None,
        };
        let spec = LinkSpec {
            name: &i.name,
            index: i.index,
            mtu: i.mtu,
            mac: i.mac,
            netns_fd: Some(ns.as_raw_fd()),
            ..Default::default()
        };
        let mut b = Batch::new();
        rtnl::new_vxlan(&mut b, sock.next_seq(), &spec, &tunnel(v, underlay));
        sock.execute_all(&b).map_err(|e| anyhow!("{e}"))
    }
}

fn tunnel(v: &VxlanEnd, underlay: Option<i32>) -> rtnl::Vxlan {
    rtnl::Vxlan {
        vni: v.vni,
        remote: v.remote,
        local: v.local,
        port: v.port,
        underlay,
    }
}

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

    fn prepare(&self, node: &Node, i: &Iface) -> anyhow::Result<()> {
        match i.link.as_vxlan().expect("made by this kind") {
            v if v.through_host.is_some() => self.make_from_host(node, i, v),
            _ => Ok(()),
        }
    }

    fn wire(&self, out: &mut Requests<'_>, at: &At<'_>, i: &Iface) -> anyhow::Result<()> {
        let v = i.link.as_vxlan().expect("made by this kind");
        if v.through_host.is_none() {
            let spec = LinkSpec {
                name: &i.name,
                index: i.index,
                mtu: i.mtu,
                mac: i.mac,
                master: bridge::master(i),
                ..Default::default()
            };
            let vx = tunnel(v, v.underlay);
            out.add(|b, seq| rtnl::new_vxlan(b, seq, &spec, &vx))?;
        }
        crate::link_local_policy(out, i.index, i.bridge.is_some(), at.ipv6)?;
        out.add(|b, seq| rtnl::set_link(b, seq, i.index, true, None))
    }

    fn describe(&self, node: &Node, i: &Iface) -> Subject {
        let v = i.link.as_vxlan().expect("made by this kind");
        let through = if v.through_host.is_some() {
            ", through the host"
        } else {
            ""
        };
        let text = format!(
            "vxlan {}:{} (vni {}, remote {}{through})",
            node.name(),
            i.name,
            v.vni,
            v.remote,
        );
        Subject::new(text, i.at)
    }
}

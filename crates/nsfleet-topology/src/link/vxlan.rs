//! VXLAN tunnel endpoints: `[[vxlan]]` tables. A VXLAN device carries a node's (or a
//! switch's) frames over UDP to a far endpoint, which may be another node of the fleet or
//! a machine elsewhere: the link that fleets spanning hosts are joined by.
//!
//! ```toml
//! [[vxlan]]
//! at = "r1:vx0"            # node and device name
//! vni = 42                 # the VXLAN network identifier
//! remote = "10.0.0.2"      # the far endpoint
//! dev = "eth0"             # the underlay interface (optional)
//! local = "10.0.0.1"       # the source address (optional)
//! port = 4789              # the UDP port (optional; IANA's by default)
//! addrs = ["192.168.0.1/24"]
//! mtu = 1450
//! ```

use crate::decl::{value, EndDecl, Spanned};
use crate::error::Ctx;
use crate::link::{Link, VxlanEnd};
use crate::resolve::plan::Plan;
use crate::TopologyError;
use serde::Deserialize;
use std::net::IpAddr;

/// IANA's port for VXLAN.
pub const DEFAULT_PORT: u16 = 4789;
/// VNIs are 24 bits.
const MAX_VNI: i64 = (1 << 24) - 1;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct VxlanSection {
    at: Spanned<String>,
    vni: Spanned<i64>,
    remote: Spanned<String>,
    local: Option<Spanned<String>>,
    port: Option<Spanned<i64>>,
    dev: Option<Spanned<String>>,
    #[serde(default)]
    addrs: Vec<Spanned<String>>,
    mtu: Option<Spanned<i64>>,
}

/// A `[[vxlan]]`: a VXLAN device on one node. Read after every other link, so that its
/// underlay `dev` may be any interface of the node.
pub(crate) fn parse(
    cx: &Ctx<'_>,
    v: &Spanned<VxlanSection>,
    plan: &mut Plan,
) -> Result<(), TopologyError> {
    let sec = v.get_ref();
    let end = super::device_end(cx, &sec.at, &sec.addrs, sec.mtu.as_ref(), "r1:vx0")?;
    let vni = match *sec.vni.get_ref() {
        n @ 1..=MAX_VNI => n as u32,
        n => return Err(cx.err(sec.vni.span(), format!("vni {n}: expected 1 to {MAX_VNI}"))),
    };
    let ip = |s: &Spanned<String>| {
        value(cx, s, |t: &str| {
            t.parse::<IpAddr>()
                .map_err(|_| format!("expected an IP address, like \"10.0.0.2\", got {t:?}"))
        })
    };
    let remote = ip(&sec.remote)?;
    let local = sec.local.as_ref().map(ip).transpose()?;
    if let (Some(l), Some(at)) = (local, &sec.local) {
        if l.is_ipv4() != remote.is_ipv4() {
            return Err(cx.err(at.span(), "local and remote are not of the same IP version"));
        }
    }
    let port = match sec.port.as_ref() {
        None => DEFAULT_PORT,
        Some(p) => match *p.get_ref() {
            n @ 1..=65535 => n as u16,
            n => return Err(cx.err(p.span(), format!("port {n}: expected 1 to 65535"))),
        },
    };
    let vx = VxlanEnd {
        vni,
        remote,
        local,
        port,
        underlay: None,
        through_host: None,
    };
    let dev = sec.dev.as_ref().map(|d| d.get_ref().as_str());
    plan.add_vxlan(end, vx, dev, cx.place(v.span()))
        .map_err(|m| cx.err(v.span(), m))
}

impl Plan {
    /// A VXLAN device on `end.node` whose packets leave through the host (made from the
    /// host's namespace). The host has one tunnel socket per UDP port and family, shared
    /// by every such device of the fleet: their VNIs on a port must differ.
    pub fn add_host_vxlan(
        &mut self,
        end: EndDecl,
        vx: VxlanEnd,
        at: crate::Place,
    ) -> Result<(), String> {
        let i = self.find(&end.node)?;
        if self.is_switch_at(i) {
            return Err(format!(
                "{} is a switch: a tunnel through the host belongs on a node",
                end.node
            ));
        }
        let key = (vx.vni, vx.port, vx.remote.is_ipv6());
        let twin = (self.wiring.iter()).flat_map(|w| &w.ifaces).find(|o| {
            (o.link.as_vxlan()).is_some_and(|t| {
                t.through_host.is_some() && (t.vni, t.port, t.remote.is_ipv6()) == key
            })
        });
        if let Some(o) = twin {
            return Err(format!(
                "another tunnel through the host has VNI {} on UDP port {} ({}, line {}): the host takes one per VNI and port",
                vx.vni, vx.port, o.name, o.at.line
            ));
        }
        self.claim(&end.addrs, at)?;
        self.push_iface(i, &end, Link::Vxlan(vx), at)?;
        Ok(())
    }

    /// A VXLAN device on `end.node`, its packets leaving by the node's interface `dev`.
    pub fn add_vxlan(
        &mut self,
        end: EndDecl,
        mut vx: VxlanEnd,
        dev: Option<&str>,
        at: crate::Place,
    ) -> Result<(), String> {
        let i = self.find(&end.node)?;
        // The kernel keeps one device per VNI, UDP port and address family in a
        // namespace (vxlan_vni_in_use: EEXIST), which would fail the run half-way.
        let twin = (self.wiring_of(i).ifaces.iter()).find(|o| {
            o.link.as_vxlan().is_some_and(|t| {
                (t.vni, t.port, t.remote.is_ipv6()) == (vx.vni, vx.port, vx.remote.is_ipv6())
            })
        });
        if let Some(o) = twin {
            return Err(format!(
                "{} already has a VXLAN device of VNI {} on UDP port {} ({}, line {}): the kernel takes one per VNI and port in a namespace",
                end.node, vx.vni, vx.port, o.name, o.at.line
            ));
        }
        if let Some(d) = dev {
            let index = self.iface_index(i, d).ok_or_else(|| {
                format!("{} has no interface {d:?} to carry the tunnel", end.node)
            })?;
            vx.underlay = Some(index);
        }
        self.claim(&end.addrs, at)?;
        let underlay = vx.underlay.is_some();
        let (on, ..) = self.push_iface(i, &end, Link::Vxlan(vx), at)?;
        if underlay && on != i {
            return Err(format!(
                "a tunnel with `dev` on a switch of more than {} ports: the tunnel would be in another of its shards than its underlay",
                crate::link::bridge::PORTS_PER_SHARD
            ));
        }
        Ok(())
    }
}

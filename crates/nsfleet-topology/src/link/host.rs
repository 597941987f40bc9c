//! Host links: a veth pair from a node to the host's namespace (for management), written
//! as a node's `host_link = { iface, host_iface, addrs, host_addrs }`. The host's end is the
//! one thing of a fleet outside it: its name must be unique on the host, so a host link
//! belongs to one written-out node, never to a generated group.

use crate::decl::{value, EndDecl, Spanned};
use crate::error::Ctx;
use crate::link::{HostEnd, Link};
use crate::resolve::plan::Plan;
use crate::{IpNet, Names, TopologyError};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HostLinkSection {
    iface: Spanned<String>,
    host_iface: Spanned<String>,
    #[serde(default)]
    addrs: Vec<Spanned<String>>,
    #[serde(default)]
    host_addrs: Vec<Spanned<String>>,
}

/// A node's `host_link`: a veth pair to the host's namespace.
pub(crate) fn parse(
    cx: &Ctx<'_>,
    h: &Spanned<HostLinkSection>,
    names: &Names,
    plan: &mut Plan,
) -> Result<(), TopologyError> {
    let sec = h.get_ref();
    let Names::One(node) = names else {
        return Err(cx.err(
            h.span(),
            "a host link belongs to one node: host interface names must be unique on the host",
        ));
    };
    let parse_all = |list: &[Spanned<String>]| -> Result<Vec<IpNet>, TopologyError> {
        list.iter()
            .map(|a| value(cx, a, str::parse::<IpNet>))
            .collect()
    };
    let end = EndDecl {
        node: node.clone(),
        iface: Some(sec.iface.get_ref().clone()),
        addrs: parse_all(&sec.addrs)?,
        ..EndDecl::default()
    };
    let host_addrs = parse_all(&sec.host_addrs)?;
    let host_name = sec.host_iface.get_ref().clone();
    plan.add_host_link(end, host_name, host_addrs, cx.place(h.span()), false)
        .map_err(|m| cx.err(h.span(), m))
}

impl Plan {
    /// A veth pair from a node to the host's namespace (`management`: see
    /// [`HostEnd::management`]).
    pub fn add_host_link(
        &mut self,
        end: EndDecl,
        host_name: String,
        host_addrs: Vec<IpNet>,
        at: crate::Place,
        management: bool,
    ) -> Result<(), String> {
        let i = self.find(&end.node)?;
        crate::check_ifname(&host_name)?;
        let owner = format!("the host's {host_name}");
        crate::resolve::plan::check_addrs(&owner, &host_addrs, end.mtu)?;
        self.claim(&end.addrs, at)?;
        self.claim(&host_addrs, at)?;
        let host = HostEnd {
            name: host_name,
            addrs: host_addrs,
            mtu: end.mtu,
            management,
        };
        self.push_iface(i, &end, Link::Host(host), at)?;
        Ok(())
    }
}

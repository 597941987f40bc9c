//! `topology.links`: the brief form (`endpoints: ["a:eth1", "b:eth1"]`, where `host:IF`
//! and `mgmt-net:IF` are special ends) and the extended forms `type: veth`, `host`,
//! `mgmt-net` and `dummy` (one end: a dummy interface). Every other link is a veth pair.
//! Each is 9500 bytes of MTU unless it says otherwise, as containerlab makes them; an end
//! on a bridge node is a port of that switch, and an end on the host (or on a `kind:
//! host` node) is a host link.

use super::kind::Kind;
use super::mgmt::Mgmt;
use super::node::NodeDecl;
use super::{keys, Lab};
use crate::decl::EndDecl;
use crate::error::TopologyError;
use crate::front::yaml::Yaml;
use crate::link::{HostUnderlay, VxlanEnd};
use crate::resolve::plan::Plan;
use crate::values;
use std::net::IpAddr;
use std::ops::Range;

/// containerlab's `DefaultLinkMTU`.
const MTU: u32 = 9500;

/// Where a link end is.
enum End {
    Node(EndDecl),
    /// The host's namespace, with the interface's name there.
    Host(String),
    /// A port of the management network's switch, so named.
    Mgmt(String),
    /// Nothing: the node's end is a dummy interface.
    Nowhere,
    /// A VXLAN tunnel through the host to a far endpoint.
    Tunnel(VxlanEnd),
}

pub(crate) fn read_all(
    lab: &mut Lab<'_>,
    links: Option<&Yaml>,
    nodes: &[NodeDecl],
    mgmt: &Mgmt,
    plan: &mut Plan,
) -> Result<(), TopologyError> {
    let Some(links) = links.filter(|l| !l.is_null()) else {
        return Ok(());
    };
    for link in lab.list(links, "links, each with `endpoints`")? {
        lab.map(
            link,
            "a link: endpoints: [\"a:eth1\", \"b:eth1\"], or type: veth | host | mgmt-net | dummy | vxlan",
        )?;
        lab.check_keys(link, keys::LINK, "link")?;
        let mtu = match link.get("mtu").filter(|m| !m.is_null()) {
            Some(m) => match m.int() {
                Some(v @ 68..=65535) => v as u32,
                _ => return Err(lab.err(m.span.clone(), "expected an MTU from 68 to 65535")),
            },
            None => MTU,
        };
        let (a, b) = ends(lab, link, nodes, mtu)?;
        let at = lab.cx.place(link.span.clone());
        let placed = |m: String| lab.err(link.span.clone(), m);
        match (a, b) {
            (End::Node(a), End::Node(b)) => plan.add_link(a, b, at).map_err(placed)?,
            (End::Node(n), End::Host(h)) | (End::Host(h), End::Node(n)) => plan
                .add_host_link(n, h, Vec::new(), at, false)
                .map_err(placed)?,
            (End::Node(n), End::Nowhere) => plan.add_dummy(n, at).map_err(placed)?,
            (End::Node(mut n), End::Tunnel(vx)) => {
                // A tunnel's MTU is the kernel's (its underlay's less the headers) unless set.
                n.mtu = link.get("mtu").filter(|m| !m.is_null()).map(|_| mtu);
                plan.add_host_vxlan(n, vx, at).map_err(placed)?
            }
            (End::Node(n), End::Mgmt(port)) | (End::Mgmt(port), End::Node(n)) => {
                if plan.find(&mgmt.network).is_err() {
                    return Err(placed(
                        "a mgmt-net end needs the management network, which no node is on".into(),
                    ));
                }
                let port = EndDecl {
                    node: mgmt.network.clone(),
                    iface: Some(port),
                    mtu: Some(mtu),
                    ..EndDecl::default()
                };
                plan.add_link(n, port, at).map_err(placed)?
            }
            _ => return Err(placed("a link needs at least one end on a node".into())),
        }
    }
    Ok(())
}

/// The two ends of a link, in either form.
fn ends(
    lab: &mut Lab<'_>,
    link: &Yaml,
    nodes: &[NodeDecl],
    mtu: u32,
) -> Result<(End, End), TopologyError> {
    let kind = match link.get("type").filter(|t| !t.is_null()) {
        Some(t) => Some((lab.string(t)?.trim().to_ascii_lowercase(), t.span.clone())),
        None => None,
    };
    let Some((kind, at)) = kind else {
        let list = lab.need(
            link,
            "endpoints",
            "the link's two ends, as [\"a:eth1\", \"b:eth1\"]",
        )?;
        let ends = lab.strings(list, "two ends, as [\"a:eth1\", \"b:eth1\"]")?;
        let [a, b] = &ends[..] else {
            return Err(lab.err(
                list.span.clone(),
                format!("expected two endpoints, got {}", ends.len()),
            ));
        };
        return Ok((brief(lab, a, nodes, mtu)?, brief(lab, b, nodes, mtu)?));
    };
    match kind.as_str() {
        "veth" => {
            let list = lab.need(link, "endpoints", "the two ends, each {node, interface}")?;
            let items = lab.list(list, "two ends, each {node, interface}")?;
            let [a, b] = items else {
                return Err(lab.err(list.span.clone(), format!("expected two endpoints, got {}", items.len())));
            };
            Ok((extended(lab, a, nodes, mtu)?, extended(lab, b, nodes, mtu)?))
        }
        "host" | "mgmt-net" => {
            let e = lab.need(link, "endpoint", "the node's end, as {node, interface}")?;
            let node = extended(lab, e, nodes, mtu)?;
            let h = lab.need(link, "host-interface", "the interface's name on the host's side")?;
            let name = lab.string(h)?;
            Ok((node, if kind == "host" { End::Host(name) } else { End::Mgmt(name) }))
        }
        "dummy" => {
            let e = lab.need(link, "endpoint", "the node's end, as {node, interface}")?;
            Ok((extended(lab, e, nodes, mtu)?, End::Nowhere))
        }
        "vxlan" | "vxlan-stitch" => {
            if kind == "vxlan-stitch" {
                lab.warn(at.clone(), "vxlan-stitch is made as type vxlan: the same tunnel, its device in the node (containerlab makes the node's end a veth to the host, tc-stitched to a VXLAN device there)");
            }
            let e = lab.need(link, "endpoint", "the node's end, as {node, interface}")?;
            Ok((extended(lab, e, nodes, mtu)?, End::Tunnel(tunnel(lab, link)?)))
        }
        "macvlan" => Err(lab.err(at, "link type macvlan attaches a node to one of the host's physical interfaces, which nsfleet never changes")),
        "veth-stitch" => Err(lab.err(at, "link type veth-stitch is containerlab's own piece of vxlan-stitch, not a link to write")),
        other => Err(lab.err(at, format!("unknown link type {other:?}: expected veth, host, mgmt-net, dummy or vxlan"))),
    }
}

/// containerlab's default UDP port for its VXLAN links (not IANA's 4789).
const VXLAN_PORT: u16 = 14789;

/// A `type: vxlan` link's tunnel: `remote` (an address), `vni`, `dst-port` (or the older
/// `udp-port`), `parent-interface` (the host's; else as the host routes to `remote`).
fn tunnel(lab: &mut Lab<'_>, link: &Yaml) -> Result<VxlanEnd, TopologyError> {
    let r = lab.need(link, "remote", "the far tunnel endpoint's address")?;
    let remote = lab.string(r)?.parse::<IpAddr>().map_err(|_| {
        lab.err(
            r.span.clone(),
            "remote: expected an IP address (nsfleet looks up no names)",
        )
    })?;
    let v = lab.need(link, "vni", "the VXLAN network identifier, 1 to 16777215")?;
    let vni = match v.int() {
        Some(n @ 1..=16_777_215) => n as u32,
        _ => return Err(lab.err(v.span.clone(), "vni: expected 1 to 16777215")),
    };
    let port_of = |y: &Yaml| match y.int() {
        Some(p @ 1..=65535) => Ok(p as u16),
        _ => Err(lab.err(y.span.clone(), "expected a UDP port, 1 to 65535")),
    };
    let given = |k: &str| link.get(k).filter(|y| !y.is_null());
    let port = match given("dst-port").or_else(|| given("udp-port")) {
        Some(p) => port_of(p)?,
        None => VXLAN_PORT,
    };
    if let Some(s) = given("src-port") {
        lab.warn(
            s.span.clone(),
            "`src-port` is not applied: the kernel chooses the tunnel's source ports",
        );
    }
    let parent = given("parent-interface")
        .map(|p| lab.string(p))
        .transpose()?;
    Ok(VxlanEnd {
        vni,
        remote,
        local: None,
        port,
        underlay: None,
        through_host: Some(HostUnderlay { parent }),
    })
}

/// `"node:iface"`, `"host:iface"` or `"mgmt-net:iface"`.
fn brief(
    lab: &mut Lab<'_>,
    (text, at): &(String, Range<usize>),
    nodes: &[NodeDecl],
    mtu: u32,
) -> Result<End, TopologyError> {
    let Some((node, iface)) = text.split_once(':') else {
        return Err(lab.err(
            at.clone(),
            format!("endpoint {text:?}: expected \"node:interface\""),
        ));
    };
    match node {
        "host" => Ok(End::Host(iface.to_string())),
        "mgmt-net" => Ok(End::Mgmt(iface.to_string())),
        "macvlan" => Err(lab.err(at.clone(), "a macvlan end attaches a node to one of the host's physical interfaces, which nsfleet never changes")),
        _ => node_end(lab, node, iface, None, at, nodes, mtu),
    }
}

/// `{node, interface, mac}`.
fn extended(
    lab: &mut Lab<'_>,
    e: &Yaml,
    nodes: &[NodeDecl],
    mtu: u32,
) -> Result<End, TopologyError> {
    lab.map(e, "an endpoint: {node, interface, mac}")?;
    lab.check_keys(e, keys::ENDPOINT, "endpoint")?;
    let node = lab.string(lab.need(e, "node", "the node's name")?)?;
    let iface = lab.string(lab.need(e, "interface", "the interface's name on the node")?)?;
    let mac = match e.get("mac").filter(|m| !m.is_null()) {
        Some(m) => {
            Some(values::unicast_mac(&lab.string(m)?).map_err(|x| lab.err(m.span.clone(), x))?)
        }
        None => None,
    };
    node_end(lab, &node, &iface, mac, &e.span, nodes, mtu)
}

fn node_end(
    lab: &mut Lab<'_>,
    node: &str,
    iface: &str,
    mac: Option<[u8; 6]>,
    at: &Range<usize>,
    nodes: &[NodeDecl],
    mtu: u32,
) -> Result<End, TopologyError> {
    let Some(n) = nodes.iter().find(|n| n.name == node) else {
        return Err(lab.err(
            at.clone(),
            format!("endpoint {node}:{iface}: there is no node {node:?} in topology.nodes"),
        ));
    };
    if n.kind == Kind::Host {
        return Ok(End::Host(iface.to_string()));
    }
    crate::check_ifname(iface)
        .map_err(|m| lab.err(at.clone(), format!("endpoint {node}:{iface}: {m}")))?;
    Ok(End::Node(EndDecl {
        node: node.to_string(),
        iface: Some(iface.to_string()),
        mtu: Some(mtu),
        mac,
        ..EndDecl::default()
    }))
}

#[cfg(test)]
mod tests {
    use crate::front::Software;

    fn lab(links: &str) -> Result<crate::Draft, crate::TopologyError> {
        let text =
            format!("name: v\ntopology:\n  nodes:\n    a: {{kind: linux}}\n  links:\n{links}");
        crate::clab::read_with("v.clab.yml", &text, Software::Host)
    }

    #[test]
    fn a_vxlan_link_is_a_tunnel_through_the_host_on_containerlab_s_port() {
        let d = lab("    - type: vxlan\n      endpoint: {node: a, interface: vx1}\n      remote: 192.0.2.9\n      vni: 5\n").unwrap();
        let topo = d.check(&crate::KernelCaps::assumed()).unwrap();
        let vx = (topo.wiring.iter())
            .flat_map(|w| &w.ifaces)
            .find(|i| i.name == "vx1")
            .unwrap();
        let v = vx.link.as_vxlan().unwrap();
        assert_eq!(
            (v.vni, v.port, v.through_host.is_some(), vx.mtu),
            (5, 14789, true, None)
        );
    }

    #[test]
    fn what_a_tunnel_cannot_be_is_refused_at_its_line() {
        let twice = "    - type: vxlan\n      endpoint: {node: a, interface: vx1}\n      remote: 192.0.2.9\n      vni: 5\n    - type: vxlan\n      endpoint: {node: a, interface: vx2}\n      remote: 192.0.2.8\n      vni: 5\n";
        let e = lab(twice).unwrap_err();
        assert_eq!(e.at.line, 10, "{e}");
        assert!(
            e.message.contains("the host takes one per VNI and port"),
            "{e}"
        );
        let e = lab("    - type: vxlan\n      endpoint: {node: a, interface: vx1}\n      remote: far.example\n      vni: 5\n").unwrap_err();
        assert!(e.message.contains("expected an IP address"), "{e}");
        let d = lab("    - type: vxlan-stitch\n      endpoint: {node: a, interface: vx1}\n      remote: 192.0.2.9\n      vni: 6\n").unwrap();
        assert!(
            (d.warnings().iter()).any(|w| w.message.contains("made as type vxlan")),
            "vxlan-stitch is made as vxlan, and said"
        );
        let e = lab("    - type: veth-stitch\n      endpoint: {node: a, interface: vx1}\n")
            .unwrap_err();
        assert!(e.message.contains("containerlab's own piece"), "{e}");
    }
}

//! Veth pairs between nodes: `[[link]]` tables (and the generators' links). One end is
//! made from its node's side with the other end placed straight into the peer's namespace;
//! the end on a switch is made from the switch, so that it can be enslaved at creation.

use crate::decl::{impair, mtu, value, EndDecl, ImpairMap, Spanned};
use crate::error::Ctx;
use crate::link::Link;
use crate::resolve::plan::Plan;
use crate::{values, IpNet, TopologyError};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LinkSection {
    a: Spanned<EndSection>,
    b: Spanned<EndSection>,
    /// A subnet whose first two addresses go to the ends that have none.
    pool: Option<Spanned<String>>,
    mtu: Option<Spanned<i64>>,
    impair: Option<Spanned<ImpairMap>>,
}

/// A link end: `"node:iface"` (or `"switch"`), or a table with `at` and the end's settings.
#[derive(Default)]
pub(crate) struct EndSection {
    at: String,
    addrs: Vec<Spanned<String>>,
    mac: Option<Spanned<String>>,
    mtu: Option<Spanned<i64>>,
    impair: Option<Spanned<ImpairMap>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EndTable {
    at: String,
    #[serde(default)]
    addrs: Vec<Spanned<String>>,
    mac: Option<Spanned<String>>,
    mtu: Option<Spanned<i64>>,
    impair: Option<Spanned<ImpairMap>>,
}

impl<'de> Deserialize<'de> for EndSection {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = EndSection;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("\"node:iface\", or a table like { at = \"node:iface\", addrs = [\"10.0.0.1/24\"] }")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<EndSection, E> {
                Ok(EndSection {
                    at: s.to_string(),
                    ..EndSection::default()
                })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, m: A) -> Result<EndSection, A::Error> {
                let t = EndTable::deserialize(serde::de::value::MapAccessDeserializer::new(m))?;
                Ok(EndSection {
                    at: t.at,
                    addrs: t.addrs,
                    mac: t.mac,
                    mtu: t.mtu,
                    impair: t.impair,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// A `[[link]]`: a veth pair between two nodes (or a node and a switch).
pub(crate) fn parse(
    cx: &Ctx<'_>,
    l: &Spanned<LinkSection>,
    plan: &mut Plan,
) -> Result<(), TopologyError> {
    let sec = l.get_ref();
    let at = cx.place(l.span());
    let mut a = end(cx, &sec.a, sec)?;
    let mut b = end(cx, &sec.b, sec)?;
    if let Some(pool) = &sec.pool {
        let net = value(cx, pool, crate::values::network_prefix)?;
        if net.capacity() < 2 {
            return Err(cx.err(
                pool.span(),
                format!("pool {net} has fewer than two host addresses"),
            ));
        }
        (plan.declare_pool(net, cx.place(pool.span()))).map_err(|m| cx.err(pool.span(), m))?;
        for (i, e) in [&mut a, &mut b].into_iter().enumerate() {
            if e.addrs.is_empty() && !plan.is_switch(&e.node) {
                e.addrs.push(net.host(i as u64));
            }
        }
    }
    plan.add_link(a, b, at).map_err(|m| cx.err(l.span(), m))
}

/// One end of a `[[link]]`; the link's own `mtu` and `impair` apply to ends that set none.
fn end(
    cx: &Ctx<'_>,
    e: &Spanned<EndSection>,
    link: &LinkSection,
) -> Result<EndDecl, TopologyError> {
    let sec = e.get_ref();
    let (node, iface) = match sec.at.split_once(':') {
        Some((n, i)) => (n.to_string(), Some(i.to_string())),
        None => (sec.at.clone(), None),
    };
    let mut addrs = Vec::new();
    for a in &sec.addrs {
        addrs.push(value(cx, a, str::parse::<IpNet>)?);
    }
    let mac = match &sec.mac {
        Some(m) => Some(value(cx, m, values::unicast_mac)?),
        None => None,
    };
    let mtu = match sec.mtu.as_ref().or(link.mtu.as_ref()) {
        Some(m) => Some(mtu(cx, m)?),
        None => None,
    };
    let impair = match sec.impair.as_ref().or(link.impair.as_ref()) {
        Some(i) => Some(impair(cx, i)?),
        None => None,
    };
    // Checked again once the pool's addresses are added; here, to name this end's line.
    crate::resolve::plan::check_addrs(&sec.at, &addrs, mtu).map_err(|m| cx.err(e.span(), m))?;
    Ok(EndDecl {
        node,
        iface,
        addrs,
        mtu,
        mac,
        impair,
    })
}

impl Plan {
    /// A veth pair between two nodes. A switch end creates the pair (only the creating
    /// end can be enslaved at creation); between two switches, the second end is
    /// enslaved once both exist. A switch with macvlan ports makes a macvlan for a node
    /// instead (`macvlan.rs`).
    pub fn add_link(&mut self, a: EndDecl, b: EndDecl, at: crate::Place) -> Result<(), String> {
        let (mut ai, mut bi) = (self.find(&a.node)?, self.find(&b.node)?);
        if ai == bi {
            return Err(format!("both ends of the link are on {:?}", a.node));
        }
        let (mut a, mut b) = (a, b);
        if self.is_switch_at(bi) && !self.is_switch_at(ai) {
            std::mem::swap(&mut a, &mut b);
            std::mem::swap(&mut ai, &mut bi);
        }
        // A switch's pool addresses the nodes on it, not another switch's port.
        for (me, mine, other) in [(&mut a, ai, bi), (&mut b, bi, ai)] {
            if me.addrs.is_empty() && self.is_switch_at(other) && !self.is_switch_at(mine) {
                me.addrs = self.take_from_pools(other, at)?;
            } else {
                self.claim(&me.addrs, at)?;
            }
        }
        if self.macvlan_ports(ai) && !self.is_switch_at(bi) {
            return self.add_macvlan_port((ai, &a), (bi, &b), at);
        }
        let peer = self.push_far_end(bi, &b, at)?;
        if self.is_ovs(ai) && !self.is_ovs(bi) && !self.ovs_tso() {
            // Without TSO support, ovs-vswitchd's userspace datapath forwards a packet
            // whose checksum its sender left to the NIC as it is, and the receiver drops
            // it: the far end sums its own (Mininet's TCULink does the same); on a Linux
            // bridge's trunk, for every host behind it.
            self.last_iface(&peer.node).software_checksums = true;
        }
        self.push_iface(ai, &a, Link::Veth(peer), at)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::reshape::tests::nodes;

    #[test]
    fn a_link_between_switches_takes_no_address_from_their_pools() {
        let text = "[fleet]\nname = \"x\"\n[[node]]\nname = \"h{i}\"\ncount = 2\n[[switch]]\nname = \"s1\"\npool = \"10.0.0.0/24\"\n[[switch]]\nname = \"s2\"\npool = \"10.0.1.0/24\"\n[[link]]\na = \"h1:eth0\"\nb = \"s1\"\n[[link]]\na = \"s1\"\nb = \"s2\"\n[[link]]\na = \"h2:eth0\"\nb = \"s2\"\n";
        let all = nodes(text);
        let addrs = |name: &str| -> Vec<String> {
            let n = all.iter().find(|n| n.name == name).unwrap();
            n.wiring.addrs().map(|a| a.to_string()).collect()
        };
        assert_eq!(addrs("h1"), ["10.0.0.1/24"]);
        assert_eq!(
            addrs("h2"),
            ["10.0.1.1/24"],
            "s1's trunk took no address of s2's"
        );
        assert!(addrs("s1").is_empty() && addrs("s2").is_empty());
    }
}

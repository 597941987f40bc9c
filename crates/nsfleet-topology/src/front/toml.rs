//! nsfleet's own format (TOML), read into a [`Draft`], or a precise error: the sections
//! ([fleet], [[node]], [[switch]], [[generate]], [[link]], [[route]] ...) declared into
//! the resolver's groups and plan, with the shared pieces of `decl` and `link/`.
//!
//! Every check happens before the first namespace exists: the engine trusts a
//! `Topology`. Errors name file:line:column and what was expected there.

use crate::decl::{impair, mtu, read_table, value, ImpairMap, NodeKeys, Spanned, Sysctls};
use crate::error::{Ctx, Errors, TopologyError};
use crate::link::{dummy, host, veth, vxlan};

mod ovs;
use crate::resolve::draft::{switch_config, Draft, Groups, MAX_COUNT};
use crate::resolve::generate::{Generator, Shape};
use crate::resolve::plan::Plan;
use crate::resolve::{self, config};
use crate::{
    check_name, IpNet, KernelCaps, Names, NodeConfig, Topology, MAX_FLEET_NAME, MAX_NODE_NAME,
};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::net::IpAddr;
use std::ops::Range;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    fleet: Spanned<FleetSection>,
    #[serde(default)]
    defaults: Option<Spanned<NodeKeys>>,
    #[serde(default)]
    node: Vec<Spanned<NodeSection>>,
    #[serde(default)]
    switch: Vec<Spanned<SwitchSection>>,
    #[serde(default)]
    link: Vec<Spanned<veth::LinkSection>>,
    #[serde(default)]
    vxlan: Vec<Spanned<vxlan::VxlanSection>>,
    #[serde(default)]
    dummy: Vec<Spanned<dummy::DummySection>>,
    #[serde(default)]
    generate: Vec<Spanned<GenSection>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FleetSection {
    name: Spanned<String>,
    /// Whether the fleet's Open vSwitch keeps its userspace datapath's TSO support.
    ovs_tso: Option<Spanned<bool>>,
}

/// A `[[node]]`: its own keys, and the node keys, which [`NodeKeys`] reads.
struct NodeSection {
    name: Spanned<String>,
    count: Option<Spanned<i64>>,
    start: Option<Spanned<i64>>,
    routes: Vec<Spanned<String>>,
    host_link: Option<Spanned<host::HostLinkSection>>,
    keys: NodeKeys,
}

impl NodeSection {
    const OWN: &'static [&'static str] = &["name", "count", "start", "routes", "host_link"];
    const FIELDS: &'static [&'static str] =
        &NodeKeys::after::<{ Self::OWN.len() + NodeKeys::FIELDS.len() }>(Self::OWN);
}

impl<'de> Deserialize<'de> for NodeSection {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<NodeSection, D::Error> {
        struct Node;
        impl<'de> Visitor<'de> for Node {
            type Value = NodeSection;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("struct NodeSection")
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<NodeSection, A::Error> {
                let (mut name, mut count, mut start, mut routes, mut host_link) =
                    (None, None, None, Vec::new(), None);
                let mut keys = NodeKeys::default();
                read_table(map, NodeSection::FIELDS, |key, map| {
                    match key {
                        "name" => name = Some(map.next_value()?),
                        "count" => count = map.next_value()?,
                        "start" => start = map.next_value()?,
                        "routes" => routes = map.next_value()?,
                        "host_link" => host_link = map.next_value()?,
                        _ => return keys.take_key(key, map),
                    }
                    Ok(true)
                })?;
                Ok(NodeSection {
                    name: name.ok_or_else(|| de::Error::missing_field("name"))?,
                    count,
                    start,
                    routes,
                    host_link,
                    keys,
                })
            }
        }
        d.deserialize_struct("NodeSection", NodeSection::FIELDS, Node)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SwitchSection {
    name: Spanned<String>,
    /// "bridge" (a Linux bridge) or "ovs" (Open vSwitch).
    kind: Option<Spanned<String>>,
    pool: Option<Spanned<String>>,
    pool6: Option<Spanned<String>>,
    ports: Option<Spanned<String>>,
    // Open vSwitch's keys (kind = "ovs"), read by `ovs.rs`.
    #[serde(default)]
    controller: Vec<Spanned<String>>,
    #[serde(default)]
    protocols: Vec<Spanned<String>>,
    fail_mode: Option<Spanned<String>>,
    datapath: Option<Spanned<String>>,
    dpid: Option<Spanned<String>>,
    port_numbers: Option<Spanned<std::collections::BTreeMap<String, Spanned<i64>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GenSection {
    kind: Spanned<String>,
    count: Option<Spanned<i64>>,
    name: Option<Spanned<String>>,
    switch: Option<Spanned<String>>,
    pool: Option<Spanned<String>>,
    router: Option<bool>,
    routes: Option<bool>,
    ports: Option<Spanned<String>>,
    depth: Option<Spanned<i64>>,
    fanout: Option<Spanned<i64>>,
    rows: Option<Spanned<i64>>,
    cols: Option<Spanned<i64>>,
    edges: Option<Spanned<i64>>,
    seed: Option<Spanned<i64>>,
    mtu: Option<Spanned<i64>>,
    impair: Option<Spanned<ImpairMap>>,
    #[serde(default)]
    sysctls: Sysctls,
    #[serde(default)]
    commands: Vec<Spanned<String>>,
    /// The node keys for every node of the group.
    node: Option<Spanned<NodeKeys>>,
}

/// Parses and validates `text` against what `kernel` offers; `file` names it in errors.
pub fn parse(file: &str, text: &str, kernel: &KernelCaps) -> Result<Topology, TopologyError> {
    read(file, text)?.check(kernel)
}

/// Reads and validates what `text` alone decides; `file` names it in errors.
///
/// Errors are reported all at once, in the file's order: each stage (the nodes, the
/// links, the host links and VXLANs, the routes) checks every item, and the stages that
/// build on one with errors are skipped, so that one mistake is not reported again as
/// the next stage's.
pub fn read(file: &str, text: &str) -> Result<Draft, TopologyError> {
    let cx = Ctx::new(file, text);
    let doc: File = toml::from_str(text).map_err(|e| {
        let msg = e.message().trim_end().to_string();
        cx.err(e.span().unwrap_or(0..0), msg)
    })?;
    if doc.node.is_empty() && doc.generate.is_empty() {
        return Err(cx.err(
            doc.fleet.span(),
            "a fleet needs at least one [[node]] or [[generate]] table, e.g. [[node]] name = \"h{i}\" count = 4",
        ));
    }
    let mut errors = Errors::default();
    let name = &doc.fleet.get_ref().name;
    errors.take(
        check_name("fleet name", name.get_ref(), MAX_FLEET_NAME)
            .map_err(|m| cx.err(name.span(), m)),
    );
    let mut groups = Groups::default();
    let generators = declare(&cx, &doc, &mut groups, &mut errors);
    let mut plan = groups.plan();
    let ovs_tso = doc.fleet.get_ref().ovs_tso.as_ref();
    plan.set_ovs_tso(ovs_tso.is_none_or(|t| *t.get_ref()));
    if let Some(generators) = generators {
        wire(&cx, &doc, &generators, &groups, &mut plan, &mut errors);
    }
    if let Some(t) = ovs_tso.filter(|_| plan.ovs_hub().is_none()) {
        errors.take::<()>(Err(cx.err(
            t.span(),
            "ovs_tso is a setting of the fleet's Open vSwitch, and this fleet has none: it is for a fleet with [[switch]] kind = \"ovs\"",
        )));
    }
    errors.done()?;
    resolve::finish(name.get_ref(), groups, plan, cx, Vec::new(), |_, _| {})
}

/// Every node, switch and generated group into `groups`, their errors into `errors`. A
/// node whose configuration is wrong is still declared, with none: its name is known, so
/// the links to it can be checked. The generators, if every name is known; `None` if
/// some are not, and nothing that refers to a name can be checked.
fn declare(
    cx: &Ctx<'_>,
    doc: &File,
    groups: &mut Groups,
    errors: &mut Errors,
) -> Option<Vec<Generator>> {
    let empty = NodeKeys::default();
    let defaults = doc.defaults.as_ref().map_or(&empty, |d| d.get_ref());
    let generators: Vec<Option<Generator>> = (doc.generate.iter())
        .map(|g| errors.take(generator(cx, g)))
        .collect();
    let mut named = generators.iter().all(Option::is_some);
    for node in &doc.node {
        let n = node.get_ref();
        let names = errors.take(node_names(cx, n));
        let built = errors.take(config::build(cx, &[defaults, &n.keys], None));
        named &= names.is_some_and(|names| {
            let built = built.unwrap_or_else(|| config::Built::of(NodeConfig::default()));
            errors.take(groups.add(cx, names, built, &n.name)).is_some()
        });
    }
    for sw in &doc.switch {
        let n = &sw.get_ref().name;
        let added = check_name("switch name", n.get_ref(), MAX_NODE_NAME)
            .map_err(|m| cx.err(n.span(), m))
            .and_then(|()| ovs::switch_config(cx, sw.get_ref()))
            .and_then(|built| groups.add(cx, Names::One(n.get_ref().clone()), built, n));
        named &= errors.take(added).is_some();
    }
    for (g, section) in generators.iter().zip(&doc.generate) {
        let Some(g) = g else { continue };
        let sec = section.get_ref();
        if let Some(names) = g.switch_names() {
            named &= errors
                .take(groups.add(cx, names, switch_config(false), &sec.kind))
                .is_some();
        }
        let router = sec
            .router
            .or(Some(!matches!(g.shape, Shape::Star | Shape::Linear)));
        let own = NodeKeys {
            sysctls: sec.sysctls.clone(),
            commands: sec.commands.clone(),
            ..NodeKeys::default()
        };
        let table = sec.node.as_ref().map_or(&empty, |t| t.get_ref());
        let built = errors.take(config::build(cx, &[defaults, &own, table], router));
        let built = built.unwrap_or_else(|| config::Built::of(NodeConfig::default()));
        named &= errors
            .take(groups.add(cx, g.node_names(), built, &sec.kind))
            .is_some();
    }
    named.then(|| generators.into_iter().flatten().collect())
}

/// One stage of wiring: its items' errors go to the `Errors`.
type Stage<'a> = dyn Fn(&mut Plan, &mut Errors) + 'a;

/// Every link, pool, host link and route, in the order the file gives them, in stages
/// (see [`read`]): a stage runs only if those it builds on had no errors.
fn wire(
    cx: &Ctx<'_>,
    doc: &File,
    generators: &[Generator],
    groups: &Groups,
    plan: &mut Plan,
    errors: &mut Errors,
) {
    let stages: [&Stage; 5] = [
        &|plan, e| {
            e.take(pools(cx, doc, generators, groups, plan));
        },
        &|plan, e| {
            for l in &doc.link {
                e.take(veth::parse(cx, l, plan));
            }
        },
        &|plan, e| {
            for (node, group) in doc.node.iter().zip(&groups.list) {
                if let Some(h) = &node.get_ref().host_link {
                    e.take(host::parse(cx, h, &group.names, plan));
                }
            }
            for d in &doc.dummy {
                e.take(dummy::parse(cx, d, plan));
            }
            for v in &doc.vxlan {
                e.take(vxlan::parse(cx, v, plan));
            }
        },
        &|plan, e| routes(cx, doc, groups, plan, e),
        &|plan, e| ovs::check_switches(cx, doc.switch.iter().map(|s| s.get_ref()), plan, e),
    ];
    for stage in stages {
        let before = errors.len();
        stage(plan, errors);
        if errors.len() > before {
            return;
        }
    }
}

/// The loopback pools, the switches' pools, and the generators' wiring: the addresses
/// that every later stage's are checked against.
fn pools(
    cx: &Ctx<'_>,
    doc: &File,
    generators: &[Generator],
    groups: &Groups,
    plan: &mut Plan,
) -> Result<(), TopologyError> {
    for (group, pools) in groups.list.iter().zip(&groups.loopbacks) {
        let Some((pools, at)) = pools else { continue };
        for pool in pools {
            plan.declare_pool(*pool, at.at).map_err(|m| at.with(m))?;
            if pool.capacity() < group.names.len() {
                return Err(at.with(format!(
                    "loopback pool {pool} has {} addresses; the group has {} nodes",
                    pool.capacity(),
                    group.names.len()
                )));
            }
            for (k, name) in group.names.iter().enumerate() {
                let host = pool.host(k as u64).addr;
                let single = IpNet {
                    addr: host,
                    prefix: if host.is_ipv4() { 32 } else { 128 },
                };
                plan.add_loopback(&name, single, at.at)
                    .map_err(|m| at.with(m))?;
            }
        }
    }
    for sw in &doc.switch {
        let s = sw.get_ref();
        if ovs::is_ovs(s.kind.as_ref()) {
            (plan.set_ovs(s.name.get_ref())).map_err(|m| cx.err(s.name.span(), m))?;
        }
        if let Some(p) = &s.ports {
            let ports = value(cx, p, crate::Ports::parse)?;
            (plan.set_ports(s.name.get_ref(), ports)).map_err(|m| cx.err(p.span(), m))?;
        }
        let keyed = (s.pool.iter().map(|p| (p, "pool", true)))
            .chain(s.pool6.iter().map(|p| (p, "pool6", false)));
        for (pool, key, v4) in keyed {
            let net = value(cx, pool, crate::values::network_prefix)?;
            if net.addr.is_ipv4() != v4 {
                let want = if v4 {
                    "an IPv4 prefix (pool6 takes IPv6)"
                } else {
                    "an IPv6 prefix (pool takes IPv4)"
                };
                return Err(cx.err(pool.span(), format!("{key}: expected {want}, got {net}")));
            }
            (plan.declare_pool(net, cx.place(pool.span())))
                .and_then(|()| plan.set_pool(s.name.get_ref(), net))
                .map_err(|m| cx.err(pool.span(), m))?;
        }
    }
    for (g, sec) in generators.iter().zip(&doc.generate) {
        g.wire(plan)
            .map_err(|m| cx.err(sec.get_ref().kind.span(), m))?;
    }
    Ok(())
}

/// Every node's routes, checked against its interfaces and their addresses.
fn routes(cx: &Ctx<'_>, doc: &File, groups: &Groups, plan: &mut Plan, errors: &mut Errors) {
    for (node, group) in doc.node.iter().zip(&groups.list) {
        for r in &node.get_ref().routes {
            let Some((dst, via, dev)) = errors.take(value(cx, r, parse_route)) else {
                continue;
            };
            // A route of a generated group: its error once, not once per node.
            let added = (group.names.iter()).try_for_each(|name| {
                plan.add_route(&name, dst, via, dev.as_deref(), cx.place(r.span()))
                    .map_err(|m| cx.err(r.span(), m))
            });
            errors.take(added);
        }
    }
}

/// `DST [via GATEWAY] [dev IFACE]`, where DST is a prefix or `default`.
fn parse_route(s: &str) -> Result<(IpNet, Option<IpAddr>, Option<String>), String> {
    let bad = || {
        format!("expected a route like \"10.0.2.0/24 via 10.0.1.2\", \"default via 10.0.0.1\" or \"10.0.3.0/24 dev eth1\", got {s:?}")
    };
    let words: Vec<&str> = s.split_whitespace().collect();
    let (dst, rest) = words.split_first().ok_or_else(bad)?;
    let (mut via, mut dev) = (None, None);
    for pair in rest.chunks(2) {
        match pair {
            ["via", gw] => via = Some(gw.parse::<IpAddr>().map_err(|_| bad())?),
            ["dev", d] => dev = Some(d.to_string()),
            _ => return Err(bad()),
        }
    }
    let dst = if *dst == "default" {
        let v4 = via.is_none_or(|v: IpAddr| v.is_ipv4());
        let any: IpAddr = if v4 { "0.0.0.0" } else { "::" }.parse().unwrap();
        IpNet {
            addr: any,
            prefix: 0,
        }
    } else {
        let net = dst.parse::<IpNet>().map_err(|_| bad())?;
        crate::values::network_prefix(dst).map_err(|m| format!("route {s:?}: {m}"))?;
        net
    };
    Ok((dst, via, dev))
}

fn generator(cx: &Ctx<'_>, g: &Spanned<GenSection>) -> Result<Generator, TopologyError> {
    let sec = g.get_ref();
    let shape = Shape::parse(sec.kind.get_ref()).ok_or_else(|| {
        cx.err(
            sec.kind.span(),
            format!(
                "unknown generator kind {:?}: expected {}",
                sec.kind.get_ref(),
                Shape::KINDS
            ),
        )
    })?;
    let need = |v: &Option<Spanned<i64>>, what: &str, max: u64| -> Result<u64, TopologyError> {
        let Some(v) = v else {
            return Err(cx.err(
                g.span(),
                format!("generator {:?} needs `{what}`", sec.kind.get_ref()),
            ));
        };
        match u64::try_from(*v.get_ref()) {
            Ok(n) if (1..=max).contains(&n) => Ok(n),
            _ => Err(cx.err(
                v.span(),
                format!("expected {what} from 1 to {max}, got {}", v.get_ref()),
            )),
        }
    };
    let (shape, count) = match shape {
        Shape::Tree { .. } => {
            let depth = need(&sec.depth, "depth", 20)? as u32;
            let fanout = need(&sec.fanout, "fanout", 1000)? as u32;
            let count = (0..=depth).try_fold(0u64, |acc, d| {
                (fanout as u64)
                    .checked_pow(d)
                    .and_then(|p| acc.checked_add(p))
            });
            match count {
                Some(c) if c <= MAX_COUNT => (Shape::Tree { depth, fanout }, c),
                _ => return Err(cx.err(g.span(), format!("a tree of depth {depth} and fanout {fanout} has more than {MAX_COUNT} nodes"))),
            }
        }
        Shape::Grid { torus, .. } => {
            let rows = need(&sec.rows, "rows", MAX_COUNT)?;
            let cols = need(&sec.cols, "cols", MAX_COUNT)?;
            match rows.checked_mul(cols) {
                Some(c) if c <= MAX_COUNT => (Shape::Grid { rows, cols, torus }, c),
                _ => {
                    return Err(cx.err(
                        g.span(),
                        format!("a {rows} x {cols} grid has more than {MAX_COUNT} nodes"),
                    ))
                }
            }
        }
        Shape::Random { .. } => {
            let count = need(&sec.count, "count", MAX_COUNT)?;
            let edges = need(&sec.edges, "edges", MAX_COUNT * 4)?;
            let seed = sec.seed.as_ref().map_or(1, |s| *s.get_ref() as u64);
            (Shape::Random { edges, seed }, count)
        }
        other => (other, need(&sec.count, "count", MAX_COUNT)?),
    };
    let default_name = if shape.switched() && shape != Shape::FakeRouters {
        "h{i}"
    } else {
        "r{i}"
    };
    let names = sec
        .name
        .as_ref()
        .map_or(default_name.to_string(), |n| n.get_ref().clone());
    let at = sec.name.as_ref().map_or(sec.kind.span(), |n| n.span());
    check_template(cx, &names, count, at.clone())?;
    let default_switch = match shape {
        Shape::Linear => "s{i}",
        Shape::FakeRouters => "lan",
        _ => "s1",
    };
    let switch = sec
        .switch
        .as_ref()
        .map_or(default_switch.to_string(), |s| s.get_ref().clone());
    if shape == Shape::Linear {
        let sp = sec.switch.as_ref().map_or(sec.kind.span(), |s| s.span());
        check_template(cx, &switch, count, sp)?;
    } else if shape.switched() {
        let sp = sec.switch.as_ref().map_or(sec.kind.span(), |s| s.span());
        check_name("switch name", &switch, MAX_NODE_NAME).map_err(|m| cx.err(sp, m))?;
    }
    let default_pool = if shape.switched() {
        "10.0.0.0/16"
    } else {
        "10.0.0.0/8"
    };
    let pool = match &sec.pool {
        Some(p) => value(cx, p, crate::values::network_prefix)?,
        None => default_pool.parse().unwrap(),
    };
    let ports = match &sec.ports {
        Some(p) if !shape.switched() => {
            return Err(cx.err(
                p.span(),
                format!("ports: a {} has no switch", sec.kind.get_ref()),
            ))
        }
        Some(p) => value(cx, p, crate::Ports::parse)?,
        None => crate::Ports::Veth,
    };
    let gen = Generator {
        shape,
        count,
        names,
        switch,
        ports,
        pool,
        routes: sec.routes.unwrap_or(false),
        mtu: sec.mtu.as_ref().map(|m| mtu(cx, m)).transpose()?,
        impair: sec.impair.as_ref().map(|i| impair(cx, i)).transpose()?,
        at: cx.place(g.span()),
    };
    gen.check().map_err(|m| cx.err(g.span(), m))?;
    Ok(gen)
}

fn check_template(
    cx: &Ctx<'_>,
    t: &str,
    count: u64,
    at: Range<usize>,
) -> Result<(), TopologyError> {
    if t.matches("{i}").count() != 1 || t.replace("{i}", "").contains(['{', '}']) {
        return Err(cx.err(
            at,
            "expected a name template with exactly one `{i}`, e.g. \"r{i}\"",
        ));
    }
    check_name(
        "generated name",
        &t.replace("{i}", &count.to_string()),
        MAX_NODE_NAME,
    )
    .map_err(|m| cx.err(at, m))
}

fn node_names(cx: &Ctx<'_>, n: &NodeSection) -> Result<Names, TopologyError> {
    let template = n.name.get_ref();
    let Some(count) = &n.count else {
        if let Some(s) = &n.start {
            return Err(cx.err(s.span(), "`start` only makes sense together with `count`"));
        }
        if template.contains(['{', '}']) {
            return Err(cx.err(
                n.name.span(),
                "a name with `{i}` needs `count = N` to generate nodes",
            ));
        }
        check_name("node name", template, MAX_NODE_NAME).map_err(|m| cx.err(n.name.span(), m))?;
        return Ok(Names::One(template.clone()));
    };
    let c = *count.get_ref();
    if c < 1 || c as u64 > MAX_COUNT {
        return Err(cx.err(
            count.span(),
            format!("expected a count from 1 to {MAX_COUNT}, got {c}"),
        ));
    }
    let start = match &n.start {
        Some(s) if *s.get_ref() < 0 => {
            return Err(cx.err(s.span(), "expected a start index of 0 or more"));
        }
        Some(s) => *s.get_ref() as u64,
        None => 1,
    };
    check_template(cx, template, start + c as u64 - 1, n.name.span())?;
    Ok(Names::Generated {
        template: template.clone(),
        start,
        count: c as u64,
    })
}

//! The difference between a running fleet and a topology, object by object: what `nsfleet
//! apply` would change, as `terraform plan` shows it (`+` added, `-` removed, `~`
//! changed). Nodes, their interfaces (link, addresses, MTU, MAC, impairment), routes,
//! loopback addresses, sysctls and processes. Pure: the running fleet comes in as each
//! node's name, configuration and wiring.

use crate::reshape::Reshape;
use crate::{Iface, Link, NodeConfig, NodeSpec, NodeWiring};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Add,
    Remove,
    Change,
}

/// One object that differs: `object` names it (`node r1`, `r1:eth0`, `r1 route
/// 10.1.0.0/24`), `detail` says how.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub op: Op,
    pub object: String,
    pub detail: String,
}

/// What differs: the nodes that change, then those added (both in the file's order), then
/// those removed. `plan` is `running` reshaped (see [`crate::reshape`]).
pub fn diff(running: &[NodeSpec], plan: &Reshape) -> Vec<Change> {
    let by_name: HashMap<&str, &NodeSpec> = running.iter().map(|n| (n.name.as_str(), n)).collect();
    let mut out = Vec::new();
    for n in &plan.change {
        let was = by_name[n.name.as_str()];
        node_config(&n.name, &was.config, &n.config, &mut out);
        node_wiring(&n.name, &was.wiring, &n.wiring, &mut out);
    }
    for n in &plan.add {
        let ifaces: Vec<&str> = n.wiring.ifaces.iter().map(|i| i.name.as_str()).collect();
        let what = format!("{} {}", kind(&n.config), n.name);
        out.push(change(Op::Add, what, list("interfaces", &ifaces)));
    }
    for name in &plan.remove {
        let what = format!("{} {name}", kind(&by_name[name.as_str()].config));
        out.push(change(Op::Remove, what, String::new()));
    }
    out
}

fn change(op: Op, object: String, detail: String) -> Change {
    Change { op, object, detail }
}

fn list(what: &str, items: &[&str]) -> String {
    if items.is_empty() {
        String::new()
    } else {
        format!("{what}: {}", items.join(", "))
    }
}

/// A node's image as far as its processes see it: the reference, the image the store
/// found for it (a tag pulled again may be another), and what the file sets over it.
fn image(c: &NodeConfig) -> String {
    match &c.image {
        Some(i) => format!(
            "{} ({}){}{}{}",
            i.reference,
            i.found.as_ref().map_or("not looked up", |f| f.id.as_str()),
            (i.entrypoint.as_ref()).map_or(String::new(), |e| format!(" entrypoint {e:?}")),
            (i.cmd.as_ref()).map_or(String::new(), |c| format!(" cmd {c:?}")),
            (i.user.as_ref()).map_or(String::new(), |u| format!(" user {u}")),
        ),
        None => "none".into(),
    }
}

fn health_check(c: &NodeConfig) -> String {
    match &c.healthcheck {
        Some(h) => format!(
            "{:?} every {} s, timeout {} s, {} retries, start period {} s",
            h.argv, h.interval_s, h.timeout_s, h.retries, h.start_period_s
        ),
        None => "none".into(),
    }
}

/// A node's limits as `up` prints them back: each that is set.
fn limits(c: &NodeConfig) -> String {
    let l = &c.limits;
    let set: Vec<String> = [
        l.memory.map(|b| format!("memory {b}")),
        l.memory_unlimited().then(|| "memory unlimited".to_string()),
        l.cpu_milli.map(|m| format!("cpu {}", m as f64 / 1000.0)),
        l.cpuset.as_ref().map(|s| format!("cpuset {s:?}")),
        l.pids.map(|n| format!("pids {n}")),
        l.shm_bytes.map(|b| format!("shm_size {b}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    match set.is_empty() {
        true => "none".into(),
        false => set.join(", "),
    }
}

/// What a node gives up: a profile by its file and a digest of it (the same file with
/// other contents is a change), each device with its numbers and mode.
fn security(c: &NodeConfig) -> String {
    use std::hash::{Hash, Hasher};
    let s = &c.security;
    let seccomp = match &s.seccomp {
        crate::Seccomp::Docker => "docker".to_string(),
        crate::Seccomp::Unconfined => "unconfined".to_string(),
        crate::Seccomp::Profile(p) => {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            format!("{p:?}").hash(&mut h);
            format!("{} ({:08x})", p.file, h.finish() as u32)
        }
    };
    let devices: Vec<String> = (s.devices.iter())
        .map(|d| {
            let kind = if d.block { 'b' } else { 'c' };
            format!("{} {kind} {}:{} {:o}", d.path, d.major, d.minor, d.mode)
        })
        .collect();
    format!(
        "capabilities dropped {:#x}, seccomp {seccomp}, systempaths {}, no-new-privileges {}, devices {devices:?}",
        s.drop_capabilities,
        if s.system_paths { "masked" } else { "unconfined" },
        s.no_new_privileges,
    )
}

/// What a node's change says of its settings, each as text to compare and show.
type Described<T> = (&'static str, fn(&T) -> String);

const NODE_FIELDS: [Described<NodeConfig>; 12] = [
    ("kind", |c| kind(c).into()),
    ("privileged", |c| c.privileged.to_string()),
    ("confined", |c| c.confined_asked.to_string()),
    ("limits", limits),
    ("security", security),
    ("router", |c| c.router.to_string()),
    ("processes", |c| format!("{:?}", c.commands)),
    ("hostname", |c| format!("{:?}", c.hostname)),
    ("restart", |c| c.restart_on_failure.to_string()),
    ("env", |c| format!("{:?}", c.env)),
    ("image", image),
    ("healthcheck", health_check),
];

/// An Open vSwitch switch's settings: its bridge is changed in place.
const OVS_FIELDS: [Described<crate::OvsSwitch>; 6] = [
    ("controller", |o| format!("{:?}", o.controllers)),
    ("protocols", |o| format!("{:?}", o.protocols)),
    ("fail_mode", |o| format!("{:?}", o.fail_mode)),
    ("datapath", |o| format!("{:?}", o.datapath)),
    ("dpid", |o| format!("{:?}", o.dpid)),
    ("port_numbers", |o| format!("{:?}", o.port_numbers)),
];

fn node_config(name: &str, old: &NodeConfig, new: &NodeConfig, out: &mut Vec<Change>) {
    let mut said = |field: &str, from: String, to: String| {
        if from != to {
            out.push(change(
                Op::Change,
                format!("{name} {field}"),
                format!("{from} -> {to}"),
            ));
        }
    };
    for (field, f) in NODE_FIELDS {
        said(field, f(old), f(new));
    }
    if let (Some(o), Some(n)) = (&old.ovs, &new.ovs) {
        for (field, f) in OVS_FIELDS {
            said(field, f(o), f(n));
        }
    }
    // Contents count too: the same paths with other contents are a change.
    if paths(old) != paths(new) || old.files != new.files {
        said(
            "files",
            format!("{:?}", paths(old)),
            format!("{:?}", paths(new)),
        );
    }
    sysctls(name, old, new, out);
}

/// The node's private paths: folders, files and binds.
fn paths(c: &NodeConfig) -> Vec<String> {
    let dirs = c.dirs.iter().map(|d| d.path.clone());
    let binds = c.binds.iter().map(|b| format!("{}:{}", b.source, b.target));
    dirs.chain(c.files.iter().map(|f| f.path.clone()))
        .chain(binds)
        .collect()
}

/// Sysctls added or changed (in the new order), then removed.
fn sysctls(name: &str, old: &NodeConfig, new: &NodeConfig, out: &mut Vec<Change>) {
    for (k, v) in &new.sysctls {
        match old.sysctls.iter().find(|(o, _)| o == k) {
            None => out.push(change(Op::Add, format!("{name} sysctl {k}"), v.clone())),
            Some((_, was)) if was != v => out.push(change(
                Op::Change,
                format!("{name} sysctl {k}"),
                format!("{was} -> {v}"),
            )),
            _ => {}
        }
    }
    let gone = (old.sysctls.iter()).filter(|(k, _)| !new.sysctls.iter().any(|(n, _)| n == k));
    for (k, v) in gone {
        out.push(change(Op::Remove, format!("{name} sysctl {k}"), v.clone()));
    }
}

fn kind(c: &NodeConfig) -> &'static str {
    if c.switch {
        "switch"
    } else {
        "node"
    }
}

fn node_wiring(name: &str, old: &NodeWiring, new: &NodeWiring, out: &mut Vec<Change>) {
    let (olds, news) = (by_name(old), by_name(new));
    for i in &new.ifaces {
        let object = format!("{name}:{}", i.name);
        match olds.get(i.name.as_str()).copied() {
            None => out.push(change(Op::Add, object, describe(i))),
            Some(was) => {
                let mut how = Vec::new();
                if link_of(was) != link_of(i) {
                    how.push(format!("{} -> {}", link_of(was), link_of(i)));
                } else if !crate::reshape::same_link(was, i) && was.mtu == i.mtu && was.mac == i.mac
                {
                    // Nothing of its own: its pair is made again from the other end.
                    how.push("made again with its pair".to_string());
                }
                if was.addrs != i.addrs {
                    how.push(format!("addresses {} -> {}", addrs(was), addrs(i)));
                }
                if was.mtu != i.mtu {
                    how.push(format!("mtu {:?} -> {:?}", was.mtu, i.mtu));
                }
                if was.mac != i.mac {
                    how.push("mac".to_string());
                }
                if was.impair != i.impair {
                    let show =
                        |x: &Option<crate::Impair>| x.map_or("none".to_string(), |x| x.to_string());
                    how.push(format!(
                        "impairment {} -> {}",
                        show(&was.impair),
                        show(&i.impair)
                    ));
                }
                if !how.is_empty() {
                    out.push(change(Op::Change, object, how.join("; ")));
                }
            }
        }
    }
    for i in old
        .ifaces
        .iter()
        .filter(|i| !news.contains_key(i.name.as_str()))
    {
        out.push(change(
            Op::Remove,
            format!("{name}:{}", i.name),
            describe(i),
        ));
    }
    // A switch's macvlans: made or gone whole (their far ends' changes are the nodes').
    let peers = |w: &NodeWiring| -> HashMap<String, String> {
        (w.macvlans.iter())
            .map(|p| {
                (
                    p.name.clone(),
                    format!("macvlan to {}:{}", p.peer.node, p.peer.name),
                )
            })
            .collect()
    };
    let (was, now) = (peers(old), peers(new));
    for p in &new.macvlans {
        match was.get(&p.name) {
            None => out.push(change(
                Op::Add,
                format!("{name}:{}", p.name),
                now[&p.name].clone(),
            )),
            Some(w) if *w != now[&p.name] => out.push(change(
                Op::Change,
                format!("{name}:{}", p.name),
                format!("{w} -> {}", now[&p.name]),
            )),
            Some(_) => {}
        }
    }
    for p in old.macvlans.iter().filter(|p| !now.contains_key(&p.name)) {
        out.push(change(
            Op::Remove,
            format!("{name}:{}", p.name),
            was[&p.name].clone(),
        ));
    }
    // A route as a user reads it, with the name of its `dev`.
    let routes = |w: &NodeWiring| {
        let dev = |k: i32| {
            w.ifaces
                .iter()
                .find(|i| i.index == k)
                .map_or("?", |i| &i.name)
        };
        (w.routes.iter())
            .map(|r| match r.dev {
                Some(k) => format!("{r} dev {}", dev(k)),
                None => r.to_string(),
            })
            .collect::<BTreeSet<_>>()
    };
    let (was, now) = (routes(old), routes(new));
    for r in now.difference(&was) {
        out.push(change(Op::Add, format!("{name} route {r}"), String::new()));
    }
    for r in was.difference(&now) {
        out.push(change(
            Op::Remove,
            format!("{name} route {r}"),
            String::new(),
        ));
    }
    if old.loopback != new.loopback {
        let show = |w: &NodeWiring| {
            w.loopback
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        };
        out.push(change(
            Op::Change,
            format!("{name}:lo"),
            format!("addresses {} -> {}", show(old), show(new)),
        ));
    }
}

/// A node's interfaces by name: a switch may have thousands.
fn by_name(w: &NodeWiring) -> HashMap<&str, &Iface> {
    w.ifaces.iter().map(|i| (i.name.as_str(), i)).collect()
}

/// What makes an interface, as a user names it.
fn link_of(i: &Iface) -> String {
    match &i.link {
        Link::Veth(p) => format!("veth to {}:{}", p.node, p.name),
        Link::FarEnd => "made by its peer".to_string(),
        Link::Host(h) => format!("host link to host:{}", h.name),
        Link::Vxlan(v) => format!("vxlan {} to {}", v.vni, v.remote),
        Link::Dummy => "dummy".to_string(),
    }
}

fn addrs(i: &Iface) -> String {
    if i.addrs.is_empty() {
        return "none".into();
    }
    i.addrs
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

fn describe(i: &Iface) -> String {
    let a = addrs(i);
    if a == "none" {
        link_of(i)
    } else {
        format!("{}, {a}", link_of(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::reshape::tests::nodes as topo;

    #[test]
    fn nodes_interfaces_routes_and_settings_that_differ() {
        let old = topo("[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[node]]\nname = \"gone\"\n[[link]]\na = { at = \"a:eth0\", addrs = [\"10.0.0.1/30\"] }\nb = { at = \"b:eth0\", addrs = [\"10.0.0.2/30\"] }\n");
        let new = topo("[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nsysctls = { \"net.ipv4.ip_forward\" = 1 }\nroutes = [\"10.9.0.0/16 via 10.0.0.6\"]\n[[node]]\nname = \"b\"\n[[node]]\nname = \"c\"\n[[link]]\na = { at = \"a:eth0\", addrs = [\"10.0.0.5/30\"] }\nb = { at = \"b:eth0\", addrs = [\"10.0.0.6/30\"] }\n[[link]]\na = \"a:eth1\"\nb = \"c:eth0\"\n");
        let d = diff(&old, &crate::reshape::reshape(&old, new).unwrap());
        let show: Vec<String> = d
            .iter()
            .map(|c| format!("{:?} {}", c.op, c.object))
            .collect();
        assert_eq!(
            show,
            [
                "Add a sysctl net.ipv4.ip_forward",
                "Change a:eth0",
                "Add a:eth1",
                "Add a route 10.9.0.0/16 via 10.0.0.6",
                "Change b:eth0",
                "Add node c",
                "Remove node gone"
            ]
        );
        let same = diff(&old, &crate::reshape::reshape(&old, old.clone()).unwrap());
        assert!(same.is_empty(), "{same:?}");
    }

    #[test]
    fn an_open_vswitch_switchs_settings_that_differ() {
        let file = |keys: &str| {
            format!("[fleet]\nname = \"x\"\n[[node]]\nname = \"h\"\n[[link]]\na = \"h:eth0\"\nb = \"s1\"\n[[switch]]\nname = \"s1\"\nkind = \"ovs\"\n{keys}")
        };
        let old = topo(&file("fail_mode = \"secure\"\n"));
        let new = topo(&file(
            "protocols = [\"OpenFlow13\"]\nfail_mode = \"secure\"\n",
        ));
        let d = diff(&old, &crate::reshape::reshape(&old, new).unwrap());
        let show: Vec<String> = d
            .iter()
            .map(|c| format!("{} {}", c.object, c.detail))
            .collect();
        assert_eq!(show, ["s1 protocols [] -> [\"OpenFlow13\"]"]);
    }

    #[test]
    fn a_health_check_that_differs_is_said() {
        let file = |check: &str| {
            format!("[fleet]\nname = \"x\"\n[[node]]\nname = \"a\"\nhealthcheck = {check}\n")
        };
        let old = topo(&file("{ test = \"true\" }"));
        let new = topo(&file("{ test = \"true\", retries = 5 }"));
        let d = diff(&old, &crate::reshape::reshape(&old, new).unwrap());
        let show: Vec<String> = d
            .iter()
            .map(|c| format!("{} {}", c.object, c.detail))
            .collect();
        assert_eq!(show, ["a healthcheck [\"/bin/sh\", \"-c\", \"true\"] every 30 s, timeout 30 s, 3 retries, start period 0 s -> [\"/bin/sh\", \"-c\", \"true\"] every 30 s, timeout 30 s, 5 retries, start period 0 s"]);
    }
}

//! containerlab's `tools`, on a running lab's nodes named as containers (clab-LAB-NODE):
//!
//! - `netem set|show|reset`: an interface's impairment, through the supervisor as
//!   `nsfleet impair` sets it (so that `status`, `graph` and `link` see it), shown in
//!   containerlab's table or JSON;
//! - `veth create`: a veth pair between two nodes, or a node and the host (`host:IF`),
//!   made straight into their namespaces. As in containerlab, the lab's record does not
//!   know it: it goes with the first of its namespaces to go (a host end with its node).
//!   An end `bridge:NAME:IF` (or `ovs-bridge:NAME:IF`) is a port of the bridge of a
//!   lab's bridge node NAME (in containerlab, the host's bridge that node stands for):
//!   its Linux bridge, or for an `ovs-bridge` node, its bridge of the lab's own Open
//!   vSwitch; a bridge of the host's gets no port from nsfleet.

use crate::lab::find_container;
use anyhow::{anyhow, bail, Context};
use nsfleet::control::NodeStatus;
use nsfleet::rundir::RunDir;
use nsfleet::subsys::link::loose::{make_pair, remove_pair, LooseEnd};
use nsfleet::topology::Impair;
use nsfleet_client::FleetRef;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;

pub struct NetemSetArgs {
    pub container: String,
    pub iface: String,
    pub delay: Option<String>,
    pub jitter: Option<String>,
    /// Percent, as containerlab takes it (`10` is 10%).
    pub loss: Option<f64>,
    /// kbit/s.
    pub rate: Option<u64>,
    pub corruption: Option<f64>,
    pub run_dir: PathBuf,
}

/// `tools netem set`: the flags given become the interface's impairment; none given
/// leaves it unimpaired, as containerlab's empty netem does.
pub fn netem_set(a: NetemSetArgs) -> anyhow::Result<()> {
    let mut imp = Impair::default();
    let given = [
        ("delay", a.delay.clone()),
        ("jitter", a.jitter.clone()),
        ("loss", a.loss.map(|l| format!("{l}%"))),
        (
            "rate",
            a.rate.filter(|r| *r > 0).map(|r| format!("{r}kbit")),
        ),
        ("corrupt", a.corruption.map(|c| format!("{c}%"))),
    ];
    for (k, v) in given {
        if let Some(v) = v {
            let flag = if k == "corrupt" { "corruption" } else { k };
            imp.set(k, &v).map_err(|e| anyhow!("--{flag}: {e}"))?;
        }
    }
    imp.check().map_err(|e| anyhow!("{e}"))?;
    let impair = (imp != Impair::default()).then_some(imp);
    let rd = RunDir::new(&a.run_dir);
    let (lab, node) = find_container(&rd, &a.container)?;
    if !impairments(&node).iter().any(|(i, _)| *i == a.iface) {
        bail!("{} has no interface {:?} in its lab (`tools netem show -n {}` lists them; one made by `tools veth create` is not the lab's: impair it with tc inside the node)", a.container, a.iface, a.container);
    }
    let fleet = FleetRef {
        name: lab.name,
        run_dir: a.run_dir,
    };
    let now = nsfleet_client::impair::set(&fleet, &node.name, &a.iface, impair)?;
    print_table(&[(a.iface, now)]);
    Ok(())
}

/// `tools netem reset`: the interface loses its impairment.
pub fn netem_reset(container: &str, iface: &str, run_dir: PathBuf) -> anyhow::Result<()> {
    let rd = RunDir::new(&run_dir);
    let (lab, node) = find_container(&rd, container)?;
    let fleet = FleetRef {
        name: lab.name,
        run_dir,
    };
    nsfleet_client::impair::set(&fleet, &node.name, iface, None)?;
    println!("{container}:{iface}: no impairment");
    Ok(())
}

/// `tools netem show`: every interface of the node (the table), or the impaired ones
/// (containerlab's JSON: `{CONTAINER: [{interface, delay, jitter, packet_loss, rate,
/// corruption}]}`).
pub fn netem_show(container: &str, json: bool, run_dir: PathBuf) -> anyhow::Result<()> {
    let rd = RunDir::new(&run_dir);
    let (_, node) = find_container(&rd, container)?;
    let rows = impairments(&node);
    if json {
        let list: Vec<_> = rows
            .iter()
            .filter_map(|(i, imp)| imp.as_ref().map(|imp| json_row(i, imp)))
            .collect();
        let out = serde_json::json!({ container: list });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_table(&rows);
    }
    Ok(())
}

/// Each interface of the node with its impairment, if any.
fn impairments(node: &NodeStatus) -> Vec<(String, Option<Impair>)> {
    let names = (node.interfaces.iter()).filter_map(|i| i.split_whitespace().next());
    names
        .map(|name| {
            let imp = (node.impairments.iter())
                .find(|(i, _)| i == name)
                .map(|(_, imp)| *imp);
            (name.to_string(), imp)
        })
        .collect()
}

/// A duration as Go prints one (`10ms`, `1.5s`), containerlab's form.
fn go_duration(ns: u64) -> String {
    match ns {
        0 => String::new(),
        n if n % 1_000_000_000 == 0 || n >= 1_000_000_000 => format!("{}s", n as f64 / 1e9),
        n if n >= 1_000_000 => format!("{}ms", n as f64 / 1e6),
        n => format!("{}µs", n as f64 / 1e3),
    }
}

fn json_row(iface: &str, i: &Impair) -> serde_json::Value {
    serde_json::json!({
        "interface": iface,
        "delay": go_duration(i.delay_ns),
        "jitter": go_duration(i.jitter_ns),
        "packet_loss": i.loss,
        "rate": i.rate_bps / 1000,
        "corruption": i.corrupt,
    })
}

/// containerlab's table: Interface, Delay, Jitter, Packet Loss, Rate (kbit), Corruption.
fn print_table(rows: &[(String, Option<Impair>)]) {
    let header = [
        "Interface",
        "Delay",
        "Jitter",
        "Packet Loss",
        "Rate (kbit)",
        "Corruption",
    ];
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|(iface, imp)| match imp {
            None => [
                iface.clone(),
                "N/A".into(),
                "N/A".into(),
                "N/A".into(),
                "N/A".into(),
                "N/A".into(),
            ],
            Some(i) => [
                iface.clone(),
                go_duration(i.delay_ns),
                go_duration(i.jitter_ns),
                format!("{:.2}%", i.loss),
                (i.rate_bps / 1000).to_string(),
                format!("{:.2}%", i.corrupt),
            ],
        })
        .collect();
    let rows: Vec<Vec<String>> = cells.into_iter().map(Vec::from).collect();
    print!(
        "{}",
        nsfleet_client::columns(&header, &rows.iter().collect::<Vec<_>>())
    );
}

/// One end of `tools veth create`: a node's interface, a port of a lab's bridge node,
/// or the host's.
#[derive(Debug, PartialEq)]
enum End {
    Node { container: String, iface: String },
    Bridge { bridge: String, iface: String },
    Host { iface: String },
}

fn parse_end(flag: &str, s: &str) -> anyhow::Result<End> {
    let parts: Vec<&str> = s.trim().split(':').collect();
    let end = match parts[..] {
        ["host", iface] => End::Host {
            iface: iface.into(),
        },
        ["bridge" | "ovs-bridge", bridge, iface] if !bridge.is_empty() => End::Bridge {
            bridge: bridge.into(),
            iface: iface.into(),
        },
        [container, iface] if !container.is_empty() => End::Node {
            container: container.into(),
            iface: iface.into(),
        },
        _ => bail!("{flag} {s}: expected CONTAINER:IFACE, bridge:BRIDGE:IFACE, ovs-bridge:BRIDGE:IFACE or host:IFACE"),
    };
    let (End::Node { iface, .. } | End::Bridge { iface, .. } | End::Host { iface }) = &end;
    nsfleet::topology::check_ifname(iface).map_err(|m| anyhow!("{flag} {s}: {m}"))?;
    Ok(end)
}

pub struct VethCreateArgs {
    pub a: String,
    pub b: String,
    pub mtu: Option<u32>,
    pub run_dir: PathBuf,
}

/// `tools veth create -a A -b B [--mtu N]`.
pub fn veth_create(a: VethCreateArgs) -> anyhow::Result<()> {
    let ends = [parse_end("-a", &a.a)?, parse_end("-b", &a.b)?];
    if ends.iter().all(|e| matches!(e, End::Host { .. })) {
        bail!("-a and -b are both the host's: one end must be a node's");
    }
    let rd = RunDir::new(&a.run_dir);
    let [x, y] = ends.map(|e| resolve(&rd, e));
    let (x, y) = (x?, y?);
    make_pair(&x.loose(), &y.loose(), a.mtu)?;
    for end in [&x, &y] {
        if let Err(e) = end.join_ovs(&a.run_dir) {
            // The pair goes whole with either end.
            let undone = match remove_pair(&x.loose()) {
                Ok(()) => "removed".to_string(),
                Err(u) => format!("left in place, removing it failed: {u:#}"),
            };
            return Err(e.context(format!("veth {} -- {}: {undone}", a.a, a.b)));
        }
    }
    println!(
        "veth {} -- {}: made (it goes with its node; the lab's record does not list it)",
        a.a, a.b
    );
    Ok(())
}

/// One end, found: its namespace (`None`: the host's), its interface, and what it joins
/// there.
struct Resolved {
    netns: Option<OwnedFd>,
    iface: String,
    joins: Joins,
}

/// What an end joins in its namespace.
enum Joins {
    Nothing,
    /// The Linux bridge of a lab's bridge node.
    LinuxBridge,
    /// A bridge of a lab's Open vSwitch: added as a port once the pair exists.
    Ovs {
        lab: String,
        node: String,
        bridge: String,
    },
}

impl Resolved {
    fn loose(&self) -> LooseEnd<'_> {
        LooseEnd {
            netns: self.netns.as_ref().map(|f| f.as_fd()),
            name: &self.iface,
            bridge: matches!(self.joins, Joins::LinuxBridge).then_some("br0"),
        }
    }

    /// Adds the end to its Open vSwitch bridge, if it joins one: through `nsfleet exec`
    /// in the bridge's node, whose Open vSwitch it is; `ovs-vsctl` waits until
    /// ovs-vswitchd has taken the port.
    fn join_ovs(&self, run_dir: &std::path::Path) -> anyhow::Result<()> {
        let Joins::Ovs { lab, node, bridge } = &self.joins else {
            return Ok(());
        };
        let exe = std::env::current_exe().context("finding nsfleet's own executable")?;
        let words = ["ovs-vsctl", "add-port", bridge, &self.iface].map(String::from);
        let out = crate::exec::run_in(&exe, run_dir, lab, node, &words)?;
        if !out.status.success() {
            bail!(
                "ovs-vsctl add-port {bridge} {}: {}",
                self.iface,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }
}

/// Where an end is, and what it joins: a node's interface, or a port of a lab's bridge
/// node (its Linux bridge, or its bridge of the lab's Open vSwitch, whichever the node
/// is: containerlab's `bridge:` and `ovs-bridge:` both name a node).
fn resolve(rd: &RunDir, end: End) -> anyhow::Result<Resolved> {
    let (lab, node, iface, bridge) = match end {
        End::Host { iface } => {
            return Ok(Resolved {
                netns: None,
                iface,
                joins: Joins::Nothing,
            })
        }
        End::Node { container, iface } => {
            let (lab, node) = find_container(rd, &container)?;
            (lab.name, node.name, iface, false)
        }
        End::Bridge { bridge, iface } => (bridge_lab(rd, &bridge)?, bridge, iface, true),
    };
    let fleet = FleetRef {
        name: lab,
        run_dir: rd.root().to_path_buf(),
    };
    let ns = fleet.node_namespace(&node)?;
    let joins = match (bridge, ns.ovs_bridge) {
        (false, _) => Joins::Nothing,
        (true, None) => Joins::LinuxBridge,
        (true, Some(bridge)) => Joins::Ovs {
            lab: fleet.name,
            node,
            bridge,
        },
    };
    Ok(Resolved {
        netns: Some(ns.fd),
        iface,
        joins,
    })
}

/// The lab whose bridge node (`kind: bridge`) is `bridge`: containerlab's `bridge:NAME`
/// is the bridge a lab's node NAME stands for. A bridge of the host's is not one.
fn bridge_lab(rd: &RunDir, bridge: &str) -> anyhow::Result<String> {
    let labs: Vec<String> = (crate::lab::labs(rd).into_iter())
        .filter(|f| (f.nodes.iter()).any(|n| n.name == bridge && n.clab.is_none()))
        .map(|f| f.name)
        .collect();
    match &labs[..] {
        [one] => Ok(one.clone()),
        [] => bail!("no running lab has a bridge node {bridge}: a bridge of the host's is the host's, and nsfleet adds no port to it"),
        many => bail!("bridge {bridge} is a node of several labs ({}): nsfleet cannot tell which", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_as_containerlab_writes_them() {
        assert_eq!(
            parse_end("-a", "clab-l-r1:eth9").unwrap(),
            End::Node {
                container: "clab-l-r1".into(),
                iface: "eth9".into()
            }
        );
        assert_eq!(
            parse_end("-b", "host:veth-x").unwrap(),
            End::Host {
                iface: "veth-x".into()
            }
        );
        assert_eq!(
            parse_end("-b", "bridge:br-1:p1").unwrap(),
            End::Bridge {
                bridge: "br-1".into(),
                iface: "p1".into()
            }
        );
        assert!(parse_end("-a", "r1").is_err());
        assert!(parse_end("-a", "r1:an-interface-name-too-long").is_err());
    }

    #[test]
    fn durations_read_as_go_prints_them() {
        assert_eq!(go_duration(10_000_000), "10ms");
        assert_eq!(go_duration(1_500_000_000), "1.5s");
        assert_eq!(go_duration(0), "");
    }
}

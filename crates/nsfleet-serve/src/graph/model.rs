//! A fleet as a graph: its nodes (switches, routers, hosts, and the host machine or a
//! VXLAN's far end where links lead out of the fleet) and one edge per link, built from
//! the same wiring the engine builds from. Pure: no kernel, no files.

use nsfleet::topology::{Link, NodeConfig, NodeWiring};
use serde::Serialize;
use std::collections::HashMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Switch,
    Router,
    Host,
    /// Outside the fleet: the host machine (host links) or a VXLAN's far endpoint.
    External,
}

#[derive(Clone, Debug, Serialize)]
pub struct GraphNode {
    pub name: String,
    pub kind: Kind,
    /// Its interfaces as "eth0 10.0.0.1/30 fd00::1/64" (a switch's ports: none).
    pub interfaces: Vec<String>,
    /// "eth0: delay 5ms loss 1%", one per impaired interface.
    pub impairments: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct GraphLink {
    /// Indexes into the nodes, and each end's interface name.
    pub a: usize,
    pub a_iface: String,
    pub b: usize,
    pub b_iface: String,
    pub kind: &'static str,
    pub impaired: bool,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Graph {
    pub name: String,
    pub nodes: Vec<GraphNode>,
    pub links: Vec<GraphLink>,
}

impl Graph {
    /// The graph of fleet `name` whose nodes are `nodes` (name, configuration, wiring).
    pub fn build<'a>(
        name: &str,
        nodes: impl IntoIterator<Item = (&'a str, &'a NodeConfig, &'a NodeWiring)>,
    ) -> Graph {
        // The fleet's Open vSwitch node has no link of its own: its switches are drawn.
        let nodes: Vec<_> = (nodes.into_iter())
            .filter(|(_, config, _)| config.ovs_hub.is_none())
            .collect();
        let mut g = Graph {
            name: name.to_string(),
            ..Graph::default()
        };
        let mut index: HashMap<String, usize> = HashMap::new();
        for (n, config, wiring) in &nodes {
            index.insert(n.to_string(), g.nodes.len());
            g.nodes.push(node(n, config, wiring));
        }
        for (i, (_, _, wiring)) in nodes.iter().enumerate() {
            for iface in &wiring.ifaces {
                let impaired = iface.impair.is_some();
                let (far, far_iface, kind) = match &iface.link {
                    Link::Veth(p) => match index.get(&p.node) {
                        Some(&j) => (j, p.name.clone(), "veth"),
                        None => continue,
                    },
                    Link::Host(h) => (g.external(&mut index, "host"), h.name.clone(), "host"),
                    Link::Vxlan(v) => {
                        let far = g.external(&mut index, &format!("vxlan {}", v.remote));
                        (far, format!("vni {}", v.vni), "vxlan")
                    }
                    // The far end of a pair made from its peer: that peer's edge. A dummy
                    // leads nowhere.
                    Link::FarEnd | Link::Dummy => continue,
                };
                g.links.push(GraphLink {
                    a: i,
                    a_iface: iface.name.clone(),
                    b: far,
                    b_iface: far_iface,
                    kind,
                    impaired,
                });
            }
            // A switch's macvlans: the edge is the switch's, the impairment the node's end.
            for p in &wiring.macvlans {
                let Some(&far) = index.get(&p.peer.node) else {
                    continue;
                };
                let far_wiring = nodes[far].2;
                g.links.push(GraphLink {
                    a: i,
                    a_iface: p.name.clone(),
                    b: far,
                    b_iface: p.peer.name.clone(),
                    kind: "macvlan",
                    impaired: far_wiring
                        .iface(&p.peer.name)
                        .is_some_and(|f| f.impair.is_some()),
                });
            }
        }
        g
    }

    /// The node outside the fleet named `name`, added once.
    fn external(&mut self, index: &mut HashMap<String, usize>, name: &str) -> usize {
        if let Some(&i) = index.get(name) {
            return i;
        }
        index.insert(name.to_string(), self.nodes.len());
        self.nodes.push(GraphNode {
            name: name.to_string(),
            kind: Kind::External,
            interfaces: Vec::new(),
            impairments: Vec::new(),
        });
        self.nodes.len() - 1
    }
}

fn node(name: &str, config: &NodeConfig, wiring: &NodeWiring) -> GraphNode {
    let kind = match (config.switch, config.router) {
        (true, _) => Kind::Switch,
        (false, true) => Kind::Router,
        (false, false) => Kind::Host,
    };
    let shown = |i: &&nsfleet::topology::Iface| !config.switch || !i.addrs.is_empty();
    let mut interfaces: Vec<String> = (wiring.ifaces.iter().filter(shown))
        .map(|i| {
            let addrs: Vec<String> = i.addrs.iter().map(|a| a.to_string()).collect();
            format!("{} {}", i.name, addrs.join(" "))
                .trim_end()
                .to_string()
        })
        .collect();
    if !wiring.loopback.is_empty() {
        let lo: Vec<String> = wiring.loopback.iter().map(|a| a.to_string()).collect();
        interfaces.push(format!("lo {}", lo.join(" ")));
    }
    let impairments = (wiring.ifaces.iter())
        .filter_map(|i| Some(format!("{}: {}", i.name, i.impair.as_ref()?)))
        .collect();
    GraphNode {
        name: name.to_string(),
        kind,
        interfaces,
        impairments,
    }
}

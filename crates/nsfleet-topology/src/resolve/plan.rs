//! Lays the fleet's links out onto its nodes: every interface's name and index, switch
//! ports spread over bridges, addresses from pools, routes resolved to interface indexes.
//! The bookkeeping every kind of link shares; each kind's own rules (which end makes a
//! veth pair, what a host link claims) are in its file under `link/`. Errors are plain
//! sentences that the parser places at a file position.

use crate::decl::EndDecl;
use crate::kind::ovs;
use crate::link::{bridge, Link, Peer};
use crate::{Iface, IpNet, NodeWiring, Place, Ports, RouteSpec};
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

/// A node's interfaces take indexes from here up, in declaration order: even for ends the
/// node makes, odd for ends made from the other side. Indexes are per namespace, and a new
/// namespace has only `lo` (1) and perhaps a few fallback tunnels.
pub(crate) const IFACE_BASE: i32 = 1000;

pub(crate) struct Plan {
    index: HashMap<String, u32>,
    /// The fleet's Open vSwitch node, made with the first OVS switch.
    ovs_hub: Option<u32>,
    /// Every OVS switch's port names, with whose: one namespace holds them all.
    ovs_ports: HashMap<String, u32>,
    /// The index ranges' slots OVS switches have taken.
    ovs_slots: HashSet<u32>,
    /// Whether the fleet's Open vSwitch keeps its userspace datapath's TSO support (the
    /// file's `ovs_tso`; on unless it says `false`). Without it, the hosts on its switches
    /// compute their own checksums.
    ovs_tso: bool,
    names: Vec<String>,
    switch: Vec<bool>,
    pub(crate) wiring: Vec<NodeWiring>,
    /// Switches with ports, by their own node's number: where their ports go.
    switches: HashMap<u32, Switch>,
    /// Shard nodes made for big switches, in the order they were made (after the file's
    /// nodes in the fleet, see `link::bridge`), each with its switch's name.
    shards: Vec<Shard>,
    /// Address pools of switches, with how many addresses each has handed out.
    pools: HashMap<u32, Vec<(IpNet, u64)>>,
    /// Every address given out so far, and the line that gave it.
    used: HashMap<IpAddr, u32>,
    /// Every pool of the file (switches', links', generators'), and its line.
    declared: Vec<(IpNet, u32)>,
}

/// A node made to carry a big switch's ports beyond the first shard's.
pub struct Shard {
    pub name: String,
    /// The node number of the switch it is part of, whose configuration it takes.
    pub switch: u32,
}

/// A switch's ports so far, over its shards.
#[derive(Default)]
struct Switch {
    /// Node numbers of its shards, its own first.
    shards: Vec<u32>,
    /// The names of its ports on every shard (trunks apart, which no port may be named
    /// like): one switch, one name space, and its count is the next port's position.
    names: HashSet<String>,
    /// What its links to nodes are made of.
    ports: Ports,
    /// An Open vSwitch switch: its ports are nobody's bridge ports, and it is never
    /// sharded (Open vSwitch has no bridge's 1,024 ports, and its ports must share the
    /// namespace its ovs-vswitchd runs in). With the slot of its index range there.
    ovs: Option<u32>,
}

impl Plan {
    /// `nodes`: every node's name and whether it is a switch, in creation order.
    pub fn new(nodes: impl Iterator<Item = (String, bool)>) -> Self {
        let mut plan = Plan {
            index: HashMap::new(),
            ovs_hub: None,
            ovs_tso: true,
            ovs_ports: HashMap::new(),
            ovs_slots: HashSet::new(),
            names: Vec::new(),
            switch: Vec::new(),
            wiring: Vec::new(),
            switches: HashMap::new(),
            shards: Vec::new(),
            pools: HashMap::new(),
            used: HashMap::new(),
            declared: Vec::new(),
        };
        for (name, switch) in nodes {
            plan.add_node(name, switch);
        }
        plan
    }

    fn add_node(&mut self, name: String, switch: bool) -> u32 {
        let i = self.names.len() as u32;
        self.index.insert(name.clone(), i);
        self.names.push(name);
        self.switch.push(switch);
        self.wiring.push(NodeWiring::default());
        i
    }

    pub(crate) fn find(&self, node: &str) -> Result<u32, String> {
        self.index
            .get(node)
            .copied()
            .ok_or_else(|| format!("there is no node or switch named {node:?}"))
    }

    /// Node number `i`'s wiring so far.
    pub(crate) fn wiring_of(&self, i: u32) -> &NodeWiring {
        &self.wiring[i as usize]
    }

    /// The index of node number `i`'s interface `name`, if it has one yet.
    pub(crate) fn iface_index(&self, i: u32, name: &str) -> Option<i32> {
        self.wiring[i as usize].iface(name).map(|f| f.index)
    }

    /// Whether node number `i` is a switch.
    pub(crate) fn is_switch_at(&self, i: u32) -> bool {
        self.switch[i as usize]
    }

    pub fn is_switch(&self, node: &str) -> bool {
        self.index
            .get(node)
            .is_some_and(|i| self.switch[*i as usize])
    }

    /// Makes switch `node`'s links to nodes of `ports` (veth pairs unless said).
    pub fn set_ports(&mut self, node: &str, ports: Ports) -> Result<(), String> {
        let i = self.find(node)?;
        if !self.switch[i as usize] {
            return Err(format!("{node:?} is not a switch: only a switch has ports"));
        }
        self.switches.entry(i).or_default().ports = ports;
        Ok(())
    }

    /// Makes switch `node` an Open vSwitch switch (before its first port): it lives in
    /// the namespace of the fleet's Open vSwitch node, made with the first, in an index
    /// range of its own there.
    pub fn set_ovs(&mut self, node: &str) -> Result<(), String> {
        let i = self.find(node)?;
        crate::check_ifname(node).map_err(|why| {
            format!("Open vSwitch switch {node:?}: its name is its bridge's, a device's ({why})")
        })?;
        if self.ovs_hub.is_none() {
            let hub = ovs::HUB_NAME;
            if self.index.contains_key(hub) {
                return Err(format!("a fleet with Open vSwitch switches runs its Open vSwitch in a node named {hub:?}, and a node of the file has that name: rename that node"));
            }
            self.ovs_hub = Some(self.add_node(hub.to_string(), false));
        }
        let mut slot = ovs::preferred_slot(node);
        while !self.ovs_slots.insert(slot) {
            slot = (slot + 1) % ovs::SLOTS;
        }
        self.switches.entry(i).or_default().ovs = Some(slot);
        Ok(())
    }

    pub(crate) fn is_ovs(&self, i: u32) -> bool {
        self.switches.get(&i).is_some_and(|s| s.ovs.is_some())
    }

    /// The interface put last on node `node` (a big switch's shard, for its ports).
    pub(crate) fn last_iface(&mut self, node: &str) -> &mut Iface {
        let i = self.index[node];
        let w = &mut self.wiring[i as usize];
        w.ifaces.last_mut().expect("an interface was just put here")
    }

    /// The name switch `i`'s next port gets when the file gives none: `p1`, `p2`, ... on
    /// a bridge; prefixed by the switch's name on Open vSwitch (`s1-p1`), whose ports
    /// share one namespace with every other OVS switch's.
    fn default_port_name(&self, i: u32) -> Result<String, String> {
        let name = bridge::port_name(self.ports(i));
        if !self.is_ovs(i) {
            return Ok(name);
        }
        let switch = &self.names[i as usize];
        let name = format!("{switch}-{name}");
        crate::check_ifname(&name).map_err(|_| {
            format!("Open vSwitch switch {switch}'s ports share one namespace with the other switches', and a port the file does not name is {name}, longer than a device's name may be (15 characters): name it (\"{switch}:NAME\"), or shorten the switch's name")
        })?;
        Ok(name)
    }

    /// An OVS switch's port name is one of its namespace's: taken by no other OVS
    /// switch's port. Claims it for switch `i`.
    fn claim_ovs_port(&mut self, i: u32, name: &str) -> Result<(), String> {
        if !self.is_ovs(i) {
            return Ok(());
        }
        // Its index range holds as many (see `kind/ovs.rs`).
        let most = (ovs::INDEX_SPAN / 2) as usize;
        if self.ports(i) >= most {
            return Err(format!(
                "Open vSwitch switch {} would have more than {most} ports",
                self.names[i as usize]
            ));
        }
        match self.ovs_ports.get(name) {
            Some(&other) if other != i => Err(format!(
                "port {name:?}: Open vSwitch switch {} has a port of that name, and the fleet's Open vSwitch switches share one namespace (as on a Mininet host): name it otherwise",
                self.names[other as usize]
            )),
            _ => {
                self.ovs_ports.insert(name.to_string(), i);
                Ok(())
            }
        }
    }

    /// What switch `i`'s links to nodes are made of.
    pub(crate) fn switch_ports(&self, i: u32) -> Ports {
        self.switches.get(&i).map_or(Ports::Veth, |s| s.ports)
    }

    /// The name of switch `i`'s next port, as `sw` gives it or numbered, claimed in the
    /// switch's one name space (over its shards) for a port with no device of its own
    /// there (a macvlan's place; see `link/macvlan.rs`).
    pub(crate) fn name_switch_port(&mut self, i: u32, sw: &EndDecl) -> Result<String, String> {
        let name = match sw.iface.clone() {
            Some(name) => name,
            None => self.default_port_name(i)?,
        };
        crate::check_ifname(&name)?;
        self.claim_ovs_port(i, &name)?;
        bridge::check_port_name(&name)?;
        let names = &mut self.switches.entry(i).or_default().names;
        if !names.insert(name.clone()) {
            return Err(format!(
                "{} already has an interface named {name:?}",
                sw.node
            ));
        }
        Ok(name)
    }

    /// Node `i`'s wiring, for a link kind to add what only it makes.
    pub(crate) fn wiring_mut(&mut self, i: u32) -> &mut NodeWiring {
        &mut self.wiring[i as usize]
    }

    /// Ports of switch `node` without addresses of their own get the next ones of `pool`.
    pub fn set_pool(&mut self, node: &str, pool: IpNet) -> Result<(), String> {
        let i = self.find(node)?;
        let pools = self.pools.entry(i).or_default();
        if pools
            .iter()
            .any(|(p, _)| p.addr.is_ipv4() == pool.addr.is_ipv4())
        {
            return Err(format!(
                "switch {node:?} already has an IPv{} pool",
                if pool.addr.is_ipv4() { 4 } else { 6 }
            ));
        }
        pools.push((pool.network(), 0));
        Ok(())
    }

    /// Records an address pool of the file. Pools must not overlap: they would hand out
    /// the same addresses, found only later, at whichever link ran into the other's.
    pub fn declare_pool(&mut self, pool: IpNet, at: Place) -> Result<(), String> {
        let pool = pool.network();
        if let Some((other, at)) = self.declared.iter().find(|(p, _)| p.overlaps(&pool)) {
            return Err(format!(
                "pool {pool} overlaps pool {other} (line {at}): they would give out the same addresses"
            ));
        }
        self.declared.push((pool, at.line));
        Ok(())
    }

    /// Records addresses as taken; an address given twice in a fleet is a mistake.
    pub fn claim(&mut self, addrs: &[IpNet], at: Place) -> Result<(), String> {
        for a in addrs {
            if let Some(first) = self.used.insert(a.addr, at.line) {
                return Err(format!(
                    "address {} is already given to another interface (line {first})",
                    a.addr
                ));
            }
        }
        Ok(())
    }

    pub(crate) fn take_from_pools(&mut self, switch: u32, at: Place) -> Result<Vec<IpNet>, String> {
        let Some(pools) = self.pools.get_mut(&switch) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for (pool, next) in pools.iter_mut() {
            if *next >= pool.capacity() {
                return Err(format!(
                    "address pool {pool} is exhausted: it has {} host addresses",
                    pool.capacity()
                ));
            }
            out.push(pool.host(*next));
            *next += 1;
        }
        self.claim(&out, at)?;
        Ok(out)
    }

    /// Adds an interface made by `link` to node `i` (on a switch, to the shard its
    /// position falls in); returns the node it is on, its name and its index.
    pub(crate) fn push_iface(
        &mut self,
        i: u32,
        d: &EndDecl,
        link: Link,
        at: Place,
    ) -> Result<(u32, String, i32), String> {
        let switch = self.switch[i as usize];
        let name = match &d.iface {
            Some(n) => n.clone(),
            None if switch => self.default_port_name(i)?,
            None => {
                return Err(format!(
                    "the end on {:?} needs an interface name, as \"{}:eth0\"",
                    d.node, d.node
                ))
            }
        };
        crate::check_ifname(&name)?;
        check_addrs(&format!("{}:{name}", d.node), &d.addrs, d.mtu)?;
        if switch {
            bridge::check_port_name(&name)?;
        }
        let taken = match self.switches.get(&i) {
            Some(s) => s.names.contains(&name),
            None => self.wiring[i as usize].iface(&name).is_some(),
        };
        if taken {
            return Err(format!(
                "{} already has an interface named {name:?}",
                d.node
            ));
        }
        self.claim_ovs_port(i, &name)?;
        let on = if switch {
            self.port_shard(i, &name, at)?
        } else {
            i
        };
        let index = self.put(on, name.clone(), d, link, at);
        Ok((on, name, index))
    }

    /// Adds the end of a link that its peer makes (`Link::FarEnd`) to node `i`, as
    /// `push_iface` does; returns it as the peer that makes it names it.
    pub(crate) fn push_far_end(&mut self, i: u32, d: &EndDecl, at: Place) -> Result<Peer, String> {
        let (on, name, index) = self.push_iface(i, d, Link::FarEnd, at)?;
        Ok(Peer {
            node: self.name_of(on).to_string(),
            name,
            index,
            mtu: d.mtu,
            mac: d.mac,
        })
    }

    /// Ports of switch `i` so far, over all its shards.
    fn ports(&self, i: u32) -> usize {
        self.switches.get(&i).map_or(0, |s| s.names.len())
    }

    /// The shard node that switch `i`'s next port, `name`, goes on.
    fn port_shard(&mut self, i: u32, name: &str, at: Place) -> Result<u32, String> {
        // Bridge ports only: a switch's macvlans are not ports of a bridge.
        let ports = self.ports(i) - self.wiring[i as usize].macvlans.len();
        let shard = match self.is_ovs(i) {
            true => 0,
            false => ports / bridge::PORTS_PER_SHARD,
        };
        let on = self.shard(i, shard, at)?;
        let sw = self.switches.get_mut(&i).expect("made by shard()");
        sw.names.insert(name.to_string());
        Ok(on)
    }

    /// The node of shard `k` of switch `i`, made (with its trunk) if it is new.
    fn shard(&mut self, i: u32, k: usize, at: Place) -> Result<u32, String> {
        let sw = self.switches.entry(i).or_default();
        if sw.shards.is_empty() {
            sw.shards.push(i);
        }
        if let Some(&on) = sw.shards.get(k) {
            return Ok(on);
        }
        let switch = &self.names[i as usize];
        let name = bridge::shard_name(switch, k);
        if self.index.contains_key(&name) {
            let first = k * bridge::PORTS_PER_SHARD;
            return Err(format!(
                "switch {switch} has more than {first} ports, and its ports {} to {} go to a namespace of their own named {name:?}: a node already has that name; rename that node",
                first + 1,
                first + bridge::PORTS_PER_SHARD
            ));
        }
        crate::check_name("a switch's shard name", &name, crate::MAX_NODE_NAME)?;
        let on = self.add_node(name.clone(), true);
        self.shards.push(Shard {
            name: name.clone(),
            switch: i,
        });
        let sw = self.switches.get_mut(&i).expect("made above");
        sw.shards.push(on);
        let parent = sw.shards[bridge::parent_shard(k)];
        // The parent makes the trunk, as a switch makes its ports; the shard's end comes up
        // into its bridge with the other far ends.
        let (on_parent, on_shard) = bridge::trunk_names(k);
        let end = EndDecl::default();
        let index = self.put(on, on_shard.clone(), &end, Link::FarEnd, at);
        let peer = Peer {
            node: name,
            name: on_shard,
            index,
            mtu: None,
            mac: None,
        };
        self.put(parent, on_parent, &end, Link::Veth(peer), at);
        Ok(on)
    }

    /// Puts interface `name` on node `i`, at the next index; returns the index.
    fn put(&mut self, i: u32, name: String, d: &EndDecl, link: Link, at: Place) -> i32 {
        let bridge = self.switch[i as usize] && !self.is_ovs(i);
        let pos = self.wiring[i as usize].ifaces.len();
        // The two ends of a pair never share an index: the kernel treats a carrier change
        // on a veth whose peer has its own index as not urgent and delays it up to a
        // second (linkwatch_urgent_event), holding bridge ports "disabled" meanwhile.
        let made_elsewhere = link == Link::FarEnd;
        let base = match self.switches.get(&i).and_then(|s| s.ovs) {
            Some(slot) => ovs::index_base(slot),
            None => IFACE_BASE,
        };
        let w = &mut self.wiring[i as usize];
        let index = base + 2 * pos as i32 + made_elsewhere as i32;
        w.ifaces.push(Iface {
            name,
            index,
            mtu: d.mtu,
            mac: d.mac,
            addrs: d.addrs.clone(),
            impair: d.impair,
            bridge: bridge.then_some(0),
            link,
            software_checksums: false,
            at,
        });
        index
    }

    /// The name of node number `i`.
    pub(crate) fn name_of(&self, i: u32) -> &str {
        &self.names[i as usize]
    }

    /// A route on node `node`; `dev` must be one of its interfaces, and a gateway on a
    /// subnet one of its interfaces (`dev`, if given) is on.
    pub fn add_route(
        &mut self,
        node: &str,
        dst: IpNet,
        via: Option<IpAddr>,
        dev: Option<&str>,
        at: Place,
    ) -> Result<(), String> {
        let i = self.find(node)?;
        if via.is_some_and(|v| v.is_ipv4() != dst.addr.is_ipv4()) {
            return Err(format!(
                "route to {dst}: the gateway is not of the same IP version"
            ));
        }
        let w = &mut self.wiring[i as usize];
        let dev = match dev {
            None => None,
            Some(d) => Some(
                w.iface(d)
                    .ok_or_else(|| format!("route to {dst}: {node} has no interface {d:?}"))?
                    .index,
            ),
        };
        if via.is_none() && dev.is_none() {
            return Err(format!(
                "route to {dst}: expected `via ADDRESS` or `dev IFACE`"
            ));
        }
        // What the kernel would refuse half-way (EEXIST, ENETUNREACH), refused here.
        if let Some(r) = w.routes.iter().find(|r| r.dst == dst.network()) {
            return Err(format!(
                "route to {dst}: {node} already has a route to {} (line {}); one route per destination",
                r.dst, r.at.line
            ));
        }
        if let Some(gw) = via {
            check_gateway(w, node, dst, gw, dev)?;
        }
        w.routes.push(RouteSpec {
            dst: dst.network(),
            via,
            dev,
            at,
        });
        Ok(())
    }

    /// An address on node `node`'s `lo`.
    pub fn add_loopback(&mut self, node: &str, addr: IpNet, at: Place) -> Result<(), String> {
        let i = self.find(node)?;
        self.claim(&[addr], at)?;
        self.wiring[i as usize].loopback.push(addr);
        Ok(())
    }

    /// The fleet's Open vSwitch node, if it has OVS switches: the node after the file's
    /// (before any shard).
    /// Sets [`Plan::ovs_tso`], before the first link.
    pub fn set_ovs_tso(&mut self, on: bool) {
        self.ovs_tso = on;
    }

    /// Whether the fleet's Open vSwitch keeps its TSO support.
    pub fn ovs_tso(&self) -> bool {
        self.ovs_tso
    }

    pub fn ovs_hub(&self) -> Option<&str> {
        self.ovs_hub.map(|i| self.names[i as usize].as_str())
    }

    /// Every node's wiring, in order (the file's nodes, the fleet's Open vSwitch node if
    /// it has one, then the shards of big switches), and the shards.
    pub fn finish(self) -> (Vec<Arc<NodeWiring>>, Vec<Shard>) {
        let shards = self.shards;
        if self.wiring.iter().all(|w| *w == NodeWiring::default()) {
            return (Vec::new(), shards);
        }
        let unwired = Arc::new(NodeWiring::default());
        let wiring = self
            .wiring
            .into_iter()
            .map(|w| {
                if w == NodeWiring::default() {
                    unwired.clone()
                } else {
                    Arc::new(w)
                }
            })
            .collect();
        (wiring, shards)
    }
}

/// A gateway must be on a subnet of one of the node's interfaces (of `dev`, if given), as
/// the kernel requires of a route's next hop; a link-local IPv6 one needs `dev`.
fn check_gateway(
    w: &NodeWiring,
    node: &str,
    dst: IpNet,
    gw: IpAddr,
    dev: Option<i32>,
) -> Result<(), String> {
    let host = IpNet {
        addr: gw,
        prefix: if gw.is_ipv4() { 32 } else { 128 },
    };
    let link_local: IpNet = "fe80::/10".parse().expect("a prefix");
    if link_local.contains(&host) {
        return match dev {
            Some(_) => Ok(()),
            None => Err(format!(
                "route to {dst}: the link-local gateway {gw} needs `dev IFACE` too"
            )),
        };
    }
    let on = |i: &&crate::Iface| dev.is_none_or(|d| d == i.index);
    let connected = (w.ifaces.iter().filter(on))
        .flat_map(|i| &i.addrs)
        .any(|a| a.contains(&host));
    if connected {
        return Ok(());
    }
    let place = if dev.is_some() {
        "that interface"
    } else {
        node
    };
    Err(format!(
        "route to {dst}: gateway {gw} is on no subnet of {place}'s addresses; expected a gateway on a connected subnet"
    ))
}

/// What the kernel refuses on an interface, refused here: a multicast or unspecified
/// address, IPv6's loopback address (only `lo` may have it), and IPv6 on a link whose MTU
/// is below IPv6's minimum (1280), where the kernel turns IPv6 off. `owner` names the
/// interface (`r1:eth0`, or the host's `nsf-m`).
pub(crate) fn check_addrs(owner: &str, addrs: &[IpNet], mtu: Option<u32>) -> Result<(), String> {
    for a in addrs {
        if a.addr.is_ipv6() && a.addr.is_loopback() {
            return Err(format!(
                "{owner}: {a} is IPv6's loopback address, which only lo has"
            ));
        }
        if a.addr.is_multicast() || a.addr.is_unspecified() {
            let what = if a.addr.is_multicast() {
                "a multicast"
            } else {
                "an unspecified"
            };
            return Err(format!(
                "{owner}: {a} is {what} address; expected a unicast one"
            ));
        }
    }
    let v6 = addrs.iter().find(|a| a.addr.is_ipv6());
    if let (Some(a), Some(mtu)) = (v6, mtu.filter(|m| *m < 1280)) {
        return Err(format!(
            "{owner}: IPv6 address {a} on a link of MTU {mtu}; IPv6 needs an MTU of at least 1280"
        ));
    }
    Ok(())
}

//! Lays the fleet's links out onto its nodes: which end creates each veth pair, every
//! interface's name and index, switch ports spread over bridges, addresses from pools,
//! routes resolved to interface indexes. Pure bookkeeping; errors are plain sentences that
//! the parser places at a file position.

use super::{Iface, Impair, IpNet, NodeWiring, Peer, PeerNs, RouteSpec};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

/// A node's interfaces take indexes from here up, in declaration order: even for ends the
/// node creates, odd for ends created from the other side. Indexes are per namespace, and
/// a new namespace has only `lo` (1) and perhaps a few fallback tunnels.
const IFACE_BASE: i32 = 1000;
const BRIDGE_BASE: i32 = 1 << 24;
const JOIN_BASE: i32 = (1 << 24) + (1 << 16);

/// The kernel caps a bridge at 1,024 ports (BR_MAX_PORTS); a switch's bridges take this
/// many ports each and keep two for the veths that chain them.
pub const PORTS_PER_BRIDGE: usize = 1000;

/// The interface index of bridge `k` (`br{k}`) of a switch node.
pub fn bridge_index(k: u16) -> i32 {
    BRIDGE_BASE + k as i32
}

/// The indexes of the veth pair joining bridge `k` to bridge `k + 1`.
pub fn join_indices(k: u16) -> (i32, i32) {
    (JOIN_BASE + 2 * k as i32, JOIN_BASE + 2 * k as i32 + 1)
}

/// One end of a link as declared: a node, maybe an interface name, and its settings.
#[derive(Clone, Debug, Default)]
pub(crate) struct EndDecl {
    pub node: String,
    pub iface: Option<String>,
    pub addrs: Vec<IpNet>,
    pub mtu: Option<u32>,
    pub mac: Option<[u8; 6]>,
    pub impair: Option<Impair>,
}

pub(crate) struct Plan {
    index: HashMap<String, u32>,
    switch: Vec<bool>,
    wiring: Vec<NodeWiring>,
    /// Address pools of switches, with how many addresses each has handed out.
    pools: HashMap<u32, Vec<(IpNet, u64)>>,
    /// Every address given out so far, and the line that gave it.
    used: HashMap<IpAddr, u32>,
    /// Every pool of the file (switches', links', generators'), and its line.
    declared: Vec<(IpNet, u32)>,
}

impl Plan {
    /// `nodes`: every node's name and whether it is a switch, in creation order.
    pub fn new(nodes: impl Iterator<Item = (String, bool)>) -> Self {
        let mut plan = Plan {
            index: HashMap::new(),
            switch: Vec::new(),
            wiring: Vec::new(),
            pools: HashMap::new(),
            used: HashMap::new(),
            declared: Vec::new(),
        };
        for (i, (name, switch)) in nodes.enumerate() {
            plan.index.insert(name, i as u32);
            plan.switch.push(switch);
            plan.wiring.push(NodeWiring::default());
        }
        plan
    }

    fn find(&self, node: &str) -> Result<u32, String> {
        self.index
            .get(node)
            .copied()
            .ok_or_else(|| format!("there is no node or switch named {node:?}"))
    }

    pub fn is_switch(&self, node: &str) -> bool {
        self.index
            .get(node)
            .is_some_and(|i| self.switch[*i as usize])
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
    pub fn declare_pool(&mut self, pool: IpNet, line: u32) -> Result<(), String> {
        let pool = pool.network();
        if let Some((other, at)) = self.declared.iter().find(|(p, _)| p.overlaps(&pool)) {
            return Err(format!(
                "pool {pool} overlaps pool {other} (line {at}): they would give out the same addresses"
            ));
        }
        self.declared.push((pool, line));
        Ok(())
    }

    /// Records addresses as taken; an address given twice in a fleet is a mistake.
    pub fn claim(&mut self, addrs: &[IpNet], line: u32) -> Result<(), String> {
        for a in addrs {
            if let Some(first) = self.used.insert(a.addr, line) {
                return Err(format!(
                    "address {} is already given to another interface (line {first})",
                    a.addr
                ));
            }
        }
        Ok(())
    }

    fn take_from_pools(&mut self, switch: u32, line: u32) -> Result<Vec<IpNet>, String> {
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
        self.claim(&out, line)?;
        Ok(out)
    }

    /// A veth pair between two nodes. A switch end creates the pair (only the creating
    /// end can be enslaved at creation); between two switches, the second end is
    /// enslaved once both exist.
    pub fn add_link(&mut self, a: EndDecl, b: EndDecl, line: u32) -> Result<(), String> {
        let (mut ai, mut bi) = (self.find(&a.node)?, self.find(&b.node)?);
        if ai == bi {
            return Err(format!("both ends of the link are on {:?}", a.node));
        }
        let (mut a, mut b) = (a, b);
        if self.switch[bi as usize] && !self.switch[ai as usize] {
            std::mem::swap(&mut a, &mut b);
            std::mem::swap(&mut ai, &mut bi);
        }
        for (me, other) in [(&mut a, bi), (&mut b, ai)] {
            if me.addrs.is_empty() && self.switch[other as usize] {
                me.addrs = self.take_from_pools(other, line)?;
            } else {
                self.claim(&me.addrs, line)?;
            }
        }
        let b_iface = self.push_iface(bi, &b, None, line)?;
        let peer = Peer {
            ns: PeerNs::Node(b.node.clone()),
            name: b_iface.0,
            index: b_iface.1,
            mtu: b.mtu,
            mac: b.mac,
        };
        self.push_iface(ai, &a, Some(peer), line)?;
        Ok(())
    }

    /// A veth pair from a node to the host's namespace.
    pub fn add_host_link(
        &mut self,
        end: EndDecl,
        host_name: String,
        host_addrs: Vec<IpNet>,
        line: u32,
    ) -> Result<(), String> {
        let i = self.find(&end.node)?;
        super::check_ifname(&host_name)?;
        self.claim(&end.addrs, line)?;
        self.claim(&host_addrs, line)?;
        let peer = Peer {
            ns: PeerNs::Host { addrs: host_addrs },
            name: host_name,
            index: 0,
            mtu: end.mtu,
            mac: None,
        };
        self.push_iface(i, &end, Some(peer), line)?;
        Ok(())
    }

    /// Adds an interface to node `i`; returns its name and index.
    fn push_iface(
        &mut self,
        i: u32,
        d: &EndDecl,
        peer: Option<Peer>,
        line: u32,
    ) -> Result<(String, i32), String> {
        let switch = self.switch[i as usize];
        let w = &mut self.wiring[i as usize];
        let pos = w.ifaces.len();
        let name = match &d.iface {
            Some(n) => n.clone(),
            None if switch => format!("p{}", pos + 1),
            None => {
                return Err(format!(
                    "the end on {:?} needs an interface name, as \"{}:eth0\"",
                    d.node, d.node
                ))
            }
        };
        super::check_ifname(&name)?;
        if switch && name.starts_with("br") {
            return Err(format!(
                "interface name {name:?}: names starting with \"br\" are the switch's bridges"
            ));
        }
        if w.iface(&name).is_some() {
            return Err(format!(
                "{} already has an interface named {name:?}",
                d.node
            ));
        }
        // The two ends of a pair never share an index: the kernel treats a carrier change
        // on a veth whose peer has its own index as not urgent and delays it up to a
        // second (linkwatch_urgent_event), holding bridge ports "disabled" meanwhile.
        let index = IFACE_BASE + 2 * pos as i32 + peer.is_none() as i32;
        w.ifaces.push(Iface {
            name: name.clone(),
            index,
            mtu: d.mtu,
            mac: d.mac,
            addrs: d.addrs.clone(),
            impair: d.impair,
            bridge: switch.then_some((pos / PORTS_PER_BRIDGE) as u16),
            peer,
            line,
        });
        Ok((name, index))
    }

    /// A route on node `node`; `dev` must be one of its interfaces.
    pub fn add_route(
        &mut self,
        node: &str,
        dst: IpNet,
        via: Option<IpAddr>,
        dev: Option<&str>,
        line: u32,
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
        w.routes.push(RouteSpec {
            dst: dst.network(),
            via,
            dev,
            line,
        });
        Ok(())
    }

    pub fn finish(self) -> Vec<Arc<NodeWiring>> {
        if self.wiring.iter().all(|w| *w == NodeWiring::default()) {
            return Vec::new();
        }
        let switch = self.switch;
        let unwired = Arc::new(NodeWiring::default());
        self.wiring
            .into_iter()
            .enumerate()
            .map(|(i, mut w)| {
                if switch[i] {
                    w.bridges = w.ifaces.len().div_ceil(PORTS_PER_BRIDGE).max(1) as u16;
                }
                if w == NodeWiring::default() {
                    unwired.clone()
                } else {
                    Arc::new(w)
                }
            })
            .collect()
    }
}

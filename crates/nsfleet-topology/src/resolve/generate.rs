//! Generated topologies: a shape and a size become nodes, switches, links, addresses and
//! (optionally) shortest-path static routes, all through the same [`Plan`] as written-out
//! links. Point-to-point shapes give each link a /30 of the pool and name interfaces
//! `eth0`, `eth1`, ... in the order links reach a node.

use super::plan::Plan;
use crate::decl::EndDecl;
use crate::{Impair, IpNet, Names};
use std::collections::{HashSet, VecDeque};

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Shape {
    /// Every node on one switch.
    Star,
    /// Seed 003's fleet: routers, each with `eth0` on one shared switch and forwarding on.
    FakeRouters,
    Line,
    Ring,
    Tree {
        depth: u32,
        fanout: u32,
    },
    Mesh,
    Grid {
        rows: u64,
        cols: u64,
        torus: bool,
    },
    Random {
        edges: u64,
        seed: u64,
    },
    /// Mininet's LinearTopo: a chain of switches with one host on each.
    Linear,
}

/// Point-to-point shapes get at most this many static routes in all (nodes x links):
/// shortest-path routes grow quadratically.
const MAX_ROUTES: u64 = 250_000;
const MAX_MESH: u64 = 200;

#[derive(Clone, Debug)]
pub(crate) struct Generator {
    pub shape: Shape,
    /// Node count (for tree and grid, derived from their dimensions).
    pub count: u64,
    /// Node name template with one `{i}`, numbered from 1.
    pub names: String,
    /// The switch's name; for `linear`, a template for its switches.
    pub switch: String,
    /// What the switches' links to nodes are made of.
    pub ports: crate::Ports,
    pub pool: IpNet,
    pub routes: bool,
    pub mtu: Option<u32>,
    pub impair: Option<Impair>,
    pub at: crate::Place,
}

impl Shape {
    pub fn parse(kind: &str) -> Option<Shape> {
        Some(match kind {
            "star" => Shape::Star,
            "fake-routers" => Shape::FakeRouters,
            "line" => Shape::Line,
            "ring" => Shape::Ring,
            "tree" => Shape::Tree {
                depth: 0,
                fanout: 0,
            },
            "mesh" => Shape::Mesh,
            "grid" => Shape::Grid {
                rows: 0,
                cols: 0,
                torus: false,
            },
            "torus" => Shape::Grid {
                rows: 0,
                cols: 0,
                torus: true,
            },
            "random" => Shape::Random { edges: 0, seed: 0 },
            "linear" => Shape::Linear,
            _ => return None,
        })
    }

    pub const KINDS: &'static str =
        "star, fake-routers, at, ring, tree, mesh, grid, torus, random or linear";

    /// Whether nodes hang off switches (and share a subnet) rather than being linked
    /// pairwise.
    pub fn switched(&self) -> bool {
        matches!(self, Shape::Star | Shape::FakeRouters | Shape::Linear)
    }
}

impl Generator {
    pub fn node_names(&self) -> Names {
        Names::Generated {
            template: self.names.clone(),
            start: 1,
            count: self.count,
        }
    }

    pub fn switch_names(&self) -> Option<Names> {
        match self.shape {
            Shape::Star | Shape::FakeRouters => Some(Names::One(self.switch.clone())),
            Shape::Linear => Some(Names::Generated {
                template: self.switch.clone(),
                start: 1,
                count: self.count,
            }),
            _ => None,
        }
    }

    fn node(&self, i: u64) -> String {
        self.names.replace("{i}", &(i + 1).to_string())
    }

    /// Checks sizes before any name is generated.
    pub fn check(&self) -> Result<(), String> {
        let n = self.count;
        let min = match self.shape {
            Shape::Ring => 3,
            Shape::Line | Shape::Mesh | Shape::Random { .. } => 2,
            _ => 1,
        };
        if n < min {
            return Err(format!("this shape needs at least {min} nodes, got {n}"));
        }
        if self.shape == Shape::Mesh && n > MAX_MESH {
            return Err(format!("a full mesh of {n} nodes has {} links; nsfleet generates meshes of at most {MAX_MESH} nodes", n * (n - 1) / 2));
        }
        if let Shape::Random { edges, .. } = self.shape {
            if edges < n - 1 || edges > n * (n - 1) / 2 {
                return Err(format!(
                    "a connected random graph of {n} nodes has {} to {} links, got edges = {edges}",
                    n - 1,
                    n * (n - 1) / 2
                ));
            }
        }
        if self.shape.switched() {
            if self.pool.capacity() < n {
                return Err(format!(
                    "pool {} has {} host addresses; {n} are needed",
                    self.pool,
                    self.pool.capacity()
                ));
            }
        } else {
            let links = self.edge_count();
            let v4 = self.pool.addr.is_ipv4();
            let len = if v4 { 30 } else { 126 };
            if self.pool.subnets(len) < links {
                return Err(format!(
                    "pool {} has room for {} point-to-point /{len} subnets; {links} are needed",
                    self.pool,
                    self.pool.subnets(len)
                ));
            }
            if self.routes && n.saturating_mul(links) > MAX_ROUTES {
                return Err(format!(
                    "static routes for {n} nodes and {links} links would be {} routes (at most {MAX_ROUTES}); set routes = false",
                    n.saturating_mul(links)
                ));
            }
        }
        Ok(())
    }

    fn edge_count(&self) -> u64 {
        let n = self.count;
        match self.shape {
            Shape::Line | Shape::Tree { .. } => n - 1,
            Shape::Ring => n,
            Shape::Mesh => n * (n - 1) / 2,
            Shape::Grid { rows, cols, torus } => {
                let wrap = |k: u64| if torus && k >= 3 { k } else { k - 1 };
                rows * wrap(cols) + cols * wrap(rows)
            }
            Shape::Random { edges, .. } => edges,
            Shape::Star | Shape::FakeRouters | Shape::Linear => 0,
        }
    }

    /// The links of a point-to-point shape, as pairs of node positions.
    fn edges(&self) -> Vec<(u64, u64)> {
        let n = self.count;
        match self.shape {
            Shape::Line => (0..n - 1).map(|i| (i, i + 1)).collect(),
            Shape::Ring => (0..n).map(|i| (i, (i + 1) % n)).collect(),
            Shape::Tree { fanout, .. } => (1..n).map(|c| ((c - 1) / fanout as u64, c)).collect(),
            Shape::Mesh => (0..n)
                .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
                .collect(),
            Shape::Grid { rows, cols, torus } => {
                let mut e = Vec::new();
                for r in 0..rows {
                    for c in 0..cols {
                        let me = r * cols + c;
                        if c + 1 < cols || (torus && cols >= 3) {
                            e.push((me, r * cols + (c + 1) % cols));
                        }
                        if r + 1 < rows || (torus && rows >= 3) {
                            e.push((me, ((r + 1) % rows) * cols + c));
                        }
                    }
                }
                e
            }
            Shape::Random { edges, seed } => random_graph(n, edges, seed),
            Shape::Star | Shape::FakeRouters | Shape::Linear => Vec::new(),
        }
    }

    pub fn wire(&self, plan: &mut Plan) -> Result<(), String> {
        plan.declare_pool(self.pool, self.at)?;
        match self.shape {
            Shape::Star | Shape::FakeRouters => {
                plan.set_pool(&self.switch, self.pool)?;
                plan.set_ports(&self.switch, self.ports)?;
                for i in 0..self.count {
                    let end = self.end(self.node(i), "eth0", Vec::new());
                    let port = self.end(self.switch.clone(), "", Vec::new());
                    plan.add_link(end, port, self.at)?;
                }
                Ok(())
            }
            Shape::Linear => self.wire_linear(plan),
            _ => self.wire_pairs(plan),
        }
    }

    fn end(&self, node: String, iface: &str, addrs: Vec<IpNet>) -> EndDecl {
        EndDecl {
            node,
            iface: (!iface.is_empty()).then(|| iface.to_string()),
            addrs,
            mtu: self.mtu,
            mac: None,
            impair: self.impair,
        }
    }

    fn wire_linear(&self, plan: &mut Plan) -> Result<(), String> {
        let switch = |i: u64| self.switch.replace("{i}", &(i + 1).to_string());
        for i in 0..self.count {
            plan.set_ports(&switch(i), self.ports)?;
            let host = self.end(self.node(i), "eth0", vec![self.pool.host(i)]);
            plan.add_link(host, self.end(switch(i), "", Vec::new()), self.at)?;
            if i > 0 {
                let (a, b) = (switch(i - 1), switch(i));
                plan.add_link(self.end(a, "", vec![]), self.end(b, "", vec![]), self.at)?;
            }
        }
        Ok(())
    }

    fn wire_pairs(&self, plan: &mut Plan) -> Result<(), String> {
        let edges = self.edges();
        let len = if self.pool.addr.is_ipv4() { 30 } else { 126 };
        let mut degree = vec![0u32; self.count as usize];
        // Per node: (neighbour, link number, our interface name).
        let mut adj: Vec<Vec<(u64, usize)>> = vec![Vec::new(); self.count as usize];
        for (k, &(u, v)) in edges.iter().enumerate() {
            let net = self.pool.subnet(len, k as u64);
            let mut end = |x: u64, host: u64| {
                let name = format!("eth{}", degree[x as usize]);
                degree[x as usize] += 1;
                self.end(self.node(x), &name, vec![net.host(host)])
            };
            let (a, b) = (end(u, 0), end(v, 1));
            plan.add_link(a, b, self.at)?;
            adj[u as usize].push((v, k));
            adj[v as usize].push((u, k));
        }
        if self.routes {
            self.shortest_path_routes(plan, &edges, &adj, len)?;
        }
        Ok(())
    }

    /// For every node, a route to every link subnet it is not on, via the first hop of a
    /// shortest path (BFS).
    fn shortest_path_routes(
        &self,
        plan: &mut Plan,
        edges: &[(u64, u64)],
        adj: &[Vec<(u64, usize)>],
        len: u8,
    ) -> Result<(), String> {
        let n = self.count as usize;
        for s in 0..n {
            // first[v] = (neighbour of s the path to v starts with, the link to it).
            let mut first: Vec<Option<(u64, usize)>> = vec![None; n];
            let mut dist = vec![u64::MAX; n];
            dist[s] = 0;
            let mut queue = VecDeque::from([s as u64]);
            while let Some(u) = queue.pop_front() {
                for &(v, k) in &adj[u as usize] {
                    if dist[v as usize] == u64::MAX {
                        dist[v as usize] = dist[u as usize] + 1;
                        first[v as usize] = if u as usize == s {
                            Some((v, k))
                        } else {
                            first[u as usize]
                        };
                        queue.push_back(v);
                    }
                }
            }
            for (k, &(u, v)) in edges.iter().enumerate() {
                if u as usize == s || v as usize == s {
                    continue;
                }
                let near = if dist[u as usize] <= dist[v as usize] {
                    u
                } else {
                    v
                };
                let Some((hop, link)) = first[near as usize] else {
                    continue;
                };
                let net = self.pool.subnet(len, link as u64);
                // The hop is the second end of its link when it has the larger position.
                let (a, _) = edges[link];
                let gw = net.host(if a == hop { 0 } else { 1 }).addr;
                let dst = self.pool.subnet(len, k as u64);
                plan.add_route(&self.node(s as u64), dst, Some(gw), None, self.at)?;
            }
        }
        Ok(())
    }
}

/// A connected random graph: a random spanning tree, then random extra links.
fn random_graph(n: u64, edges: u64, seed: u64) -> Vec<(u64, u64)> {
    let mut state = seed ^ 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        // splitmix64: small, seedable, good enough for shapes.
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut set = HashSet::new();
    let mut out = Vec::new();
    for i in 1..n {
        let j = next() % i;
        set.insert((j, i));
        out.push((j, i));
    }
    while (out.len() as u64) < edges {
        let (a, b) = (next() % n, next() % n);
        let e = (a.min(b), a.max(b));
        if a != b && set.insert(e) {
            out.push(e);
        }
    }
    out
}

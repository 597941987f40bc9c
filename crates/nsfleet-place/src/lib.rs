//! nsfleet-place: which machine each node of a fleet runs on, when a fleet is spread over
//! several machines (a Kubernetes cluster's).
//!
//! A fleet is a graph here: a node is a vertex weighed by what it costs a machine (the
//! kernel memory of its namespaces, and its daemons'), a link is an edge. A placement gives
//! every machine a share of the weight in proportion to its capacity, never more than it
//! can hold, and cuts as few links as it can: every cut link becomes a VXLAN tunnel between
//! two machines, which costs a device at each end and 50 bytes of MTU.
//!
//! The method is the classic one of graph partitioners, kept small: each machine's part is
//! grown breadth-first from a far vertex of what is left (compact regions, as a grid's or a
//! ring's), then boundary vertices move to the neighbouring part that holds more of their
//! links (Fiduccia-Mattheyses' gain, greedily, in passes) while every part stays within its
//! bound. Linear in the links per pass; a million nodes over twenty machines take a second.
//!
//! This crate is pure: no I/O, no kernel, no cluster. It never decides what a node weighs
//! (the caller does, from what the node runs), and it never touches a topology.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// A fleet as a graph: each vertex's weight, and its links as an adjacency list.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    weight: Vec<u64>,
    /// Vertex v's neighbours are `adj[start[v]..start[v + 1]]` (a link appears at both ends).
    start: Vec<usize>,
    adj: Vec<u32>,
}

impl Graph {
    /// The graph of `weight.len()` vertices and the links `edges` (pairs of vertex indexes;
    /// a link of a vertex to itself, or one out of range, is left out).
    pub fn new(weight: Vec<u64>, edges: &[(u32, u32)]) -> Graph {
        let n = weight.len();
        let valid = |&&(a, b): &&(u32, u32)| a != b && (a as usize) < n && (b as usize) < n;
        let mut degree = vec![0usize; n + 1];
        for &(a, b) in edges.iter().filter(valid) {
            degree[a as usize] += 1;
            degree[b as usize] += 1;
        }
        let mut start = vec![0usize; n + 1];
        for v in 0..n {
            start[v + 1] = start[v] + degree[v];
        }
        let mut fill = start.clone();
        let mut adj = vec![0u32; start[n]];
        for &(a, b) in edges.iter().filter(valid) {
            adj[fill[a as usize]] = b;
            fill[a as usize] += 1;
            adj[fill[b as usize]] = a;
            fill[b as usize] += 1;
        }
        Graph { weight, start, adj }
    }

    pub fn len(&self) -> usize {
        self.weight.len()
    }

    pub fn is_empty(&self) -> bool {
        self.weight.is_empty()
    }

    fn neighbours(&self, v: usize) -> &[u32] {
        &self.adj[self.start[v]..self.start[v + 1]]
    }

    fn total(&self) -> u64 {
        self.weight.iter().sum()
    }
}

/// A machine a fleet may use, and what it can hold (in the unit of the vertices' weight).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    pub name: String,
    pub capacity: u64,
}

/// Which machine each vertex runs on (an index into the machines given), each machine's
/// load, and how many links it cuts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    pub machine_of: Vec<usize>,
    pub load: Vec<u64>,
    pub cut: usize,
}

/// Why a fleet cannot be placed, in the vertices' unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlaceError {
    /// No machine to place on.
    NoMachines,
    /// The fleet weighs more than all the machines hold together.
    TooBig { total: u64, capacity: u64 },
    /// One vertex weighs more than the largest machine holds (a switch of too many ports).
    VertexTooBig {
        vertex: usize,
        weight: u64,
        largest: u64,
    },
    /// The weights fit in sum but not as whole vertices (a few heavy vertices and machines
    /// of awkward sizes): the vertex that found no room.
    NoRoom { vertex: usize, weight: u64 },
}

impl std::fmt::Display for PlaceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlaceError::NoMachines => write!(f, "there is no machine to place the fleet on"),
            PlaceError::TooBig { total, capacity } => write!(
                f,
                "the fleet needs {total} and the machines hold {capacity} together"
            ),
            PlaceError::VertexTooBig {
                vertex,
                weight,
                largest,
            } => write!(
                f,
                "node {vertex} alone needs {weight} and the largest machine holds {largest}"
            ),
            PlaceError::NoRoom { vertex, weight } => write!(
                f,
                "node {vertex} (needing {weight}) fits on no machine once the others are placed"
            ),
        }
    }
}

impl std::error::Error for PlaceError {}

/// Most passes of boundary moves: each pass that moves nothing ends them sooner.
const PASSES: usize = 12;

/// Places `graph` on `machines`: balanced by capacity, within each machine's capacity,
/// cutting few links.
pub fn place(graph: &Graph, machines: &[Machine]) -> Result<Placement, PlaceError> {
    let bounds = Bounds::new(graph, machines)?;
    let mut p = Parts::grow(graph, &bounds)?;
    for _ in 0..PASSES {
        if p.refine(graph, &bounds) == 0 {
            break;
        }
    }
    Ok(p.into_placement(graph))
}

/// Each machine's share (its target) and the most it may take (its limit).
struct Bounds {
    target: Vec<u64>,
    limit: Vec<u64>,
}

impl Bounds {
    fn new(graph: &Graph, machines: &[Machine]) -> Result<Bounds, PlaceError> {
        if machines.is_empty() {
            return Err(PlaceError::NoMachines);
        }
        let total = graph.total();
        let capacity: u64 = machines.iter().map(|m| m.capacity).sum();
        if total > capacity {
            return Err(PlaceError::TooBig { total, capacity });
        }
        let largest = machines.iter().map(|m| m.capacity).max().unwrap_or(0);
        if let Some((vertex, &weight)) =
            (graph.weight.iter().enumerate()).find(|(_, &w)| w > largest)
        {
            return Err(PlaceError::VertexTooBig {
                vertex,
                weight,
                largest,
            });
        }
        let heaviest = graph.weight.iter().copied().max().unwrap_or(0);
        let share = |c: u64| (total as u128 * c as u128).div_ceil(capacity.max(1) as u128) as u64;
        let target: Vec<u64> = machines.iter().map(|m| share(m.capacity)).collect();
        // A part may pass its share by a little (a thirty-second, or one vertex) when that
        // keeps a link uncut; never its machine's capacity.
        let limit = (machines.iter().zip(&target))
            .map(|(m, &t)| m.capacity.min(t + (t / 32).max(heaviest)))
            .collect();
        Ok(Bounds { target, limit })
    }
}

const UNPLACED: usize = usize::MAX;

struct Parts {
    machine_of: Vec<usize>,
    load: Vec<u64>,
}

impl Parts {
    /// Each machine but the last grows its part breadth-first from a far vertex of what is
    /// left, up to its share; the last takes the rest; what does not fit goes where there
    /// is room.
    fn grow(graph: &Graph, bounds: &Bounds) -> Result<Parts, PlaceError> {
        let k = bounds.target.len();
        let mut p = Parts {
            machine_of: vec![UNPLACED; graph.len()],
            load: vec![0; k],
        };
        let mut next_seed = 0;
        for m in 0..k.saturating_sub(1) {
            while p.load[m] < bounds.target[m] {
                while next_seed < graph.len() && p.machine_of[next_seed] != UNPLACED {
                    next_seed += 1;
                }
                if next_seed == graph.len() {
                    break;
                }
                let seed = p.far_unplaced(graph, next_seed);
                if !p.grow_from(graph, seed, m, bounds.target[m]) {
                    break;
                }
            }
        }
        for v in 0..graph.len() {
            if p.machine_of[v] != UNPLACED {
                continue;
            }
            let w = graph.weight[v];
            let last = k - 1;
            let m = if p.load[last] + w <= bounds.limit[last] {
                last
            } else {
                (0..k)
                    .filter(|&m| p.load[m] + w <= bounds.limit[m])
                    .max_by_key(|&m| bounds.limit[m] - p.load[m])
                    .ok_or(PlaceError::NoRoom {
                        vertex: v,
                        weight: w,
                    })?
            };
            p.put(v, m, w);
        }
        Ok(p)
    }

    fn put(&mut self, v: usize, m: usize, w: u64) {
        self.machine_of[v] = m;
        self.load[m] += w;
    }

    /// The last vertex a breadth-first walk of the unplaced vertices from `from` reaches: a
    /// far end of its region, where growing a part leaves the rest in one piece.
    fn far_unplaced(&self, graph: &Graph, from: usize) -> usize {
        let mut seen = vec![false; graph.len()];
        let mut queue = VecDeque::from([from]);
        seen[from] = true;
        let mut last = from;
        while let Some(v) = queue.pop_front() {
            last = v;
            for &u in graph.neighbours(v) {
                let u = u as usize;
                if !seen[u] && self.machine_of[u] == UNPLACED {
                    seen[u] = true;
                    queue.push_back(u);
                }
            }
        }
        last
    }

    /// Grows machine `m`'s part from `seed` over unplaced vertices until it holds `target`,
    /// taking next the frontier vertex with most links into the part (the first reached
    /// among equals): a compact part, whose boundary is short. False when nothing could be
    /// added (the seed alone is too heavy).
    fn grow_from(&mut self, graph: &Graph, seed: usize, m: usize, target: u64) -> bool {
        use std::cmp::Reverse;
        let mut links_in = std::collections::HashMap::<usize, (u32, u64)>::new();
        let mut heap = std::collections::BinaryHeap::from([(0u32, Reverse(0u64), seed)]);
        links_in.insert(seed, (0, 0));
        let mut reached = 1u64;
        let mut added = false;
        while let Some((links, order, v)) = heap.pop() {
            if self.machine_of[v] != UNPLACED || links_in.get(&v) != Some(&(links, order.0)) {
                continue; // placed already, or an older entry of a vertex since re-queued
            }
            let w = graph.weight[v];
            if self.load[m] + w > target {
                continue;
            }
            self.put(v, m, w);
            added = true;
            if self.load[m] >= target {
                break;
            }
            for &u in graph.neighbours(v) {
                let u = u as usize;
                if self.machine_of[u] != UNPLACED {
                    continue;
                }
                let entry = links_in.entry(u).or_insert_with(|| {
                    reached += 1;
                    (0, reached)
                });
                entry.0 += 1;
                heap.push((entry.0, Reverse(entry.1), u));
            }
        }
        added
    }

    /// One pass of boundary moves: a vertex goes to the part that holds most of its links
    /// when that cuts fewer links (or as many, and evens the loads), within the bounds.
    /// Returns how many moved.
    fn refine(&mut self, graph: &Graph, bounds: &Bounds) -> usize {
        let k = self.load.len();
        let mut links_to = vec![0u32; k];
        let mut moved = 0;
        for v in 0..graph.len() {
            let here = self.machine_of[v];
            let ns = graph.neighbours(v);
            if ns.iter().all(|&u| self.machine_of[u as usize] == here) {
                continue;
            }
            for &u in ns {
                links_to[self.machine_of[u as usize]] += 1;
            }
            let w = graph.weight[v];
            let own = links_to[here];
            let over = self.load[here] > bounds.target[here];
            let best = (0..k)
                .filter(|&m| m != here && self.load[m] + w <= bounds.limit[m])
                .filter(|&m| {
                    links_to[m] > own
                        || (links_to[m] == own && over && self.load[m] + w <= bounds.target[m])
                })
                .max_by_key(|&m| (links_to[m], u64::MAX - self.load[m]));
            for &u in ns {
                links_to[self.machine_of[u as usize]] = 0;
            }
            if let Some(m) = best {
                self.load[here] -= w;
                self.put(v, m, w);
                moved += 1;
            }
        }
        moved
    }

    fn into_placement(self, graph: &Graph) -> Placement {
        let cut = (0..graph.len())
            .map(|v| {
                (graph.neighbours(v).iter())
                    .filter(|&&u| {
                        (u as usize) > v && self.machine_of[u as usize] != self.machine_of[v]
                    })
                    .count()
            })
            .sum();
        Placement {
            machine_of: self.machine_of,
            load: self.load,
            cut,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machines(caps: &[u64]) -> Vec<Machine> {
        (caps.iter().enumerate())
            .map(|(i, &capacity)| Machine {
                name: format!("m{}", i + 1),
                capacity,
            })
            .collect()
    }

    fn grid(rows: u32, cols: u32) -> Graph {
        let mut edges = Vec::new();
        for r in 0..rows {
            for c in 0..cols {
                let v = r * cols + c;
                if c + 1 < cols {
                    edges.push((v, v + 1));
                }
                if r + 1 < rows {
                    edges.push((v, v + cols));
                }
            }
        }
        Graph::new(vec![1; (rows * cols) as usize], &edges)
    }

    fn ring(n: u32) -> Graph {
        let edges: Vec<_> = (0..n).map(|i| (i, (i + 1) % n)).collect();
        Graph::new(vec![1; n as usize], &edges)
    }

    fn check(g: &Graph, ms: &[Machine], p: &Placement) {
        assert_eq!(p.machine_of.len(), g.len());
        for (m, machine) in ms.iter().enumerate() {
            let load: u64 = (0..g.len())
                .filter(|&v| p.machine_of[v] == m)
                .map(|v| g.weight[v])
                .sum();
            assert_eq!(load, p.load[m]);
            assert!(load <= machine.capacity, "{} over capacity", machine.name);
        }
    }

    #[test]
    fn a_ring_is_cut_once_per_part_boundary() {
        let g = ring(300);
        let ms = machines(&[1000, 1000, 1000]);
        let p = place(&g, &ms).unwrap();
        check(&g, &ms, &p);
        assert_eq!(p.cut, 3, "{p:?}");
        for &l in &p.load {
            assert!((95..=105).contains(&l), "unbalanced: {:?}", p.load);
        }
    }

    #[test]
    fn a_grid_is_cut_near_its_side() {
        // A 30 x 30 grid in two: the best cut is a straight line of 30 links.
        let g = grid(30, 30);
        let ms = machines(&[10_000, 10_000]);
        let p = place(&g, &ms).unwrap();
        check(&g, &ms, &p);
        assert!(p.cut <= 45, "cut {}", p.cut);
        assert!(
            p.load.iter().all(|&l| (435..=465).contains(&l)),
            "{:?}",
            p.load
        );
    }

    #[test]
    fn shares_follow_capacity() {
        let g = grid(20, 20);
        let ms = machines(&[300, 100]);
        let p = place(&g, &ms).unwrap();
        check(&g, &ms, &p);
        assert!(p.load[0] >= 290 && p.load[1] <= 100, "{:?}", p.load);
    }

    #[test]
    fn disconnected_nodes_are_spread() {
        let g = Graph::new(vec![1; 90], &[]);
        let ms = machines(&[40, 40, 40]);
        let p = place(&g, &ms).unwrap();
        check(&g, &ms, &p);
        assert_eq!(p.cut, 0);
        assert_eq!(p.load, vec![30, 30, 30]);
    }

    #[test]
    fn heavy_vertices_weigh_more() {
        // Ten routers that weigh 50 each and 500 hosts of 1 in a star around each router.
        let mut weight = vec![50; 10];
        let mut edges = Vec::new();
        for r in 0..10u32 {
            edges.push((r, (r + 1) % 10));
            for h in 0..50u32 {
                edges.push((r, 10 + r * 50 + h));
                weight.push(1);
            }
        }
        let g = Graph::new(weight, &edges);
        let ms = machines(&[600, 600]);
        let p = place(&g, &ms).unwrap();
        check(&g, &ms, &p);
        assert!(p.cut <= 6, "cut {}", p.cut);
    }

    #[test]
    fn too_big_a_fleet_is_refused() {
        let g = ring(10);
        assert_eq!(
            place(&g, &machines(&[4, 4])),
            Err(PlaceError::TooBig {
                total: 10,
                capacity: 8
            })
        );
        assert_eq!(place(&g, &[]), Err(PlaceError::NoMachines));
    }

    #[test]
    fn a_switch_bigger_than_any_machine_is_refused() {
        let g = Graph::new(vec![1, 90, 1], &[(0, 1), (1, 2)]);
        assert_eq!(
            place(&g, &machines(&[60, 60])),
            Err(PlaceError::VertexTooBig {
                vertex: 1,
                weight: 90,
                largest: 60
            })
        );
    }

    #[test]
    fn the_same_input_places_the_same() {
        let g = grid(17, 23);
        let ms = machines(&[200, 150, 100]);
        assert_eq!(place(&g, &ms), place(&g, &ms));
    }
}

//! From a Fleet's topology and the machines that run the agent, to one [`FleetPartSpec`]
//! per machine: the topology read, its nodes weighed by what they run, placed by
//! nsfleet-place, and each cut link given a VXLAN network identifier and an MTU.
//!
//! Pure: no cluster, no kernel (the topology is checked against the kernel nsfleet assumes;
//! each agent checks its part against its own).

use crate::crd::{FleetImage, FleetPartSpec, Software as PartSoftware, Tunnel};
use nsfleet_place::{Graph, Machine as PlaceMachine, PlaceError};
use nsfleet_topology::part::{NodeLink, VXLAN_OVERHEAD};
use nsfleet_topology::{KernelCaps, NodeConfig, NodeSpec, Software, Topology};
use std::collections::{BTreeSet, HashMap};

/// A machine the agent runs on, as its agent reported it.
#[derive(Clone, Debug, PartialEq)]
pub struct MachineInfo {
    pub name: String,
    /// Its address on the cluster's network: the tunnels' far end.
    pub address: String,
    /// Bytes of memory a fleet may take there (from the agent's preflight).
    pub capacity: u64,
    /// The MTU of the interface that address is on.
    pub mtu: u32,
    /// Network namespaces a fleet may still make there (its agent's preflight:
    /// user.max_net_namespaces, less a margin for the machine's own, less what other
    /// fleets' parts there hold).
    pub max_nodes: u64,
    /// The layers its image store holds, each by the first [`LAYER_KEY`] hex digits of
    /// its diff_id (as its agent said them).
    pub layers: BTreeSet<String>,
}

/// Hex digits of a diff_id by which an agent says its store holds a layer: enough that
/// two layers of one cluster never share them, short enough for a pod's annotation.
pub const LAYER_KEY: usize = 16;

impl MachineInfo {
    /// Whether the machine's store holds the layer `diff_id`.
    pub fn holds(&self, diff_id: &str) -> bool {
        let hex = diff_id.trim_start_matches("sha256:");
        self.layers.contains(hex.get(..LAYER_KEY).unwrap_or(hex))
    }

    /// Bytes of the layers of `images` (each layer once) the machine's store lacks.
    pub fn lacks(&self, images: &[FleetImage]) -> u64 {
        let mut seen = BTreeSet::new();
        (images.iter())
            .flat_map(|i| {
                i.layers
                    .iter()
                    .zip(i.layer_sizes.iter().chain(std::iter::repeat(&0)))
            })
            .filter(|(l, _)| seen.insert(l.as_str()) && !self.holds(l))
            .map(|(_, size)| size)
            .sum()
    }
}

/// The VXLAN UDP port of every tunnel (IANA's).
pub const VXLAN_PORT: u16 = 4789;

/// What a fleet needs of a cluster, and how it is spread over it.
#[derive(Debug)]
pub struct Plan {
    pub nodes: u64,
    pub parts: Vec<FleetPartSpec>,
    pub tunnels: usize,
    pub tunnel_mtu: u32,
}

/// Reads a topology as nsfleet does, without a kernel: nsfleet's TOML, or a containerlab
/// file (`format`, or whichever the text looks like). The images its nodes name are kept.
pub fn read(fleet: &str, text: &str, format: Option<&str>) -> Result<Topology, String> {
    let file = format!("fleet {fleet}'s topology");
    let draft = draft(&file, text, format, Software::Images).map_err(|e| e.to_string())?;
    let mut topo = draft
        .check(&KernelCaps::assumed())
        .map_err(|e| e.to_string())?;
    topo.name = fleet.to_string();
    Ok(topo)
}

/// A fleet's name as a Kubernetes fleet's: a DNS label (lower-case letters, digits and
/// '-'), since it names the Fleet and, before a '.', its parts (`NAME.MACHINE`: machine
/// names may hold '-' and '.', a fleet's name no '.', so no two parts' names meet).
pub fn check_fleet_name(name: &str) -> Result<(), String> {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    let edge = |c: Option<char>| c.is_some_and(|c| c != '-');
    if name.len() > 63
        || !name.chars().all(ok)
        || !edge(name.chars().next())
        || !edge(name.chars().last())
    {
        return Err(format!(
            "fleet name {name:?}: on Kubernetes a fleet's name is 1 to 63 lower-case letters, digits and '-', starting and ending with a letter or digit (give --name)"
        ));
    }
    Ok(())
}

/// The most bytes of topology text a fleet on Kubernetes may have. The Fleet and each of
/// its parts carry the text (JSON-escaped: a quote or a line's end takes two bytes), a
/// part its nodes' names and tunnels besides, and the cluster keeps no object over
/// etcd's request limit (1.5 MiB by default): refused here, before anything is made,
/// rather than by the API server half-way through the parts. 768 KiB of a fleet written
/// node by node is about 30,000 nodes, whose part on one machine is about 1.2 MB.
pub const MAX_TOPOLOGY_TEXT: usize = 768 << 10;

/// Whether a topology's text of `bytes` fits in a Fleet and its parts.
pub fn check_topology_size(bytes: usize) -> Result<(), String> {
    if bytes <= MAX_TOPOLOGY_TEXT {
        return Ok(());
    }
    Err(format!(
        "the topology's text is {:.1} MB: on Kubernetes the Fleet and each of its parts carry it, and a cluster keeps no object over about 1.5 MB (etcd's request limit), so it may have at most {} KiB; declare nodes many at a time (`count`, `[[generate]]`) rather than one by one",
        bytes as f64 / 1e6,
        MAX_TOPOLOGY_TEXT >> 10
    ))
}

/// The name of a fleet's part on a machine.
pub fn part_name(fleet: &str, machine: &str) -> String {
    format!("{fleet}.{machine}")
}

/// A topology's text read by its front-end (`format` "toml" or "clab", or whichever the
/// text looks like); with `Software::Host` the nodes run the machine's own programs,
/// whatever image they name.
pub fn draft(
    file: &str,
    text: &str,
    format: Option<&str>,
    software: Software,
) -> Result<nsfleet_topology::Draft, nsfleet_topology::TopologyError> {
    let clab = match format {
        Some("clab") => true,
        Some("toml") => false,
        Some(f) => {
            let m = format!("format {f:?}: expected \"toml\" or \"clab\"");
            return Err(nsfleet_topology::TopologyError::new(
                file,
                Default::default(),
                m,
            ));
        }
        None => looks_like_yaml(text),
    };
    let mut draft = match clab {
        true => nsfleet_topology::clab::read_with(file, text, software)?,
        false => nsfleet_topology::read(file, text)?,
    };
    if software == Software::Host {
        draft.forget_images();
    }
    Ok(draft)
}

/// Gives each part of `plan` the fleet's `software`, with only the images its own nodes
/// name (none with `host_software`): a machine fetches only what it runs. Each part says
/// the bytes its machine must fetch.
pub fn give_software(
    plan: &mut Plan,
    topo: &Topology,
    software: &PartSoftware,
    machines: &[MachineInfo],
) {
    give_images(&mut plan.parts, topo, software);
    say_fetch(plan, machines);
}

/// Each part's `fetch_bytes`: its images' layers its machine lacks.
fn say_fetch(plan: &mut Plan, machines: &[MachineInfo]) {
    for part in &mut plan.parts {
        let machine = machines.iter().find(|m| m.name == part.machine);
        part.fetch_bytes = machine.map_or(0, |m| m.lacks(&part.software.images));
    }
}

/// Moves whole parts between machines (swapping two, or onto a machine the plan left
/// empty) where that lowers the bytes of image layers to fetch: the same cut and the same
/// tunnels (their ends' addresses follow), each part within its new machine's memory and
/// namespaces. Greedy, one gainful move at a time, until none is left; a placement that
/// is otherwise equal is never made worse. For a new fleet only: a running fleet's nodes
/// stay where they are. Each part's `fetch_bytes` is said again after.
pub fn prefer_holders(plan: &mut Plan, machines: &[MachineInfo]) {
    let slot = |name: &str| machines.iter().position(|m| m.name == name);
    let fits = |p: &FleetPartSpec, m: &MachineInfo| {
        p.weight <= m.capacity && p.nodes.len() as u64 <= m.max_nodes
    };
    let cost = |p: &FleetPartSpec, m: usize| machines[m].lacks(&p.software.images);
    loop {
        let mut best: Option<(u64, usize, usize)> = None;
        for (i, p) in plan.parts.iter().enumerate() {
            let Some(mi) = slot(&p.machine) else { continue };
            for mj in (0..machines.len()).filter(|&m| m != mi) {
                let other = plan.parts.iter().find(|q| q.machine == machines[mj].name);
                let before = cost(p, mi) + other.map_or(0, |q| cost(q, mj));
                let after = cost(p, mj) + other.map_or(0, |q| cost(q, mi));
                let allowed =
                    fits(p, &machines[mj]) && other.is_none_or(|q| fits(q, &machines[mi]));
                if allowed && after < before && best.is_none_or(|(g, ..)| before - after > g) {
                    best = Some((before - after, i, mj));
                }
            }
        }
        let Some((_, i, mj)) = best else {
            return say_fetch(plan, machines);
        };
        let from = slot(&plan.parts[i].machine).expect("found above");
        move_part(plan, &machines[from], &machines[mj]);
    }
}

/// The part on machine `a` goes to machine `b`, and `b`'s (if any) to `a`; every tunnel
/// end follows its part.
fn move_part(plan: &mut Plan, a: &MachineInfo, b: &MachineInfo) {
    let swap = |s: &str| match s {
        x if x == a.name => b.name.clone(),
        x if x == b.name => a.name.clone(),
        x => x.to_string(),
    };
    let swap_address = |s: &str| match s {
        x if x == a.address => b.address.clone(),
        x if x == b.address => a.address.clone(),
        x => x.to_string(),
    };
    for p in &mut plan.parts {
        p.machine = swap(&p.machine);
        p.address = swap_address(&p.address);
        for t in &mut p.tunnels {
            t.a_address = swap_address(&t.a_address);
            t.b_address = swap_address(&t.b_address);
        }
    }
}

/// Gives each part the fleet's `software`, with only the images its own nodes name (none
/// with `host_software`).
fn give_images(parts: &mut [FleetPartSpec], topo: &Topology, software: &PartSoftware) {
    let named: HashMap<String, String> = (topo.nodes())
        .filter_map(|n| Some((n.name, n.config.image.as_ref()?.reference.clone())))
        .collect();
    for part in parts {
        let runs: Vec<&String> = part.nodes.iter().filter_map(|n| named.get(n)).collect();
        let images = match software.host_software {
            true => Vec::new(),
            false => (software.images.iter())
                .filter(|i| runs.contains(&&i.reference))
                .cloned()
                .collect(),
        };
        part.software = PartSoftware {
            host_software: software.host_software,
            pull: software
                .pull
                .clone()
                .filter(|_| images.iter().any(|i| i.from_registry)),
            images,
        };
    }
}

/// containerlab's files start with `name:` or have a `topology:` key; TOML has neither.
fn looks_like_yaml(text: &str) -> bool {
    text.lines()
        .map(str::trim_start)
        .any(|l| l.starts_with("topology:") || l.starts_with("name:"))
}

/// Bytes a node costs its machine, from what it runs: measured on this project's machine
/// class (a namespace with its links, an init and world, FRR's and BIRD's daemons, an Open
/// vSwitch's daemons). An estimate for placement, not a limit.
pub fn weight(config: &NodeConfig, ifaces: usize) -> u64 {
    const KB: u64 = 1 << 10;
    const MB: u64 = 1 << 20;
    let mut w = 300 * KB + 16 * KB * ifaces as u64;
    let runs = config.commands.join(" ");
    if config.ovs_hub.is_some() {
        w += 5 * MB;
    }
    if runs.contains("frr") || runs.contains("zebra") {
        w += 16 * MB;
    } else if runs.contains("bird") {
        w += 3 * MB;
    } else if config.image.is_some() || !config.commands.is_empty() {
        w += MB;
    }
    w
}

/// Places `topo` on `machines` and writes each machine's part; `vni_base` is the fleet's
/// first network identifier.
pub fn plan(
    topo: &Topology,
    text: &str,
    format: Option<&str>,
    machines: &[MachineInfo],
    vni_base: u32,
) -> Result<Plan, String> {
    let nodes: Vec<NodeSpec> = topo.nodes().collect();
    let index: HashMap<&str, usize> = (nodes.iter().enumerate())
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    // Glued nodes are one vertex: union-find over the nodes, each vertex its root.
    let mut root: Vec<usize> = (0..nodes.len()).collect();
    fn find(root: &mut [usize], v: usize) -> usize {
        let mut r = v;
        while root[r] != r {
            r = root[r];
        }
        root[v] = r;
        r
    }
    for (a, b) in topo.glued() {
        if let (Some(&a), Some(&b)) = (index.get(a.as_str()), index.get(b.as_str())) {
            let (ra, rb) = (find(&mut root, a), find(&mut root, b));
            root[ra] = rb;
        }
    }
    let mut vertex_of = vec![0u32; nodes.len()];
    let mut vertex_ids = HashMap::new();
    let mut weights = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        let r = find(&mut root, i);
        let next = weights.len() as u32;
        let v = *vertex_ids.entry(r).or_insert(next);
        if v == next {
            weights.push(0);
        }
        vertex_of[i] = v;
        weights[v as usize] += weight(&n.config, n.wiring.ifaces.len());
    }
    let links = topo.node_links();
    let mut edges = Vec::with_capacity(links.len());
    for l in &links {
        let (a, b) = (index[l.a.0.as_str()], index[l.b.0.as_str()]);
        edges.push((vertex_of[a], vertex_of[b]));
    }
    let graph = Graph::new(weights, &edges);
    let place_machines: Vec<PlaceMachine> = (machines.iter())
        .map(|m| PlaceMachine {
            name: m.name.clone(),
            capacity: m.capacity,
        })
        .collect();
    let placed = nsfleet_place::place(&graph, &place_machines)
        .map_err(|e| refusal(e, &nodes, &vertex_of, machines))?;
    let machine_of: HashMap<&str, usize> = (nodes.iter())
        .map(|n| {
            (
                n.name.as_str(),
                placed.machine_of[vertex_of[index[n.name.as_str()]] as usize],
            )
        })
        .collect();
    let mut next = vni_base;
    let mtu = tunnel_mtu(machines);
    let parts = parts_of(
        (topo, text, format),
        machines,
        &links,
        &machine_of,
        mtu,
        |_| {
            next += 1;
            next - 1
        },
    );
    check_namespaces(parts, machines)
}

/// Refuses a plan that gives a machine more nodes than it may make network namespaces.
fn check_namespaces(plan: Plan, machines: &[MachineInfo]) -> Result<Plan, String> {
    for p in &plan.parts {
        let Some(m) = machines.iter().find(|m| m.name == p.machine) else {
            continue;
        };
        if p.nodes.len() as u64 > m.max_nodes {
            return Err(format!(
                "machine {} may make {} more network namespaces for fleets (user.max_net_namespaces there) and its share of the fleet is {} nodes: raise the limit there (`sysctl -w user.max_net_namespaces=N`), or add machines",
                m.name,
                m.max_nodes,
                p.nodes.len()
            ));
        }
    }
    Ok(plan)
}

/// The MTU of a tunnel between any two of `machines`: the smallest underlay's, less
/// VXLAN's own.
fn tunnel_mtu(machines: &[MachineInfo]) -> u32 {
    machines.iter().map(|m| m.mtu).min().unwrap_or(1500) - VXLAN_OVERHEAD
}

/// The fleet's parts (of the topology, its text and format) once each node has its
/// machine (`machine_of`, an index into `machines`): each machine's nodes, weight and cut links, `vni` giving each cut link
/// its network identifier, each tunnel's ends `tunnel_mtu`.
fn parts_of(
    (topo, text, format): (&Topology, &str, Option<&str>),
    machines: &[MachineInfo],
    links: &[NodeLink],
    machine_of: &HashMap<&str, usize>,
    tunnel_mtu: u32,
    mut vni: impl FnMut(&NodeLink) -> u32,
) -> Plan {
    let mut parts: Vec<FleetPartSpec> = (machines.iter())
        .map(|m| FleetPartSpec {
            fleet: topo.name.clone(),
            machine: m.name.clone(),
            address: m.address.clone(),
            topology: text.to_string(),
            format: format.map(str::to_string),
            nodes: Vec::new(),
            tunnels: Vec::new(),
            weight: 0,
            software: PartSoftware::default(),
            up: Default::default(),
            fetch_bytes: 0,
        })
        .collect();
    let mut count = 0;
    for n in topo.nodes() {
        let part = &mut parts[machine_of[n.name.as_str()]];
        part.weight += weight(&n.config, n.wiring.ifaces.len());
        part.nodes.push(n.name.clone());
        count += 1;
    }
    let mut tunnels = 0;
    for link in links {
        let NodeLink { a, b } = link;
        let (ma, mb) = (machine_of[a.0.as_str()], machine_of[b.0.as_str()]);
        if ma == mb {
            continue;
        }
        let t = Tunnel {
            a: format!("{}:{}", a.0, a.1),
            b: format!("{}:{}", b.0, b.1),
            a_address: machines[ma].address.clone(),
            b_address: machines[mb].address.clone(),
            vni: vni(link),
            port: VXLAN_PORT,
            mtu: tunnel_mtu,
        };
        parts[ma].tunnels.push(t.clone());
        parts[mb].tunnels.push(t);
        tunnels += 1;
    }
    parts.retain(|p| !p.nodes.is_empty());
    Plan {
        nodes: count,
        parts,
        tunnels,
        tunnel_mtu,
    }
}

/// The fleet changed to `topo` (`nsfleet apply --kube`): a node placed already stays on its
/// machine (as the `current` parts say); a new node goes with what it is glued to, else
/// where most of its links lead among the machines with room for it, else to the machine
/// with the most room. A link cut already keeps its network identifier; a newly cut one
/// gets the next from `next_vni` (or above the fleet's own). Tunnels keep their MTU.
/// `machines` have the room left them by other fleets; only a machine given more than
/// it had is refused for want of room.
pub fn replan(
    topo: &Topology,
    text: &str,
    format: Option<&str>,
    machines: &[MachineInfo],
    current: &[FleetPartSpec],
    next_vni: u32,
) -> Result<Plan, String> {
    let slot = |m: &str| machines.iter().position(|x| x.name == m);
    let nodes: Vec<NodeSpec> = topo.nodes().collect();
    let mut load = vec![0u64; machines.len()];
    let mut machine_of: HashMap<&str, usize> = HashMap::new();
    let was: HashMap<&str, &str> = (current.iter())
        .flat_map(|p| p.nodes.iter().map(|n| (n.as_str(), p.machine.as_str())))
        .collect();
    let mut new = Vec::new();
    for n in &nodes {
        match was.get(n.name.as_str()) {
            Some(m) => {
                let i = slot(m).ok_or_else(|| {
                    format!("machine {m} holds part of the fleet and runs no ready nsfleet agent: the change cannot be made there")
                })?;
                machine_of.insert(n.name.as_str(), i);
                load[i] += weight(&n.config, n.wiring.ifaces.len());
            }
            None => new.push(n),
        }
    }
    let links = topo.node_links();
    let glued = topo.glued();
    while !new.is_empty() {
        let before = new.len();
        new.retain(|n| {
            let w = weight(&n.config, n.wiring.ifaces.len());
            let Some(i) = home_of(&n.name, w, &machine_of, &links, &glued, &load, machines) else {
                return true;
            };
            machine_of.insert(n.name.as_str(), i);
            load[i] += weight(&n.config, n.wiring.ifaces.len());
            false
        });
        if new.len() == before {
            // Nothing new touches a placed node: the first goes where there is most room.
            let n = new.remove(0);
            let i = roomiest(&load, machines).ok_or("no machine runs nsfleet's agent")?;
            machine_of.insert(n.name.as_str(), i);
            load[i] += weight(&n.config, n.wiring.ifaces.len());
        }
    }
    let mb = |b: u64| format!("{:.1} MB", b as f64 / (1 << 20) as f64);
    let had = |m: &str| {
        (current.iter())
            .filter(|p| p.machine == m)
            .map(|p| p.weight)
            .sum::<u64>()
    };
    for (m, l) in machines.iter().zip(&load) {
        if *l > m.capacity && *l > had(&m.name) {
            return Err(format!(
                "the changed fleet needs about {} on machine {}, which has {} for it",
                mb(*l),
                m.name,
                mb(m.capacity)
            ));
        }
    }
    let key = |a: &str, b: &str| {
        if a < b {
            (a.to_string(), b.to_string())
        } else {
            (b.to_string(), a.to_string())
        }
    };
    let kept: HashMap<(String, String), u32> = (current.iter())
        .flat_map(|p| p.tunnels.iter().map(|t| (key(&t.a, &t.b), t.vni)))
        .collect();
    // Above the fleet's own identifiers too: its tunnels are devices of each machine's
    // one network namespace, where a second of one identifier and port is refused.
    let mut next = next_vni.max(kept.values().map(|v| v + 1).max().unwrap_or(0));
    let kept_mtu = (current.iter())
        .flat_map(|p| p.tunnels.first())
        .map(|t| t.mtu)
        .next();
    let plan = parts_of(
        (topo, text, format),
        machines,
        &links,
        &machine_of,
        kept_mtu.unwrap_or_else(|| tunnel_mtu(machines)),
        |l| {
            let (a, b) = (
                format!("{}:{}", l.a.0, l.a.1),
                format!("{}:{}", l.b.0, l.b.1),
            );
            kept.get(&key(&a, &b)).copied().unwrap_or_else(|| {
                next += 1;
                next - 1
            })
        },
    );
    check_namespaces(plan, machines)
}

/// Where a new node (of `weight`) goes, if anything placed decides it: the machine of a
/// node it is glued to, else the one most of its placed neighbours are on among those with
/// room for it (the roomier on a tie).
fn home_of(
    node: &str,
    weight: u64,
    machine_of: &HashMap<&str, usize>,
    links: &[NodeLink],
    glued: &[(String, String)],
    load: &[u64],
    machines: &[MachineInfo],
) -> Option<usize> {
    let glued_to = (glued.iter())
        .filter_map(|(a, b)| match (a == node, b == node) {
            (true, _) => Some(b),
            (_, true) => Some(a),
            _ => None,
        })
        .find_map(|other| machine_of.get(other.as_str()).copied());
    if glued_to.is_some() {
        return glued_to;
    }
    let mut votes = vec![0usize; machines.len()];
    for l in links {
        let other = match (l.a.0 == node, l.b.0 == node) {
            (true, _) => &l.b.0,
            (_, true) => &l.a.0,
            _ => continue,
        };
        if let Some(&i) = machine_of.get(other.as_str()) {
            votes[i] += 1;
        }
    }
    let room = |i: usize| machines[i].capacity.saturating_sub(load[i]);
    (0..machines.len())
        .filter(|&i| votes[i] > 0 && room(i) >= weight)
        .max_by_key(|&i| (votes[i], room(i)))
}

/// The machine with the most room left.
fn roomiest(load: &[u64], machines: &[MachineInfo]) -> Option<usize> {
    (0..machines.len()).max_by_key(|&i| machines[i].capacity.saturating_sub(load[i]))
}

/// A placement's refusal in the fleet's words: node names and megabytes.
fn refusal(
    e: PlaceError,
    nodes: &[NodeSpec],
    vertex_of: &[u32],
    machines: &[MachineInfo],
) -> String {
    let mb = |b: u64| format!("{:.1} MB", b as f64 / (1 << 20) as f64);
    let names_of = |v: usize| {
        let names: Vec<&str> = (nodes.iter().zip(vertex_of))
            .filter(|(_, &x)| x as usize == v)
            .map(|(n, _)| n.name.as_str())
            .collect();
        names.join(", ")
    };
    match e {
        PlaceError::NoMachines => {
            "no machine of the cluster runs nsfleet's agent (is its DaemonSet installed? `nsfleet kube install`)".into()
        }
        PlaceError::TooBig { total, capacity } => format!(
            "the fleet needs about {} and the {} machines running the agent have {} free together",
            mb(total),
            machines.len(),
            mb(capacity)
        ),
        PlaceError::VertexTooBig {
            vertex,
            weight,
            largest,
        } => format!(
            "{} must be on one machine and need about {}, more than the largest machine has free ({})",
            names_of(vertex),
            mb(weight),
            mb(largest)
        ),
        PlaceError::NoRoom { vertex, weight } => format!(
            "{} (about {}) fits on no machine once the rest is placed",
            names_of(vertex),
            mb(weight)
        ),
    }
}

/// The cut links of one part, as the topology's [`part`](Topology::part) takes them.
pub fn crossings(tunnels: &[Tunnel]) -> Result<nsfleet_topology::part::Cut, String> {
    let end = |s: &str| -> Result<(String, String), String> {
        s.split_once(':')
            .map(|(n, i)| (n.to_string(), i.to_string()))
            .ok_or_else(|| format!("tunnel end {s:?}: expected node:iface"))
    };
    let addr = |s: &str| -> Result<std::net::IpAddr, String> {
        s.parse()
            .map_err(|_| format!("tunnel address {s:?}: expected an IP address"))
    };
    (tunnels.iter())
        .map(|t| {
            let link = NodeLink {
                a: end(&t.a)?,
                b: end(&t.b)?,
            };
            let crossing = nsfleet_topology::part::Crossing {
                vni: t.vni,
                port: t.port,
                mtu: t.mtu,
            };
            Ok((link, (crossing, addr(&t.a_address)?, addr(&t.b_address)?)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machines(n: usize, mb: u64) -> Vec<MachineInfo> {
        (1..=n)
            .map(|i| MachineInfo {
                name: format!("m{i}"),
                address: format!("10.233.0.{}", 10 + i),
                capacity: mb << 20,
                mtu: 1500,
                max_nodes: 1000,
                layers: BTreeSet::new(),
            })
            .collect()
    }

    const RING: &str = "[fleet]\nname = \"ring\"\n[[generate]]\nkind = \"ring\"\ncount = 30\npool = \"10.0.0.0/16\"\n";

    #[test]
    fn a_topology_text_over_what_the_cluster_keeps_is_refused_saying_how_to_shrink_it() {
        assert!(check_topology_size(MAX_TOPOLOGY_TEXT).is_ok());
        let e = check_topology_size(2_000_000).unwrap_err();
        assert!(e.starts_with("the topology's text is 2.0 MB"), "{e}");
        assert!(e.contains("`count`, `[[generate]]`"), "{e}");
    }

    #[test]
    fn each_part_gets_only_the_images_its_own_nodes_name() {
        let text = "[fleet]\nname = \"imgs\"\n[[node]]\nname = \"a{i}\"\ncount = 40\nimage = \"alpine\"\n[[node]]\nname = \"b{i}\"\ncount = 40\nimage = \"busybox\"\n[[node]]\nname = \"h\"\n";
        let topo = read("imgs", text, None).unwrap();
        let mut p = plan(&topo, text, None, &machines(2, 100), 5000).unwrap();
        use crate::crd::FleetImage;
        let image = |r: &str| FleetImage {
            reference: r.into(),
            ..FleetImage::default()
        };
        // busybox is pulled by the machines: only its parts carry how.
        let pulled = FleetImage {
            from_registry: true,
            ..image("busybox")
        };
        let how = crate::crd::MachinePull {
            secret: Some("nsfleet-pull-imgs".into()),
            insecure_registries: Vec::new(),
        };
        let mut software = PartSoftware {
            host_software: false,
            images: vec![image("alpine"), pulled],
            pull: Some(how.clone()),
        };
        give_images(&mut p.parts, &topo, &software);
        for part in &p.parts {
            let runs = |prefix: char| part.nodes.iter().any(|n| n.starts_with(prefix));
            let images = &part.software.images;
            let given: Vec<&str> = images.iter().map(|i| i.reference.as_str()).collect();
            assert_eq!(
                given.contains(&"alpine"),
                runs('a'),
                "{:?}: {given:?}",
                part.nodes
            );
            assert_eq!(
                given.contains(&"busybox"),
                runs('b'),
                "{:?}: {given:?}",
                part.nodes
            );
            assert_eq!(part.software.pull.is_some(), runs('b'));
        }
        software.host_software = true;
        give_images(&mut p.parts, &topo, &software);
        let host = |s: &PartSoftware| s.images.is_empty() && s.host_software;
        assert!(p.parts.iter().all(|p| host(&p.software)));
    }

    #[test]
    fn a_part_goes_where_its_layers_are_and_says_what_is_fetched() {
        // Two chains that share no link: each a part of its own, whichever machine.
        let mut text = String::from("[fleet]\nname = \"two\"\n");
        for (group, image) in [('a', "alpine"), ('b', "busybox")] {
            text +=
                &format!("[[node]]\nname = \"{group}{{i}}\"\ncount = 20\nimage = \"{image}\"\n");
            for i in 1..20 {
                text += &format!(
                    "[[link]]\na = \"{group}{i}:eth1\"\nb = \"{group}{}:eth0\"\n",
                    i + 1
                );
            }
        }
        let (topo, text) = (read("two", &text, None).unwrap(), text.as_str());
        let image = |r: &str, layer: char, size: u64| FleetImage {
            reference: r.into(),
            layers: vec![format!("sha256:{}", layer.to_string().repeat(64))],
            layer_sizes: vec![size],
            ..FleetImage::default()
        };
        let software = PartSoftware {
            host_software: false,
            images: vec![
                image("alpine", 'a', 5 << 20),
                image("busybox", 'b', 1 << 20),
            ],
            pull: None,
        };
        let groups = |p: &Plan| -> Vec<(String, String)> {
            (p.parts.iter())
                .map(|part| (part.machine.clone(), part.nodes[0].clone()))
                .collect()
        };
        for holder in ["m1", "m2"] {
            let mut machines = machines(2, 100);
            let m = machines.iter_mut().find(|m| m.name == holder).unwrap();
            m.layers.insert("a".repeat(LAYER_KEY));
            let mut p = plan(&topo, text, None, &machines, 5000).unwrap();
            let cut = p.tunnels;
            give_software(&mut p, &topo, &software, &machines);
            prefer_holders(&mut p, &machines);
            assert_eq!(p.tunnels, cut);
            let alpine = (p.parts.iter())
                .find(|part| part.software.images.iter().any(|i| i.reference == "alpine"))
                .unwrap();
            assert_eq!(alpine.machine, holder, "{:?}", groups(&p));
            assert_eq!(alpine.fetch_bytes, 0);
            let other = p.parts.iter().find(|part| part.machine != holder).unwrap();
            assert_eq!(other.fetch_bytes, 1 << 20);
            // Every tunnel end is on its node's machine.
            for part in &p.parts {
                for t in &part.tunnels {
                    let here =
                        |end: &str| part.nodes.iter().any(|n| end.starts_with(&format!("{n}:")));
                    let mine = if here(&t.a) {
                        &t.a_address
                    } else {
                        &t.b_address
                    };
                    assert_eq!(mine, &part.address);
                }
            }
        }
    }

    #[test]
    fn a_ring_over_three_machines_cuts_three_links() {
        let topo = read("ring", RING, None).unwrap();
        let p = plan(&topo, RING, None, &machines(3, 1000), 5000).unwrap();
        assert_eq!(p.nodes, 30);
        assert_eq!(p.parts.len(), 3);
        assert_eq!(p.tunnels, 3);
        assert_eq!(p.tunnel_mtu, 1450);
        for part in &p.parts {
            assert_eq!(part.nodes.len(), 10, "{:?}", part.nodes);
            assert_eq!(part.tunnels.len(), 2);
        }
        let vnis: Vec<u32> = p
            .parts
            .iter()
            .flat_map(|p| p.tunnels.iter().map(|t| t.vni))
            .collect();
        assert!(vnis.iter().all(|v| (5000..5003).contains(v)));
        // Each part, cut from the topology, has its tunnels where the plan says.
        let part = &p.parts[0];
        let cut = crossings(&part.tunnels).unwrap();
        let here: std::collections::HashSet<&str> = part.nodes.iter().map(String::as_str).collect();
        let t = topo.part(|n| here.contains(n), part.address.parse().unwrap(), &cut);
        let vx = t
            .wiring
            .iter()
            .flat_map(|w| &w.ifaces)
            .filter(|i| i.link.as_vxlan().is_some())
            .count();
        assert_eq!(vx, 2);
    }

    #[test]
    fn too_big_a_fleet_is_refused_in_megabytes() {
        let topo = read("ring", RING, None).unwrap();
        let e = plan(&topo, RING, None, &machines(2, 2), 1).unwrap_err();
        assert!(
            e.contains("the fleet needs about") && e.contains("have 4.0 MB free"),
            "{e}"
        );
        let e = plan(&topo, RING, None, &[], 1).unwrap_err();
        assert!(e.contains("runs nsfleet's agent"), "{e}");
    }

    #[test]
    fn a_change_keeps_nodes_and_tunnels_where_they_are() {
        let topo = read("ring", RING, None).unwrap();
        let before = plan(&topo, RING, None, &machines(3, 1000), 5000).unwrap();
        // Five nodes more, in a chain hung on r1: they go where r1 is; r30 goes.
        let text = format!(
            "{RING}[[node]]\nname = \"x{{i}}\"\ncount = 5\n[[link]]\na = \"r1:eth2\"\nb = \"x1:eth0\"\n[[link]]\na = \"x1:eth1\"\nb = \"x2:eth0\"\n"
        )
        .replace("count = 30", "count = 29");
        let after_topo = read("ring", &text, None).unwrap();
        let after = replan(
            &after_topo,
            &text,
            None,
            &machines(3, 1000),
            &before.parts,
            5000,
        )
        .unwrap();
        let home = |p: &Plan, n: &str| {
            (p.parts.iter())
                .find(|x| x.nodes.iter().any(|m| m == n))
                .map(|x| x.machine.clone())
        };
        for i in 1..30 {
            let n = format!("r{i}");
            assert_eq!(home(&before, &n), home(&after, &n), "{n} moved");
        }
        assert_eq!(home(&after, "r30"), None);
        assert_eq!(home(&after, "x1"), home(&after, "r1"));
        assert_eq!(home(&after, "x2"), home(&after, "r1"));
        assert!(home(&after, "x5").is_some());
        let vnis = |p: &Plan| -> std::collections::BTreeMap<(String, String), u32> {
            (p.parts.iter())
                .flat_map(|x| {
                    x.tunnels
                        .iter()
                        .map(|t| ((t.a.clone(), t.b.clone()), t.vni))
                })
                .collect()
        };
        let (old, new) = (vnis(&before), vnis(&after));
        for (link, vni) in &new {
            match old.get(link) {
                Some(v) => assert_eq!(v, vni, "{link:?} kept its identifier"),
                None => assert!(*vni >= 5003, "{link:?} got a new one: {vni}"),
            }
        }
        // Given the fleet's own first identifier, new links still get ones of their own.
        let mut all: Vec<u32> = new.values().copied().collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), new.len(), "{new:?}");
        assert!(
            new.len() > old.len() - 1,
            "the ring's closing link is cut anew: {new:?}"
        );
        // No room for the change: refused, in megabytes.
        let e = replan(
            &after_topo,
            &text,
            None,
            &machines(3, 1),
            &before.parts,
            6000,
        )
        .unwrap_err();
        assert!(e.contains("the changed fleet needs about"), "{e}");
        // A machine of the fleet without its agent: refused.
        let e = replan(
            &after_topo,
            &text,
            None,
            &machines(2, 1000),
            &before.parts,
            6000,
        )
        .unwrap_err();
        assert!(e.contains("machine m3 holds part of the fleet"), "{e}");
    }

    #[test]
    fn fleet_names_are_kubernetes_names_and_part_names_never_meet() {
        for ok in ["lab", "a-b", "r2d2"] {
            check_fleet_name(ok).unwrap();
        }
        for bad in ["Lab", "a_b", "a.b", "-a", "a-", "", &"a".repeat(64)] {
            assert!(check_fleet_name(bad).is_err(), "{bad:?}");
        }
        assert_ne!(part_name("a", "b-c"), part_name("a-b", "c"));
    }

    #[test]
    fn a_machine_that_may_make_too_few_namespaces_is_said() {
        let topo = read("ring", RING, None).unwrap();
        let mut few = machines(3, 1000);
        few[1].max_nodes = 4;
        let e = plan(&topo, RING, None, &few, 5000).unwrap_err();
        assert!(
            e.contains("machine m2 may make 4 more network namespaces") && e.contains("10 nodes"),
            "{e}"
        );
    }

    #[test]
    fn a_bad_topology_says_where() {
        let e = read("x", "[fleet]\nname = \"x\"\n[[node]]\nnam = \"a\"\n", None).unwrap_err();
        assert!(e.contains("fleet x's topology:4"), "{e}");
    }
}

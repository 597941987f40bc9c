//! Before the first namespace is created: what a topology needs against what this machine
//! allows. A host-wide limit in the way is a refusal that names the setting and the
//! command to lift it: host-wide settings are the administrator's, and nsfleet never
//! changes them. What is nsfleet's own (its supervisor's RLIMIT_NOFILE) it raises, and
//! says so. Reads /proc only.

use nsfleet_core::Holding;
use nsfleet_topology::{Subject, Topology};
use std::collections::HashMap;

/// Kernel memory a node costs beyond its interfaces, and an interface (one veth end, with
/// its sysfs and sysctl entries): rounded up from `nsfleet bench` on 6.18 (bare nodes
/// ~160 KB, fake routers ~150-300 KB).
const NODE_BYTES: u64 = 200 << 10;
const IFACE_BYTES: u64 = 64 << 10;
/// What a node that runs software costs beyond that: its world (mount, PID, UTS, IPC and
/// cgroup namespaces, its /proc, /sys and /run, its init, an image's writable layer).
/// Measured on 6.18, 500 nodes, MemAvailable: 527 KB per node running the host's
/// software, 378 KB per image node, a bare node's 186 KB included.
const WORLD_BYTES: u64 = 400 << 10;
/// What a node's memory cgroup (a node with a memory limit) costs per superblock on the
/// machine: a slot of its shrinker map (`alloc_shrinker_info`: 520 bytes per 64 slots,
/// in kmalloc-1k), and a node that runs software brings about 11 superblocks. So these
/// nodes cost with the square of the fleet: 10,000 of them, 1.7 MB each.
const SHRINKER_SLOT_BYTES: u64 = 16;
const SUPERBLOCKS_PER_WORLD: u64 = 11;
/// The share of the memory available a fleet may take: past it, the kernel reclaims on
/// every allocation (measured: 9,400 image nodes in 87% of it made 1 node a second).
const MEMORY_SHARE: f64 = 0.85;
/// Namespaces of nsfleet's own besides the nodes: the hub and reclamation fences.
const OWN_NAMESPACES: u64 = 3;
/// Descriptors a process of nsfleet keeps for itself besides one per node and process:
/// sockets, pipes, logs, the reclamation watch.
pub const SPARE_DESCRIPTORS: u64 = 4096;

#[derive(Debug, PartialEq, Eq)]
pub enum Finding {
    /// Creating this fleet would fail half-way, or take the machine down with it; where
    /// the file asks for it, if it is one place.
    Refuse(Subject),
    /// Worth knowing; nothing is in the way.
    Note(String),
}

/// Everything `topo` would run into on this machine, refusals first.
pub fn check(topo: &Topology, confined: bool) -> Vec<Finding> {
    let nodes = topo.node_count();
    let ifaces: u64 = topo.wiring.iter().map(|w| w.ifaces.len() as u64).sum();
    let addrs: u64 = (topo.wiring.iter().flat_map(|w| &w.ifaces))
        .map(|i| i.addrs.iter().filter(|a| a.addr.is_ipv4()).count() as u64)
        .sum();
    let mut out = Vec::new();
    namespaces(nodes, &mut out);
    if confined {
        let max = read_u64("/proc/sys/user/max_user_namespaces");
        user_namespaces(topo, max, &mut out);
    }
    descriptors(topo, &mut out);
    let running = (topo.groups.iter()).filter(|g| g.config.has_world());
    let size = Size {
        nodes,
        worlds: running.clone().map(|g| g.names.len()).sum(),
        memory_groups: (running.filter(|g| g.config.limits.memory_group()))
            .map(|g| g.names.len())
            .sum(),
        ifaces,
    };
    let available = nsfleet_core::mem_available().max(0) as u64;
    memory(kernel_bytes(size), available, &mut out);
    neighbours(addrs, &mut out);
    floods(topo, &mut out);
    host_ends(topo, &mut out);
    out.sort_by_key(|f| matches!(f, Finding::Note(_)));
    out
}

/// Host links' ends are the one thing a fleet makes in the host's namespace: a name the
/// host already has would fail half-way, and a subnet the host already routes through
/// another interface (a containerlab network left behind) would leave the host reaching
/// the wrong network.
fn host_ends(topo: &Topology, out: &mut Vec<Finding>) {
    let routes = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
    for i in topo.wiring.iter().flat_map(|w| &w.ifaces) {
        let Some(h) = i.link.as_host() else { continue };
        if std::path::Path::new("/sys/class/net")
            .join(&h.name)
            .exists()
        {
            out.push(Finding::Refuse(Subject::new(
                format!(
                    "host interface {} already exists on the host: give the host link another name",
                    h.name
                ),
                i.at,
            )));
        }
        for a in h.addrs.iter() {
            let std::net::IpAddr::V4(net) = a.network().addr else {
                continue;
            };
            if let Some(dev) = nsfleet_sys::ipv4_route_device(&routes, net, a.prefix) {
                out.push(Finding::Refuse(Subject::new(
                    format!(
                        "the host already routes {} through {dev}: another subnet for this fleet's host link (for a containerlab file: mgmt.ipv4-subnet)",
                        a.network()
                    ),
                    i.at,
                )));
            }
        }
    }
}

fn read_u64(path: &str) -> Option<u64> {
    std::fs::read_to_string(path)
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn namespaces(nodes: u64, out: &mut Vec<Finding>) {
    let Some(max) = read_u64("/proc/sys/user/max_net_namespaces") else {
        return;
    };
    let need = nodes + OWN_NAMESPACES;
    if need > max {
        out.push(Finding::Refuse(
            format!(
                "this fleet needs {need} network namespaces and user.max_net_namespaces is {max} \
             (every namespace of this user counts): raise it with \
             `sysctl -w user.max_net_namespaces={}`",
                need * 2
            )
            .into(),
        ));
    } else if need > max / 10 * 9 {
        out.push(Finding::Note(format!(
            "this fleet takes {need} of the {max} network namespaces user.max_net_namespaces allows"
        )));
    }
}

/// A confined node takes a user namespace of its own (see ARCHITECTURE.md, "Confinement"):
/// a kernel that refuses them, or allows too few, is said before anything exists, with the
/// setting, its fix, and `--privileged`. (Debian's `kernel.unprivileged_userns_clone` and
/// Ubuntu's `kernel.apparmor_restrict_unprivileged_userns` restrict users other than
/// root: not nsfleet, which runs as root.)
fn user_namespaces(topo: &Topology, max: Option<u64>, out: &mut Vec<Finding>) {
    let confined: u64 = (topo.groups.iter())
        .filter(|g| g.config.confined())
        .map(|g| g.names.len())
        .sum();
    if confined == 0 {
        return;
    }
    let or_privileged =
        "or bring the fleet up --privileged (its nodes then run as the host's root)";
    let Some(max) = max else { return };
    if confined > max {
        let why = match max {
            0 => "user namespaces are turned off here (user.max_user_namespaces = 0)".to_string(),
            _ => format!(
                "user.max_user_namespaces is {max} (every user namespace of this user counts)"
            ),
        };
        out.push(Finding::Refuse(
            format!(
                "this fleet's {confined} nodes that run software each need a user namespace of their own, and {why}: raise it with `sysctl -w user.max_user_namespaces={}`, {or_privileged}",
                confined * 2
            )
            .into(),
        ));
    }
}

/// The descriptors the supervisor of `topo` needs: one per node (its namespace), one per
/// process (its pidfd: each command, and an image's entrypoint), and the spare ones. A
/// world's init is reached by its pid, its pidfd opened when needed (see `World::pidfd`):
/// a pidfd kept per world held 10,000 image nodes to 7,952 under a hard limit of 20,000.
pub fn descriptors_needed(topo: &Topology) -> u64 {
    let per_node =
        |c: &nsfleet_topology::NodeConfig| c.commands.len() as u64 + u64::from(c.image.is_some());
    let held: u64 = (topo.groups.iter())
        .map(|g| g.names.len() * per_node(&g.config))
        .sum();
    topo.node_count() + held + SPARE_DESCRIPTORS
}

/// Who should hold the nodes' namespaces: the supervisor, when it may hold a descriptor per
/// node and per process; holder processes otherwise, or when `NSFLEET_HOLDER_CAP=N` asks
/// for holders of at most N descriptors each.
pub fn holding(topo: &Topology) -> Holding {
    let forced = std::env::var("NSFLEET_HOLDER_CAP").ok();
    if let Some(n) = forced.and_then(|v| v.parse().ok()) {
        return Holding::Holders {
            per_holder: Some(n),
        };
    }
    let (_, hard) = nsfleet_sys::nofile_limits();
    if descriptors_needed(topo) > hard && !nsfleet_sys::has_capability(CAP_SYS_RESOURCE) {
        Holding::Holders { per_holder: None }
    } else {
        Holding::Own
    }
}

fn descriptors(topo: &Topology, out: &mut Vec<Finding>) {
    let (soft, hard) = nsfleet_sys::nofile_limits();
    let mut need = descriptors_needed(topo);
    if let Holding::Holders { per_holder } = holding(topo) {
        need -= topo.node_count();
        let why = match per_holder {
            Some(n) => format!("NSFLEET_HOLDER_CAP={n}: holder processes keep the nodes' namespaces, at most {n} each"),
            None => format!(
                "RLIMIT_NOFILE's hard limit is {hard} and may not be raised here: holder \
                 processes keep the {} nodes' namespaces, up to {} each",
                topo.node_count(),
                hard.saturating_sub(64).max(1)
            ),
        };
        out.push(Finding::Note(why));
    }
    if need > hard && !nsfleet_sys::has_capability(CAP_SYS_RESOURCE) {
        // As many nodes as fit, each taking what this fleet's take on average.
        let nodes = topo.node_count();
        let fit = hard.saturating_sub(SPARE_DESCRIPTORS) * nodes
            / need.saturating_sub(SPARE_DESCRIPTORS).max(1);
        out.push(Finding::Refuse(
            format!(
                "the supervisor holds a descriptor per node and per process, {need} in \
             all, and RLIMIT_NOFILE's hard limit is {hard}, which this process may not raise (it \
             lacks CAP_SYS_RESOURCE): raise the hard limit where nsfleet is started (`ulimit -Hn \
             {need}` as root, LimitNOFILE= for a service), or make the fleet at most {fit} nodes \
             of these"
            )
            .into(),
        ));
        return;
    }
    if let Some(nr_open) = read_u64("/proc/sys/fs/nr_open") {
        if need > nr_open {
            out.push(Finding::Refuse(
                format!(
                    "the supervisor holds a descriptor per node and per process, {need} in all; \
                 fs.nr_open caps any process at {nr_open}: raise it with `sysctl -w fs.nr_open={}`",
                    need * 2
                )
                .into(),
            ));
            return;
        }
    }
    if need > soft {
        out.push(Finding::Note(format!(
            "the supervisor raises its RLIMIT_NOFILE from {soft} to {need} (a descriptor per node and per process)"
        )));
    }
}

const CAP_SYS_RESOURCE: u32 = 24;

/// What a fleet is made of, as far as its kernel memory goes.
#[derive(Clone, Copy, Default)]
struct Size {
    nodes: u64,
    /// Nodes that run software.
    worlds: u64,
    /// Of those, with a memory limit (a memory cgroup each).
    memory_groups: u64,
    ifaces: u64,
}

/// The kernel memory a fleet takes, by the measured costs above.
fn kernel_bytes(s: Size) -> u64 {
    let shrinker_map = SUPERBLOCKS_PER_WORLD * s.worlds * SHRINKER_SLOT_BYTES;
    s.nodes * NODE_BYTES
        + s.worlds * WORLD_BYTES
        + s.memory_groups * shrinker_map
        + s.ifaces * IFACE_BYTES
}

/// A fleet that needs `need` bytes of kernel memory, where `available` are.
fn memory(need: u64, available: u64, out: &mut Vec<Finding>) {
    if available == 0 {
        return;
    }
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    if need as f64 > available as f64 * MEMORY_SHARE {
        out.push(Finding::Refuse(
            format!(
            "this fleet would take about {:.1} GiB of kernel memory (namespaces, interfaces, and \
             the worlds of nodes that run software) and {:.1} GiB are available: make it smaller, \
             or free memory",
            gib(need),
            gib(available)
        )
            .into(),
        ));
    } else if need > available / 2 {
        out.push(Finding::Note(format!(
            "this fleet will take about {:.1} GiB of the {:.1} GiB of memory available",
            gib(need),
            gib(available)
        )));
    }
}

/// The neighbour (ARP) table is one for the whole machine, whatever the namespace: past
/// gc_thresh3 entries the kernel refuses new ones ("neighbour table overflow").
fn neighbours(addrs: u64, out: &mut Vec<Finding>) {
    let Some(thresh3) = read_u64("/proc/sys/net/ipv4/neigh/default/gc_thresh3") else {
        return;
    };
    if addrs > thresh3 {
        out.push(Finding::Note(format!(
            "{addrs} IPv4 addresses, and the machine-wide neighbour table holds at most \
             net.ipv4.neigh.default.gc_thresh3 = {thresh3} entries: if nodes will talk to many \
             peers, raise it (and gc_thresh1/2) with sysctl"
        )));
    }
}

/// A broadcast (an ARP request) on a switch is copied to every port of its broadcast
/// domain, and each copy a veth carries waits in the sending CPU's backlog, which holds
/// net.core.netdev_max_backlog packets: past it, copies are dropped, and hosts far from a
/// sender may never resolve each other. Measured: 19,000 routers on one switch with the
/// default 5,000, r1 could not reach r19000; with 100,000, it could.
fn floods(topo: &Topology, out: &mut Vec<Finding>) {
    let Some(backlog) = read_u64("/proc/sys/net/core/netdev_max_backlog") else {
        return;
    };
    let widest = widest_broadcast_domain(topo);
    if widest > backlog {
        out.push(Finding::Note(format!(
            "a broadcast on this fleet's widest switch reaches {widest} ports, and the kernel \
             queues each copy in the sending CPU's backlog of net.core.netdev_max_backlog = \
             {backlog}: copies beyond it are dropped, so hosts far apart may not resolve each \
             other (ARP); raise it with `sysctl -w net.core.netdev_max_backlog={}`",
            widest * 2
        )));
    }
}

/// The most interfaces of switches joined by links to each other (a switch's shards, or
/// switches wired together): the copies one broadcast makes.
fn widest_broadcast_domain(topo: &Topology) -> u64 {
    let nodes: Vec<_> = topo.nodes().collect();
    let index: HashMap<&str, usize> = (nodes.iter().enumerate())
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    let mut root: Vec<usize> = (0..nodes.len()).collect();
    fn find(root: &mut [usize], mut i: usize) -> usize {
        while root[i] != i {
            root[i] = root[root[i]];
            i = root[i];
        }
        i
    }
    for (i, n) in nodes.iter().enumerate().filter(|(_, n)| n.config.switch) {
        for peer in n.wiring.ifaces.iter().filter_map(|f| f.link.as_veth()) {
            if let Some(&j) = index.get(peer.node.as_str()) {
                if nodes[j].config.switch {
                    let (a, b) = (find(&mut root, i), find(&mut root, j));
                    root[a] = b;
                }
            }
        }
    }
    let mut ports: HashMap<usize, u64> = HashMap::new();
    for (i, n) in nodes.iter().enumerate().filter(|(_, n)| n.config.switch) {
        *ports.entry(find(&mut root, i)).or_default() += n.wiring.ifaces.len() as u64;
    }
    ports.into_values().max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nsfleet_topology::KernelCaps;

    #[test]
    fn an_absurd_fleet_is_refused_before_anything_exists() {
        let topo = nsfleet_topology::parse(
            "t.toml",
            "[fleet]\nname = \"big\"\n[[node]]\nname = \"n{i}\"\ncount = 200000\n",
            &KernelCaps::assumed(),
        )
        .unwrap();
        let found = check(&topo, true);
        assert!(
            found.iter().any(|f| matches!(f, Finding::Refuse(m) if m.text.contains("max_net_namespaces") || m.text.contains("memory"))),
            "{found:?}"
        );
        assert!(matches!(found[0], Finding::Refuse(_)), "refusals first");
    }

    #[test]
    fn a_kernel_without_user_namespaces_is_said_with_its_setting_and_privileged() {
        let text = "[fleet]\nname = \"u\"\n[[node]]\nname = \"a{i}\"\ncount = 3\ncommands = [\"true\"]\n[[node]]\nname = \"bare\"\n";
        let topo = nsfleet_topology::parse("t.toml", text, &KernelCaps::assumed()).unwrap();
        let mut found = Vec::new();
        user_namespaces(&topo, Some(0), &mut found);
        let [Finding::Refuse(m)] = &found[..] else {
            panic!("{found:?}")
        };
        for said in [
            "3 nodes that run software",
            "user.max_user_namespaces = 0",
            "sysctl -w user.max_user_namespaces=6",
            "--privileged",
        ] {
            assert!(m.text.contains(said), "{said:?} in {}", m.text);
        }
        let mut found = Vec::new();
        user_namespaces(&topo, Some(3), &mut found);
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn nodes_that_run_software_are_counted_at_what_their_worlds_cost() {
        // This machine's 24 GiB, 23.5 GB available: 10,000 image nodes fit once their
        // memory cgroups went; with a memory limit each, they cost 1.7 MB more each;
        // 50,000 bare routers (two interfaces each) ran.
        let refused = |size: Size| {
            let mut out = Vec::new();
            memory(kernel_bytes(size), 23_502 << 20, &mut out);
            out.iter().any(|f| matches!(f, Finding::Refuse(_)))
        };
        let images = Size {
            nodes: 10_000,
            worlds: 10_000,
            ..Size::default()
        };
        assert!(!refused(images));
        assert!(refused(Size {
            memory_groups: 10_000,
            ..images
        }));
        assert!(!refused(Size {
            nodes: 50_000,
            ifaces: 100_000,
            ..Size::default()
        }));
    }

    #[test]
    fn a_small_fleet_meets_nothing() {
        let topo = nsfleet_topology::parse(
            "t.toml",
            "[fleet]\nname = \"s\"\n[[node]]\nname = \"a\"\n",
            &KernelCaps::assumed(),
        )
        .unwrap();
        assert!(check(&topo, true)
            .iter()
            .all(|f| matches!(f, Finding::Note(_))));
    }

    #[test]
    fn a_broadcast_domain_spans_a_switchs_shards_and_linked_switches() {
        let text = "[fleet]\nname = \"b\"\n[[switch]]\nname = \"other\"\n[[generate]]\nkind = \"star\"\ncount = 2500\nswitch = \"sw\"\n";
        let topo = nsfleet_topology::parse("t.toml", text, &KernelCaps::assumed()).unwrap();
        // sw's 1,000 ports and two trunks, sw.2's 1,000 and one, sw.3's 500 and one.
        assert_eq!(widest_broadcast_domain(&topo), 2504);
    }
}

//! What the front-ends hand to the resolver and the resolver to the engine: node
//! [`Groups`] as they are declared (names unique, configurations built, what they ask of
//! the kernel and the host), and the [`Draft`], a topology checked against everything but
//! the machine, which [`Draft::check`] checks against the machine's answer.

use crate::decl::Spanned;
use crate::error::{Ctx, Errors, TopologyError};
use crate::resolve::config;
use crate::resolve::plan::Plan;
use crate::{Asks, IpNet, KernelCaps, Names, NodeConfig, NodeGroup, Topology, NO_NETEM};
use std::collections::HashMap;
use std::sync::Arc;

/// Upper bounds that catch typos (`count = 1000000000`) long before the kernel would:
/// a fleet over the machines of a cluster (`up --kube`) may have this many nodes. What one
/// machine can hold is its preflight's to say (its memory, its namespaces' limit).
pub(crate) const MAX_COUNT: u64 = 1_000_000;

/// A topology that is valid as far as the file alone can say, and what it asks of the
/// kernel: the engine answers [`Draft::asks`] with a probe and hands the answer to
/// [`Draft::check`]. So the kernel is probed for exactly what a file uses.
#[derive(Debug)]
pub struct Draft {
    topo: Topology,
    /// Each sysctl and value the nodes set, once, with where it is written.
    sysctls: Vec<config::Asked>,
    /// What the nodes' kinds need of the host, with where.
    needs: Vec<config::Needed>,
    netem_at: Option<TopologyError>,
    /// Each kind of device a kernel may lack, with the first place that asks for one.
    devices_at: Vec<(&'static str, TopologyError)>,
    /// What the file asks that nsfleet does not do, where it asks it (containerlab keys
    /// it has no use for).
    warnings: Vec<TopologyError>,
    /// What only the host's root may make, each where it is asked and why: refused in a
    /// user's fleet.
    host_root_at: Vec<TopologyError>,
}

/// Why a user's fleet has no link to the host: what each place that asks one is told.
const HOST_LINK_AS_USER: &str = "a link to the host: the host's network namespace is root's, and a user's fleet lives in a user namespace of its own; reach the node with `nsfleet exec`, or run nsfleet as root (docs/rootless.md)";

impl Draft {
    /// A draft of `topo`, whose groups ask the kernel for the sysctls of `groups`.
    pub(crate) fn new(
        topo: Topology,
        groups: Groups,
        cx: Ctx<'_>,
        warnings: Vec<TopologyError>,
    ) -> Draft {
        let mut devices_at: Vec<(&'static str, TopologyError)> = Vec::new();
        for i in topo.wiring.iter().flat_map(|w| &w.ifaces) {
            if let Some(kind) = i.link.optional_device() {
                if !devices_at.iter().any(|(k, _)| *k == kind) {
                    devices_at.push((kind, TopologyError::new(cx.file, i.at, "")));
                }
            }
        }
        let mut host_root_at = Vec::new();
        for i in topo.wiring.iter().flat_map(|w| &w.ifaces) {
            if matches!(&i.link, crate::Link::Host(h) if !h.management) {
                host_root_at.push(TopologyError::new(cx.file, i.at, HOST_LINK_AS_USER));
            }
        }
        Draft {
            host_root_at,
            topo,
            sysctls: groups.asked,
            needs: groups.needs,
            netem_at: cx.netem_at.into_inner(),
            devices_at,
            warnings,
        }
    }

    /// Forgets the images the nodes name: they run the host's software (`Software::Host`).
    pub fn forget_images(&mut self) {
        for g in &mut self.topo.groups {
            if g.config.image.is_some() {
                Arc::make_mut(&mut g.config).image = None;
            }
        }
    }

    /// Every port the nodes publish, in the file's order (a group's once).
    pub fn published_ports(&self) -> Vec<crate::PublishedPort> {
        let groups = self.topo.groups.iter();
        groups
            .flat_map(|g| g.config.ports.iter().cloned())
            .collect()
    }

    /// The fleet's name, as the file gives it.
    pub fn name(&self) -> &str {
        &self.topo.name
    }

    pub fn warnings(&self) -> &[TopologyError] {
        &self.warnings
    }

    pub fn asks(&self) -> Asks {
        let paths: std::collections::BTreeSet<&String> =
            self.sysctls.iter().map(|a| &a.path).collect();
        Asks {
            sysctls: paths.into_iter().cloned().collect(),
            values: (self.sysctls.iter())
                .map(|a| (a.path.clone(), a.value.clone()))
                .collect(),
            netem: self.netem_at.is_some(),
            devices: (self.devices_at.iter())
                .map(|(k, _)| k.to_string())
                .collect(),
            host: self.needs.iter().map(|n| n.need.clone()).collect(),
        }
    }

    /// The topology, if the kernel offers and the host has what it asks for; otherwise
    /// every place it asks what they lack or refuse. The kinds' folders get their owners.
    pub fn check(mut self, kernel: &KernelCaps) -> Result<Topology, TopologyError> {
        let mut errors = Errors::default();
        let mut said = std::collections::HashSet::new();
        for n in self
            .needs
            .iter()
            .filter(|n| kernel.host.missing.contains(&n.need))
        {
            // Once per place: every node of a group (or of `[defaults]`) says the same.
            if said.insert((n.at.at, n.why.clone())) {
                let why = match &n.need {
                    crate::HostNeed::Cgroup(c) if !kernel.host_root => {
                        cgroup_as_user(c, kernel.host.reasons.get(&n.need))
                    }
                    _ => n.why.clone(),
                };
                errors.take::<()>(Err(n.at.with(why)));
            }
        }
        if !kernel.host_root {
            for e in &self.host_root_at {
                errors.take::<()>(Err(e.clone()));
            }
        }
        if let Some(at) = self.netem_at.filter(|_| !kernel.netem) {
            errors.take::<()>(Err(at.with(NO_NETEM)));
        }
        for (kind, at) in &self.devices_at {
            if kernel.missing_devices.contains(*kind) {
                errors.take::<()>(Err(at.with(crate::no_device(kind))));
            }
        }
        if let Some(writable) = &kernel.netns_sysctls {
            for a in &self.sysctls {
                errors.take(sysctl_refusal(a, writable, kernel));
            }
        }
        errors.done()?;
        owners(&mut self.topo, &kernel.host.users);
        Ok(self.topo)
    }
}

/// Why a user's fleet has no limit that needs controller `c`: `why`, the host's reason.
fn cgroup_as_user(c: &str, why: Option<&String>) -> String {
    let why = why.map_or("there is none", String::as_str);
    format!("`{c}` limits a node through a cgroup, which nsfleet as a user makes only below a cgroup v2 group delegated to the user (systemd's user@UID.service, Delegate=yes): {why}. Remove the limit, or run nsfleet as root (docs/rootless.md)")
}

/// Each folder a kind gives to a user by name owned by that user's ids, where the host
/// said them (unknown users leave the folder root's: only a check without the host does).
fn owners(topo: &mut Topology, users: &std::collections::BTreeMap<String, (u32, u32)>) {
    for g in &mut topo.groups {
        if !g.config.dirs.iter().any(|d| d.user.is_some()) {
            continue;
        }
        for d in &mut Arc::make_mut(&mut g.config).dirs {
            if let Some(ids) = d.user.as_ref().and_then(|u| users.get(u)) {
                d.owner = Some(*ids);
            }
        }
    }
}

/// Why `kernel` refuses the sysctl `a` asks for, if it does.
fn sysctl_refusal(
    a: &config::Asked,
    writable: &std::collections::BTreeSet<String>,
    kernel: &KernelCaps,
) -> Result<(), TopologyError> {
    let (key, value) = (&a.key, &a.value);
    if writable.contains(&a.path) {
        return match kernel.refused_values.get(&(a.path.clone(), value.clone())) {
            Some(why) => Err(a.at.with(format!(
                "sysctl {key:?} = {value:?}: the kernel refuses this value ({why})"
            ))),
            None => Ok(()),
        };
    }
    let hint = if kernel.host_sysctls.contains(&a.path) {
        "it exists on the host but is not per network namespace"
    } else {
        "no such sysctl on this kernel"
    };
    Err(a.at.with(format!("sysctl {key:?}: {hint}")))
}

/// Node groups as they are declared, with every name checked to be unique.
#[derive(Default)]
pub(crate) struct Groups {
    pub(crate) list: Vec<NodeGroup>,
    /// Per group: its templates, and its loopback pools with where they are written.
    pub(crate) templates: Vec<config::Templates>,
    pub(crate) loopbacks: Vec<Option<(Vec<IpNet>, TopologyError)>>,
    /// Every distinct per-namespace sysctl and value the groups set, with where (see
    /// `Draft`).
    asked: Vec<config::Asked>,
    /// What each group's kind needs of the host, with where the kind is written.
    needs: Vec<config::Needed>,
    /// What the groups' configurations say at their places (each place once).
    pub(crate) warnings: Vec<TopologyError>,
    seen: HashMap<String, u32>,
    total: u64,
}

impl Groups {
    /// The wiring plan of every node of the groups, in their order.
    pub(crate) fn plan(&self) -> Plan {
        Plan::new(self.list.iter().flat_map(|g| {
            let switch = g.config.switch;
            g.names.iter().map(move |n| (n, switch))
        }))
    }

    /// Every node's wiring from `plan`, with the shards of big switches added as groups,
    /// each configured as its switch is.
    pub(crate) fn finish(&mut self, plan: Plan) -> Vec<Arc<crate::NodeWiring>> {
        if let Some(hub) = plan.ovs_hub() {
            let mut controllers: Vec<std::net::SocketAddr> = (self.list.iter())
                .filter_map(|g| g.config.ovs.as_ref())
                .flat_map(|o| o.controllers.iter().copied())
                .collect();
            controllers.sort();
            controllers.dedup();
            self.list.push(NodeGroup {
                names: Names::One(hub.to_string()),
                config: Arc::new(crate::kind::ovs::hub_config(controllers, plan.ovs_tso())),
            });
            self.templates.push(config::Templates::default());
            self.loopbacks.push(None);
        }
        let (wiring, shards) = plan.finish();
        for shard in shards {
            let config = self.group_of(shard.switch).config.clone();
            self.list.push(NodeGroup {
                names: Names::One(shard.name),
                config,
            });
            self.templates.push(config::Templates::default());
            self.loopbacks.push(None);
        }
        wiring
    }

    /// The group of the node numbered `node` (in creation order).
    fn group_of(&self, node: u32) -> &NodeGroup {
        let mut first = 0;
        for g in &self.list {
            first += g.names.len();
            if u64::from(node) < first {
                return g;
            }
        }
        panic!("node {node} is in no group")
    }

    pub(crate) fn add(
        &mut self,
        cx: &Ctx<'_>,
        names: Names,
        built: config::Built,
        at: &Spanned<String>,
    ) -> Result<(), TopologyError> {
        self.total += names.len();
        if self.total > MAX_COUNT {
            return Err(cx.err(
                at.span(),
                format!(
                    "the fleet would have {} nodes; nsfleet accepts at most {MAX_COUNT}",
                    self.total
                ),
            ));
        }
        let here = cx.place(at.span()).line;
        for n in names.iter() {
            if let Some(first) = self.seen.insert(n.clone(), here) {
                return Err(cx.err(
                    at.span(),
                    format!("name {n:?} is already used by the node or switch at line {first}"),
                ));
            }
        }
        self.list.push(NodeGroup {
            names,
            config: Arc::new(built.config),
        });
        self.templates.push(built.templates);
        self.loopbacks.push(built.loopback);
        for a in built.asked {
            if !(self.asked.iter()).any(|b| (&b.key, &b.value) == (&a.key, &a.value)) {
                self.asked.push(a);
            }
        }
        self.needs.extend(built.needs);
        for w in built.warnings {
            if !self.warnings.contains(&w) {
                self.warnings.push(w);
            }
        }
        Ok(())
    }
}

/// A switch's configuration; `querier`: see [`NodeConfig::querier`].
pub(crate) fn switch_config(querier: bool) -> config::Built {
    config::Built::of(NodeConfig {
        switch: true,
        querier,
        ..NodeConfig::default()
    })
}

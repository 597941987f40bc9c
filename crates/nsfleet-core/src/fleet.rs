//! A fleet: its hub namespace, workers, registry, node table and reaper, and the two
//! operations everything else is made of: create nodes, destroy nodes.
//!
//! Creation runs in phases ([`Phase`]) spread over the workers; any failure rolls back
//! every node the call created, through the reaper, and returns once the kernel has
//! reclaimed them. The fleet never decides policy (names, files, sockets): callers do.

mod reshape;
pub use reshape::ReshapeReport;

use super::node::{Node, NodeTable};
use super::reaper::{Reaper, Ticket};
use super::reclaim::ReclaimWatch;
use super::registry::{init_on, launch_on, Registered, Registry};
use super::subsystem::{enter_node, InitCtx, Phase, Subsystem};
use super::worker::{Worker, Workers};
use super::SubsysId;
use crate::holder::Holders;
use anyhow::{anyhow, bail, Context};
use arc_swap::ArcSwap;
use nsfleet_sys as sys;
use nsfleet_topology::{NodeSpec, Topology};

use nsfleet_locks::{order, Mutex};
use std::collections::HashMap;
use std::os::fd::OwnedFd;

use std::ops::ControlFlow;
use std::path::PathBuf;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct FleetOptions {
    /// Worker threads creating and configuring nodes in parallel.
    pub workers: usize,
    /// Most destroyed namespaces the kernel may still be reclaiming at any time.
    pub max_unreclaimed: usize,
    /// Where subsystems put per-node files (process logs).
    pub log_dir: PathBuf,
    /// Who holds the nodes' namespace descriptors.
    pub holding: Holding,
    /// The ids of the fleet's confined nodes: each node that runs software gets a user
    /// namespace of its own, mapping its root to the first of them; `None`: none is
    /// confined (`--privileged`).
    pub confine: Option<sys::userns::IdRange>,
}

/// Who holds the nodes' namespace descriptors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Holding {
    /// The fleet's own process: one descriptor per node.
    #[default]
    Own,
    /// Holder processes ([`crate::holder`]) of at most `per_holder` each (`None`: as many
    /// as a process may hold), for fleets beyond the process's own descriptor limit.
    Holders { per_holder: Option<usize> },
}

impl Default for FleetOptions {
    fn default() -> Self {
        FleetOptions {
            workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
            max_unreclaimed: 4096,
            log_dir: std::env::temp_dir(),
            holding: Holding::Own,
            confine: None,
        }
    }
}

/// Progress of a long operation: (phase, nodes done, nodes in the phase). Returning
/// `Break` cancels it: the nodes in flight finish, then everything is rolled back.
pub type Progress<'a> = &'a mut dyn FnMut(Phase, usize, usize) -> ControlFlow<()>;

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct CreateReport {
    pub nodes: usize,
    /// Wall time of each phase, in order.
    pub phases: Vec<(Phase, Duration)>,
    /// Drop of MemAvailable over the whole creation: the kernel's cost of these nodes.
    pub kernel_bytes: i64,
    /// Percentiles 0, 1, ... 100 of one node's Create phase on its worker (namespace and
    /// Create-phase subsystems), in microseconds.
    #[serde(default)]
    pub create_latency_us: Vec<f64>,
}

pub struct Fleet {
    log_dir: PathBuf,
    registry: Arc<Registry>,
    nodes: ArcSwap<NodeTable>,
    /// Serialises writers of `nodes` (publish, unpublish), each a read-copy-update of
    /// the whole table; readers never take it. Taken with nothing but `Registry::list`.
    table: Mutex<()>,
    reaper: Arc<Reaper>,
    workers: Workers,
    watch: Arc<ReclaimWatch>,
    /// Protects the fleet's own namespace: where reclamation is watched (later, its
    /// switches). `None` once the fleet is shut down. A leaf lock.
    hub: Mutex<Option<Arc<OwnedFd>>>,
    holders: Option<Arc<Holders>>,
    /// See [`FleetOptions::confine`].
    confine: Option<sys::userns::IdRange>,
}

impl Fleet {
    /// Starts an empty fleet: a hub namespace of its own, its workers, its reaper. The
    /// calling thread's namespace is the workers' home.
    pub fn new(opts: FleetOptions) -> anyhow::Result<Self> {
        let home = Arc::new(sys::current_netns().context("opening our own network namespace")?);
        crate::fault::point("creating the fleet's hub namespace")
            .context("creating the fleet's hub namespace")?;
        let hub = Arc::new(
            std::thread::spawn(|| sys::unshare_net().and_then(|_| sys::current_netns()))
                .join()
                .map_err(|_| anyhow!("hub thread panicked"))?
                .context("creating the fleet's hub namespace (are you root?)")?,
        );
        let watch =
            ReclaimWatch::start(&hub, &home).context("listening for namespace reclamation")?;
        let registry = Arc::new(Registry::default());
        let reaper = Arc::new(
            Reaper::start(registry.clone(), watch.clone(), opts.max_unreclaimed)
                .context("starting the reaper")?,
        );
        let holders = match opts.holding {
            Holding::Own => None,
            Holding::Holders { per_holder } => {
                Some(Arc::new(Holders::new(per_holder, home.clone())))
            }
        };
        let workers = Workers::start(opts.workers, home).context("starting workers")?;
        Ok(Fleet {
            log_dir: opts.log_dir,
            registry,
            nodes: ArcSwap::from_pointee(NodeTable::default()),
            table: Mutex::new(order::FLEET_TABLE, ()),
            reaper,
            workers,
            watch,
            hub: Mutex::new(order::FLEET_HUB, Some(hub)),
            holders,
            confine: opts.confine,
        })
    }

    /// The live nodes, without taking a lock.
    pub fn nodes(&self) -> Arc<NodeTable> {
        self.nodes.load_full()
    }

    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    pub fn subsystems(&self) -> Vec<&'static str> {
        self.registry.names()
    }

    /// Nodes destroyed (or on death row) that the kernel has not reclaimed yet.
    pub fn awaiting_reclaim(&self) -> usize {
        self.reaper.awaiting_reclaim()
    }

    pub fn register<S: Subsystem>(&self, s: S) -> anyhow::Result<SubsysId> {
        self.registry
            .register(Arc::new(s), &self.nodes, &self.workers, &self.log_dir)
    }

    pub fn unregister(&self, id: SubsysId) -> anyhow::Result<()> {
        self.registry.unregister(id, &self.nodes)
    }

    /// Creates every node of `topo`. On any failure every node this call created is
    /// destroyed and reclaimed before the error returns.
    pub fn create(&self, topo: &Topology, progress: Progress<'_>) -> anyhow::Result<CreateReport> {
        let existing = self.nodes();
        if let Some(n) = topo.nodes().find(|n| existing.get(&n.name).is_some()) {
            bail!("node {:?} already exists in this fleet", n.name);
        }
        let mem_before = mem_available();
        let mut created = Vec::new();
        let result = self.create_phases(topo, &mut created, progress);
        match result {
            Ok(mut report) => {
                report.kernel_bytes = mem_before - mem_available();
                Ok(report)
            }
            Err(e) => {
                // Some of these may not be published yet (a Create-phase failure): doom
                // exactly what this run made, published or not.
                self.destroy_these(created).wait_settled();
                Err(e.context("rolled back: every node this run created is gone"))
            }
        }
    }

    fn create_phases(
        &self,
        topo: &Topology,
        created: &mut Vec<Arc<Node>>,
        progress: Progress<'_>,
    ) -> anyhow::Result<CreateReport> {
        // Held shared for the whole run, as copy_net_ns holds pernet_ops_rwsem: the set of
        // subsystems cannot change under a creation, and creations do not exclude each other.
        let subs = self.registry.read();
        let mut report = CreateReport::default();
        for phase in Phase::ALL {
            let ops: Arc<Vec<Registered>> = Arc::new(
                subs.iter()
                    .filter(|r| r.ops.phase() == phase)
                    .cloned()
                    .collect(),
            );
            let started = Instant::now();
            if phase == Phase::Create {
                let items: Vec<(usize, NodeSpec)> = topo.nodes().enumerate().collect();
                report.create_latency_us = self.create_nodes(items, ops, created, progress)?;
                self.publish(created);
            } else if phase == Phase::Launch {
                self.launch_phase(&subs, created, progress)?;
            } else if !ops.is_empty() {
                self.init_phase(phase, ops, created, progress)?;
            }
            report.phases.push((phase, started.elapsed()));
        }
        report.nodes = created.len();
        Ok(report)
    }

    /// The Create phase; returns the percentiles of a node's creation time (microseconds).
    fn create_nodes(
        &self,
        items: Vec<(usize, NodeSpec)>,
        ops: Arc<Vec<Registered>>,
        created: &mut Vec<Arc<Node>>,
        progress: Progress<'_>,
    ) -> anyhow::Result<Vec<f64>> {
        // Tenants after the nodes whose namespaces they live in.
        let (tenants, own): (Vec<_>, Vec<_>) = items
            .into_iter()
            .partition(|(_, s)| s.config.netns_of.is_some());
        let mut placed = Vec::new();
        let mut result = Ok(());
        for round in [own, tenants] {
            if round.is_empty() || result.is_err() {
                continue;
            }
            let hosts = match self.hosts_of(&round, created, &placed) {
                Ok(hosts) => hosts,
                Err(e) => {
                    result = Err(e);
                    continue;
                }
            };
            let (reaper, log_dir) = (self.reaper.clone(), self.log_dir.clone());
            let (holders, ops, confine) = (self.holders.clone(), ops.clone(), self.confine);
            let create = move |w: &mut Worker, (i, spec): (usize, NodeSpec)| {
                reaper.admit();
                let t = Instant::now();
                let host = (spec.config.netns_of.as_ref()).and_then(|h| hosts.get(h).cloned());
                let how = NewNode {
                    host,
                    confine,
                    log_dir: &log_dir,
                    holders: holders.as_deref(),
                };
                let made = create_node(w, spec, how, &ops);
                let (node, r) = match made {
                    Ok(node) => (Some(node), Ok(())),
                    Err((node, e)) => (node, Err(e)),
                };
                let us = t.elapsed().as_secs_f64() * 1e6;
                (node.map(|n| (i, n, us)), r)
            };
            let (made, r) =
                self.run_phase(Phase::Create, round, create, OnError::Stop, &mut *progress);
            placed.extend(made);
            result = r;
        }
        // Workers finish out of order; the table keeps the file's order.
        placed.sort_unstable_by_key(|(i, _, _)| *i);
        let us: Vec<f64> = placed.iter().map(|(_, _, us)| *us).collect();
        created.extend(placed.into_iter().map(|(_, n, _)| n));
        result.map(|()| nsfleet_results::percentiles(&us))
    }

    /// The nodes that the tenants among `specs` live in, by name: made by this run
    /// (`created`, `placed`) or running.
    fn hosts_of(
        &self,
        specs: &[(usize, NodeSpec)],
        created: &[Arc<Node>],
        placed: &[(usize, Arc<Node>, f64)],
    ) -> anyhow::Result<HashMap<String, Arc<Node>>> {
        let table = self.nodes();
        let mut hosts = HashMap::new();
        // Each host looked for once: a fleet's tenants share one.
        let names: std::collections::HashSet<&String> = specs
            .iter()
            .filter_map(|(_, s)| s.config.netns_of.as_ref())
            .collect();
        for name in names {
            let made =
                (created.iter().chain(placed.iter().map(|(_, n, _)| n))).find(|n| n.name() == name);
            let host = made.or_else(|| table.get(name)).cloned();
            let host = host.ok_or_else(|| anyhow!("no node {name:?} to live in"))?;
            hosts.insert(name.clone(), host);
        }
        Ok(hosts)
    }

    /// Runs the `init` of every subsystem of `phase` on each node that one of them wants.
    fn init_phase(
        &self,
        phase: Phase,
        ops: Arc<Vec<Registered>>,
        nodes: &[Arc<Node>],
        progress: Progress<'_>,
    ) -> anyhow::Result<()> {
        let targets: Vec<Arc<Node>> = nodes
            .iter()
            .filter(|n| ops.iter().any(|r| r.ops.wants(n)))
            .cloned()
            .collect();
        let (log_dir, table) = (self.log_dir.clone(), self.nodes());
        let init = move |w: &mut Worker, node: Arc<Node>| {
            let r = ops.iter().filter(|r| r.ops.wants(&node)).try_for_each(|r| {
                node.put_state(r.id, init_on(&*r.ops, w, &node, &table, &log_dir)?);
                Ok(())
            });
            (None::<()>, r)
        };
        self.run_phase(phase, targets, init, OnError::Stop, progress)
            .1
    }

    /// The Launch phase: each subsystem's `launch` on each of `nodes` it holds state of,
    /// over the workers, which stay outside the nodes.
    fn launch_phase(
        &self,
        subs: &[Registered],
        nodes: &[Arc<Node>],
        progress: Progress<'_>,
    ) -> anyhow::Result<()> {
        let subs: Arc<Vec<Registered>> = Arc::new(subs.to_vec());
        let launch = move |_: &mut Worker, node: Arc<Node>| (None::<()>, launch_on(&subs, &node));
        (self.run_phase(
            Phase::Launch,
            nodes.to_vec(),
            launch,
            OnError::Stop,
            progress,
        ))
        .1
    }

    /// Runs `work` on every item over the workers, as one phase. After the first error
    /// (with [`OnError::Stop`]), or once `progress` says `Break`, items not yet started are
    /// skipped. Returns what the items made (a failed item may have made something too,
    /// which must be rolled back) and the first error.
    fn run_phase<I, T>(
        &self,
        phase: Phase,
        items: Vec<I>,
        work: impl Fn(&mut Worker, I) -> (Option<T>, anyhow::Result<()>) + Send + Sync + 'static,
        on_error: OnError,
        progress: Progress<'_>,
    ) -> (Vec<T>, anyhow::Result<()>)
    where
        I: Send + 'static,
        T: Send + 'static,
    {
        let total = items.len();
        let stop = Arc::new(AtomicBool::new(false));
        let skip = stop.clone();
        let work = Arc::new(move |w: &mut Worker, item: I| {
            if skip.load(Ordering::Relaxed) {
                return (None, Ok(()));
            }
            work(w, item)
        });
        let (mut made, mut first_err, mut done, mut failed) = (Vec::new(), None, 0, 0);
        self.workers.scatter(items, work, |(out, result)| {
            made.extend(out);
            done += 1;
            let cancelled = progress(phase, done, total).is_break();
            match result {
                Err(e) => {
                    failed += 1;
                    first_err.get_or_insert(e);
                }
                Ok(()) if cancelled => {
                    first_err.get_or_insert_with(|| anyhow!("cancelled"));
                }
                Ok(()) => {}
            }
            if first_err.is_some() && (on_error == OnError::Stop || cancelled) {
                stop.store(true, Ordering::Relaxed);
            }
        });
        if failed > 1 {
            first_err = first_err.map(|e| e.context(format!("{failed} nodes failed; the first")));
        }
        (made, first_err.map_or(Ok(()), Err))
    }

    /// Runs `f` (given the node's name) with a netlink socket inside each of `nodes`,
    /// spread over the workers, and hands back each node's name with what `f` returned,
    /// as they finish: for reading many nodes at once (`nsfleet stats`). A node being torn
    /// down meanwhile is an error of its own.
    pub fn in_each<R>(
        &self,
        nodes: Vec<Arc<Node>>,
        f: impl Fn(&str, &mut nsfleet_netlink::NlSocket) -> anyhow::Result<R> + Send + Sync + 'static,
    ) -> Vec<(String, anyhow::Result<R>)>
    where
        R: Send + 'static,
    {
        let work = Arc::new(move |w: &mut Worker, node: Arc<Node>| {
            let r = (enter_node(w, &node))
                .and_then(|()| Ok(w.rtnl()?))
                .and_then(|sock| f(node.name(), sock));
            (node.name().to_string(), r)
        });
        let mut out = Vec::with_capacity(nodes.len());
        self.workers.scatter(nodes, work, |r| out.push(r));
        out
    }

    /// Runs `f` inside a live node, on a worker, as a subsystem's `init` runs: for changes
    /// to a running fleet (impairments).
    pub fn on_node<R, F>(&self, name: &str, f: F) -> anyhow::Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut InitCtx<'_>) -> anyhow::Result<R> + Send + 'static,
    {
        let table = self.nodes();
        let node = (table.get(name).cloned()).ok_or_else(|| anyhow!("no node named {name:?}"))?;
        let (log_dir, f) = (self.log_dir.clone(), parking_lot::Mutex::new(Some(f)));
        let work = Arc::new(move |w: &mut Worker, node: Arc<Node>| {
            let f = f.lock().take().expect("a single item");
            enter_node(w, &node)?;
            let mut cx = InitCtx {
                node: &node,
                log_dir: &log_dir,
                worker: w,
                nodes: &table,
                tolerate: &[],
            };
            f(&mut cx)
        });
        let mut out = None;
        self.workers.scatter(vec![node], work, |r| out = Some(r));
        out.expect("scatter hands back every item's result")
    }

    /// Ends subsystem `id`'s part of node `name` (its `exit` and `exit_batch`; the node and
    /// its other subsystems stay): `nsfleet node stop`. Returns whether it had anything
    /// running.
    pub fn stop_on(&self, id: SubsysId, name: &str) -> anyhow::Result<bool> {
        let table = self.nodes();
        let node = table
            .get(name)
            .ok_or_else(|| anyhow!("no node named {name:?}"))?;
        self.registry.stop_on(id, node)
    }

    /// Starts subsystem `id`'s part of node `name` again (its `init`, in the node).
    pub fn start_on(&self, id: SubsysId, name: &str) -> anyhow::Result<()> {
        let table = self.nodes();
        let node = table
            .get(name)
            .ok_or_else(|| anyhow!("no node named {name:?}"))?;
        (self.registry).start_on(id, node, &table, &self.workers, &self.log_dir)
    }

    /// Returns once the kernel has reclaimed every network namespace whose last reference
    /// was dropped before the call, the fleet's or not (`ReclaimWatch::barrier`). For
    /// benchmarks.
    pub fn reclaim_barrier(&self) -> anyhow::Result<()> {
        Ok(self.watch.barrier(Duration::from_secs(600))?)
    }

    /// Ends the fleet: every node down and reclaimed, then the hub namespace let go, and
    /// waits until nothing holds the hub any more (its sockets let go of it an RCU grace
    /// period after they close). Idempotent; `Drop` does it too.
    pub fn shutdown(&self) {
        self.destroy_all().wait_settled();
        // Earlier batches nobody waited for may still be in the reaper, whose barrier needs
        // the watch: only once it is idle can the watch go.
        self.reaper.wait_idle();
        self.watch.shutdown();
        let Some(hub) = self.hub.lock().take() else {
            return;
        };
        // Not by its handle, which some kernels do not open from the supervisor's PID
        // namespace (see `sys::reopen_ns`): a witness tells. The calling thread's
        // namespace is home, where it returns.
        if let Ok(home) = sys::current_netns() {
            let _ = crate::reclaim::drop_and_await(hub, &home, Duration::from_secs(5));
        }
    }

    /// Takes every node down; the ticket says when the kernel has reclaimed them.
    pub fn destroy_all(&self) -> Arc<Ticket> {
        self.reaper.doom(self.unpublish(|_| true))
    }

    /// Takes the named nodes down (unknown names are ignored).
    pub fn destroy(&self, names: &[&str]) -> Arc<Ticket> {
        let names: std::collections::HashSet<&str> = names.iter().copied().collect();
        self.reaper
            .doom(self.unpublish(|n| names.contains(n.name())))
    }

    /// Takes these nodes down, published or not (the nodes of a run rolled back).
    fn destroy_these(&self, nodes: Vec<Arc<Node>>) -> Arc<Ticket> {
        let these: std::collections::HashSet<*const Node> = nodes.iter().map(Arc::as_ptr).collect();
        self.unpublish(|n| these.contains(&Arc::as_ptr(n)));
        self.reaper.doom(nodes)
    }

    fn publish(&self, added: &[Arc<Node>]) {
        let _w = self.table.lock();
        let mut list: Vec<Arc<Node>> = self.nodes.load().iter().cloned().collect();
        list.extend(added.iter().cloned());
        self.nodes.store(Arc::new(NodeTable::new(list)));
    }

    fn unpublish(&self, doomed: impl Fn(&Arc<Node>) -> bool) -> Vec<Arc<Node>> {
        let _w = self.table.lock();
        let (gone, kept): (Vec<Arc<Node>>, Vec<Arc<Node>>) =
            self.nodes.load().iter().cloned().partition(|n| doomed(n));
        self.nodes.store(Arc::new(NodeTable::new(kept)));
        gone
    }
}

/// What a phase does once an item has failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OnError {
    /// Skips the items not started yet: everything will be rolled back anyway.
    Stop,
    /// Runs every item: each is a node to put back, whatever another one did.
    Continue,
}

type NodeResult = Result<Arc<Node>, (Option<Arc<Node>>, anyhow::Error)>;

/// Where and how one node of the Create phase is made.
struct NewNode<'a> {
    /// The node whose namespace a tenant lives in.
    host: Option<Arc<Node>>,
    /// The fleet's ids, if its nodes that run software are confined.
    confine: Option<sys::userns::IdRange>,
    log_dir: &'a std::path::Path,
    holders: Option<&'a Holders>,
}

/// One node of the Create phase, on a worker: a new namespace (owned by a user namespace
/// of its own if it is confined), its id in the hub, then the Create-phase subsystems
/// while the worker is still inside it.
fn create_node(w: &mut Worker, spec: NodeSpec, how: NewNode<'_>, ops: &[Registered]) -> NodeResult {
    let fail = |e: anyhow::Error| (None, e);
    let (log_dir, holders) = (how.log_dir, how.holders);
    let node = match how.host {
        Some(host) => {
            enter_node(w, &host).map_err(fail)?;
            Node::tenant(spec, host)
        }
        None => {
            let confine = how.confine.filter(|_| spec.config.confined());
            let made = match confine {
                Some(ids) => w.enter_new_confined(ids),
                None => w.enter_new(),
            };
            let fd = made
                .map_err(sys::explain_new_namespace)
                .with_context(|| format!("node {}: creating its network namespace", spec.name))
                .map_err(fail)?;
            Node::new(spec, fd, holders)
                .context("handing the namespace to a holder process")
                .map_err(fail)?
        }
    };
    let node = Arc::new(node);
    // Nothing else of the run exists yet: Create-phase subsystems see no other node.
    let nobody = NodeTable::default();
    for r in ops.iter().filter(|r| r.ops.wants(&node)) {
        let mut cx = InitCtx {
            node: &node,
            log_dir,
            worker: w,
            nodes: &nobody,
            tolerate: &[],
        };
        match r.ops.init(&mut cx) {
            Ok(state) => node.put_state(r.id, state),
            Err(e) => {
                let e = e.context(format!("node {}: {}", node.name(), r.ops.name()));
                return Err((Some(node), e));
            }
        }
    }
    Ok(node)
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// MemAvailable in bytes (0 if unreadable).
pub fn mem_available() -> i64 {
    sys::meminfo("MemAvailable:")
}

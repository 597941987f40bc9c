//! The registry of subsystems behind a reader/writer lock (seed 000, net_sem).
//!
//! Creating nodes only *reads* the list, so creations hold it shared and run in parallel.
//! Changing the list on a live fleet holds it exclusively: registering runs the new
//! subsystem's `init` on every live node (undoing the nodes already done if one fails),
//! unregistering runs its `exit` and `exit_batch` on every live node.

use super::node::{AnyState, Node, NodeTable};
use super::subsystem::{enter_node, InitCtx, Ops};
use super::worker::{Worker, Workers};
use super::SubsysId;
use anyhow::{anyhow, Context};
use arc_swap::ArcSwap;
use nsfleet_locks::{order, RwLock, RwLockReadGuard};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

#[derive(Clone)]
pub(crate) struct Registered {
    pub id: SubsysId,
    pub ops: Arc<dyn Ops>,
}

pub struct Registry {
    /// Protects the set of subsystems and their order (pernet_ops_rwsem). Shared for a
    /// whole creation run and a whole reaper batch, so that the subsystems that ran `init`
    /// on a node are the ones that run `exit` on it; exclusive for (un)registration, which
    /// runs `init`/`exit` on every live node under it. Its rank: `order::REGISTRY`.
    list: RwLock<Vec<Registered>>,
    next: AtomicU32,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            list: RwLock::new(order::REGISTRY, Vec::new()),
            next: AtomicU32::default(),
        }
    }
}

impl Registry {
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Vec<Registered>> {
        self.list.read()
    }

    /// Shared, even while a writer waits: for the reaper, which creation may be waiting on.
    pub(crate) fn read_recursive(&self) -> RwLockReadGuard<'_, Vec<Registered>> {
        self.list.read_recursive()
    }

    /// Names of the registered subsystems, in registration order.
    pub fn names(&self) -> Vec<&'static str> {
        self.list.read().iter().map(|r| r.ops.name()).collect()
    }

    /// Adds a subsystem, running its `init` on every node of `live` (each inside its own
    /// namespace, on the workers). All or nothing: if `init` fails on any node, the nodes
    /// it succeeded on get `exit` and `exit_batch`, and the subsystem is not registered.
    pub(crate) fn register(
        &self,
        ops: Arc<dyn Ops>,
        live: &ArcSwap<NodeTable>,
        workers: &Workers,
        log_dir: &Path,
    ) -> anyhow::Result<SubsysId> {
        let mut list = self.list.write();
        // Read only now: a creation that held the lock before us has published its nodes.
        let live = live.load_full();
        let id = SubsysId(self.next.fetch_add(1, Ordering::Relaxed));
        let targets: Vec<Arc<Node>> = live.iter().filter(|n| ops.wants(n)).cloned().collect();
        let mut first_err = None;
        let run = {
            let r = Registered {
                id,
                ops: ops.clone(),
            };
            let (log_dir, table) = (log_dir.to_path_buf(), live.clone());
            Arc::new(move |w: &mut Worker, node: Arc<Node>| {
                start_live(&r, w, &node, &table, &log_dir)
            })
        };
        workers.scatter(targets.clone(), run, |r| {
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        });
        if let Some(e) = first_err {
            // Every node it holds state of, the failed ones' included.
            exit_all(&*ops, id, &targets);
            return Err(e.context(format!(
                "registering subsystem {:?}: undone on every node",
                ops.name()
            )));
        }
        list.push(Registered { id, ops });
        Ok(id)
    }

    /// Removes a subsystem, running its `exit`/`exit_batch` on every live node.
    pub(crate) fn unregister(&self, id: SubsysId, live: &ArcSwap<NodeTable>) -> anyhow::Result<()> {
        let mut list = self.list.write();
        let live = live.load();
        let pos = list
            .iter()
            .position(|r| r.id == id)
            .ok_or_else(|| anyhow!("no subsystem with id {} is registered", id.0))?;
        let gone = list.remove(pos);
        let nodes: Vec<Arc<Node>> = live.iter().cloned().collect();
        exit_all(&*gone.ops, id, &nodes);
        Ok(())
    }
}

impl Registry {
    /// Ends subsystem `id`'s part of one live node: its `exit` and `exit_batch`, and its
    /// state goes (a node's processes stopped while its namespace and links stay).
    /// Returns whether there was anything to end. Holds the list shared, as a creation
    /// does, so that the subsystem cannot be unregistered meanwhile.
    pub(crate) fn stop_on(&self, id: SubsysId, node: &Arc<Node>) -> anyhow::Result<bool> {
        let list = self.list.read();
        let r = (list.iter().find(|r| r.id == id))
            .ok_or_else(|| anyhow!("no subsystem with id {} is registered", id.0))?;
        let had = node.has_state(id);
        exit_all(&*r.ops, id, std::slice::from_ref(node));
        Ok(had)
    }

    /// Runs subsystem `id`'s `init` on one live node that has none of its state (started
    /// again after [`stop_on`](Self::stop_on)), on a worker inside the node.
    pub(crate) fn start_on(
        &self,
        id: SubsysId,
        node: &Arc<Node>,
        table: &Arc<NodeTable>,
        workers: &Workers,
        log_dir: &Path,
    ) -> anyhow::Result<()> {
        let list = self.list.read();
        let r = (list.iter().find(|r| r.id == id))
            .ok_or_else(|| anyhow!("no subsystem with id {} is registered", id.0))?;
        if node.has_state(id) {
            anyhow::bail!("node {}: {} is running already", node.name(), r.ops.name());
        }
        let (r, log_dir, table) = (r.clone(), log_dir.to_path_buf(), table.clone());
        let ops = r.ops.clone();
        let run = Arc::new(move |w: &mut Worker, node: Arc<Node>| {
            start_live(&r, w, &node, &table, &log_dir)
        });
        let mut out = None;
        workers.scatter(vec![node.clone()], run, |r| out = Some(r));
        let out = out.expect("scatter hands back every item's result");
        if out.is_err() {
            exit_all(&*ops, id, std::slice::from_ref(node));
        }
        out
    }
}

/// One subsystem's `init` then `launch` on one live node, as a creation's phases would
/// run them: its state is the node's from `init` on, for `exit` to find if `launch` fails.
fn start_live(
    r: &Registered,
    w: &mut Worker,
    node: &Arc<Node>,
    table: &NodeTable,
    log_dir: &Path,
) -> anyhow::Result<()> {
    node.put_state(r.id, init_on(&*r.ops, w, node, table, log_dir)?);
    launch_on(std::slice::from_ref(r), node)
}

/// Runs one subsystem's `init` on a node from a worker, which enters the node first.
pub(crate) fn init_on(
    ops: &dyn Ops,
    w: &mut Worker,
    node: &Node,
    nodes: &NodeTable,
    log_dir: &std::path::Path,
) -> anyhow::Result<AnyState> {
    enter_node(w, node)?;
    let mut cx = InitCtx {
        node,
        log_dir,
        worker: w,
        nodes,
        tolerate: &[],
    };
    ops.init(&mut cx)
        .with_context(|| format!("node {}: {}", node.name(), ops.name()))
}

/// Each of `subs`' `launch` on `node`, for those that hold state of it; the state is
/// put back whatever `launch` did, for `exit` to find.
pub(crate) fn launch_on(subs: &[Registered], node: &Node) -> anyhow::Result<()> {
    subs.iter().try_for_each(|r| {
        let Some(mut state) = node.take_state(r.id) else {
            return Ok(());
        };
        let result = r.ops.launch(node, &mut state);
        node.put_state(r.id, state);
        result.with_context(|| format!("node {}: {}", node.name(), r.ops.name()))
    })
}

/// `exit` on each node holding state of `id`, then `exit_batch` once, then free.
pub(crate) fn exit_all(ops: &dyn Ops, id: SubsysId, nodes: &[Arc<Node>]) {
    let mut exiting: Vec<(&Node, AnyState)> = Vec::new();
    for n in nodes {
        if let Some(mut s) = n.take_state(id) {
            ops.exit(n, &mut s);
            exiting.push((n, s));
        }
    }
    if !exiting.is_empty() {
        ops.exit_batch(&mut exiting);
    }
}

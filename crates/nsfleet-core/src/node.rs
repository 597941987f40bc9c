//! A node (one network namespace of the fleet) and the table of live nodes.
//!
//! A node's namespace is held by exactly one descriptor, the node's own; the core closes it
//! at teardown and the kernel's reference count does the rest. A *tenant* (an Open vSwitch
//! switch) lives in another node's namespace, its host's, and holds none: it keeps its
//! host's `Node`, whose descriptor it uses while the host lives. The table is published as
//! an immutable snapshot: readers (status, exec, later the traffic engine) never lock.

use super::SubsysId;
use crate::holder::{HeldNs, Holders};
use nsfleet_sys as sys;
use nsfleet_topology::{NodeConfig, NodeSpec, NodeWiring};

use arc_swap::ArcSwap;
use nsfleet_locks::{order, Mutex};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

/// One subsystem's state of one node, typed by the subsystem (see `subsystem::Ops`).
pub(crate) type AnyState = Box<dyn std::any::Any + Send>;

/// How the fleet holds a node's namespace: by a descriptor of its own, or in a holder
/// process when it may not hold that many descriptors itself.
pub(crate) enum Netns {
    Own(OwnedFd),
    Held(HeldNs),
    /// Its host's (see the file's comment).
    Tenant(Arc<Node>),
}

/// A node's configuration and wiring, as one value.
#[derive(Clone, Debug, Default)]
pub struct Shape {
    pub config: Arc<NodeConfig>,
    pub wiring: Arc<NodeWiring>,
}

pub struct Node {
    name: Box<str>,
    /// The number its name template gave it (`{i}`); 1 for a written node.
    number: u64,
    /// What the node is: replaced whole by `apply` (under the fleet's change lock), read
    /// without a lock. Config and wiring are swapped together so that a reader never sees
    /// one without the other.
    shape: ArcSwap<Shape>,
    inode: u64,
    /// A weak reference that outlives the descriptor: tells whether anyone else still
    /// holds the namespace after teardown (`None` on kernels without nsfs handles).
    handle: Option<sys::NsHandle>,
    /// Lives in another node's namespace (see the file's comment).
    tenant: bool,
    /// Protects the node's one hold on its namespace: `Some` while the node is live,
    /// taken (and the namespace let go) once at teardown. Held only to read or take it;
    /// may be held while `Holder::conn` is taken.
    netns: Mutex<Option<Netns>>,
    /// Protects the per-subsystem states (net_generic's array): put by `init`, taken by
    /// the reaper, changed by `modify` on a live fleet. Never held while another node's is.
    states: Mutex<Vec<(SubsysId, AnyState)>>,
}

impl Node {
    /// A node whose namespace is `netns`; with `holders`, one of them keeps it.
    pub(crate) fn new(
        spec: NodeSpec,
        netns: OwnedFd,
        holders: Option<&Holders>,
    ) -> std::io::Result<Self> {
        let handle = sys::ns_handle(netns.as_fd()).ok();
        let inode = match handle.as_ref().and_then(|h| h.inode()) {
            Some(i) => i,
            None => sys::inode_of(netns.as_fd())?,
        };
        let netns = match holders {
            Some(h) => Netns::Held(h.hold(netns)?),
            None => Netns::Own(netns),
        };
        Ok(Node {
            name: spec.name.into_boxed_str(),
            number: spec.number,
            shape: ArcSwap::from_pointee(Shape {
                config: spec.config,
                wiring: spec.wiring,
            }),
            inode,
            handle,
            tenant: false,
            netns: Mutex::new(order::NODE_NETNS, Some(netns)),
            states: Mutex::new(order::NODE_STATES, Vec::new()),
        })
    }

    /// A node living in `host`'s namespace (see the file's comment).
    pub(crate) fn tenant(spec: NodeSpec, host: Arc<Node>) -> Self {
        Node {
            name: spec.name.into_boxed_str(),
            number: spec.number,
            shape: ArcSwap::from_pointee(Shape {
                config: spec.config,
                wiring: spec.wiring,
            }),
            inode: host.inode,
            handle: None,
            tenant: true,
            netns: Mutex::new(order::NODE_NETNS, Some(Netns::Tenant(host))),
            states: Mutex::new(order::NODE_STATES, Vec::new()),
        }
    }

    /// The node whose namespace a tenant lives in; `None` for a node with its own, and
    /// once the tenant is torn down.
    pub fn host(&self) -> Option<Arc<Node>> {
        match self.netns.lock().as_ref()? {
            Netns::Tenant(host) => Some(host.clone()),
            Netns::Own(_) | Netns::Held(_) => None,
        }
    }

    /// Whether the node lives in another's namespace: nothing of the kernel's is
    /// reclaimed when it goes.
    pub fn is_tenant(&self) -> bool {
        self.tenant
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The number its name template gave it (`{i}`), 1 for a written node.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// What the node runs and how it is set up, as of now.
    pub fn config(&self) -> Arc<NodeConfig> {
        self.shape.load().config.clone()
    }

    /// The node's interfaces, addresses and routes, as of now.
    pub fn wiring(&self) -> Arc<NodeWiring> {
        self.shape.load().wiring.clone()
    }

    /// Both at once, from one snapshot.
    pub fn shape(&self) -> Arc<Shape> {
        self.shape.load_full()
    }

    /// Replaces what the node is (`apply`, `impair`); returns what it was. The caller
    /// makes the kernel agree, and serialises changes to the fleet.
    pub fn reshape(&self, new: Arc<Shape>) -> Arc<Shape> {
        self.shape.swap(new)
    }

    /// The namespace's inode number, as in `/proc/PID/ns/net` (`net:[INODE]`).
    pub fn inode(&self) -> u64 {
        self.inode
    }

    /// Runs `f` with the node's namespace descriptor, or returns `None` once the node is
    /// being torn down.
    pub fn with_netns<R>(&self, f: impl FnOnce(BorrowedFd<'_>) -> R) -> Option<R> {
        // A tenant's lock is let go before its host's is taken: never two at once.
        let host = match self.netns.lock().as_ref()? {
            Netns::Own(fd) => return Some(f(fd.as_fd())),
            Netns::Held(h) => return h.get().ok().map(|fd| f(fd.as_fd())),
            Netns::Tenant(host) => host.clone(),
        };
        host.with_netns(f)
    }

    /// A second descriptor for the namespace (for `exec`): it keeps the namespace alive
    /// for as long as whoever holds it.
    pub fn dup_netns(&self) -> Option<OwnedFd> {
        let host = match self.netns.lock().as_ref()? {
            Netns::Own(fd) => return fd.try_clone().ok(),
            Netns::Held(h) => return h.get().ok(),
            Netns::Tenant(host) => host.clone(),
        };
        host.dup_netns()
    }

    pub(crate) fn handle(&self) -> Option<&sys::NsHandle> {
        self.handle.as_ref()
    }

    /// Lets go of the namespace; returns once nothing of the fleet holds it.
    pub(crate) fn close_netns(&self) {
        if let Some(Netns::Held(h)) = self.netns.lock().take() {
            // A holder that cannot answer is gone, and its descriptors with it.
            let _ = h.release();
        }
    }

    pub(crate) fn put_state(&self, id: SubsysId, state: AnyState) {
        self.states.lock().push((id, state));
    }

    pub(crate) fn take_state(&self, id: SubsysId) -> Option<AnyState> {
        let mut states = self.states.lock();
        let i = states.iter().position(|(s, _)| *s == id)?;
        Some(states.swap_remove(i).1)
    }

    /// The subsystems that hold state of this node.
    pub(crate) fn state_ids(&self) -> Vec<SubsysId> {
        self.states.lock().iter().map(|(id, _)| *id).collect()
    }

    pub(crate) fn has_state(&self, id: SubsysId) -> bool {
        self.states.lock().iter().any(|(s, _)| *s == id)
    }

    /// Changes a subsystem's state of this node (a change to a live fleet).
    pub fn modify<T: 'static, R>(&self, id: SubsysId, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        let mut states = self.states.lock();
        let (_, s) = states.iter_mut().find(|(s, _)| *s == id)?;
        s.downcast_mut::<T>().map(f)
    }

    /// Reads a subsystem's state of this node, for reports.
    pub fn inspect<T: 'static, R>(&self, id: SubsysId, f: impl FnOnce(&T) -> R) -> Option<R> {
        let states = self.states.lock();
        let (_, s) = states.iter().find(|(s, _)| *s == id)?;
        s.downcast_ref::<T>().map(f)
    }
}

/// An immutable snapshot of the live nodes, in creation order, with a name index.
#[derive(Default)]
pub struct NodeTable {
    list: Vec<Arc<Node>>,
    /// Positions in `list`, sorted by node name.
    by_name: Vec<u32>,
}

impl NodeTable {
    pub(crate) fn new(list: Vec<Arc<Node>>) -> Self {
        let mut by_name: Vec<u32> = (0..list.len() as u32).collect();
        by_name.sort_unstable_by(|a, b| list[*a as usize].name.cmp(&list[*b as usize].name));
        NodeTable { list, by_name }
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Node>> {
        self.by_name
            .binary_search_by(|i| (*self.list[*i as usize].name).cmp(name))
            .ok()
            .map(|i| &self.list[self.by_name[i] as usize])
    }

    /// A node by its name or one of its other names (containerlab's container name).
    /// Another name is searched for (a node's aliases are few, and exec is rare).
    pub fn find(&self, name: &str) -> Option<&Arc<Node>> {
        self.get(name).or_else(|| {
            self.list
                .iter()
                .find(|n| n.config().aliases.iter().any(|a| a == name))
        })
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Node>> {
        self.list.iter()
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

//! The contract between the core and a subsystem: the kernel's `pernet_operations`.
//!
//! A subsystem brings one aspect of a node up in `init` and takes it down in `exit` (per
//! node) and `exit_batch` (once per reaper batch, where the expensive work belongs). Its
//! per-node state is allocated by the core before `init` and freed by the core after
//! `exit_batch`, like `.id`/`.size` in the kernel. A subsystem knows nothing of the others.

use super::node::Node;
use super::worker::Worker;
use crate::topology::NodeConfig;
use nsfleet_netlink::NlSocket;
use std::any::Any;
use std::io;
use std::path::Path;

/// When a subsystem's `init` runs during `up`. Every node goes through the phases in this
/// order, and a phase starts only once the previous one is done on every node: a link
/// needs both its ends, a daemon needs its links.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Right after the namespace is created, on the thread that created it.
    Create,
    /// Once every node of the run exists.
    Configure,
    /// Once every node is configured: processes.
    Start,
}

impl Phase {
    pub const ALL: [Phase; 3] = [Phase::Create, Phase::Configure, Phase::Start];

    pub fn name(self) -> &'static str {
        match self {
            Phase::Create => "create",
            Phase::Configure => "configure",
            Phase::Start => "start",
        }
    }
}

/// What `init` may use: the node, the fleet's files, and a netlink socket inside the node.
/// `init` always runs on a worker thread that is inside the node's network namespace, so
/// `/proc/sys/net` and any socket it opens are the node's.
pub struct InitCtx<'a> {
    pub node: &'a Node,
    pub log_dir: &'a Path,
    pub(crate) worker: &'a mut Worker,
}

impl InitCtx<'_> {
    pub fn config(&self) -> &NodeConfig {
        self.node.config()
    }

    /// A route netlink socket in the node's namespace, opened on first use and closed when
    /// the worker leaves the node (an open socket would keep the namespace alive).
    pub fn rtnl(&mut self) -> io::Result<&mut NlSocket> {
        self.worker.rtnl()
    }

    /// Writes one of the node's sysctls; `key` as in the topology (`net.ipv4.ip_forward`).
    /// Costly the first time in a node (see `Worker::write_sysctl`): a subsystem touches
    /// sysctls only for nodes that need them.
    pub fn write_sysctl(&mut self, key: &str, value: &str) -> io::Result<()> {
        let path = crate::topology::sysctl_path(key);
        let below_net = path
            .strip_prefix("net/")
            .ok_or(io::ErrorKind::InvalidInput)?;
        self.worker.write_sysctl(below_net, value)
    }
}

pub trait Subsystem: Send + Sync + 'static {
    /// Per-node state; the core creates it with `Default` before `init`.
    type State: Default + Send + 'static;

    fn name(&self) -> &'static str;

    fn phase(&self) -> Phase;

    /// Whether `init` has work for a node with this configuration. The core does not
    /// enter a node for a phase in which no subsystem wants it, and a subsystem that does
    /// not want a node gets no state, no `exit` and no `exit_batch` for it.
    fn wants(&self, _config: &NodeConfig) -> bool {
        true
    }

    /// Brings this subsystem up on one node. On error, `init` must leave nothing behind of
    /// its own; the core undoes the subsystems that ran before it.
    fn init(&self, cx: &mut InitCtx<'_>, state: &mut Self::State) -> anyhow::Result<()>;

    /// Per node, on the reaper thread (outside the node's namespace): start taking down.
    fn exit(&self, _node: &Node, _state: &mut Self::State) {}

    /// Once per batch of dying nodes, after every `exit`: the place for work that is
    /// expensive per call and cheap per node (waiting for processes, one netlink burst).
    fn exit_batch(&self, _batch: &mut [(&Node, &mut Self::State)]) {}
}

pub(crate) type AnyState = Box<dyn Any + Send>;

/// The object-safe face of [`Subsystem`] the registry stores; it owns the downcasts so
/// that subsystems see their own state type.
pub(crate) trait Ops: Send + Sync {
    fn name(&self) -> &'static str;
    fn phase(&self) -> Phase;
    fn wants(&self, config: &NodeConfig) -> bool;
    fn init(&self, cx: &mut InitCtx<'_>) -> anyhow::Result<AnyState>;
    fn exit(&self, node: &Node, state: &mut AnyState);
    fn exit_batch(&self, batch: &mut [(&Node, AnyState)]);
}

impl<S: Subsystem> Ops for S {
    fn name(&self) -> &'static str {
        Subsystem::name(self)
    }
    fn phase(&self) -> Phase {
        Subsystem::phase(self)
    }
    fn wants(&self, config: &NodeConfig) -> bool {
        Subsystem::wants(self, config)
    }
    fn init(&self, cx: &mut InitCtx<'_>) -> anyhow::Result<AnyState> {
        let mut state = Box::<S::State>::default();
        Subsystem::init(self, cx, &mut state)?;
        Ok(state)
    }
    fn exit(&self, node: &Node, state: &mut AnyState) {
        Subsystem::exit(self, node, downcast::<S>(state))
    }
    fn exit_batch(&self, batch: &mut [(&Node, AnyState)]) {
        let mut typed: Vec<(&Node, &mut S::State)> = batch
            .iter_mut()
            .map(|(n, s)| (*n, downcast::<S>(s)))
            .collect();
        Subsystem::exit_batch(self, &mut typed)
    }
}

fn downcast<S: Subsystem>(state: &mut AnyState) -> &mut S::State {
    state
        .downcast_mut::<S::State>()
        .expect("the core hands each subsystem the state it allocated for it")
}

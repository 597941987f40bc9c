//! The contract between the core and a subsystem: the kernel's `pernet_operations`.
//!
//! A subsystem brings one aspect of a node up in `init` and takes it down in `exit` (per
//! node) and `exit_batch` (once per reaper batch, where the expensive work belongs). Its
//! per-node state is allocated by the core before `init` and freed by the core after
//! `exit_batch`, like `.id`/`.size` in the kernel. A subsystem knows nothing of the others.

use super::node::{AnyState, Node, NodeTable, Shape};
use super::worker::Worker;
use anyhow::Context;
use nsfleet_netlink::socket::MAX_BATCH;
use nsfleet_netlink::{Batch, NlSocket};
use nsfleet_topology::{NodeConfig, Subject};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
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
    /// Once every node of the run exists: links between nodes.
    Wire,
    /// Once every link exists: addresses, routes, settings of links.
    Configure,
    /// Once every node is configured: what processes will run in (each node's world: its
    /// init, user namespace, mounts and cgroup), and links that carry frames before any
    /// process sends one.
    Start,
    /// Once every node of the run has been through Start: the software itself, each
    /// subsystem's [`Subsystem::launch`] on each node it holds state of. A phase of its
    /// own so that no node's software takes the CPUs while another node's world is
    /// still being made: 100 FRR routers' daemons, started node by node, slowed the
    /// making of the last worlds until `up` took 1.2-1.4x as long confined.
    Launch,
    /// Once every node's processes are started: waits until what they started is ready
    /// (an Open vSwitch switch's ports taken). Waiting in a phase of its own rather than
    /// in Start lets every node's daemons start at once and their waits overlap: a wait
    /// holds a worker, and the workers are as many as the cores.
    Ready,
}

impl Phase {
    pub const ALL: [Phase; 6] = [
        Phase::Create,
        Phase::Wire,
        Phase::Configure,
        Phase::Start,
        Phase::Launch,
        Phase::Ready,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Phase::Create => "create",
            Phase::Wire => "wire",
            Phase::Configure => "configure",
            Phase::Start => "start",
            Phase::Launch => "launch",
            Phase::Ready => "ready",
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
    /// The fleet's nodes as of the start of the phase.
    pub(crate) nodes: &'a NodeTable,
    /// Kernel errors that mean "already done" here, and so are not errors: what a
    /// deletion finds already gone while a shape is retired, what an addition finds
    /// already there while a failed change is undone. Empty for `init`.
    pub(crate) tolerate: &'static [i32],
}

impl<'a> InitCtx<'a> {
    pub fn config(&self) -> std::sync::Arc<NodeConfig> {
        self.node.config()
    }

    /// The fleet's nodes as of the start of the phase (from the Wire phase on, every node
    /// of the run); a reference that outlives `self`'s borrow, for use inside
    /// [`send_each`](Self::send_each).
    pub fn peers(&self) -> &'a NodeTable {
        self.nodes
    }

    /// The namespace the fleet's owner runs in: the host's.
    pub fn home(&self) -> BorrowedFd<'_> {
        self.worker.home()
    }

    /// A route netlink socket in the node's namespace, opened on first use and closed when
    /// the worker leaves the node (an open socket would keep the namespace alive).
    pub fn rtnl(&mut self) -> io::Result<&mut NlSocket> {
        self.worker.rtnl()
    }

    /// Sends the requests `build` makes for each item (up to [`Requests::MOST`] per item)
    /// from the node, up to a full batch per `sendmsg`, and reads the ACKs by sequence
    /// number. The first error, of `build` or of the kernel (but for what a change of
    /// shape tolerates, see [`Subsystem::retire`]), is returned in the context of
    /// `describe(item)` (`describe(item): error (extended ACK)`), a [`Subject`] that names
    /// the topology element at fault and, as data, where the file wrote it.
    /// Requests after a failed one in the same batch still run; the caller's rollback (the
    /// node's teardown) removes them.
    pub fn send_each<T, D: Into<Subject>>(
        &mut self,
        items: impl IntoIterator<Item = T>,
        mut build: impl FnMut(&mut Requests<'_>, &T) -> anyhow::Result<()>,
        describe: impl Fn(&T) -> D,
    ) -> anyhow::Result<()> {
        let mut items = items.into_iter().peekable();
        let mut batch = Batch::new();
        // For each message of the batch, the item of `chunk` that made it.
        let mut owner: Vec<usize> = Vec::new();
        while items.peek().is_some() {
            let sock = self.rtnl().context("opening a netlink socket")?;
            let (mut chunk, mut held) = (Vec::new(), Vec::new());
            batch.clear();
            owner.clear();
            while batch.seqs().len() + Requests::MOST <= MAX_BATCH {
                let Some(item) = items.next() else { break };
                let mut out = Requests {
                    batch: &mut batch,
                    sock: &mut *sock,
                    held: &mut held,
                };
                if let Err(e) = build(&mut out, &item) {
                    return Err(about(e, describe(&item)));
                }
                let made = batch.seqs().len() - owner.len();
                debug_assert!(made <= Requests::MOST, "an item made {made} requests");
                owner.resize(batch.seqs().len(), chunk.len());
                chunk.push(item);
            }
            crate::fault::point("sending a netlink batch")?;
            let results = sock.execute(&batch).context("netlink socket")?;
            let fails = |r: &Result<(), nsfleet_netlink::NlError>| {
                r.as_ref().is_err_and(|e| !self.tolerate.contains(&e.errno))
            };
            if let Some((i, Err(e))) = owner.iter().zip(results).find(|(_, r)| fails(r)) {
                return Err(about(anyhow::Error::new(e), describe(&chunk[*i])));
            }
        }
        Ok(())
    }

    /// Whether `e` is a kernel error that means "already so" here (see
    /// [`Subsystem::retire`]): for what a subsystem does outside [`send_each`]
    /// (Self::send_each).
    pub fn tolerates(&self, e: &anyhow::Error) -> bool {
        self.tolerate.iter().any(|&n| has_errno(e, n))
    }

    /// Writes one of the node's sysctls; `key` as in the topology (`net.ipv4.ip_forward`).
    /// Costly the first time in a node (see `Worker::write_sysctl`): a subsystem touches
    /// sysctls only for nodes that need them.
    pub fn write_sysctl(&mut self, key: &str, value: &str) -> io::Result<()> {
        self.worker.write_sysctl(&below_net(key)?, value)
    }

    /// Reads one of the node's sysctls, as [`write_sysctl`](Self::write_sysctl) names it.
    pub fn read_sysctl(&mut self, key: &str) -> io::Result<String> {
        self.worker.read_sysctl(&below_net(key)?)
    }
}

/// Whether the kernel's error `errno` is in `e`'s chain (a netlink error or an I/O one).
pub fn has_errno(e: &anyhow::Error, errno: i32) -> bool {
    let of = |c: &(dyn std::error::Error + 'static)| {
        (c.downcast_ref::<nsfleet_netlink::NlError>()
            .map(|n| n.errno))
        .or_else(|| c.downcast_ref::<io::Error>()?.raw_os_error())
    };
    e.chain().any(|c| of(c) == Some(errno))
}

/// `e` in the context of what it is about. A [`Subject`] with a place goes in as itself,
/// for the place to reach the client as data; one without goes in as its text, so that
/// the outermost `Subject` of an error (the one `downcast_ref` finds) always has a place.
pub fn about(e: anyhow::Error, subject: impl Into<Subject>) -> anyhow::Error {
    let subject = subject.into();
    match subject.at {
        Some(_) => e.context(subject),
        None => e.context(subject.text),
    }
}

/// A sysctl key (`net.ipv4.ip_forward`) as a path below /proc/sys/net, where a worker
/// reads and writes them.
fn below_net(key: &str) -> io::Result<String> {
    let path = nsfleet_topology::sysctl_path(key);
    let below = path
        .strip_prefix("net/")
        .ok_or(io::ErrorKind::InvalidInput)?;
    Ok(below.to_string())
}

/// Moves a worker into a live node's namespace: where `init` runs.
pub(crate) fn enter_node(w: &mut Worker, node: &Node) -> anyhow::Result<()> {
    node.with_netns(|fd| w.enter(fd))
        .ok_or_else(|| anyhow::anyhow!("node {} is being torn down", node.name()))?
        .map_err(|e| anyhow::anyhow!("node {}: entering its namespace: {e}", node.name()))
}

/// Where [`InitCtx::send_each`]'s `build` puts an item's requests, in order.
pub struct Requests<'a> {
    batch: &'a mut Batch,
    sock: &'a mut NlSocket,
    held: &'a mut Vec<OwnedFd>,
}

impl Requests<'_> {
    /// Most requests one item may make.
    pub const MOST: usize = 4;

    /// Appends one request: `build` gets the batch and the request's sequence number.
    /// Always `Ok`: the `Result` lets `build` closures end with it.
    pub fn add(&mut self, build: impl FnOnce(&mut Batch, u32)) -> anyhow::Result<()> {
        build(self.batch, self.sock.next_seq());
        Ok(())
    }

    /// Keeps `fd` open until the kernel has read the batch (a descriptor a request names,
    /// such as IFLA_NET_NS_FD), and returns its number. Only a batch's worth is open at once.
    pub fn hold(&mut self, fd: OwnedFd) -> RawFd {
        let raw = fd.as_raw_fd();
        self.held.push(fd);
        raw
    }
}

pub trait Subsystem: Send + Sync + 'static {
    /// Per-node state; the core creates it with `Default` before `init`.
    type State: Default + Send + 'static;

    fn name(&self) -> &'static str;

    fn phase(&self) -> Phase;

    /// Whether `init` has work on this node. The core does not enter a node for a phase
    /// in which no subsystem wants it, and a subsystem that does not want a node gets no
    /// state, no `exit` and no `exit_batch` for it.
    fn wants(&self, _node: &Node) -> bool {
        true
    }

    /// Brings this subsystem up on one node. On error, `init` must leave nothing behind of
    /// its own; the core undoes the subsystems that ran before it.
    fn init(&self, cx: &mut InitCtx<'_>, state: &mut Self::State) -> anyhow::Result<()>;

    /// A live node changed shape (`nsfleet apply`) from `was` to what `cx.node` is now:
    /// removes what `was` had and the node no longer has. Runs on every changed node,
    /// phases in reverse, before any `extend` of any node, so that a name or index given
    /// up is free again. A deletion that finds its object gone succeeds (see
    /// [`InitCtx::send_each`]): a device takes its addresses and routes with it, and the
    /// other end of a pair may have been deleted first. Default: nothing of this subsystem
    /// depends on a node's shape.
    fn retire(
        &self,
        _cx: &mut InitCtx<'_>,
        _state: &mut Self::State,
        _was: &Shape,
    ) -> anyhow::Result<()> {
        Ok(())
    }

    /// Then, phase by phase as `init` runs: adds what the node now has that `was` did not.
    /// A subsystem that has no state on the node (it did not want it before, or its part
    /// was stopped) gets `init` instead. A failed change is undone by `retire` and
    /// `extend` again with the shapes swapped, from wherever it stopped; an addition that
    /// finds its object already there then succeeds.
    fn extend(
        &self,
        _cx: &mut InitCtx<'_>,
        _state: &mut Self::State,
        _was: &Shape,
    ) -> anyhow::Result<()> {
        Ok(())
    }

    /// In the Launch phase, once every node of the run has been through `init` (and, for
    /// a live node, right after `init` or `extend`): what `init` prepared but must not
    /// begin before every node of the run is made, such as a node's commands. Runs on a
    /// worker outside the node's namespace. On error, leaves nothing running of its own:
    /// `exit` follows for the state. Default: nothing.
    fn launch(&self, _node: &Node, _state: &mut Self::State) -> anyhow::Result<()> {
        Ok(())
    }

    /// Per node, on the reaper thread (outside the node's namespace): start taking down.
    fn exit(&self, _node: &Node, _state: &mut Self::State) {}

    /// Once per batch of dying nodes, after every `exit`: the place for work that is
    /// expensive per call and cheap per node (waiting for processes, one netlink burst).
    fn exit_batch(&self, _batch: &mut [(&Node, &mut Self::State)]) {}
}

/// The object-safe face of [`Subsystem`] the registry stores; it owns the downcasts so
/// that subsystems see their own state type.
pub(crate) trait Ops: Send + Sync {
    fn name(&self) -> &'static str;
    fn phase(&self) -> Phase;
    fn wants(&self, node: &Node) -> bool;
    fn init(&self, cx: &mut InitCtx<'_>) -> anyhow::Result<AnyState>;
    fn fresh(&self) -> AnyState;
    /// `init` into `state`, which keeps whatever a failed `init` left in it.
    fn init_in(&self, cx: &mut InitCtx<'_>, state: &mut AnyState) -> anyhow::Result<()>;
    fn retire(&self, cx: &mut InitCtx<'_>, state: &mut AnyState, was: &Shape)
        -> anyhow::Result<()>;
    fn extend(&self, cx: &mut InitCtx<'_>, state: &mut AnyState, was: &Shape)
        -> anyhow::Result<()>;
    fn launch(&self, node: &Node, state: &mut AnyState) -> anyhow::Result<()>;
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
    fn wants(&self, node: &Node) -> bool {
        Subsystem::wants(self, node)
    }
    fn init(&self, cx: &mut InitCtx<'_>) -> anyhow::Result<AnyState> {
        let mut state = Box::<S::State>::default();
        Subsystem::init(self, cx, &mut state)?;
        Ok(state)
    }
    fn fresh(&self) -> AnyState {
        Box::<S::State>::default()
    }
    fn init_in(&self, cx: &mut InitCtx<'_>, state: &mut AnyState) -> anyhow::Result<()> {
        Subsystem::init(self, cx, downcast::<S>(state))
    }
    fn retire(
        &self,
        cx: &mut InitCtx<'_>,
        state: &mut AnyState,
        was: &Shape,
    ) -> anyhow::Result<()> {
        Subsystem::retire(self, cx, downcast::<S>(state), was)
    }
    fn extend(
        &self,
        cx: &mut InitCtx<'_>,
        state: &mut AnyState,
        was: &Shape,
    ) -> anyhow::Result<()> {
        Subsystem::extend(self, cx, downcast::<S>(state), was)
    }
    fn launch(&self, node: &Node, state: &mut AnyState) -> anyhow::Result<()> {
        Subsystem::launch(self, node, downcast::<S>(state))
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

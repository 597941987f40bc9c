//! The lifecycle core: a few primitives that every subsystem plugs into, after
//! `net/core/net_namespace.c`. `Subsystem` is pernet_operations, `Registry` is the
//! pernet list under its rwsem, `Fleet::create` is setup_net, `Reaper` is cleanup_net,
//! `ReclaimWatch` says when the kernel is really done.
//!
//! The core never knows what a subsystem does: no file here names a sysctl, a link or a
//! process.
//!
//! Modules depend on each other in one direction: `worker` and `holder` (threads and
//! processes that hold namespaces) know no node; `node` uses `holder`; `subsystem` (the
//! contract) uses `node` and `worker`; `registry`, `reaper`, `reclaim` and `fleet` build
//! on those.
//!
//! # Locking
//!
//! Each lock says next to its data what it protects. The order, outermost first: a thread
//! holding one of these may take only locks further down the list.
//!
//! 1. the supervisor's `changes` (one change to the live fleet at a time), then its
//!    `traffic` (generator control, pktgen_thread_lock), then its
//!    `state` and `kernel_bytes`, which are leaves;
//! 2. `Registry::list` (pernet_ops_rwsem): shared by creation and by the reaper (which
//!    takes it recursively: a creation holding it may wait for the reaper in `admit`),
//!    exclusive for registration;
//! 3. `Fleet::table` (writers of the node table);
//! 4. `Node::states`, one node's at a time;
//! 5. `Node::netns`;
//! 6. `Holders::list`, released before 7;
//! 7. `Holder::conn`.
//!
//! Leaves, never held while taking another: `Backlog::count`, `Ticket::state`, every lock
//! of `ReclaimWatch`, `Fleet::hub`, and nsfleet-sys's `SPAWNING` (held from a node
//! process's fork until its pidfd is open). Readers of the node table take no lock at all
//! (an `ArcSwap` snapshot), so status and exec never wait for a creation.

pub mod fault;
mod fleet;
pub mod holder;
mod node;
mod reaper;
mod reclaim;
mod registry;
mod subsystem;
mod worker;

pub use fleet::{
    mem_available, CreateReport, Fleet, FleetOptions, Holding, Progress, ReshapeReport,
};
pub use node::{Node, NodeTable, Shape};
pub use reaper::{Held, Ticket, TicketState};
pub use subsystem::{InitCtx, Phase, Requests, Subsystem};

/// A registered subsystem's handle: the index of its per-node state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SubsysId(pub(crate) u32);

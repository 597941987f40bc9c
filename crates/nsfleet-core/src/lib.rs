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
//! Each lock says next to its data what it protects. The order is written once, as the
//! ranks of `nsfleet-locks`' `order` module, and every lock of the order is made with
//! its rank: in debug builds (the test suite) a lock taken out of order panics with both
//! names before it blocks. Outermost first: the supervisor's `changes` and `traffic`, the
//! event watch's `links`, `Registry::list`, `Fleet::table`, `Node::states` (one node's at
//! a time), `Proc::run` (a batch's at once), `Node::netns`, `Holders::list`,
//! `Holder::conn`, then nsfleet-sys's `SPAWNING` and `WATCHED`; leaves after them.
//! `Registry::list` is taken recursively by the reaper: a creation holding it may wait
//! for the reaper in `admit`. Readers of the node table take no lock at all (an `ArcSwap`
//! snapshot), so status and exec never wait for a creation.

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
pub use subsystem::{about, has_errno, InitCtx, Phase, Requests, Subsystem};

/// A registered subsystem's handle: the index of its per-node state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SubsysId(pub(crate) u32);

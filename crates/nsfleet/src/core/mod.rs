//! The lifecycle core: a few primitives that every subsystem plugs into, after
//! `net/core/net_namespace.c`. `Subsystem` is pernet_operations, `Registry` is the
//! pernet list under its rwsem, `Fleet::create` is setup_net, `Reaper` is cleanup_net,
//! `ReclaimWatch` says when the kernel is really done.
//!
//! The core never knows what a subsystem does: no file here names a sysctl, a link or a
//! process.

mod fleet;
pub mod holder;
mod node;
mod reaper;
mod reclaim;
mod registry;
mod subsystem;
mod worker;

pub use fleet::{mem_available, CreateReport, Fleet, FleetOptions, Holding, Progress};
pub use node::{Node, NodeTable};
pub use reaper::{Held, Ticket, TicketState};
pub use subsystem::{InitCtx, Phase, Requests, Subsystem};

/// A registered subsystem's handle: the index of its per-node state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SubsysId(pub(crate) u32);

//! Netlink for nsfleet: the wire format, one synchronous socket, and the few rtnetlink
//! and nf_tables requests the engine sends, and the kernel's process events.
//!
//! The three layers stay apart, as in the rust-netlink crates: [`msg`] only encodes and
//! decodes bytes, [`socket`] only moves batches of messages and matches ACKs to sequence
//! numbers, [`rtnl`] and [`nft`] only know which attributes make up a request, and
//! [`proc_events`] how the proc connector is asked for events and what they say. None of them knows
//! about fleets, nodes or topology files, and none of them ever changes namespace: a
//! socket belongs to the namespace of the thread that opened it, and choosing that
//! thread is the caller's business.

pub mod msg;
pub mod nft;
pub mod proc_events;
pub mod rtnl;
pub mod socket;

pub use msg::{Batch, Message};
pub use socket::{NlError, NlSocket};

//! containerlab's front: its verbs on nsfleet's fleets, a lab being a fleet named after
//! its file's `name`: `deploy`, `destroy` and `inspect` ([`lab`], on the general client's
//! `up`, `down` and `status`), `exec --cmd` over a lab's nodes ([`exec`]), `save`
//! ([`save`]) and `tools netem` and `tools veth` ([`tools`]).
//!
//! It reaches a fleet only through the general client (its control socket and run
//! directory), never changes a node itself, and says nothing a user sees that
//! containerlab's own verb would not: the general client never imports it.

pub mod exec;
pub mod lab;
pub mod save;
pub mod tools;

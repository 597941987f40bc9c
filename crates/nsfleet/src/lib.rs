//! nsfleet: fleets of Linux network namespaces on the kernel's own lifecycle design.
//!
//! - [`core`]: the lifecycle primitives (subsystems, registry, workers, reaper).
//! - [`subsys`]: one subsystem per file, each knowing nothing of the others.
//! - [`topology`]: the topology file, validated before anything exists.
//!
//! This crate never parses command lines; the `nsfleet` binary does, and calls it.

pub mod cmd;
pub mod control;
pub mod core;
pub mod fault;
pub mod preflight;
pub mod rundir;
pub mod subsys;
pub mod supervisor;
pub use nsfleet_sys as sys;
pub use nsfleet_topology as topology;
pub mod traffic;

//! nsfleet: fleets of Linux network namespaces on the kernel's own lifecycle design, as
//! one library for programs that embed the engine (the `nsfleet` command is one).
//!
//! Each part is a crate of its own; this one only gathers them:
//! - [`core`]: the lifecycle primitives (subsystems, registry, workers, reaper, reclaim).
//! - [`subsys`]: one subsystem per file, each knowing nothing of the others.
//! - [`supervisor`]: the process that owns a fleet, with its [`control`] protocol,
//!   [`rundir`], [`preflight`] checks and [`traffic`] generator.
//! - [`topology`]: the topology file, validated before anything exists; pure.
//! - [`sys`]: the syscall boundary, where the engine's `unsafe` lives (netlink's socket
//!   and the traffic engine's rings keep boundaries of their own).
//!
//! It never parses command lines, prints, or draws progress: callers do (nsfleet-client).

pub use nsfleet_core as core;
pub use nsfleet_core::fault;
pub use nsfleet_subsys as subsys;
pub use nsfleet_supervisor as supervisor;
pub use nsfleet_supervisor::{control, preflight, ready, rundir, traffic};
pub use nsfleet_sys as sys;
pub use nsfleet_topology as topology;

//! nsfleet-sys: the syscall boundary of nsfleet. Every `unsafe` of the engine (core,
//! subsystems, supervisor), the client and the bench lab lives in this crate, one module
//! per domain, each wrapper doing one syscall (or one fixed sequence) and returning
//! `io::Result`. The netlink socket and the traffic engine's packet rings keep their own
//! boundaries in their crates (`nsfleet-netlink`'s socket.rs, `nsfleet-traffic`'s sys.rs
//! and tx/ring.rs for its rings, XDP and CPU pinning): those crates are usable without
//! the engine.
//!
//! It never decides anything: when to switch namespace, whom to signal, what to hold is
//! the callers' policy. It knows no fleet, node, topology or netlink message.

pub mod bpf;
pub mod cgroup;
pub mod confine;
pub mod fdpass;
pub mod fs;
pub mod helper;
pub mod host;
pub mod iface;
pub mod limits;
pub mod meminfo;
pub mod named;
pub mod ns;
pub mod packet;
pub mod ping;
pub mod poll;
pub mod process;
pub mod procfs;
pub mod pty;
pub mod seccomp;
pub mod signals;
pub mod spawn;
pub mod userns;
pub mod world;

// The wrappers by name, for callers that use a few of several domains.
pub use fdpass::*;
pub use fs::*;
pub use helper::*;
pub use iface::*;
pub use limits::*;
pub use meminfo::*;
pub use named::*;
pub use ns::*;
pub use poll::*;
pub use process::*;
pub use procfs::*;
pub use signals::*;
pub use spawn::*;
pub use world::*;

use std::io;

/// A libc return code as a `Result`: negative means `errno` says why.
pub(crate) fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

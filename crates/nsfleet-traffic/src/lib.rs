//! nsfleet-traffic: a packet generator on the model of the kernel's pktgen, in user space.
//!
//! - [`params`]: a device's parameters and pktgen's commands (`add_device`, `count`,
//!   `pkt_size`, ...), parsed from the same text whether it comes from a file, a flag or
//!   the control socket.
//! - [`frame`]: UDP/IPv4 frames built once and rewritten per packet in the fields that vary
//!   (pktgen's clone_skb idea).
//! - [`tx`]: the ways a frame reaches a device: an AF_PACKET TX ring that bypasses the
//!   qdisc, XDP live frames, and a null sink that measures the loop alone.
//! - [`engine`]: generator threads, one per core and pinned, each owning a device list it
//!   reads lock-free through an RCU-style snapshot; control reaches them as flags checked
//!   once per burst.
//! - [`sink`]: a receiver that counts packets without reading them.
//!
//! This crate knows a device only as a namespace descriptor and an interface name. It never
//! knows fleets, node names' meaning, the control socket or the command line, and it never
//! creates, removes or reconfigures an interface.

pub mod engine;
pub mod frame;
pub mod params;
pub mod sink;
pub mod sys;
pub mod tx;

pub use engine::{DeviceResult, Engine, Results, Target, ThreadResult};
pub use params::{Command, DeviceParams, ListMode, Method, Param};

//! Namespace ids (RTM_*NSID): the engine's reclamation fences.

use crate::msg::{self, Batch, Message, NLM_F_DUMP};

pub const RTM_NEWNSID: u16 = 88;
pub const RTM_DELNSID: u16 = 89;
pub const RTM_GETNSID: u16 = 90;

pub const RTNLGRP_LINK: u32 = 1;
pub const RTNLGRP_NSID: u32 = 28;

pub const NETNSA_NSID: u16 = 1;
pub const NETNSA_FD: u16 = 3;

/// struct rtgenmsg, as RTM_*NSID take it.
const RTGENMSG: [u8; 1] = [libc::AF_UNSPEC as u8];

/// Gives the namespace behind `ns_fd` the id `nsid` in the socket's namespace. The id
/// stays until that namespace is destroyed, and its removal is announced to RTNLGRP_NSID
/// listeners as RTM_DELNSID: the engine's reclamation signal.
pub fn new_nsid(b: &mut Batch, seq: u32, ns_fd: i32, nsid: i32) {
    b.begin(RTM_NEWNSID, 0, seq)
        .header(&RTGENMSG)
        .attr_u32(NETNSA_FD, ns_fd as u32)
        .attr_i32(NETNSA_NSID, nsid)
        .end();
}

/// A dump of every namespace id assigned in the socket's namespace.
pub fn dump_nsids(b: &mut Batch, seq: u32) {
    b.begin(RTM_GETNSID, NLM_F_DUMP, seq)
        .header(&RTGENMSG)
        .end();
}

/// An nsid event or dump entry: (added, id). `added` is false for RTM_DELNSID.
pub fn parse_nsid(m: &Message<'_>) -> Option<(bool, i32)> {
    let added = match m.ty {
        RTM_NEWNSID => true,
        RTM_DELNSID => false,
        _ => return None,
    };
    let attrs = m.payload.get(msg::align(RTGENMSG.len())..)?;
    msg::attrs(attrs)
        .find(|(ty, v)| *ty == NETNSA_NSID && v.len() == 4)
        .map(|(_, v)| (added, i32::from_ne_bytes(v.try_into().unwrap())))
}

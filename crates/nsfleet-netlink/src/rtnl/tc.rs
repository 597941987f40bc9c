//! Traffic control (RTM_*QDISC): netem as a device's root qdisc.

use crate::msg::{Batch, NLM_F_CREATE};

pub const RTM_NEWQDISC: u16 = 36;
pub const RTM_DELQDISC: u16 = 37;

const NLM_F_REPLACE: u16 = 0x100;
const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
const TCA_NETEM_REORDER: u16 = 3;
const TCA_NETEM_CORRUPT: u16 = 4;
const TCA_NETEM_RATE: u16 = 6;
const TCA_NETEM_RATE64: u16 = 8;
const TCA_NETEM_LATENCY64: u16 = 10;
const TCA_NETEM_JITTER64: u16 = 11;
const TC_H_ROOT: u32 = 0xFFFF_FFFF;
/// netem's default queue length (tc's too); 0 would drop every packet.
const NETEM_LIMIT: u32 = 1000;

/// netem's parameters. Probabilities are fractions of `u32::MAX`, as the kernel keeps them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Netem {
    pub delay_ns: u64,
    pub jitter_ns: u64,
    pub loss: u32,
    pub duplicate: u32,
    pub corrupt: u32,
    /// Sent at once, ahead of the delayed (needs a delay).
    pub reorder: u32,
    /// Bytes per second; 0 is unlimited.
    pub rate: u64,
}

/// struct tcmsg for the root qdisc of `index`.
fn tcmsg(index: i32) -> [u8; 20] {
    let mut h = [0u8; 20];
    h[0] = libc::AF_UNSPEC as u8;
    h[4..8].copy_from_slice(&index.to_ne_bytes());
    h[12..16].copy_from_slice(&TC_H_ROOT.to_ne_bytes());
    h
}

/// Makes netem the root qdisc of `index`, replacing whatever root qdisc it had.
pub fn set_netem(b: &mut Batch, seq: u32, index: i32, n: &Netem) {
    b.begin(RTM_NEWQDISC, NLM_F_CREATE | NLM_F_REPLACE, seq)
        .header(&tcmsg(index))
        .attr_str(TCA_KIND, "netem");
    // TCA_OPTIONS is struct tc_netem_qopt followed by netem's own attributes. Delays go
    // in the 64-bit nanosecond attributes; the qopt's tick fields stay 0.
    let opts = b.open_attr(TCA_OPTIONS);
    let mut qopt = [0u8; 24];
    qopt[4..8].copy_from_slice(&NETEM_LIMIT.to_ne_bytes());
    qopt[8..12].copy_from_slice(&n.loss.to_ne_bytes());
    qopt[16..20].copy_from_slice(&n.duplicate.to_ne_bytes());
    if n.reorder > 0 {
        // gap 1, as tc sets it: any packet may be the one sent ahead.
        qopt[12..16].copy_from_slice(&1u32.to_ne_bytes());
    }
    b.header(&qopt);
    b.attr_u64(TCA_NETEM_LATENCY64, n.delay_ns);
    b.attr_u64(TCA_NETEM_JITTER64, n.jitter_ns);
    if n.reorder > 0 {
        let mut r = [0u8; 8];
        r[0..4].copy_from_slice(&n.reorder.to_ne_bytes());
        b.attr(TCA_NETEM_REORDER, &r);
    }
    if n.corrupt > 0 {
        let mut c = [0u8; 8];
        c[0..4].copy_from_slice(&n.corrupt.to_ne_bytes());
        b.attr(TCA_NETEM_CORRUPT, &c);
    }
    if n.rate > 0 {
        let mut r = [0u8; 16];
        r[0..4].copy_from_slice(&(n.rate.min(u32::MAX as u64) as u32).to_ne_bytes());
        b.attr(TCA_NETEM_RATE, &r);
        if n.rate > u32::MAX as u64 {
            b.attr_u64(TCA_NETEM_RATE64, n.rate);
        }
    }
    b.nest_end(opts).end();
}

/// Removes the root qdisc of `index` (back to the device's default).
pub fn del_root_qdisc(b: &mut Batch, seq: u32, index: i32) {
    b.begin(RTM_DELQDISC, 0, seq).header(&tcmsg(index)).end();
}

const TCA_TBF_PARMS: u16 = 1;
const TCA_TBF_RATE64: u16 = 4;
const TCA_TBF_BURST: u16 = 6;
/// With an explicit link layer the kernel computes rates itself and needs no rate table.
const TC_LINKLAYER_ETHERNET: u8 = 1;

/// Makes a token bucket (tbf) the root qdisc of `index`: a rate limit in bytes per second,
/// with a queue of 50 ms at that rate. For kernels without netem.
pub fn set_tbf(b: &mut Batch, seq: u32, index: i32, rate: u64) {
    let burst = (rate / 100).clamp(16 << 10, u32::MAX as u64) as u32;
    let limit = (rate / 20 + burst as u64).min(u32::MAX as u64) as u32;
    b.begin(RTM_NEWQDISC, NLM_F_CREATE | NLM_F_REPLACE, seq)
        .header(&tcmsg(index))
        .attr_str(TCA_KIND, "tbf");
    let opts = b.nest_begin(TCA_OPTIONS);
    // struct tc_tbf_qopt: rate and peakrate (struct tc_ratespec each), limit, buffer, mtu.
    let mut q = [0u8; 36];
    q[1] = TC_LINKLAYER_ETHERNET;
    q[8..12].copy_from_slice(&(rate.min(u32::MAX as u64) as u32).to_ne_bytes());
    q[24..28].copy_from_slice(&limit.to_ne_bytes());
    b.attr(TCA_TBF_PARMS, &q).attr_u32(TCA_TBF_BURST, burst);
    if rate > u32::MAX as u64 {
        b.attr_u64(TCA_TBF_RATE64, rate);
    }
    b.nest_end(opts).end();
}

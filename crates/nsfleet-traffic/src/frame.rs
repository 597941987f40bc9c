//! UDP/IPv4 frames, built once per device and rewritten per packet only where they vary.
//!
//! pktgen reuses one skb for `clone_skb` packets; here a transmitter copies the template
//! into each of its slots once, and [`Frames::rewrite`] then touches only the addresses,
//! ports and IP checksum, and only when a range makes them vary.

use crate::params::DeviceParams;
use std::net::Ipv4Addr;

const ETH: usize = 14;
const IP: usize = 20;
/// Where the fields that vary sit in a frame.
const IP_CSUM: usize = ETH + 10;
const IP_SRC: usize = ETH + 12;
const IP_DST: usize = ETH + 16;
const UDP_SRC: usize = ETH + IP;
const UDP_DST: usize = ETH + IP + 2;

/// One combination of the fields that vary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tuple {
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    pub dport: u16,
}

/// The combinations in a fixed order: destination fastest, then destination port, source
/// port, source (an odometer over the four ranges).
#[derive(Clone, Debug)]
struct Odometer {
    lo: Tuple,
    hi: Tuple,
    at: Tuple,
}

impl Odometer {
    fn next(&mut self) -> Tuple {
        let t = self.at;
        let (lo, hi, at) = (self.lo, self.hi, &mut self.at);
        if at.dst < hi.dst {
            at.dst += 1;
        } else if at.dport < hi.dport {
            (at.dst, at.dport) = (lo.dst, at.dport + 1);
        } else if at.sport < hi.sport {
            (at.dst, at.dport, at.sport) = (lo.dst, lo.dport, at.sport + 1);
        } else if at.src < hi.src {
            *at = Tuple {
                src: at.src + 1,
                ..lo
            };
        } else {
            *at = lo;
        }
        t
    }
}

/// A flow: the combination it sends and how many packets it has left before it moves on.
#[derive(Clone, Copy, Debug)]
struct Flow {
    tuple: Tuple,
    left: u32,
}

pub struct Frames {
    template: Vec<u8>,
    varies: bool,
    odometer: Odometer,
    flows: Vec<Flow>,
    flowlen: u32,
    next_flow: usize,
}

impl Frames {
    /// `p` has its addresses filled in (`src_min`, `dst_min`, ... are `Some`).
    pub fn new(p: &DeviceParams, src_mac: [u8; 6], dst_mac: [u8; 6]) -> Frames {
        let ip = |a: Option<Ipv4Addr>| u32::from(a.unwrap_or(Ipv4Addr::UNSPECIFIED));
        let lo = Tuple {
            src: ip(p.src_min),
            dst: ip(p.dst_min),
            sport: p.udp_src_min,
            dport: p.udp_dst_min,
        };
        let hi = Tuple {
            src: ip(p.src_max.or(p.src_min)),
            dst: ip(p.dst_max.or(p.dst_min)),
            sport: p.udp_src_max,
            dport: p.udp_dst_max,
        };
        let len = p.pkt_size as usize - 4;
        let mut t = vec![0u8; len];
        t[..6].copy_from_slice(&dst_mac);
        t[6..12].copy_from_slice(&src_mac);
        t[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        t[ETH] = 0x45;
        t[ETH + 2..ETH + 4].copy_from_slice(&((len - ETH) as u16).to_be_bytes());
        t[ETH + 6] = 0x40; // don't fragment
        t[ETH + 8] = 64;
        t[ETH + 9] = libc::IPPROTO_UDP as u8;
        t[ETH + IP + 4..ETH + IP + 6].copy_from_slice(&((len - ETH - IP) as u16).to_be_bytes());
        // The UDP checksum stays 0: "none" is valid over IPv4 and costs nothing per packet.
        let mut f = Frames {
            template: t,
            varies: lo != hi,
            odometer: Odometer { lo, hi, at: lo },
            flows: vec![Flow { tuple: lo, left: 0 }; p.flows.max(1) as usize],
            flowlen: p.flowlen.max(1),
            next_flow: 0,
        };
        write_tuple(&mut f.template, lo);
        f
    }

    /// The first frame; every slot a transmitter fills starts as a copy of it.
    pub fn template(&self) -> &[u8] {
        &self.template
    }

    pub fn len(&self) -> usize {
        self.template.len()
    }

    pub fn is_empty(&self) -> bool {
        self.template.is_empty()
    }

    /// Whether packets differ from each other at all.
    pub fn varies(&self) -> bool {
        self.varies
    }

    /// Turns `buf`, a copy of the template (or of any earlier frame), into the next packet.
    #[inline]
    pub fn rewrite(&mut self, buf: &mut [u8]) {
        if !self.varies {
            return;
        }
        let tuple = self.next_tuple();
        write_tuple(buf, tuple);
    }

    /// The combination the next packet carries, by flow.
    pub fn next_tuple(&mut self) -> Tuple {
        let i = self.next_flow;
        self.next_flow = if i + 1 == self.flows.len() { 0 } else { i + 1 };
        let flow = &mut self.flows[i];
        if flow.left == 0 {
            *flow = Flow {
                tuple: self.odometer.next(),
                left: self.flowlen,
            };
        }
        flow.left -= 1;
        flow.tuple
    }
}

fn write_tuple(buf: &mut [u8], t: Tuple) {
    buf[IP_SRC..IP_SRC + 4].copy_from_slice(&t.src.to_be_bytes());
    buf[IP_DST..IP_DST + 4].copy_from_slice(&t.dst.to_be_bytes());
    buf[UDP_SRC..UDP_SRC + 2].copy_from_slice(&t.sport.to_be_bytes());
    buf[UDP_DST..UDP_DST + 2].copy_from_slice(&t.dport.to_be_bytes());
    buf[IP_CSUM..IP_CSUM + 2].copy_from_slice(&[0, 0]);
    let sum = ip_checksum(&buf[ETH..ETH + IP]);
    buf[IP_CSUM..IP_CSUM + 2].copy_from_slice(&sum.to_be_bytes());
}

fn ip_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Param;

    fn params(set: &[Param]) -> DeviceParams {
        let mut p = DeviceParams::default();
        p.apply(&Param::Src("10.0.0.1".parse().unwrap()));
        p.apply(&Param::Dst("10.0.0.2".parse().unwrap()));
        for s in set {
            p.apply(s);
        }
        p
    }

    #[test]
    fn template_is_a_valid_frame() {
        let f = Frames::new(&params(&[]), [2; 6], [4; 6]);
        let t = f.template();
        assert_eq!(t.len(), 60);
        assert_eq!(&t[..6], &[4; 6]);
        assert_eq!(
            ip_checksum(&t[ETH..ETH + IP]),
            0,
            "a valid header sums to 0"
        );
        assert_eq!(&t[IP_DST..IP_DST + 4], &[10, 0, 0, 2]);
        assert!(!f.varies());
    }

    #[test]
    fn ranges_visit_every_combination_in_order() {
        let p = params(&[
            Param::DstMax("10.0.0.4".parse().unwrap()),
            Param::UdpDstMin(1000),
            Param::UdpDstMax(1001),
        ]);
        let mut f = Frames::new(&p, [2; 6], [4; 6]);
        let mut buf = f.template().to_vec();
        let mut seen = Vec::new();
        for _ in 0..7 {
            f.rewrite(&mut buf);
            assert_eq!(ip_checksum(&buf[ETH..ETH + IP]), 0);
            seen.push((
                buf[IP_DST + 3],
                u16::from_be_bytes([buf[UDP_DST], buf[UDP_DST + 1]]),
            ));
        }
        let want = [
            (2, 1000),
            (3, 1000),
            (4, 1000),
            (2, 1001),
            (3, 1001),
            (4, 1001),
            (2, 1000),
        ];
        assert_eq!(seen, want);
    }

    #[test]
    fn flows_send_flowlen_packets_each_in_turn() {
        let p = params(&[
            Param::DstMax("10.0.0.9".parse().unwrap()),
            Param::Flows(2),
            Param::Flowlen(3),
        ]);
        let mut f = Frames::new(&p, [2; 6], [4; 6]);
        let dsts: Vec<u8> = (0..8).map(|_| f.next_tuple().dst as u8).collect();
        assert_eq!(dsts, [2, 3, 2, 3, 2, 3, 4, 5]);
    }
}

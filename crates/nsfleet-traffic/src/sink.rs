//! A counting sink: an AF_PACKET socket on the receiving interface whose classic BPF filter
//! keeps incoming IPv4 UDP only, with a receive buffer so small that nearly every packet
//! is dropped at once. PACKET_STATISTICS counts the dropped with the kept, so the count is
//! exact while the sink reads nothing and costs the receiver one filter run per packet.

use crate::sys;
use std::io;
use std::os::fd::OwnedFd;

pub struct Sink {
    fd: OwnedFd,
    total: u64,
}

/// ldh [12]; jeq IPv4; ldb [23]; jeq UDP; ld pkttype; jeq OUTGOING -> drop; ret 1; ret 0.
const FILTER: [(u16, u8, u8, u32); 8] = [
    (0x28, 0, 0, 12),
    (0x15, 0, 5, 0x0800),
    (0x30, 0, 0, 23),
    (0x15, 0, 3, libc::IPPROTO_UDP as u32),
    (0x20, 0, 0, (-0x1000i32 + 4) as u32), // SKF_AD_OFF + SKF_AD_PKTTYPE
    (0x15, 1, 0, libc::PACKET_OUTGOING as u32),
    (0x06, 0, 0, 1),
    (0x06, 0, 0, 0),
];

impl Sink {
    /// A sink on `ifname` in the calling thread's namespace.
    pub fn open(ifname: &str) -> io::Result<Sink> {
        let index = nsfleet_sys::ifindex(ifname)?;
        // Protocol 0 until bound: nothing arrives before the filter is in place.
        let fd = sys::packet_socket(0)?;
        let filter: Vec<libc::sock_filter> = FILTER
            .iter()
            .map(|&(code, jt, jf, k)| libc::sock_filter { code, jt, jf, k })
            .collect();
        sys::attach_filter(&fd, &filter)?;
        sys::set_rcvbuf(&fd, 0)?;
        sys::bind_packet(&fd, index, libc::ETH_P_IP as u16)?;
        let mut sink = Sink { fd, total: 0 };
        sink.count()?;
        sink.total = 0;
        Ok(sink)
    }

    /// UDP packets that reached the interface since the sink opened.
    pub fn count(&mut self) -> io::Result<u64> {
        // The kernel resets its counters on every read: keep the sum here. Its count of
        // packets includes the dropped.
        self.total += nsfleet_sys::packet::packet_stats(&self.fd)?.packets;
        Ok(self.total)
    }
}

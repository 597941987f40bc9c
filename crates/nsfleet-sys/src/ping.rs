//! ICMP echo from the calling thread's network namespace: a raw ICMP (or ICMPv6) socket
//! that sends echo requests and reads back their replies, so that the supervisor can tell
//! whether a node reaches an address (and with what loss and round trips) without any
//! `ping` program in the node. Raw sockets, not the kernel's SOCK_DGRAM "ping sockets":
//! a new namespace's `net.ipv4.ping_group_range` ("1 0") refuses those to everyone.
//!
//! It must never answer, forward or inject anything but its own echo requests, nor
//! change the namespace it is opened in (no sysctl, no route, no option but the socket's
//! own ICMP filter); how many to send, how often, and what a loss means is the caller's.

use crate::check;
use crate::packet::set_option;
use std::io;
use std::mem::size_of;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

const ICMP_ECHOREPLY: u8 = 0;
const ICMP_ECHO: u8 = 8;
const ICMP6_ECHO_REQUEST: u8 = 128;
const ICMP6_ECHO_REPLY: u8 = 129;
/// SOL_RAW's option of an IPv4 raw ICMP socket: a mask of the ICMP types (below 32) it
/// drops (<linux/icmp.h>).
const ICMP_FILTER: libc::c_int = 1;
/// IPPROTO_ICMPV6's option: 256 bits, one per ICMPv6 type, set for the types it drops
/// (<netinet/icmp6.h>).
const ICMP6_FILTER: libc::c_int = 1;
/// What each echo request carries after its 8-byte header.
const PAYLOAD: &[u8; 24] = b"nsfleet echo request....";

/// Echo requests from the network namespace the socket was opened in: one at a time, each
/// waited for ([`Pinger::echo`]), or sent on a schedule of the caller's with their replies
/// read as they come ([`Pinger::send`], [`Pinger::reply`]).
pub struct Pinger {
    fd: OwnedFd,
    v6: bool,
    /// The echo identifier of this Pinger's requests: replies to others' are passed over.
    ident: u16,
    /// The next request's sequence number.
    seq: u16,
}

impl Pinger {
    /// A raw ICMP (or ICMPv6) socket in the calling thread's network namespace (needs
    /// CAP_NET_RAW there; the supervisor has it in every node). Opened once; the socket
    /// stays in that namespace after the thread leaves it.
    pub fn open(v6: bool) -> io::Result<Pinger> {
        let (family, protocol) = match v6 {
            false => (libc::AF_INET, libc::IPPROTO_ICMP),
            true => (libc::AF_INET6, libc::IPPROTO_ICMPV6),
        };
        // SAFETY: plain syscall; on success the descriptor is new and owned by nobody else.
        let fd =
            check(unsafe { libc::socket(family, libc::SOCK_RAW | libc::SOCK_CLOEXEC, protocol) })?;
        // SAFETY: fd was just returned by socket(2).
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // The socket sees every ICMP packet of the namespace: only echo replies are kept.
        if v6 {
            let mut drop_types = [u32::MAX; 8];
            let t = usize::from(ICMP6_ECHO_REPLY);
            drop_types[t >> 5] &= !(1 << (t & 31));
            set_option(&fd, libc::IPPROTO_ICMPV6, ICMP6_FILTER, &drop_types)?;
        } else {
            let drop_types: u32 = !(1 << ICMP_ECHOREPLY);
            set_option(&fd, libc::SOL_RAW, ICMP_FILTER, &drop_types)?;
        }
        Ok(Pinger {
            fd,
            v6,
            ident: new_ident(),
            seq: 0,
        })
    }

    /// One echo request to `addr`, waiting at most `timeout` for its reply; Some(round
    /// trip) or None when none came. Replies to earlier requests that come meanwhile are
    /// passed over.
    pub fn echo(&mut self, addr: IpAddr, timeout: Duration) -> io::Result<Option<Duration>> {
        let sent = Instant::now();
        let Some(seq) = self.send(addr)? else {
            return Ok(None);
        };
        let until = sent + timeout;
        while let Some((s, at)) = self.reply(until)? {
            if s == seq {
                return Ok(Some(at - sent));
            }
        }
        Ok(None)
    }

    /// Sends one echo request to `addr`: its sequence number (this Pinger's count of
    /// requests, from 0, wrapping), or None when the kernel would not send it for want of
    /// a way there (no route, an unreachable neighbour, a firewall's drop on the way out:
    /// ENETUNREACH, EHOSTUNREACH, ENETDOWN, EHOSTDOWN, EPERM), which is one lost. An IPv6
    /// link-local address has no scope here: it goes where the kernel's routes say.
    pub fn send(&mut self, addr: IpAddr) -> io::Result<Option<u16>> {
        if addr.is_ipv6() != self.v6 {
            let family = if self.v6 { "IPv6" } else { "IPv4" };
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{addr} from an {family} ICMP socket"),
            ));
        }
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        let request = echo_request(self.v6, self.ident, seq);
        match send_to(&self.fd, &request, addr) {
            Ok(()) => Ok(Some(seq)),
            Err(e) if unreachable(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The next echo reply to one of this Pinger's requests, waited for until `until`:
    /// its sequence number and when it was read, or None at `until`. Every other packet
    /// the socket sees is passed over.
    pub fn reply(&mut self, until: Instant) -> io::Result<Option<(u16, Instant)>> {
        let mut buf = [0u8; 2048];
        loop {
            // Rounded up: poll's milliseconds would otherwise spin out the last one.
            let left = until.saturating_duration_since(Instant::now());
            let left = Duration::from_millis(left.as_micros().div_ceil(1000) as u64);
            let ready = crate::poll::poll_readable(&[self.fd.as_fd()], Some(left))?;
            if ready[0] {
                if let Some(n) = recv(&self.fd, &mut buf)? {
                    let at = Instant::now();
                    if let Some(seq) = reply_seq(self.v6, &buf[..n], self.ident) {
                        return Ok(Some((seq, at)));
                    }
                }
            }
            if Instant::now() >= until {
                return Ok(None);
            }
        }
    }
}

/// An identifier no other Pinger of this process has had recently: the pid's low bits
/// mixed with a process-wide count (a supervisor is pid 1 of its own PID namespace, so
/// the count is what tells its Pingers apart).
fn new_ident() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    (std::process::id() as u16) ^ n.wrapping_mul(0x9e37)
}

/// An echo request: type, code, checksum, identifier, sequence (in network order), then
/// [`PAYLOAD`]. ICMPv6's checksum covers a pseudo-header the kernel knows and we do not:
/// it fills it in (a raw ICMPv6 socket always does).
fn echo_request(v6: bool, ident: u16, seq: u16) -> Vec<u8> {
    let kind = if v6 { ICMP6_ECHO_REQUEST } else { ICMP_ECHO };
    let mut p = vec![kind, 0, 0, 0];
    p.extend_from_slice(&ident.to_be_bytes());
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(PAYLOAD);
    if !v6 {
        let sum = checksum(&p);
        p[2..4].copy_from_slice(&sum.to_be_bytes());
    }
    p
}

/// The sequence number of `packet`, as a raw socket of the family reads it, when it is
/// an echo reply with identifier `ident`. An IPv4 socket reads the IP header first (its
/// length in the low nibble of the first byte, in 4-byte words); an IPv6 one reads none.
fn reply_seq(v6: bool, packet: &[u8], ident: u16) -> Option<u16> {
    let (icmp, want) = if v6 {
        (packet, ICMP6_ECHO_REPLY)
    } else {
        let first = *packet.first()?;
        if first >> 4 != 4 {
            return None;
        }
        (packet.get(usize::from(first & 0x0f) * 4..)?, ICMP_ECHOREPLY)
    };
    let ours =
        icmp.len() >= 8 && icmp[0] == want && icmp[1] == 0 && icmp[4..6] == ident.to_be_bytes();
    ours.then(|| u16::from_be_bytes([icmp[6], icmp[7]]))
}

/// The Internet checksum (RFC 1071) of `data`: the one's complement of the one's
/// complement sum of its 16-bit big-endian words, an odd last byte padded with a zero.
/// Stored big-endian, it makes the sum over the whole message come to 0xffff.
fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Errors of sendto(2) that say the address cannot be reached from here now.
fn unreachable(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::ENETUNREACH | libc::EHOSTUNREACH | libc::ENETDOWN | libc::EHOSTDOWN | libc::EPERM
        )
    )
}

fn send_to(fd: &OwnedFd, packet: &[u8], addr: IpAddr) -> io::Result<()> {
    // SAFETY: sockaddr_storage is plain data; all zeroes is a valid value.
    let mut sa: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        IpAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: 0,
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in and aligned for it.
            unsafe { std::ptr::write((&mut sa as *mut libc::sockaddr_storage).cast(), sin) };
            size_of::<libc::sockaddr_in>()
        }
        IpAddr::V6(a) => {
            // SAFETY: sockaddr_in6 is plain data; all zeroes is a valid value.
            let mut sin6: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_addr.s6_addr = a.octets();
            // SAFETY: sockaddr_storage is larger than sockaddr_in6 and aligned for it.
            unsafe { std::ptr::write((&mut sa as *mut libc::sockaddr_storage).cast(), sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    // SAFETY: `packet` is live for its length; `sa` is a live socket address at least
    // `len` bytes long, of the family it says.
    let n = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            packet.as_ptr().cast(),
            packet.len(),
            0,
            (&sa as *const libc::sockaddr_storage).cast(),
            len as libc::socklen_t,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One packet into `buf` (cut to its length) if one is waiting, `None` if none is.
fn recv(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    loop {
        // SAFETY: `buf` is live and writable for its length.
        let n = unsafe {
            libc::recv(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n >= 0 {
            return Ok(Some(n as usize));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => return Ok(None),
            io::ErrorKind::Interrupted => continue,
            _ => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_is_rfc_1071s() {
        // RFC 1071's own example: the sum of these words is ddf2, its complement 220d.
        assert_eq!(
            checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0x220d
        );
        // An odd last byte counts as the high byte of a word.
        assert_eq!(checksum(&[0x01]), !0x0100);
        assert_eq!(checksum(&[]), 0xffff);
        // Carries fold back in: ffff + 0001 is 0001 after the fold.
        assert_eq!(checksum(&[0xff, 0xff, 0x00, 0x01]), !0x0001);
    }

    #[test]
    fn an_echo_request_checks_out_and_its_reply_is_recognised() {
        let req = echo_request(false, 0x1234, 7);
        assert_eq!(&req[..2], &[ICMP_ECHO, 0]);
        assert_eq!(&req[4..8], &[0x12, 0x34, 0, 7]);
        // A message with its checksum in place sums to zero.
        assert_eq!(checksum(&req), 0);
        // The reply as an IPv4 raw socket reads it: a 20-byte IP header first.
        let mut reply = vec![0x45];
        reply.resize(20, 0);
        reply.extend_from_slice(&req);
        reply[20] = ICMP_ECHOREPLY;
        assert_eq!(reply_seq(false, &reply, 0x1234), Some(7));
        assert_eq!(reply_seq(false, &reply, 0x1235), None);
        assert_eq!(reply_seq(false, &reply[..24], 0x1234), None);
        // With IP options, the header is longer: its length says where ICMP starts.
        let mut longer = vec![0x46];
        longer.resize(24, 0);
        longer.extend_from_slice(&reply[20..]);
        assert_eq!(reply_seq(false, &longer, 0x1234), Some(7));
        // Our own request, which the socket also sees, is not a reply.
        reply[20] = ICMP_ECHO;
        assert_eq!(reply_seq(false, &reply, 0x1234), None);
        // IPv6: no IP header; the kernel fills the checksum in.
        let mut req6 = echo_request(true, 0x1234, 7);
        assert_eq!(&req6[..4], &[ICMP6_ECHO_REQUEST, 0, 0, 0]);
        req6[0] = ICMP6_ECHO_REPLY;
        assert_eq!(reply_seq(true, &req6, 0x1234), Some(7));
    }
}

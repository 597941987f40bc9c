//! One line per packet for a person at a terminal, as tcpdump prints them at its least
//! verbose: ARP, IPv4 and IPv6 with ICMP, TCP and UDP; anything else by its EtherType.
//! For more, `-w - | tcpdump -r -` or Wireshark read the same packets.

use std::net::{Ipv4Addr, Ipv6Addr};

/// What `frame` (an Ethernet frame, perhaps truncated) is.
pub fn describe(frame: &[u8]) -> String {
    let Some(ethertype) = be16(frame, 12) else {
        return format!("truncated frame of {} bytes", frame.len());
    };
    let payload = &frame[14..];
    match ethertype {
        0x0806 => arp(payload),
        0x0800 => ipv4(payload),
        0x86dd => ipv6(payload),
        other => format!("ethertype 0x{other:04x}, length {}", frame.len()),
    }
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn v4(b: &[u8], at: usize) -> Option<Ipv4Addr> {
    Some(Ipv4Addr::from(
        <[u8; 4]>::try_from(b.get(at..at + 4)?).ok()?,
    ))
}

fn arp(p: &[u8]) -> String {
    let (Some(op), Some(sender), Some(target)) = (be16(p, 6), v4(p, 14), v4(p, 24)) else {
        return "ARP, truncated".into();
    };
    match op {
        1 => format!("ARP, Request who-has {target} tell {sender}"),
        2 => {
            let mac = p.get(8..14).map(hex_mac).unwrap_or_default();
            format!("ARP, Reply {sender} is-at {mac}")
        }
        op => format!("ARP, op {op}"),
    }
}

fn hex_mac(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn ipv4(p: &[u8]) -> String {
    let (Some(src), Some(dst), Some(&vihl), Some(&proto)) =
        (v4(p, 12), v4(p, 16), p.first(), p.get(9))
    else {
        return "IP, truncated".into();
    };
    let header = ((vihl & 0x0f) as usize * 4).min(p.len());
    let total = be16(p, 2).unwrap_or(0) as usize;
    let l4 = &p[header..];
    format!(
        "IP {}",
        transport(
            proto,
            &src.to_string(),
            &dst.to_string(),
            l4,
            total.saturating_sub(header),
            false
        )
    )
}

fn ipv6(p: &[u8]) -> String {
    let addr = |at: usize| -> Option<Ipv6Addr> {
        Some(Ipv6Addr::from(
            <[u8; 16]>::try_from(p.get(at..at + 16)?).ok()?,
        ))
    };
    let (Some(src), Some(dst), Some(&next), Some(len)) = (addr(8), addr(24), p.get(6), be16(p, 4))
    else {
        return "IP6, truncated".into();
    };
    let l4 = p.get(40..).unwrap_or_default();
    format!(
        "IP6 {}",
        transport(
            next,
            &src.to_string(),
            &dst.to_string(),
            l4,
            len as usize,
            true
        )
    )
}

/// `SRC > DST: what`, with ports for TCP and UDP.
fn transport(proto: u8, src: &str, dst: &str, l4: &[u8], len: usize, v6: bool) -> String {
    let ports = (be16(l4, 0), be16(l4, 2));
    match (proto, ports) {
        (6, (Some(sp), Some(dp))) => {
            let flags = l4.get(13).map_or(String::new(), |f| tcp_flags(*f));
            let data = len.saturating_sub(l4.get(12).map_or(20, |o| (o >> 4) as usize * 4));
            format!("{src}.{sp} > {dst}.{dp}: Flags [{flags}], length {data}")
        }
        (17, (Some(sp), Some(dp))) => {
            format!(
                "{src}.{sp} > {dst}.{dp}: UDP, length {}",
                len.saturating_sub(8)
            )
        }
        (1, _) if !v6 => format!(
            "{src} > {dst}: ICMP {}, length {len}",
            icmp(l4.first(), false)
        ),
        (58, _) if v6 => format!(
            "{src} > {dst}: ICMP6, {}, length {len}",
            icmp(l4.first(), true)
        ),
        (p, _) => format!("{src} > {dst}: ip-proto-{p} {len}"),
    }
}

fn icmp(kind: Option<&u8>, v6: bool) -> String {
    let name = match (kind, v6) {
        (Some(8), false) | (Some(128), true) => "echo request",
        (Some(0), false) | (Some(129), true) => "echo reply",
        (Some(3), false) | (Some(1), true) => "unreachable",
        (Some(11), false) | (Some(3), true) => "time exceeded",
        (Some(133), true) => "router solicitation",
        (Some(134), true) => "router advertisement",
        (Some(135), true) => "neighbor solicitation",
        (Some(136), true) => "neighbor advertisement",
        (Some(143), true) => "multicast listener report v2",
        (Some(t), _) => return format!("type {t}"),
        (None, _) => "truncated",
    };
    name.into()
}

fn tcp_flags(f: u8) -> String {
    let names = [
        (0x02, 'S'),
        (0x01, 'F'),
        (0x04, 'R'),
        (0x08, 'P'),
        (0x10, '.'),
    ];
    let s: String = names
        .iter()
        .filter(|(b, _)| f & b != 0)
        .map(|(_, c)| *c)
        .collect();
    if s.is_empty() {
        "none".into()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::describe;

    fn frame(ethertype: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn an_echo_request_a_udp_datagram_and_an_arp_request_read_as_tcpdump_prints_them() {
        let mut ip = vec![
            0x45, 0, 0, 84, 0, 0, 0, 0, 64, 1, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        ip.extend_from_slice(&[8, 0, 0, 0]);
        assert_eq!(
            describe(&frame(0x0800, &ip)),
            "IP 10.0.0.1 > 10.0.0.2: ICMP echo request, length 64"
        );
        let mut udp = ip[..20].to_vec();
        udp[2..4].copy_from_slice(&40u16.to_be_bytes());
        udp[9] = 17;
        udp.extend_from_slice(&[0x13, 0x88, 0x00, 0x35, 0, 20, 0, 0]);
        assert_eq!(
            describe(&frame(0x0800, &udp)),
            "IP 10.0.0.1.5000 > 10.0.0.2.53: UDP, length 12"
        );
        let mut arp = vec![0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 0, 0, 1];
        arp.extend_from_slice(&[0, 0, 0, 0, 0, 0, 10, 0, 0, 2]);
        assert_eq!(
            describe(&frame(0x0806, &arp)),
            "ARP, Request who-has 10.0.0.2 tell 10.0.0.1"
        );
        assert_eq!(describe(&[1, 2, 3]), "truncated frame of 3 bytes");
    }
}

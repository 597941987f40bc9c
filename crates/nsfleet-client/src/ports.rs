//! Before a lab with published ports (containerlab's `ports`) is made: a kernel without
//! nf_tables is refused, and so is a host port that a program of the host listens on
//! already, naming the file's line and the listener, since the lab's rules would take
//! that program's connections away. Listeners are read from the host's socket tables
//! (`/proc/net/{tcp,udp}{,6}`); nothing is bound.

use anyhow::bail;
use nsfleet::topology::{Proto, PublishedPort, Topology};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

/// TCP's LISTEN state in `/proc/net/tcp`.
const TCP_LISTEN: &str = "0A";

/// Refuses, before anything exists, a published port the host listens on already.
pub fn check_free(file: &Path, topo: &Topology) -> anyhow::Result<()> {
    let ports: Vec<&PublishedPort> = (topo.groups.iter())
        .flat_map(|g| g.config.ports.iter())
        .collect();
    if ports.is_empty() {
        return Ok(());
    }
    if let Err(e) = nsfleet::subsys::ports::nf_tables_here() {
        bail!(
            "{}:{}: ports: this kernel has no nf_tables netlink ({e}), which publishes them (CONFIG_NF_TABLES, or the nf_tables module loaded)",
            file.display(),
            ports[0].at.line
        );
    }
    let listening = listeners();
    for p in ports {
        let taken = listening.iter().find(|(proto, addr, port)| {
            (*proto, *port) == (p.proto, p.host_port)
                && (p.host_addr.is_none() || addr.is_unspecified() || Some(*addr) == p.host_addr)
        });
        if let Some((_, addr, port)) = taken {
            let at = IpAddr::to_string(addr);
            let at = if addr.is_ipv6() {
                format!("[{at}]")
            } else {
                at
            };
            bail!(
                "{}:{}: ports: host port {}/{} is taken: the host listens on {at}:{port} already, and publishing it would take that program's connections away",
                file.display(),
                p.at.line,
                p.host_port,
                p.proto.name()
            );
        }
    }
    if std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward").is_ok_and(|v| v.trim() == "0") {
        eprintln!("note: published ports are reached from this host only: other machines need the host to forward (sysctl net.ipv4.ip_forward=1), which nsfleet does not change");
    }
    Ok(())
}

/// Every TCP socket listening and every UDP socket bound, in the host's namespace.
fn listeners() -> Vec<(Proto, IpAddr, u16)> {
    let mut out = Vec::new();
    for (file, proto) in [
        ("tcp", Proto::Tcp),
        ("tcp6", Proto::Tcp),
        ("udp", Proto::Udp),
        ("udp6", Proto::Udp),
    ] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/net/{file}")) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state)) = (cols.get(1), cols.get(3)) else {
                continue;
            };
            if proto == Proto::Tcp && *state != TCP_LISTEN {
                continue;
            }
            if let Some((addr, port)) = parse_local(local) {
                out.push((proto, addr, port));
            }
        }
    }
    out
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6): the kernel prints each
/// 32-bit word of the address in the host's byte order.
fn parse_local(s: &str) -> Option<(IpAddr, u16)> {
    let (addr, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Vec<u32> = (0..addr.len() / 8)
        .map(|i| u32::from_str_radix(&addr[i * 8..i * 8 + 8], 16))
        .collect::<Result<_, _>>()
        .ok()?;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
    let addr = match bytes.len() {
        4 => IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(bytes).ok()?)),
        16 => IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(bytes).ok()?)),
        _ => return None,
    };
    Some((addr, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_kernels_socket_tables() {
        // As a little-endian host prints them.
        if cfg!(target_endian = "little") {
            assert_eq!(
                parse_local("0100007F:1F90"),
                Some(("127.0.0.1".parse().unwrap(), 8080))
            );
            assert_eq!(
                parse_local("00000000000000000000000001000000:0035"),
                Some(("::1".parse().unwrap(), 53))
            );
        }
    }
}

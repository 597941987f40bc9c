//! `ports`: a node's ports published on the host, written as Docker writes them
//! (`[IP:]HOST:NODE[/PROTO]`, either port a range of the same length). containerlab
//! takes the first layer that sets `ports`, as it does here. Each port is published to
//! the node's management address (its `eth0`); the host's own connections leave
//! through the management network's host link.
//!
//! A port that Docker would choose (`:80`, `80`) is refused: nsfleet publishes only a
//! port the file names, so that the lab is reached where the file says. A host port
//! published twice in the file is refused at its second entry.

use super::Lab;
use crate::error::TopologyError;
use crate::{Proto, PublishedPort};
use std::net::IpAddr;
use std::ops::{Range, RangeInclusive};

/// The ports of one node's `ports` entries (`list`), each port its own entry.
pub(crate) fn read(
    lab: &Lab<'_>,
    list: &[(String, Range<usize>)],
    host_iface: &str,
) -> Result<Vec<PublishedPort>, TopologyError> {
    let mut out = Vec::new();
    for (spec, at) in list {
        let e = parse(spec).map_err(|m| lab.err(at.clone(), format!("ports: {spec:?}: {m}")))?;
        for (host_port, node_port) in e.pairs() {
            out.push(PublishedPort {
                proto: e.proto,
                host_addr: e.host_addr,
                host_port,
                node_port,
                iface: "eth0".into(),
                host_iface: host_iface.to_string(),
                at: lab.cx.place(at.clone()),
            });
        }
    }
    Ok(out)
}

/// Refuses a host port that two entries publish (on the same address or on all of the
/// host's), at the second: the `ports` of every node.
pub(crate) fn check_unique<'p>(
    lab: &Lab<'_>,
    all: impl Iterator<Item = &'p PublishedPort>,
) -> Result<(), TopologyError> {
    let mut seen: Vec<&PublishedPort> = Vec::new();
    for p in all {
        let clash = seen.iter().find(|q| {
            (q.proto, q.host_port) == (p.proto, p.host_port)
                && (q.host_addr.is_none() || p.host_addr.is_none() || q.host_addr == p.host_addr)
        });
        if let Some(q) = clash {
            let m = format!(
                "ports: host port {}/{} is published already, at line {}",
                p.host_port,
                p.proto.name(),
                q.at.line
            );
            return Err(TopologyError::new(lab.cx.file, p.at, m));
        }
        seen.push(p);
    }
    Ok(())
}

/// One entry of `ports`.
#[derive(Debug)]
struct Entry {
    host_addr: Option<IpAddr>,
    hosts: RangeInclusive<u16>,
    /// One port, or a range as long as `hosts`.
    nodes: RangeInclusive<u16>,
    proto: Proto,
}

impl Entry {
    /// (host port, node port) in order; one node port takes every host port of a range,
    /// as Docker maps them.
    fn pairs(&self) -> impl Iterator<Item = (u16, u16)> {
        self.hosts.clone().zip(self.nodes.clone().cycle())
    }
}

fn parse(spec: &str) -> Result<Entry, String> {
    let (ports, proto) = match spec.rsplit_once('/') {
        Some((p, "tcp")) => (p, Proto::Tcp),
        Some((p, "udp")) => (p, Proto::Udp),
        Some((_, "sctp")) => {
            return Err("sctp is not published (tcp and udp are)".into());
        }
        Some((_, other)) => return Err(format!("unknown protocol {other:?} (tcp or udp)")),
        None => (spec, Proto::Tcp),
    };
    let (addr, rest) = split_addr(ports)?;
    if addr.is_some_and(|a| a.is_loopback() && a.is_ipv6()) {
        return Err("the host's IPv6 loopback (::1) cannot reach a node: the kernel never routes it out of the host (publish on 127.0.0.1, or on all addresses)".into());
    }
    let Some((host, node)) = rest.rsplit_once(':') else {
        return Err(chosen());
    };
    if host.is_empty() {
        return Err(chosen());
    }
    let (hosts, nodes) = (range(host)?, range(node)?);
    let one = nodes.start() == nodes.end();
    if !one && hosts.len() != nodes.len() {
        return Err("the host's and the node's ranges differ in length".into());
    }
    Ok(Entry {
        host_addr: addr,
        hosts,
        nodes,
        proto,
    })
}

/// The host address in front (`IP:` or `[IPv6]:`), if any, and what follows it.
fn split_addr(s: &str) -> Result<(Option<IpAddr>, &str), String> {
    if let Some(v6) = s.strip_prefix('[') {
        let (a, rest) = v6.split_once("]:").ok_or("expected [IPv6]:HOST:NODE")?;
        let a = a
            .parse()
            .map_err(|_| format!("{a:?} is not an IPv6 address"))?;
        return Ok((Some(a), rest));
    }
    match s.matches(':').count() {
        2 => {
            let (a, rest) = s.split_once(':').unwrap();
            let a = a.parse().map_err(|_| format!("{a:?} is not an address"))?;
            Ok((Some(a), rest))
        }
        _ => Ok((None, s)),
    }
}

fn chosen() -> String {
    "give the host's port (HOST:NODE): Docker would choose one, nsfleet publishes the port the file names".into()
}

/// `80` or `8000-8010`: ports from 1 to 65535.
fn range(s: &str) -> Result<RangeInclusive<u16>, String> {
    let port = |p: &str| match p.parse::<u16>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{p:?} is not a port (1 to 65535)")),
    };
    match s.split_once('-') {
        Some((a, b)) => {
            let (a, b) = (port(a)?, port(b)?);
            if a > b {
                return Err(format!("{s:?}: the range ends before it starts"));
            }
            Ok(a..=b)
        }
        None => port(s).map(|p| p..=p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Read = (Option<IpAddr>, Vec<(u16, u16)>, Proto);

    fn pairs(spec: &str) -> Result<Read, String> {
        let e = parse(spec)?;
        Ok((e.host_addr, e.pairs().collect(), e.proto))
    }

    #[test]
    fn dockers_forms() {
        assert_eq!(
            pairs("8080:80").unwrap(),
            (None, vec![(8080, 80)], Proto::Tcp)
        );
        assert_eq!(
            pairs("127.0.0.1:5353:53/udp").unwrap(),
            (
                Some("127.0.0.1".parse().unwrap()),
                vec![(5353, 53)],
                Proto::Udp
            )
        );
        assert_eq!(
            pairs("[3fff::1]:2222:22").unwrap().0,
            Some("3fff::1".parse().unwrap())
        );
        assert!(pairs("[::1]:2222:22")
            .unwrap_err()
            .contains("IPv6 loopback"));
        assert_eq!(
            pairs("9000-9001:8000-8001").unwrap().1,
            vec![(9000, 8000), (9001, 8001)]
        );
        assert_eq!(
            pairs("9000-9001:80").unwrap().1,
            vec![(9000, 80), (9001, 80)]
        );
    }

    #[test]
    fn what_is_refused_says_why() {
        assert!(pairs("80").unwrap_err().contains("give the host's port"));
        assert!(pairs(":80").unwrap_err().contains("give the host's port"));
        assert!(pairs("80:70000").unwrap_err().contains("not a port"));
        assert!(pairs("80:80/sctp").unwrap_err().contains("sctp"));
        assert!(pairs("1-3:1-2").unwrap_err().contains("differ in length"));
        assert!(pairs("x.y:80:80").unwrap_err().contains("not an address"));
    }
}

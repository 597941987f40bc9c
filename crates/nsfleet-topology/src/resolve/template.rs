//! Templates: text in which `{name}`, `{i}`, `{fleet}`, `{addr.IF}` and `{addr6.IF}` are
//! replaced per node. Used for `commands`, `hostname`, file paths and file contents, of
//! written and generated nodes alike.
//!
//! Only `{` followed by a name and `}` is a placeholder, so that configuration languages
//! full of braces (BIRD's `protocol ospf { ... }`, a shell's `${VAR}`) pass through as
//! they are; `{{` and `}}` write a literal brace where one would be read as a placeholder.
//! Checking ([`check`]) happens at validation, expansion ([`expand`]) when a node starts.

use crate::{IpNet, NodeWiring};

/// What a node's templates may name.
pub struct Vars<'a> {
    pub name: &'a str,
    /// The number its name template gave it (`r{i}`); 1 for a written node.
    pub number: u64,
    pub fleet: &'a str,
    pub wiring: &'a NodeWiring,
}

/// One placeholder of a template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placeholder {
    Name,
    Number,
    Fleet,
    /// The first address of that family on an interface (`lo` for the loopback).
    Addr {
        v6: bool,
        iface: String,
    },
}

/// The placeholders of `text`, or the byte offset and description of the first bad one.
pub fn check(text: &str) -> Result<Vec<Placeholder>, (usize, String)> {
    let mut out = Vec::new();
    for piece in pieces(text) {
        if let Piece::Placeholder { at, name } = piece {
            let p = placeholder(name).ok_or_else(|| {
                (
                    at,
                    format!(
                        "unknown placeholder {{{name}}}: expected {{name}}, {{i}}, {{fleet}}, {{addr.IFACE}} or {{addr6.IFACE}} (write {{{{ for a literal brace)"
                    ),
                )
            })?;
            out.push(p);
        }
    }
    Ok(out)
}

/// A template that reads back as `text` exactly: braces doubled (for text that is not
/// nsfleet's, as a containerlab file's commands).
pub fn literal(text: &str) -> String {
    text.replace('{', "{{").replace('}', "}}")
}

/// `text` with every placeholder replaced for one node. A placeholder [`check`] accepted
/// but the node cannot fill (an interface without such an address) stays as written:
/// validation refuses that before any node exists (see [`missing`]).
pub fn expand(text: &str, vars: &Vars<'_>) -> String {
    if !text.contains(['{', '}']) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    for piece in pieces(text) {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Placeholder { name, .. } => match placeholder(name).and_then(|p| fill(&p, vars))
            {
                Some(v) => out.push_str(&v),
                None => {
                    out.push('{');
                    out.push_str(name);
                    out.push('}');
                }
            },
        }
    }
    out
}

/// The first placeholder of `used` that this node cannot fill, as a sentence.
pub fn missing(used: &[Placeholder], vars: &Vars<'_>) -> Option<String> {
    used.iter().find(|p| fill(p, vars).is_none()).map(|p| {
        let Placeholder::Addr { v6, iface } = p else {
            unreachable!("only addresses can be missing")
        };
        format!(
            "{{addr{}.{iface}}}: node {} has no IPv{} address on {iface:?}",
            if *v6 { "6" } else { "" },
            vars.name,
            if *v6 { 6 } else { 4 },
        )
    })
}

fn fill(p: &Placeholder, vars: &Vars<'_>) -> Option<String> {
    match p {
        Placeholder::Name => Some(vars.name.to_string()),
        Placeholder::Number => Some(vars.number.to_string()),
        Placeholder::Fleet => Some(vars.fleet.to_string()),
        Placeholder::Addr { v6, iface } => {
            let addrs: &[IpNet] = if iface == "lo" {
                &vars.wiring.loopback
            } else {
                &vars.wiring.iface(iface)?.addrs
            };
            let a = addrs.iter().find(|a| a.addr.is_ipv6() == *v6)?;
            Some(a.addr.to_string())
        }
    }
}

fn placeholder(name: &str) -> Option<Placeholder> {
    Some(match name {
        "name" => Placeholder::Name,
        "i" => Placeholder::Number,
        "fleet" => Placeholder::Fleet,
        _ => {
            let (family, iface) = name.split_once('.')?;
            let v6 = match family {
                "addr" => false,
                "addr6" => true,
                _ => return None,
            };
            if iface != "lo" {
                crate::check_ifname(iface).ok()?;
            }
            Placeholder::Addr {
                v6,
                iface: iface.to_string(),
            }
        }
    })
}

enum Piece<'a> {
    Text(&'a str),
    Placeholder { at: usize, name: &'a str },
}

/// Splits a template into literal text and placeholders: `{` then a letter or `_`, then
/// letters, digits, `_`, `.` or `-`, then `}`. `{{` and `}}` are one literal brace; `${`
/// is a shell's and stays literal.
fn pieces(text: &str) -> impl Iterator<Item = Piece<'_>> {
    let bytes = text.as_bytes();
    let mut pos = 0;
    std::iter::from_fn(move || {
        if pos >= bytes.len() {
            return None;
        }
        let start = pos;
        if bytes[pos..].starts_with(b"{{") || bytes[pos..].starts_with(b"}}") {
            pos += 2;
            return Some(Piece::Text(&text[start..start + 1]));
        }
        if bytes[pos] == b'{' && (pos == 0 || bytes[pos - 1] != b'$') {
            let name_len = bytes[pos + 1..]
                .iter()
                .take_while(|&&b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
                .count();
            let first_ok = bytes
                .get(pos + 1)
                .is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_');
            if first_ok && bytes.get(pos + 1 + name_len) == Some(&b'}') {
                pos += name_len + 2;
                return Some(Piece::Placeholder {
                    at: start,
                    name: &text[start + 1..start + 1 + name_len],
                });
            }
        }
        // Literal text up to the next brace that may start something.
        pos += 1;
        while pos < bytes.len() && !matches!(bytes[pos], b'{' | b'}') {
            pos += 1;
        }
        Some(Piece::Text(&text[start..pos]))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Iface;

    fn wiring() -> NodeWiring {
        NodeWiring {
            ifaces: vec![Iface {
                name: "eth0".into(),
                addrs: vec![
                    "10.0.0.1/30".parse().unwrap(),
                    "fd00::1/64".parse().unwrap(),
                ],
                ..Iface::default()
            }],
            loopback: vec!["10.255.0.7/32".parse().unwrap()],
            ..NodeWiring::default()
        }
    }

    fn vars<'a>(name: &'a str, number: u64, wiring: &'a NodeWiring) -> Vars<'a> {
        Vars {
            name,
            number,
            fleet: "lab",
            wiring,
        }
    }

    #[test]
    fn fills_every_placeholder_and_leaves_other_braces() {
        let w = wiring();
        let v = vars("r7", 7, &w);
        let t = "hostname {name} #{i} in {fleet}: {addr.eth0} {addr6.eth0} id {addr.lo}\nprotocol ospf { area 0 {\n}; } ${HOME} {{name}}";
        assert!(check(t).is_ok());
        assert_eq!(
            expand(t, &v),
            "hostname r7 #7 in lab: 10.0.0.1 fd00::1 id 10.255.0.7\nprotocol ospf { area 0 {\n}; } ${HOME} {name}"
        );
    }

    #[test]
    fn refuses_unknown_placeholders_with_their_offset() {
        let (at, msg) = check("echo {nmae}").unwrap_err();
        assert_eq!(at, 5);
        assert!(msg.contains("unknown placeholder {nmae}"), "{msg}");
        assert!(check("{addr.}").is_err());
        assert!(check("{addr4.eth0}").is_err());
    }

    #[test]
    fn says_which_address_a_node_lacks() {
        let w = wiring();
        let v = vars("r1", 1, &w);
        let used = check("{addr6.lo} {addr.eth0}").unwrap();
        let m = missing(&used, &v).unwrap();
        assert!(m.contains("no IPv6 address on \"lo\""), "{m}");
    }
}

//! FRR's rules for a containerlab node that runs the host's FRR: the daemons a `daemons`
//! file turns on, the daemons an FRR configuration needs from what it configures, and
//! FRR's configuration as nsfleet's `config` key takes it.
//!
//! This file only reads text it is given: whether a node runs FRR, and which files are
//! its configuration, is the node's conversion's ([`super::node`]). It never reads a
//! file, never names a daemon nsfleet's FRR kind does not know
//! ([`crate::kind::frr::DAEMONS`]), and never touches the kernel.

use crate::decl::{Spanned, Value};
use crate::kind::frr;

/// FRR's configuration (as the `config` key takes it) and the daemons it runs.
pub(super) type Frr = (Spanned<Value>, Vec<String>);

/// A file given by its text, as `config` takes it: `{ content = "..." }`.
pub(super) fn content(text: &str) -> Value {
    Value::Table([("content".to_string(), Value::Text(text.to_string()))].into())
}

/// The daemons an FRR `daemons` file turns on (`ospfd=yes`).
pub(super) fn daemons_enabled(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().split_once('='))
        .filter(|(d, v)| v.trim() == "yes" && frr::DAEMONS.contains(d))
        .map(|(d, _)| d.to_string())
        .collect()
}

/// The daemons an FRR configuration needs, from what it configures.
pub(super) fn daemons_configured(conf: &str) -> Vec<String> {
    const NEEDS: &[(&str, &str)] = &[
        ("router bgp", "bgpd"),
        ("router ospf6", "ospf6d"),
        ("ipv6 ospf6", "ospf6d"),
        ("router ospf", "ospfd"),
        ("ip ospf", "ospfd"),
        ("router isis", "isisd"),
        ("ip router isis", "isisd"),
        ("router ripng", "ripngd"),
        ("router rip", "ripd"),
        ("router eigrp", "eigrpd"),
        ("router babel", "babeld"),
        ("router openfabric", "fabricd"),
        ("mpls ldp", "ldpd"),
        ("bfd", "bfdd"),
        ("pbr-map", "pbrd"),
        ("vrrp", "vrrpd"),
        ("router pim", "pimd"),
        ("ip pim", "pimd"),
        ("ip nhrp", "nhrpd"),
        ("segment-routing", "pathd"),
    ];
    let mut out: Vec<String> = Vec::new();
    for line in conf.lines().map(str::trim) {
        for (starts, daemon) in NEEDS {
            let word_end =
                line.len() == starts.len() || line.as_bytes().get(starts.len()) == Some(&b' ');
            if line.starts_with(starts) && word_end && !out.iter().any(|d| d == daemon) {
                out.push(daemon.to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frr_daemons_from_configuration() {
        let conf = "router ospf\n ospf router-id 1.1.1.1\ninterface eth1\n ip ospf area 0\nrouter bgp 65001\n";
        assert_eq!(daemons_configured(conf), ["ospfd", "bgpd"]);
        assert_eq!(
            daemons_enabled("zebra=yes\nospfd=yes\nbgpd=no\nldpd=yes\n"),
            ["ospfd", "ldpd"]
        );
    }
}

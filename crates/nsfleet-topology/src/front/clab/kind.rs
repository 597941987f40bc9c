//! containerlab's kinds as nsfleet takes them: the kinds that need no container image
//! (`linux`, `frr`, `bridge`, `ovs-bridge`, `host`) and what each becomes, and the kinds
//! it refuses (a vendor's network OS image, or something nsfleet does not have, such as
//! a container engine), each refused naming the node and its line.
//!
//! This file only names kinds: what a node of each kind becomes is the node's
//! conversion's ([`super::node`]). It never accepts a kind it cannot run as the host's
//! own software, and never reads a file or touches the kernel.

use super::Lab;
use crate::error::TopologyError;
use std::ops::Range;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Linux,
    Frr,
    Bridge,
    /// A bridge of the fleet's Open vSwitch (containerlab's is one of the host's).
    OvsBridge,
    Host,
}

/// Kinds that need no container image, and what they become.
const OWN: &[(&str, Kind)] = &[
    ("linux", Kind::Linux),
    ("frr", Kind::Frr),
    ("bridge", Kind::Bridge),
    ("ovs-bridge", Kind::OvsBridge),
    ("host", Kind::Host),
];

/// containerlab's kinds that run a vendor's network OS image (or a VM in one).
const VENDOR: &[&str] = &[
    "srl",
    "nokia_srlinux",
    "ceos",
    "arista_ceos",
    "crpd",
    "juniper_crpd",
    "nokia_sros",
    "vr-sros",
    "vr-nokia_sros",
    "nokia_srsim",
    "xrd",
    "cisco_xrd",
    "cisco_xrd_vrouter",
    "c8000",
    "cisco_c8000",
    "cvx",
    "cumulus_cvx",
    "nvidia_cumulusvx",
    "cjunosevolved",
    "juniper_cjunosevolved",
    "juniper_csrx",
    "sonic-vs",
    "sonic-vm",
    "dell_sonic",
    "plvision_sonic",
    "keysight_ixia-c-one",
    "rare",
    "cisco_iol",
    "6wind_vsr",
    "arrcus_arcos",
    "checkpoint_cloudguard",
    "cisco_sdwan",
    "f5_bigip-ve",
    "fdio_vpp",
    "fortinet_fortigate",
    "generic_vm",
    "huawei_vrp",
    "ipinfusion_ocnos",
    "spirent_stc",
    "veesix_osvbng",
    "vyosnetworks_vyos",
    "cisco_csr1000v",
    "cisco_n9kv",
    "cisco_xrv",
    "cisco_xrv9k",
    "cisco_c8000v",
    "cisco_cat9kv",
    "cisco_ftdv",
    "cisco_asav",
    "cisco_vios",
    "juniper_vmx",
    "juniper_vqfx",
    "juniper_vsrx",
    "juniper_vjunosrouter",
    "juniper_vjunosswitch",
    "juniper_vjunosevolved",
    "arista_veos",
    "mikrotik_ros",
    "aruba_aoscx",
    "dell_ftosv",
    "paloalto_panos",
    "ciena_saos",
    "freebsd",
    "openbsd",
    "openwrt",
];

/// Kinds that need something nsfleet does not have.
const OTHER: &[(&str, &str)] = &[
    (
        "ext-container",
        "it attaches to a container that already runs under a container engine",
    ),
    ("k8s-kind", "it runs a Kubernetes cluster in containers"),
];

pub(super) fn resolve_kind(
    lab: &mut Lab<'_>,
    node: &str,
    kind: &str,
    at: Range<usize>,
) -> Result<Kind, TopologyError> {
    let lower = kind.to_ascii_lowercase();
    if let Some((_, k)) = OWN.iter().find(|(n, _)| *n == lower) {
        return Ok(*k);
    }
    let why = if VENDOR.contains(&lower.as_str()) {
        format!("kind {kind} needs its vendor's image (a network OS, or a VM in a container), and nsfleet runs no images")
    } else if let Some((_, why)) = OTHER.iter().find(|(n, _)| *n == lower) {
        format!("kind {kind}: {why}, and nsfleet has no container engine")
    } else {
        format!("unknown kind {kind:?}")
    };
    Err(lab.err(at, format!("node {node}: {why}; it runs the host's own software: kinds linux (FRR's image too), frr, bridge, host")))
}

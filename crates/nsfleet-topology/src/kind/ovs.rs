//! Open vSwitch switches (`[[switch]] kind = "ovs"`): what such a switch is, as data, and
//! what it needs of its node. An OVS switch is a switch node like any other (its ports
//! are the links' ends, named and placed by the plan), whose ports are not enslaved to a
//! Linux bridge but are ports of an Open vSwitch bridge of the switch's name.
//!
//! A fleet has one Open vSwitch, as a Mininet host has: one ovsdb-server and one
//! ovs-vswitchd, in a node of the fleet's own ([`HUB_NAME`], an [`OvsHub`]) with Open
//! vSwitch's folders private to it, so that nothing it does reaches, reads or depends on
//! an Open vSwitch the host may run. Every OVS switch lives in that node's namespace
//! (`NodeConfig::netns_of`): its ports are there, each switch's in an index range of its
//! own ([`index_base`]), and their names are one name space. The engine starts the
//! daemons and makes the bridges (nsfleet-subsys's `ovs.rs`); this file only validates
//! and describes.
//!
//! Nothing here may touch the host: what the switch needs installed is a [`HostNeed`].

use super::private;
use crate::HostNeed;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// An Open vSwitch bridge in place of a switch's Linux bridge.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OvsSwitch {
    /// The OpenFlow controllers the bridge connects to, as the host sees them (or as
    /// the fleet's node that has the address does).
    pub controllers: Vec<SocketAddr>,
    /// The OpenFlow versions it speaks (`OpenFlow13`); Open vSwitch's default when empty.
    pub protocols: Vec<String>,
    pub fail_mode: Option<FailMode>,
    pub datapath: Datapath,
    /// Its datapath id; Open vSwitch picks one when `None`.
    pub dpid: Option<u64>,
    /// OpenFlow port numbers the file gives ports, by port name; other ports are
    /// numbered in the file's order, each one more than the largest before it, as
    /// Mininet numbers them.
    pub port_numbers: Vec<(String, u16)>,
}

/// The fleet's Open vSwitch: the node that runs its ovsdb-server and ovs-vswitchd and
/// whose namespace holds every OVS switch's ports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OvsHub {
    /// Every controller of the fleet's switches, once each, sorted: the supervisor relays
    /// each into the hub's namespace (see nsfleet-subsys's `ovs.rs`).
    pub controllers: Vec<SocketAddr>,
    /// ovs-vswitchd runs its userspace datapath without TSO support (the file's
    /// `ovs_tso = false`): about 0.2 MB less a port, TCP across it in packets of the
    /// MTU. Fixed for the fleet's life: the daemon reads it once, at its start.
    #[serde(default)]
    pub without_tso: bool,
}

/// The name of the node that runs the fleet's Open vSwitch. A node of the file may not
/// have it while the fleet has an Open vSwitch switch.
pub const HUB_NAME: &str = "openvswitch";

/// OVS switches' ports take indexes from here up, each switch in a range of its own
/// ([`index_base`]): they share one namespace, where an index is one device.
pub const INDEX_BASE: i32 = 1 << 20;
/// The indexes of one switch's range: room for 8,192 ports.
pub const INDEX_SPAN: i32 = 1 << 14;
/// How many ranges there are.
pub const SLOTS: u32 = 1 << 16;

/// The slot a switch named `name` would like (a hash of its name, so that it stays the
/// same when the file changes around it); the plan takes the next free one on a clash.
pub fn preferred_slot(name: &str) -> u32 {
    (fnv1a(name) % u64::from(SLOTS)) as u32
}

/// The first index of slot `slot`'s range.
pub fn index_base(slot: u32) -> i32 {
    INDEX_BASE + slot as i32 * INDEX_SPAN
}

/// The first index of the range that `index` is in: `None` below the OVS ranges.
pub fn range_of(index: i32) -> Option<i32> {
    (index >= INDEX_BASE).then(|| INDEX_BASE + (index - INDEX_BASE) / INDEX_SPAN * INDEX_SPAN)
}

/// A switch's datapath id: the file's, or one made of its name. Every switch has one
/// known to nsfleet, so that a controller connection, which says its switch's datapath
/// id, is known to be that switch's. Made ones are `00ff` and 48 bits of a hash: no
/// small number a user would write.
pub fn dpid_of(name: &str, ovs: &OvsSwitch) -> u64 {
    ovs.dpid
        .unwrap_or(0x00ff_0000_0000_0000 | (fnv1a(name) & 0xffff_ffff_ffff))
}

fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// What the switch does while no controller is connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailMode {
    /// Keeps the controller's flows and adds none: traffic stops at what is not in them.
    Secure,
    /// Behaves as a learning switch.
    Standalone,
}

/// Where the switch's packets are forwarded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Datapath {
    /// The kernel's where the `openvswitch` module is, the userspace one otherwise.
    #[default]
    Auto,
    /// The kernel's `openvswitch` module (Open vSwitch's `system`).
    Kernel,
    /// ovs-vswitchd itself (Open vSwitch's `netdev`): no module needed.
    User,
}

pub const KINDS: &str = "\"bridge\" (a Linux bridge, the default) or \"ovs\" (Open vSwitch)";

/// The OpenFlow versions Open vSwitch knows, by the names its `protocols` column takes.
pub const PROTOCOLS: [&str; 6] = [
    "OpenFlow10",
    "OpenFlow11",
    "OpenFlow12",
    "OpenFlow13",
    "OpenFlow14",
    "OpenFlow15",
];

/// The port numbers OpenFlow leaves to ports (above them are its reserved ones).
pub const MAX_PORT_NUMBER: u16 = 0xfeff;

/// Open vSwitch's own folders, private to the fleet's Open vSwitch node (and seen from
/// its switches' `exec`): its database, sockets and logs never meet the host's.
pub const DIRS: [&str; 4] = [
    "/etc/openvswitch",
    "/run/openvswitch",
    "/var/log/openvswitch",
    "/var/lib/openvswitch",
];

/// The programs the engine runs for the fleet's Open vSwitch.
pub const PROGRAMS: [&str; 4] = ["ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl"];

/// `tcp:IP:PORT` (`tcp:[IPv6]:PORT`), Open vSwitch's form of an active controller.
pub fn parse_controller(s: &str) -> Result<SocketAddr, String> {
    let expected = "expected \"tcp:IP:PORT\" (\"tcp:[IPv6]:PORT\"), e.g. \"tcp:127.0.0.1:6653\"";
    let Some(rest) = s.strip_prefix("tcp:") else {
        let why = match s.split_once(':').map(|(k, _)| k) {
            Some("ssl") => "ssl: needs certificates, which nsfleet does not manage",
            Some("unix") => "unix: would name a socket in the switch's own folders",
            Some("ptcp" | "pssl" | "punix") => {
                "a passive target makes the switch wait for the controller"
            }
            _ => "not a controller target",
        };
        return Err(format!("controller {s:?}: {why}; {expected}"));
    };
    rest.parse()
        .map_err(|_| format!("controller {s:?}: {expected}"))
}

pub fn parse_protocol(s: &str) -> Result<String, String> {
    match PROTOCOLS.iter().find(|p| p.eq_ignore_ascii_case(s)) {
        Some(p) => Ok(p.to_string()),
        None => Err(format!(
            "protocol {s:?}: Open vSwitch knows {}",
            PROTOCOLS.join(", ")
        )),
    }
}

pub fn parse_fail_mode(s: &str) -> Result<FailMode, String> {
    match s {
        "secure" => Ok(FailMode::Secure),
        "standalone" => Ok(FailMode::Standalone),
        _ => Err(format!("fail_mode {s:?}: expected \"secure\" (without a controller, only its flows) or \"standalone\" (without a controller, a learning switch)")),
    }
}

pub fn parse_datapath(s: &str) -> Result<Datapath, String> {
    match s {
        "auto" => Ok(Datapath::Auto),
        "kernel" | "system" => Ok(Datapath::Kernel),
        "user" | "netdev" => Ok(Datapath::User),
        _ => Err(format!("datapath {s:?}: expected \"auto\" (the kernel's where its openvswitch module is), \"kernel\" or \"user\" (ovs-vswitchd's own, no module needed)")),
    }
}

/// A datapath id: up to 16 hex digits, not all zero.
pub fn parse_dpid(s: &str) -> Result<u64, String> {
    let digits = s.strip_prefix("0x").unwrap_or(s);
    match u64::from_str_radix(digits, 16) {
        Ok(0) => Err(format!("dpid {s:?}: a datapath id is not zero")),
        Ok(v) if digits.len() <= 16 => Ok(v),
        _ => Err(format!(
            "dpid {s:?}: expected up to 16 hex digits, e.g. \"0000000000000001\""
        )),
    }
}

pub fn check_port_number(n: i64) -> Result<u16, String> {
    match n {
        1..=0xfeff => Ok(n as u16),
        _ => Err(format!(
            "OpenFlow port number {n}: expected 1 to {MAX_PORT_NUMBER}"
        )),
    }
}

/// What an OVS switch needs installed, with what to say where Open vSwitch is not.
pub fn needs() -> Vec<(HostNeed, String)> {
    // One sentence for all: said once however many are missing.
    let why = format!("Open vSwitch switches (kind = \"ovs\", containerlab's ovs-bridge) need Open vSwitch ({}), which is not installed here: apt-get install openvswitch-switch", PROGRAMS.join(", "));
    (PROGRAMS.iter())
        .map(|p| (HostNeed::Program(p.to_string()), why.clone()))
        .collect()
}

/// The fleet's Open vSwitch node: Open vSwitch's folders its own, the controllers to
/// relay. No bridge of its own: the switches' bridges are made by their nodes.
pub fn hub_config(controllers: Vec<SocketAddr>, tso: bool) -> crate::NodeConfig {
    crate::NodeConfig {
        dirs: DIRS.iter().map(|d| private(d, None, 0o755)).collect(),
        ovs_hub: Some(OvsHub {
            controllers,
            without_tso: !tso,
        }),
        ..crate::NodeConfig::default()
    }
}

impl OvsSwitch {
    /// Each port's OpenFlow number, `ports` in the file's order: the file's number where
    /// it gives one, else one more than the largest so far (Mininet's rule). Errors name
    /// a number two ports would take.
    pub fn numbered<'a>(
        &self,
        ports: impl Iterator<Item = &'a str>,
    ) -> Result<Vec<(&'a str, u16)>, String> {
        let mut out: Vec<(&str, u16)> = Vec::new();
        let mut next = 1u16;
        for name in ports {
            let given = self.port_numbers.iter().find(|(p, _)| p == name);
            let n = given.map_or(next, |(_, n)| *n);
            if let Some((other, _)) = out.iter().find(|(_, m)| *m == n) {
                return Err(format!(
                    "OpenFlow port {n} would be both {other:?} and {name:?}: give one of them another number"
                ));
            }
            if n > MAX_PORT_NUMBER {
                return Err(format!(
                    "port {name:?} would be OpenFlow port {n}, above {MAX_PORT_NUMBER}"
                ));
            }
            next = next.max(n + 1);
            out.push((name, n));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controllers_are_active_tcp_targets() {
        assert_eq!(
            parse_controller("tcp:127.0.0.1:6653").unwrap(),
            "127.0.0.1:6653".parse().unwrap()
        );
        assert!(parse_controller("tcp:[::1]:6653").is_ok());
        let err = parse_controller("ssl:1.2.3.4:6653").unwrap_err();
        assert!(err.contains("certificates"), "{err}");
        assert!(parse_controller("tcp:1.2.3:6653").is_err());
        assert!(parse_controller("ptcp:6653")
            .unwrap_err()
            .contains("passive"));
    }

    #[test]
    fn ports_are_numbered_as_mininet_numbers_them() {
        let sw = OvsSwitch {
            port_numbers: vec![("p5".into(), 9)],
            ..OvsSwitch::default()
        };
        let ports = ["p1", "p2", "p3", "p4", "p5", "p6"];
        let got = sw.numbered(ports.into_iter()).unwrap();
        let numbers: Vec<u16> = got.iter().map(|(_, n)| *n).collect();
        assert_eq!(numbers, [1, 2, 3, 4, 9, 10]);
        let clash = OvsSwitch {
            port_numbers: vec![("p3".into(), 1)],
            ..OvsSwitch::default()
        };
        let err = clash.numbered(ports.into_iter()).unwrap_err();
        assert!(err.contains("\"p1\" and \"p3\""), "{err}");
    }

    #[test]
    fn every_switch_has_a_datapath_id_the_file_s_or_one_of_its_name() {
        let given = OvsSwitch {
            dpid: Some(7),
            ..OvsSwitch::default()
        };
        assert_eq!(dpid_of("s1", &given), 7);
        let made = dpid_of("s1", &OvsSwitch::default());
        assert_eq!(
            made,
            dpid_of("s1", &OvsSwitch::default()),
            "the same each time"
        );
        assert_ne!(made, dpid_of("s2", &OvsSwitch::default()));
        assert_eq!(made >> 48, 0x00ff, "no number a user would write");
    }

    #[test]
    fn index_ranges_are_disjoint_and_found_from_any_of_their_indexes() {
        let base = index_base(3);
        assert_eq!(range_of(base), Some(base));
        assert_eq!(range_of(base + INDEX_SPAN - 1), Some(base));
        assert_eq!(range_of(base + INDEX_SPAN), Some(index_base(4)));
        assert_eq!(range_of(1000), None);
        assert!(index_base(SLOTS - 1).checked_add(INDEX_SPAN).is_some());
    }

    #[test]
    fn protocols_and_dpids() {
        assert_eq!(parse_protocol("openflow13").unwrap(), "OpenFlow13");
        assert!(parse_protocol("OpenFlow16")
            .unwrap_err()
            .contains("OpenFlow15"));
        assert_eq!(parse_dpid("0000000000000001").unwrap(), 1);
        assert!(parse_dpid("00000000000000001").is_err());
        assert!(parse_dpid("0").is_err());
    }
}

//! Switches: a switch node's bridges and its ports on them. The kernel caps a bridge at
//! 1,024 ports (BR_MAX_PORTS), so a switch with more gets several bridges, chained by veth
//! pairs inside it; every interface of a switch is a port of one of them. Ports are links
//! of the other kinds (a veth end, a VXLAN device); this file says which bridge each goes
//! on and what the bridges' devices are numbered.

/// Ports per bridge: 1,024 less two for the veths that chain bridges, rounded down.
pub const PORTS_PER_BRIDGE: usize = 1000;

const BRIDGE_BASE: i32 = 1 << 24;
const JOIN_BASE: i32 = (1 << 24) + (1 << 16);

/// The interface index of bridge `k` (`br{k}`) of a switch node.
pub fn bridge_index(k: u16) -> i32 {
    BRIDGE_BASE + k as i32
}

/// The indexes of the veth pair joining bridge `k` to bridge `k + 1`.
pub fn join_indices(k: u16) -> (i32, i32) {
    (JOIN_BASE + 2 * k as i32, JOIN_BASE + 2 * k as i32 + 1)
}

/// The bridge that a switch's `pos`-th interface is a port of.
pub fn bridge_of_port(pos: usize) -> u16 {
    (pos / PORTS_PER_BRIDGE) as u16
}

/// How many bridges a switch with `ports` interfaces needs (at least one).
pub fn bridges_for(ports: usize) -> u16 {
    ports.div_ceil(PORTS_PER_BRIDGE).max(1) as u16
}

/// The name a switch's `pos`-th port gets when the file names none.
pub fn port_name(pos: usize) -> String {
    format!("p{}", pos + 1)
}

/// Whether a port may take `name`: `br0`, `br1`, ... are the switch's bridges.
pub fn check_port_name(name: &str) -> Result<(), String> {
    let digits = name.strip_prefix("br").unwrap_or("");
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "interface name {name:?}: br0, br1, ... are the switch's bridges"
        ));
    }
    Ok(())
}

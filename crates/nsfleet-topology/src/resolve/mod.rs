//! The resolver: what every front-end's declarations go through to become a [`Draft`]
//! and then a `Topology`. [`draft`] gathers the node groups (names unique, counts
//! bounded); [`config`] builds each node's configuration from its layers (defaults,
//! group, node) and kind; [`template`] fills per-node placeholders; [`generate`] lays out
//! `[[generate]]` shapes; [`plan`] gives every interface its name, index and addresses,
//! and the link kinds (`link/`) put their interfaces through it. [`finish`] is the end
//! of every front-end's reading.
//!
//! Front-ends (`front/`) call the resolver; the resolver never imports a front-end, so a
//! new format is a front-end of its own and nothing here changes. It never touches the
//! kernel; what the machine offers comes in as a `KernelCaps` value at [`Draft::check`].

pub(crate) mod config;
pub(crate) mod draft;
pub(crate) mod generate;
pub(crate) mod plan;
pub mod template;

use crate::error::{Ctx, TopologyError};
use crate::{NodeGroup, NodeWiring, Topology};
use draft::{Draft, Groups};
use plan::Plan;
use std::collections::HashMap;
use std::sync::Arc;

/// The end of every front-end's reading of fleet `name`: the plan's wiring given to the
/// groups (with the shards of big switches added), every node's configuration checked
/// against its wiring, the MACs on each switch checked, and the draft made. `add` gives
/// the groups what their front-end alone knows once the wiring exists (containerlab's
/// `CLAB_INTFS`).
pub(crate) fn finish(
    name: &str,
    mut groups: Groups,
    plan: Plan,
    cx: Ctx<'_>,
    mut warnings: Vec<TopologyError>,
    add: impl FnOnce(&mut [NodeGroup], &[Arc<NodeWiring>]),
) -> Result<Draft, TopologyError> {
    warnings.append(&mut groups.warnings);
    let wiring = groups.finish(plan);
    add(&mut groups.list, &wiring);
    config::check_nodes(name, groups.list.iter().zip(&groups.templates), &wiring)?;
    check_macs(&cx, &wiring)?;
    let topo = Topology {
        name: name.to_string(),
        groups: std::mem::take(&mut groups.list),
        wiring,
    };
    Ok(Draft::new(topo, groups, cx, warnings))
}

/// Two interfaces with one MAC address on one switch would have its bridge send one's
/// frames to the other (and the kernel refuses a second macvlan of one MAC on a lower):
/// refused, at the second. A switch makes its ports, so each port knows both its own MAC
/// and its far end's.
fn check_macs(cx: &Ctx<'_>, wiring: &[Arc<NodeWiring>]) -> Result<(), TopologyError> {
    for w in wiring
        .iter()
        .filter(|w| w.ifaces.iter().any(|i| i.bridge.is_some()) || !w.macvlans.is_empty())
    {
        let mut seen: HashMap<[u8; 6], u32> = HashMap::new();
        let ends = (w.ifaces.iter())
            .map(|i| ([i.mac, i.link.as_veth().and_then(|p| p.mac)], i.at))
            .chain(w.macvlans.iter().map(|p| ([p.peer.mac, None], p.at)));
        for (macs, at) in ends {
            for mac in macs.into_iter().flatten() {
                if let Some(first) = seen.insert(mac, at.line) {
                    let m = nsfleet_values::format_mac(&mac);
                    return Err(TopologyError::new(cx.file, at, format!(
                        "MAC address {m} is already on this switch (line {first}); each interface on a switch needs its own"
                    )));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The resolver's checks are every front-end's: one MAC twice on a switch is refused
    /// in a containerlab file too, at the second end.
    #[test]
    fn a_mac_twice_on_a_bridge_is_refused_in_a_containerlab_file() {
        let end = |node: &str, iface: &str, mac: &str| {
            format!("        - {{node: {node}, interface: {iface}, mac: \"{mac}\"}}\n")
        };
        let link = |node: &str, port: &str| {
            format!(
                "    - type: veth\n      endpoints:\n{}        - {{node: br1, interface: {port}}}\n",
                end(node, "eth1", "02:00:00:00:00:01")
            )
        };
        let text = format!(
            "name: m\ntopology:\n  nodes:\n    br1: {{kind: bridge}}\n    a: {{kind: linux}}\n    b: {{kind: linux}}\n  links:\n{}{}",
            link("a", "p1"),
            link("b", "p2")
        );
        let e = crate::clab::read("m.clab.yml", &text).unwrap_err();
        assert!(
            e.message
                .contains("MAC address 02:00:00:00:00:01 is already on this switch"),
            "{e}"
        );
        assert_eq!(e.at.line, 12, "{e}");
    }
}

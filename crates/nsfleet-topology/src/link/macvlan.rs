//! Macvlan ports: a switch declared with `ports = "macvlan"` gives each node linked to it
//! a macvlan (bridge mode) instead of a veth pair whose near end joins the switch's bridge.
//!
//! Why: a veth port is three kernel objects per node on the switch (two devices, each with
//! its sysctl tables and sysfs directory, and a bridge port), a macvlan one device. What
//! the switch gives up is a device of its own per port: nothing to capture, count or impair
//! on the switch's side (the node's end has all of that), and a port takes only frames for
//! the node's own MAC, so a node behind one cannot bridge further.
//!
//! The switch makes each macvlan and places it in the node's namespace in the same
//! request, as it makes a veth pair; the node brings its end up, as it does a veth's far
//! end ([`Link::FarEnd`](crate::Link::FarEnd)). The macvlans are never sharded (see `bridge.rs`): they all stay
//! in the switch's own namespace, whose tables do not grow with them (a macvlan's link
//! to its lower is reported in the node's namespace, not the switch's). They hang from
//! lower devices of [`MACVLANS_PER_LOWER`] each, each lower one end of a veth pair whose
//! other end is a port of the switch's bridge, which joins them (and the switch's veth
//! ports, trunks and VXLAN ports) into one broadcast domain. Why not one lower:
//! a broadcast is copied to every sibling on its lower at once, on the sending CPU,
//! into its backlog (`netdev_max_backlog`, often 1,000 to 5,000): 10,000 siblings
//! overflow it. Why not the bridge itself as the lower: a macvlan takes its carrier from
//! its lower, and a bridge's carrier follows its ports. Why not shards of their own
//! joined by trunks: a new macvlan queues a link-watch event the kernel works through
//! 100 a second, and a trunk forwards only once the link watch has seen it: behind
//! 2,500 macvlans, trunks were not forwarding 16 s after `up`. A lower pair is brought
//! up so that neither end needs the link watch (nsfleet-subsys's `link/macvlan.rs`).

use crate::decl::EndDecl;
use crate::resolve::plan::Plan;
use crate::{MacvlanPort, Ports};

/// Macvlans per lower device: a broadcast's copies to its siblings stay within a CPU's
/// backlog.
pub const MACVLANS_PER_LOWER: usize = 1000;

/// Interface indexes of the lower pairs: below the bridges', far above the ports'.
const LOWER_BASE: i32 = 1 << 23;

/// Lower device `k` of a switch's macvlans: (name, interface index).
pub fn lower(k: u16) -> (String, i32) {
    (format!("br-mvl{k}"), LOWER_BASE + 2 * k as i32)
}

/// The other end of lower `k`'s pair, a port of the switch's bridge.
pub fn lower_port(k: u16) -> (String, i32) {
    (format!("br-mvp{k}"), LOWER_BASE + 2 * k as i32 + 1)
}

impl Plan {
    /// A link from switch `si`, whose ports are macvlans, to node `ni`: the node's end
    /// is the macvlan; the switch's end only names the port, and may set nothing of a
    /// device (it has none).
    pub(crate) fn add_macvlan_port(
        &mut self,
        (si, sw): (u32, &EndDecl),
        (ni, node): (u32, &EndDecl),
        at: crate::Place,
    ) -> Result<(), String> {
        if !sw.addrs.is_empty() || sw.mac.is_some() || sw.mtu.is_some() || sw.impair.is_some() {
            return Err(format!(
                "switch {:?} has macvlan ports, which have no device on the switch's side: set addresses, mac, mtu or impair on {:?}'s end",
                sw.node, node.node
            ));
        }
        if node.mtu.is_some_and(|m| m > 1500) {
            return Err(format!(
                "{}: mtu {}: a macvlan's MTU is at most its lower device's, 1500",
                node.node,
                node.mtu.unwrap_or_default()
            ));
        }
        let peer = self.push_far_end(ni, node, at)?;
        let name = self.name_switch_port(si, sw)?;
        let ports = &mut self.wiring_mut(si).macvlans;
        let lower = (ports.len() / MACVLANS_PER_LOWER) as u16;
        ports.push(MacvlanPort {
            name,
            lower,
            peer,
            at,
        });
        Ok(())
    }

    /// Whether switch `i`'s links to nodes are macvlans.
    pub(crate) fn macvlan_ports(&self, i: u32) -> bool {
        self.switch_ports(i) == Ports::Macvlan
    }
}

#[cfg(test)]
mod tests {
    use crate::reshape::tests::nodes;
    use crate::Link;

    #[test]
    fn macvlans_stay_on_the_switch_on_lowers_of_a_thousand_and_veth_ports_are_not_sharded_by_them()
    {
        let text = "[fleet]\nname = \"x\"\n[[generate]]\nkind = \"fake-routers\"\ncount = 2001\nports = \"macvlan\"\n[[switch]]\nname = \"edge\"\n[[link]]\na = \"lan\"\nb = \"edge\"\n";
        let nodes = nodes(text);
        assert_eq!(nodes.len(), 2003, "no shard");
        let lan = nodes.iter().find(|n| n.name == "lan").unwrap();
        let ports = &lan.wiring.macvlans;
        assert_eq!(ports.len(), 2001);
        assert_eq!(
            (ports[0].lower, ports[999].lower, ports[1000].lower),
            (0, 0, 1)
        );
        assert_eq!((ports[2000].name.as_str(), ports[2000].lower), ("p2001", 2));
        assert_eq!(
            (ports[0].peer.node.as_str(), ports[0].peer.name.as_str()),
            ("r1", "eth0")
        );
        // The link to `edge` is a veth port of lan's bridge, numbered after the macvlans.
        let veth = &lan.wiring.ifaces;
        assert_eq!(veth.len(), 1);
        assert_eq!(veth[0].name, "p2002");
        assert!(veth[0].link.as_veth().is_some() && veth[0].bridge == Some(0));
        let r1 = nodes.iter().find(|n| n.name == "r1").unwrap();
        assert_eq!(r1.wiring.ifaces[0].link, Link::FarEnd);
        assert_eq!(r1.wiring.ifaces[0].index, ports[0].peer.index);
    }
}

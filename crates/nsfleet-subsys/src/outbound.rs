//! A user's fleet's outbound traffic: its nodes' connections to the world, through
//! `pasta`. A user's fleet lives in a network namespace of its own (nsfleet-client's
//! `user`), where its management network ends; `pasta`, run by the fleet's forwarder in
//! the host's namespaces, gives that namespace an interface ([`IFACE`]) that carries its
//! packets out as the user's own connections, as rootless podman's containers reach the
//! world. Here, the fleet's side of it: the namespace forwards, and what leaves through
//! [`IFACE`] leaves with its address (masqueraded), which pasta answers for.
//!
//! Only for a user's fleet: root's fleets leave the host's forwarding and NAT to the
//! host's own configuration, which nsfleet never touches.

use crate::ports::{commit, FAMILY, SRCNAT};
use anyhow::anyhow;
use nsfleet_netlink::nft::{self, Expr, Hook, MetaKey, Reg};
use nsfleet_netlink::NlSocket;

/// The interface pasta makes in the fleet's namespace.
pub const IFACE: &str = "nsfleet-out";

/// The table of the rule, owned by the socket [`masquerade`] returns.
const TABLE: &str = "nsfleet-outbound";

/// Forwarding on in this thread's network namespace (the fleet's), and what leaves
/// through [`IFACE`] masqueraded. The rule lasts as long as the returned socket.
pub fn masquerade() -> anyhow::Result<NlSocket> {
    std::fs::write("/proc/sys/net/ipv4/ip_forward", "1")
        .map_err(|e| anyhow!("forwarding in the fleet's namespace: {e}"))?;
    let mut sock = NlSocket::open_protocol(nft::NETLINK_NETFILTER)?;
    let rule = [
        Expr::Meta(MetaKey::OifName, Reg::R1),
        Expr::CmpEq(Reg::R1, nft::ifname_bytes(IFACE)),
        Expr::Masquerade,
    ];
    commit(&mut sock, |b, seq| {
        nft::new_owned_table(b, seq(), FAMILY, TABLE);
        nft::new_nat_chain(
            b,
            seq(),
            FAMILY,
            TABLE,
            "postrouting",
            Hook::Postrouting,
            SRCNAT,
        );
        nft::new_rule(b, seq(), FAMILY, TABLE, "postrouting", &rule);
    })
    .map_err(|e| anyhow!("masquerading what leaves through {IFACE}: {e}"))?;
    Ok(sock)
}

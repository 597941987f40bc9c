//! The kinds of link a fleet is wired with, one file each: [`veth`] (a pair between two
//! nodes), [`host`] (a pair from a node to the host's namespace), [`bridge`] (a switch's
//! bridges and the ports on them), [`macvlan`] (a node's interface on a switch that has no
//! device of the switch's own) and [`vxlan`] (a tunnel endpoint to a far address, for
//! fleets that span hosts) and [`dummy`] (an interface with nothing behind it).
//!
//! Each file owns its kind's part of the topology: the file's syntax (parse) and the
//! interfaces it puts on nodes (plan, through [`Plan`](crate::resolve::plan::Plan)'s bookkeeping
//! of names, indexes and addresses). Each kind's other half, making the interfaces in the
//! kernel (wire), is the file of the same name in nsfleet-subsys's `link/`: this crate
//! never touches the kernel. A new kind is a variant of [`Link`] and a file here and there.

pub mod bridge;
pub mod dummy;
pub mod host;
pub mod macvlan;
pub mod veth;
pub mod vxlan;

use crate::decl::{mtu, value, EndDecl, Spanned};
use crate::error::Ctx;
use crate::{IpNet, TopologyError};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// A device on one node, as a `[[vxlan]]` or `[[dummy]]` table writes it: `at =
/// "node:iface"` (`like` shows one), its addresses and MTU.
pub(crate) fn device_end(
    cx: &Ctx<'_>,
    at: &Spanned<String>,
    addrs: &[Spanned<String>],
    mtu_of: Option<&Spanned<i64>>,
    like: &str,
) -> Result<EndDecl, TopologyError> {
    let Some((node, iface)) = at.get_ref().split_once(':') else {
        return Err(cx.err(
            at.span(),
            format!(
                "expected \"node:iface\", like \"{like}\", got {:?}",
                at.get_ref()
            ),
        ));
    };
    Ok(EndDecl {
        node: node.to_string(),
        iface: Some(iface.to_string()),
        addrs: (addrs.iter())
            .map(|a| value(cx, a, str::parse::<IpNet>))
            .collect::<Result<_, _>>()?,
        mtu: mtu_of.map(|m| mtu(cx, m)).transpose()?,
        ..EndDecl::default()
    })
}

/// What makes an interface of a node, by kind of link.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub enum Link {
    /// One end of a veth pair to another node, made from this node's side.
    Veth(Peer),
    /// An interface its peer made and placed here (a veth pair's far end, or a macvlan a
    /// switch made on its bridge); this node brings it up.
    #[default]
    FarEnd,
    /// A veth pair to the host's namespace (management), made from this node's side.
    Host(HostEnd),
    /// A VXLAN device: an overlay link to a far tunnel endpoint.
    Vxlan(VxlanEnd),
    /// A dummy device: addresses on an interface that leads nowhere.
    Dummy,
}

/// The far end of a link a node makes in another node: a veth pair's, or a macvlan's.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub struct Peer {
    pub node: String,
    pub name: String,
    pub index: i32,
    pub mtu: Option<u32>,
    pub mac: Option<[u8; 6]>,
}

/// The host's end of a host link: its name and addresses there. Its index is the host's
/// to choose: nsfleet does not own the host's index space.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct HostEnd {
    pub name: String,
    pub addrs: Vec<IpNet>,
    pub mtu: Option<u32>,
    /// The host end of a lab's management network (containerlab's): in a user's fleet,
    /// where the host's namespace is not the fleet's to reach, it ends in the fleet's own
    /// namespace instead; any other host link is refused there.
    #[serde(default)]
    pub management: bool,
}

/// A VXLAN tunnel endpoint: its network identifier, the far endpoint, and the underlay.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct VxlanEnd {
    pub vni: u32,
    pub remote: IpAddr,
    pub local: Option<IpAddr>,
    pub port: u16,
    /// The index of the node's interface the tunnel's packets leave by.
    pub underlay: Option<i32>,
    /// Made from the host's namespace (containerlab's `type: vxlan`): the tunnel's packets
    /// leave through the host, to a machine elsewhere, and the device is the node's.
    #[serde(default)]
    pub through_host: Option<HostUnderlay>,
}

/// A tunnel's underlay in the host's namespace: its packets go out as the host routes
/// them, or by `parent`, an interface of the host's.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct HostUnderlay {
    pub parent: Option<String>,
}

impl Link {
    /// The far end, if this end makes a veth pair to another node.
    pub fn as_veth(&self) -> Option<&Peer> {
        match self {
            Link::Veth(p) => Some(p),
            _ => None,
        }
    }

    /// The host's end, if this is a host link.
    pub fn as_host(&self) -> Option<&HostEnd> {
        match self {
            Link::Host(h) => Some(h),
            _ => None,
        }
    }

    /// The kind of device this end is, if a kernel may lack it (built without its
    /// module): the kernel is asked before anything is made.
    pub fn optional_device(&self) -> Option<&'static str> {
        match self {
            Link::Dummy => Some("dummy"),
            _ => None,
        }
    }

    /// The tunnel's settings, if this is a VXLAN device.
    pub fn as_vxlan(&self) -> Option<&VxlanEnd> {
        match self {
            Link::Vxlan(v) => Some(v),
            _ => None,
        }
    }
}

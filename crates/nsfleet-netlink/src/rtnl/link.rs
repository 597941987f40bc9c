//! Links (RTM_*LINK): veth pairs, bridges, macvlans, VXLAN and dummy devices, masters, flags and per-device
//! IPv4 settings.

use crate::msg::{self, Batch, Message, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL};

pub const RTM_NEWLINK: u16 = 16;
pub const RTM_DELLINK: u16 = 17;
pub const RTM_GETLINK: u16 = 18;

const IFLA_ADDRESS: u16 = 1;
const IFLA_IFNAME: u16 = 3;
const IFLA_MTU: u16 = 4;
const IFLA_MASTER: u16 = 10;
const IFLA_OPERSTATE: u16 = 16;
const IFLA_STATS64: u16 = 23;
const IFLA_CARRIER: u16 = 33;
const IFLA_LINKINFO: u16 = 18;
const IFLA_IFALIAS: u16 = 20;
const IFLA_LINK: u16 = 5;
const IFLA_AF_SPEC: u16 = 26;
const IFLA_NET_NS_FD: u16 = 28;
const IFLA_EXT_MASK: u16 = 29;
const RTEXT_FILTER_SKIP_STATS: u32 = 1 << 3;
const IFLA_INFO_KIND: u16 = 1;
const IFLA_INFO_DATA: u16 = 2;
const VETH_INFO_PEER: u16 = 1;
const IFLA_BR_MCAST_SNOOPING: u16 = 23;
const IFLA_BR_MCAST_QUERIER: u16 = 25;
const IFLA_BR_MCAST_QUERY_RESPONSE_INTVL: u16 = 34;
const IFLA_MACVLAN_MODE: u16 = 1;
const MACVLAN_MODE_BRIDGE: u32 = 4;
const IFLA_VXLAN_ID: u16 = 1;
const IFLA_VXLAN_GROUP: u16 = 2;
const IFLA_VXLAN_LINK: u16 = 3;
const IFLA_VXLAN_LOCAL: u16 = 4;
const IFLA_VXLAN_PORT: u16 = 15;
const IFLA_VXLAN_GROUP6: u16 = 16;
const IFLA_VXLAN_LOCAL6: u16 = 17;
const IFLA_INET_CONF: u16 = 1;
const IFLA_INET6_ADDR_GEN_MODE: u16 = 8;
const IN6_ADDR_GEN_MODE_NONE: u8 = 1;
const IPV4_DEVCONF_FORWARDING: u16 = 1;
const IPV4_DEVCONF_ROUTE_LOCALNET: u16 = 26;

pub const IFF_UP: u32 = libc::IFF_UP as u32;

/// One end of a link being created: everything the kernel can set in the creating request.
#[derive(Clone, Copy, Debug, Default)]
pub struct LinkSpec<'a> {
    pub name: &'a str,
    /// The interface index to take; 0 lets the kernel choose. A chosen index spares a
    /// lookup before every later request about the link.
    pub index: i32,
    pub up: bool,
    pub mtu: Option<u32>,
    pub mac: Option<[u8; 6]>,
    /// Enslave to this bridge at creation (the creating namespace's end only).
    pub master: Option<i32>,
    /// Create the link in the namespace behind this descriptor instead of the socket's.
    pub netns_fd: Option<i32>,
    pub alias: Option<&'a str>,
}

/// struct ifinfomsg: which link, and which flags to change.
fn ifinfomsg(index: i32, flags: u32, change: u32) -> [u8; 16] {
    let mut h = [0u8; 16];
    h[0] = libc::AF_UNSPEC as u8;
    h[4..8].copy_from_slice(&index.to_ne_bytes());
    h[8..12].copy_from_slice(&flags.to_ne_bytes());
    h[12..16].copy_from_slice(&change.to_ne_bytes());
    h
}

fn spec_header(s: &LinkSpec<'_>) -> [u8; 16] {
    ifinfomsg(s.index, if s.up { IFF_UP } else { 0 }, IFF_UP)
}

fn spec_attrs(b: &mut Batch, s: &LinkSpec<'_>) {
    b.attr_str(IFLA_IFNAME, s.name);
    if let Some(mtu) = s.mtu {
        b.attr_u32(IFLA_MTU, mtu);
    }
    if let Some(mac) = s.mac {
        b.attr(IFLA_ADDRESS, &mac);
    }
    if let Some(m) = s.master {
        b.attr_u32(IFLA_MASTER, m as u32);
    }
    if let Some(fd) = s.netns_fd {
        b.attr_u32(IFLA_NET_NS_FD, fd as u32);
    }
    if let Some(a) = s.alias {
        b.attr(IFLA_IFALIAS, a.as_bytes());
    }
}

/// Begins the request that creates the device `spec` describes, of `kind`, on `lower` if
/// it has one (IFLA_LINK), up to the IFLA_LINKINFO nest with the kind in it: returns the
/// nest's mark, for the kind's own data to go in before it is closed.
fn new_link(b: &mut Batch, seq: u32, spec: &LinkSpec<'_>, lower: Option<i32>, kind: &str) -> usize {
    b.begin(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, seq)
        .header(&spec_header(spec));
    spec_attrs(b, spec);
    if let Some(lower) = lower {
        b.attr_i32(IFLA_LINK, lower);
    }
    let info = b.nest_begin(IFLA_LINKINFO);
    b.attr_str(IFLA_INFO_KIND, kind);
    info
}

/// A veth pair in one request: `local` in the socket's namespace (or `local.netns_fd`'s),
/// `peer` wherever its `netns_fd` says. Both ends get their name, index, MTU and MAC right
/// away: no create-then-move-then-rename. Only `local` can take a master and come up: the
/// kernel configures the peer before the pair is joined, and a veth end cannot open
/// without its pair (ENOTCONN), so the peer is brought up later from its own namespace.
pub fn new_veth(b: &mut Batch, seq: u32, local: &LinkSpec<'_>, peer: &LinkSpec<'_>) {
    debug_assert!(
        peer.master.is_none(),
        "the kernel ignores a veth peer's master"
    );
    let peer = &LinkSpec { up: false, ..*peer };
    let info = new_link(b, seq, local, None, "veth");
    let data = b.nest_begin(IFLA_INFO_DATA);
    // The peer is an ifinfomsg followed by link attributes, not a plain nest.
    let p = b.open_attr(VETH_INFO_PEER);
    b.header(&spec_header(peer));
    spec_attrs(b, peer);
    b.nest_end(p).nest_end(data).nest_end(info).end();
}

/// Multicast snooping on a bridge: it learns which ports joined which group from their
/// IGMP and MLD reports and, once a querier exists on the segment (see
/// [`bridge_querier`]), sends a group's traffic only to its members and to routers.
pub struct Snooping {
    /// How long the bridge waits for answers to its queries, in centiseconds (clock_t):
    /// also how long it waits before it trusts a querier of its own, flooding meanwhile.
    pub query_response_interval_cs: u64,
}

/// A Linux bridge (STP off, the kernel's default); without `snooping`, it floods
/// multicast to every port.
pub fn new_bridge(b: &mut Batch, seq: u32, spec: &LinkSpec<'_>, snooping: Option<&Snooping>) {
    let info = new_link(b, seq, spec, None, "bridge");
    let data = b.nest_begin(IFLA_INFO_DATA);
    b.attr(IFLA_BR_MCAST_SNOOPING, &[snooping.is_some() as u8]);
    if let Some(s) = snooping {
        let interval = s.query_response_interval_cs.to_ne_bytes();
        b.attr(IFLA_BR_MCAST_QUERY_RESPONSE_INTVL, &interval);
    }
    b.nest_end(data).nest_end(info).end();
}

/// A dummy device: an interface with nothing behind it.
pub fn new_dummy(b: &mut Batch, seq: u32, spec: &LinkSpec<'_>) {
    let info = new_link(b, seq, spec, None, "dummy");
    b.nest_end(info).end();
}

/// Makes bridge `index` its segment's IGMP and MLD querier. Apart from [`new_bridge`]: the
/// kernel reads the response interval it waits when the querier is turned on. An MLD
/// query needs an IPv6 source address on the bridge, without which it keeps flooding.
pub fn bridge_querier(b: &mut Batch, seq: u32, index: i32) {
    b.begin(RTM_NEWLINK, 0, seq).header(&ifinfomsg(index, 0, 0));
    let info = b.nest_begin(IFLA_LINKINFO);
    b.attr_str(IFLA_INFO_KIND, "bridge");
    let data = b.nest_begin(IFLA_INFO_DATA);
    b.attr(IFLA_BR_MCAST_QUERIER, &[1]);
    b.nest_end(data).nest_end(info).end();
}

/// A macvlan in bridge mode on `lower` (an index in the socket's namespace), placed
/// wherever `spec.netns_fd` says: one device where a veth pair and a bridge port are
/// three kernel objects. Its siblings on the same lower reach one another directly.
pub fn new_macvlan(b: &mut Batch, seq: u32, spec: &LinkSpec<'_>, lower: i32) {
    let info = new_link(b, seq, spec, Some(lower), "macvlan");
    let data = b.nest_begin(IFLA_INFO_DATA);
    b.attr_u32(IFLA_MACVLAN_MODE, MACVLAN_MODE_BRIDGE);
    b.nest_end(data).nest_end(info).end();
}

/// A VXLAN device's own settings: its network identifier, where its frames go, and from
/// which address and underlay device.
#[derive(Clone, Copy, Debug)]
pub struct Vxlan {
    pub vni: u32,
    /// The far end's address (unicast): IFLA_VXLAN_GROUP or GROUP6 carries it too.
    pub remote: std::net::IpAddr,
    pub local: Option<std::net::IpAddr>,
    /// The UDP port, host order (IANA's is 4789).
    pub port: u16,
    /// The underlay interface's index.
    pub underlay: Option<i32>,
}

/// A VXLAN device.
pub fn new_vxlan(b: &mut Batch, seq: u32, spec: &LinkSpec<'_>, vx: &Vxlan) {
    let ip = |b: &mut Batch, v4: u16, v6: u16, a: std::net::IpAddr| {
        match a {
            std::net::IpAddr::V4(a) => b.attr(v4, &a.octets()),
            std::net::IpAddr::V6(a) => b.attr(v6, &a.octets()),
        };
    };
    let info = new_link(b, seq, spec, None, "vxlan");
    let data = b.nest_begin(IFLA_INFO_DATA);
    b.attr_u32(IFLA_VXLAN_ID, vx.vni);
    ip(b, IFLA_VXLAN_GROUP, IFLA_VXLAN_GROUP6, vx.remote);
    if let Some(local) = vx.local {
        ip(b, IFLA_VXLAN_LOCAL, IFLA_VXLAN_LOCAL6, local);
    }
    if let Some(dev) = vx.underlay {
        b.attr_i32(IFLA_VXLAN_LINK, dev);
    }
    b.attr(IFLA_VXLAN_PORT, &vx.port.to_be_bytes());
    b.nest_end(data).nest_end(info).end();
}

/// Brings the link with `index` up (or down) without touching its other flags, and
/// enslaves it to `master` if given.
pub fn set_link(b: &mut Batch, seq: u32, index: i32, up: bool, master: Option<i32>) {
    set_link_alias(b, seq, index, up, master, None)
}

/// [`set_link`], also setting the interface's alias (which a veth peer cannot get at
/// creation: the kernel applies IFLA_IFALIAS only to existing links).
pub fn set_link_alias(
    b: &mut Batch,
    seq: u32,
    index: i32,
    up: bool,
    master: Option<i32>,
    alias: Option<&str>,
) {
    let flags = if up { IFF_UP } else { 0 };
    b.begin(RTM_NEWLINK, 0, seq)
        .header(&ifinfomsg(index, flags, IFF_UP));
    if let Some(m) = master {
        b.attr_u32(IFLA_MASTER, m as u32);
    }
    if let Some(a) = alias {
        b.attr(IFLA_IFALIAS, a.as_bytes());
    }
    b.end();
}

/// IPv4 forwarding on one device (its `conf/<dev>/forwarding`), over netlink rather than
/// /proc/sys. IPv4 forwards a packet when its *input* device has forwarding on.
pub fn set_forwarding(b: &mut Batch, seq: u32, index: i32, on: bool) {
    set_ipv4_conf(b, seq, index, IPV4_DEVCONF_FORWARDING, on as u32)
}

/// Routes 127.0.0.0/8 through the link (`route_localnet`): what the host sends from its
/// loopback addresses may leave, and replies to them come in, through it.
pub fn set_route_localnet(b: &mut Batch, seq: u32, index: i32, on: bool) {
    set_ipv4_conf(b, seq, index, IPV4_DEVCONF_ROUTE_LOCALNET, on as u32)
}

/// One of the link's IPv4 settings (`net.ipv4.conf.IFACE.*`, IPV4_DEVCONF_*).
fn set_ipv4_conf(b: &mut Batch, seq: u32, index: i32, key: u16, value: u32) {
    b.begin(RTM_NEWLINK, 0, seq).header(&ifinfomsg(index, 0, 0));
    let spec = b.nest_begin(IFLA_AF_SPEC);
    let inet = b.nest_begin(libc::AF_INET as u16);
    let conf = b.nest_begin(IFLA_INET_CONF);
    b.attr_u32(key, value);
    b.nest_end(conf).nest_end(inet).nest_end(spec).end();
}

/// No IPv6 link-local address for this link from now on (addrgenmode none). The kernel
/// makes that address when the link is up and has carrier, and applies the mode only to
/// an existing link and after a request's flags: send this before the request that
/// brings the link up.
pub fn no_link_local(b: &mut Batch, seq: u32, index: i32) {
    b.begin(RTM_NEWLINK, 0, seq).header(&ifinfomsg(index, 0, 0));
    let spec = b.nest_begin(IFLA_AF_SPEC);
    let inet6 = b.nest_begin(libc::AF_INET6 as u16);
    b.attr(IFLA_INET6_ADDR_GEN_MODE, &[IN6_ADDR_GEN_MODE_NONE]);
    b.nest_end(inet6).nest_end(spec).end();
}

pub fn del_link(b: &mut Batch, seq: u32, index: i32) {
    b.begin(RTM_DELLINK, 0, seq)
        .header(&ifinfomsg(index, 0, 0))
        .end();
}

pub fn del_link_by_name(b: &mut Batch, seq: u32, name: &str) {
    b.begin(RTM_DELLINK, 0, seq)
        .header(&ifinfomsg(0, 0, 0))
        .attr_str(IFLA_IFNAME, name)
        .end();
}

/// A request for one link's description (answered with one RTM_NEWLINK, or ENODEV).
pub fn get_link_by_name(b: &mut Batch, seq: u32, name: &str) {
    b.begin(RTM_GETLINK, 0, seq)
        .header(&ifinfomsg(0, 0, 0))
        .attr_str(IFLA_IFNAME, name)
        .end();
}

/// A request for the description of the link with `index`.
pub fn get_link(b: &mut Batch, seq: u32, index: i32) {
    b.begin(RTM_GETLINK, 0, seq)
        .header(&ifinfomsg(index, 0, 0))
        .end();
}

/// A request for the link with `index` that is sent for what the kernel does before it
/// answers: it runs the link's pending link-watch work (`linkwatch_sync_dev`, Linux 6.7
/// and later), the carrier change the kernel's worker would otherwise get to in its own
/// time. The answer leaves out the link's counters, which nobody reads.
pub fn sync_link(b: &mut Batch, seq: u32, index: i32) {
    b.begin(RTM_GETLINK, 0, seq)
        .header(&ifinfomsg(index, 0, 0))
        .attr_u32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS)
        .end();
}

/// A dump of every link of the socket's namespace, each with its counters.
pub fn dump_links(b: &mut Batch, seq: u32) {
    b.begin(RTM_GETLINK, NLM_F_DUMP, seq)
        .header(&ifinfomsg(0, 0, 0))
        .end();
}

pub const RTM_NEWSTATS: u16 = 92;
pub const RTM_GETSTATS: u16 = 94;
const IFLA_STATS_LINK_64: u16 = 1;

/// A dump of every link's counters (and nothing else) in the socket's namespace. Unlike a
/// link dump, it never looks up the peer namespace's id of a veth (IFLA_LINK_NETNSID), a
/// linear scan of the namespace's id table (`__peernet2id`): in a switch with 10,000
/// ports, that made a link dump cost 10,000 x 10,000 steps.
pub fn dump_stats(b: &mut Batch, seq: u32) {
    // struct if_stats_msg: family, pad, pad, ifindex, filter_mask.
    let mut h = [0u8; 12];
    h[8..12].copy_from_slice(&(1u32 << (IFLA_STATS_LINK_64 - 1)).to_ne_bytes());
    b.begin(RTM_GETSTATS, NLM_F_DUMP, seq).header(&h).end();
}

/// A stats dump entry: the link's index and its counters.
pub fn parse_stats(m: &Message<'_>) -> Option<(i32, LinkStats)> {
    if m.ty != RTM_NEWSTATS || m.payload.len() < 12 {
        return None;
    }
    let index = i32::from_ne_bytes(m.payload[4..8].try_into().ok()?);
    let stats = (msg::attrs(&m.payload[12..]))
        .find(|(t, _)| *t == IFLA_STATS_LINK_64)
        .and_then(|(_, v)| LinkStats::parse(v))?;
    Some((index, stats))
}

/// What nsfleet reads back about a link.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkInfo {
    pub index: i32,
    pub name: String,
    pub alias: Option<String>,
    /// The ifinfomsg flags (IFF_UP, IFF_RUNNING, IFF_LOWER_UP, ...).
    pub flags: u32,
    /// Whether the link has carrier (its peer is up, for a veth).
    pub carrier: Option<bool>,
    /// RFC 2863 operational state: 2 down, 6 up, 0 unknown (IF_OPER_*).
    pub operstate: u8,
    pub stats: LinkStats,
    /// The index of the device it is enslaved to (a bridge, a datapath), if any.
    pub master: Option<i32>,
}

/// The link's counters (the first eight of struct rtnl_link_stats64).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
}

impl LinkStats {
    fn parse(v: &[u8]) -> Option<LinkStats> {
        let n = |k: usize| {
            Some(u64::from_ne_bytes(
                v.get(8 * k..8 * k + 8)?.try_into().ok()?,
            ))
        };
        Some(LinkStats {
            rx_packets: n(0)?,
            tx_packets: n(1)?,
            rx_bytes: n(2)?,
            tx_bytes: n(3)?,
            rx_errors: n(4)?,
            tx_errors: n(5)?,
            rx_dropped: n(6)?,
            tx_dropped: n(7)?,
        })
    }
}

pub fn parse_link(m: &Message<'_>) -> Option<LinkInfo> {
    if m.ty != RTM_NEWLINK || m.payload.len() < 16 {
        return None;
    }
    let mut info = LinkInfo {
        index: i32::from_ne_bytes(m.payload[4..8].try_into().ok()?),
        flags: u32::from_ne_bytes(m.payload[8..12].try_into().ok()?),
        ..LinkInfo::default()
    };
    let text = |v: &[u8]| {
        let s = v.split(|c| *c == 0).next().unwrap_or(&[]);
        String::from_utf8_lossy(s).into_owned()
    };
    for (ty, v) in msg::attrs(&m.payload[16..]) {
        match ty {
            IFLA_IFNAME => info.name = text(v),
            IFLA_IFALIAS => info.alias = Some(text(v)),
            IFLA_CARRIER => info.carrier = v.first().map(|c| *c != 0),
            IFLA_OPERSTATE => info.operstate = v.first().copied().unwrap_or(0),
            IFLA_STATS64 => info.stats = LinkStats::parse(v).unwrap_or_default(),
            IFLA_MASTER => {
                info.master = v
                    .get(..4)
                    .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            }
            _ => {}
        }
    }
    Some(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The IFLA_INFO_DATA of the batch's first message, as (type, bytes) attributes.
    fn info_data(b: &Batch) -> Vec<(u16, Vec<u8>)> {
        let m = msg::messages(b.bytes()).next().unwrap();
        let find = |buf, ty| {
            msg::attrs(buf)
                .find(|(t, _)| *t == ty)
                .map(|(_, v)| v)
                .unwrap()
        };
        let data = find(find(&m.payload[16..], IFLA_LINKINFO), IFLA_INFO_DATA);
        msg::attrs(data).map(|(t, v)| (t, v.to_vec())).collect()
    }

    #[test]
    fn veth_peer_is_an_ifinfomsg_then_attributes_inside_info_data() {
        let mut b = Batch::new();
        let local = LinkSpec {
            name: "eth0",
            index: 1000,
            up: true,
            ..Default::default()
        };
        let peer = LinkSpec {
            name: "p1",
            index: 1001,
            netns_fd: Some(7),
            ..local
        };
        new_veth(&mut b, 1, &local, &peer);
        let data = info_data(&b);
        let (ty, peer_bytes) = &data[0];
        assert_eq!(*ty, VETH_INFO_PEER);
        assert_eq!(
            i32::from_ne_bytes(peer_bytes[4..8].try_into().unwrap()),
            1001
        );
        let names: Vec<_> = msg::attrs(&peer_bytes[16..]).map(|(t, _)| t).collect();
        assert_eq!(names, vec![IFLA_IFNAME, IFLA_NET_NS_FD]);
    }

    #[test]
    fn vxlan_data_has_the_id_the_remote_and_the_port_in_network_order() {
        let mut b = Batch::new();
        let spec = LinkSpec {
            name: "vx0",
            index: 1002,
            ..Default::default()
        };
        let vx = Vxlan {
            vni: 42,
            remote: "10.0.0.2".parse().unwrap(),
            local: None,
            port: 4789,
            underlay: Some(1000),
        };
        new_vxlan(&mut b, 1, &spec, &vx);
        let data = info_data(&b);
        assert_eq!(
            data,
            vec![
                (IFLA_VXLAN_ID, 42u32.to_ne_bytes().to_vec()),
                (IFLA_VXLAN_GROUP, vec![10, 0, 0, 2]),
                (IFLA_VXLAN_LINK, 1000i32.to_ne_bytes().to_vec()),
                (IFLA_VXLAN_PORT, vec![0x12, 0xb5]),
            ]
        );
    }
}

//! The rtnetlink requests nsfleet sends, as functions that append to a [`Batch`].
//!
//! Only attribute layout lives here: which namespace a request runs in is decided by the
//! socket it is sent on, and what to ask for is decided by the caller.

mod addr;
mod link;
mod nsid;
mod route;
mod tc;

pub use addr::{del_addr, dump_addrs, new_addr, parse_addr};
pub use link::{
    bridge_querier, new_bridge, new_dummy, new_macvlan, new_veth, new_vxlan, no_link_local,
};
pub use link::{
    del_link, del_link_by_name, dump_links, dump_stats, get_link, get_link_by_name, parse_link,
    parse_stats, set_forwarding, set_link, set_link_alias, set_route_localnet, sync_link, LinkInfo,
    LinkSpec, LinkStats, IFF_UP,
};
pub use link::{Snooping, Vxlan};
pub use nsid::*;
pub use route::{
    del_route, dump_routes, new_route, parse_route, Route, RouteDst, RTNLGRP_IPV4_ROUTE,
};
pub use tc::{del_root_qdisc, set_netem, set_tbf, Netem};

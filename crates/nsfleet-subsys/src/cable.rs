//! Cables: one end of a link taken down as a pulled cable and put back, and a link end's
//! state as the kernel has it (administrative state, carrier, counters).
//!
//! A veth has no carrier of its own to switch off: taking one end down is what pulls the
//! cable, and the kernel drops the other end's carrier at once (`veth_close`), so the
//! peer shows NO-CARRIER, as a switch port does when its cable is pulled. The end taken
//! down keeps its IPv6 addresses (`keep_addr_on_down`), as an unplugged port keeps its
//! configuration. Runs in the node, on a worker (`Fleet::on_node`).

use anyhow::{anyhow, Context};
use nsfleet_core::{Fleet, InitCtx};
use nsfleet_locks::{order, Mutex};
use nsfleet_netlink::rtnl::{self, LinkStats, RTNLGRP_LINK};
use nsfleet_netlink::{Batch, NlSocket};
use nsfleet_sys as sys;
use nsfleet_topology::Link;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// One link end as the kernel has it now.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct EndState {
    pub node: String,
    pub iface: String,
    /// Administratively up (IFF_UP).
    pub up: bool,
    /// Has carrier: for a veth, its peer is up.
    pub carrier: bool,
    pub counters: Counters,
}

/// A link end's counters, as the kernel keeps them (rtnl_link_stats64).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Counters {
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    #[serde(default)]
    pub rx_errors: u64,
    #[serde(default)]
    pub tx_errors: u64,
}

impl From<LinkStats> for Counters {
    fn from(s: LinkStats) -> Self {
        Counters {
            rx_packets: s.rx_packets,
            tx_packets: s.tx_packets,
            rx_bytes: s.rx_bytes,
            tx_bytes: s.tx_bytes,
            rx_dropped: s.rx_dropped,
            tx_dropped: s.tx_dropped,
            rx_errors: s.rx_errors,
            tx_errors: s.tx_errors,
        }
    }
}

/// Where the other end of a node's interface is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Far {
    /// Another node's interface.
    Node(String, String),
    /// An interface in the host's namespace (a host link).
    Host(String),
    /// A tunnel (VXLAN), or a switch's macvlan (the switch has no device for it): no end
    /// nsfleet can see.
    None,
}

/// The far end of `node`'s interface `iface`, from the fleet's wiring: the pair's other
/// end is named by the end that made it, so the ends made from elsewhere are looked up.
pub fn far_end(cx: &InitCtx<'_>, iface: &str) -> Far {
    let me = cx.node.name();
    let wiring = cx.node.wiring();
    let Some(i) = wiring.iface(iface) else {
        return Far::None;
    };
    match &i.link {
        Link::Veth(p) => Far::Node(p.node.clone(), p.name.clone()),
        Link::Host(h) => Far::Host(h.name.clone()),
        Link::Vxlan(_) | Link::Dummy => Far::None,
        Link::FarEnd => (cx.peers().iter())
            .find_map(|n| {
                let made = n.wiring().ifaces.iter().find_map(|f| {
                    f.link
                        .as_veth()
                        .filter(|p| p.node == me && p.name == iface)
                        .map(|_| f.name.clone())
                });
                made.map(|f| Far::Node(n.name().to_string(), f))
            })
            .unwrap_or(Far::None),
    }
}

/// Brings `iface` of the node down (a pulled cable) or up, if `up` says so, then reads
/// its state.
pub fn set(cx: &mut InitCtx<'_>, iface: &str, up: Option<bool>) -> anyhow::Result<EndState> {
    let index = (cx.node.wiring().iface(iface))
        .ok_or_else(|| crate::no_interface(cx.node, iface))?
        .index;
    if up == Some(false) {
        // Best effort: a node without IPv6 has no such key.
        let _ = cx.write_sysctl(&format!("net/ipv6/conf/{iface}/keep_addr_on_down"), "1");
    }
    if let Some(up) = up {
        let sock = cx.rtnl().context("a netlink socket in the node")?;
        let mut b = Batch::new();
        rtnl::set_link(&mut b, sock.next_seq(), index, up, None);
        sock.execute_all(&b).map_err(|e| {
            anyhow!(
                "{}:{iface} {}: {e}",
                cx.node.name(),
                if up { "up" } else { "down" }
            )
        })?;
    }
    read(cx, iface, index)
}

fn read(cx: &mut InitCtx<'_>, iface: &str, index: i32) -> anyhow::Result<EndState> {
    let node = cx.node.name().to_string();
    let sock = cx.rtnl().context("a netlink socket in the node")?;
    let mut b = Batch::new();
    rtnl::get_link(&mut b, sock.next_seq(), index);
    let mut found = None;
    sock.dump(&b, |m| found = found.take().or_else(|| rtnl::parse_link(m)))
        .map_err(|e| anyhow!("reading {node}:{iface}: {e}"))?;
    let l = found.ok_or_else(|| anyhow!("{node}:{iface}: the kernel has no such link"))?;
    Ok(EndState {
        node,
        iface: iface.to_string(),
        up: l.flags & rtnl::IFF_UP != 0,
        carrier: l.carrier.unwrap_or(false),
        counters: l.stats.into(),
    })
}

/// The kernel's link notifications of every node, read on a thread of their own: a route
/// netlink socket in each node subscribed to RTNLGRP_LINK. The sockets hold the nodes'
/// namespaces: [`forget`](Self::forget) nodes before they are destroyed, and
/// [`stop`](Self::stop) before the fleet goes.
pub struct LinkWatch {
    /// Protects the sockets, one per node watched: held by the reading thread for one
    /// poll (at most [`POLL`]) at a time, and to add or drop nodes. A leaf lock: what was
    /// heard is told after it is let go of.
    socks: Arc<Mutex<Vec<Watched>>>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

/// How long the reading thread holds the sockets in one poll.
const POLL: Duration = Duration::from_millis(100);

impl LinkWatch {
    /// Watches every node of `fleet` now; `tell(node, iface, state)` hears each change of
    /// a link end's state: "up", "down" (administratively) or "no-carrier".
    pub fn start(
        fleet: &Fleet,
        tell: impl Fn(&str, String, &'static str) + Send + 'static,
    ) -> anyhow::Result<LinkWatch> {
        let names: Vec<String> = fleet.nodes().iter().map(|n| n.name().to_string()).collect();
        let socks = Arc::new(Mutex::new(order::LINK_SOCKS, open(fleet, &names)?));
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, shared) = (stop.clone(), socks.clone());
        let thread = std::thread::Builder::new()
            .name("nsfleet-links".into())
            .spawn(move || watch_links(&shared, &flag, tell))?;
        Ok(LinkWatch {
            socks,
            stop,
            thread,
        })
    }

    /// Watches these nodes too (new in the fleet).
    pub fn add(&self, fleet: &Fleet, names: &[String]) -> anyhow::Result<()> {
        let more = open(fleet, names)?;
        // Read before the sockets' lock, a leaf: a node's host is behind a lock of its own.
        let lent = tenants_of(fleet, names);
        let mut socks = self.socks.lock();
        socks.extend(more);
        lend(&lent, &mut socks);
        Ok(())
    }

    /// Stops watching these nodes: their sockets are closed when this returns.
    pub fn forget(&self, names: &[String]) {
        self.socks.lock().retain(|w| !names.contains(&w.node));
    }

    /// Ends the watch and closes its sockets.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
    }
}

/// A node's socket subscribed to its link notifications, with the interfaces of its
/// namespace that are its tenants' (an Open vSwitch switch's ports are in the fleet's
/// Open vSwitch node's namespace), by name: told as theirs.
struct Watched {
    node: String,
    sock: NlSocket,
    tenants: HashMap<String, String>,
}

/// A socket subscribed to link notifications in each of these nodes but tenants, which
/// their hosts' sockets hear.
fn open(fleet: &Fleet, names: &[String]) -> anyhow::Result<Vec<Watched>> {
    // A socket per node, beside the descriptor per node the supervisor holds: its limit
    // was raised for both at its start, where it may be (see nsfleet-supervisor's
    // `supervise`); a user's hard limit may still be too low, which is then said.
    let (limit, _) = sys::nofile_limits();
    let table = fleet.nodes();
    let mut socks = Vec::with_capacity(names.len());
    for name in names {
        if table.get(name).is_some_and(|n| n.is_tenant()) {
            continue;
        }
        let sock = fleet
            .on_node(name, |_| {
                let mut s = NlSocket::open()?;
                s.join_group(RTNLGRP_LINK)?;
                Ok(s)
            })
            .map_err(|e| {
                // Out of descriptors: say which limit, and what to raise it to.
                let emfile = (e.chain())
                    .filter_map(|c| c.downcast_ref::<std::io::Error>())
                    .any(|io| io.raw_os_error() == Some(libc::EMFILE));
                if !emfile {
                    return e.context(format!("watching node {name}'s links"));
                }
                e.context(format!(
                    "watching the links of {} nodes takes a socket each, beside the descriptor per node the supervisor holds, and its RLIMIT_NOFILE is {limit}, which it could not raise further: raise the hard limit where nsfleet is started (`ulimit -Hn {}` as root, LimitNOFILE= for a service)",
                    names.len(),
                    limit + names.len() as u64
                ))
            })?;
        socks.push(Watched {
            node: name.clone(),
            sock,
            tenants: HashMap::new(),
        });
    }
    lend(&tenants_of(fleet, names), &mut socks);
    Ok(socks)
}

/// The interfaces of the tenants among `names`: (host, interface, tenant).
fn tenants_of(fleet: &Fleet, names: &[String]) -> Vec<(String, String, String)> {
    let table = fleet.nodes();
    let mut out = Vec::new();
    for n in names.iter().filter_map(|name| table.get(name)) {
        let Some(host) = n.host() else { continue };
        for i in &n.wiring().ifaces {
            out.push((
                host.name().to_string(),
                i.name.clone(),
                n.name().to_string(),
            ));
        }
    }
    out
}

/// Records tenants' interfaces on their hosts' sockets, to be told as theirs.
fn lend(lent: &[(String, String, String)], socks: &mut [Watched]) {
    for (host, iface, tenant) in lent {
        if let Some(w) = socks.iter_mut().find(|w| w.node == *host) {
            w.tenants.insert(iface.clone(), tenant.clone());
        }
    }
}

/// Reads every node's link notifications until `stop`, telling each change of state.
/// After `stop`, one last round reads what the sockets hold already, without waiting: a
/// cable pulled just before `down` is told.
fn watch_links(
    socks: &Mutex<Vec<Watched>>,
    stop: &AtomicBool,
    tell: impl Fn(&str, String, &'static str),
) {
    let mut last: HashMap<(String, String), &'static str> = HashMap::new();
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        let mut socks = socks.lock();
        if socks.is_empty() {
            drop(socks);
            if stopping {
                return;
            }
            std::thread::sleep(POLL);
            continue;
        }
        let fds: Vec<BorrowedFd<'_>> = socks.iter().map(|w| w.sock.as_fd()).collect();
        let wait = if stopping { Duration::ZERO } else { POLL };
        let Ok(ready) = sys::poll_readable(&fds, Some(wait)) else {
            if stopping {
                return;
            }
            continue;
        };
        drop(fds);
        // Told once the sockets are let go of: the listener takes locks of its own.
        let mut heard = Vec::new();
        for (w, _) in socks.iter_mut().zip(&ready).filter(|(_, r)| **r) {
            let Watched {
                node,
                sock,
                tenants,
            } = w;
            let _ = sock.recv_each(Some(Duration::ZERO), |m| {
                let Some(l) = rtnl::parse_link(m) else { return };
                let state = if l.flags & rtnl::IFF_UP == 0 {
                    "down"
                } else if l.flags & libc::IFF_LOWER_UP as u32 == 0 {
                    "no-carrier"
                } else {
                    "up"
                };
                let node = tenants.get(&l.name).unwrap_or(node);
                if last.insert((node.clone(), l.name.clone()), state) != Some(state) {
                    heard.push((node.clone(), l.name, state));
                }
            });
        }
        drop(socks);
        for (node, iface, state) in heard {
            tell(&node, iface, state);
        }
        if stopping {
            return;
        }
    }
}

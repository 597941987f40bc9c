//! `ovs-controllers`: the hub's OpenFlow relays, one per controller of its switches,
//! listening in the hub's namespace on the controller's address and carrying each
//! connection to the controller from the host's namespace (or the node's that has the
//! address); which switch a connection is, read from its features reply; what becomes of
//! each switch's connections, told as events and said by `status`. It carries bytes
//! and reads one handshake message: it never changes a bridge, nor a message it carries.

use super::Switches;
use crate::host_dial::HostDialer;
use anyhow::Context;
use nsfleet_core::{InitCtx, Node, NodeTable, Phase, Shape, Subsystem};
use nsfleet_locks::{order, Mutex};
use nsfleet_netlink::rtnl;
use nsfleet_sys as sys;
use nsfleet_topology::NodeConfig;
use std::collections::HashMap;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;

/// The controller relays of the fleet's Open vSwitch; with where to tell what becomes of
/// the switches' connections, and which switch is which.
pub struct Controllers {
    events: Option<crate::Events>,
    switches: Switches,
    /// A user's fleet's way to the host's namespace (see `crate::host_dial`).
    host: Option<Arc<HostDialer>>,
}

impl Controllers {
    pub fn new(
        events: Option<crate::Events>,
        switches: Switches,
        host: Option<Arc<HostDialer>>,
    ) -> Self {
        Controllers {
            events,
            switches,
            host,
        }
    }
}

/// A switch's connection to a controller changed, as its relay sees it: "connected",
/// "disconnected", or "unreachable" (with the first error). Said once per change of
/// state: a switch retrying an unreachable controller every few seconds is one event,
/// not one a retry.
#[derive(Clone, Debug, serde::Serialize, PartialEq)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ControllerEvent {
    Controller {
        node: String,
        controller: String,
        state: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

/// The hub's relays, one per controller of its switches.
#[derive(Default)]
pub struct Relays {
    relays: Vec<Relay>,
}

/// A controller's relay: its listener, the connections it carries, and what it knows of
/// each switch's connection to the controller. Closed by `close`.
struct Relay {
    to: SocketAddr,
    listener: Arc<TcpListener>,
    /// Every live connection's two sockets, by the connection's number, to shut down at
    /// `close` (which ends its copiers); a connection takes its own out as it ends.
    conns: Arc<Mutex<Vec<(u64, TcpStream)>>>,
    reach: Arc<Mutex<Reach>>,
}

impl Relay {
    fn close(&self) {
        // SAFETY: shutdown(2) on a descriptor the listener owns; it wakes accept().
        unsafe { libc::shutdown(self.listener.as_raw_fd(), libc::SHUT_RDWR) };
        for (_, c) in self.conns.lock().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}

/// Whether each switch is connected to a controller, as its relay sees it, by switch.
/// `status` says the told state, so that it and `events` never disagree.
#[derive(Default)]
struct Reach {
    switches: HashMap<String, SwitchReach>,
}

/// One switch's connections to one controller: how many are live now, and the state
/// last told ("connected", "disconnected", "unreachable"; `None` before the first) with
/// why.
#[derive(Default)]
struct SwitchReach {
    live: usize,
    state: Option<&'static str>,
    reason: Option<String>,
}

impl Relays {
    /// A line per controller of `switch` for `status`: connected, or not and why.
    fn describe(&self, switch: &str, controllers: &[SocketAddr]) -> Vec<String> {
        (controllers.iter())
            .map(|to| {
                let relay = self.relays.iter().find(|r| r.to == *to);
                let reach = relay.map(|r| r.reach.lock());
                let r = reach.as_ref().and_then(|r| r.switches.get(switch));
                match r.map(|r| (r.state, &r.reason)) {
                    Some((Some("connected"), _)) => format!("controller tcp:{to}: connected"),
                    Some((Some(_), Some(why))) => {
                        format!("controller tcp:{to}: not connected ({why})")
                    }
                    Some((Some(state), None)) => {
                        format!("controller tcp:{to}: not connected ({state})")
                    }
                    _ => format!("controller tcp:{to}: not connected yet"),
                }
            })
            .collect()
    }
}

/// What `status` says of an OVS switch's controllers (from its hub's relays).
pub fn controller_lines(node: &Node, relays: nsfleet_core::SubsysId) -> Vec<String> {
    let config = node.config();
    let Some(ovs) = config.ovs.as_ref().filter(|o| !o.controllers.is_empty()) else {
        return Vec::new();
    };
    let hub = node.host();
    let lines = hub.and_then(|h| {
        h.inspect(relays, |r: &Relays| {
            r.describe(node.name(), &ovs.controllers)
        })
    });
    lines.unwrap_or_default()
}

impl Subsystem for Controllers {
    type State = Relays;

    fn name(&self) -> &'static str {
        "ovs-controllers"
    }

    fn phase(&self) -> Phase {
        Phase::Start
    }

    fn wants(&self, node: &Node) -> bool {
        !controllers_of(&node.config()).is_empty()
    }

    fn init(&self, cx: &mut InitCtx<'_>, relays: &mut Relays) -> anyhow::Result<()> {
        let config = cx.config();
        let new: Vec<SocketAddr> = (controllers_of(&config).iter())
            .filter(|to| !relays.relays.iter().any(|r| r.to == **to))
            .copied()
            .collect();
        add_addresses(cx, &new)?;
        for to in new {
            // This thread is in the hub's namespace: so is the listener, for good.
            let listener = TcpListener::bind(to)
                .with_context(|| format!("the relay to controller {to} in {}", cx.node.name()))?;
            let relay = Relay {
                to,
                listener: Arc::new(listener),
                conns: Arc::new(Mutex::new(order::RELAY_CONNS, Vec::new())),
                reach: Arc::new(Mutex::new(order::RELAY_REACH, Reach::default())),
            };
            let from = origin(cx, to, self.host.as_ref())?;
            let ends = Ends {
                to,
                host: match &from {
                    Origin::Host(h) => Some(h.clone()),
                    Origin::Namespace(_) => None,
                },
                conns: relay.conns.clone(),
                reach: relay.reach.clone(),
                switches: self.switches.clone(),
                events: self.events.clone(),
            };
            let l = relay.listener.clone();
            std::thread::Builder::new()
                .name(format!("relay-{}", to.port()))
                .spawn(move || accept(&l, &from, ends))?;
            relays.relays.push(relay);
        }
        Ok(())
    }

    /// Relays of controllers no switch has any more are closed; the others, and the
    /// connections they carry, stay (a switch added under another controller does not
    /// cut the others' connections).
    fn retire(
        &self,
        cx: &mut InitCtx<'_>,
        relays: &mut Relays,
        _was: &Shape,
    ) -> anyhow::Result<()> {
        let config = cx.config();
        let now = controllers_of(&config);
        relays.relays.retain(|r| {
            let stays = now.contains(&r.to);
            if !stays {
                r.close();
            }
            stays
        });
        Ok(())
    }

    /// And relays made for the ones that are new.
    fn extend(
        &self,
        cx: &mut InitCtx<'_>,
        relays: &mut Relays,
        _was: &Shape,
    ) -> anyhow::Result<()> {
        self.init(cx, relays)
    }

    fn exit(&self, _node: &Node, relays: &mut Relays) {
        relays.relays.iter().for_each(Relay::close);
    }
}

/// The loopback's interface index, in every namespace.
const LO: i32 = 1;

/// Each controller's address that is not a loopback one, once, on the hub's `lo`, for
/// its relay to listen on. One already there (a change that keeps a controller's
/// address) is kept: `retire` leaves them, as they harm nothing in a namespace that
/// routes nothing.
fn add_addresses(cx: &mut InitCtx<'_>, controllers: &[SocketAddr]) -> anyhow::Result<()> {
    let mut ips: Vec<std::net::IpAddr> = controllers.iter().map(|c| c.ip()).collect();
    ips.retain(|ip| !ip.is_loopback());
    ips.sort();
    ips.dedup();
    for ip in ips {
        let host = if ip.is_ipv4() { 32 } else { 128 };
        let name = |_: &()| format!("controller address {ip} on lo");
        let add = |out: &mut nsfleet_core::Requests<'_>, _: &()| {
            out.add(|b, seq| rtnl::new_addr(b, seq, LO, ip, host))
        };
        match cx.send_each([()], add, name) {
            Err(e) if nsfleet_core::has_errno(&e, libc::EEXIST) => {}
            other => other?,
        }
    }
    Ok(())
}

/// The controllers the hub relays: every switch's, once each.
fn controllers_of(config: &NodeConfig) -> &[SocketAddr] {
    config.ovs_hub.as_ref().map_or(&[][..], |o| &o.controllers)
}

/// Where connections to a controller are made from.
enum Origin {
    /// A network namespace the supervisor may enter: a node's, or the host's.
    Namespace(OwnedFd),
    /// The host's, which a user's supervisor may not enter: through its forwarder.
    Host(Arc<HostDialer>),
}

/// Where connections to `to` are made from: the fleet's node that has its address, else
/// the host's namespace (through `host` for a user's fleet, whose home is not the host's).
fn origin(
    cx: &InitCtx<'_>,
    to: SocketAddr,
    host: Option<&Arc<HostDialer>>,
) -> anyhow::Result<Origin> {
    match (holder(cx.peers(), to), host) {
        (Some(n), _) => {
            Ok(Origin::Namespace(n.dup_netns().with_context(|| {
                format!("controller {to}: node {} is gone", n.name())
            })?))
        }
        (None, Some(host)) => Ok(Origin::Host(host.clone())),
        (None, None) => Ok(Origin::Namespace(cx.home().try_clone_to_owned()?)),
    }
}

/// The node of the fleet that has `to`'s address, if one has.
fn holder(nodes: &NodeTable, to: SocketAddr) -> Option<&Arc<Node>> {
    let ip = to.ip();
    nodes
        .iter()
        .find(|n| n.wiring().addrs().any(|a| a.addr == ip))
}

/// What a relay's connections share: where they go, the sockets `Relay::close` shuts down, what
/// `status` says of them, which switch a datapath id is, and where their changes are
/// told.
#[derive(Clone)]
struct Ends {
    to: SocketAddr,
    /// Who makes the connections to `to` in the host's namespace, for a user's fleet;
    /// else they are made in the namespace the relay's thread is in.
    host: Option<Arc<HostDialer>>,
    conns: Arc<Mutex<Vec<(u64, TcpStream)>>>,
    /// Protects the switches' connections to the controller and the states last told:
    /// held from a change to its event's publication, so that events come out one at a
    /// time, in the order of the changes, and only when a state changes.
    reach: Arc<Mutex<Reach>>,
    switches: Switches,
    events: Option<crate::Events>,
}

impl Ends {
    /// Records a change of `switch`'s connections (`f` changes the count and says the
    /// state it leaves, with why), and tells it if the state is news.
    fn change(&self, switch: &str, f: impl FnOnce(&mut usize) -> (&'static str, Option<String>)) {
        let mut reach = self.reach.lock();
        let r = reach.switches.entry(switch.to_string()).or_default();
        let (state, reason) = f(&mut r.live);
        // The latest reason, for `status`, even when the state is no news.
        r.reason = reason.clone();
        if r.state == Some(state) {
            return;
        }
        r.state = Some(state);
        if let Some(events) = &self.events {
            events(crate::Event::Controller(ControllerEvent::Controller {
                node: switch.to_string(),
                controller: format!("tcp:{}", self.to),
                state,
                reason,
            }));
        }
    }
}

/// Numbers connections, so that each takes its own sockets out of `Relay::conns`.
static CONNECTIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Accepts the switches' connections until the listener is shut down, each relayed to
/// the controller from `from` on threads of its own.
fn accept(listener: &TcpListener, from: &Origin, ends: Ends) {
    // Threads made from here on are in `from` too: the outgoing sockets are made there.
    let entered = match from {
        Origin::Namespace(ns) => sys::ns::setns_net(ns.as_fd()),
        Origin::Host(_) => Ok(()),
    };
    if let Err(e) = entered {
        let why = format!("entering the namespace to connect from: {e}");
        for sw in ends.switches.of_controller(ends.to) {
            ends.change(&sw, |_| ("unreachable", Some(why.clone())));
        }
        return;
    }
    while let Ok((inner, _)) = listener.accept() {
        let ends = ends.clone();
        let _ = std::thread::Builder::new()
            .name("relay-conn".into())
            .spawn(move || carry(inner, &ends));
    }
}

/// One connection: made to the controller, then both directions copied until either
/// side ends. Whose it is, the switch says in its features reply.
fn carry(inner: TcpStream, ends: &Ends) {
    let made = match &ends.host {
        Some(host) => host.dial(ends.to),
        None => TcpStream::connect_timeout(&ends.to, crate::host_dial::CONNECT_TIMEOUT),
    };
    let outer = match made {
        Ok(outer) => outer,
        Err(e) => {
            // Unreachable: the switch retries, as it would with the controller itself.
            // Which switch this was is unknown before its handshake: every switch of the
            // controller that has no connection to it is unreachable.
            for sw in ends.switches.of_controller(ends.to) {
                ends.change(&sw, |live| match live {
                    0 => ("unreachable", Some(e.to_string())),
                    _ => ("connected", None),
                });
            }
            return;
        }
    };
    let _ = (inner.set_nodelay(true), outer.set_nodelay(true));
    let (Ok(a), Ok(b)) = (inner.try_clone(), outer.try_clone()) else {
        return;
    };
    let id = CONNECTIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    {
        let mut held = ends.conns.lock();
        held.extend(inner.try_clone().map(|s| (id, s)));
        held.extend(outer.try_clone().map(|s| (id, s)));
    }
    let back = std::thread::Builder::new()
        .name("relay-back".into())
        .spawn(move || copy(b, a));
    let (mut from, mut to) = (inner, outer);
    let switch = datapath_id(&mut from, &mut to).and_then(|d| ends.switches.name_of(d));
    if let Some(sw) = &switch {
        ends.change(sw, |live| {
            *live += 1;
            ("connected", None)
        });
    }
    copy(from, to);
    let _ = back.map(|t| t.join());
    ends.conns.lock().retain(|(c, _)| *c != id);
    if let Some(sw) = &switch {
        ends.change(sw, |live| {
            *live -= 1;
            match live {
                0 => ("disconnected", None),
                _ => ("connected", None),
            }
        });
    }
}

/// OpenFlow's features reply, the same type in every version (1.0 to 1.5): its body
/// begins with the switch's datapath id.
const OFPT_FEATURES_REPLY: u8 = 6;

/// Copies what the switch sends from `from` to `to`, message by message as OpenFlow
/// frames them (version, type, length), until its features reply: returns its datapath
/// id. `None` if the connection ends first or what comes is not OpenFlow.
fn datapath_id(from: &mut TcpStream, to: &mut TcpStream) -> Option<u64> {
    use std::io::{Read, Write};
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = from.read(&mut chunk).ok().filter(|n| *n > 0)?;
        to.write_all(&chunk[..n]).ok()?;
        pending.extend_from_slice(&chunk[..n]);
        while pending.len() >= 8 {
            let len = usize::from(u16::from_be_bytes([pending[2], pending[3]]));
            if len < 8 || pending.len() > 1 << 16 {
                return None;
            }
            if pending[1] == OFPT_FEATURES_REPLY {
                if pending.len() < 16 {
                    break;
                }
                return Some(u64::from_be_bytes(pending[8..16].try_into().ok()?));
            }
            if pending.len() < len {
                break;
            }
            pending.drain(..len);
        }
    }
}

/// Copies `from` to `to` until `from` ends, then ends both.
fn copy(mut from: TcpStream, mut to: TcpStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

//! Open vSwitch switches (nsfleet-topology's `kind/ovs.rs`). Each runs an ovsdb-server
//! and an ovs-vswitchd of its own, started by the node's first command ([`start_command`])
//! inside its world: Open vSwitch's folders are the node's private ones, its sockets and
//! its datapath's ports are in the node's namespace, and nothing reaches an Open vSwitch
//! the host may run. They end with the node's world, as any daemon of a node does.
//!
//! A switch's controllers are addresses as the host sees them (or as the fleet's node
//! that has the address does), which the switch's namespace cannot reach: for each, a
//! relay ([`Controllers`]) listens inside the switch's namespace on the controller's own
//! address and port (an address other than the loopback's put on the namespace's `lo`),
//! so that the bridge's controller is the file's, as `ovs-vsctl get-controller` shows
//! it, and makes each connection it takes again from the host's namespace (or that
//! node's). When the fleet goes, or its supervisor dies, the relays' sockets close and
//! the switches are in their fail mode, as with a controller that went away.

use anyhow::Context;
use nsfleet_core::{InitCtx, Node, NodeTable, Phase, Shape, Subsystem};
use nsfleet_locks::{order, Mutex};
use nsfleet_netlink::rtnl;
use nsfleet_sys as sys;
use nsfleet_topology::{shell_quote as q, Datapath, NodeConfig, OvsSwitch};
use std::fmt::Write as _;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

/// The bridge's name: the switch's, as Mininet's `dpctl` and `ovs-ofctl dump-flows s1`
/// expect, where it can name a device (the bridge's own port is one); else `br0`.
pub fn bridge_name(node: &Node) -> String {
    match nsfleet_topology::check_ifname(node.name()) {
        Ok(()) => node.name().to_string(),
        Err(_) => "br0".to_string(),
    }
}

/// Whether an OVS switch on `datapath` forwards in the kernel.
pub fn in_kernel(datapath: Datapath) -> bool {
    match datapath {
        Datapath::Kernel => true,
        Datapath::User => false,
        Datapath::Auto => crate::probe::has_ovs_kernel_datapath(),
    }
}

/// The shell line that starts the switch's Open vSwitch: its database made and served,
/// the bridge and its ports written into it (ports numbered as the topology says, see
/// `OvsSwitch::numbered`), then ovs-vswitchd in the foreground, the command nsfleet
/// watches; with what `status` and `events` call it. `None` for a node that is no OVS
/// switch.
pub fn start_command(node: &Node) -> Option<(String, String)> {
    let config = node.config();
    let ovs = config.ovs.as_ref()?;
    let wiring = node.wiring();
    let name = bridge_name(node);
    let br = q(&name);
    let mut db = format!(" -- add-br {br} -- set bridge {br}");
    let kernel = in_kernel(ovs.datapath);
    let _ = write!(
        db,
        " datapath_type={}",
        if kernel { "system" } else { "netdev" }
    );
    bridge_settings(&mut db, ovs);
    // The topology checked the numbers; a clash here would be a bug: said, and the
    // command fails at once rather than a switch without ports.
    let ports = match ovs.numbered(wiring.ifaces.iter().map(|i| i.name.as_str())) {
        Ok(ports) => ports,
        Err(why) => {
            let line = format!("echo {} >&2; exit 1", q(&format!("nsfleet: {why}")));
            return Some(("ovs-vswitchd (not started)".to_string(), line));
        }
    };
    for (name, number) in ports {
        let p = q(name);
        let _ = write!(
            db,
            " -- add-port {br} {p} -- set interface {p} ofport_request={number}"
        );
    }
    if !ovs.controllers.is_empty() {
        let _ = write!(db, " -- set-controller {br}");
        for c in &ovs.controllers {
            let _ = write!(db, " tcp:{c}");
        }
    }
    // The userspace datapath forwards what it reads from its ports' packet sockets;
    // with TSO support on it keeps the senders' checksum offload (their packets'
    // checksums are left to the NIC) and completes them, and TCP across it works.
    let tso = match kernel {
        true => "",
        false => " -- set Open_vSwitch . other_config:userspace-tso-enable=true",
    };
    let on = match kernel {
        true => "the kernel datapath",
        false => "the userspace datapath",
    };
    let why = match (kernel, ovs.datapath) {
        (false, Datapath::Auto) => " (this kernel has no openvswitch module)",
        _ => "",
    };
    let label = format!("ovs-vswitchd: Open vSwitch bridge {name} on {on}");
    let settle = match kernel {
        true => format!("{OLD_DATAPATH}{EARLY_BOOT}"),
        false => String::new(),
    };
    let line = format!(
        "set -e; mkdir -p /run/openvswitch; \
         ovsdb-tool create /etc/openvswitch/conf.db /usr/share/openvswitch/vswitch.ovsschema; \
         ovsdb-server /etc/openvswitch/conf.db --remote=punix:/run/openvswitch/db.sock --pidfile --detach --no-chdir --log-file; \
         ovs-vsctl --no-wait init{tso}{db}; \
         echo \"nsfleet: Open vSwitch bridge {name} on {on}{why}\"; {settle}\
         exec ovs-vswitchd --pidfile --no-chdir --log-file"
    );
    Some((label, line))
}

/// Deletes the kernel datapath a previous ovs-vswitchd of the node left. `apply` starts a
/// changed switch's Open vSwitch again, and the kernel datapath, which lives in the
/// node's namespace, outlives it with its ports: `ovs-ready` would find them taken
/// before the new ovs-vswitchd runs. Deleted, they are taken again by the new one.
const OLD_DATAPATH: &str = "ovs-dpctl del-dp system@ovs-system 2>/dev/null || true; ";

/// Waits, said, until the system has been up 10 s. Open vSwitch 3.1 (Debian 12's) counts
/// the CPUs at most every 10 s of `time_msec()`, which starts at boot, and its count
/// starts at 0: an ovs-vswitchd started in a system's first 10 s gives the kernel
/// datapath no upcall handler (its log: "Overriding n-handler-threads to 0"), and every
/// packet that misses the datapath's flows is lost. Seen in a guest of `nsfleet vm`,
/// where a fleet comes up 5 s after boot; the userspace datapath has no handlers.
const EARLY_BOOT: &str = "up=$(cut -d. -f1 /proc/uptime); if [ \"$up\" -lt 10 ]; then \
     echo \"nsfleet: waiting $((10 - up)) s: Open vSwitch counts no CPU in a system's first 10 s and would start no upcall handler\"; \
     sleep $((10 - up)); fi; ";

/// The bridge's own columns, as `set bridge` takes them. In-band control is off, as
/// Mininet sets it: the controllers are reached out of band (the relays), and in-band
/// control would look for a route to each one's address every second and log that it
/// has none.
fn bridge_settings(out: &mut String, ovs: &OvsSwitch) {
    out.push_str(" other_config:disable-in-band=true");
    if !ovs.protocols.is_empty() {
        let _ = write!(out, " protocols={}", ovs.protocols.join(","));
    }
    if let Some(mode) = ovs.fail_mode {
        let mode = match mode {
            nsfleet_topology::FailMode::Secure => "secure",
            nsfleet_topology::FailMode::Standalone => "standalone",
        };
        let _ = write!(out, " fail_mode={mode}");
    }
    if let Some(dpid) = ovs.dpid {
        let _ = write!(out, " other_config:datapath-id={dpid:016x}");
    }
}

/// Waits, once a switch's processes are started, until its ovs-vswitchd has taken every
/// port, so that `up` returns with switches that forward: the userspace datapath puts
/// each port it opens in promiscuous mode (as a user's request, which the link's flags
/// show), the kernel's enslaves it to its `ovs-system` device (its promiscuity is then
/// the kernel's own, which the flags do not show). About 0.13 s for a fresh switch on
/// this machine class, most of it ovs-vswitchd's own start, which takes little CPU: in
/// the Ready phase, so that the switches' waits overlap.
pub struct Ready {
    /// The `processes` subsystem: a switch whose start line has ended is said at once,
    /// not after the wait's bound.
    pub processes: nsfleet_core::SubsysId,
}

/// How long a switch's ovs-vswitchd gets to take its ports.
const READY_WAIT: Duration = Duration::from_secs(20);

impl Subsystem for Ready {
    type State = ();

    fn name(&self) -> &'static str {
        "ovs-ready"
    }

    fn phase(&self) -> Phase {
        Phase::Ready
    }

    fn wants(&self, node: &Node) -> bool {
        node.config().ovs.is_some()
    }

    fn init(&self, cx: &mut InitCtx<'_>, _: &mut ()) -> anyhow::Result<()> {
        let wiring = cx.node.wiring();
        // What `processes` calls the start line (the whole line is built to get it: once).
        let label = start_command(cx.node).map(|(label, _)| label);
        let started = std::time::Instant::now();
        loop {
            let runs = self.vswitchd_runs(cx.node, label.as_deref());
            let taken = taken(cx)?;
            let missing: Vec<&str> = (wiring.ifaces.iter())
                .filter(|i| !taken.contains(&i.index))
                .map(|i| i.name.as_str())
                .collect();
            if missing.is_empty() && runs == Ok(true) {
                return Ok(());
            }
            let log = cx.log_dir.join(format!("{}.log", cx.node.name()));
            if let Err(exit) = runs {
                // Its log goes with the fleet that this failure rolls back: said here.
                anyhow::bail!(
                    "ovs-vswitchd's start line ended ({exit}) before it took port(s) {}; its log ends:\n{}",
                    missing.join(", "),
                    last_lines(&log, 5)
                );
            }
            if started.elapsed() > READY_WAIT {
                let what = match missing.is_empty() {
                    true => "started".to_string(),
                    false => format!("taken port(s) {}", missing.join(", ")),
                };
                anyhow::bail!(
                    "ovs-vswitchd has not {what} within {} s; its log ends:\n{}",
                    READY_WAIT.as_secs(),
                    last_lines(&log, 5)
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// A changed switch restarts its Open vSwitch (see `process.rs`): waited for again.
    fn extend(&self, cx: &mut InitCtx<'_>, st: &mut (), _was: &Shape) -> anyhow::Result<()> {
        self.init(cx, st)
    }
}

/// The last `n` lines of the file at `path`, indented; or why there are none.
fn last_lines(path: &std::path::Path, n: usize) -> String {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            let from = lines.len().saturating_sub(n);
            lines[from..]
                .iter()
                .map(|l| format!("  {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        }
        Err(e) => format!("  ({}: {e})", path.display()),
    }
}

impl Ready {
    /// Where the switch's start line is: `Ok(true)` once it has become ovs-vswitchd (its
    /// last step, an exec, after the old kernel datapath is deleted: ports taken from
    /// then on are this ovs-vswitchd's), `Ok(false)` before, `Err` with how it ended.
    /// `label` is the start line's name.
    fn vswitchd_runs(&self, node: &Node, label: Option<&str>) -> Result<bool, String> {
        let Some(label) = label else {
            return Ok(false);
        };
        let run = node.inspect(self.processes, |p: &crate::process::Procs| p.run_of(label));
        match run.flatten() {
            Some(Ok(pid)) => Ok(std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim_end() == "ovs-vswitchd")),
            Some(Err(sys::Exit::Code(c))) => Err(format!("exit status {c}")),
            Some(Err(sys::Exit::Signal(s))) => Err(format!("signal {s}")),
            Some(Err(sys::Exit::Unknown)) => Err("it ended".to_string()),
            None => Ok(false),
        }
    }
}

/// The indexes of the node's links that a datapath has taken (see [`Ready`]).
fn taken(cx: &mut InitCtx<'_>) -> anyhow::Result<Vec<i32>> {
    let sock = cx.rtnl().context("opening a netlink socket")?;
    let mut b = nsfleet_netlink::Batch::new();
    rtnl::dump_links(&mut b, sock.next_seq());
    let mut out = Vec::new();
    sock.dump(&b, |m| {
        out.extend(
            rtnl::parse_link(m)
                .filter(|l| l.flags & IFF_PROMISC != 0 || l.master.is_some())
                .map(|l| l.index),
        )
    })?;
    Ok(out)
}

const IFF_PROMISC: u32 = libc::IFF_PROMISC as u32;

/// The controller relays of OVS switches; with where to tell what becomes of their
/// connections.
pub struct Controllers {
    events: Option<crate::Events>,
}

impl Controllers {
    pub fn new(events: Option<crate::Events>) -> Self {
        Controllers { events }
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

/// A switch's relays: its listeners and the connections they carry, closed by `exit`.
pub struct Relays {
    listeners: Vec<Arc<TcpListener>>,
    /// Every live connection's two sockets, by the connection's number, to shut down at
    /// `exit` (which ends its copiers); a connection takes its own out as it ends.
    conns: Arc<Mutex<Vec<(u64, TcpStream)>>>,
    /// Each controller, with what its relay knows of the switch's connection to it.
    links: Vec<(SocketAddr, Arc<Mutex<Reach>>)>,
}

/// Whether a switch is connected to a controller, as its relay sees it: the connections
/// it carries now, and the state last told ("connected", "disconnected", "unreachable";
/// `None` before the first) with why. `status` says the told state, so that it and
/// `events` never disagree.
#[derive(Default)]
struct Reach {
    live: usize,
    state: Option<&'static str>,
    reason: Option<String>,
}

impl Default for Relays {
    fn default() -> Self {
        Relays {
            listeners: Vec::new(),
            conns: Arc::new(Mutex::new(order::RELAY_CONNS, Vec::new())),
            links: Vec::new(),
        }
    }
}

impl Relays {
    /// A line per controller for `status`: connected, or not and why.
    pub fn describe(&self) -> Vec<String> {
        (self.links.iter())
            .map(|(to, reach)| {
                let r = reach.lock();
                match (r.state, &r.reason) {
                    (Some("connected"), _) => format!("controller tcp:{to}: connected"),
                    (Some(_), Some(why)) => format!("controller tcp:{to}: not connected ({why})"),
                    (Some(state), None) => format!("controller tcp:{to}: not connected ({state})"),
                    (None, _) => format!("controller tcp:{to}: not connected yet"),
                }
            })
            .collect()
    }
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
        node.config()
            .ovs
            .as_ref()
            .is_some_and(|o| !o.controllers.is_empty())
    }

    fn init(&self, cx: &mut InitCtx<'_>, relays: &mut Relays) -> anyhow::Result<()> {
        let config = cx.config();
        add_addresses(cx, controllers_of(&config))?;
        for &to in controllers_of(&config) {
            // This thread is in the switch's namespace: so is the listener, for good.
            let listener = TcpListener::bind(to)
                .with_context(|| format!("the relay to controller {to} in {}", cx.node.name()))?;
            let listener = Arc::new(listener);
            let from = origin(cx, to)?;
            let reach = Arc::new(Mutex::new(order::RELAY_REACH, Reach::default()));
            let ends = Ends {
                to,
                conns: relays.conns.clone(),
                reach: reach.clone(),
                teller: self.events.clone().map(|e| (e, cx.node.name().to_string())),
            };
            let l = listener.clone();
            std::thread::Builder::new()
                .name(format!("relay-{}", to.port()))
                .spawn(move || relay(&l, &from, ends))?;
            relays.listeners.push(listener);
            relays.links.push((to, reach));
        }
        Ok(())
    }

    /// Relays of controllers the switch no longer has are closed.
    fn retire(&self, cx: &mut InitCtx<'_>, relays: &mut Relays, was: &Shape) -> anyhow::Result<()> {
        if controllers_of(&was.config) != controllers_of(&cx.config()) {
            self.exit(cx.node, relays);
            *relays = Relays::default();
        }
        Ok(())
    }

    /// And relays made for the ones it now has.
    fn extend(
        &self,
        cx: &mut InitCtx<'_>,
        relays: &mut Relays,
        _was: &Shape,
    ) -> anyhow::Result<()> {
        match relays.listeners.is_empty() {
            true => self.init(cx, relays),
            false => Ok(()),
        }
    }

    fn exit(&self, _node: &Node, relays: &mut Relays) {
        for l in &relays.listeners {
            // SAFETY: shutdown(2) on a descriptor the listener owns; it wakes accept().
            unsafe { libc::shutdown(l.as_raw_fd(), libc::SHUT_RDWR) };
        }
        for (_, c) in relays.conns.lock().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}

/// The loopback's interface index, in every namespace.
const LO: i32 = 1;

/// Each controller's address that is not a loopback one, once, on the switch's `lo`, for
/// its relay to listen on. One already there (two controllers on one address, a change
/// that keeps a controller's address) is kept: `retire` leaves them, as they harm nothing
/// in a namespace that routes nothing.
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

fn controllers_of(config: &NodeConfig) -> &[SocketAddr] {
    config.ovs.as_ref().map_or(&[][..], |o| &o.controllers)
}

/// The namespace connections to `to` are made from: the fleet's node that has its
/// address, else the host's.
fn origin(cx: &InitCtx<'_>, to: SocketAddr) -> anyhow::Result<OwnedFd> {
    match holder(cx.peers(), to) {
        Some(n) => n
            .dup_netns()
            .with_context(|| format!("controller {to}: node {} is gone", n.name())),
        None => Ok(cx.home().try_clone_to_owned()?),
    }
}

/// The node of the fleet that has `to`'s address, if one has.
fn holder(nodes: &NodeTable, to: SocketAddr) -> Option<&Arc<Node>> {
    let ip = to.ip();
    nodes
        .iter()
        .find(|n| n.wiring().addrs().any(|a| a.addr == ip))
}

/// What a relay's connections share: where they go, the sockets `exit` shuts down, what
/// `status` says of them, and where (with the switch's name) their changes are told.
#[derive(Clone)]
struct Ends {
    to: SocketAddr,
    conns: Arc<Mutex<Vec<(u64, TcpStream)>>>,
    /// Protects the switch's connections to the controller and the state last told:
    /// held from a change to its event's publication, so that events come out one at a
    /// time, in the order of the changes, and only when the state changes.
    reach: Arc<Mutex<Reach>>,
    teller: Option<(crate::Events, String)>,
}

impl Ends {
    /// Records a change of the switch's connections (`f` changes the count and says the
    /// state it leaves, with why), and tells it if the state is news.
    fn change(&self, f: impl FnOnce(&mut usize) -> (&'static str, Option<String>)) {
        let mut reach = self.reach.lock();
        let (state, reason) = f(&mut reach.live);
        // The latest reason, for `status`, even when the state is no news.
        reach.reason = reason.clone();
        if reach.state == Some(state) {
            return;
        }
        reach.state = Some(state);
        if let Some((events, node)) = &self.teller {
            events(crate::Event::Controller(ControllerEvent::Controller {
                node: node.clone(),
                controller: format!("tcp:{}", self.to),
                state,
                reason,
            }));
        }
    }
}

/// Numbers connections, so that each takes its own sockets out of `Relays::conns`.
static CONNECTIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Accepts the switch's connections until the listener is shut down, each relayed to
/// the controller from the namespace `from` on threads of its own.
fn relay(listener: &TcpListener, from: &OwnedFd, ends: Ends) {
    // Threads made from here on are in `from` too: the outgoing sockets are made there.
    if let Err(e) = sys::ns::setns_net(from.as_fd()) {
        let why = format!("entering the namespace to connect from: {e}");
        ends.change(|_| ("unreachable", Some(why)));
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
/// side ends.
fn carry(inner: TcpStream, ends: &Ends) {
    let outer = match TcpStream::connect_timeout(&ends.to, Duration::from_secs(5)) {
        Ok(outer) => outer,
        Err(e) => {
            // Unreachable: the switch retries, as it would with the controller itself.
            ends.change(|live| match live {
                0 => ("unreachable", Some(e.to_string())),
                _ => ("connected", None),
            });
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
    ends.change(|live| {
        *live += 1;
        ("connected", None)
    });
    let back = std::thread::Builder::new()
        .name("relay-back".into())
        .spawn(move || copy(b, a));
    copy(inner, outer);
    let _ = back.map(|t| t.join());
    ends.conns.lock().retain(|(c, _)| *c != id);
    ends.change(|live| {
        *live -= 1;
        match live {
            0 => ("disconnected", None),
            _ => ("connected", None),
        }
    });
}

/// Copies `from` to `to` until `from` ends, then ends both.
fn copy(mut from: TcpStream, mut to: TcpStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

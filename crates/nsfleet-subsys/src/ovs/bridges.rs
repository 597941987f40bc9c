//! `ovs-bridges`: each OVS switch's bridge in the hub's database, made once the hub's
//! start line runs, changed in place or made again when the switch changes (`apply`),
//! deleted with its ports when the switch goes and the hub stays; and at the hub's end,
//! its ovs-vswitchd ended with its sockets closed many at once. [`Switches`] records the
//! bridges made, for the relays. It never starts the hub's daemons (`process` does, with
//! `hub.rs`'s line) and never waits for a switch's ports (`ready.rs`), only, between
//! transactions, for ovs-vswitchd to take the bridges of the one before.

use super::hub::{
    answers, bridge_socket, connect_error, database_gone, database_socket, hub_run_dir, log_end,
    nothing_listens, vswitchd_runs, HUB_LABEL,
};
use super::vsctl::{bridge_args, change_args, del_br, del_port_args, vsctl, DB_WAIT};
use super::{bridge_name, in_kernel};
use crate::Commands;
use anyhow::Context;
use nsfleet_core::{InitCtx, Node, Phase, Shape, Subsystem};
use nsfleet_locks::{order, Mutex};
use nsfleet_netlink::rtnl;
use nsfleet_sys as sys;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

/// Whether a changed switch's bridge is changed in place (see [`change_args`]): it was a
/// switch of the fleet's Open vSwitch and stays on the same datapath. Made again, a
/// bridge closes and opens every port (each close waits for an RCU grace period) and
/// loses its flows: a change of the fail mode of Mininet's tree1024's 33 switches took
/// 26 s, and a host added to one of its switches 1.2 s.
fn in_place(was: &Shape, node: &Node) -> bool {
    let config = node.config();
    match (was.config.ovs.as_ref(), config.ovs.as_ref()) {
        (Some(old), Some(new)) => in_kernel(old.datapath) == in_kernel(new.datapath),
        _ => false,
    }
}

/// The fleet's switches whose bridges are made, by name: each one's datapath id and
/// controllers. Written by [`Bridges`] as bridges are made and go, read by the relays.
/// By name, as `Bridges` asks of every node of a run; a relay looks a datapath id up
/// once per connection.
#[derive(Clone)]
pub struct Switches(Arc<Mutex<HashMap<String, KnownSwitch>>>);

/// A switch's datapath id and controllers.
type KnownSwitch = (u64, Vec<SocketAddr>);

impl Default for Switches {
    fn default() -> Self {
        Switches(Arc::new(Mutex::new(order::OVS_SWITCHES, HashMap::new())))
    }
}

impl Switches {
    /// Records switch `node`'s bridge as made.
    fn add(&self, node: &Node) {
        if let Some(ovs) = node.config().ovs.as_ref() {
            let dpid = nsfleet_topology::kind::ovs::dpid_of(node.name(), ovs);
            let entry = (dpid, ovs.controllers.clone());
            self.0.lock().insert(node.name().to_string(), entry);
        }
    }

    fn remove(&self, node: &Node) {
        self.0.lock().remove(node.name());
    }

    /// Whether no switch's bridge is made.
    fn is_empty(&self) -> bool {
        self.0.lock().is_empty()
    }

    /// Whether switch `name`'s bridge is made.
    fn has(&self, name: &str) -> bool {
        self.0.lock().contains_key(name)
    }

    /// The name of the switch of datapath id `dpid`.
    pub(super) fn name_of(&self, dpid: u64) -> Option<String> {
        (self.0.lock().iter())
            .find(|(_, (d, _))| *d == dpid)
            .map(|(name, _)| name.clone())
    }

    /// The switches that have controller `to`.
    pub(super) fn of_controller(&self, to: SocketAddr) -> Vec<String> {
        (self.0.lock().iter())
            .filter(|(_, (_, cs))| cs.contains(&to))
            .map(|(name, _)| name.clone())
            .collect()
    }
}

/// Each OVS switch's bridge, in the fleet's Open vSwitch: made in the Ready phase, once
/// the hub's start line runs (before `ovs-ready` waits for it), by `ovs-vsctl` on the hub's
/// database, reached through its init's root (`/proc/PID/root`), so that nothing enters
/// the hub's world; changed in place, or made again, when the switch changes (`apply`);
/// deleted, with its ports, when the switch goes and the hub stays.
pub struct Bridges {
    /// What became of the hub's start line (`process` answers).
    commands: Arc<dyn Commands>,
    switches: Switches,
    /// Serialises the making of bridges (see `init`).
    making: Mutex<()>,
}

/// How many transactions, at most, the bridges of one run's switches are made in; each
/// is sent once ovs-vswitchd has taken the one before (see `Bridges::taken`). In one
/// transaction, ovsdb-server builds all it takes at once (the rows, its update to
/// ovs-vswitchd, the status written back for every port) and keeps the heap it grew:
/// 3.7 MB against 2.7 in five (64 hosts, 9 switches), 25.7 against 12.6 MB in eight
/// (1,024 hosts, 33 switches). Each transaction costs a reconfiguration over all the
/// bridges, and each `ovs-vsctl` reads the whole database first: one per switch, waited
/// for, took 16.7 s to make tree1024's bridges, against 7.4-9.9 s in one to nine.
const TRANSACTIONS: usize = 8;

/// Threads that close the hub's sockets at its end (see `Bridges::end_vswitchd`).
const CLOSERS: usize = 64;

impl Bridges {
    pub fn new(commands: Arc<dyn Commands>, switches: Switches) -> Self {
        Bridges {
            commands,
            switches,
            making: Mutex::new(order::OVS_MAKING, ()),
        }
    }

    /// The hub's database, as the host reaches it, once it is served (a connection is
    /// taken: its socket exists a moment before ovsdb-server listens on it): its start
    /// line has just begun, and `ovs-vsctl --retry` would wait its reconnection's
    /// backoff (1 s) where a try every 10 ms waits a few. A start line that has ended
    /// is said at once, with its log's last lines; so is a database that does not answer
    /// once ovs-vswitchd runs (its start line served the database first): its
    /// ovsdb-server has ended, and every wait for it would last its bound.
    fn database(&self, hub: &Node, log_dir: &std::path::Path) -> anyhow::Result<String> {
        let sock = database_socket(hub, &*self.commands)
            .context("the fleet's Open vSwitch node has no world")?;
        let since = std::time::Instant::now();
        while let Some(e) = connect_error(&sock).filter(|_| since.elapsed() < DB_WAIT) {
            match vswitchd_runs(hub, &*self.commands) {
                Err(exit) => return Err(ended(&exit, hub, log_dir)),
                Ok(true) if nothing_listens(&e) => return Err(database_gone(&e)),
                Ok(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        Ok(format!("unix:{sock}"))
    }

    /// Makes the bridges of `nodes` (OVS switches of one hub) in one transaction.
    /// `running`: the hub had bridges before this change began.
    fn make(&self, db: &str, nodes: &[&Node], running: bool) -> anyhow::Result<()> {
        // On a hub that has bridges already (`apply`), a switch being removed goes only
        // once the change is done (see nsfleet-core's `reshape`), and its ports' rows are
        // still there: a new switch may give a port one of their names, which Open
        // vSwitch keeps unique. Not on a fresh hub: each deletion that finds nothing
        // still has ovs-vsctl read its whole database.
        let mut args = Vec::new();
        for (k, node) in nodes.iter().enumerate() {
            let config = node.config();
            let ovs = config.ovs.as_ref().context("not an Open vSwitch switch")?;
            if running {
                for i in node.wiring().ifaces.iter() {
                    args.extend(del_port_args(&i.name));
                }
            }
            args.extend(bridge_args(node, ovs, k)?);
        }
        let names: Vec<&str> = nodes.iter().map(|n| bridge_name(n)).collect();
        // Known to the relays before ovs-vswitchd can connect them to a controller.
        for node in nodes {
            self.switches.add(node);
        }
        let made = vsctl(db, &args, false);
        if made.is_err() {
            nodes.iter().for_each(|n| self.switches.remove(n));
        }
        made.with_context(|| format!("making Open vSwitch bridge(s) {}", names.join(", ")))
    }

    /// Waits until the hub's ovs-vswitchd has taken the bridges of `nodes` (each bridge's
    /// OpenFlow socket is there, as `ovs-ready` sees it), or says why it never will: its
    /// start line ended, or the wait's bound passed.
    fn taken(&self, hub: &Node, nodes: &[&Node], log_dir: &std::path::Path) -> anyhow::Result<()> {
        let dir = hub_run_dir(hub, &*self.commands)
            .context("the fleet's Open vSwitch node has no world")?;
        let since = std::time::Instant::now();
        while !(nodes.iter()).all(|n| std::path::Path::new(&bridge_socket(&dir, n)).exists()) {
            if let Err(exit) = vswitchd_runs(hub, &*self.commands) {
                return Err(ended(&exit, hub, log_dir));
            }
            if since.elapsed() > DB_WAIT {
                let names: Vec<&str> = nodes.iter().map(|n| bridge_name(n)).collect();
                anyhow::bail!(
                    "ovs-vswitchd has not taken bridge(s) {} within {} s; its log ends:\n{}",
                    names.join(", "),
                    DB_WAIT.as_secs(),
                    log_end(hub, log_dir)
                );
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(())
    }

    /// Makes a changed switch's bridge again: deleted, then made as it now is (in two
    /// transactions: see `bridge_args`). The deletion waits until ovs-vswitchd has let
    /// go of the bridge: until then its ports are still taken and its OpenFlow socket
    /// still there, and `ovs-ready` would take the old bridge for the new one (seen:
    /// Mininet's controllers2.py pinged across a switch not yet connected again).
    fn remake(&self, node: &Node, log_dir: &std::path::Path) -> anyhow::Result<()> {
        let hub = (node.host()).context("the fleet's Open vSwitch node is gone")?;
        let db = self.database(&hub, log_dir)?;
        let br = bridge_name(node);
        del_br(&db, br, true).with_context(|| format!("deleting Open vSwitch bridge {br}"))?;
        self.switches.remove(node);
        let running = !self.switches.is_empty();
        self.make(&db, &[node], running)
    }

    /// Changes a switch's bridge in place from its shape `was` (see [`change_args`]),
    /// in its two transactions, each waited for until ovs-vswitchd has taken it; the
    /// relays know its datapath id and controllers as they now are before the second.
    fn change(&self, node: &Node, was: &Shape, log_dir: &std::path::Path) -> anyhow::Result<()> {
        let hub = (node.host()).context("the fleet's Open vSwitch node is gone")?;
        let db = self.database(&hub, log_dir)?;
        let config = node.config();
        let ovs = config.ovs.as_ref().context("not an Open vSwitch switch")?;
        let br = bridge_name(node);
        let (deletions, rest) = change_args(node, ovs, was)?;
        if !deletions.is_empty() {
            vsctl(&db, &deletions, true)
                .with_context(|| format!("deleting ports of Open vSwitch bridge {br}"))?;
        }
        self.switches.add(node);
        vsctl(&db, &rest, true).with_context(|| format!("changing Open vSwitch bridge {br}"))
    }

    /// Ends the hub's ovs-vswitchd with its ports' packet sockets closed many at once.
    /// Each socket's release waits for an RCU grace period (`packet_release`), and a
    /// process that exits closes its descriptors one after another: the one
    /// ovs-vswitchd of Mininet's tree1024 took 13 s to end. Holding a duplicate of each
    /// socket, ovs-vswitchd's own closes are only a count going down, and it ends at
    /// once; the duplicates are then closed from many threads, whose grace periods
    /// overlap.
    fn end_vswitchd(&self, hub: &Node) {
        let Some((pidfd, pid)) = self.commands.running(hub, HUB_LABEL) else {
            return;
        };
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            return;
        };
        let sockets: Vec<OwnedFd> = (fds.flatten())
            .filter(|e| {
                std::fs::read_link(e.path())
                    .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
            })
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .filter_map(|n| sys::pidfd_getfd(pidfd.as_fd(), n).ok())
            .collect();
        let _ = sys::kill_pidfd(pidfd.as_fd(), libc::SIGKILL);
        let _ = sys::poll_exited(&[pidfd.as_fd()], Duration::from_secs(5));
        let per_thread = sockets.len().div_ceil(CLOSERS).max(1);
        let mut sockets = sockets;
        std::thread::scope(|s| {
            while !sockets.is_empty() {
                let share: Vec<OwnedFd> = sockets.drain(..per_thread.min(sockets.len())).collect();
                s.spawn(move || drop(share));
            }
        });
    }

    /// Deletes the bridge and the switch's ports, if the hub is not going too: for a
    /// switch that `apply` removes (its links' far ends may be going with it, and only
    /// a namespace's end deletes a veth pair of which neither end's node is left).
    fn unmake(&self, node: &Node) {
        let Some(hub) = node.host() else { return };
        // Not waited for: a database that does not answer now has ended, and its rows
        // with it.
        if let Some(sock) = database_socket(&hub, &*self.commands).filter(|s| answers(s)) {
            let _ = del_br(&format!("unix:{sock}"), bridge_name(node), false);
        }
        let indexes: Vec<i32> = node.wiring().ifaces.iter().map(|i| i.index).collect();
        // A descriptor of its own: the hub's lock is not held through the deletions.
        if let Some(fd) = hub.dup_netns() {
            let _ = delete_links(fd, &indexes);
        }
    }
}

/// What a hub whose start line ended (`exit`) is said with: its log's last lines.
fn ended(exit: &str, hub: &Node, log_dir: &std::path::Path) -> anyhow::Error {
    let log = log_end(hub, log_dir);
    anyhow::anyhow!("the fleet's Open vSwitch's start line ended ({exit}); its log ends:\n{log}")
}

/// Deletes links `indexes` of the namespace `netns`, through a socket opened there (this
/// thread stays where it is), a batch at a time; what is gone already is no error.
fn delete_links(netns: OwnedFd, indexes: &[i32]) -> anyhow::Result<()> {
    let (mut sock, _) = crate::link::loose::socket_in(Some(netns.as_fd()))?;
    for some in indexes.chunks(nsfleet_netlink::socket::MAX_BATCH) {
        let mut b = nsfleet_netlink::Batch::new();
        for &i in some {
            rtnl::del_link(&mut b, sock.next_seq(), i);
        }
        let _ = sock.execute(&b)?;
    }
    Ok(())
}

impl Subsystem for Bridges {
    type State = ();

    fn name(&self) -> &'static str {
        "ovs-bridges"
    }

    /// Once every node's processes are started: the hub's too, whatever worker took it.
    fn phase(&self) -> Phase {
        Phase::Ready
    }

    /// The switches, and the hub, whose ovs-vswitchd `exit` ends.
    fn wants(&self, node: &Node) -> bool {
        let config = node.config();
        config.ovs.is_some() || config.ovs_hub.is_some()
    }

    /// The first switch of a run to get here makes the bridges of every switch of the
    /// run (see [`TRANSACTIONS`]); the others find theirs made.
    fn init(&self, cx: &mut InitCtx<'_>, _: &mut ()) -> anyhow::Result<()> {
        let Some(hub) = cx.node.host() else {
            return Ok(()); // the hub
        };
        let _one = self.making.lock();
        if self.switches.has(cx.node.name()) {
            return Ok(());
        }
        let of_hub = |n: &&Arc<Node>| n.host().is_some_and(|h| Arc::ptr_eq(&h, &hub));
        let todo: Vec<&Node> = (cx.peers().iter())
            .filter(|n| n.config().ovs.is_some() && !self.switches.has(n.name()))
            .filter(of_hub)
            .map(|n| &**n)
            .collect();
        let db = self.database(&hub, cx.log_dir)?;
        let running = !self.switches.is_empty();
        let runs: Vec<&[&Node]> = todo
            .chunks(todo.len().div_ceil(TRANSACTIONS).max(1))
            .collect();
        for (k, some) in runs.iter().enumerate() {
            self.make(&db, some, running)?;
            // The last is left to `ovs-ready`, which waits for every switch's ports.
            if k + 1 < runs.len() {
                self.taken(&hub, some, cx.log_dir)?;
            }
        }
        Ok(())
    }

    /// A changed switch's bridge is changed in place (see [`in_place`]), or made again,
    /// as it now is.
    fn extend(&self, cx: &mut InitCtx<'_>, _: &mut (), was: &Shape) -> anyhow::Result<()> {
        match cx.node.config().ovs {
            Some(_) if in_place(was, cx.node) => self.change(cx.node, was, cx.log_dir),
            Some(_) => self.remake(cx.node, cx.log_dir),
            None => Ok(()),
        }
    }

    fn exit(&self, node: &Node, _: &mut ()) {
        if node.config().ovs_hub.is_some() {
            self.end_vswitchd(node);
        }
    }

    /// A switch whose hub goes too needs nothing (its bridge and ports go with the hub's
    /// daemons and namespace): the hub's processes are taken in the same batch, before
    /// this runs.
    fn exit_batch(&self, batch: &mut [(&Node, &mut ())]) {
        for (node, _) in batch.iter().filter(|(n, _)| n.config().ovs.is_some()) {
            self.switches.remove(node);
            let hub_stays = (node.host()).is_some_and(|h| self.commands.held(&h));
            if hub_stays {
                self.unmake(node);
            }
        }
    }
}

//! The fleet's Open vSwitch (nsfleet-topology's `kind/ovs.rs`): one ovsdb-server and one
//! ovs-vswitchd, started by the first command of the fleet's Open vSwitch node (the hub,
//! [`start_command`]) inside its world: Open vSwitch's folders are that node's private
//! ones, its sockets and its datapath's ports are in that node's namespace, and nothing
//! reaches an Open vSwitch the host may run. Every OVS switch node lives in the hub's
//! namespace (a tenant, see nsfleet-core's `node.rs`), where its ports are; [`Bridges`]
//! makes its bridge in the hub's database, [`Ready`] waits until ovs-vswitchd has taken
//! its ports. They end with the hub's world, as any daemon of a node does.
//!
//! The switches' controllers are addresses as the host sees them (or as the fleet's node
//! that has the address does), which the hub's namespace cannot reach: for each, a relay
//! ([`Controllers`]) listens inside the hub's namespace on the controller's own address
//! and port (an address other than the loopback's put on the namespace's `lo`), so that
//! a bridge's controller is the file's, as `ovs-vsctl get-controller` shows it, and makes
//! each connection it takes again from the host's namespace (or that node's). Which
//! switch a connection is from, the relay reads from the OpenFlow handshake (the
//! datapath id of the switch's features reply). When the fleet goes, or its supervisor
//! dies, the relays' sockets close and the switches are in their fail mode, as with a
//! controller that went away.

use anyhow::Context;
use nsfleet_core::{InitCtx, Node, NodeTable, Phase, Shape, Subsystem};
use nsfleet_locks::{order, Mutex};
use nsfleet_netlink::rtnl;
use nsfleet_sys as sys;
use nsfleet_topology::{Datapath, NodeConfig, OvsSwitch};
use std::collections::HashMap;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

/// The bridge's name: the switch's, as Mininet's `dpctl` and `ovs-ofctl dump-flows s1`
/// expect (the topology checked that it can name a device: the bridge's own port is one).
pub fn bridge_name(node: &Node) -> &str {
    node.name()
}

/// Whether an OVS switch on `datapath` forwards in the kernel.
pub fn in_kernel(datapath: Datapath) -> bool {
    match datapath {
        Datapath::Kernel => true,
        Datapath::User => false,
        Datapath::Auto => crate::probe::has_ovs_kernel_datapath(),
    }
}

/// What `processes` calls the hub's start line.
pub const HUB_LABEL: &str = "ovs-vswitchd: the fleet's Open vSwitch";

/// The shell line that starts the fleet's Open vSwitch in the hub node: its database made
/// and served, then ovs-vswitchd in the foreground, the command nsfleet watches; with
/// what `status` and `events` call it. `None` for a node that is no hub. The same for
/// every hub: a change of the fleet's switches never starts it again.
pub fn start_command(node: &Node) -> Option<(String, String)> {
    node.config().ovs_hub.as_ref()?;
    // The userspace datapath forwards what it reads from its ports' packet sockets;
    // with TSO support on it keeps the senders' checksum offload (their packets'
    // checksums are left to the NIC) and completes them, and TCP across it works. The
    // kernel datapath ignores it.
    let tso = " -- set Open_vSwitch . other_config:userspace-tso-enable=true";
    let (settle, said) = match crate::probe::has_ovs_kernel_datapath() {
        true => (EARLY_BOOT, "the kernel has the openvswitch module: switches on datapath auto use the kernel datapath"),
        false => ("", "this kernel has no openvswitch module: switches use the userspace datapath"),
    };
    let line = format!(
        "set -e; mkdir -p /run/openvswitch; \
         ovsdb-tool create /etc/openvswitch/conf.db /usr/share/openvswitch/vswitch.ovsschema; \
         ovsdb-server /etc/openvswitch/conf.db --remote=punix:/run/openvswitch/db.sock --pidfile --detach --no-chdir --log-file; \
         ovs-vsctl --no-wait init{tso}; \
         echo \"nsfleet: the fleet's Open vSwitch; {said}\"; {settle}\
         exec ovs-vswitchd --pidfile --no-chdir --log-file"
    );
    Some((HUB_LABEL.to_string(), line))
}

/// The `ovs-vsctl` commands that make switch `node`'s bridge, the `k`th of its
/// transaction: its rows created outright (each port's interface, with its OpenFlow
/// number as the topology says, see `OvsSwitch::numbered`; the bridge's own internal
/// port; its controllers) and the bridge added to Open vSwitch, as `add-br`, `add-port`
/// and `set-controller` would. Those look each name up among all rows, for every
/// command: a transaction of Mininet's tree1024 (1,056 ports) took ovs-vsctl 0.5 s of
/// CPU. (A bridge of its name deleted in the same transaction would leave its rows
/// until the transaction ends: `remake` deletes in one of its own.)
fn bridge_args(node: &Node, ovs: &OvsSwitch, k: usize) -> anyhow::Result<Vec<String>> {
    let wiring = node.wiring();
    let br = bridge_name(node);
    let mut rows = Rows::default();
    let ports = numbered_ports(ovs, &wiring)?;
    let own = [(br, None)].into_iter();
    let all = own.chain(ports.into_iter().map(|(name, n)| (name, Some(n))));
    let port_ids: Vec<String> = (all.enumerate())
        .map(|(j, (name, number))| rows.port(&format!("{k}_{j}"), name, number))
        .collect();
    let kind = if in_kernel(ovs.datapath) {
        "system"
    } else {
        "netdev"
    };
    let mut columns = vec![
        format!("name={}", quoted(br)),
        format!("ports=[{}]", port_ids.join(",")),
        format!("datapath_type={kind}"),
    ];
    columns.extend(bridge_settings(node, ovs, &mut rows, k));
    let bridge = rows.create(format!("b{k}"), "Bridge", columns);
    let mut args = rows.0;
    args.extend(["--", "add", "Open_vSwitch", ".", "bridges", &bridge].map(String::from));
    Ok(args)
}

/// The ports of `wiring` with their OpenFlow numbers (`OvsSwitch::numbered`). The
/// topology checked the numbers: a clash here would be a bug.
fn numbered_ports<'a>(
    ovs: &OvsSwitch,
    wiring: &'a nsfleet_topology::NodeWiring,
) -> anyhow::Result<Vec<(&'a str, u16)>> {
    (ovs.numbered(wiring.ifaces.iter().map(|i| i.name.as_str())))
        .map_err(|why| anyhow::anyhow!("{why}"))
}

/// The `ovs-vsctl` command that deletes port `name` (and its interface) from whatever
/// bridge has it, if one does.
fn del_port_args(name: &str) -> [String; 4] {
    ["--", "--if-exists", "del-port", name].map(String::from)
}

/// A change of a bridge in place: its deletions (maybe none), then the rest.
type Change = (Vec<String>, Vec<String>);

/// The two `ovs-vsctl` transactions that change switch `node`'s bridge in place from
/// its shape `was` (see [`in_place`]): first every port that is not kept (its link gone
/// or made anew, or its number changed) deleted (none: no first transaction); then every
/// port the switch now has that is not kept created, with its number, and the bridge's
/// settings given as they now are. Ports kept stay open, and the bridge keeps its flows.
/// Two, because ovs-vswitchd knows a port by its name: one of a name deleted and created
/// in one transaction would stay open on the device that is gone. A port is deleted by
/// name wherever it is (`--if-exists`): a switch that an undone `apply` was removing had
/// its ports' rows still, and `was` has none of them.
fn change_args(node: &Node, ovs: &OvsSwitch, was: &Shape) -> anyhow::Result<Change> {
    let wiring = node.wiring();
    let old = was
        .config
        .ovs
        .as_ref()
        .context("it was no Open vSwitch switch")?;
    let before = numbered_ports(old, &was.wiring)?;
    let now = numbered_ports(ovs, &wiring)?;
    let kept = |&(name, n): &(&str, u16)| {
        before.contains(&(name, n))
            && wiring
                .iface(name)
                .is_some_and(|i| crate::kept(&was.wiring, i))
    };
    let mut deletions = Vec::new();
    let mut deleted: Vec<&str> = Vec::new();
    for port in before.iter().chain(&now).filter(|p| !kept(p)) {
        if !deleted.contains(&port.0) {
            deleted.push(port.0);
            deletions.extend(del_port_args(port.0));
        }
    }
    let mut rows = Rows::default();
    let added: Vec<String> = (now.iter().filter(|p| !kept(p)).enumerate())
        .map(|(j, (name, n))| rows.port(&format!("0_{j}"), name, Some(*n)))
        .collect();
    let columns = bridge_settings(node, ovs, &mut rows, 0);
    let mut args = rows.0;
    let br = bridge_name(node).to_string();
    for port in added {
        args.extend(["--".to_string(), "add".into(), "Bridge".into(), br.clone()]);
        args.extend(["ports".to_string(), port]);
    }
    args.extend(["--".to_string(), "set".into(), "Bridge".into(), br]);
    args.extend(columns);
    Ok((deletions, args))
}

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

/// `ovs-vsctl` commands that create rows, each named for the rest of its transaction.
#[derive(Default)]
struct Rows(Vec<String>);

impl Rows {
    /// Creates a row of `table` with `columns`, as `@id`, which it returns.
    fn create(&mut self, id: String, table: &str, columns: Vec<String>) -> String {
        self.0.extend([
            "--".to_string(),
            format!("--id=@{id}"),
            "create".into(),
            table.into(),
        ]);
        self.0.extend(columns);
        format!("@{id}")
    }

    /// Creates port `name` (and its interface) as `@p{id}`, which it returns: with its
    /// OpenFlow number, or without one, the bridge's own internal port.
    fn port(&mut self, id: &str, name: &str, number: Option<u16>) -> String {
        let mut columns = vec![format!("name={}", quoted(name))];
        columns.push(match number {
            Some(n) => format!("ofport_request={n}"),
            None => "type=internal".to_string(),
        });
        let iface = self.create(format!("i{id}"), "Interface", columns);
        let columns = vec![
            format!("name={}", quoted(name)),
            format!("interfaces={iface}"),
        ];
        self.create(format!("p{id}"), "Port", columns)
    }
}

/// A string as ovs-vsctl's values take it: quoted, so that a `:` or `,` in it is not
/// read as a map's or a set's.
fn quoted(s: &str) -> String {
    format!("\"{s}\"")
}

/// Waits, said, until the system has been up 10 s. Open vSwitch 3.1 (Debian 12's) counts
/// the CPUs at most every 10 s of `time_msec()`, which starts at boot, and its count
/// starts at 0: an ovs-vswitchd started in a system's first 10 s gives the kernel
/// datapath no upcall handler (its log: "Overriding n-handler-threads to 0"), and every
/// packet that misses the datapath's flows is lost. Seen in a guest of `nsfleet vm`,
/// where a fleet comes up 5 s after boot; the userspace datapath has no handlers.
const EARLY_BOOT: &str = "up=$(cut -d. -f1 /proc/uptime); if [ \"$up\" -lt 10 ]; then \
     echo \"nsfleet: waiting $((10 - up)) s: Open vSwitch counts no CPU in a system's first 10 s and would start no upcall handler\"; \
     sleep $((10 - up)); fi; ";

/// The bridge's own columns, as `create` and `set` take them, each one given (empty
/// where the file gives none, so that `set` clears what a change took away); its
/// controllers' rows, the `k`th bridge's of the transaction, made in `rows`. In-band
/// control is off, as Mininet sets it: the controllers are reached out of band (the
/// relays), and in-band control would look for a route to each one's address every
/// second and log that it has none. Its datapath id is always given, so that the relays
/// know its connections.
fn bridge_settings(node: &Node, ovs: &OvsSwitch, rows: &mut Rows, k: usize) -> Vec<String> {
    let controllers: Vec<String> = (ovs.controllers.iter().enumerate())
        .map(|(j, c)| {
            let target = format!("target={}", quoted(&format!("tcp:{c}")));
            rows.create(format!("c{k}_{j}"), "Controller", vec![target])
        })
        .collect();
    let mode = match ovs.fail_mode {
        Some(nsfleet_topology::FailMode::Secure) => "secure",
        Some(nsfleet_topology::FailMode::Standalone) => "standalone",
        None => "[]",
    };
    let dpid = nsfleet_topology::kind::ovs::dpid_of(node.name(), ovs);
    vec![
        "other_config:disable-in-band=true".to_string(),
        format!("controller=[{}]", controllers.join(",")),
        format!("protocols=[{}]", ovs.protocols.join(",")),
        format!("fail_mode={mode}"),
        format!("other_config:datapath-id={dpid:016x}"),
    ]
}

/// Waits, once a switch's processes are started, until its ovs-vswitchd has taken every
/// port, so that `up` returns with switches that forward: the userspace datapath puts
/// each port it opens in promiscuous mode (as a user's request, which the link's flags
/// show), the kernel's enslaves it to its `ovs-system` device (its promiscuity is then
/// the kernel's own, which the flags do not show); and until its bridge's OpenFlow
/// socket is there (`ovs-ofctl dump-flows s1` answers). About 0.13 s for a fresh fleet
/// on this machine class, most of it ovs-vswitchd's own start, which takes little CPU:
/// in the Ready phase, so that the switches' waits overlap.
pub struct Ready {
    /// The `processes` subsystem: a switch whose start line has ended is said at once,
    /// not after the wait's bound.
    pub processes: nsfleet_core::SubsysId,
}

/// How long a switch's ovs-vswitchd gets to take its ports.
const READY_WAIT: Duration = Duration::from_secs(20);

/// How often a wait for ports asks whether the database still answers.
const DB_CHECK_EVERY: Duration = Duration::from_secs(1);

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
        let hub = cx
            .node
            .host()
            .context("the fleet's Open vSwitch node is gone")?;
        // The bridge's OpenFlow socket, looked for once its ports are taken.
        let socket = hub_run_dir(&hub, self.processes)
            .map(|dir| format!("{dir}/{}.mgmt", bridge_name(cx.node)));
        let has_socket = || {
            socket
                .as_ref()
                .is_some_and(|s| std::path::Path::new(s).exists())
        };
        let started = std::time::Instant::now();
        // When the database is next asked whether it still answers: once a second, as
        // every connection is a session of ovsdb-server's.
        let mut ask_db_at = started + DB_CHECK_EVERY;
        // The ports not seen taken yet: a port once taken is not asked about again.
        let mut left: Vec<i32> = wiring.ifaces.iter().map(|i| i.index).collect();
        loop {
            let runs = vswitchd_runs(&hub, self.processes);
            let taken = taken(cx, &left)?;
            left.retain(|i| !taken.contains(i));
            let missing: Vec<&str> = (wiring.ifaces.iter())
                .filter(|i| left.contains(&i.index))
                .map(|i| i.name.as_str())
                .collect();
            if missing.is_empty() && runs == Ok(true) && has_socket() {
                return Ok(());
            }
            if runs == Ok(true) && std::time::Instant::now() >= ask_db_at {
                ask_db_at += DB_CHECK_EVERY;
                let sock = database_socket(&hub, self.processes);
                if sock.is_some_and(|s| !answers(&s)) {
                    return Err(database_gone());
                }
            }
            let log = cx.log_dir.join(format!("{}.log", hub.name()));
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

    /// A changed switch's bridge is changed or made again (see `Bridges`): waited for again.
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

/// Open vSwitch's run folder in the hub's world, as the host reaches it (its init's
/// root); `None` while the hub has no world.
fn hub_run_dir(hub: &Node, processes: nsfleet_core::SubsysId) -> Option<String> {
    let pid = hub.inspect(processes, |p: &crate::process::Procs| p.world_pid());
    pid.flatten()
        .map(|pid| format!("/proc/{pid}/root/run/openvswitch"))
}

/// Where the hub's start line is: `Ok(true)` once it has become ovs-vswitchd (its last
/// step, an exec), `Ok(false)` before, `Err` with how it ended.
fn vswitchd_runs(hub: &Node, processes: nsfleet_core::SubsysId) -> Result<bool, String> {
    let run = hub.inspect(processes, |p: &crate::process::Procs| p.run_of(HUB_LABEL));
    match run.flatten() {
        Some(Ok(pid)) => Ok(std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .is_ok_and(|c| c.trim_end() == "ovs-vswitchd")),
        Some(Err(sys::Exit::Code(c))) => Err(format!("exit status {c}")),
        Some(Err(sys::Exit::Signal(s))) => Err(format!("signal {s}")),
        Some(Err(sys::Exit::Unknown)) => Err("it ended".to_string()),
        None => Ok(false),
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
    fn name_of(&self, dpid: u64) -> Option<String> {
        (self.0.lock().iter())
            .find(|(_, (d, _))| *d == dpid)
            .map(|(name, _)| name.clone())
    }

    /// The switches that have controller `to`.
    fn of_controller(&self, to: SocketAddr) -> Vec<String> {
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
    processes: nsfleet_core::SubsysId,
    switches: Switches,
    /// Serialises the making of bridges (see `init`).
    making: Mutex<()>,
}

/// Threads that close the hub's sockets at its end (see `Bridges::end_vswitchd`).
const CLOSERS: usize = 64;

/// How long `ovs-vsctl` waits for the hub's database, which its start line makes.
const DB_WAIT: Duration = Duration::from_secs(20);

impl Bridges {
    pub fn new(processes: nsfleet_core::SubsysId, switches: Switches) -> Self {
        Bridges {
            processes,
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
        let sock = database_socket(hub, self.processes)
            .context("the fleet's Open vSwitch node has no world")?;
        let since = std::time::Instant::now();
        let log = || last_lines(&log_dir.join(format!("{}.log", hub.name())), 5);
        while !answers(&sock) && since.elapsed() < DB_WAIT {
            match vswitchd_runs(hub, self.processes) {
                Err(exit) => anyhow::bail!(
                    "the fleet's Open vSwitch's start line ended ({exit}); its log ends:\n{}",
                    log()
                ),
                Ok(true) => return Err(database_gone()),
                Ok(false) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        Ok(format!("unix:{sock}"))
    }

    /// Makes the bridges of `nodes` (OVS switches of one hub) in one transaction: Open
    /// vSwitch reconfigures itself once per transaction, over all its bridges, and each
    /// `ovs-vsctl` reads the whole database first: a transaction per switch made
    /// Mininet's tree1024 (33 switches, 1,056 ports) wait 2 s more.
    fn make(&self, db: &str, nodes: &[&Node]) -> anyhow::Result<()> {
        // On a hub that has bridges already (`apply`), a switch being removed goes only
        // once the change is done (see nsfleet-core's `reshape`), and its ports' rows are
        // still there: a new switch may give a port one of their names, which Open
        // vSwitch keeps unique. Not on a fresh hub: each deletion that finds nothing
        // still has ovs-vsctl read its whole database.
        let running = !self.switches.is_empty();
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
        self.make(&db, &[node])
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
        let found = hub.inspect(self.processes, |p: &crate::process::Procs| {
            Some((p.pidfd_of(HUB_LABEL)?, p.run_of(HUB_LABEL)?.ok()?))
        });
        let Some((pidfd, pid)) = found.flatten() else {
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
        if let Some(sock) = database_socket(&hub, self.processes).filter(|s| answers(s)) {
            let _ = del_br(&format!("unix:{sock}"), bridge_name(node), false);
        }
        let indexes: Vec<i32> = node.wiring().ifaces.iter().map(|i| i.index).collect();
        // A descriptor of its own: the hub's lock is not held through the deletions.
        if let Some(fd) = hub.dup_netns() {
            let _ = delete_links(fd, &indexes);
        }
    }
}

/// What a hub whose ovs-vswitchd runs and whose database does not answer is told: its
/// ovsdb-server has ended (the start line served the database before it started
/// ovs-vswitchd), and nothing that needs it can happen, or should wait.
fn database_gone() -> anyhow::Error {
    anyhow::anyhow!(
        "the fleet's Open vSwitch database does not answer: its ovsdb-server has ended \
         (ovs-vswitchd runs on, with the switches as they were); `nsfleet down` and `up` \
         again start it afresh"
    )
}

/// The hub's database socket, as the host reaches it; `None` while the hub has no world.
fn database_socket(hub: &Node, processes: nsfleet_core::SubsysId) -> Option<String> {
    Some(format!("{}/db.sock", hub_run_dir(hub, processes)?))
}

/// Whether the database at socket `sock` takes a connection (its socket exists a moment
/// before ovsdb-server listens on it).
fn answers(sock: &str) -> bool {
    std::os::unix::net::UnixStream::connect(sock).is_ok()
}

/// Runs `ovs-vsctl` on database `db` with `args`, and with `wait` until ovs-vswitchd has
/// done what it asks; its message on failure.
fn vsctl(db: &str, args: &[String], wait: bool) -> anyhow::Result<()> {
    let mut cmd = std::process::Command::new("ovs-vsctl");
    cmd.arg(format!("--db={db}"))
        .arg("--retry")
        .arg(format!("--timeout={}", DB_WAIT.as_secs()));
    if !wait {
        cmd.arg("--no-wait");
    }
    cmd.args(args);
    let out = sys::output_of(&mut cmd).context("running ovs-vsctl")?;
    match out.status.success() {
        true => Ok(()),
        false => anyhow::bail!(
            "ovs-vsctl: {}",
            String::from_utf8_lossy(&out.stderr).trim_end()
        ),
    }
}

/// Deletes bridge `br`, if there is one (see [`vsctl`] for `wait`).
fn del_br(db: &str, br: &str, wait: bool) -> anyhow::Result<()> {
    vsctl(
        db,
        &["--", "--if-exists", "del-br", br].map(String::from),
        wait,
    )
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
    /// run in one transaction (see `make`); the others find theirs made.
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
        self.make(&self.database(&hub, cx.log_dir)?, &todo)
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
            let hub_stays = (node.host()).is_some_and(|h| {
                h.inspect(self.processes, |_: &crate::process::Procs| ())
                    .is_some()
            });
            if hub_stays {
                self.unmake(node);
            }
        }
    }
}

/// Which of `indexes` (the switch's ports) a datapath has taken (see [`Ready`]). Asked
/// one link at a time: a dump of the whole namespace, which holds every switch's ports,
/// costs the kernel a scan of its peer ids per link (`peernet2id_alloc`), which at
/// Mininet's tree1024 (1,056 ports, 1,024 peers) took half the machine for 6 s.
fn taken(cx: &mut InitCtx<'_>, indexes: &[i32]) -> anyhow::Result<Vec<i32>> {
    let sock = cx.rtnl().context("opening a netlink socket")?;
    let mut out = Vec::new();
    for &index in indexes {
        let mut b = nsfleet_netlink::Batch::new();
        rtnl::get_link(&mut b, sock.next_seq(), index);
        sock.dump(&b, |m| {
            out.extend(
                rtnl::parse_link(m)
                    .filter(|l| l.flags & IFF_PROMISC != 0 || l.master.is_some())
                    .map(|l| l.index),
            )
        })?;
    }
    Ok(out)
}

const IFF_PROMISC: u32 = libc::IFF_PROMISC as u32;

/// The controller relays of the fleet's Open vSwitch; with where to tell what becomes of
/// the switches' connections, and which switch is which.
pub struct Controllers {
    events: Option<crate::Events>,
    switches: Switches,
}

impl Controllers {
    pub fn new(events: Option<crate::Events>, switches: Switches) -> Self {
        Controllers { events, switches }
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
    pub fn describe(&self, switch: &str, controllers: &[SocketAddr]) -> Vec<String> {
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
            let from = origin(cx, to)?;
            let ends = Ends {
                to,
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

/// What a relay's connections share: where they go, the sockets `Relay::close` shuts down, what
/// `status` says of them, which switch a datapath id is, and where their changes are
/// told.
#[derive(Clone)]
struct Ends {
    to: SocketAddr,
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
/// the controller from the namespace `from` on threads of its own.
fn accept(listener: &TcpListener, from: &OwnedFd, ends: Ends) {
    // Threads made from here on are in `from` too: the outgoing sockets are made there.
    if let Err(e) = sys::ns::setns_net(from.as_fd()) {
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
    let outer = match TcpStream::connect_timeout(&ends.to, Duration::from_secs(5)) {
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

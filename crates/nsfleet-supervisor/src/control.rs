//! The supervisor's control protocol: one JSON object per line over a Unix stream socket
//! (mode 0600, in the fleet's run folder). A request is one line; replies are lines; the
//! reply to `netns` carries the node's namespace descriptor (SCM_RIGHTS).
//!
//! Also the `up` hand-off: the events a starting supervisor writes to the `up` that
//! launched it.

use anyhow::{anyhow, bail, Context};
use nsfleet_core::{CreateReport, Held};
use nsfleet_subsys::process::ProcInfo;
use nsfleet_sys as sys;
use nsfleet_topology::{ClabNode, Impair, Place, Subject};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// A route of a node's, as a `routes` reply carries it.
pub use nsfleet_netlink::rtnl::RouteDst;

/// Longest request line the supervisor reads; anything longer is refused.
pub const MAX_REQUEST: usize = 64 << 10;

/// The longest topology an `apply` may send after its request line (a fleet of the most
/// nodes nsfleet accepts, each with a dozen interfaces, is well within it).
pub const MAX_TOPOLOGY: u64 = 1 << 30;

/// The environment variable `nsfleet exec` gives the commands it runs (the fleet's name
/// as its value): how `apply` knows a node is in use.
pub const EXEC_MARKER: &str = "NSFLEET_EXEC";

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    Status,
    /// Tear the fleet down; with `wait`, reply again once the kernel has reclaimed it.
    Down {
        wait: bool,
    },
    /// The node's network namespace, as a descriptor.
    Netns {
        node: String,
    },
    /// A TCP connection to what the fleet publishes on host port `port`, made in the
    /// fleet's own namespace and passed as a descriptor: a user's fleet's ports, whose
    /// forwarder listens in the host's namespace, where the fleet is not (see
    /// nsfleet-client's `forward`).
    Dial {
        port: u16,
    },
    /// Set (or with `None`, clear) the impairment of one interface of a node.
    Impair {
        node: String,
        iface: String,
        impair: Option<Impair>,
    },
    /// Take one end of a link down as a pulled cable (`up: false`), put it back (`true`),
    /// or only read it (`None`); the reply has both ends' state.
    Link {
        node: String,
        iface: String,
        up: Option<bool>,
    },
    /// Change the fleet to the topology that follows this line, `topology_len` bytes of
    /// JSON (read and checked against the kernel once, by the client; `file`, absolute,
    /// names it in messages), or with `dry_run` only say what that would change.
    /// `hold`: the image store's hold file on the images the topology's nodes run, which
    /// the client made (locked shared) and keeps until the reply: once the change is made,
    /// the supervisor holds it in place of the one it held.
    Apply {
        file: std::path::PathBuf,
        topology_len: u64,
        dry_run: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hold: Option<std::path::PathBuf>,
    },
    /// Every node's configuration and wiring as they are now (after any `apply`).
    Shapes,
    /// Every interface's counters and every process's CPU time and memory, of one node
    /// (`node`) or of all.
    Stats {
        #[serde(default)]
        node: Option<String>,
    },
    /// Node `node`'s unicast routes of its main table, both families, as its kernel has
    /// them now (reads only: no lock of the fleet's changes).
    Routes {
        node: String,
    },
    /// ICMP echo requests from node `node`'s network namespace to `addr`: `count` of
    /// them, `interval_ms` apart, each answered within `timeout_ms` or counted lost
    /// (reads only).
    Ping {
        node: String,
        addr: std::net::IpAddr,
        count: u32,
        interval_ms: u64,
        timeout_ms: u64,
    },
    /// Stream the fleet's events on this connection (after the `watching` reply), one
    /// JSON object per line, until the fleet ends.
    Events,
    /// Stop, start, restart, pause or resume one node's processes; its namespace and
    /// links stay.
    Node {
        node: String,
        action: NodeAction,
    },
    /// Wait until the fleet is `until` (see `ready`), or `bound_ms` has passed; `waiting`
    /// replies about once a second, then `ready` or `unready`.
    Wait {
        until: crate::ready::Condition,
        bound_ms: u64,
    },
    /// Traffic generator commands (pktgen's, see nsfleet_traffic::params), applied in order
    /// once all are checked; the reply reports every thread and device. No commands: only
    /// the report.
    Gen {
        commands: Vec<nsfleet_traffic::Command>,
        /// Generator threads wanted (one per CPU by default).
        #[serde(default)]
        threads: Option<usize>,
        /// Count arrivals with a sink on each receiver too.
        #[serde(default)]
        sink: bool,
    },
}

/// What `nsfleet node` does to a node's processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeAction {
    /// End them (SIGTERM, then SIGKILL after the grace time), world and all.
    Stop,
    /// Start them as `up` did: a new world, the node's commands.
    Start,
    Restart,
    /// SIGSTOP every process of the node.
    Pause,
    /// SIGCONT them.
    Resume,
}

impl NodeAction {
    /// Each action, its name (`nsfleet node NODE stop`) and what a node is once it is done.
    const ALL: [(NodeAction, &'static str, &'static str); 5] = [
        (NodeAction::Stop, "stop", "stopped"),
        (NodeAction::Start, "start", "started"),
        (NodeAction::Restart, "restart", "restarted"),
        (NodeAction::Pause, "pause", "paused"),
        (NodeAction::Resume, "resume", "resumed"),
    ];

    /// The actions' names, as the command line takes them.
    pub fn names() -> [&'static str; 5] {
        Self::ALL.map(|(_, n, _)| n)
    }

    /// "stop", "start", ...: as the command line takes it.
    pub fn name(self) -> &'static str {
        (Self::ALL.iter())
            .find(|(a, _, _)| *a == self)
            .map_or("", |(_, n, _)| n)
    }

    /// "stopped", "started", ...: for replies and events.
    pub fn done(self) -> &'static str {
        (Self::ALL.iter())
            .find(|(a, _, _)| *a == self)
            .map_or("", |(_, _, d)| d)
    }
}

impl std::str::FromStr for NodeAction {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        (Self::ALL.iter())
            .find(|(_, n, _)| *n == s)
            .map(|(a, _, _)| *a)
            .ok_or_else(|| format!("expected one of {}, got {s:?}", Self::names().join(", ")))
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Reply {
    Status(FleetStatus),
    /// The request failed; `at` is where the topology file wrote what the failure is
    /// about (a kernel's refusal of a link, a route, a sysctl), when it is one place.
    Error {
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Place>,
    },
    /// The descriptor is a connected TCP socket (a `dial`'s).
    Dialed {
        port: u16,
    },
    /// The descriptor is the node's network namespace, or with `world`, a pidfd of the
    /// node's init, whose namespaces (network, mount, UTS, PID) are the node's.
    Netns {
        node: String,
        inode: u64,
        #[serde(default)]
        world: bool,
        /// The node's whole environment (nsfleet-subsys's `process::environment`), as
        /// its commands have it: a command run in a world has only this.
        #[serde(default)]
        env: Vec<(String, String)>,
        /// The node runs an image: its commands run in the image's working directory, as
        /// its user.
        #[serde(default)]
        image: Option<ExecIn>,
        /// The node is a bridge of the fleet's Open vSwitch, of this name: a port of it
        /// is an interface of the namespace added to that bridge (`ovs-vsctl add-port`
        /// in the node), not one enslaved to a Linux bridge.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ovs_bridge: Option<String>,
        /// What a command run in the node gives up as it starts, as the node's own
        /// processes do.
        #[serde(default)]
        restrictions: nsfleet_sys::confine::Restrictions,
    },
    /// The events follow, one per line.
    Watching,
    Stats(FleetStats),
    Shapes {
        nodes: Vec<NodeShape>,
    },
    /// What `apply` changes (or would change), object by object; `report` once applied.
    Plan {
        changes: Vec<nsfleet_topology::diff::Change>,
        applied: bool,
        #[serde(default)]
        report: Option<nsfleet_core::ReshapeReport>,
    },
    /// A node's processes after `nsfleet node`.
    Node {
        node: String,
        processes: Vec<ProcInfo>,
    },
    /// A link's two ends as the kernel has them (the far one when it is a node's).
    Link {
        end: nsfleet_subsys::cable::EndState,
        far: Option<nsfleet_subsys::cable::EndState>,
        /// The far end's name on the host, for a host link.
        #[serde(default)]
        host: Option<String>,
        impair: Option<Impair>,
    },
    Impaired {
        node: String,
        iface: String,
        impair: Option<Impair>,
    },
    /// A node's unicast routes of its main table, both families (a `routes`'s).
    Routes {
        node: String,
        routes: Vec<RouteDst>,
    },
    /// `received` of `sent` answered; each answered one's round trip in ms, in order.
    Pinged {
        node: String,
        addr: std::net::IpAddr,
        sent: u32,
        received: u32,
        rtt_ms: Vec<f64>,
    },
    Gen(crate::traffic::GenReport),
    /// Where a `wait` stands, `elapsed_s` into it.
    Waiting {
        #[serde(flatten)]
        standing: crate::ready::Standing,
        elapsed_s: f64,
    },
    /// The wait's condition holds, `after_s` into the wait and `since_up_s` after the
    /// fleet's supervisor started; `of`: the nodes it was checked on (routers, for
    /// `converged`: none means started was all there was to wait for).
    Ready {
        condition: crate::ready::Condition,
        after_s: f64,
        since_up_s: f64,
        #[serde(default)]
        of: usize,
    },
    /// The wait ended without its condition: `failed`, the nodes whose commands failed
    /// (the fleet is not what its file says), or where it stood at its bound.
    Unready {
        condition: crate::ready::Condition,
        failed: Vec<String>,
        standing: Option<crate::ready::Standing>,
        elapsed_s: f64,
    },
    Dropped {
        nodes: usize,
        teardown_ms: f64,
    },
    Reclaimed {
        nodes: usize,
        reclaimed: usize,
        held: Vec<Held>,
        total_ms: f64,
        /// Why reclamation could not be confirmed, if it could not.
        #[serde(default)]
        unconfirmed: Option<String>,
    },
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct FleetStatus {
    pub name: String,
    /// starting, up, stopping, or dead (the supervisor is gone).
    pub state: String,
    /// The supervisor's pid, as the host sees it.
    pub pid: i32,
    pub node_count: usize,
    pub processes_running: usize,
    /// MemAvailable drop measured while the fleet was created.
    pub kernel_mem_bytes: i64,
    pub awaiting_reclaim: usize,
    pub workers: usize,
    pub subsystems: Vec<String>,
    pub run_dir: String,
    /// The ids its confined nodes are on the host (none: `--privileged`).
    #[serde(default)]
    pub ids: Option<FleetIds>,
    pub nodes: Vec<NodeStatus>,
}

/// A fleet's range of ids on the host: a confined node's root is `first`, its uid N is
/// `first + N`, for `count` ids.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct FleetIds {
    pub first: u32,
    pub count: u32,
}

/// A node as it is now: what `nsfleet graph` draws of a running fleet.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeShape {
    pub name: String,
    pub config: std::sync::Arc<nsfleet_topology::NodeConfig>,
    pub wiring: std::sync::Arc<nsfleet_topology::NodeWiring>,
}

/// What `nsfleet stats` shows: counters read at `at` (seconds since the epoch), which
/// the client turns into rates between two readings.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct FleetStats {
    pub at: f64,
    pub nodes: Vec<NodeStats>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct NodeStats {
    pub name: String,
    /// Its interfaces but `lo`, in the kernel's order.
    pub interfaces: Vec<IfaceStats>,
    pub processes: Vec<ProcUsage>,
    /// What its cgroup counts: every process of the node, daemons included (a node that
    /// runs software).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<nsfleet_sys::cgroup::Usage>,
    /// What its cgroup limits.
    #[serde(default)]
    pub limits: nsfleet_topology::Limits,
    /// Interfaces with an impairment now, as (interface, impairment).
    #[serde(default)]
    pub impairments: Vec<(String, Impair)>,
    /// Why the node could not be read (it is being removed), if it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One interface: its state and counters since it was made.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct IfaceStats {
    pub name: String,
    /// Administratively up (IFF_UP).
    pub up: bool,
    /// Has carrier: for a veth, its peer is up.
    pub carrier: bool,
    #[serde(flatten)]
    pub counters: nsfleet_subsys::cable::Counters,
}

/// One running process of a node and what it has used.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ProcUsage {
    pub pid: i64,
    pub command: String,
    pub cpu_seconds: f64,
    pub rss_bytes: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeStatus {
    pub name: String,
    pub netns_inode: u64,
    pub processes: Vec<ProcInfo>,
    /// Interfaces as "name address..." (a switch's ports are not listed).
    #[serde(default)]
    pub interfaces: Vec<String>,
    /// Interfaces with an impairment now, as (interface, impairment).
    #[serde(default)]
    pub impairments: Vec<(String, Impair)>,
    /// What a containerlab file declared the node as (`nsfleet inspect`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clab: Option<ClabNode>,
    /// What its cgroup limits.
    #[serde(default)]
    pub limits: nsfleet_topology::Limits,
    /// What its cgroup counts (a node that runs software).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<nsfleet_sys::cgroup::Usage>,
}

/// What a starting supervisor tells the `up` that launched it, one JSON line each.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum UpEvent {
    Progress {
        phase: String,
        done: usize,
        total: usize,
    },
    Ready {
        report: CreateReport,
        pid: i32,
    },
    /// Nothing of the fleet is left; `at` as in [`Reply::Error`].
    Failed {
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Place>,
    },
}

/// Where the topology file wrote what `e` is about, if the engine said (a [`Subject`] in
/// its contexts).
pub fn place_of(e: &anyhow::Error) -> Option<Place> {
    e.downcast_ref::<Subject>().and_then(|s| s.at)
}

impl Reply {
    /// An error that is about no place of the topology.
    pub fn error(message: impl Into<String>) -> Reply {
        Reply::Error {
            message: message.into(),
            at: None,
        }
    }

    /// `e` as a reply, with its place in the topology when it has one.
    pub fn failure(e: &anyhow::Error) -> Reply {
        Reply::Error {
            message: format!("{e:#}"),
            at: place_of(e),
        }
    }
}

impl UpEvent {
    pub fn failed(e: &anyhow::Error) -> UpEvent {
        UpEvent::Failed {
            message: format!("{e:#}"),
            at: place_of(e),
        }
    }
}

pub fn write_line(mut w: impl Write, value: &impl Serialize) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(value)?;
    line.push(b'\n');
    w.write_all(&line)
}

/// A connection to a fleet's supervisor.
pub struct Client {
    sock: UnixStream,
    buf: Vec<u8>,
    fd: Option<OwnedFd>,
}

/// The connection's socket, to wait for the supervisor's next line beside other
/// descriptors (a stream of events that also watches its reader).
impl AsFd for Client {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

impl Client {
    pub fn connect(socket: &Path) -> std::io::Result<Self> {
        let sock = UnixStream::connect(socket)?;
        Ok(Client {
            sock,
            buf: Vec::new(),
            fd: None,
        })
    }

    pub fn send(&mut self, req: &Request) -> anyhow::Result<()> {
        write_line(&self.sock, req).context("sending to the supervisor")
    }

    /// Whether a whole line has been read already: [`Client::next_as`] returns it without
    /// waiting, though the socket (see `AsFd`) may not be readable.
    pub fn has_line(&self) -> bool {
        self.buf.contains(&b'\n')
    }

    pub fn set_timeout(&self, t: Option<Duration>) {
        let _ = self.sock.set_read_timeout(t);
    }

    /// The next reply, or `None` when the supervisor closed the connection.
    pub fn next_reply(&mut self) -> anyhow::Result<Option<Reply>> {
        self.next_as()
    }

    /// The next line as `T` (an event of `nsfleet events`, a reply), or `None` when the
    /// supervisor closed the connection.
    pub fn next_as<T: serde::de::DeserializeOwned>(&mut self) -> anyhow::Result<Option<T>> {
        // Only bytes not yet searched are searched: a reply of megabytes (`stats` of a
        // big fleet) comes in many reads.
        let mut searched = 0;
        loop {
            if let Some(at) = self.buf[searched..].iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=searched + at).collect();
                return serde_json::from_slice(&line)
                    .map(Some)
                    .map_err(|e| anyhow!("malformed line from the supervisor: {e}"));
            }
            searched = self.buf.len();
            let mut chunk = [0u8; 65536];
            let (n, fd) = sys::recv_with_fd(self.sock.as_fd(), &mut chunk)
                .context("reading from the supervisor")?;
            if fd.is_some() {
                self.fd = fd;
            }
            if n == 0 {
                return Ok(None);
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Sends one request and returns its first reply; an `Error` reply becomes an error.
    pub fn call(&mut self, req: &Request) -> anyhow::Result<Reply> {
        self.call_with(req, &[])
    }

    /// [`Client::call`] with `payload` sent right after the request's line (an `apply`'s
    /// topology).
    /// A supervisor that answers before reading all of it (it refused the request) has
    /// its answer read all the same: the write fails with EPIPE, never SIGPIPE.
    pub fn call_with(&mut self, req: &Request, payload: &[u8]) -> anyhow::Result<Reply> {
        self.send(req)?;
        let sent = sys::send_all(self.sock.as_fd(), payload);
        let reply = self.next_reply();
        if let (Err(e), Ok(None) | Err(_)) = (&sent, &reply) {
            return Err(anyhow!("sending to the supervisor: {e}"));
        }
        match reply? {
            // Its place, as data, for the client to name in the file it read.
            Some(Reply::Error { message, at }) => Err(Subject { text: message, at }.into()),
            Some(r) => Ok(r),
            None => bail!("the supervisor closed the connection without replying"),
        }
    }

    /// The descriptor that came with the last reply, if any.
    pub fn take_fd(&mut self) -> Option<OwnedFd> {
        self.fd.take()
    }
}

/// How a command runs in a node with an image, as `docker exec` runs in a container.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ExecIn {
    pub workdir: Option<String>,
    pub user: Option<String>,
}

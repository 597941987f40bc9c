//! What a fleet is made of, as validated data: the engine's input.
//!
//! A [`Topology`] is only ever built by [`parse`] (which validates everything) or
//! deserialized from the supervisor's own hand-off of one. It never touches the kernel:
//! what the kernel offers comes in as a [`KernelCaps`] value, probed by the engine.
//!
//! The rooms: `front/` (one front-end per format: nsfleet's TOML, containerlab's YAML)
//! reads a file into neutral declarations (`decl`, each with its [`Place`]); `resolve/`
//! (groups, configuration layers, templates, generators, the plan) turns them into a
//! [`Draft`], and never imports a front-end; `kind/` and `link/` hold one module per
//! node kind and per link kind; `error` is where places and errors are.
//!
//! Nodes come in groups sharing one [`NodeConfig`]; what differs per node (its interfaces,
//! addresses and routes) is its [`NodeWiring`], laid out by `plan` with every interface
//! index chosen in advance, so that no subsystem ever has to look a link up.

mod decl;
pub mod diff;
mod error;
pub mod front;
mod kernel;
pub mod kind;
pub mod link;
pub mod part;
pub mod reshape;
mod resolve;
pub mod seccomp;
mod values;

pub use decl::sysctl_path;
pub use error::{Place, Subject, TopologyError};
pub use front::clab;
pub use front::toml::{parse, read};
pub use front::{
    read_file, read_file_with, read_text, Format, Software, DEFAULT_FLEET, DEFAULT_FLEET_FILE,
    MAX_TOPOLOGY_BYTES,
};
pub use kernel::{netem_refusal, no_device, Asks, HostFound, HostNeed, KernelCaps, NO_NETEM};
pub use kind::ovs::{Datapath, FailMode, OvsHub, OvsSwitch};
pub use link::bridge::{bridge_index, BRIDGE, PORTS_PER_BRIDGE, PORTS_PER_SHARD};
pub use link::macvlan::MACVLANS_PER_LOWER;
pub use link::{HostEnd, HostUnderlay, Link, Peer, VxlanEnd};
pub use resolve::config::{private_holder, read_source, HOSTS, PRIVATE_RUN};
pub use resolve::draft::Draft;
pub use resolve::template;
pub use values::{duration_ns, Impair, IpNet};

use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A whole fleet: its name and its nodes, in groups that share one configuration.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Topology {
    pub name: String,
    pub groups: Vec<NodeGroup>,
    /// Each node's wiring, in `nodes()` order; empty when no node has any.
    pub wiring: Vec<Arc<NodeWiring>>,
}

/// Nodes that share a configuration: one written-out node, or `count` generated from a
/// name template. Generated nodes share one `Arc<NodeConfig>`, which keeps a large fleet
/// small in the supervisor.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeGroup {
    pub names: Names,
    pub config: Arc<NodeConfig>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Names {
    One(String),
    /// `template` with `{i}` replaced by `start`, `start + 1`, ... `start + count - 1`.
    Generated {
        template: String,
        start: u64,
        count: u64,
    },
}

/// What every subsystem reads about a node. Subsystems each read their own fields.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct NodeConfig {
    /// Per-namespace sysctls as (`net.ipv4.ip_forward`, `1`), applied in this order.
    pub sysctls: Vec<(String, String)>,
    /// Where each sysctl is written, by key: for the kernel's refusals.
    #[serde(default)]
    pub sysctl_places: WrittenAt,
    /// Shell command lines started inside the node once the fleet is built.
    pub commands: Vec<String>,
    /// IPv4 forwarding on every interface of the node (IPv6 too where it has addresses).
    pub router: bool,
    /// The node is a switch: its namespace holds bridges, and its interfaces are ports.
    pub switch: bool,
    /// The switch's bridge snoops IGMP and MLD and is its segment's querier, sending a
    /// multicast group's frames only to its members and to routers: a containerlab
    /// management network, where every node that runs software has IPv6 and would
    /// otherwise flood its reports and router solicitations to every other node.
    #[serde(default)]
    pub querier: bool,
    /// Its host name (a template); the node's name when `None`.
    pub hostname: Option<String>,
    /// Directories the node has to itself, mounted over the host's in its own mount
    /// namespace, in order (a parent before what is inside it).
    pub dirs: Vec<PrivateDir>,
    /// Files placed in its private directories before its processes start.
    pub files: Vec<PrivateFile>,
    /// Start a command again when it fails (exits non-zero or by a signal), with backoff.
    pub restart_on_failure: bool,
    /// Seconds its processes wait before they start (containerlab's `startup-delay`).
    #[serde(default)]
    pub start_delay_s: u32,
    /// How to tell it is healthy (containerlab's `healthcheck`), for `--wait healthy`.
    #[serde(default)]
    pub healthcheck: Option<HealthCheck>,
    /// Environment variables of its commands, besides nsfleet's own.
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// The host's files and folders mounted into its world, over what is there.
    #[serde(default)]
    pub binds: Vec<Bind>,
    /// Other names the fleet's /etc/hosts gives it (containerlab's container name).
    #[serde(default)]
    pub aliases: Vec<String>,
    /// What a containerlab file declared it as: shown, not acted on.
    #[serde(default)]
    pub clab: Option<ClabNode>,
    /// The container image it runs: its root filesystem, and its process unless
    /// `commands` say otherwise. `None`: the host's own files and programs.
    #[serde(default)]
    pub image: Option<NodeImage>,
    /// Its ports published on the host (containerlab's `ports`), one entry per port.
    #[serde(default)]
    pub ports: Vec<PublishedPort>,
    /// On a switch: an Open vSwitch bridge in place of the Linux bridge.
    #[serde(default)]
    pub ovs: Option<OvsSwitch>,
    /// The fleet's Open vSwitch: the node whose namespace holds every Open vSwitch
    /// switch's ports and runs the one ovsdb-server and ovs-vswitchd (see `kind/ovs.rs`).
    #[serde(default)]
    pub ovs_hub: Option<OvsHub>,
    /// The node whose network namespace (and world) this one lives in, rather than one of
    /// its own: an Open vSwitch switch's is the fleet's Open vSwitch node's.
    #[serde(default)]
    pub netns_of: Option<String>,
    /// Runs as the host's root with every capability, not confined (`privileged = true`,
    /// containerlab's `privileged: true`; see [`NodeConfig::confined`]).
    #[serde(default)]
    pub privileged: bool,
    /// Asks for a world of its own, confined, though it starts nothing (`confined =
    /// true`): what `exec` runs there is root in the node and nobody on the host. A
    /// Mininet host's, whose shell `exec` starts. Whether a node is confined is
    /// [`NodeConfig::confined`].
    #[serde(default)]
    pub confined_asked: bool,
    /// What it may use of the machine, held by a cgroup of its own.
    #[serde(default)]
    pub limits: Limits,
    /// What it gives up and is shown beyond its namespaces: capabilities, the seccomp
    /// filter, the paths Docker hides, host devices.
    #[serde(default)]
    pub security: Security,
}

/// What a node that runs software gives up, and what of the machine it sees, beyond what
/// its user namespace decides (keys `capabilities`, `security_opt`, `devices`;
/// containerlab's `cap-add`, `cap-drop`, `security-opts`, `devices`). Docker's defaults
/// for a container, but every capability over its own namespaces (a router's root needs
/// them); a privileged node has neither the filter nor the masks, as Docker's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Security {
    /// The capabilities its processes give up, a bit each (`nsfleet_values::CAPABILITIES`).
    #[serde(default)]
    pub drop_capabilities: u64,
    /// Its seccomp filter: Docker's default, none (`security_opt =
    /// ["seccomp=unconfined"]`), or a profile of its own (`seccomp=FILE`).
    #[serde(default)]
    pub seccomp: Seccomp,
    /// Docker's masked and read-only paths of /proc and /sys (`systempaths=unconfined`
    /// lifts them).
    #[serde(default = "yes")]
    pub system_paths: bool,
    /// Exec gives its processes no privilege (`no-new-privileges`).
    #[serde(default)]
    pub no_new_privileges: bool,
    /// The host's devices it is given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<Device>,
}

fn yes() -> bool {
    true
}

impl Default for Security {
    fn default() -> Security {
        Security {
            drop_capabilities: 0,
            seccomp: Seccomp::Docker,
            system_paths: true,
            no_new_privileges: false,
            devices: Vec::new(),
        }
    }
}

/// A confined node's seccomp filter.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Seccomp {
    /// Docker's default filter.
    #[default]
    Docker,
    /// None.
    Unconfined,
    /// A profile of Docker's format (see [`seccomp`]).
    Profile(seccomp::SeccompProfile),
}

/// A host device a node is given (`devices = ["/dev/kvm"]`): a device file of the same
/// numbers made for it, readable and writable as asked by all of the node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    /// Its path in the node.
    pub path: String,
    /// The host's device file: a user's node gets it bound (a user namespace may make no
    /// device file).
    pub host: String,
    /// A block device (else a character one).
    pub block: bool,
    pub major: u32,
    pub minor: u32,
    /// Its permission bits (0o666 for `rw`).
    pub mode: u32,
}

/// What a node that runs software may use of the machine: held by its cgroup (its
/// `/dev/shm` by that mount's size), each `None` unlimited. From the keys `memory`,
/// `cpu`, `cpuset`, `pids`, `shm_size` (containerlab's `memory`, `cpu`, `cpu-set`,
/// `shm-size`; Mininet's `CPULimitedHost`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Bytes of memory, page cache included; no swap beyond it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    /// A memory cgroup of its own without a limit (`memory = "unlimited"`), so that its
    /// memory is counted apart (`stats`): a node without a memory limit is otherwise
    /// counted in its fleet's group (see nsfleet-subsys's `world::cgroups`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub memory_counted: bool,
    /// CPU time, in thousandths of a CPU per period (1,500: one and a half CPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_milli: Option<u64>,
    /// The CPUs it may run on, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpuset: Option<Vec<u32>>,
    /// Most tasks (processes and threads) at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<u64>,
    /// The size of its /dev/shm in bytes (64 MB without it, as Docker's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shm_bytes: Option<u64>,
}

impl Limits {
    /// Whether any limit is set.
    pub fn any(&self) -> bool {
        *self != Limits::default()
    }

    /// Whether the node has a memory cgroup of its own: a limit, or `unlimited`.
    pub fn memory_group(&self) -> bool {
        self.memory.is_some() || self.memory_counted
    }

    /// Whether its memory is counted apart and not limited (`memory = "unlimited"`).
    pub fn memory_unlimited(&self) -> bool {
        self.memory_counted && self.memory.is_none()
    }
}

/// A node's health check, as containerlab's `healthcheck` (Docker's HEALTHCHECK) has it:
/// `argv` runs in the node, the first time once its commands have run, then every
/// `interval_s`; it passes by exiting 0 within `timeout_s`; `retries` failures in a row,
/// not counting those within `start_period_s` of the first, make the node unhealthy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HealthCheck {
    /// A program and its arguments (`CMD`), or `/bin/sh -c LINE` (`CMD-SHELL`).
    pub argv: Vec<String>,
    pub start_period_s: u32,
    pub interval_s: u32,
    pub timeout_s: u32,
    pub retries: u32,
}

impl HealthCheck {
    /// Docker's defaults for what a file leaves out (start period 0 s, every 30 s, 30 s
    /// each, unhealthy after 3 failures in a row); `argv` is the file's.
    pub fn with_docker_defaults(argv: Vec<String>) -> Self {
        HealthCheck {
            argv,
            start_period_s: 0,
            interval_s: 30,
            timeout_s: 30,
            retries: 3,
        }
    }

    /// The longest any of its periods may be, in seconds (a day).
    pub const MAX_SECONDS: i64 = 86_400;

    /// Docker's forms of a check's `test`, as argv: `[CMD-SHELL, LINE]` (run by `/bin/sh
    /// -c`), `[CMD, PROGRAM, ARGS...]`, or `[NONE]` (no check: empty). `None` for anything
    /// else.
    pub fn docker_test(words: &[String]) -> Option<Vec<String>> {
        match words.split_first()? {
            (first, [line]) if first == "CMD-SHELL" => {
                Some(vec!["/bin/sh".into(), "-c".into(), line.clone()])
            }
            (first, rest) if first == "CMD" && !rest.is_empty() => Some(rest.to_vec()),
            (first, []) if first == "NONE" => Some(Vec::new()),
            _ => None,
        }
    }
}

/// A port of a node published on the host, as Docker publishes a container's: what
/// comes to the host's `host_port` (on `host_addr`, or on any of the host's addresses)
/// goes to `node_port` at the node's address on `iface`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PublishedPort {
    pub proto: Proto,
    pub host_addr: Option<std::net::IpAddr>,
    pub host_port: u16,
    pub node_port: u16,
    /// The node's interface whose address receives (containerlab's `eth0`).
    pub iface: String,
    /// The host's end of the link that reaches that interface: what the host sends from
    /// its loopback addresses leaves through it.
    pub host_iface: String,
    pub at: Place,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    Tcp,
    Udp,
}

impl Proto {
    /// Its IPPROTO_* number.
    pub fn number(self) -> u8 {
        match self {
            Proto::Tcp => 6,
            Proto::Udp => 17,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        }
    }
}

impl PartialEq for PublishedPort {
    fn eq(&self, o: &PublishedPort) -> bool {
        let PublishedPort {
            proto,
            host_addr,
            host_port,
            node_port,
            iface,
            host_iface,
            at: _,
        } = self;
        (proto, host_addr, host_port, node_port, iface, host_iface)
            == (
                &o.proto,
                &o.host_addr,
                &o.host_port,
                &o.node_port,
                &o.iface,
                &o.host_iface,
            )
    }
}

impl PartialEq for NodeConfig {
    /// Configurations are equal when they make the same node: where they are written is
    /// not compared, so an edit that moves lines changes no node. The destructuring
    /// names every field, so a new one cannot be forgotten here (two tuples: the
    /// standard library compares tuples of at most 12).
    fn eq(&self, o: &NodeConfig) -> bool {
        let NodeConfig {
            sysctls,
            sysctl_places: _,
            commands,
            router,
            switch,
            querier,
            hostname,
            dirs,
            files,
            restart_on_failure,
            start_delay_s,
            healthcheck,
            env,
            binds,
            aliases,
            clab,
            image,
            ports,
            ovs,
            ovs_hub,
            netns_of,
            privileged,
            confined_asked,
            limits,
            security,
        } = self;
        (
            image,
            querier,
            start_delay_s,
            ports,
            ovs,
            ovs_hub,
            netns_of,
            healthcheck,
            (privileged, confined_asked),
            limits,
            security,
        ) == (
            &o.image,
            &o.querier,
            &o.start_delay_s,
            &o.ports,
            &o.ovs,
            &o.ovs_hub,
            &o.netns_of,
            &o.healthcheck,
            (&o.privileged, &o.confined_asked),
            &o.limits,
            &o.security,
        ) && (sysctls, commands, router, switch, hostname, dirs)
            == (
                &o.sysctls,
                &o.commands,
                &o.router,
                &o.switch,
                &o.hostname,
                &o.dirs,
            )
            && (files, restart_on_failure, env, binds, aliases, clab)
                == (
                    &o.files,
                    &o.restart_on_failure,
                    &o.env,
                    &o.binds,
                    &o.aliases,
                    &o.clab,
                )
    }
}

// What a node's wiring is compares without where it is written, as `NodeConfig` does:
// an edit that only moves lines changes no interface, route or port (and restarts no
// process). Each destructuring names every field, so a new one cannot be forgotten.

impl PartialEq for Iface {
    fn eq(&self, o: &Iface) -> bool {
        let Iface {
            name,
            index,
            mtu,
            mac,
            addrs,
            impair,
            bridge,
            link,
            software_checksums,
            at: _,
        } = self;
        (name, index, mtu, mac, addrs) == (&o.name, &o.index, &o.mtu, &o.mac, &o.addrs)
            && (impair, bridge, link) == (&o.impair, &o.bridge, &o.link)
            && *software_checksums == o.software_checksums
    }
}

impl PartialEq for RouteSpec {
    fn eq(&self, o: &RouteSpec) -> bool {
        let RouteSpec {
            dst,
            via,
            dev,
            at: _,
        } = self;
        (dst, via, dev) == (&o.dst, &o.via, &o.dev)
    }
}

impl PartialEq for MacvlanPort {
    fn eq(&self, o: &MacvlanPort) -> bool {
        let MacvlanPort {
            name,
            lower,
            peer,
            at: _,
        } = self;
        (name, lower, peer) == (&o.name, &o.lower, &o.peer)
    }
}

/// Where in the file things are written, by key, for errors to name the place.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WrittenAt(pub std::collections::BTreeMap<String, Place>);

impl WrittenAt {
    /// Where `key` is written, if it was written in a file.
    pub fn get(&self, key: &str) -> Option<Place> {
        self.0.get(key).copied()
    }
}

/// What a switch's links to nodes are made of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ports {
    /// A veth pair per link, its near end a port of the switch's bridge.
    #[default]
    Veth,
    /// A macvlan per link, in the node's namespace.
    Macvlan,
}

impl Ports {
    /// The value of a `ports` key.
    pub fn parse(s: &str) -> Result<Ports, String> {
        match s {
            "veth" => Ok(Ports::Veth),
            "macvlan" => Ok(Ports::Macvlan),
            _ => Err(format!(
                "ports: expected \"veth\" (a veth pair per link, its end a port of the switch's bridge) or \"macvlan\" (a macvlan per link: a third of the kernel objects, and no device on the switch's side), got {s:?}"
            )),
        }
    }
}

/// A macvlan a switch makes for a node: the port's name on the switch (it has no device
/// there, but holds the port's place and number), the lower it hangs from, and the
/// interface it is in the node.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MacvlanPort {
    pub name: String,
    pub lower: u16,
    pub peer: Peer,
    /// Where the topology file declared its link.
    pub at: Place,
}

/// A host path mounted at `target` in a node's world, as a container's bind is: the
/// node's writes reach the host's file.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Bind {
    /// An absolute path on the host.
    pub source: String,
    pub target: String,
    pub read_only: bool,
}

/// A node as a containerlab file declares it, for `inspect`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ClabNode {
    /// Its name as containerlab would name its container (`clab-LAB-NODE`).
    pub container: String,
    pub kind: String,
    /// Recorded, never pulled: the node runs the host's software.
    pub image: Option<String>,
    /// Its labels as containerlab sets them on a container: its own (`containerlab`,
    /// `clab-node-name`, ...) and the file's.
    pub labels: Vec<(String, String)>,
}

/// A directory of a node's own: an empty tmpfs, or a copy of the host's directory.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PrivateDir {
    pub path: String,
    pub from_host: bool,
    /// Owner (uid, gid) and mode; the host directory's when it has one.
    pub owner: Option<(u32, u32)>,
    /// The owner by name, as a kind says it (FRR's folders are `frr`'s): the check
    /// against the host sets `owner` from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    pub mode: Option<u32>,
}

/// A file of a node's own; `path` and its content are templates.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PrivateFile {
    pub path: String,
    pub source: FileSource,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub enum FileSource {
    Inline(String),
    /// An absolute path on the host, itself a template (`/lab/frr/{name}.conf`).
    Path(String),
}

/// A container image a node runs, as the file names it and as the image store has it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct NodeImage {
    /// The reference as written (`alpine:3.20`, `frrouting/frr:v8.4.1`).
    pub reference: String,
    /// Where the file names it.
    pub at: Place,
    /// containerlab's `entrypoint` and `cmd`, which replace the image's as Docker's do
    /// (an `entrypoint` given drops the image's `cmd` too).
    pub entrypoint: Option<Vec<String>>,
    pub cmd: Option<Vec<String>>,
    /// containerlab's `user`, over the image's.
    pub user: Option<String>,
    /// What the image store has for it. Set by the check against the machine (the
    /// client's, which owns the store), never by a front-end: a topology with an image
    /// not found is not started.
    pub found: Option<ImageRoot>,
}

impl PartialEq for NodeImage {
    /// Where it is written is not compared (see `NodeConfig`'s).
    fn eq(&self, o: &NodeImage) -> bool {
        let NodeImage {
            reference,
            at: _,
            entrypoint,
            cmd,
            user,
            found,
        } = self;
        (reference, entrypoint, cmd, user, found)
            == (&o.reference, &o.entrypoint, &o.cmd, &o.user, &o.found)
    }
}

/// An image as the store has it: its unpacked layers and its configuration's process.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ImageRoot {
    /// The image's id (`sha256:` and its configuration's digest).
    pub id: String,
    /// Its layers' folders, lowest first, each in overlayfs's lower-layer form.
    pub layers: Vec<String>,
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    /// `KEY=VALUE`, as the image configuration writes them.
    pub env: Vec<String>,
    pub workdir: Option<String>,
    pub user: Option<String>,
}

impl NodeImage {
    /// The node's main process, as Docker computes a container's from the image's
    /// configuration and the overrides; empty when neither gives one.
    pub fn argv(&self) -> Vec<String> {
        let found = self.found.clone().unwrap_or_default();
        match (&self.entrypoint, &self.cmd) {
            (Some(e), cmd) => e.iter().chain(cmd.iter().flatten()).cloned().collect(),
            (None, Some(c)) => found.entrypoint.iter().chain(c).cloned().collect(),
            (None, None) => found.entrypoint.into_iter().chain(found.cmd).collect(),
        }
    }

    /// The user its processes run as (`name`, `uid`, `name:group`, `uid:gid`), if not root.
    pub fn user(&self) -> Option<&str> {
        let image = self.found.as_ref().and_then(|f| f.user.as_deref());
        self.user.as_deref().or(image).filter(|u| !u.is_empty())
    }

    /// The working directory of its processes.
    pub fn workdir(&self) -> Option<&str> {
        (self.found.as_ref().and_then(|f| f.workdir.as_deref())).filter(|w| !w.is_empty())
    }

    /// The image's environment, as (name, value).
    pub fn env(&self) -> Vec<(String, String)> {
        let env = self.found.iter().flat_map(|f| &f.env);
        env.filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
}

impl NodeConfig {
    /// The environment of the node's processes besides nsfleet's own: its image's, then
    /// its own `env` (which wins).
    pub fn process_env(&self) -> Vec<(String, String)> {
        let image = self.image.iter().flat_map(|i| i.env());
        image.chain(self.env.iter().cloned()).collect()
    }

    /// Whether the node is confined in a fleet that confines its nodes: a user namespace
    /// of its own owns its namespaces (see ARCHITECTURE.md, "Confinement"). A node that
    /// runs software is, unless it is `privileged`.
    pub fn confined(&self) -> bool {
        self.has_world() && !self.privileged
    }

    /// Whether the node gets a world of its own (PID, mount and UTS namespaces): it runs
    /// processes, or has a name, directories, files or limits of its own, or asks to be
    /// confined.
    pub fn has_world(&self) -> bool {
        self.confined_asked
            || !self.commands.is_empty()
            || self.image.is_some()
            || self.hostname.is_some()
            || !self.dirs.is_empty()
            || !self.files.is_empty()
            || !self.binds.is_empty()
            || self.healthcheck.is_some()
            // Its limits are its world's cgroup's: a shell `exec` starts there is held.
            || self.limits.any()
    }
}

/// What one node has of the fleet's wiring. Interface indexes are fixed in advance.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeWiring {
    pub ifaces: Vec<Iface>,
    /// On a switch (shard) with macvlan ports: the macvlans it makes on its bridge, each
    /// in its node's namespace. Not interfaces of the switch: it has no device for them.
    #[serde(default)]
    pub macvlans: Vec<MacvlanPort>,
    pub routes: Vec<RouteSpec>,
    /// Addresses on the node's `lo`.
    pub loopback: Vec<IpNet>,
}

/// One interface of a node, made by one kind of link ([`Link`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Iface {
    pub name: String,
    pub index: i32,
    pub mtu: Option<u32>,
    pub mac: Option<[u8; 6]>,
    pub addrs: Vec<IpNet>,
    pub impair: Option<Impair>,
    /// On a switch: the bridge this interface is a port of (`br0`, a switch node's one).
    pub bridge: Option<u16>,
    pub link: Link,
    /// Its node computes the checksums of what it sends here (tx checksum offload off):
    /// a host's end on a switch of an Open vSwitch without TSO support (`ovs_tso = false`).
    #[serde(default)]
    pub software_checksums: bool,
    /// Where the topology file declared it (for kernel errors).
    pub at: Place,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RouteSpec {
    pub dst: IpNet,
    pub via: Option<std::net::IpAddr>,
    /// Interface index of `dev`.
    pub dev: Option<i32>,
    pub at: Place,
}

impl std::fmt::Display for RouteSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.dst)?;
        if let Some(v) = self.via {
            write!(f, " via {v}")?;
        }
        Ok(())
    }
}

/// Whether a node uses IPv6: it has IPv6 addresses, or runs processes (which may speak
/// IPv6 over link-local addresses, as routing daemons do).
pub fn uses_ipv6(config: &NodeConfig, wiring: &NodeWiring) -> bool {
    !config.commands.is_empty()
        || config.image.is_some()
        || wiring.addrs().any(|a| a.addr.is_ipv6())
}

impl NodeWiring {
    pub fn iface(&self, name: &str) -> Option<&Iface> {
        self.ifaces.iter().find(|i| i.name == name)
    }

    /// Every address of the node: its loopback's, then its interfaces'.
    pub fn addrs(&self) -> impl Iterator<Item = &IpNet> {
        (self.loopback.iter()).chain(self.ifaces.iter().flat_map(|i| &i.addrs))
    }
}

impl Names {
    pub fn len(&self) -> u64 {
        match self {
            Names::One(_) => 1,
            Names::Generated { count, .. } => *count,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = String> + '_ {
        self.numbered().map(|(name, _)| name)
    }

    /// Each name with its number (`{i}`); a written node is number 1.
    pub fn numbered(&self) -> impl Iterator<Item = (String, u64)> + '_ {
        let (template, start, count) = match self {
            Names::One(n) => (n.as_str(), 1, 1),
            Names::Generated {
                template,
                start,
                count,
            } => (template.as_str(), *start, *count),
        };
        (start..start + count).map(move |i| (template.replace("{i}", &i.to_string()), i))
    }
}

impl Topology {
    /// Each image reference the nodes name, once, with the first place that names it.
    pub fn images(&self) -> Vec<(String, Place)> {
        let mut seen = Vec::<(String, Place)>::new();
        for i in self.groups.iter().filter_map(|g| g.config.image.as_ref()) {
            if !seen.iter().any(|(r, _)| *r == i.reference) {
                seen.push((i.reference.clone(), i.at));
            }
        }
        seen
    }

    /// Gives every node that names an image what the image store has for it: `found`
    /// answers for each reference once. The references it has no image for, each with
    /// every place that names it, when there are any.
    pub fn find_images(
        &mut self,
        mut found: impl FnMut(&str) -> Result<ImageRoot, String>,
    ) -> Result<(), Vec<(Place, String)>> {
        let answers: std::collections::HashMap<String, Result<ImageRoot, String>> =
            (self.images().into_iter())
                .map(|(r, _)| {
                    let a = found(&r);
                    (r, a)
                })
                .collect();
        let mut missing = Vec::new();
        for g in &mut self.groups {
            let Some(i) = &g.config.image else { continue };
            match &answers[&i.reference] {
                Ok(root) => {
                    let root = root.clone();
                    if let Some(i) = &mut Arc::make_mut(&mut g.config).image {
                        i.found = Some(root);
                    }
                }
                Err(why) if !missing.iter().any(|(at, _)| *at == i.at) => {
                    missing.push((i.at, why.clone()))
                }
                Err(_) => {}
            }
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(missing)
        }
    }

    pub fn node_count(&self) -> u64 {
        self.groups.iter().map(|g| g.names.len()).sum()
    }

    /// Whether the fleet has a management network (containerlab's): a link to the host
    /// marked so, which a user's fleet ends in its own namespace.
    pub fn has_management_network(&self) -> bool {
        (self.wiring.iter().flat_map(|w| &w.ifaces))
            .any(|i| i.link.as_host().is_some_and(|h| h.management))
    }

    /// Every node as (name, shared configuration, own wiring), in file order.
    pub fn nodes(&self) -> impl Iterator<Item = NodeSpec> + '_ {
        let unwired = Arc::new(NodeWiring::default());
        self.groups
            .iter()
            .flat_map(|g| {
                g.names
                    .numbered()
                    .map(move |(n, k)| (n, k, g.config.clone()))
            })
            .enumerate()
            .map(move |(i, (name, number, config))| NodeSpec {
                name,
                number,
                config,
                wiring: self.wiring.get(i).unwrap_or(&unwired).clone(),
            })
    }

    /// A fleet of `count` bare nodes `n1..nN` with no configuration: the benchmark's input.
    pub fn bare(name: &str, count: u64) -> Self {
        Topology {
            name: name.to_string(),
            groups: vec![NodeGroup {
                names: Names::Generated {
                    template: "n{i}".into(),
                    start: 1,
                    count,
                },
                config: Arc::new(NodeConfig::default()),
            }],
            wiring: Vec::new(),
        }
    }
}

/// One node to create.
#[derive(Clone, Debug)]
pub struct NodeSpec {
    pub name: String,
    /// The number its name template gave it (`{i}`); 1 for a written node.
    pub number: u64,
    pub config: Arc<NodeConfig>,
    pub wiring: Arc<NodeWiring>,
}

/// Fleet and node names end up in file names, socket paths and command lines: keep them
/// to a portable, shell-safe alphabet.
pub fn check_name(what: &str, name: &str, max: usize) -> Result<(), String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.';
    if name.is_empty() || name.len() > max {
        return Err(format!(
            "{what} must be 1 to {max} characters long, got {:?}",
            name
        ));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) || !name.chars().all(ok_char) {
        return Err(format!(
            "{what} {name:?} may contain only letters, digits, '-', '_' and '.', and must start with a letter or digit"
        ));
    }
    Ok(())
}

pub const MAX_FLEET_NAME: usize = 32;
pub const MAX_NODE_NAME: usize = 64;

/// The kernel's IFNAMSIZ less the NUL, and the characters we allow in interface names.
pub fn check_ifname(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 15
        && !["lo", "all", "default"].contains(&name)
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
    if ok {
        return Ok(());
    }
    Err(format!(
        "interface name {name:?}: expected 1 to 15 letters, digits, '-', '_' or '.', starting with a letter or digit (and not \"lo\", nor \"all\" or \"default\", which /proc/sys/net/*/conf uses)"
    ))
}

/// A word as the shell reads it back unchanged.
pub fn shell_quote(w: &str) -> String {
    format!("'{}'", w.replace('\'', "'\\''"))
}

/// The names among `have` closest to `name` (at most three, within an edit distance of
/// a third of its length, and at least 2).
pub fn closest<'a>(name: &str, have: &[&'a str]) -> Vec<&'a str> {
    let most = (name.chars().count() / 3).max(2);
    let mut by: Vec<(usize, &str)> = have
        .iter()
        .map(|h| (distance(name, h), *h))
        .filter(|(d, _)| *d <= most)
        .collect();
    by.sort();
    by.into_iter().take(3).map(|(_, h)| h).collect()
}

/// Levenshtein distance.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (row[j + 1] + 1)
                .min(row[j] + 1)
                .min(prev + (ca != *cb) as usize);
            prev = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_names_by_edit_distance() {
        assert_eq!(
            closest("eth3", &["eth0", "eth1", "lo0", "uplink"]),
            ["eth0", "eth1"]
        );
        assert_eq!(
            closest("router12", &["router1", "router2", "r3"]),
            ["router1", "router2"]
        );
        assert!(closest("zzzzzz", &["eth0"]).is_empty());
    }

    /// `image` is a node key: `[defaults]`, a `[[generate]]`'s node table and a
    /// `[[node]]` take it (the most specific wins), and it goes with no `kind`.
    #[test]
    fn image_is_taken_from_every_layer_of_node_keys() {
        let text = "[fleet]\nname = \"f\"\n[defaults]\nimage = \"base:1\"\n\
            [[node]]\nname = \"a\"\n\
            [[node]]\nname = \"b\"\nimage = \"own:2\"\n\
            [[generate]]\nkind = \"line\"\ncount = 2\nname = \"g{i}\"\nnode = { image = \"gen:3\" }\n";
        let topo = parse("f.toml", text, &KernelCaps::assumed()).unwrap();
        let images: Vec<_> = topo.images().into_iter().map(|(r, _)| r).collect();
        assert_eq!(images, ["base:1", "own:2", "gen:3"]);
        assert_eq!(topo.images()[1].1.line, 9);
        let both =
            "[fleet]\nname = \"f\"\n[[node]]\nname = \"a\"\nkind = \"linux\"\nimage = \"frr:1\"\n";
        let e = parse("f.toml", both, &KernelCaps::assumed()).unwrap_err();
        assert!(e.message.contains("give one of them"), "{e}");
        assert_eq!(e.at.line, 6, "{e}");
    }
}

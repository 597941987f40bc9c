//! What the running kernel offers, and the host has installed, that a topology's validity
//! depends on, as a value.
//!
//! The topology never looks at the kernel or the host. A file read by [`read`](crate::read)
//! says what it asks of them ([`Asks`]); the engine probes for exactly that, once per run
//! (`nsfleet::subsys::probe::kernel_for`), and [`Draft::check`](crate::Draft::check)
//! refuses, with its line, a file that needs what the kernel or the host lacks, before
//! anything exists.

use std::collections::{BTreeMap, BTreeSet};

/// What a topology asks of the kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Asks {
    /// Per-namespace sysctls the nodes set, as paths below /proc/sys (`net/ipv4/ip_forward`).
    pub sysctls: Vec<String>,
    /// And the values they set them to: each is tried once, in a scratch namespace.
    pub values: Vec<(String, String)>,
    /// Impairments only netem can apply (delay, jitter, loss, duplicate, corrupt).
    pub netem: bool,
    /// Kinds of device the kernel must be able to make that a kernel may lack (a module
    /// it was built without): `dummy`. veth and bridge are nsfleet's floor, not asked.
    pub devices: BTreeSet<String>,
    /// What the nodes' kinds need installed on the host (FRR's daemons, BIRD, users).
    pub host: BTreeSet<HostNeed>,
}

/// Something of the host's a node kind needs: its nodes run the host's software.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum HostNeed {
    /// A program found on `PATH`.
    Program(String),
    /// A file at this absolute path.
    File(String),
    /// A user, whose uid and gid own a kind's folders.
    User(String),
    /// A cgroup controller nsfleet may use for the groups it makes (`memory`, `cpu`,
    /// `cpuset`, `pids`): a limit needs it.
    Cgroup(String),
    /// These CPUs, online (a `cpuset`), as the kernel writes a list.
    Cpus(String),
    /// A device file of the host the fleet's root may open (for writing too, with
    /// `true`): root's always; a user's node gets the host's file bound, so the user must.
    Device(String, bool),
}

/// What the host has of what was asked ([`Asks::host`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostFound {
    /// The needs the host does not meet.
    pub missing: BTreeSet<HostNeed>,
    /// Each user asked for that exists: its uid and primary gid.
    pub users: BTreeMap<String, (u32, u32)>,
    /// Why a missing need is missing, where the host knows more than that it is (a
    /// user's cgroup controller: what their delegated group lacks).
    pub reasons: BTreeMap<HostNeed, String>,
}

/// The kernel's answer to [`Asks`]: it need say nothing of what was not asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelCaps {
    /// tc's netem qdisc exists: impairments beyond `rate` can be applied.
    pub netem: bool,
    /// Of the sysctls asked, those a fresh network namespace can write (paths below
    /// /proc/sys). `None` when they could not be probed (not root): `up` finds out.
    pub netns_sysctls: Option<BTreeSet<String>>,
    /// Of the sysctls asked, those the host can write: what makes an unwritable key
    /// "host only" rather than "no such sysctl".
    pub host_sysctls: BTreeSet<String>,
    /// Of the values asked, those a fresh network namespace refused, with why (empty when
    /// not probed).
    pub refused_values: BTreeMap<(String, String), String>,
    /// Of the device kinds asked ([`Asks::devices`]), those the kernel cannot make.
    pub missing_devices: BTreeSet<String>,
    /// The host's answer to [`Asks::host`].
    pub host: HostFound,
    /// Whether the fleet is made by the host's root, who alone may reach the host's own
    /// network namespace; a user's fleet lives in a user namespace of its own.
    pub host_root: bool,
}

impl KernelCaps {
    /// Nothing known and everything assumed: for checking a file's own consistency only
    /// (the fuzz target, tests of the parser). `up` never uses it.
    pub fn assumed() -> Self {
        KernelCaps {
            netem: true,
            netns_sysctls: None,
            host_sysctls: BTreeSet::new(),
            refused_values: BTreeMap::new(),
            missing_devices: BTreeSet::new(),
            // Everything installed; users unknown, so a kind's folders stay root's.
            host: HostFound::default(),
            host_root: true,
        }
    }
}

/// Why a kernel without netem refuses an impairment.
pub const NO_NETEM: &str = "this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM is off): only `rate` can be applied (with tbf); delay, jitter, loss, duplicate and corrupt need netem";

/// Why a kernel that cannot make devices of `kind` refuses an interface of that kind.
pub fn no_device(kind: &str) -> String {
    format!(
        "this kernel cannot make {kind} devices (its module is not there): run the lab under `nsfleet vm`, whose Debian kernels have them"
    )
}

/// Why a kernel with or without netem cannot apply `imp`, if it cannot.
pub fn netem_refusal(imp: &crate::Impair, netem: bool) -> Option<String> {
    (imp.needs_netem() && !netem).then(|| NO_NETEM.to_string())
}

/// An interface's sysctl path (`net/ipv4/conf/eth0/forwarding`) as the same key of `lo`,
/// which every namespace has; other paths as they are.
pub fn on_lo(path: &str) -> String {
    if interface_of(path).is_none() {
        return path.to_string();
    }
    let mut parts: Vec<&str> = path.split('/').collect();
    parts[3] = "lo";
    parts.join("/")
}

/// The interface a sysctl path names (`eth0` of `net/ipv4/conf/eth0/forwarding`), if any.
pub fn interface_of(path: &str) -> Option<&str> {
    let parts: Vec<&str> = path.split('/').collect();
    match parts.as_slice() {
        ["net", "ipv4" | "ipv6", "conf" | "neigh", dev, ..]
            if !matches!(*dev, "all" | "default") =>
        {
            Some(dev)
        }
        _ => None,
    }
}

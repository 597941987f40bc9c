//! What the running kernel offers and the host has installed, found out for exactly what
//! a topology asks ([`Asks`]): the value the topology is checked against
//! ([`KernelCaps`]), and the netem answer the impairment subsystem acts on. Kernel probes
//! run in a scratch namespace on a thread of its own, which dies with the thread; the
//! host is only read (PATH, files, /etc/passwd): nothing of it is touched.

use nsfleet_netlink::rtnl::{self, Netem};
use nsfleet_netlink::{Batch, NlSocket};
use nsfleet_sys as sys;
use nsfleet_topology::{Asks, Draft, HostFound, HostNeed, KernelCaps, Topology, TopologyError};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::sync::OnceLock;

/// A draft topology checked against this kernel: the probe answers what it asks.
pub fn validate(draft: Draft) -> Result<Topology, TopologyError> {
    let kernel = kernel_for(&draft.asks());
    draft.check(&kernel)
}

/// The kernel's answer to `asks`: nothing is probed that was not asked, and one scratch
/// namespace answers all of it. Without root (no scratch namespace), the sysctls are left
/// unknown and netem assumed absent.
pub fn kernel_for(asks: &Asks) -> KernelCaps {
    let (sysctls, values) = (asks.sysctls.clone(), asks.values.clone());
    let probed = if sysctls.is_empty() {
        Some((BTreeSet::new(), BTreeMap::new()))
    } else {
        in_scratch_namespace(move || {
            let writable = writable(&sysctls);
            let refused = refused_values(&values, &writable);
            (writable, refused)
        })
    };
    let (netns_sysctls, refused_values) = match probed {
        Some((w, r)) => (Some(w), r),
        None => (None, BTreeMap::new()),
    };
    let host_root = sys::is_host_root();
    KernelCaps {
        netem: asks.netem && has_netem(),
        netns_sysctls,
        host_sysctls: writable(&asks.sysctls),
        refused_values,
        missing_devices: (asks.devices.iter())
            .filter(|k| !can_make(k))
            .cloned()
            .collect(),
        host: host_for(&asks.host, host_root),
        host_root,
    }
}

/// What the host has of `needs`: the programs on PATH, the files, the users' ids, the
/// devices a user may open (`host_root`: any).
fn host_for(needs: &BTreeSet<HostNeed>, host_root: bool) -> HostFound {
    let mut found = HostFound::default();
    for need in needs {
        let there = match need {
            HostNeed::Program(p) => sys::host::which(p).is_some(),
            HostNeed::File(f) => std::path::Path::new(f).exists(),
            HostNeed::User(u) => match sys::host::user(u) {
                Some(ids) => found.users.insert(u.clone(), ids).is_none(),
                None => false,
            },
            HostNeed::Cgroup(c) => match crate::world::cgroups::refusal(c) {
                Some(why) => found.reasons.insert(need.clone(), why).is_some(),
                None => true,
            },
            HostNeed::Cpus(list) => cpus_online(list),
            HostNeed::Device(path, write) => {
                host_root || sys::may_open(std::path::Path::new(path), *write).is_ok()
            }
        };
        if !there {
            found.missing.insert(need.clone());
        }
    }
    found
}

/// Whether every CPU of `list` (as the kernel writes a list) is online.
fn cpus_online(list: &str) -> bool {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    match (
        nsfleet_values::cpu_list(list),
        nsfleet_values::cpu_list(&online),
    ) {
        (Ok(asked), Ok(online)) => asked.iter().all(|c| online.contains(c)),
        _ => false,
    }
}

/// Of `values`, those whose writable key the namespace we are in refuses, with the
/// kernel's reason: each written once, here, where nothing else lives.
fn refused_values(
    values: &[(String, String)],
    writable: &BTreeSet<String>,
) -> BTreeMap<(String, String), String> {
    let root = std::path::Path::new("/proc/sys");
    (values.iter())
        .filter(|(p, _)| writable.contains(p))
        .filter_map(|(p, v)| {
            let e = std::fs::write(root.join(p), v).err()?;
            Some(((p.clone(), v.clone()), e.to_string()))
        })
        .collect()
}

/// Whether the kernel has IPv6 (was not booted with ipv6.disable=1). Looked up once: a
/// /proc/sys lookup costs more the more namespaces there are.
pub fn has_ipv6() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| std::path::Path::new("/proc/sys/net/ipv6").exists())
}

/// Whether the kernel has bridge netfilter (`br_netfilter`: built in, or loaded, by
/// Docker among others), whose `net.bridge.bridge-nf-call-*` each namespace has. Looked up
/// once, as [`has_ipv6`]: a module loaded later is seen by the next fleet.
pub fn has_bridge_netfilter() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| std::path::Path::new("/proc/sys/net/bridge").exists())
}

/// Whether the running kernel has Open vSwitch's datapath module (`openvswitch`), loaded
/// or to load (the kernel loads it when ovs-vswitchd first asks for its netlink family).
/// Looked up once, as [`has_ipv6`].
pub fn has_ovs_kernel_datapath() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        if std::path::Path::new("/sys/module/openvswitch").exists() {
            return true;
        }
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let dep = format!("/lib/modules/{}/modules.dep", release.trim());
        std::fs::read_to_string(dep).is_ok_and(|d| d.contains("/openvswitch.ko"))
    })
}

/// The running kernel's (major, minor), from its release (`6.18.44-...`), read once.
pub fn kernel_version() -> (u32, u32) {
    static VERSION: OnceLock<(u32, u32)> = OnceLock::new();
    *VERSION.get_or_init(|| {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let mut parts = (release.trim().split(['.', '-'])).map(|p| p.parse().unwrap_or(0));
        (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
    })
}

/// Whether the running kernel has netem, found out once by trying it on `lo` of a
/// scratch namespace.
pub fn has_netem() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| in_scratch_namespace(netem_works).unwrap_or(false))
}

fn netem_works() -> bool {
    let Ok(mut sock) = NlSocket::open() else {
        return false;
    };
    let mut b = Batch::new();
    rtnl::set_netem(&mut b, sock.next_seq(), 1, &Netem::default());
    sock.execute_all(&b).is_ok()
}

/// Whether the kernel makes devices of `kind` (`dummy`), found out once per kind by making
/// one in a scratch namespace: the kernel loads the kind's module if it can. Without
/// root, assumed: `up` finds out.
fn can_make(kind: &str) -> bool {
    static CAN: std::sync::Mutex<BTreeMap<String, bool>> = std::sync::Mutex::new(BTreeMap::new());
    let mut known = CAN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&can) = known.get(kind) {
        return can;
    }
    let owned = kind.to_string();
    let Some(can) = in_scratch_namespace(move || device_works(&owned)) else {
        return true;
    };
    known.insert(kind.to_string(), can);
    can
}

fn device_works(kind: &str) -> bool {
    let Ok(mut sock) = NlSocket::open() else {
        return false;
    };
    let mut b = Batch::new();
    let spec = rtnl::LinkSpec {
        name: "probe0",
        ..Default::default()
    };
    match kind {
        "dummy" => rtnl::new_dummy(&mut b, sock.next_seq(), &spec),
        _ => return false,
    }
    sock.execute_all(&b).is_ok()
}

/// Runs `f` on a thread inside a new network namespace, which dies with the thread.
fn in_scratch_namespace<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> Option<R> {
    std::thread::spawn(move || sys::unshare_net().ok().map(|()| f()))
        .join()
        .ok()
        .flatten()
}

/// Those of `paths` (below /proc/sys) that the calling thread's namespace can write.
fn writable(paths: &[String]) -> BTreeSet<String> {
    let can_write = |p: &String| {
        std::fs::metadata(std::path::Path::new("/proc/sys").join(p))
            .is_ok_and(|m| m.permissions().mode() & 0o200 != 0)
    };
    paths.iter().filter(|p| can_write(p)).cloned().collect()
}

//! Who holds a namespace: a walk of /proc (tasks, descriptors, every mount table); and
//! what /proc/net/route says routes an IPv4 prefix.

use std::collections::{HashMap, HashSet};

/// Who keeps the network namespaces of these inodes alive, as "pid 1234 (bash)" or "bind
/// mount ...": tasks inside them, open descriptors, bind mounts. Not this process's
/// descriptors (it holds what it asks about open, so that the inodes stay its own), but
/// its threads, by name. A full /proc walk: for when the kernel has gone quiet. `want`
/// names each namespace by its inode, with its handle where it has one (see
/// [`is_wanted`]).
pub fn netns_holders(want: &HashMap<u64, Option<crate::NsHandle>>) -> HashMap<u64, Vec<String>> {
    let mut found: HashMap<u64, Vec<String>> = HashMap::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return found;
    };
    // Not our descriptors: the caller holds what it asks about open, so that the inodes
    // stay its own. Our threads, though: one left in a node keeps it alive.
    let me = crate::host_pid() as u32;
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let comm = |dir: &std::path::Path| {
            let c = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
            c.trim().to_string()
        };
        let who = format!("pid {pid} ({})", comm(&p.path()));
        let mut links: Vec<(std::path::PathBuf, String)> = Vec::new();
        if let Ok(tasks) = std::fs::read_dir(p.path().join("task")) {
            for t in tasks.flatten() {
                let who = match pid == me {
                    true => format!("{who}'s thread {}", comm(&t.path())),
                    false => who.clone(),
                };
                links.push((t.path().join("ns/net"), who));
            }
        }
        let fds = (pid != me).then(|| std::fs::read_dir(p.path().join("fd")));
        if let Some(Ok(fds)) = fds {
            links.extend(fds.flatten().map(|f| (f.path(), who.clone())));
        }
        for (l, who) in links {
            if let Some(ino) = netns_of(&l).filter(|i| is_wanted(want, *i, &l)) {
                let v = found.entry(ino).or_default();
                if !v.contains(&who) {
                    v.push(who.clone());
                }
            }
        }
    }
    for (pid, mounts) in mount_tables() {
        for line in mounts.lines().filter(|l| l.contains(" nsfs ")) {
            let ino = line
                .split_once("net:[")
                .and_then(|(_, r)| r.split(']').next()?.parse::<u64>().ok());
            if let Some(ino) = ino.filter(|i| want.contains_key(i)) {
                let target = line.split(' ').nth(4).unwrap_or("?");
                let what = format!("bind mount {target} (mount namespace of pid {pid})");
                found.entry(ino).or_default().push(what);
            }
        }
    }
    found
}

/// Whether the namespace behind `link`, of inode `ino`, is one of `want`: its inode, and
/// its handle where one is given. A freed namespace's inode passes to the next one made,
/// which the handle tells apart (a mount's namespace, not opened, is told by its inode).
fn is_wanted(
    want: &HashMap<u64, Option<crate::NsHandle>>,
    ino: u64,
    link: &std::path::Path,
) -> bool {
    match want.get(&ino) {
        None => false,
        Some(None) => true,
        Some(Some(h)) => std::fs::File::open(link)
            .and_then(|f| crate::ns_handle(std::os::fd::AsFd::as_fd(&f)))
            .is_ok_and(|seen| seen == *h),
    }
}

/// The mount table of every mount namespace on the machine, read through one process in it.
fn mount_tables() -> Vec<(u32, String)> {
    let mut seen = HashSet::new();
    let mut tables = Vec::new();
    for p in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(mnt) = std::fs::read_link(p.path().join("ns/mnt")) else {
            continue;
        };
        if seen.insert(mnt) {
            if let Ok(t) = std::fs::read_to_string(p.path().join("mountinfo")) {
                tables.push((pid, t));
            }
        }
    }
    tables
}

/// Processes inside the network namespaces of these inodes whose environment holds
/// `marker` (`NAME=value`, as a command's launcher set it), as (inode, "pid 1234 (bash)").
pub fn marked_processes(want: &HashSet<u64>, marker: &str) -> Vec<(u64, String)> {
    let mut found = Vec::new();
    for p in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Some(ino) = netns_of(&p.path().join("ns/net")).filter(|i| want.contains(i)) else {
            continue;
        };
        let env = std::fs::read(p.path().join("environ")).unwrap_or_default();
        if env.split(|b| *b == 0).any(|v| v == marker.as_bytes()) {
            let comm = std::fs::read_to_string(p.path().join("comm")).unwrap_or_default();
            found.push((ino, format!("pid {pid} ({})", comm.trim())));
        }
    }
    found
}

/// The inode of process `pid`'s network namespace; `None` once it is gone.
pub fn netns_of_pid(pid: i64) -> Option<u64> {
    netns_of(std::path::Path::new(&format!("/proc/{pid}/ns/net")))
}

/// The inode of the network namespace a `ns/net` link (or a descriptor of one) names.
fn netns_of(link: &std::path::Path) -> Option<u64> {
    let t = std::fs::read_link(link).ok()?;
    t.to_str()?
        .strip_prefix("net:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// What a process has used, from /proc/`who`/stat (`who` a pid or `self`): CPU seconds
/// in user and system mode, those of its children it has waited for, and its resident
/// memory.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Usage {
    pub user_seconds: f64,
    pub system_seconds: f64,
    pub children_seconds: f64,
    pub rss_bytes: u64,
}

impl Usage {
    /// User and system CPU seconds together.
    pub fn cpu_seconds(&self) -> f64 {
        self.user_seconds + self.system_seconds
    }
}

/// What process `who` has used; `None` once it is gone.
pub fn usage_of(who: &str) -> Option<Usage> {
    let stat = std::fs::read_to_string(format!("/proc/{who}/stat")).ok()?;
    // After the command's closing parenthesis: state is field 3, utime 14, stime 15,
    // cutime 16, cstime 17 and rss (pages) 24 of proc(5).
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    let seconds = |n: usize| Some(field(n)? as f64 / crate::clock_ticks_per_second() as f64);
    Some(Usage {
        user_seconds: seconds(14)?,
        system_seconds: seconds(15)?,
        children_seconds: seconds(16)? + seconds(17)?,
        rss_bytes: field(24)? * crate::page_size(),
    })
}
/// The interface by which `table` (the text of a /proc/net/route: a namespace's IPv4
/// main table) routes exactly `addr`/`prefix`, if it does: 0.0.0.0/0 asks for the
/// default route's.
pub fn ipv4_route_device(table: &str, addr: std::net::Ipv4Addr, prefix: u8) -> Option<String> {
    let mask = u32::MAX
        .checked_shl(32 - u32::from(prefix.min(32)))
        .unwrap_or(0);
    table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        // Iface Destination Gateway Flags RefCnt Use Metric Mask ...: destination and
        // mask in hex, the address's bytes in memory order.
        let hex = |k: usize| {
            f.get(k)
                .and_then(|v| u32::from_str_radix(v, 16).ok())
                .map(u32::from_be)
        };
        let same = hex(1) == Some(u32::from(addr)) && hex(7) == Some(mask);
        same.then(|| f[0].to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_route_of_proc_net_route_is_found_by_its_exact_prefix() {
        let table =
            "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n\
            nsfleet-out\t00000000\t0101A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
            eth0\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        let any = std::net::Ipv4Addr::UNSPECIFIED;
        assert_eq!(
            ipv4_route_device(table, any, 0).as_deref(),
            Some("nsfleet-out")
        );
        let lan = "192.168.0.0".parse().unwrap();
        assert_eq!(ipv4_route_device(table, lan, 24).as_deref(), Some("eth0"));
        assert_eq!(ipv4_route_device(table, lan, 16), None);
    }
}

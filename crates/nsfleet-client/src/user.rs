//! A user's fleets: nsfleet run by someone other than root, with no setuid and no sudo.
//!
//! `up` makes the fleet a user namespace of the user's own, with a network namespace it
//! owns, and becomes their root (as `unshare -Urnm` does) before it claims the name: the
//! supervisor it forks, and every node, live there, and nothing of the fleet is the
//! host's. The user's other commands enter that user namespace through the supervisor
//! (the kernel lets its owner in) before they enter a node. The ids: the user's own as
//! the fleet's root, and their subordinate ranges of /etc/subuid and /etc/subgid after it
//! through `newuidmap`/`newgidmap`, for the nodes' roots and images' owners; without
//! them, the user's id alone.
//!
//! What this must never do: write a map it was not given (the setuid helpers decide), or
//! run anything of the host's as root: nothing here is privileged but in the namespace
//! it makes.

use anyhow::{anyhow, bail, Context};
use nsfleet::sys;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

/// The ranges of /etc/subuid and /etc/subgid a fleet's nodes need: a root and the 65,535
/// ids an image's files may have after it, as Docker's and podman's.
const SUB_IDS: u32 = 65_536;

/// A user's subordinate range: `first..first + count` of the host's ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SubRange {
    first: u32,
    count: u32,
}

/// Makes the new fleet's user namespace (and the network and mount namespaces it owns)
/// and makes this process their root, or says why the kernel or the host refuse it.
/// Before anything of the fleet exists, by a process of one thread.
pub fn become_root_of_new_fleet() -> anyhow::Result<()> {
    let (user, net) = new_namespaces("the fleet's user namespace")?;
    sys::userns::become_root_of(user.as_fd(), net.as_fd())
        .context("entering the fleet's user namespace")
}

/// A new user namespace of the caller's ids ([`IdMap`]) and a network namespace it owns,
/// or why the kernel or the host refuse them; `what` says it in errors.
fn new_namespaces(what: &str) -> anyhow::Result<(OwnedFd, OwnedFd)> {
    if let Some(why) = userns_refused() {
        bail!("{why}");
    }
    let map = IdMap::for_caller()?;
    sys::userns::new_user_and_net_mapped(|pid| map.write(pid))
        .map_err(|e| anyhow!("making {what}: {e}"))
}

/// Makes a user namespace of the user's ids (as a fleet's, see [`IdMap`]) and makes this
/// process its root, in the host's other namespaces: where a user's image commands
/// work, so that an image's files get the owners the image gives them (the user's
/// subordinate ids) and a store's files can be removed whoever of those owns them.
/// Root's stays where it is. By a process of one thread.
pub fn become_root_of_own_ids() -> anyhow::Result<()> {
    if sys::is_host_root() {
        return Ok(());
    }
    let (user, _net) = new_namespaces("a user namespace of your ids")?;
    sys::userns::become_root_in(user.as_fd()).context("entering a user namespace of your ids")
}

/// Enters the user namespace of the fleet whose supervisor is `sup` as its root: what a
/// user's command does before it enters one of the fleet's nodes (see
/// `FleetRef::enter_as_user`, which leaves root's where it is).
pub fn enter_fleet(sup: nsfleet::rundir::ProcId) -> anyhow::Result<()> {
    let pidfd = sys::pidfd_open(sup.pid).context("the fleet's supervisor has ended")?;
    if !sup.alive() {
        bail!("the fleet's supervisor has ended");
    }
    sys::userns::become_root_in(pidfd.as_fd()).context("entering the fleet's user namespace")
}

/// Refuses, in a user's fleet (this process its root already), an Open vSwitch switch on
/// the userspace datapath where /dev/net/tun is not the user's to open: ovs-vswitchd
/// makes the bridge's own port through it, and fails after its start otherwise.
pub fn check_switches(topo: &nsfleet::topology::Topology) -> anyhow::Result<()> {
    let userspace = (topo.groups.iter()).find(|g| {
        (g.config.ovs.as_ref()).is_some_and(|o| !nsfleet::subsys::ovs::in_kernel(o.datapath))
    });
    let Some(switch) = userspace else {
        return Ok(());
    };
    if let Err(e) = tun_opens() {
        let name = switch.names.iter().next().unwrap_or_default();
        let why = match switch.config.ovs.as_ref().map(|o| o.datapath) {
            Some(nsfleet::topology::Datapath::Auto) => " (this kernel has no openvswitch module)",
            _ => "",
        };
        bail!("Open vSwitch switch {name:?}: its userspace datapath{why} makes ports through {TUN}, which a user may not open here ({e}; most distributions make it 0666, this host root's alone): run nsfleet as root, or use a Linux bridge switch (docs/rootless.md)");
    }
    Ok(())
}

const TUN: &str = "/dev/net/tun";

/// Whether the user may open /dev/net/tun, as ovs-vswitchd's userspace datapath and pasta
/// must.
fn tun_opens() -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(TUN)
        .map(drop)
}

/// Whether pasta can give a user's fleet outbound traffic (see nsfleet-subsys's
/// `outbound`): installed, and /dev/net/tun the user's to open. Why not, if not.
pub fn pasta_runs() -> Result<(), String> {
    if sys::host::which("pasta").is_none() {
        return Err("pasta is not installed (Debian's and Ubuntu's package `passt`)".into());
    }
    tun_opens().map_err(|e| format!("pasta needs {TUN}, which this user may not open ({e}; most distributions make it 0666, this host root's alone)"))
}

/// How the fleet's ids are given: the user's own only, or with their subordinate ranges.
enum IdMap {
    Own,
    Sub {
        uid: u32,
        gid: u32,
        uids: SubRange,
        gids: SubRange,
    },
}

impl IdMap {
    /// The caller's: with the subordinate ranges /etc/subuid and /etc/subgid give them
    /// (refused when they overlap another user's, or `newuidmap` is missing), else their
    /// own id alone.
    fn for_caller() -> anyhow::Result<Self> {
        let (uid, gid) = sys::real_ids();
        let name = sys::host::user_name(uid).unwrap_or_else(|| uid.to_string());
        let uids = sub_range(Path::new("/etc/subuid"), &name, uid)?;
        let gids = sub_range(Path::new("/etc/subgid"), &name, uid)?;
        let (Some(uids), Some(gids)) = (uids, gids) else {
            return Ok(IdMap::Own);
        };
        for tool in ["newuidmap", "newgidmap"] {
            if sys::host::which(tool).is_none() {
                bail!("/etc/subuid and /etc/subgid give {name} ids for the fleet's nodes, but {tool} is not installed: install it (Debian and Ubuntu: apt-get install uidmap; Fedora: shadow-utils), or remove {name}'s lines there to run the fleet with your id alone");
            }
        }
        Ok(IdMap::Sub {
            uid,
            gid,
            uids,
            gids,
        })
    }

    /// Gives process `pid`'s new user namespace these ids.
    fn write(&self, pid: i64) -> std::io::Result<()> {
        let IdMap::Sub {
            uid,
            gid,
            uids,
            gids,
        } = self
        else {
            return sys::userns::map_own_id(pid);
        };
        let run = |tool: &str, own: u32, sub: &SubRange| -> std::io::Result<()> {
            let count = sub.count.min(SUB_IDS);
            let out = std::process::Command::new(tool)
                .args([pid.to_string(), "0".into(), own.to_string(), "1".into()])
                .args(["1".into(), sub.first.to_string(), count.to_string()])
                .stdin(std::process::Stdio::null())
                .output()?;
            if out.status.success() {
                return Ok(());
            }
            let said = String::from_utf8_lossy(&out.stderr);
            Err(std::io::Error::other(format!("{tool}: {}", said.trim())))
        };
        run("newuidmap", *uid, uids)?;
        run("newgidmap", *gid, gids)
    }
}

/// `name`'s (or `uid`'s) first range of `file` (/etc/subuid's format, `NAME:FIRST:COUNT`)
/// of at least [`SUB_IDS`] ids; refused when it overlaps another user's range there,
/// which would let either take the other's files. None when there is none, or no file.
fn sub_range(file: &Path, name: &str, uid: u32) -> anyhow::Result<Option<SubRange>> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", file.display())),
    };
    let lines = || {
        text.lines().enumerate().filter_map(|(i, l)| {
            let mut f = l.trim().splitn(3, ':');
            let (who, first, count) = (f.next()?, f.next()?.parse().ok()?, f.next()?.parse().ok()?);
            Some((i + 1, who, SubRange { first, count }))
        })
    };
    let uid_text = uid.to_string();
    let ours = |who: &str| who == name || who == uid_text;
    let Some((line, _, range)) = lines().find(|(_, who, r)| ours(who) && r.count >= SUB_IDS) else {
        return Ok(None);
    };
    let end = |r: &SubRange| u64::from(r.first) + u64::from(r.count);
    if let Some((other_line, who, _)) = lines().find(|(_, who, r)| {
        !ours(who) && u64::from(r.first) < end(&range) && u64::from(range.first) < end(r)
    }) {
        bail!(
            "{}:{line}: {name}'s range {}-{} overlaps {who}'s at line {other_line}: either of you could take the other's files; give each user a range of their own",
            file.display(),
            range.first,
            end(&range) - 1
        );
    }
    Ok(Some(range))
}

/// The setting that refuses users their own user namespaces on this machine, and how to
/// allow them, when one does: Debian's and older Ubuntu's switch, Ubuntu's AppArmor
/// restriction (from 23.10), and the per-user count.
fn userns_refused() -> Option<String> {
    let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned());
    refusal(
        read("/proc/sys/kernel/unprivileged_userns_clone").as_deref(),
        read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref(),
        read("/proc/sys/user/max_user_namespaces").as_deref(),
    )
}

fn refusal(clone: Option<&str>, apparmor: Option<&str>, max: Option<&str>) -> Option<String> {
    const SO: &str = "nsfleet runs a user's fleet in a user namespace of the user's own";
    if clone == Some("0") {
        return Some(format!("this kernel refuses users their own user namespaces (kernel.unprivileged_userns_clone = 0); {SO}. Allow them: sysctl -w kernel.unprivileged_userns_clone=1 (and a file in /etc/sysctl.d to keep it), or run nsfleet as root"));
    }
    if apparmor == Some("1") {
        return Some(format!("AppArmor refuses users their own user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1); {SO}. Allow nsfleet with an AppArmor profile that says `userns,` (see docs/rootless.md), or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or run nsfleet as root"));
    }
    if max == Some("0") {
        return Some(format!("this machine allows no user namespaces (user.max_user_namespaces = 0); {SO}. Allow them: sysctl -w user.max_user_namespaces=15000 (and a file in /etc/sysctl.d to keep it), or run nsfleet as root"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_setting_that_refuses_user_namespaces_is_named_with_its_fix() {
        assert!(refusal(Some("1"), Some("0"), Some("1000")).is_none());
        assert!(refusal(None, None, None).is_none());
        let said = refusal(Some("0"), None, None).unwrap();
        assert!(
            said.contains("sysctl -w kernel.unprivileged_userns_clone=1"),
            "{said}"
        );
        let said = refusal(None, Some("1"), None).unwrap();
        assert!(
            said.contains("kernel.apparmor_restrict_unprivileged_userns"),
            "{said}"
        );
        let said = refusal(None, None, Some("0")).unwrap();
        assert!(said.contains("user.max_user_namespaces"), "{said}");
    }

    #[test]
    fn a_subordinate_range_is_found_by_name_or_uid_and_refused_when_it_overlaps() {
        let dir = std::env::temp_dir().join(format!("nsfleet-subuid-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("subuid");
        std::fs::write(
            &file,
            "alice:100000:65536\n1002:165536:65536\nsmall:300000:10\n",
        )
        .unwrap();
        let alice = sub_range(&file, "alice", 1001).unwrap();
        assert_eq!(
            alice,
            Some(SubRange {
                first: 100_000,
                count: 65_536
            })
        );
        assert_eq!(
            sub_range(&file, "bob", 1002).unwrap().unwrap().first,
            165_536
        );
        assert_eq!(sub_range(&file, "small", 1003).unwrap(), None);
        assert_eq!(sub_range(&dir.join("none"), "alice", 1001).unwrap(), None);
        std::fs::write(&file, "alice:100000:65536\nmallory:120000:65536\n").unwrap();
        let said = sub_range(&file, "alice", 1001).unwrap_err().to_string();
        assert!(
            said.contains("subuid:1: alice's range 100000-165535 overlaps mallory's at line 2"),
            "{said}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

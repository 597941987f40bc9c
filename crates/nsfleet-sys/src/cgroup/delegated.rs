//! The cgroup v2 subtree delegated to whoever is not the host's root: what systemd's
//! `user@UID.service` (`Delegate=yes`) gives a user, or a container engine the root of a
//! cgroup namespace. The kernel lets a process make groups below a group whose folder and
//! `cgroup.procs` it may write, move its own processes between groups below the nearest
//! such one they share, and write the limits of the groups it made (theirs by owner); v1
//! hierarchies delegate nothing of use (a limit's folder is the host's root's).
//!
//! It finds that subtree and says why there is none, and never writes.

use super::{Controller, Hierarchy};
use std::fs;
use std::path::{Path, PathBuf};

/// The group delegated to this process, seen as a hierarchy of its own whose top is that
/// group: the highest among the group this process is in and those above it whose folder,
/// `cgroup.procs` and `cgroup.subtree_control` it may write, each one between too. Its
/// `available` controllers are those its parent gives it (`cgroup.controllers`); its
/// `controllers` those it hands, or may be made to hand, to groups below it: what it
/// hands already if it holds a process of its own (cgroup v2 hands nothing down from a
/// group that holds one), else every one it has. Why there is none otherwise.
pub fn delegated(all: &[Hierarchy]) -> Result<Hierarchy, String> {
    let Some(v2) = all.iter().find(|h| h.unified) else {
        return Err("no cgroup v2 hierarchy is mounted".into());
    };
    let own = own_group().map_err(|e| format!("reading /proc/self/cgroup: {e}"))?;
    let own = v2.shown(&own).ok_or_else(|| {
        format!(
            "this process's cgroup ({}) is not in the cgroup v2 hierarchy mounted at {}",
            own.display(),
            v2.mount.display()
        )
    })?;
    let top = highest_writable(&v2.mount, &own).ok_or_else(|| {
        format!(
            "this process's cgroup ({}) and those above it are not this user's: no cgroup v2 subtree is delegated to it",
            own.display()
        )
    })?;
    let words = |f: &str| {
        let text = fs::read_to_string(top.join(f)).unwrap_or_default();
        text.split_whitespace()
            .map(String::from)
            .collect::<Vec<_>>()
    };
    let available = words("cgroup.controllers");
    let controllers = match words("cgroup.procs").is_empty() {
        true => available.clone(),
        false => words("cgroup.subtree_control"),
    };
    let root = v2
        .root
        .join(top.strip_prefix(&v2.mount).unwrap_or(Path::new("")));
    Ok(Hierarchy {
        mount: top,
        root,
        unified: true,
        controllers,
        available,
    })
}

/// Why a group made below [`delegated`]'s cannot use `c`, if it cannot: the controller is
/// on v1, nothing is delegated, the delegated group lacks it, or it holds processes.
pub fn refusal(all: &[Hierarchy], c: Controller) -> Option<String> {
    let on_v1 = all
        .iter()
        .find(|h| !h.unified && h.controllers.iter().any(|n| n == c.name()));
    if let Some(h) = on_v1 {
        return Some(format!(
            "this machine mounts the {} controller on a cgroup v1 hierarchy ({}), which delegates nothing to a user",
            c.name(),
            h.mount.display()
        ));
    }
    let d = match delegated(all) {
        Ok(d) => d,
        Err(why) => return Some(why),
    };
    let has = |names: &[String]| c == Controller::Cpuacct || names.iter().any(|n| n == c.name());
    if !has(&d.available) {
        return Some(format!(
            "the cgroup delegated to this user ({}) is not given the {} controller by the group above it (systemd: a drop-in for user@.service with Delegate= naming it)",
            d.mount.display(),
            c.name()
        ));
    }
    (!has(&d.controllers)).then(|| {
        format!(
            "the cgroup delegated to this user ({}) holds processes of its own, so cgroup v2 lets it hand no controller down: run nsfleet in a group below it (`systemd-run --user --scope nsfleet ...`)",
            d.mount.display()
        )
    })
}

/// The v2 group this process is in, as /proc/self/cgroup says it (`0::/PATH`).
fn own_group() -> std::io::Result<PathBuf> {
    let text = fs::read_to_string("/proc/self/cgroup")?;
    let path = (text.lines())
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or_else(|| std::io::Error::other("it names no cgroup v2 group"))?;
    Ok(PathBuf::from(path))
}

/// The highest of `own` (a group's path from the hierarchy's top, `/a/b`) and the groups
/// above it such that it and every group between it and `own` are writable here.
fn highest_writable(mount: &Path, own: &Path) -> Option<PathBuf> {
    let mut found = None;
    for group in own.ancestors() {
        let dir = mount.join(group.strip_prefix("/").unwrap_or(group));
        if !writable(&dir) {
            break;
        }
        found = Some(dir);
    }
    found
}

/// Whether this process may make groups in `dir` and move processes into it (each file
/// readable too, as a delegated group's are).
fn writable(dir: &Path) -> bool {
    let may = |p: &Path| crate::fs::may_open(p, true).is_ok();
    may(dir) && may(&dir.join("cgroup.procs")) && may(&dir.join("cgroup.subtree_control"))
}

//! Process limits and privileges: RLIMIT_NOFILE, capabilities, root.

use crate::check;
use std::io;

/// RLIMIT_NOFILE in force: (soft, hard).
pub fn nofile_limits() -> (u64, u64) {
    // SAFETY: rlimit is plain data; getrlimit writes into it.
    unsafe {
        let mut rl: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) != 0 {
            return (0, 0);
        }
        (rl.rlim_cur, rl.rlim_max)
    }
}

/// Whether this process has capability `cap` in its effective set (/proc/self/status).
pub fn has_capability(cap: u32) -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let hex = s.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
            u64::from_str_radix(hex.trim(), 16).ok()
        })
        .is_some_and(|caps| caps & (1u64 << cap) != 0)
}

/// Raises RLIMIT_NOFILE so that at least `want` descriptors can be open; the hard limit
/// too when we may (root). Returns the soft limit in force.
pub fn raise_nofile(want: u64) -> io::Result<u64> {
    // SAFETY: rlimit is plain data; getrlimit/setrlimit take valid pointers.
    unsafe {
        let mut rl: libc::rlimit = std::mem::zeroed();
        check(libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl))?;
        if rl.rlim_cur >= want {
            return Ok(rl.rlim_cur);
        }
        let mut new = rl;
        new.rlim_cur = want;
        if new.rlim_max < want {
            new.rlim_max = want;
        }
        if libc::setrlimit(libc::RLIMIT_NOFILE, &new) == 0 {
            return Ok(want);
        }
        new.rlim_cur = rl.rlim_max;
        new.rlim_max = rl.rlim_max;
        check(libc::setrlimit(libc::RLIMIT_NOFILE, &new))?;
        Ok(rl.rlim_max)
    }
}

/// Whether we run as root, which creating network and PID namespaces requires.
pub fn is_root() -> bool {
    euid() == 0
}

/// Whether we are the host's root: uid 0 of the host's user namespace. Root of another
/// user namespace (`unshare -Ur`, a rootless container's root) runs fleets as a user
/// does: what needs the host's root (its namespaces, cgroups, /run) is not its own.
pub fn is_host_root() -> bool {
    is_root() && crate::userns::in_host_namespace().unwrap_or(true)
}

/// Our effective uid.
pub fn euid() -> u32 {
    // SAFETY: geteuid(2) cannot fail and has no side effects.
    unsafe { libc::geteuid() }
}

/// Our real uid and gid: who runs us.
pub fn real_ids() -> (u32, u32) {
    // SAFETY: getuid(2) and getgid(2) cannot fail and have no side effects.
    unsafe { (libc::getuid(), libc::getgid()) }
}

//! A node's seccomp profile of its own (`security_opt = ["seccomp=FILE"]`) as a filter for
//! this machine: the rules that apply to its architecture, its kernel and the
//! capabilities the node keeps (Docker's `includes` and `excludes`), each call named by
//! its number here (a name this architecture lacks is left out, as Docker leaves it),
//! compiled once per distinct program (`sys::seccomp::intern`).

use nsfleet_sys::seccomp::{self, Rule};
use nsfleet_topology::seccomp::{Applies, SeccompProfile};

/// The filter of `profile` for a node that drops the capabilities `dropped`.
pub(super) fn compile(
    profile: &SeccompProfile,
    dropped: u64,
) -> anyhow::Result<&'static [libc::sock_filter]> {
    let kernel = running_kernel();
    let kept = nsfleet_values::ALL_CAPABILITIES & !dropped;
    let mut rules = Vec::new();
    for r in &profile.rules {
        if !applies(&r.includes, kept, kernel, true) || applies(&r.excludes, kept, kernel, false) {
            continue;
        }
        let action = r.action;
        // Docker's profiles give several conditions on one argument to mean any of them
        // (runc splits them into rules of their own); on different arguments, all.
        let mut indexes: Vec<u8> = r.args.iter().map(|a| a.index).collect();
        indexes.sort_unstable();
        let either = indexes.windows(2).any(|w| w[0] == w[1]);
        let conditions: Vec<Vec<_>> = match either {
            true => r.args.iter().map(|a| vec![*a]).collect(),
            false => vec![r.args.clone()],
        };
        for nr in r.names.iter().filter_map(|n| seccomp::number(n)) {
            for args in &conditions {
                let args = args.clone();
                rules.push(Rule { nr, action, args });
            }
        }
    }
    // Each call's most restrictive action first: where several rules match, it is the
    // one that holds, as libseccomp decides.
    rules.sort_by_key(|r| (r.nr, r.action.precedence()));
    let program = seccomp::compile(profile.default_action, &rules)
        .map_err(|e| anyhow::anyhow!("seccomp profile {}: {e}", profile.file))?;
    Ok(seccomp::intern(program))
}

/// Whether a rule's `includes` (`all`: every part must hold) or `excludes` (any part
/// holds) holds of this machine and a node that keeps the capabilities `kept`.
fn applies(a: &Applies, kept: u64, kernel: (u32, u32), all: bool) -> bool {
    let held = |cap: &String| nsfleet_values::capability(cap).is_ok_and(|bits| kept & bits == bits);
    let caps = a.caps.iter().map(held);
    let arch = (a.arches.iter()).any(|x| seccomp::ARCH_NAMES.contains(&x.as_str()));
    let kernel_ok = a.min_kernel.map(|min| kernel >= min);
    match all {
        true => {
            caps.clone().all(|h| h) && (a.arches.is_empty() || arch) && kernel_ok != Some(false)
        }
        false => caps.clone().any(|h| h) || arch || kernel_ok == Some(true),
    }
}

/// The running kernel's (major, minor), from its release (`6.18.44-...`).
fn running_kernel() -> (u32, u32) {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release
        .trim()
        .split(['.', '-'])
        .map(|p| p.parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

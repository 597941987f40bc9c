//! A node's seccomp profile of its own (`security_opt = ["seccomp=FILE"]`) as a filter for
//! this machine: the rules that apply to its architecture, its kernel and the
//! capabilities the node keeps (Docker's `includes` and `excludes`), each call named by
//! its number here (a name this architecture lacks is left out, as Docker leaves it),
//! compiled once per distinct program (`sys::seccomp::intern`).

use nsfleet_sys::seccomp::{self, Action, Rule};
use nsfleet_topology::seccomp::{Applies, SeccompProfile};

/// The filter of `profile` for a node that drops the capabilities `dropped`.
pub(super) fn compile(
    profile: &SeccompProfile,
    dropped: u64,
) -> anyhow::Result<&'static [libc::sock_filter]> {
    let kernel = crate::probe::kernel_version();
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
    // runc's: a call newer than every call the profile names gets ENOSYS, not the
    // default, where the default refuses: a program then falls back to an older call,
    // as it does on an older kernel (glibc's fchmodat does so on ENOSYS only).
    let newest = rules.iter().map(|r| r.nr).max();
    let refusing = !matches!(profile.default_action, Action::Allow | Action::Log);
    let rules = as_runc_gives_them(rules, profile.default_action);
    let enosys_above = newest.filter(|_| refusing);
    let program = seccomp::compile(profile.default_action, &rules, enosys_above)
        .map_err(|e| anyhow::anyhow!("seccomp profile {}: {e}", profile.file))?;
    Ok(seccomp::intern(program))
}

/// Each call's rules as runc hands them to libseccomp and it keeps them: a rule whose
/// action is the default's is left out (runc's `matchCall`); a call with a rule without
/// conditions keeps only the first such rule (libseccomp drops a call's conditional
/// rules once it has an unconditional one); the others, the most restrictive action
/// first, so that where several match it is the one that holds.
fn as_runc_gives_them(mut rules: Vec<Rule>, default: Action) -> Vec<Rule> {
    rules.retain(|r| r.action != default);
    let unconditional: std::collections::HashSet<u32> =
        (rules.iter().filter(|r| r.args.is_empty()))
            .map(|r| r.nr)
            .collect();
    let mut seen = std::collections::HashSet::new();
    rules.retain(|r| match unconditional.contains(&r.nr) {
        true => r.args.is_empty() && seen.insert(r.nr),
        false => true,
    });
    rules.sort_by_key(|r| (r.nr, r.action.precedence()));
    rules
}

/// Whether a rule's `includes` (`all`: every part must hold) or `excludes` (any part
/// holds) holds of this machine and a node that keeps the capabilities `kept`.
fn applies(a: &Applies, kept: u64, kernel: (u32, u32), all: bool) -> bool {
    let held = |cap: &String| nsfleet_values::capability(cap).is_ok_and(|bits| kept & bits == bits);
    let mut caps = a.caps.iter().map(held);
    let arch = (a.arches.iter()).any(|x| seccomp::ARCH_NAMES.contains(&x.as_str()));
    let kernel_ok = a.min_kernel.map(|min| kernel >= min);
    match all {
        true => caps.all(|h| h) && (a.arches.is_empty() || arch) && kernel_ok != Some(false),
        false => caps.any(|h| h) || arch || kernel_ok == Some(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(nr: u32, action: Action, conditioned: bool) -> Rule {
        let args = (conditioned.then_some(nsfleet_values::SeccompArg {
            index: 0,
            op: nsfleet_values::SeccompCmp::Eq,
            value: 1,
            value_two: 0,
        }))
        .into_iter()
        .collect();
        Rule { nr, action, args }
    }

    #[test]
    fn rules_are_kept_as_runc_and_libseccomp_keep_them() {
        let eperm = Action::Errno(1);
        let rules = vec![
            // The default's own action: left out, so that the Allow below may match.
            rule(5, eperm, false),
            rule(5, Action::Allow, true),
            // An unconditional rule: the call's only one.
            rule(7, Action::Allow, true),
            rule(7, Action::Log, false),
            rule(7, Action::Trap, false),
            // Conditional ones: the most restrictive first.
            rule(9, Action::Allow, true),
            rule(9, Action::KillProcess, true),
        ];
        let kept = as_runc_gives_them(rules, eperm);
        let shape: Vec<(u32, Action, bool)> = (kept.iter())
            .map(|r| (r.nr, r.action, r.args.is_empty()))
            .collect();
        assert_eq!(
            shape,
            [
                (5, Action::Allow, false),
                (7, Action::Log, true),
                (9, Action::KillProcess, false),
                (9, Action::Allow, false),
            ]
        );
    }
}

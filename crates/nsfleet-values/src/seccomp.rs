//! Seccomp's actions and comparisons as a profile names them (libseccomp's and Docker's
//! `SCMP_ACT_*` and `SCMP_CMP_*`), shared by the profile's reader (nsfleet-topology) and
//! the filter's compiler (nsfleet-sys).

use serde::{Deserialize, Serialize};

/// What a filter does with a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SeccompAction {
    KillProcess,
    KillThread,
    /// SIGSYS to the caller.
    Trap,
    /// The call fails with this errno.
    Errno(u16),
    /// Allowed, and logged by the kernel's audit.
    Log,
    Allow,
}

impl SeccompAction {
    /// The action `name` (`SCMP_ACT_ERRNO`, with `errno`, EPERM unless given, as runc).
    pub fn named(name: &str, errno: Option<u16>) -> Result<SeccompAction, String> {
        Ok(match name {
            "SCMP_ACT_KILL_PROCESS" => SeccompAction::KillProcess,
            "SCMP_ACT_KILL" | "SCMP_ACT_KILL_THREAD" => SeccompAction::KillThread,
            "SCMP_ACT_TRAP" => SeccompAction::Trap,
            "SCMP_ACT_ERRNO" => SeccompAction::Errno(errno.unwrap_or(1)),
            "SCMP_ACT_LOG" => SeccompAction::Log,
            "SCMP_ACT_ALLOW" => SeccompAction::Allow,
            "SCMP_ACT_TRACE" | "SCMP_ACT_NOTIFY" => {
                return Err(format!("{name}: nsfleet does not trace calls or hand them to a listener"))
            }
            _ => return Err(format!("{name:?}: expected SCMP_ACT_ALLOW, SCMP_ACT_ERRNO, SCMP_ACT_KILL_PROCESS, SCMP_ACT_KILL_THREAD (or SCMP_ACT_KILL), SCMP_ACT_TRAP or SCMP_ACT_LOG")),
        })
    }

    /// Its rank where several rules of a call match: the kernel's own order between
    /// filters (the most restrictive first), which libseccomp keeps within one.
    pub fn precedence(self) -> u8 {
        match self {
            SeccompAction::KillProcess => 0,
            SeccompAction::KillThread => 1,
            SeccompAction::Trap => 2,
            SeccompAction::Errno(_) => 3,
            SeccompAction::Log => 4,
            SeccompAction::Allow => 5,
        }
    }
}

/// How an argument is compared with a rule's value, as unsigned 64-bit numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SeccompCmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// The argument masked by the value equals the second value.
    MaskedEq,
}

impl SeccompCmp {
    pub fn named(name: &str) -> Result<SeccompCmp, String> {
        Ok(match name {
            "SCMP_CMP_EQ" => SeccompCmp::Eq,
            "SCMP_CMP_NE" => SeccompCmp::Ne,
            "SCMP_CMP_LT" => SeccompCmp::Lt,
            "SCMP_CMP_LE" => SeccompCmp::Le,
            "SCMP_CMP_GT" => SeccompCmp::Gt,
            "SCMP_CMP_GE" => SeccompCmp::Ge,
            "SCMP_CMP_MASKED_EQ" => SeccompCmp::MaskedEq,
            op => {
                return Err(format!(
                    "op {op:?}: expected SCMP_CMP_EQ, _NE, _LT, _LE, _GT, _GE or _MASKED_EQ"
                ))
            }
        })
    }
}

/// A condition on argument `index` (0-5) of a call: `op` against `value` (for `MaskedEq`,
/// the argument masked by `value` equals `value_two`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeccompArg {
    pub index: u8,
    pub op: SeccompCmp,
    pub value: u64,
    #[serde(default)]
    pub value_two: u64,
}

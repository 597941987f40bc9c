//! A seccomp profile of Docker's format (`security_opt = ["seccomp=FILE"]`, containerlab's
//! `security-opts`, Docker's `--security-opt seccomp=FILE`), read and checked: its default
//! action, and each rule's call names, action, conditions on arguments, and the
//! capabilities, architectures and kernel it applies to. What the rules come to on this
//! machine (which calls it has, which capabilities a node keeps) is the engine's to decide
//! when a node starts; this module never looks at the host.
//!
//! Taken as Docker takes it (moby's `profiles/seccomp`): `defaultAction`,
//! `defaultErrnoRet`, `syscalls` with `names` (or `name`), `action`, `errnoRet`, `args`
//! (`index`, `value`, `valueTwo`, `op`), `includes` and `excludes` (`caps`, `arches`,
//! `minKernel`). `architectures` and `archMap` are read and not needed: only the machine's
//! own ABI is let through, as by nsfleet's default filter. Refused: `SCMP_ACT_TRACE` and
//! `SCMP_ACT_NOTIFY` (nothing here traces or listens), `listenerPath`.

use nsfleet_values::{SeccompAction, SeccompArg, SeccompCmp};
use serde::{Deserialize, Serialize};

/// A profile, as the node's processes get it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeccompProfile {
    /// The file it was read from, as written (for messages).
    pub file: String,
    /// What a call no rule names gets.
    pub default_action: SeccompAction,
    pub rules: Vec<ProfileRule>,
}

/// The calls `names` get `action` where every condition of `args` holds (where two
/// conditions are on the same argument, where either holds: Docker's profiles say
/// "personality(2) with 0, or with 8" so), if the node and the machine are as `includes`
/// says and not as `excludes` does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileRule {
    pub names: Vec<String>,
    pub action: SeccompAction,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<SeccompArg>,
    #[serde(default)]
    pub includes: Applies,
    #[serde(default)]
    pub excludes: Applies,
}

/// Where a rule applies (`includes`: all of it must hold) or not (`excludes`: any of it
/// rules the rule out).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applies {
    /// Capability names, `CAP_` and all, as Docker writes them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caps: Vec<String>,
    /// `SCMP_ARCH_*` names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arches: Vec<String>,
    /// The oldest kernel (major, minor) the rule is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_kernel: Option<(u32, u32)>,
}

/// The profile as Docker writes it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Docker {
    default_action: String,
    default_errno_ret: Option<u16>,
    #[serde(default)]
    listener_path: String,
    #[serde(default)]
    syscalls: Vec<DockerRule>,
    // Read and not needed (see the module's comment).
    #[serde(default, rename = "architectures")]
    _architectures: Vec<String>,
    #[serde(default, rename = "archMap")]
    _arch_map: serde_json::Value,
    #[serde(default, rename = "flags")]
    _flags: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DockerRule {
    #[serde(default)]
    names: Vec<String>,
    #[serde(default)]
    name: String,
    action: String,
    errno_ret: Option<u16>,
    #[serde(default)]
    args: Option<Vec<DockerArg>>,
    #[serde(default)]
    includes: Option<DockerApplies>,
    #[serde(default)]
    excludes: Option<DockerApplies>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DockerArg {
    index: u8,
    value: u64,
    #[serde(default)]
    value_two: u64,
    op: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct DockerApplies {
    #[serde(default)]
    caps: Vec<String>,
    #[serde(default)]
    arches: Vec<String>,
    #[serde(default)]
    min_kernel: Option<String>,
}

/// The profile of `text`, read from `file`; or why not, with the line and column where
/// the JSON is wrong, or the rule that is.
pub fn parse(file: &str, text: &str) -> Result<SeccompProfile, String> {
    let d: Docker = serde_json::from_str(text).map_err(|e| {
        let what = e.to_string();
        let what = what
            .rsplit_once(" at line ")
            .map_or(what.as_str(), |(w, _)| w);
        // serde_json's column is 0 at a line's start, where a line's first is 1.
        format!("{file}:{}:{}: {what}", e.line(), e.column().max(1))
    })?;
    if !d.listener_path.is_empty() {
        return Err(format!(
            "{file}: listenerPath: nsfleet does not hand calls to a listener"
        ));
    }
    let default_action = SeccompAction::named(&d.default_action, d.default_errno_ret)
        .map_err(|m| format!("{file}: defaultAction: {m}"))?;
    let mut rules = Vec::new();
    for (i, r) in d.syscalls.into_iter().enumerate() {
        let mut names = r.names;
        if !r.name.is_empty() {
            names.push(r.name);
        }
        let at = |m: String| {
            let first = names.first().map(String::as_str).unwrap_or("no name");
            format!("{file}: syscalls[{i}] ({first}...): {m}")
        };
        if names.is_empty() {
            return Err(at("a rule names no call (names)".into()));
        }
        let action = SeccompAction::named(&r.action, r.errno_ret).map_err(at)?;
        let args = (r.args.unwrap_or_default().iter())
            .map(arg)
            .collect::<Result<_, _>>()
            .map_err(at)?;
        let includes = applies(r.includes).map_err(|m| at(format!("includes: {m}")))?;
        let excludes = applies(r.excludes).map_err(|m| at(format!("excludes: {m}")))?;
        rules.push(ProfileRule {
            names,
            action,
            args,
            includes,
            excludes,
        });
    }
    Ok(SeccompProfile {
        file: file.to_string(),
        default_action,
        rules,
    })
}

fn arg(a: &DockerArg) -> Result<SeccompArg, String> {
    if a.index > 5 {
        return Err(format!(
            "args: index {}: a call has arguments 0 to 5",
            a.index
        ));
    }
    let op = SeccompCmp::named(&a.op).map_err(|m| format!("args: {m}"))?;
    Ok(SeccompArg {
        index: a.index,
        op,
        value: a.value,
        value_two: a.value_two,
    })
}

fn applies(a: Option<DockerApplies>) -> Result<Applies, String> {
    let a = a.unwrap_or_default();
    for cap in &a.caps {
        nsfleet_values::capability(cap).map_err(|m| format!("caps: {m}"))?;
    }
    let min_kernel = (a.min_kernel.as_deref())
        .map(|v| {
            let mut parts = v.split('.').map(str::parse::<u32>);
            match (parts.next(), parts.next()) {
                (Some(Ok(major)), Some(Ok(minor))) => Ok((major, minor)),
                _ => Err(format!("minKernel {v:?}: expected MAJOR.MINOR, as 4.8")),
            }
        })
        .transpose()?;
    Ok(Applies {
        caps: a.caps,
        arches: a.arches,
        min_kernel,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dockers_fields_are_read_and_what_is_wrong_is_placed() {
        let p = parse(
            "p.json",
            r#"{"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 38,
                "architectures": ["SCMP_ARCH_X86_64"],
                "syscalls": [
                  {"names": ["read", "write"], "action": "SCMP_ACT_ALLOW"},
                  {"name": "personality", "action": "SCMP_ACT_ALLOW",
                   "args": [{"index": 0, "value": 8, "op": "SCMP_CMP_EQ"}]},
                  {"names": ["clone"], "action": "SCMP_ACT_ALLOW",
                   "args": [{"index": 0, "value": 2114060288, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}],
                   "excludes": {"caps": ["CAP_SYS_ADMIN"], "arches": ["s390x"]},
                   "includes": {"minKernel": "4.8"}}
                ]}"#,
        )
        .unwrap();
        assert_eq!(p.default_action, SeccompAction::Errno(38));
        assert_eq!(p.rules[1].names, ["personality"]);
        assert_eq!(p.rules[2].args[0].op, SeccompCmp::MaskedEq);
        assert_eq!(p.rules[2].excludes.caps, ["CAP_SYS_ADMIN"]);
        assert_eq!(p.rules[2].includes.min_kernel, Some((4, 8)));

        let refused = |text: &str| parse("p.json", text).unwrap_err();
        assert_eq!(
            refused("{\n  \"defaultAction\": 3\n}"),
            "p.json:2:20: invalid type: integer `3`, expected a string"
        );
        let bad_action = refused(
            r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_NOTIFY"}]}"#,
        );
        assert!(
            bad_action.starts_with("p.json: syscalls[0] (mkdir...): SCMP_ACT_NOTIFY"),
            "{bad_action}"
        );
        let bad_cap = refused(
            r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_FLY"]}}]}"#,
        );
        assert!(bad_cap.contains("includes: caps:"), "{bad_cap}");
        let bad_index = refused(
            r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 6, "value": 0, "op": "SCMP_CMP_EQ"}]}]}"#,
        );
        assert!(bad_index.contains("index 6"), "{bad_index}");
    }
}

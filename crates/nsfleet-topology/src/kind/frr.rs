//! The `frr` kind: the host's installed FRR (Debian's paths) with the node's own
//! integrated configuration, zebra and staticd always, and the protocol daemons it lists.

use super::{file, need_config, private, KindParts};
use crate::{FileSource, HostNeed};

/// Where Debian installs FRR's daemons.
pub const DAEMON_DIR: &str = "/usr/lib/frr";

/// FRR's protocol daemons a node may list in `daemons` (zebra and staticd always run).
pub const DAEMONS: &[&str] = &[
    "bgpd", "ospfd", "ospf6d", "ripd", "ripngd", "isisd", "pimd", "ldpd", "nhrpd", "eigrpd",
    "babeld", "sharpd", "pbrd", "bfdd", "fabricd", "vrrpd", "pathd",
];

/// FRR as its Debian package runs it, in the node: zebra, staticd and the listed
/// daemons, each daemonized (`-d` returns once the daemon is ready), then `vtysh -b`
/// applies the integrated configuration. Daemons run as `frr`, with its run, log and
/// temporary folders private to the node.
pub(super) fn parts(
    config: Option<FileSource>,
    daemons: &[String],
) -> Result<KindParts, (&'static str, String)> {
    let config = need_config("frr", config)?;
    for d in daemons {
        if !DAEMONS.contains(&d.as_str()) {
            return Err((
                "daemons",
                format!(
                    "unknown FRR daemon {d:?}: expected some of {}",
                    DAEMONS.join(", ")
                ),
            ));
        }
    }
    let mut all = vec!["zebra".to_string(), "staticd".to_string()];
    for d in daemons {
        if !all.contains(d) {
            all.push(d.clone());
        }
    }
    let mut needs: Vec<(HostNeed, String)> = (all.iter())
        .map(|d| {
            let path = format!("{DAEMON_DIR}/{d}");
            let why = format!("kind = \"frr\" needs FRR, which is not installed here ({path} is missing): apt-get install frr");
            (HostNeed::File(path), why)
        })
        .collect();
    needs.push((
        HostNeed::Program("vtysh".into()),
        "kind = \"frr\" needs FRR's vtysh, which is not in PATH: apt-get install frr".into(),
    ));
    needs.push((
        HostNeed::User("frr".into()),
        "kind = \"frr\" needs the user `frr` that FRR's package creates: apt-get install frr"
            .into(),
    ));
    let starts: Vec<String> = all
        .iter()
        .map(|d| format!("{DAEMON_DIR}/{d} -d -F traditional -A 127.0.0.1"))
        .collect();
    Ok(KindParts {
        dirs: vec![
            private("/etc/frr", Some("frr"), 0o750),
            private("/run/frr", Some("frr"), 0o755),
            private("/var/log/frr", Some("frr"), 0o750),
            // FRR keeps a crash log folder per daemon under /var/tmp/frr.
            private("/var/tmp", None, 0o1777),
        ],
        files: vec![
            file("/etc/frr/frr.conf", config),
            file(
                "/etc/frr/vtysh.conf",
                FileSource::Inline("service integrated-vtysh-config\n".into()),
            ),
        ],
        commands: vec![format!("{} && vtysh -b", starts.join(" && "))],
        needs,
        router: true,
    })
}

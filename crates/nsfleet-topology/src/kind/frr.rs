//! The `frr` kind: the host's installed FRR (Debian's paths) with the node's own
//! integrated configuration, zebra always, staticd when the configuration has static
//! routes (or `daemons` lists it), and the protocol daemons it lists.

use super::{file, need_config, private, KindParts};
use crate::{FileSource, HostNeed};

/// Where Debian installs FRR's daemons.
pub const DAEMON_DIR: &str = "/usr/lib/frr";

/// FRR's daemons a node may list in `daemons` (zebra always runs; staticd also when the
/// configuration has static routes).
pub const DAEMONS: &[&str] = &[
    "staticd", "bgpd", "ospfd", "ospf6d", "ripd", "ripngd", "isisd", "pimd", "ldpd", "nhrpd",
    "eigrpd", "babeld", "sharpd", "pbrd", "bfdd", "fabricd", "vrrpd", "pathd",
];

/// FRR as its Debian package runs it, in the node: zebra, staticd and the listed
/// daemons, each daemonized (`-d` returns once the daemon is ready), then `vtysh -b`
/// applies the integrated configuration. Daemons run as `frr`, with its run, log and
/// temporary folders private to the node.
///
/// staticd, which FRR's own init starts always, starts only when the node's frr.conf
/// has a static route (`ip route`, `ipv6 route`, `ip mroute`, in a `vrf` too), unless
/// `daemons` lists it: a router without one pays neither its start (17 ms of CPU, a
/// sixth of an OSPF router's) nor its memory (2.6 MB PSS). The file is read in the node,
/// as it is when the node starts, so that a template's text decides.
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
    let mut all = vec!["zebra".to_string()];
    for d in daemons {
        if !all.contains(d) {
            all.push(d.clone());
        }
    }
    let listed_static = all.iter().any(|d| d == "staticd");
    if !listed_static {
        // Started only if the configuration asks for it (see `start`), but always needed
        // installed: the check is the kind's, before anything exists.
        all.insert(1, "staticd".to_string());
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
        .map(|d| start(d, d == "staticd" && !listed_static))
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

/// The shell line that starts daemon `d` daemonized; `if_static`: only if frr.conf has a
/// static route (an `if` is 0 when it starts nothing, so the `&&` chain goes on).
fn start(d: &str, if_static: bool) -> String {
    let line = format!("{DAEMON_DIR}/{d} -d -F traditional -A 127.0.0.1");
    match if_static {
        true => format!("if grep -qsE '^[[:space:]]*(ip|ipv6)[[:space:]]+(route|mroute)[[:space:]]' /etc/frr/frr.conf; then {line}; fi"),
        false => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staticd_starts_when_the_configuration_has_static_routes_or_daemons_lists_it() {
        let conf = Some(FileSource::Inline("router ospf\n".into()));
        let cmd = &parts(conf.clone(), &["ospfd".into()]).unwrap().commands[0];
        assert!(cmd.starts_with("/usr/lib/frr/zebra -d"), "{cmd}");
        assert!(cmd.contains("then /usr/lib/frr/staticd -d -F traditional -A 127.0.0.1; fi && /usr/lib/frr/ospfd"), "{cmd}");
        assert!(cmd.ends_with("&& vtysh -b"), "{cmd}");
        let cmd = &parts(conf, &["staticd".into()]).unwrap().commands[0];
        assert!(
            cmd.contains("&& /usr/lib/frr/staticd -d") && !cmd.contains("grep"),
            "{cmd}"
        );
    }
}

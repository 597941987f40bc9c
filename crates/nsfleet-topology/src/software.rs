//! Node kinds: the routing suites nsfleet starts in a node, as what every node already
//! has (private directories, files, a command line), so that the engine knows no suite.
//! `linux` is a node that runs its `commands`; `frr` and `bird` run the host's installed
//! FRR or BIRD (Debian's paths) with the node's own configuration.
//!
//! It never looks at the host: what a kind needs installed (daemons, programs, a user)
//! it says as [`HostNeed`]s, which the engine's probe answers and the check turns into
//! errors at the `kind` key, before anything exists.

use crate::{FileSource, HostNeed, PrivateDir, PrivateFile};

pub const KINDS: &str = "\"linux\", \"frr\" or \"bird\"";

/// Where Debian installs FRR's daemons.
pub const FRR_DAEMON_DIR: &str = "/usr/lib/frr";

/// FRR's protocol daemons a node may list in `daemons` (zebra and staticd always run).
pub const FRR_DAEMONS: &[&str] = &[
    "bgpd", "ospfd", "ospf6d", "ripd", "ripngd", "isisd", "pimd", "ldpd", "nhrpd", "eigrpd",
    "babeld", "sharpd", "pbrd", "bfdd", "fabricd", "vrrpd", "pathd",
];

/// What a kind adds to a node.
#[derive(Debug, Default)]
pub struct KindParts {
    pub dirs: Vec<PrivateDir>,
    pub files: Vec<PrivateFile>,
    pub commands: Vec<String>,
    /// What the host must have, each with what to say if it has not.
    pub needs: Vec<(HostNeed, String)>,
}

/// The parts of a node of `kind` whose configuration is `config` (its text, or an
/// absolute path template), running `daemons`. Errors are sentences about the `kind`, `config` or
/// `daemons` key, as `(key, message)`.
pub fn parts(
    kind: &str,
    config: Option<FileSource>,
    daemons: &[String],
) -> Result<KindParts, (&'static str, String)> {
    match kind {
        "linux" => {
            if config.is_some() || !daemons.is_empty() {
                let key = if config.is_some() {
                    "config"
                } else {
                    "daemons"
                };
                return Err((key, format!("`{key}` is for kind = \"frr\" or \"bird\"; a linux node runs its `commands`")));
            }
            Ok(KindParts::default())
        }
        "frr" => frr(config, daemons),
        "bird" => bird(config, daemons),
        other => Err(("kind", format!("unknown kind {other:?}: expected {KINDS}"))),
    }
}

fn need_config(
    kind: &str,
    config: Option<FileSource>,
) -> Result<FileSource, (&'static str, String)> {
    config.ok_or_else(|| {
        (
            "kind",
            format!("kind = {kind:?} needs `config`, its configuration file (a template, e.g. \"{kind}/{{name}}.conf\")"),
        )
    })
}

/// FRR as its Debian package runs it, in the node: zebra, staticd and the listed
/// daemons, each daemonized (`-d` returns once the daemon is ready), then `vtysh -b`
/// applies the integrated configuration. Daemons run as `frr`, with its run, log and
/// temporary folders private to the node.
fn frr(
    config: Option<FileSource>,
    daemons: &[String],
) -> Result<KindParts, (&'static str, String)> {
    let config = need_config("frr", config)?;
    for d in daemons {
        if !FRR_DAEMONS.contains(&d.as_str()) {
            return Err((
                "daemons",
                format!(
                    "unknown FRR daemon {d:?}: expected some of {}",
                    FRR_DAEMONS.join(", ")
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
            let path = format!("{FRR_DAEMON_DIR}/{d}");
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
        .map(|d| format!("{FRR_DAEMON_DIR}/{d} -d -F traditional -A 127.0.0.1"))
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
    })
}

/// BIRD in the foreground (`-f`, so that nsfleet watches it), its control socket where
/// `birdc` looks for it (/run/bird/bird.ctl).
fn bird(
    config: Option<FileSource>,
    daemons: &[String],
) -> Result<KindParts, (&'static str, String)> {
    let config = need_config("bird", config)?;
    if !daemons.is_empty() {
        return Err((
            "daemons",
            "`daemons` is for kind = \"frr\"; BIRD is one daemon".to_string(),
        ));
    }
    let needs = (["bird", "birdc"].iter())
        .map(|tool| {
            let why = format!("kind = \"bird\" needs BIRD, which is not installed here (no `{tool}` in PATH): apt-get install bird2");
            (HostNeed::Program(tool.to_string()), why)
        })
        .collect();
    Ok(KindParts {
        dirs: vec![
            private("/etc/bird", None, 0o755),
            private("/run/bird", None, 0o755),
        ],
        files: vec![file("/etc/bird/bird.conf", config)],
        commands: vec!["exec bird -f -c /etc/bird/bird.conf".to_string()],
        needs,
    })
}

/// A folder of the node's own, owned by `user` (resolved against the host when the
/// topology is checked), else root.
fn private(path: &str, user: Option<&str>, mode: u32) -> PrivateDir {
    PrivateDir {
        path: path.to_string(),
        from_host: false,
        owner: Some((0, 0)),
        user: user.map(str::to_string),
        mode: Some(mode),
    }
}

fn file(path: &str, source: FileSource) -> PrivateFile {
    PrivateFile {
        path: path.to_string(),
        source,
    }
}

//! Node kinds: the routing suites nsfleet starts in a node, as what every node already
//! has (private directories, files, a command line), so that the engine knows no suite.
//! `linux` is a node that runs its `commands`; `frr` and `bird` run the host's installed
//! FRR or BIRD (Debian's paths) with the node's own configuration.
//!
//! This file reads the host's filesystem (is the software installed, who is `frr`) and
//! never the kernel.

use crate::{FileSource, PrivateDir, PrivateFile};
use std::path::Path;

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
    for d in &all {
        let path = Path::new(FRR_DAEMON_DIR).join(d);
        if !path.exists() {
            return Err(("kind", format!("kind = \"frr\" needs FRR, which is not installed here ({} is missing): apt-get install frr", path.display())));
        }
    }
    if which("vtysh").is_none() {
        return Err((
            "kind",
            "kind = \"frr\" needs FRR's vtysh, which is not in PATH: apt-get install frr"
                .to_string(),
        ));
    }
    let frr = user("frr").ok_or_else(|| {
        (
            "kind",
            "kind = \"frr\" needs the user `frr` that FRR's package creates: apt-get install frr"
                .to_string(),
        )
    })?;
    let starts: Vec<String> = all
        .iter()
        .map(|d| format!("{FRR_DAEMON_DIR}/{d} -d -F traditional -A 127.0.0.1"))
        .collect();
    Ok(KindParts {
        dirs: vec![
            private("/etc/frr", Some(frr), 0o750),
            private("/run/frr", Some(frr), 0o755),
            private("/var/log/frr", Some(frr), 0o750),
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
    for tool in ["bird", "birdc"] {
        if which(tool).is_none() {
            return Err(("kind", format!("kind = \"bird\" needs BIRD, which is not installed here (no `{tool}` in PATH): apt-get install bird2")));
        }
    }
    Ok(KindParts {
        dirs: vec![
            private("/etc/bird", None, 0o755),
            private("/run/bird", None, 0o755),
        ],
        files: vec![file("/etc/bird/bird.conf", config)],
        commands: vec!["exec bird -f -c /etc/bird/bird.conf".to_string()],
    })
}

fn private(path: &str, owner: Option<(u32, u32)>, mode: u32) -> PrivateDir {
    PrivateDir {
        path: path.to_string(),
        from_host: false,
        owner: Some(owner.unwrap_or((0, 0))),
        mode: Some(mode),
    }
}

fn file(path: &str, source: FileSource) -> PrivateFile {
    PrivateFile {
        path: path.to_string(),
        source,
    }
}

/// The Python that has nsfleet's package (`import MODULE` works): the one installed
/// beside the running executable (the virtual environment `pip install .` made), else
/// python3 on PATH. The error says how to install the package.
pub fn python_with(module: &str) -> Result<std::path::PathBuf, String> {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join("python3")))
        .filter(|p| p.is_file());
    let python = beside.unwrap_or_else(|| "python3".into());
    let imports = std::process::Command::new(&python)
        .args(["-c", &format!("import {module}")])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !imports {
        return Err(format!(
            "{} has no nsfleet package: pip install . in nsfleet's repository (into a virtual environment), and run that environment's nsfleet",
            python.display()
        ));
    }
    Ok(python)
}

/// A program's path, found as a shell would find it.
pub fn which(program: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// A user's uid and primary gid, from /etc/passwd (the host's users are the nodes').
pub fn user(name: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 3 && f[0] == name).then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))?
    })
}

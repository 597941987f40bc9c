//! Node kinds, one file each: the routing suites nsfleet starts in a node, given as what
//! every node already has (private directories, files, a command line), so that the
//! engine knows no suite. This file says what a kind gives a node ([`KindParts`]) and picks
//! the kind by its name ([`parts`]); a new kind is a file here and a line in [`parts`].
//!
//! Nothing here may touch the host or the kernel: no file of the host is read, no program
//! looked up or run. What a kind needs installed (daemons, programs, a user) it says as
//! [`HostNeed`]s, which the engine's probe answers and the check turns into errors at the
//! `kind` key, before anything exists.

mod bird;
pub mod frr;
mod linux;
pub mod ovs;

use crate::{FileSource, HostNeed, PrivateDir, PrivateFile};

pub const KINDS: &str = "\"linux\", \"frr\" or \"bird\"";

/// What a kind adds to a node.
#[derive(Debug, Default)]
pub struct KindParts {
    pub dirs: Vec<PrivateDir>,
    pub files: Vec<PrivateFile>,
    pub commands: Vec<String>,
    /// What the host must have, each with what to say if it has not.
    pub needs: Vec<(HostNeed, String)>,
    /// Whether the node is a router unless its `router` key says not: it runs a routing
    /// suite.
    pub router: bool,
}

/// The parts of a node of `kind` whose configuration is `config` (its text, or an
/// absolute path template), running `daemons`. Errors are sentences about the `kind`,
/// `config` or `daemons` key, as `(key, message)`.
pub fn parts(
    kind: &str,
    config: Option<FileSource>,
    daemons: &[String],
) -> Result<KindParts, (&'static str, String)> {
    match kind {
        "linux" => linux::parts(config, daemons),
        "frr" => frr::parts(config, daemons),
        "bird" => bird::parts(config, daemons),
        other => Err(("kind", format!("unknown kind {other:?}: expected {KINDS}"))),
    }
}

/// The configuration a routing suite's kind cannot do without.
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

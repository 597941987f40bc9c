//! What each `nsfleet` command does, on the client side: the binary parses arguments into
//! these argument structs and calls these functions. Printing for people and for machines
//! (`--json`) and progress bars happen here; the engine itself never prints.
//!
//! A client reaches a fleet only through its supervisor's control socket and its run
//! directory: it never holds a namespace or changes a node itself.
//!
//! This is what every front shares (connect, the fleet commands, errors, progress, ports,
//! report); each front (containerlab's, netlab's, Kubernetes', Mininet's, the lab server's
//! `nsfleet-serve`) is a crate of its own on top of it, and this crate never imports one.

pub mod apply;
pub mod backend;
pub mod capture;
pub mod clean;
pub mod down;
pub mod errors;
pub mod events;
pub mod exec;
pub mod fleet_images;
mod forward;
pub mod gen;
pub mod image;
pub mod impair;
pub mod link;
pub mod node;
mod ports;
pub mod probe;
pub mod ready;
pub mod report;
pub mod stats;
pub mod status;
pub mod up;
pub mod user;

use anyhow::bail;
use nsfleet::control::Client;
use nsfleet::rundir::RunDir;
use std::path::PathBuf;

/// One running fleet as a command names it: the fleet's name, and the run directory its
/// supervisor's socket and record are under. The commands that act on one named fleet
/// (`down`, `link`, `node`, `stats`, ...) take it, built once from the command line, rather
/// than the two fields each: they are the same two things in every one of them. Not for
/// what names a fleet only maybe (`up`'s and `apply`'s name, which the file may give;
/// `status`'s and `clean`'s, which may be every fleet).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetRef {
    pub name: String,
    pub run_dir: PathBuf,
}

impl FleetRef {
    /// The run directory, to look things up under.
    pub fn dir(&self) -> RunDir {
        RunDir::new(&self.run_dir)
    }

    /// Connects to the fleet's supervisor, or explains why there is none.
    pub fn connect(&self) -> anyhow::Result<Client> {
        connect(&self.dir(), &self.name)
    }

    /// For a user (not root), enters the fleet's user namespace as its root, as one must
    /// before entering its nodes (see `crate::user`). Root's process stays where it is.
    /// By a process of one thread.
    pub fn enter_as_user(&self) -> anyhow::Result<()> {
        if nsfleet::sys::is_host_root() {
            return Ok(());
        }
        let sup = (self.dir().record(&self.name))
            .and_then(|r| r.supervisor)
            .ok_or_else(|| anyhow::anyhow!("fleet {:?} has no supervisor", self.name))?;
        crate::user::enter_fleet(sup)
    }

    /// Node `node`'s namespaces, or why not (the closest names of a node that does not
    /// exist).
    pub fn node_namespace(&self, node: &str) -> anyhow::Result<NodeNamespace> {
        use nsfleet::control::{Reply, Request};
        let mut c = self.connect()?;
        let request = Request::Netns {
            node: node.to_string(),
        };
        let Reply::Netns {
            world,
            env,
            image,
            ovs_bridge,
            restrictions,
            ..
        } = c.call(&request)?
        else {
            bail!("unexpected reply from the supervisor");
        };
        let fd = (c.take_fd())
            .ok_or_else(|| anyhow::anyhow!("the supervisor sent no namespace descriptor"))?;
        Ok(NodeNamespace {
            fd,
            world,
            env,
            image,
            ovs_bridge,
            restrictions,
        })
    }
}

/// Connects to a fleet's supervisor, or explains why there is none.
pub fn connect(rd: &RunDir, name: &str) -> anyhow::Result<Client> {
    match Client::connect(&rd.socket(name)) {
        Ok(c) => Ok(c),
        Err(e) => match rd.record(name) {
            None => bail!("no fleet named {name:?} under {} (`nsfleet status` lists them)", rd.root().display()),
            Some(r) if r.supervisor.is_none() && r.owner_alive() => {
                bail!("fleet {name:?} is still starting (pid {})", r.creator.pid)
            }
            Some(r) if !r.owner_alive() => bail!(
                "fleet {name:?} is not running: its supervisor (pid {}) is gone, and its namespaces and processes went with it; `nsfleet clean {name}` removes its run folder",
                r.supervisor.map_or(r.creator.pid, |s| s.pid)
            ),
            Some(_) => bail!("cannot reach fleet {name:?}'s supervisor: {e}"),
        },
    }
}

/// A node's namespaces as the supervisor passes them: the descriptor is its network
/// namespace, or with `world`, a pidfd of its init, whose namespaces (network, mount, UTS,
/// PID) are the node's; setns(2) takes either.
pub struct NodeNamespace {
    pub fd: std::os::fd::OwnedFd,
    pub world: bool,
    /// The node's whole environment, as its processes have it.
    pub env: Vec<(String, String)>,
    /// How commands run in it, when it runs an image.
    pub image: Option<nsfleet::control::ExecIn>,
    /// The node is this bridge of the fleet's Open vSwitch.
    pub ovs_bridge: Option<String>,
    /// What a command in it gives up as it starts.
    pub restrictions: nsfleet::sys::confine::Restrictions,
}

pub(crate) fn human_bytes(b: i64) -> String {
    let b = b.max(0) as f64;
    match b {
        b if b >= 1e9 => format!("{:.1} GB", b / 1e9),
        b if b >= 1e6 => format!("{:.1} MB", b / 1e6),
        b if b >= 1e3 => format!("{:.0} KB", b / 1e3),
        b => format!("{b:.0} B"),
    }
}

/// Rows under a header, each column as wide as its widest cell; numbers to the right,
/// the first and last columns (names, commands) to the left.
pub fn columns(head: &[&str], rows: &[&Vec<String>]) -> String {
    let mut width: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for r in rows {
        for (w, c) in width.iter_mut().zip(r.iter()) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| -> String {
        let last = width.len() - 1;
        let mut l: Vec<String> = Vec::new();
        for (k, (c, w)) in cells.zip(&width).enumerate() {
            l.push(match k {
                0 => format!("{c:<w$}"),
                k if k == last && head[0] == "NODE" => c.to_string(),
                _ => format!("{c:>w$}"),
            });
        }
        l.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(&mut head.iter().copied());
    for r in rows {
        out.push_str(&line(&mut r.iter().map(String::as_str)));
    }
    out
}

//! Named network namespaces for a containerlab lab's nodes (`deploy --netns-names`):
//! `/run/netns/clab-LAB-NODE`, as containerlab leaves them for `ip netns exec` (netlab
//! configures Linux nodes and captures that way). Each name is journalled with its
//! namespace's inode before it exists and taken away at the node's exit, before the
//! namespace is waited for (a mounted name would hold it alive); `nsfleet clean` takes
//! away what a killed supervisor left, each name only while it still holds the inode
//! journalled with it. A name that exists already is someone else's: refused.

use anyhow::{anyhow, Context};
use nsfleet_core::{InitCtx, Node, Phase, Subsystem};
use nsfleet_sys as sys;
use std::io::Write;
use std::path::{Path, PathBuf};

pub struct NetnsNames {
    journal: PathBuf,
}

impl NetnsNames {
    /// Must be called in the host's mount namespace (the supervisor's).
    pub fn new(journal: PathBuf) -> anyhow::Result<Self> {
        sys::prepare_netns_dir().with_context(|| format!("preparing {}", sys::NETNS_DIR))?;
        Ok(NetnsNames { journal })
    }

    fn journal(&self, name: &str, inode: u64) -> std::io::Result<()> {
        nsfleet_core::fault::point("journalling a namespace name")?;
        let mut f = (std::fs::OpenOptions::new().create(true).append(true)).open(&self.journal)?;
        f.write_all(format!("{name} {inode}\n").as_bytes())?;
        f.sync_all()
    }
}

/// The name a node's namespace gets: its container's.
fn name_of(node: &Node) -> Option<String> {
    node.config().clab.as_ref().map(|c| c.container.clone())
}

impl Subsystem for NetnsNames {
    /// The name given, once it is.
    type State = Option<String>;

    fn name(&self) -> &'static str {
        "netns-names"
    }

    fn phase(&self) -> Phase {
        Phase::Create
    }

    fn wants(&self, node: &Node) -> bool {
        name_of(node).is_some()
    }

    fn init(&self, cx: &mut InitCtx<'_>, named: &mut Option<String>) -> anyhow::Result<()> {
        let name = name_of(cx.node).expect("wanted");
        self.journal(&name, cx.node.inode())
            .context("writing the namespace-name journal")?;
        sys::name_current_netns(&name).map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => anyhow!(
                "{}/{name} exists already: another lab's or tool's namespace, which nsfleet does not take over",
                sys::NETNS_DIR
            ),
            _ => anyhow!("naming the namespace {}/{name}: {e}", sys::NETNS_DIR),
        })?;
        *named = Some(name);
        Ok(())
    }

    fn exit(&self, node: &Node, named: &mut Option<String>) {
        if let Some(name) = named.take() {
            // Left for `clean` if this fails: it is journalled.
            let _ = sys::unname_netns(&name, node.inode());
        }
    }
}

/// Takes away the names a fleet's journal lists, each only while it still names the
/// namespace journalled with it. Returns the names taken away.
pub fn clean_journal(journal: &Path) -> anyhow::Result<Vec<String>> {
    let Ok(text) = std::fs::read_to_string(journal) else {
        return Ok(Vec::new());
    };
    let mut removed = Vec::new();
    for line in text.lines() {
        let Some((name, inode)) = line.split_once(' ') else {
            continue;
        };
        let Ok(inode) = inode.parse() else { continue };
        if sys::unname_netns(name, inode).with_context(|| format!("unnaming {name}"))? {
            removed.push(name.to_string());
        }
    }
    Ok(removed)
}

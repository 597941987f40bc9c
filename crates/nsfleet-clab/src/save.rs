//! containerlab's `save`: each node's running configuration saved where the node keeps
//! it. containerlab saves through each vendor kind; for `linux` nodes its save does
//! nothing, and it says so. Here a node that runs FRR (nsfleet's `frr` kind, or FRR's
//! image on the host's software) saves with `vtysh -c 'write memory'` into its own
//! /etc/frr (the host's file, when the lab binds one there); any other node is said to
//! have nothing to save. `--copy DIR` also copies each saved configuration to
//! DIR/NODE/frr.conf, since a node's own folders go with it.

use crate::exec::run_in;
use crate::lab::deployed;
use anyhow::{bail, Context};
use nsfleet::control::NodeStatus;
use nsfleet::rundir::RunDir;
use std::path::{Path, PathBuf};

pub struct SaveArgs {
    pub topo: Option<PathBuf>,
    pub name: Option<String>,
    /// Only these nodes (their names in the file).
    pub nodes: Vec<String>,
    pub copy: Option<PathBuf>,
    pub run_dir: PathBuf,
}

pub fn save(a: SaveArgs) -> anyhow::Result<()> {
    let rd = RunDir::new(&a.run_dir);
    let status = deployed(&rd, a.topo.as_deref(), a.name.as_deref())?;
    let lab = status.name.clone();
    let nodes: Vec<&NodeStatus> = (status.nodes.iter())
        .filter(|n| n.clab.is_some())
        .filter(|n| a.nodes.is_empty() || a.nodes.contains(&n.name))
        .collect();
    if let Some(missing) = a
        .nodes
        .iter()
        .find(|f| !nodes.iter().any(|n| n.name == **f))
    {
        bail!("--node-filter {missing}: lab {lab} has no such node");
    }
    let exe = std::env::current_exe().context("finding nsfleet's own executable")?;
    let mut failed = 0;
    for n in nodes {
        let container = &n.clab.as_ref().expect("filtered").container;
        if !runs_frr(n) {
            let kind = &n.clab.as_ref().expect("filtered").kind;
            println!("{container}: nothing to save (kind {kind} runs no router software nsfleet saves; containerlab's save does nothing for it either)");
            continue;
        }
        let words = ["vtysh", "-c", "write memory"].map(String::from);
        let out = run_in(&exe, &a.run_dir, &lab, &n.name, &words)?;
        if !out.status.success() {
            failed += 1;
            eprintln!(
                "{container}: saving failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            continue;
        }
        println!("{container}: saved /etc/frr/frr.conf");
        if let Some(dir) = &a.copy {
            copy_out(&exe, &a.run_dir, &lab, &n.name, dir)?;
        }
    }
    if failed > 0 {
        bail!("{failed} node(s) could not save their configuration");
    }
    Ok(())
}

/// Whether FRR runs in the node: one of its processes is FRR's zebra or watchfrr.
fn runs_frr(n: &NodeStatus) -> bool {
    n.processes.iter().any(|p| {
        p.running
            && ["zebra", "watchfrr", "frrinit.sh"]
                .iter()
                .any(|d| p.command.contains(d))
    })
}

/// The node's saved configuration to DIR/NODE/frr.conf.
fn copy_out(exe: &Path, run_dir: &Path, lab: &str, node: &str, dir: &Path) -> anyhow::Result<()> {
    let words = ["cat", "/etc/frr/frr.conf"].map(String::from);
    let out = run_in(exe, run_dir, lab, node, &words)?;
    if !out.status.success() {
        bail!(
            "{node}: reading /etc/frr/frr.conf: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let to = dir.join(node);
    std::fs::create_dir_all(&to).with_context(|| format!("making {}", to.display()))?;
    let file = to.join("frr.conf");
    std::fs::write(&file, &out.stdout).with_context(|| format!("writing {}", file.display()))?;
    println!("{node}: copied to {}", file.display());
    Ok(())
}

//! `nsfleet save`: containerlab's `save`.

use clap::Args;
use nsfleet_clab as clab;
use std::path::PathBuf;

/// Save each node's running configuration (containerlab's `save`)
///
/// Save each node's running configuration where the node keeps it (containerlab's
/// `save`). A node that runs FRR saves with `vtysh -c 'write memory'` into its own
/// /etc/frr (the host's file, when the lab binds one there); any other node has nothing
/// to save, as containerlab's save does nothing for `linux` nodes either.
///
///   nsfleet save -t lab.clab.yml --copy saved/     # and a copy of each, saved/NODE/frr.conf
#[derive(Args)]
pub struct SaveCommand {
    /// The topology file (or a folder with one); without it, the only *.clab.yml of the
    /// current folder.
    #[arg(short = 't', long = "topo")]
    topo: Option<PathBuf>,
    /// The lab by name instead.
    #[arg(long, conflicts_with = "topo")]
    name: Option<String>,
    /// Only these nodes (their names in the file), comma-separated.
    #[arg(long, value_delimiter = ',')]
    node_filter: Vec<String>,
    /// Also copy each saved configuration to DIR/NODE/frr.conf (a node's own folders go
    /// with it).
    #[arg(long, value_name = "DIR")]
    copy: Option<PathBuf>,
}

impl SaveCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        clab::save::save(clab::save::SaveArgs {
            topo: self.topo,
            name: self.name,
            nodes: self.node_filter,
            copy: self.copy,
            run_dir,
        })
    }
}

//! `nsfleet graph`: draw a fleet, from its file or while it runs.

use super::args::within;
use clap::Args;
use nsfleet_client as cmd;
use std::path::PathBuf;

/// Draw a fleet: one self-contained HTML page (no network needed) from a topology file
/// or a running fleet, or its graph for other tools.
///
/// The page lays the fleet out so that 5 or 10,000 nodes stay readable: switches are
/// squares, routers orange and hosts green circles; zoom with the wheel, pan by
/// dragging, search a node by name, hover for its addresses and impairments. With
/// --serve, a running fleet's page is served on 127.0.0.1 and follows the fleet: links
/// down (from its events), impairments and counters.
///
///   nsfleet graph lab.toml                     # graph.html
///   nsfleet graph lab -o lab.html              # the running fleet, as it is now
///   nsfleet graph lab --serve 8080             # live, on http://127.0.0.1:8080/
///   nsfleet graph lab.toml --format dot | dot -Tsvg > lab.svg
#[derive(Args)]
#[command(verbatim_doc_comment)]
pub struct GraphCommand {
    /// A topology file (TOML or containerlab YAML), or the name of a running fleet.
    source: String,
    /// html, dot, mermaid or json.
    #[arg(long, default_value = "html")]
    format: cmd::graph::Format,
    /// Write it here (`-` for standard output). HTML goes to graph.html without it,
    /// the other formats to standard output.
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<std::path::PathBuf>,
    /// Serve the running fleet's live page on 127.0.0.1:PORT until Ctrl-C (0 picks
    /// a free port).
    #[arg(long, value_name = "PORT", value_parser = within::<0, 65535>)]
    serve: Option<u64>,
}

impl GraphCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        let GraphCommand {
            source,
            format,
            output,
            serve,
        } = self;
        cmd::graph::graph(cmd::graph::GraphArgs {
            source,
            format,
            output,
            serve: serve.map(|p| p as u16),
            run_dir,
        })
    }
}

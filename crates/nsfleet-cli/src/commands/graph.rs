//! `nsfleet graph`: draw a fleet, from its file or while it runs.

use super::args::within;
use clap::Args;
use nsfleet_clab as clab;
use nsfleet_serve::graph;
use std::path::PathBuf;

/// Draw a fleet as an HTML page, or its graph for other tools
///
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
///
/// containerlab's flags: -t FILE (the lab as it runs, or the file when it is not
/// deployed or with --offline), --dot and --mermaid (to standard output: nsfleet writes
/// no lab folder), --srv ADDR:PORT (served on 127.0.0.1 only). --drawio is refused: it
/// runs containerlab's clab-io-draw container.
#[derive(Args)]
#[command(verbatim_doc_comment)]
pub struct GraphCommand {
    /// A topology file (TOML or containerlab YAML), or the name of a running fleet.
    #[arg(required_unless_present = "topo")]
    source: Option<String>,
    /// containerlab's form: the lab's file (its running lab when deployed).
    #[arg(short = 't', long = "topo", conflicts_with = "source")]
    topo: Option<PathBuf>,
    /// With -t: the file, even when the lab runs.
    #[arg(long, requires = "topo")]
    offline: bool,
    /// html, dot, mermaid or json.
    #[arg(long, default_value = "html")]
    format: graph::Format,
    /// containerlab's --dot: --format dot.
    #[arg(long, conflicts_with_all = ["format", "mermaid"])]
    dot: bool,
    /// containerlab's --mermaid: --format mermaid.
    #[arg(long, conflicts_with = "format")]
    mermaid: bool,
    /// containerlab's --srv ADDR:PORT: --serve PORT (on 127.0.0.1).
    #[arg(short = 's', long, value_name = "ADDR:PORT", conflicts_with = "serve")]
    srv: Option<String>,
    /// containerlab's drawio output: refused (it runs the clab-io-draw container).
    #[arg(long, hide = true)]
    drawio: bool,
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
            topo,
            offline,
            format,
            dot,
            mermaid,
            srv,
            drawio,
            output,
            serve,
        } = self;
        if drawio {
            anyhow::bail!("--drawio runs containerlab's clab-io-draw container, which nsfleet does not: --format dot or mermaid, or the HTML page");
        }
        let format = match (dot, mermaid) {
            (true, _) => graph::Format::Dot,
            (_, true) => graph::Format::Mermaid,
            _ => format,
        };
        let serve = match srv {
            Some(addr) => Some(graph::port_of(&addr)?),
            None => serve.map(|p| p as u16),
        };
        let source = match (source, topo) {
            (Some(s), _) => s,
            (None, Some(file)) => clab::lab::graph_source(&file, offline, &run_dir)?,
            (None, None) => unreachable!("clap requires one"),
        };
        graph::graph(graph::GraphArgs {
            source,
            format,
            output,
            serve,
            run_dir,
        })
    }
}

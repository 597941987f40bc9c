//! `nsfleet report`: one HTML page from bench result files.

use clap::Args;
use nsfleet_client as cmd;
use std::path::PathBuf;

/// Make an HTML page of charts from bench result files
///
/// One self-contained HTML page (SVG charts, no network) from bench result files; one
/// column and one series per file, so that two kernels sit side by side.
#[derive(Args)]
pub struct ReportCommand {
    /// Result files of `nsfleet bench ... -o FILE` or `nsfleet bench all`.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    #[arg(short, long, default_value = "report.html")]
    output: PathBuf,
    /// Also rewrite the results table between the markers in this Markdown file:
    /// `<!-- SECTION:begin (nsfleet report --readme) -->` and `<!-- SECTION:end -->`.
    /// Several files of one scenario (one per kernel) are set side by side.
    #[arg(long)]
    readme: Option<PathBuf>,
    /// Which table of --readme.
    #[arg(long, default_value = "results", requires = "readme")]
    section: String,
}

impl ReportCommand {
    pub fn run(self) -> anyhow::Result<()> {
        let ReportCommand {
            files,
            output,
            readme,
            section,
        } = self;
        cmd::report::report(cmd::report::ReportArgs {
            files,
            output,
            readme,
            section,
        })
    }
}

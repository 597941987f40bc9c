//! `nsfleet report`: result files of `nsfleet bench` into one self-contained HTML page, and
//! the README's table of ratios.

use anyhow::{bail, Context};
use nsfleet_results::Results;
use std::path::{Path, PathBuf};

pub struct ReportArgs {
    pub files: Vec<PathBuf>,
    pub output: PathBuf,
    /// Rewrite the results table of this Markdown file, between the markers
    /// `<!-- SECTION:begin (nsfleet report --readme) -->` and `<!-- SECTION:end -->`.
    pub readme: Option<PathBuf>,
    pub section: String,
}

pub fn report(a: ReportArgs) -> anyhow::Result<()> {
    if a.files.is_empty() {
        bail!("no result files given (nsfleet bench SCENARIO -o FILE, or nsfleet bench all)");
    }
    let mut labels: Vec<String> = a.files.iter().map(|p| label(p)).collect();
    let mut unique = labels.clone();
    unique.sort();
    unique.dedup();
    if unique.len() < labels.len() {
        // Two runs of one scenario (two kernels, say): the paths tell them apart.
        labels = a.files.iter().map(|p| p.display().to_string()).collect();
    }
    let files = (labels.into_iter().zip(&a.files))
        .map(|(l, p)| Ok((l, Results::load(p)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let html = nsfleet_results::report(&files);
    std::fs::write(&a.output, html).with_context(|| format!("writing {}", a.output.display()))?;
    println!(
        "report of {} result file(s) written to {}",
        files.len(),
        a.output.display()
    );
    if let Some(readme) = &a.readme {
        rewrite_table(readme, &a.section, &nsfleet_results::markdown_table(&files))?;
        println!("results table of {} rewritten", readme.display());
    }
    Ok(())
}

/// A result's name in tables and legends: its file name without `.json`.
fn label(p: &Path) -> String {
    let name = p.file_name().map_or_else(
        || p.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    name.strip_suffix(".json").unwrap_or(&name).to_string()
}

fn rewrite_table(path: &Path, section: &str, table: &str) -> anyhow::Result<()> {
    let (begin, end) = (
        format!("<!-- {section}:begin (nsfleet report --readme) -->"),
        format!("<!-- {section}:end -->"),
    );
    let (begin, end) = (begin.as_str(), end.as_str());
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let (Some(b), Some(e)) = (text.find(begin), text.find(end)) else {
        bail!(
            "{}: no `{begin}` ... `{end}` markers to put the table between",
            path.display()
        );
    };
    if e < b {
        bail!("{}: the results markers are out of order", path.display());
    }
    let new = format!("{}{begin}\n{table}{}", &text[..b], &text[e..]);
    std::fs::write(path, new).with_context(|| format!("writing {}", path.display()))
}

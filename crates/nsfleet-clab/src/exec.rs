//! containerlab's `exec`: each `--cmd` on every node of a lab (`-t FILE`) or of every
//! lab, narrowed by `--label KEY=VALUE` (or `--label KEY`: has the label) on the labels
//! containerlab sets on its containers (`clab-node-name`, `clab-node-kind`,
//! `clab-node-group`, `containerlab`, ... and the file's). A command is split into
//! words as containerlab splits it (no shell) and run as `nsfleet exec` runs one, a
//! node after another, in container-name order. As containerlab, a failing command is
//! reported and does not fail the whole; a filter that matches no node does.

use crate::lab::{deployed, labs};
use anyhow::{bail, Context};
use nsfleet::control::NodeStatus;
use nsfleet::rundir::RunDir;
use nsfleet::topology;
use std::path::PathBuf;

pub struct ExecLabsArgs {
    /// The lab's file; `None` with labels: every lab.
    pub topo: Option<PathBuf>,
    pub labels: Vec<String>,
    pub cmds: Vec<String>,
    pub json: bool,
    pub run_dir: PathBuf,
}

/// What one command did on one node: containerlab's `ExecResult`.
#[derive(serde::Serialize)]
struct Ran {
    cmd: Vec<String>,
    #[serde(rename = "return-code")]
    return_code: i32,
    /// JSON when the command printed JSON, as containerlab embeds it.
    stdout: serde_json::Value,
    stderr: String,
}

pub fn exec_labs(a: ExecLabsArgs) -> anyhow::Result<()> {
    if a.cmds.is_empty() {
        bail!("provide a command to run with --cmd");
    }
    let filters = a
        .labels
        .iter()
        .map(|l| parse_label(l))
        .collect::<Result<Vec<_>, _>>()?;
    let cmds = (a.cmds.iter())
        .map(|c| topology::clab::split_words(c).map_err(|m| anyhow::anyhow!("--cmd {c:?}: {m}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let rd = RunDir::new(&a.run_dir);
    let fleets = match (&a.topo, filters.is_empty()) {
        (None, false) => labs(&rd),
        (topo, _) => vec![deployed(&rd, topo.as_deref(), None)?],
    };
    let mut nodes: Vec<(&str, &NodeStatus, &str)> = (fleets.iter())
        .flat_map(|f| f.nodes.iter().map(move |n| (f.name.as_str(), n)))
        .filter_map(|(lab, n)| Some((lab, n, n.clab.as_ref()?.container.as_str())))
        .filter(|(_, n, _)| matches(n, &filters))
        .collect();
    if nodes.is_empty() {
        bail!("the filter matches no node (`nsfleet inspect --all` lists them)");
    }
    nodes.sort_by_key(|(_, _, container)| *container);
    let exe = std::env::current_exe().context("finding nsfleet's own executable")?;
    // Sorted by container, as Go writes containerlab's map.
    let mut results = std::collections::BTreeMap::new();
    for (lab, n, container) in nodes {
        let mut ran = Vec::new();
        for words in &cmds {
            let out = run_in(&exe, &a.run_dir, lab, &n.name, words)
                .with_context(|| format!("running nsfleet exec in {container}"))?;
            let r = Ran {
                cmd: words.clone(),
                return_code: out.status.code().unwrap_or(-1),
                stdout: stdout_value(&out.stdout),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            };
            if !a.json {
                print_plain(container, &r, &out.stdout);
            }
            ran.push(r);
        }
        results.insert(container.to_string(), ran);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    }
    Ok(())
}

/// `words` run in node `node` of `lab` as `nsfleet exec` runs them, its output captured.
pub fn run_in(
    exe: &std::path::Path,
    run_dir: &std::path::Path,
    lab: &str,
    node: &str,
    words: &[String],
) -> std::io::Result<std::process::Output> {
    std::process::Command::new(exe)
        .arg("--run-dir")
        .arg(run_dir)
        .args(["exec", lab, node, "--"])
        .args(words)
        .stdin(std::process::Stdio::null())
        .output()
}

/// `KEY=VALUE` (the label is that) or `KEY` (the node has the label).
/// Split at the first `=`, as Docker's label filters are (a value may hold more).
fn parse_label(l: &str) -> anyhow::Result<(String, Option<String>)> {
    let (k, v) = match l.split_once('=') {
        Some((k, v)) => (k.trim(), Some(v.to_string())),
        None => (l.trim(), None),
    };
    if k.is_empty() {
        bail!("--label {l:?}: expected KEY=VALUE or KEY");
    }
    Ok((k.to_string(), v))
}

fn matches(n: &NodeStatus, filters: &[(String, Option<String>)]) -> bool {
    let labels = n.clab.as_ref().map_or(&[][..], |c| &c.labels[..]);
    filters.iter().all(|(k, want)| {
        labels
            .iter()
            .any(|(lk, lv)| lk == k && want.as_ref().is_none_or(|w| w == lv))
    })
}

/// containerlab embeds a command's output as JSON when it is JSON, else as a string.
fn stdout_value(out: &[u8]) -> serde_json::Value {
    let text = String::from_utf8_lossy(out);
    serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text.into_owned()))
}

fn print_plain(container: &str, r: &Ran, stdout: &[u8]) {
    let line = r.cmd.join(" ");
    if r.return_code == 0 {
        println!("{container}: {line}");
    } else {
        println!("{container}: {line}: failed with status {}", r.return_code);
    }
    print!("{}", String::from_utf8_lossy(stdout));
    if !r.stderr.is_empty() {
        eprint!("{}", r.stderr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_filter_as_containerlab_reads_them() {
        assert_eq!(
            parse_label("clab-node-kind=linux").unwrap(),
            ("clab-node-kind".into(), Some("linux".into()))
        );
        assert_eq!(parse_label("role").unwrap(), ("role".into(), None));
        assert_eq!(
            parse_label("a=b=c").unwrap(),
            ("a".into(), Some("b=c".into()))
        );
        assert!(parse_label("=x").is_err());
    }
}

//! `docker`, as netlab runs it for a containerlab lab: `version` (probed), `image ls
//! --format json IMAGE` (is the image there), `ps --format json` (netlab's `status`),
//! `exec [-i] [-t] CONTAINER CMD...` (configuration, `connect`, `validate`), `cp` of a
//! file to or from a node, and `stats --no-stream --format json` (`status --memory`).
//! Containers are the nodes of the containerlab labs nsfleet runs, by their containerlab
//! names (`clab-LAB-NODE`).

use super::{options, unanswered, Tool};
use anyhow::{bail, Context};
use nsfleet::rundir::RunDir;
use std::path::PathBuf;

pub fn answer(args: &[String], run_dir: PathBuf) -> anyhow::Result<i32> {
    let rd = RunDir::new(&run_dir);
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["version"] => {
            println!(
                "Client: nsfleet {} standing in for Docker",
                env!("CARGO_PKG_VERSION")
            );
            println!("Server: none: nsfleet runs the lab's nodes as namespaces of its own");
            Ok(0)
        }
        ["image", "ls", rest @ ..] | ["images", rest @ ..] => {
            images(&args[args.len() - rest.len()..])
        }
        ["ps", ..] => ps(&rd, &args[1..]),
        ["exec", ..] => exec(&rd, &args[1..], run_dir.clone()),
        ["cp", ..] => cp(&rd, &args[1..]),
        ["stats", ..] => stats(&rd, &args[1..]),
        _ => unanswered(Tool::Docker, args),
    }
}

/// Requires `--format json` among `opts`: the only output format netlab reads.
fn json_format(opts: &super::Options, what: &str) -> anyhow::Result<()> {
    match opts.iter().find(|(f, _)| f == "--format") {
        Some((_, Some(v))) if v == "json" => Ok(()),
        _ => bail!("nsfleet stands in for `docker {what}` with --format json only"),
    }
}

/// Every image is there: the lab's nodes run the host's software whatever image they
/// name, and nothing is pulled.
fn images(args: &[String]) -> anyhow::Result<i32> {
    let (opts, refs) = options(Tool::Docker, args, &["--format"], &["--format"])?;
    json_format(&opts, "image ls")?;
    for r in refs {
        let (repo, tag) = match r.rsplit_once(':').filter(|(_, t)| !t.contains('/')) {
            Some((repo, tag)) => (repo, tag),
            None => (r.as_str(), "latest"),
        };
        let line = serde_json::json!({
            "Repository": repo, "Tag": tag, "ID": "nsfleet-host-software",
            "Containers": "N/A", "CreatedSince": "N/A", "Size": "0B",
        });
        println!("{line}");
    }
    Ok(0)
}

fn ps(rd: &RunDir, args: &[String]) -> anyhow::Result<i32> {
    let (opts, rest) = options(
        Tool::Docker,
        args,
        &["--format", "-a", "--all"],
        &["--format"],
    )?;
    json_format(&opts, "ps")?;
    if !rest.is_empty() {
        bail!("docker ps: unexpected {:?}", rest.join(" "));
    }
    for (f, n) in nsfleet_clab::lab::containers(rd) {
        let c = n.clab.as_ref().expect("filtered");
        let line = serde_json::json!({
            "Names": c.container,
            "Image": c.image.clone().unwrap_or_default(),
            "State": if f.state == "up" { "running" } else { f.state.as_str() },
            "Status": nsfleet_clab::lab::up_since(rd, &f.name),
            "Labels": (c.labels.iter().map(|(k, v)| format!("{k}={v}")))
                .collect::<Vec<_>>()
                .join(","),
            "ID": format!("{:x}", n.netns_inode),
        });
        println!("{line}");
    }
    Ok(0)
}

/// The lab that runs container `name`.
pub(crate) fn lab_of(rd: &RunDir, name: &str) -> anyhow::Result<String> {
    nsfleet_clab::lab::find_container(rd, name).map(|(f, _)| f.name)
}

fn exec(rd: &RunDir, args: &[String], run_dir: PathBuf) -> anyhow::Result<i32> {
    // -i and -t: stdin and the terminal are the command's already.
    let (_, rest) = options(
        Tool::Docker,
        args,
        &["-i", "-t", "--interactive", "--tty"],
        &[],
    )?;
    let Some((container, command)) = rest.split_first() else {
        bail!("docker exec: expected CONTAINER COMMAND [ARG...]");
    };
    if command.is_empty() {
        bail!("docker exec: expected CONTAINER COMMAND [ARG...]");
    }
    let lab = lab_of(rd, container)?;
    match nsfleet_client::exec::exec(nsfleet_client::exec::ExecArgs {
        fleet: nsfleet_client::FleetRef { name: lab, run_dir },
        node: container.clone(),
        command: command.to_vec(),
    })? {}
}

/// `docker cp HOST_FILE CONTAINER:PATH` or `docker cp CONTAINER:PATH HOST_FILE`, of one
/// file, through `nsfleet exec ... cat`.
fn cp(rd: &RunDir, args: &[String]) -> anyhow::Result<i32> {
    let (_, rest) = options(Tool::Docker, args, &["-q", "--quiet"], &[])?;
    let [from, to] = rest else {
        bail!("docker cp: expected SOURCE DESTINATION, one of them CONTAINER:PATH");
    };
    let in_node = |s: &str| {
        s.split_once(':')
            .filter(|(c, _)| !c.contains('/'))
            .map(|(c, p)| (c.to_string(), p.to_string()))
    };
    let me = std::env::current_exe().context("finding nsfleet's executable")?;
    let (status, what) = match (in_node(from), in_node(to)) {
        (None, Some((c, path))) => {
            let file = std::fs::File::open(from).with_context(|| format!("docker cp: {from}"))?;
            let lab = lab_of(rd, &c)?;
            let status = std::process::Command::new(&me)
                .args([
                    "exec",
                    &lab,
                    &c,
                    "--",
                    "sh",
                    "-c",
                    "cat > \"$1\"",
                    "sh",
                    &path,
                ])
                .stdin(file)
                .status()?;
            (status, format!("{from} to {c}:{path}"))
        }
        (Some((c, path)), None) => {
            let file = std::fs::File::create(to).with_context(|| format!("docker cp: {to}"))?;
            let lab = lab_of(rd, &c)?;
            let status = std::process::Command::new(&me)
                .args(["exec", &lab, &c, "--", "cat", &path])
                .stdout(file)
                .status()?;
            (status, format!("{c}:{path} to {to}"))
        }
        _ => bail!("docker cp: expected one of SOURCE and DESTINATION as CONTAINER:PATH"),
    };
    if !status.success() {
        bail!("docker cp: copying {what} failed ({status})");
    }
    Ok(0)
}

/// Memory as `docker stats` says it: the node's processes' resident memory.
fn stats(rd: &RunDir, args: &[String]) -> anyhow::Result<i32> {
    let (opts, rest) = options(
        Tool::Docker,
        args,
        &["--no-stream", "--format"],
        &["--format"],
    )?;
    json_format(&opts, "stats")?;
    if !opts.iter().any(|(f, _)| f == "--no-stream") || !rest.is_empty() {
        bail!("nsfleet stands in for `docker stats --no-stream --format json` only");
    }
    let total = nsfleet::sys::meminfo("MemTotal:") / 1024;
    for (_, n) in nsfleet_clab::lab::containers(rd) {
        let c = n.clab.as_ref().expect("filtered");
        let kib: u64 = n
            .processes
            .iter()
            .filter(|p| p.running)
            .map(|p| rss_kib(p.pid))
            .sum();
        let line = serde_json::json!({
            "Name": c.container,
            "MemUsage": format!("{:.1}MiB / {:.1}GiB", kib as f64 / 1024.0, total as f64 / 1048576.0),
        });
        println!("{line}");
    }
    Ok(0)
}

fn rss_kib(pid: i64) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    (status.lines())
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

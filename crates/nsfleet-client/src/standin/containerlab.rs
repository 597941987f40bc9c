//! `containerlab`, as netlab runs it: `version` (probed, and compared with the version
//! netlab needs), `deploy [--reconfigure] -t FILE`, `destroy [--cleanup] -t FILE` and
//! `inspect -t FILE --format json`, each nsfleet's own verb on the same file. Nodes run
//! the host's software (a node of FRR's image runs the host's FRR), and each node's
//! namespace is named `clab-LAB-NODE`, as containerlab names them and netlab expects.

use super::{options, unanswered, Tool};
use crate::clab;
use std::path::PathBuf;

/// The containerlab whose behaviour nsfleet's containerlab support follows, and which it
/// says it is to netlab's version check.
pub const VERSION: &str = "0.79.0";

pub fn answer(args: &[String], run_dir: PathBuf) -> anyhow::Result<i32> {
    let Some((verb, rest)) = args.split_first() else {
        return unanswered(Tool::Containerlab, args);
    };
    match verb.as_str() {
        "version" if rest.is_empty() => {
            // netlab reads the second word of the line that says "version".
            println!("  nsfleet {} standing in", env!("CARGO_PKG_VERSION"));
            println!("    version: {VERSION}");
            Ok(0)
        }
        "deploy" => deploy(rest, run_dir),
        "destroy" => destroy(rest, run_dir),
        "inspect" => inspect(rest, run_dir),
        _ => unanswered(Tool::Containerlab, args),
    }
}

/// The file of `-t FILE` (or `--topo`), and whether a flag of `flags` was given.
fn topo(
    args: &[String],
    flags: &[&str],
) -> anyhow::Result<(Option<PathBuf>, bool, Option<String>)> {
    let mut known = vec!["-t", "--topo", "--format", "-f"];
    known.extend(flags);
    let (opts, rest) = options(
        Tool::Containerlab,
        args,
        &known,
        &["-t", "--topo", "--format", "-f"],
    )?;
    if !rest.is_empty() {
        anyhow::bail!("containerlab: unexpected {:?}", rest.join(" "));
    }
    let file = (opts.iter())
        .find(|(f, _)| f == "-t" || f == "--topo")
        .and_then(|(_, v)| v.clone())
        .map(PathBuf::from);
    let flag = opts.iter().any(|(f, _)| flags.contains(&f.as_str()));
    let format = (opts.iter())
        .find(|(f, _)| f == "--format" || f == "-f")
        .and_then(|(_, v)| v.clone());
    Ok((file, flag, format))
}

fn deploy(args: &[String], run_dir: PathBuf) -> anyhow::Result<i32> {
    let (file, reconfigure, _) = topo(args, &["--reconfigure", "-c"])?;
    let up = crate::up::UpArgs {
        file: None,
        format: None,
        name: None,
        workers: crate::up::default_workers(),
        max_unreclaimed: crate::up::DEFAULT_MAX_UNRECLAIMED,
        run_dir,
        json: false,
        dry_run: false,
        software: nsfleet::topology::Software::Host,
        images: PathBuf::from(crate::image::DEFAULT_STORE),
        netns_names: true,
        vars: Vec::new(),
    };
    clab::deploy(clab::DeployArgs {
        topo: file,
        reconfigure,
        up,
    })?;
    Ok(0)
}

fn destroy(args: &[String], run_dir: PathBuf) -> anyhow::Result<i32> {
    // --cleanup removes containerlab's lab folder; nsfleet keeps none.
    let (file, _, _) = topo(args, &["--cleanup"])?;
    clab::destroy(clab::DestroyArgs {
        lab: clab::Lab {
            topo: file,
            name: None,
            all: false,
        },
        json: false,
        run_dir,
    })?;
    Ok(0)
}

fn inspect(args: &[String], run_dir: PathBuf) -> anyhow::Result<i32> {
    let (file, _, format) = topo(args, &[])?;
    clab::inspect(clab::InspectArgs {
        lab: clab::Lab {
            topo: file,
            name: None,
            all: false,
        },
        json: format.as_deref() == Some("json"),
        wide: false,
        run_dir,
    })?;
    Ok(0)
}

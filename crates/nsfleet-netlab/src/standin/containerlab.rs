//! `containerlab`, as netlab runs it: `version` (probed, and compared with the version
//! netlab needs), `deploy [--reconfigure] -t FILE`, `destroy [--cleanup] -t FILE` and
//! `inspect -t FILE --format json`, each nsfleet's own verb on the same file. Nodes run
//! the host's software (a node of FRR's image runs the host's FRR), and each node's
//! namespace is named `clab-LAB-NODE`, as containerlab names them and netlab expects
//! (root's: a user's lab names none, and `sudo` answers for them).

use super::{options, unanswered, Tool};
use nsfleet_clab::lab as clab;
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
    let up = nsfleet_client::up::UpArgs {
        // A user's lab has none: /run/netns is root's (their `sudo ip netns exec` is
        // answered by entering the node, see `sudo`).
        netns_names: nsfleet::sys::is_host_root(),
        ..nsfleet_client::up::UpArgs::defaults(run_dir)
    };
    let run_dir = up.run_dir.clone();
    clab::deploy(clab::DeployArgs {
        topo: file.clone(),
        reconfigure,
        up,
    })?;
    // The lab runs now: a mask that cannot be set is said, not a failed deploy.
    let lab = clab::lab_name(&clab::topology_file(file.as_deref())?)?;
    if let Err(e) = apply_fwd_masks(&lab, &run_dir) {
        eprintln!("nsfleet: warning: {e:#}");
    }
    Ok(0)
}

/// Gives each of the lab's bridge switches the forwarding mask netlab asked of its
/// bridge, as netlab sets it on a host bridge (its `group_fwd_mask`).
fn apply_fwd_masks(lab: &str, run_dir: &std::path::Path) -> anyhow::Result<()> {
    let Some(text) = crate::state::fwd_masks() else {
        return Ok(());
    };
    let exe = std::env::current_exe()?;
    for (bridge, mask) in text.lines().filter_map(|l| l.split_once(' ')) {
        let script = format!("echo {mask} > /sys/class/net/br0/bridge/group_fwd_mask");
        let words = ["sh", "-c", &script].map(String::from);
        let out = nsfleet_clab::exec::run_in(&exe, run_dir, lab, bridge, &words)?;
        if !out.status.success() {
            anyhow::bail!(
                "setting {bridge}'s group_fwd_mask to {mask}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
    Ok(())
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

//! `nsfleet apply FILE [--dry-run]`: changes the running fleet into FILE where they differ,
//! and shows it object by object (`+` added, `-` removed, `~` changed), as `terraform
//! apply` does. The file is read and checked against the kernel once, here; the
//! supervisor gets the topology, compares it with what runs (live impairments included)
//! and makes the change, all or nothing.

use super::connect;
use anyhow::{bail, Context};
use nsfleet::control::{Reply, Request};
use nsfleet::core::ReshapeReport;
use nsfleet::rundir::RunDir;
use nsfleet::topology::diff::{Change, Op};
use nsfleet::topology::{self, Format};
use std::path::PathBuf;

pub struct ApplyArgs {
    pub file: PathBuf,
    pub format: Option<Format>,
    /// The fleet, when it is not the file's name.
    pub name: Option<String>,
    pub dry_run: bool,
    pub json: bool,
    pub run_dir: PathBuf,
    /// What nodes that name an image run, and the image store's folder.
    pub software: topology::Software,
    pub images: PathBuf,
}

pub fn apply(a: ApplyArgs) -> anyhow::Result<()> {
    let (json, dry_run) = (a.json, a.dry_run);
    let plan = plan(a)?;
    say(&plan.fleet, &plan, dry_run, json);
    Ok(())
}

/// What `apply` did (or, dry, would do) to a fleet.
pub struct Plan {
    pub fleet: String,
    pub changes: Vec<Change>,
    pub applied: bool,
    pub report: Option<ReshapeReport>,
}

/// `apply` without a word: the file read and checked, the fleet changed into it (or,
/// dry, asked what that would change).
pub fn plan(a: ApplyArgs) -> anyhow::Result<Plan> {
    let file = std::path::absolute(&a.file).with_context(|| format!("{}", a.file.display()))?;
    // A bad file is refused with its line before any fleet is asked.
    // Named as the user wrote it, as the kernel's refusals of the change are below.
    let draft = topology::read_file_with(&a.file, a.format, a.software, &[])?;
    for w in draft.warnings() {
        eprintln!("nsfleet: warning: {w}");
    }
    let name = a.name.clone().unwrap_or_else(|| draft.name().to_string());
    // Checked against the machine and serialized before connecting: the supervisor gives
    // a connection 10 s to say what it wants.
    let mut topo = nsfleet::subsys::probe::validate(draft)?;
    // Held while the change is made; once made, the fleet's supervisor holds them by
    // this hold's file, and it stays.
    let hold = crate::fleet_images::find(&mut topo, &a.file, &a.images)?;
    request(ChangeTo {
        name,
        file,
        shown: a.file,
        topo,
        hold,
        dry_run: a.dry_run,
        json: a.json,
        run_dir: a.run_dir,
    })
}

/// A running fleet to change into a topology read and checked already.
pub struct ChangeTo {
    pub name: String,
    /// The topology's file, absolute (the supervisor names it in messages), and as the
    /// user wrote it (our messages name that).
    pub file: PathBuf,
    pub shown: PathBuf,
    pub topo: nsfleet::topology::Topology,
    /// The image store's hold on the images the nodes run.
    pub hold: Option<nsfleet_image::Hold>,
    pub dry_run: bool,
    pub json: bool,
    pub run_dir: PathBuf,
}

/// The supervisor of fleet `c.name` asked to change it into `c.topo` (or, dry, to say
/// what that would change); the change, or the plan, shown.
pub fn change(c: ChangeTo) -> anyhow::Result<()> {
    let (dry_run, json) = (c.dry_run, c.json);
    let plan = request(c)?;
    say(&plan.fleet, &plan, dry_run, json);
    Ok(())
}

/// The change, or the plan, for people or (`json`) as one object.
fn say(name: &str, plan: &Plan, dry_run: bool, json: bool) {
    if json {
        let out = serde_json::json!({
            "fleet": name,
            "dry_run": dry_run,
            "applied": plan.applied,
            "changes": plan.changes,
            "report": plan.report,
        });
        println!("{out}");
        return;
    }
    print_plan(name, &plan.changes, plan.report.as_ref());
}

/// The supervisor of fleet `c.name` asked to change it into `c.topo` (or, dry, to say
/// what that would change).
fn request(c: ChangeTo) -> anyhow::Result<Plan> {
    let ChangeTo {
        name,
        file,
        shown,
        topo,
        hold,
        dry_run,
        json,
        run_dir,
    } = c;
    let topology = serde_json::to_vec(&topo)?;
    if topology.len() as u64 > nsfleet::control::MAX_TOPOLOGY {
        bail!(
            "{}: the topology is {} bytes as the supervisor takes it; at most {} are taken",
            shown.display(),
            topology.len(),
            nsfleet::control::MAX_TOPOLOGY
        );
    }
    let rd = RunDir::new(&run_dir);
    let mut client = connect(&rd, &name)?;
    let req = Request::Apply {
        file,
        topology_len: topology.len() as u64,
        dry_run,
        hold: hold.as_ref().map(|h| h.path().to_path_buf()),
    };
    if !dry_run && !json {
        eprintln!("nsfleet: applying {} to fleet {name:?}...", shown.display());
    }
    let in_file = |e| crate::errors::in_file(e, &shown);
    let (changes, applied, report) = match client.call_with(&req, &topology).map_err(in_file)? {
        Reply::Plan {
            changes,
            applied,
            report,
        } => (changes, applied, report),
        other => bail!("unexpected reply from the supervisor: {other:?}"),
    };
    if applied {
        // The supervisor holds the images by the hold's file now: it stays when we go.
        drop(hold.map(nsfleet_image::Hold::into_fd));
    }
    Ok(Plan {
        fleet: name,
        changes,
        applied,
        report,
    })
}

/// The change, object by object (`+` added, `-` removed, `~` changed), and what making it
/// took when it was made.
pub fn print_plan(fleet: &str, changes: &[Change], report: Option<&ReshapeReport>) {
    if changes.is_empty() {
        println!("fleet {fleet:?} is as the file says: nothing to change");
        return;
    }
    let count = |op: Op| changes.iter().filter(|c| c.op == op).count();
    for c in changes {
        let sign = match c.op {
            Op::Add => '+',
            Op::Remove => '-',
            Op::Change => '~',
        };
        let detail = if c.detail.is_empty() {
            String::new()
        } else {
            format!("  ({})", c.detail)
        };
        println!("  {sign} {}{detail}", c.object);
    }
    let (add, change, remove) = (count(Op::Add), count(Op::Change), count(Op::Remove));
    let Some(r) = report else {
        println!(
            "plan for fleet {fleet:?}: {add} to add, {change} to change, {remove} to remove (--dry-run: nothing was changed)"
        );
        return;
    };
    let took: std::time::Duration = r.steps.iter().map(|(_, d)| *d).sum();
    println!(
        "applied to fleet {fleet:?}: {add} added, {change} changed, {remove} removed in {:.2} s (nodes: {} added, {} changed, {} removed and reclaimed)",
        took.as_secs_f64(),
        r.added,
        r.changed,
        r.removed,
    );
}

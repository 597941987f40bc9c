//! `nsfleet apply FILE --dry-run`: what changing the running fleet to FILE would change,
//! object by object (`+` added, `-` removed, `~` changed), as `terraform plan` shows it.
//! The supervisor reads and validates the file and compares it with what runs (live
//! impairments included). Applying the plan is not done yet: `link`, `node` and `impair`
//! change a live fleet meanwhile.

use super::connect;
use anyhow::{bail, Context};
use nsfleet::control::{Reply, Request};
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
}

pub fn apply(a: ApplyArgs) -> anyhow::Result<()> {
    let file = std::path::absolute(&a.file).with_context(|| format!("{}", a.file.display()))?;
    // Read here too: a bad file is refused with its line before any fleet is asked.
    let draft = topology::read_file(&file, a.format)?;
    for w in draft.warnings() {
        eprintln!("nsfleet: warning: {w}");
    }
    // The supervisor validates it against the kernel; the name is all needed here.
    let name = a.name.clone().unwrap_or_else(|| draft.name().to_string());
    let rd = RunDir::new(&a.run_dir);
    let mut client = connect(&rd, &name)?;
    let req = Request::Apply {
        file,
        format: a.format,
        dry_run: a.dry_run,
    };
    let changes = match client.call(&req)? {
        Reply::Plan { changes, .. } => changes,
        other => bail!("unexpected reply from the supervisor: {other:?}"),
    };
    if a.json {
        println!(
            "{}",
            serde_json::json!({ "fleet": name, "dry_run": a.dry_run, "changes": changes })
        );
        return Ok(());
    }
    print_plan(&name, &changes);
    Ok(())
}

fn print_plan(fleet: &str, changes: &[Change]) {
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
    println!(
        "plan for fleet {fleet:?}: {} to add, {} to change, {} to remove (--dry-run: nothing was changed)",
        count(Op::Add),
        count(Op::Change),
        count(Op::Remove)
    );
}

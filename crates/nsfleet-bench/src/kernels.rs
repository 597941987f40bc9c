//! `nsfleet bench SCENARIO --kernels host,debian:6.1,debian:6.12 --dir DIR`: one scenario
//! on several kernels, one after the other. `host` is the running kernel, measured here;
//! every other kernel is booted under QEMU (`nsfleet-vm`) and the same nsfleet runs the
//! same scenario inside, writing its result file straight into DIR (shared writable with
//! the guest). Each result is `DIR/SCENARIO-KERNEL.json` (`bench all`: `DIR/KERNEL/`),
//! and `DIR/report.html` sets them side by side, as `nsfleet report` does.
//!
//! A guest under TCG emulation runs far slower than the host: compare a guest's ratios
//! (nsfleet against the raw loop in the same run) with the host's, its absolute rates
//! only with other guests'.

use anyhow::{bail, Context};
use nsfleet_vm::{Accel, Interrupted, Kernel, Spec, Stop};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub struct Across {
    pub kernels: Vec<Spec>,
    pub dir: PathBuf,
    /// `routers`, `teardown`..., or `all`.
    pub scenario: String,
    /// The scenario's own arguments (sizes, runs...), as given.
    pub args: Vec<String>,
    pub vm_mem_mib: u32,
    pub vm_timeout: Duration,
    /// The guests' accelerator (`NSFLEET_VM_ACCEL`, or auto).
    pub accel: Accel,
}

/// Options of `nsfleet bench` that belong to this run across kernels, not to each run
/// (each takes a value).
pub const OWN_OPTIONS: &[&str] = &["--kernels", "--dir", "--output", "-o", "--vm-mem"];

pub fn across(a: &Across) -> anyhow::Result<()> {
    if has_duplicates(a.kernels.iter().map(Spec::label)) {
        bail!("--kernels: a kernel is named twice");
    }
    std::fs::create_dir_all(&a.dir).with_context(|| format!("creating {}", a.dir.display()))?;
    let dir = std::fs::canonicalize(&a.dir)?;
    // Ctrl-C or SIGTERM ends the whole run at once, in any phase (see `Stop`).
    let stop = Stop::watch()?;
    // Every kernel is found (and fetched) before anything is measured: a version
    // Debian does not have ends the run here, not after an hour.
    let kernels = (a.kernels.iter())
        .map(|s| match s {
            Spec::Host => Ok((s, None)),
            _ => Ok((s, Some(s.kernel(None, &stop)?))),
        })
        .collect::<anyhow::Result<Vec<(&Spec, Option<Kernel>)>>>()?;
    let exe = std::env::current_exe().context("finding nsfleet's own executable")?;
    let (mut written, mut failed) = (Vec::new(), Vec::new());
    for (spec, kernel) in kernels {
        let label = spec.label();
        let (out, mut args) = (result_path(&dir, &a.scenario, &label), a.args.clone());
        args.extend(if a.scenario == "all" {
            ["--dir".to_string(), out.display().to_string()]
        } else {
            ["--output".to_string(), out.display().to_string()]
        });
        let release = kernel
            .as_ref()
            .map_or_else(nsfleet_vm::kernel::running_release, |k| k.release.clone());
        eprintln!("== bench {} on {label} (kernel {release}) ==", a.scenario);
        match run_on(kernel, &exe, &args, &dir, a, &stop) {
            Err(e) if e.is::<Interrupted>() => return Err(e),
            Ok(0) => written.push(out),
            Ok(code) => failed.push(format!("{label} (exit status {code})")),
            Err(e) => failed.push(format!("{label} ({e:#})")),
        }
    }
    report(&dir, &written)?;
    if !failed.is_empty() {
        bail!("the scenario failed on {}", failed.join(", "));
    }
    Ok(())
}

/// Runs nsfleet with `args` on the host (no kernel) or in a guest of `kernel`; its exit
/// status.
fn run_on(
    kernel: Option<Kernel>,
    exe: &Path,
    args: &[String],
    dir: &Path,
    a: &Across,
    stop: &Stop,
) -> anyhow::Result<i32> {
    let Some(kernel) = kernel else {
        let mut child = std::process::Command::new(exe).args(args).spawn()?;
        let helper = stop.helper_ended_by(child.id(), libc::SIGTERM);
        let status = child.wait()?;
        drop(helper);
        stop.check()?;
        return Ok(status.code().unwrap_or(128));
    };
    let mut command = vec![exe.display().to_string()];
    command.extend(args.iter().cloned());
    let args = nsfleet_vm::VmArgs {
        kernel,
        cpus: std::thread::available_parallelism().map_or(2, |n| n.get() as u32),
        mem_mib: a.vm_mem_mib,
        timeout: a.vm_timeout,
        rwdirs: vec![dir.to_path_buf()],
        append: Vec::new(),
        command,
        accel: a.accel,
    };
    nsfleet_vm::run(&args, stop)
}

/// Where a kernel's result goes: `DIR/SCENARIO-KERNEL.json`, or for `all` a folder.
fn result_path(dir: &Path, scenario: &str, label: &str) -> PathBuf {
    match scenario {
        "all" => dir.join(label),
        _ => dir.join(format!("{scenario}-{label}.json")),
    }
}

/// `DIR/report.html` of the result files written (for `all`, of the files in each
/// kernel's folder).
fn report(dir: &Path, written: &[PathBuf]) -> anyhow::Result<()> {
    let mut files = Vec::new();
    for w in written {
        if w.is_dir() {
            let mut inside: Vec<PathBuf> = (std::fs::read_dir(w)?.flatten())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect();
            inside.sort();
            files.extend(inside);
        } else {
            files.push(w.clone());
        }
    }
    if files.is_empty() {
        return Ok(());
    }
    let loaded = (files.iter())
        .map(|p| Ok((label_of(dir, p), nsfleet_results::Results::load(p)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let page = dir.join("report.html");
    std::fs::write(&page, nsfleet_results::report(&loaded))?;
    eprintln!(
        "{} result file(s) in {}; side by side in {}\n  (again, or with other files: nsfleet report {}/*.json -o report.html --readme docs/kernel-lab.md --section kernels)",
        files.len(),
        dir.display(),
        page.display(),
        dir.display()
    );
    Ok(())
}

/// A result's column name: its path under `dir`, without `.json`.
fn label_of(dir: &Path, p: &Path) -> String {
    let rel = p.strip_prefix(dir).unwrap_or(p).display().to_string();
    rel.strip_suffix(".json").unwrap_or(&rel).to_string()
}

fn has_duplicates(labels: impl Iterator<Item = String>) -> bool {
    let mut seen = std::collections::HashSet::new();
    labels.into_iter().any(|l| !seen.insert(l))
}

/// `nsfleet`'s arguments from the first (`argv[0]` left out) without [`OWN_OPTIONS`]
/// (`--opt VALUE`, `--opt=VALUE`, `-oVALUE`): what each kernel's run is given.
pub fn without_own_options(argv: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        let own = OWN_OPTIONS.iter().find(|o| {
            a == *o || a.starts_with(&format!("{o}=")) || (**o == "-o" && a.starts_with("-o"))
        });
        match own {
            Some(o) if a == *o => {
                it.next();
            }
            Some(_) => {}
            None => out.push(a.clone()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kernels_run_gets_the_scenarios_arguments_but_not_the_runs_own() {
        let argv: Vec<String> = [
            "bench",
            "routers",
            "--steps",
            "500,1000",
            "--kernels",
            "host,debian:6.1",
            "--dir=results",
            "-o",
            "x.json",
            "--runs",
            "3",
            "--vm-mem",
            "4096",
            "-oy.json",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            without_own_options(&argv),
            ["bench", "routers", "--steps", "500,1000", "--runs", "3"]
        );
    }
}

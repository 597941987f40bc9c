//! `nsfleet netlab ARGS...`: the user's own netlab (PyPI `networklab`), run with nsfleet
//! standing in for the `containerlab`, `docker` and `sudo` it calls (see [`standin`]
//! (crate::standin)). For this run only: the three are scripts in a folder of the run's
//! own under the run directory, first on netlab's PATH, removed when netlab ends (and by
//! `nsfleet clean --all` if this process was killed). Nothing is installed on the host,
//! no Docker is needed, and a real Docker or containerlab on the machine is not touched.

use crate::standin::Tool;
use crate::state::STATE;
use anyhow::{bail, Context};
use nsfleet::rundir::{ProcId, RunDir};
use nsfleet::sys;
use nsfleet::topology::shell_quote as quote;
use std::ffi::OsString;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The netlab release the stand-ins were written against and are tested with; the
/// commands netlab runs are those of its major version.
pub const TESTED: &str = "26.10";
const MAJOR: u32 = 26;

/// Where a run's stand-ins are, below the run directory (`.netlab-PID-STARTTIME`): not a
/// fleet's folder (no fleet name starts with a dot).
const PREFIX: &str = ".netlab-";

/// netlab's probes of its containerlab provider (its `providers/clab.yml`) as a user's
/// run has them: the same, but for the one that wants the user in containerlab's
/// `clab_admins` group (the group of containerlab's setuid binary), which nsfleet, run by
/// the user in a user namespace of theirs, needs no more than it is setuid.
const USERS_PROBES: &str = r#"[{"cmd": "containerlab version", "err": "Containerlab is not installed"}, {"cmd": "docker version", "err": "Cannot run 'docker version'"}, {"cmd": ["bash", "-c", "[[ `containerlab version|awk '/version/ {print $2}'` > '0.74.99' ]] && echo OK"], "err": "Containerlab version is too old"}]"#;

pub struct NetlabArgs {
    pub args: Vec<OsString>,
    /// Run a netlab of another major version than [`TESTED`]'s.
    pub untested: bool,
    pub run_dir: PathBuf,
}

/// Runs netlab; returns its exit status.
pub fn netlab(a: NetlabArgs) -> anyhow::Result<i32> {
    let program = sys::host::which("netlab").with_context(|| {
        format!("netlab is not installed (no `netlab` on PATH): install it with `python3 -m pip install networklab=={TESTED}` (nsfleet stands in for what netlab {MAJOR}.x calls)")
    })?;
    let version = version_of(&program)?;
    check_version(&version, a.untested)?;
    let rd = RunDir::new(&a.run_dir);
    let stand_ins = StandIns::make(&rd)?;
    let mut netlab = std::process::Command::new(&program);
    netlab.args(&a.args).env("PATH", stand_ins.path()?);
    if !Path::new("/proc/modules").exists() {
        // netlab reads /proc/modules to load the modules a lab needs (vrf, bonding, ...);
        // a kernel built without modules has none to load, and no such file.
        eprintln!("nsfleet: this kernel has no loadable modules (/proc/modules): netlab is told to load none");
        netlab.env("NETLAB_DEVICES_FRR_CLAB_KMODS", "{}");
        netlab.env("NETLAB_PROVIDERS_CLAB_KMODS", "{}");
    }
    if !sys::is_host_root() {
        eprintln!("nsfleet: netlab runs as a user here: its check for containerlab's clab_admins group is left out (the lab is yours, in a user namespace of your own: docs/rootless.md)");
        netlab.env("NETLAB_PROVIDERS_CLAB_PROBE", USERS_PROBES);
    }
    let mut child = netlab
        .spawn()
        .with_context(|| format!("running {}", program.display()))?;
    // The terminal's Ctrl-C is netlab's to take (it stops what it runs); we clean up after.
    sys::ignore_interrupts();
    let status = child.wait().context("waiting for netlab")?;
    drop(stand_ins);
    use std::os::unix::process::ExitStatusExt;
    Ok(status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

/// netlab's version. Asked of its package's metadata through netlab's own Python when
/// netlab is a Python script (as pip installs it): a few tens of milliseconds, where
/// `netlab version` loads all of netlab, and took half of `nsfleet netlab down`'s time.
fn version_of(program: &Path) -> anyhow::Result<String> {
    match python_of(program).and_then(|python| package_version(&python)) {
        Some(version) => Ok(version),
        None => version_said(program),
    }
}

/// The Python a script runs with: its `#!` line's interpreter (or the word after `env`),
/// when that is a Python.
fn python_of(script: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let line = std::str::from_utf8(&head[..n]).ok()?.lines().next()?;
    let mut words = line.strip_prefix("#!")?.split_whitespace();
    let mut interpreter = words.next()?;
    if interpreter.ends_with("/env") {
        interpreter = words.next()?;
    }
    let name = Path::new(interpreter).file_name()?.to_str()?;
    name.starts_with("python")
        .then(|| PathBuf::from(interpreter))
}

/// The installed `networklab` package's version, as `python` reads its metadata.
fn package_version(python: &Path) -> Option<String> {
    let out = std::process::Command::new(python)
        .args([
            "-c",
            "from importlib.metadata import version; print(version('networklab'))",
        ])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !version.is_empty()).then_some(version)
}

/// `netlab version`'s first line: "netlab version 26.10".
fn version_said(program: &Path) -> anyhow::Result<String> {
    let out = std::process::Command::new(program)
        .arg("version")
        .output()
        .with_context(|| format!("running {} version", program.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    (text.lines().next())
        .and_then(|l| l.strip_prefix("netlab version "))
        .map(|v| v.trim().to_string())
        .with_context(|| {
            format!(
                "`{} version` did not say its version: {text:?}",
                program.display()
            )
        })
}

/// Refuses a netlab whose major version is not the one the stand-ins answer.
fn check_version(version: &str, untested: bool) -> anyhow::Result<()> {
    let major: Option<u32> = version.split('.').next().and_then(|m| m.parse().ok());
    match major {
        Some(MAJOR) => Ok(()),
        _ if untested => {
            eprintln!("nsfleet: netlab {version} is not the {MAJOR}.x nsfleet answers (tested with {TESTED}); trying it anyway (--untested-netlab)");
            Ok(())
        }
        Some(m) if m < MAJOR => bail!("netlab {version} is older than the {MAJOR}.x nsfleet stands in for (tested with {TESTED}): `python3 -m pip install -U networklab=={TESTED}`, or --untested-netlab to try"),
        _ => bail!("netlab {version} is newer than the {MAJOR}.x nsfleet stands in for (tested with {TESTED}): the commands it runs may differ; `python3 -m pip install networklab=={TESTED}`, or --untested-netlab to try"),
    }
}

/// The run's folder of stand-in scripts, removed when dropped.
struct StandIns {
    dir: PathBuf,
}

impl StandIns {
    fn make(rd: &RunDir) -> anyhow::Result<StandIns> {
        let me = std::env::current_exe().context("finding nsfleet's executable")?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(rd.root())
            .with_context(|| format!("creating run directory {}", rd.root().display()))?;
        // Named after this process as `clean` can tell it from a later one of its pid.
        let me_now = ProcId::of(std::process::id() as i32).context("this process's start time")?;
        let dir = rd
            .root()
            .join(format!("{PREFIX}{}-{}", me_now.pid, me_now.start_time));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("creating {}", dir.display()))?;
        let stand_ins = StandIns { dir };
        for tool in Tool::ALL {
            let script = format!(
                "#!/bin/sh\n# nsfleet netlab's stand-in for {0}, for one run (pid {1})\n{STATE}={4} exec {2} --run-dir {3} stand-in {0} \"$@\"\n",
                tool.name(),
                std::process::id(),
                quote(&me.display().to_string()),
                quote(&rd.root().display().to_string()),
                quote(&stand_ins.dir.display().to_string()),
            );
            let path = stand_ins.dir.join(tool.name());
            std::fs::write(&path, script)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        }
        Ok(stand_ins)
    }

    /// netlab's PATH: the stand-ins first, then ours.
    fn path(&self) -> anyhow::Result<OsString> {
        let ours = std::env::var_os("PATH").unwrap_or_else(|| sys::DEFAULT_PATH.into());
        let dirs = std::iter::once(self.dir.clone()).chain(std::env::split_paths(&ours));
        Ok(std::env::join_paths(dirs)?)
    }
}

impl Drop for StandIns {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `nsfleet clean --all`'s sweep of netlab's leftovers.
pub const STALE: nsfleet_client::clean::Sweep = nsfleet_client::clean::Sweep {
    sweep: clean_stale,
    what: "a killed `nsfleet netlab`'s stand-ins",
};

/// Removes the stand-in folders of `nsfleet netlab` runs that are gone (killed before
/// they could); returns them.
pub fn clean_stale(rd: &RunDir) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(rd.root()) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((pid, start_time)) = name.strip_prefix(PREFIX).and_then(|p| p.split_once('-'))
        else {
            continue;
        };
        let (Ok(pid), Ok(start_time)) = (pid.parse(), start_time.parse()) else {
            continue;
        };
        let gone = !ProcId { pid, start_time }.alive();
        if gone && std::fs::remove_dir_all(e.path()).is_ok() {
            removed.push(e.path());
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::{check_version, python_of};
    use std::path::{Path, PathBuf};

    #[test]
    fn a_scripts_python_is_read_from_its_first_line() {
        let dir = std::env::temp_dir().join(format!("nsfleet-test-netlab-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let python = |first_line: &str| {
            let script = dir.join("netlab");
            std::fs::write(&script, format!("{first_line}\nimport sys\n")).unwrap();
            python_of(&script)
        };
        let venv = python("#!/opt/venv/bin/python3");
        let env = python("#!/usr/bin/env python3.11");
        let shell = python("#!/bin/sh");
        let none = python("import sys");
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(venv, Some(PathBuf::from("/opt/venv/bin/python3")));
        assert_eq!(env, Some(PathBuf::from("python3.11")));
        assert_eq!((shell, none), (None, None));
        assert_eq!(python_of(Path::new("/no/such/netlab")), None);
    }

    #[test]
    fn netlab_versions_other_than_the_answered_major_are_refused_saying_which() {
        assert!(check_version("26.10", false).is_ok());
        assert!(check_version("26.03", false).is_ok());
        let old = check_version("25.12", false).unwrap_err().to_string();
        assert!(
            old.contains("older") && old.contains("pip install"),
            "{old}"
        );
        let new = check_version("27.01", false).unwrap_err().to_string();
        assert!(new.contains("newer"), "{new}");
        assert!(check_version("27.01", true).is_ok());
    }
}

//! The run directory: one folder per fleet, holding its control socket, its record (who
//! owns it), the supervisor's log and the node logs.
//!
//! The record is what makes a folder provably nsfleet's: `clean` removes only folders
//! whose record parses and names the fleet, and never while the owner is alive. Liveness
//! is a pid *and* its start time, so a recycled pid is not mistaken for a supervisor.

use anyhow::{bail, Context};
use nsfleet_sys as sys;
use serde::{Deserialize, Serialize};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub const DEFAULT_RUN_DIR: &str = "/run/nsfleet";

/// Whether we run for a user: not as root, or as root of a user's own namespace.
fn users() -> bool {
    !sys::is_host_root()
}

/// The run directory of whoever runs us: root's [`DEFAULT_RUN_DIR`]; a user's
/// `$XDG_RUNTIME_DIR/nsfleet` when that folder is theirs, else (no session of their own,
/// as after `su`) `/tmp/nsfleet-UID`, which [`RunDir::check`] refuses if someone else
/// made it first.
pub fn default_root() -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    if sys::is_host_root() {
        return DEFAULT_RUN_DIR.into();
    }
    let uid = sys::euid();
    let session = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
        .filter(|d| std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir() && m.uid() == uid));
    match session {
        Some(d) => d.join("nsfleet"),
        None => PathBuf::from(format!("/tmp/nsfleet-{uid}")),
    }
}
const RECORD: &str = "fleet.json";
const FORMAT: &str = "nsfleet-fleet/1";

#[derive(Clone, Debug)]
pub struct RunDir {
    root: PathBuf,
}

/// A process, identified so that pid reuse cannot fool us.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProcId {
    pub pid: i32,
    pub start_time: u64,
}

impl ProcId {
    pub fn of(pid: i32) -> Option<Self> {
        sys::running_since(pid).map(|start_time| ProcId { pid, start_time })
    }

    pub fn alive(&self) -> bool {
        sys::running_since(self.pid) == Some(self.start_time)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FleetRecord {
    pub format: String,
    pub name: String,
    /// The `nsfleet up` that claimed the name.
    pub creator: ProcId,
    /// The supervisor, once started.
    pub supervisor: Option<ProcId>,
    pub created_unix: u64,
}

impl FleetRecord {
    /// Whether anyone may still be using this fleet's folder.
    pub fn owner_alive(&self) -> bool {
        self.supervisor.is_some_and(|s| s.alive())
            || (self.supervisor.is_none() && self.creator.alive())
    }
}

impl RunDir {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        RunDir { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn fleet_dir(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    pub fn socket(&self, name: &str) -> PathBuf {
        self.fleet_dir(name).join("control.sock")
    }

    pub fn log_dir(&self, name: &str) -> PathBuf {
        self.fleet_dir(name).join("logs")
    }

    /// Host interfaces of the fleet, journalled before they are created (for `clean`).
    pub fn host_journal(&self, name: &str) -> PathBuf {
        self.fleet_dir(name).join("host-links")
    }

    /// The fleet's cgroup, one folder per hierarchy, journalled before it is made (for
    /// `clean`).
    pub fn cgroup_journal(&self, name: &str) -> PathBuf {
        self.fleet_dir(name).join("cgroups")
    }

    /// Names given to the nodes' namespaces (`/run/netns/NAME`), journalled before they
    /// are given (for `clean`).
    pub fn netns_journal(&self, name: &str) -> PathBuf {
        self.fleet_dir(name).join("netns-names")
    }

    pub fn supervisor_log(&self, name: &str) -> PathBuf {
        self.fleet_dir(name).join("supervisor.log")
    }

    /// Refuses a run directory that someone other than us (root, or the user who runs
    /// us) could have prepared or could change under us: a symlink, not a directory, not
    /// ours, or writable by its group or others (a planted socket or record would be
    /// trusted). One that does not exist yet is fine: `claim` makes it.
    pub fn check(&self) -> anyhow::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let root = self.root.display();
        let meta = match std::fs::symlink_metadata(&self.root) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            r => r.with_context(|| format!("run directory {root}"))?,
        };
        let refuse = |why: String| {
            anyhow::anyhow!("run directory {root}: {why}; nsfleet uses only a directory of its user's that no one else can write (--run-dir, NSFLEET_RUN_DIR)")
        };
        if meta.file_type().is_symlink() {
            return Err(refuse("a symlink".into()));
        }
        if !meta.is_dir() {
            return Err(refuse("not a directory".into()));
        }
        let me = sys::euid();
        if meta.uid() != me {
            let who = if me == 0 {
                "root".into()
            } else {
                format!("uid {me}, who runs nsfleet")
            };
            return Err(refuse(format!("owned by uid {}, not {who}", meta.uid())));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(refuse(format!(
                "writable by its group or others (mode {:o})",
                meta.mode() & 0o7777
            )));
        }
        Ok(())
    }

    /// Makes the run directory if it is not there, and checks it.
    pub fn create(&self) -> anyhow::Result<()> {
        std::fs::DirBuilder::new()
            .recursive(true)
            // Root's lists its fleets to everyone, as /run/netns does; a user's, to no one.
            .mode(if users() { 0o700 } else { 0o755 })
            .create(&self.root)
            .with_context(|| format!("creating run directory {}", self.root.display()))?;
        self.check()
    }

    /// Claims `name`: creates its folder (atomically: mkdir fails if it exists) and writes
    /// a record naming us. A fleet of that name already up is refused.
    pub fn claim(&self, name: &str) -> anyhow::Result<FleetRecord> {
        self.create()?;
        let dir = self.fleet_dir(name);
        if let Err(e) = std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            if e.kind() != std::io::ErrorKind::AlreadyExists {
                return Err(e).with_context(|| format!("creating {}", dir.display()));
            }
            match self.record(name) {
                Some(r) if r.owner_alive() => match r.supervisor {
                    Some(s) => bail!("fleet {name:?} is already up (supervisor pid {}); `nsfleet down {name}` first", s.pid),
                    None => bail!("fleet {name:?} is being brought up by pid {}", r.creator.pid),
                },
                Some(_) => bail!("fleet {name:?} crashed and left {} behind; `nsfleet clean {name}` removes it", dir.display()),
                None => bail!("{} exists but is not an nsfleet fleet folder; remove it or choose another name", dir.display()),
            }
        }
        let me = ProcId::of(sys::host_pid()).context("reading our own process start time")?;
        let record = FleetRecord {
            format: FORMAT.into(),
            name: name.into(),
            creator: me,
            supervisor: None,
            created_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        };
        self.write_record(&record)?;
        Ok(record)
    }

    pub fn write_record(&self, record: &FleetRecord) -> anyhow::Result<()> {
        let path = self.fleet_dir(&record.name).join(RECORD);
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(record)?)?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
        std::fs::rename(&tmp, &path)?;
        Ok(())
    }

    /// The record of `name`, if its folder holds one of ours.
    pub fn record(&self, name: &str) -> Option<FleetRecord> {
        let text = std::fs::read(self.fleet_dir(name).join(RECORD)).ok()?;
        let r: FleetRecord = serde_json::from_slice(&text).ok()?;
        (r.format == FORMAT && r.name == name).then_some(r)
    }

    /// Names of the fleets with a folder here, sorted.
    pub fn fleets(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.root)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| self.record(n).is_some())
            .collect();
        names.sort();
        names
    }

    /// Removes a fleet's folder, only one with our record. Its owner removes it as it
    /// ends (`by_owner`); anyone else only once no owner is alive.
    pub fn remove(&self, name: &str, by_owner: bool) -> anyhow::Result<()> {
        match self.record(name) {
            None => bail!(
                "{} is not an nsfleet fleet folder; not touching it",
                self.fleet_dir(name).display()
            ),
            Some(r) if !by_owner && r.owner_alive() => bail!("fleet {name:?} is still running"),
            Some(_) => std::fs::remove_dir_all(self.fleet_dir(name))
                .with_context(|| format!("removing {}", self.fleet_dir(name).display())),
        }
    }
}

//! Folders of one run's own (the initramfs and the guest's share in the temporary folder;
//! a kernel being unpacked beside the cache), removed when the run ends, and by the next
//! run (or `nsfleet clean`) when the run was killed before it could: each holds an
//! `owner` record, the pid and start time of the process that made it, and a folder is
//! swept only when that record reads and names a process that is gone. A folder without
//! a record (another program's, or one whose record is not written yet) is never touched.

use std::path::{Path, PathBuf};

/// The record inside each folder.
const OWNER: &str = "owner";

/// The prefix of a run's folder in the temporary folder.
pub const RUN_PREFIX: &str = "nsfleet-vm-";

/// A folder of this process's, removed when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    /// `PARENT/NAME`, made with this process's record in it. One there already is
    /// removed only if it is a killed run's (an earlier process of this pid); anything
    /// else of that name is left alone, and refused.
    pub fn new(parent: &Path, name: &str) -> anyhow::Result<Scratch> {
        let dir = parent.join(name);
        let me = nsfleet_sys::host_pid();
        let since = nsfleet_sys::running_since(me)
            .ok_or_else(|| anyhow::anyhow!("reading our own start time in /proc"))?;
        if dir.exists() {
            if owner(&dir) != Owner::Gone {
                anyhow::bail!(
                    "{} exists and is not the folder of a killed nsfleet run: it was left alone; remove it to go on",
                    dir.display()
                );
            }
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        let scratch = Scratch(dir);
        std::fs::write(scratch.0.join(OWNER), format!("{me} {since}\n"))?;
        Ok(scratch)
    }

    /// This run's folder in the temporary folder: `/tmp/nsfleet-vm-PID-START`, named
    /// for this process alone (a later process of the same pid has another start time),
    /// so that a sweep never meets a live run's folder under a dead run's name.
    pub fn for_run() -> anyhow::Result<Scratch> {
        Scratch::new(&std::env::temp_dir(), &format!("{RUN_PREFIX}{}", me()?))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whose a folder is, by its record.
#[derive(Debug, PartialEq, Eq)]
pub enum Owner {
    /// No record, or one that does not read: not ours to judge.
    Unknown,
    Running,
    Gone,
}

/// `PID-START`: this process, as a name no other process will have.
pub fn me() -> anyhow::Result<String> {
    let pid = nsfleet_sys::host_pid();
    let since = nsfleet_sys::running_since(pid)
        .ok_or_else(|| anyhow::anyhow!("reading our own start time in /proc"))?;
    Ok(format!("{pid}-{since}"))
}

/// Whose `dir` is: its record read only if the folder is ours (our uid) and the record a
/// small regular file, opened without following links or blocking (a FIFO or a device
/// put there cannot stall a run).
pub fn owner(dir: &Path) -> Owner {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let uid = nsfleet_sys::euid();
    if !std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir() && m.uid() == uid) {
        return Owner::Unknown;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(dir.join(OWNER));
    let mut text = String::new();
    let read = file.and_then(|f| {
        if !f.metadata()?.is_file() {
            return Err(std::io::ErrorKind::InvalidData.into());
        }
        f.take(64).read_to_string(&mut text)
    });
    if read.is_err() {
        return Owner::Unknown;
    }
    let mut words = text.split_whitespace().map(str::parse::<u64>);
    let (Some(Ok(pid)), Some(Ok(since)), None) = (words.next(), words.next(), words.next()) else {
        return Owner::Unknown;
    };
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return Owner::Unknown;
    };
    match nsfleet_sys::running_since(pid) {
        Some(s) if s == since => Owner::Running,
        _ => Owner::Gone,
    }
}

/// Removes the folders of `parent` whose names start with `prefix` and whose owner is
/// gone; returns those removed.
pub fn sweep(parent: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    let stale = (entries.flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .filter(|p| owner(p) == Owner::Gone);
    stale
        .filter(|p| std::fs::remove_dir_all(p).is_ok())
        .collect()
}

/// What killed runs left: their folders in the temporary folder and their half-unpacked
/// kernels in the cache. For the next run and for `nsfleet clean`.
pub fn sweep_all() -> Vec<PathBuf> {
    let mut removed = sweep(&std::env::temp_dir(), RUN_PREFIX);
    if let Ok(cache) = crate::cache::kernels_dir(false) {
        removed.extend(sweep(&cache, "."));
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_swept_only_when_its_record_names_a_process_that_is_gone() {
        let parent =
            std::env::temp_dir().join(format!("nsfleet-test-scratch-{}", std::process::id()));
        std::fs::create_dir_all(&parent).unwrap();
        let mine = Scratch::new(&parent, "x-mine").unwrap();
        let dead = parent.join("x-dead");
        std::fs::create_dir_all(&dead).unwrap();
        // pid 1's start time is not 1 tick after boot... unless it is: take one that cannot be.
        std::fs::write(dead.join(OWNER), "1 99999999999\n").unwrap();
        let bad = parent.join("x-bad");
        std::fs::create_dir_all(&bad).unwrap();
        std::fs::write(bad.join(OWNER), "not a record\n").unwrap();
        let bare = parent.join("x-bare");
        std::fs::create_dir_all(&bare).unwrap();
        let other = parent.join("y-dead");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join(OWNER), "1 99999999999\n").unwrap();

        assert_eq!(owner(mine.path()), Owner::Running);
        assert_eq!(sweep(&parent, "x-"), vec![dead.clone()]);
        assert!(mine.path().is_dir() && bad.is_dir() && bare.is_dir() && other.is_dir());
        drop(mine);
        std::fs::remove_dir_all(&parent).unwrap();
    }
}

//! Work in progress under `ROOT/tmp`, the store's write lock, and the sweeping of what a
//! writer that died left behind.
//!
//! Each writer's work is a folder `tmp/<work>/` with `tmp/<work>.lock` beside it, which the
//! writer keeps flock(2)ed until it is done: the kernel lets go of the lock when the writer
//! dies, however it dies, so a sweeper that can take the lock knows nobody works there.

use anyhow::Context;
use nsfleet_sys::{flock, FlockOp};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// One writer's folder under `ROOT/tmp`, removed with its lock file when dropped.
pub(crate) struct Work {
    dir: PathBuf,
    lock_path: PathBuf,
    _lock: File,
}

impl Work {
    pub fn new(tmp: &Path) -> anyhow::Result<Work> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        loop {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let seq = SEQ.fetch_add(1, Ordering::Relaxed);
            let name = format!("{}-{nanos}-{seq}", std::process::id());
            if let Some(work) = Work::claim(tmp, &name)? {
                return Ok(work);
            }
        }
    }

    /// Takes `tmp/<name>`: its lock file made and locked, then the folder. None if a
    /// sweeper removed the lock file between its creation and our lock (it found it
    /// unlocked): the caller tries another name.
    fn claim(tmp: &Path, name: &str) -> anyhow::Result<Option<Work>> {
        let lock_path = tmp.join(format!("{name}.lock"));
        let lock = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&lock_path)
            .with_context(|| format!("cannot create {}", lock_path.display()))?;
        flock(lock.as_fd(), FlockOp::Exclusive)?;
        let still_ours = fs::symlink_metadata(&lock_path)
            .is_ok_and(|m| m.ino() == lock.metadata().map_or(0, |l| l.ino()));
        if !still_ours {
            return Ok(None);
        }
        let dir = tmp.join(name);
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(Some(Work {
            dir,
            lock_path,
            _lock: lock,
        }))
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        // The folder first: a folder whose lock file is gone is any sweeper's to remove.
        let _ = fs::remove_dir_all(&self.dir);
        let _ = fs::remove_file(&self.lock_path);
    }
}

/// The store's write lock (`ROOT/lock`), held until dropped.
pub(crate) struct WriteLock {
    _file: File,
}

/// Waits for, then takes, the store's write lock.
pub(crate) fn write_lock(root: &Path) -> anyhow::Result<WriteLock> {
    let path = root.join("lock");
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    flock(f.as_fd(), FlockOp::Exclusive)
        .with_context(|| format!("cannot lock {}", path.display()))?;
    Ok(WriteLock { _file: f })
}

/// Whether the lock file at `path` is held by a living process (a fresh open of it cannot
/// be locked). A file that is gone is not held.
pub(crate) fn held(path: &Path) -> io::Result<bool> {
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    match flock(f.as_fd(), FlockOp::ExclusiveNoWait) {
        Ok(()) => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(true),
        Err(e) => Err(e),
    }
}

/// Removes every tmp entry whose writer is gone: the names removed and their bytes.
/// Called with the write lock held.
pub(crate) fn sweep(tmp: &Path) -> anyhow::Result<(Vec<String>, u64)> {
    let mut removed = Vec::new();
    let mut bytes = 0;
    for entry in fs::read_dir(tmp)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let (dir, lock) = match name.strip_suffix(".lock") {
            Some(stem) => (tmp.join(stem), path.clone()),
            None => (path.clone(), tmp.join(format!("{name}.lock"))),
        };
        // A folder with its lock file is looked at through the lock file.
        if !name.ends_with(".lock") && lock.exists() || held(&lock)? {
            continue;
        }
        bytes += disk_bytes(&dir);
        remove_any(&dir)?;
        remove_any(&lock)?;
        removed.push(name.trim_end_matches(".lock").to_string());
    }
    removed.sort();
    removed.dedup();
    Ok((removed, bytes))
}

/// Removes a file or a whole folder (never following a link); nothing if it is gone.
pub(crate) fn remove_any(path: &Path) -> io::Result<()> {
    let result = match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) => Err(e),
    };
    match result {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// The bytes of the regular files below `path` (links are not followed).
pub(crate) fn disk_bytes(path: &Path) -> u64 {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return if meta.is_file() { meta.len() } else { 0 };
    }
    let Ok(entries) = fs::read_dir(path) else {
        return 0;
    };
    entries.flatten().map(|e| disk_bytes(&e.path())).sum()
}

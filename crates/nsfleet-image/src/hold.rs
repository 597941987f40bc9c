//! Holds: which process uses which images. A hold is a file `ROOT/holds/<hold>.json`
//! (who, pid, image ids) that its holder keeps flock(2)ed. The lock belongs to the open file
//! description, so it lasts as long as any process has the descriptor: a holder killed with
//! SIGKILL lets go of it, a forked child that inherits it keeps it. The lock is shared, so
//! that another process may take a hold over by opening and locking its file (a fleet's
//! supervisor takes over the hold `apply` made). A hold file nobody has locked is stale,
//! and `prune` removes it.

use crate::work::{held, remove_any};
use crate::ImageId;
use anyhow::Context;
use nsfleet_sys::{flock, FlockOp};
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A hold on images: they stay in the store while it lives, or while any process that has
/// its descriptor lives. Dropping it removes the hold file.
#[derive(Debug)]
pub struct Hold {
    file: Option<File>,
    path: PathBuf,
}

impl Hold {
    /// The hold file's descriptor: a process that inherits it (fork, or exec without
    /// close-on-exec) holds the images as long as it keeps it open.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file
            .as_ref()
            .expect("a live hold has its file")
            .as_fd()
    }

    /// The hold file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Gives the descriptor away without removing the hold file: the hold then lasts while
    /// some process keeps that descriptor (a child that inherited it, say), and the next
    /// `prune` after the last one closes it removes the file.
    pub fn into_fd(mut self) -> OwnedFd {
        self.file.take().expect("a live hold has its file").into()
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        // The file goes before the lock (closed just after): a reader never finds our file
        // unlocked while we still mean it.
        if self.file.is_some() {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// What a hold file says.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct HoldNote {
    pub who: String,
    pub pid: u32,
    pub ids: Vec<ImageId>,
}

impl std::fmt::Display for HoldNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (pid {})", self.who, self.pid)
    }
}

/// Makes a hold file in `dir`, locked, saying `note`. Called with the store's write lock
/// held, so that no `remove` or `prune` looks at holds while it is half made.
pub(crate) fn create(dir: &Path, note: &HoldNote) -> anyhow::Result<Hold> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let path = dir.join(format!("{}-{seq}.json", note.pid));
    // A file of a dead process of the same pid may be there: it is stale (unlocked).
    remove_any(&path)?;
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    flock(file.as_fd(), FlockOp::Shared)?;
    // Made before the write: if the write fails, dropping it removes the file.
    let hold = Hold {
        file: Some(file),
        path,
    };
    let mut f: &File = hold.file.as_ref().expect("just set");
    f.write_all(&serde_json::to_vec(note)?)?;
    Ok(hold)
}

/// The living holds (hold files some process keeps locked) and the stale ones' paths.
pub(crate) fn scan(dir: &Path) -> anyhow::Result<(Vec<HoldNote>, Vec<PathBuf>)> {
    let mut living = Vec::new();
    let mut stale = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if !held(&path)? {
            stale.push(path);
            continue;
        }
        // Holds are made and read with the write lock held, so a living hold's file is
        // whole here.
        let text = fs::read(&path).unwrap_or_default();
        if let Ok(note) = serde_json::from_slice::<HoldNote>(&text) {
            living.push(note);
        }
    }
    Ok((living, stale))
}

//! Unpacking one layer's tar into a fresh empty folder, in the form overlayfs takes as a
//! lower layer, without ever writing outside that folder.
//!
//! A layer is hostile input. Its entries are read one by one (tar's own `unpack` is not
//! used) and written with these rules: a path with a `..` is refused (a leading `/` or `./`
//! is dropped, as Docker does); every folder on an entry's way is looked at with lstat and
//! must be a real folder, never a symbolic link, so no write follows a link; files are
//! created with O_EXCL|O_NOFOLLOW; a hard link must point to an earlier entry of this
//! layer; device files are skipped (a node's /dev is nsfleet's to make, as rootless podman
//! skips them; the caller says how many). Owners, modes (setuid, setgid and sticky included: they
//! are set after the chown that clears them), times and the `security.capability` and
//! `user.*` extended attributes are kept.
//!
//! Whiteouts become overlayfs's: `.wh.NAME` a character device 0/0 named NAME,
//! `.wh..wh..opq` the xattr `trusted.overlay.opaque=y` on its folder.

use anyhow::{bail, Context};
use nsfleet_sys::{lsetxattr, make_char_device, make_fifo};
use std::collections::HashSet;
use std::fs::{self, FileTimes, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{lchown, DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, SystemTime};

pub(crate) const WHITEOUT: &str = ".wh.";
pub(crate) const OPAQUE: &str = ".wh..wh..opq";
/// The xattr, with the value `y`, that makes a folder opaque to overlayfs.
pub(crate) const OPAQUE_XATTR: &str = "trusted.overlay.opaque";

/// What a layer's unpacking made of it.
pub(crate) struct Unpacked {
    /// The bytes of its regular files.
    pub bytes: u64,
    /// The device files it held and that were skipped, as paths in the image.
    pub devices: Vec<String>,
}

/// Unpacks the tar stream `tar` into `dest`, which must not exist yet. Returns what it
/// made and the stream, for the caller to read to its end (its digest covers the whole
/// tar). Errors name `image`, `layer` and the entry.
pub(crate) fn unpack<R: Read>(
    tar: R,
    dest: &Path,
    image: &str,
    layer: &str,
) -> anyhow::Result<(Unpacked, R)> {
    fs::DirBuilder::new().mode(0o755).create(dest)?;
    let mut archive = tar::Archive::new(tar);
    let mut layer_state = Layer {
        dest,
        made: HashSet::new(),
        dirs: Vec::new(),
        bytes: 0,
        devices: Vec::new(),
    };
    let at = |path: &str| format!("image {image}, layer {layer}, entry {path:?}");
    for entry in archive
        .entries()
        .with_context(|| format!("image {image}, layer {layer}: not a tar"))?
    {
        let mut entry =
            entry.with_context(|| format!("image {image}, layer {layer}: damaged tar"))?;
        let path = entry
            .path()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        layer_state.entry(&mut entry).with_context(|| at(&path))?;
    }
    layer_state
        .set_dir_times()
        .with_context(|| format!("image {image}, layer {layer}"))?;
    let made = Unpacked {
        bytes: layer_state.bytes,
        devices: layer_state.devices,
    };
    Ok((made, archive.into_inner()))
}

struct Layer<'a> {
    dest: &'a Path,
    /// The entries (not folders) this layer has made, relative: what a hard link may name.
    made: HashSet<PathBuf>,
    /// Folders and their times, set once every entry is in (an entry added to a folder
    /// changes its time).
    dirs: Vec<(PathBuf, SystemTime)>,
    bytes: u64,
    /// The device files skipped.
    devices: Vec<String>,
}

/// What a header says of an entry's owner, mode and time.
struct Meta {
    uid: u32,
    gid: u32,
    mode: u32,
    mtime: SystemTime,
    xattrs: Vec<(String, Vec<u8>)>,
}

impl Meta {
    /// A chown's result to these owners. One the kernel refuses as an id the caller's
    /// user namespace does not have (EINVAL) is a user's without subordinate ids (their
    /// own id is all the namespace nsfleet unpacks in has), said with what to add.
    fn owns(&self, chowned: io::Result<()>) -> anyhow::Result<()> {
        match chowned {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                let user = std::env::var("USER").unwrap_or_else(|_| "USER".into());
                bail!("a file owned by uid {} gid {}, which a user without subordinate ids cannot give a file: nsfleet keeps a user's image files as the image's owners through /etc/subuid and /etc/subgid, which give {user} no range; add one (as root: usermod --add-subuids 100000-165535 --add-subgids 100000-165535 {user}, a range no other user has)", self.uid, self.gid)
            }
            r => Ok(r?),
        }
    }
}

impl Layer<'_> {
    fn entry<R: Read>(&mut self, e: &mut tar::Entry<R>) -> anyhow::Result<()> {
        let rel = relative(&e.path()?)?;
        let meta = meta(e)?;
        let name = rel.file_name().map(|n| n.to_string_lossy().into_owned());
        if let Some(name) = name.as_deref().filter(|n| n.starts_with(WHITEOUT)) {
            return self.whiteout(&rel, name);
        }
        use tar::EntryType as T;
        match e.header().entry_type() {
            T::Directory => self.dir(&rel, &meta),
            T::Regular | T::Continuous => self.file(&rel, &meta, e),
            T::Link => self.hard_link(&rel, e),
            T::Symlink => self.symlink(&rel, &meta, e),
            T::Fifo => self.fifo(&rel, &meta),
            T::Char | T::Block => {
                self.devices.push(rel.display().to_string());
                Ok(())
            }
            T::XGlobalHeader => Ok(()),
            other => bail!("entries of type {other:?} are not unpacked"),
        }
    }

    /// `.wh.NAME`: NAME is deleted from the layers below (a 0/0 character device);
    /// `.wh..wh..opq`: the folder hides everything below it (opaque).
    fn whiteout(&mut self, rel: &Path, name: &str) -> anyhow::Result<()> {
        let parent = rel.parent().unwrap_or(Path::new(""));
        if name == OPAQUE {
            self.parents(rel, true)?;
            let dir = self.dest.join(parent);
            return Ok(lsetxattr(&dir, OPAQUE_XATTR, b"y")?);
        }
        let hidden = &name[WHITEOUT.len()..];
        if hidden.starts_with(WHITEOUT) || hidden.is_empty() {
            // `.wh..wh.plnk` and the like: AUFS's own bookkeeping, nothing for overlayfs.
            return Ok(());
        }
        let target = parent.join(hidden);
        let path = self.prepare(&target, false)?;
        Ok(make_char_device(&path, 0, 0, 0)?)
    }

    fn dir(&mut self, rel: &Path, m: &Meta) -> anyhow::Result<()> {
        let path = if rel.as_os_str().is_empty() {
            self.dest.to_path_buf()
        } else {
            let path = self.prepare(rel, true)?;
            if !path.exists() {
                fs::DirBuilder::new().mode(0o700).create(&path)?;
            }
            path
        };
        m.owns(lchown(&path, Some(m.uid), Some(m.gid)))?;
        set_xattrs(&path, m)?;
        fs::set_permissions(&path, fs::Permissions::from_mode(m.mode))?;
        self.dirs.push((path, m.mtime));
        Ok(())
    }

    fn file<R: Read>(&mut self, rel: &Path, m: &Meta, data: &mut R) -> anyhow::Result<()> {
        let path = self.prepare(rel, false)?;
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)?;
        self.bytes += io::copy(data, &mut f)?;
        m.owns(std::os::unix::fs::fchown(&f, Some(m.uid), Some(m.gid)))?;
        set_xattrs(&path, m)?;
        f.set_permissions(fs::Permissions::from_mode(m.mode))?;
        f.set_times(FileTimes::new().set_accessed(m.mtime).set_modified(m.mtime))?;
        self.made.insert(rel.to_path_buf());
        Ok(())
    }

    fn hard_link<R: Read>(&mut self, rel: &Path, e: &tar::Entry<R>) -> anyhow::Result<()> {
        let Some(target) = e.link_name()? else {
            bail!("a hard link without a target");
        };
        let target = relative(&target).context("its target")?;
        if !self.made.contains(&target) {
            bail!(
                "a hard link to {}, which is not an earlier file of this layer",
                target.display()
            );
        }
        self.parents(&target, false)?;
        let path = self.prepare(rel, false)?;
        fs::hard_link(self.dest.join(&target), &path)?;
        self.made.insert(rel.to_path_buf());
        Ok(())
    }

    fn symlink<R: Read>(&mut self, rel: &Path, m: &Meta, e: &tar::Entry<R>) -> anyhow::Result<()> {
        let Some(target) = e.link_name()? else {
            bail!("a symbolic link without a target");
        };
        // Kept as it is, absolute or not: it resolves inside the node's root at run time,
        // and nothing here ever follows it.
        let path = self.prepare(rel, false)?;
        std::os::unix::fs::symlink(&target, &path)?;
        m.owns(lchown(&path, Some(m.uid), Some(m.gid)))?;
        self.made.insert(rel.to_path_buf());
        Ok(())
    }

    fn fifo(&mut self, rel: &Path, m: &Meta) -> anyhow::Result<()> {
        let path = self.prepare(rel, false)?;
        make_fifo(&path, 0o600)?;
        m.owns(lchown(&path, Some(m.uid), Some(m.gid)))?;
        fs::set_permissions(&path, fs::Permissions::from_mode(m.mode))?;
        self.made.insert(rel.to_path_buf());
        Ok(())
    }

    /// Makes the way to `rel` (its folders) and clears its place: an earlier entry there is
    /// removed, unless both are folders (they merge). Returns the path to write.
    fn prepare(&mut self, rel: &Path, is_dir: bool) -> anyhow::Result<PathBuf> {
        if rel.as_os_str().is_empty() {
            bail!("only a folder may be the layer's top");
        }
        self.parents(rel, true)?;
        let path = self.dest.join(rel);
        match fs::symlink_metadata(&path) {
            Ok(old) if old.is_dir() && is_dir => {}
            Ok(_) => {
                crate::work::remove_any(&path)?;
                self.made.retain(|p| !p.starts_with(rel));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        Ok(path)
    }

    /// Every folder above `rel`: made if missing and `make` (mode 0755, root's, as
    /// Docker makes them), refused if one is a symbolic link or not a folder.
    fn parents(&self, rel: &Path, make: bool) -> anyhow::Result<()> {
        let mut at = PathBuf::new();
        for c in rel.parent().into_iter().flat_map(|p| p.components()) {
            at.push(c);
            let path = self.dest.join(&at);
            match fs::symlink_metadata(&path) {
                Ok(m) if m.is_dir() => {}
                Ok(m) if m.file_type().is_symlink() => bail!(passes_link(&at)),
                Ok(_) => bail!("{} is not a folder", at.display()),
                Err(e) if e.kind() == io::ErrorKind::NotFound && make => {
                    fs::DirBuilder::new().mode(0o755).create(&path)?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Gives each folder its time from the tar, now that nothing more is added to it.
    fn set_dir_times(&self) -> anyhow::Result<()> {
        for (path, mtime) in &self.dirs {
            let dir = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
                .open(path)?;
            dir.set_times(FileTimes::new().set_accessed(*mtime).set_modified(*mtime))?;
        }
        Ok(())
    }
}

fn passes_link(at: &Path) -> String {
    format!(
        "its path passes through the symbolic link {}: refused (a write must never follow a link)",
        at.display()
    )
}

/// An entry's path relative to the layer's top: a leading `/` or `./` is dropped, a `..`
/// anywhere is refused. The top itself is the empty path.
fn relative(path: &Path) -> anyhow::Result<PathBuf> {
    let mut rel = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(s) => rel.push(s),
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir | Component::Prefix(_) => {
                bail!("{} has a `..` component: refused", path.display())
            }
        }
    }
    Ok(rel)
}

/// The owner, mode, time and kept extended attributes of an entry.
fn meta<R: Read>(e: &mut tar::Entry<R>) -> anyhow::Result<Meta> {
    let h = e.header();
    let id = |v: io::Result<u64>, what: &str| -> anyhow::Result<u32> {
        u32::try_from(v?).with_context(|| format!("its {what} is out of range"))
    };
    let mut m = Meta {
        uid: id(h.uid(), "uid")?,
        gid: id(h.gid(), "gid")?,
        mode: h.mode()? & 0o7777,
        mtime: SystemTime::UNIX_EPOCH + Duration::from_secs(h.mtime()?),
        xattrs: Vec::new(),
    };
    if let Some(pax) = e.pax_extensions()? {
        for ext in pax {
            let ext = ext?;
            let Some(name) = ext.key().ok().and_then(|k| k.strip_prefix("SCHILY.xattr.")) else {
                continue;
            };
            if kept_xattr(name) {
                m.xattrs
                    .push((name.to_string(), ext.value_bytes().to_vec()));
            }
        }
    }
    Ok(m)
}

/// Whether a layer keeps the extended attribute `name`: file capabilities and users'
/// own. Others (`security.selinux`, ACLs, `trusted.*`) are the host's business.
pub(crate) fn kept_xattr(name: &str) -> bool {
    name == "security.capability" || name.starts_with("user.")
}

fn set_xattrs(path: &Path, m: &Meta) -> anyhow::Result<()> {
    for (name, value) in &m.xattrs {
        lsetxattr(path, name, value).with_context(|| format!("cannot set xattr {name}"))?;
    }
    Ok(())
}

/// Whether `e` (any cause in its chain) is a full disk.
pub(crate) fn disk_full(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.raw_os_error() == Some(libc::ENOSPC))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_relative_and_never_go_up() {
        assert_eq!(relative(Path::new("./a/b")).unwrap(), PathBuf::from("a/b"));
        assert_eq!(
            relative(Path::new("/etc/x")).unwrap(),
            PathBuf::from("etc/x")
        );
        assert_eq!(relative(Path::new("./")).unwrap(), PathBuf::new());
        assert!(relative(Path::new("a/../../x")).is_err());
        assert!(relative(Path::new("../x")).is_err());
    }

    #[test]
    fn a_full_disk_is_told_apart_at_any_depth() {
        let full = anyhow::Error::new(io::Error::from_raw_os_error(libc::ENOSPC));
        assert!(disk_full(&full.context("entry x").context("image y")));
        let other = anyhow::Error::new(io::Error::from_raw_os_error(libc::EACCES));
        assert!(!disk_full(&other));
    }

    #[test]
    fn regular_files_are_files() {
        let dir =
            std::env::temp_dir().join(format!("nsfleet-test-image-unit-{}", std::process::id()));
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_size(2);
        h.set_mode(0o4755);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(0);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, "bin/su", &b"hi"[..]).unwrap();
        let tar = b.into_inner().unwrap();
        let result = unpack(&tar[..], &dir, "img", "sha256:x");
        let mode = fs::metadata(dir.join("bin/su")).map(|m| m.permissions().mode());
        let _ = fs::remove_dir_all(&dir);
        assert_eq!(result.unwrap().0.bytes, 2);
        assert_eq!(mode.unwrap() & 0o7777, 0o4755, "setuid kept after chown");
    }
}

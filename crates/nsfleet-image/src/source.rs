//! What `load` reads from: a folder (an OCI image layout, or a `docker save` unpacked) or a
//! tar of one, read in place. A tar is indexed once (each member's offset and size) and its
//! blobs are then read by seeking, never extracted.

use anyhow::{bail, Context};
use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};

/// The most bytes of JSON (manifests, indexes, configs) read whole into memory.
const MAX_JSON: u64 = 64 << 20;

pub(crate) enum Source {
    Dir(PathBuf),
    Tar {
        path: PathBuf,
        members: HashMap<String, Member>,
    },
}

pub(crate) enum Member {
    File { offset: u64, size: u64 },
    Link(String),
}

impl Source {
    pub fn open(archive: &Path) -> anyhow::Result<Source> {
        let meta = std::fs::metadata(archive)
            .with_context(|| format!("cannot read {}", archive.display()))?;
        if meta.is_dir() {
            return Ok(Source::Dir(archive.to_path_buf()));
        }
        let members = index(archive)?;
        Ok(Source::Tar {
            path: archive.to_path_buf(),
            members,
        })
    }

    /// Whether the archive has the file `path` (relative, `/`-separated).
    pub fn has(&self, path: &str) -> bool {
        match self {
            Source::Dir(d) => clean(path).is_some_and(|p| d.join(p).is_file()),
            Source::Tar { members, .. } => resolve(members, path).is_some(),
        }
    }

    /// A reader of the file `path`, and its size.
    pub fn open_file(&self, path: &str) -> anyhow::Result<(Box<dyn Read>, u64)> {
        let Some(rel) = clean(path) else {
            bail!("the archive names {path:?}, a path outside it");
        };
        match self {
            Source::Dir(d) => {
                let f = File::open(d.join(&rel))
                    .with_context(|| format!("the archive has no readable {rel}"))?;
                let size = f.metadata()?.len();
                Ok((Box::new(f), size))
            }
            Source::Tar { path: tar, members } => {
                let Some((offset, size)) = resolve(members, &rel) else {
                    bail!("the archive has no file {rel}");
                };
                let mut f = File::open(tar)?;
                f.seek(SeekFrom::Start(offset))?;
                Ok((Box::new(f.take(size)), size))
            }
        }
    }

    /// The file `path`, whole (a manifest, an index or a config: JSON of bounded size).
    pub fn read(&self, path: &str) -> anyhow::Result<Vec<u8>> {
        let (r, size) = self.open_file(path)?;
        if size > MAX_JSON {
            bail!("{path} is {size} bytes: too big for a manifest or config");
        }
        let mut bytes = Vec::with_capacity(size as usize);
        r.take(MAX_JSON).read_to_end(&mut bytes)?;
        Ok(bytes)
    }
}

/// Every regular file and symbolic link of the tar at `archive`, by clean path.
fn index(archive: &Path) -> anyhow::Result<HashMap<String, Member>> {
    let mut f =
        File::open(archive).with_context(|| format!("cannot read {}", archive.display()))?;
    let mut magic = [0u8; 4];
    let n = f.read(&mut magic)?;
    if n >= 2 && magic[..2] == [0x1f, 0x8b] || n == 4 && magic == [0x28, 0xb5, 0x2f, 0xfd] {
        bail!(
            "{} is compressed: decompress it first (gunzip, unzstd); nsfleet reads a plain tar",
            archive.display()
        );
    }
    f.rewind()?;
    let mut tar = tar::Archive::new(f);
    let mut members = HashMap::new();
    let not_tar = || {
        format!(
            "{} is neither an image folder nor a tar archive",
            archive.display()
        )
    };
    // The tar reader's own words for a file that is no tar quote its bytes: not said.
    for entry in tar
        .entries_with_seek()
        .map_err(|_| anyhow::anyhow!(not_tar()))?
    {
        let entry = entry.map_err(|_| anyhow::anyhow!(not_tar()))?;
        let Some(path) = entry.path().ok().and_then(|p| clean(&p.to_string_lossy())) else {
            continue;
        };
        let member = match entry.header().entry_type() {
            tar::EntryType::Regular | tar::EntryType::Continuous => Member::File {
                offset: entry.raw_file_position(),
                size: entry.size(),
            },
            tar::EntryType::Symlink | tar::EntryType::Link => {
                let Some(target) = entry.link_name()? else {
                    continue;
                };
                let target = target.to_string_lossy().into_owned();
                Member::Link(link_target(&path, &target, entry.header().entry_type()))
            }
            _ => continue,
        };
        members.insert(path, member);
    }
    if members.is_empty() {
        bail!("{}", not_tar());
    }
    Ok(members)
}

/// Where a link at `path` points, as a path of the archive: a symbolic link's target is
/// relative to its folder, a hard link's to the archive's top.
fn link_target(path: &str, target: &str, kind: tar::EntryType) -> String {
    if kind == tar::EntryType::Link || target.starts_with('/') {
        return target.trim_start_matches('/').to_string();
    }
    match path.rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/{target}"),
        None => target.to_string(),
    }
}

/// The offset and size of the file `path` names, following links inside the archive (a
/// few, never out of it).
fn resolve(members: &HashMap<String, Member>, path: &str) -> Option<(u64, u64)> {
    let mut path = collapse(path)?;
    for _ in 0..8 {
        match members.get(&path)? {
            Member::File { offset, size } => return Some((*offset, *size)),
            Member::Link(target) => path = collapse(target)?,
        }
    }
    None
}

/// `path` relative to the archive's top, `/`-separated, without `.` components; None if it
/// is empty or has a `..`.
pub(crate) fn clean(path: &str) -> Option<String> {
    let mut parts = Vec::new();
    for c in Path::new(path).components() {
        match c {
            Component::Normal(s) => parts.push(s.to_str()?),
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Like `clean`, but a `..` goes up a folder (a link's target), never above the top.
fn collapse(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for c in Path::new(path).components() {
        match c {
            Component::Normal(s) => parts.push(s.to_str()?),
            Component::ParentDir => {
                parts.pop()?;
            }
            _ => {}
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_archive() {
        assert_eq!(
            clean("./blobs/sha256/ab").as_deref(),
            Some("blobs/sha256/ab")
        );
        assert_eq!(clean("/manifest.json").as_deref(), Some("manifest.json"));
        assert_eq!(clean("../x"), None);
        assert_eq!(clean("a/../../x"), None);
        assert_eq!(collapse("a/../b/c").as_deref(), Some("b/c"));
        assert_eq!(collapse("../b"), None);
    }

    #[test]
    fn links_point_from_their_folder() {
        let sym = tar::EntryType::Symlink;
        assert_eq!(
            link_target("a/layer.tar", "../b/layer.tar", sym),
            "a/../b/layer.tar"
        );
        assert_eq!(link_target("a/layer.tar", "/b", sym), "b");
        assert_eq!(link_target("a/x", "b/y", tar::EntryType::Link), "b/y");
    }
}

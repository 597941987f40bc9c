//! The store: `load` (check everything, unpack what is new, then commit under the write
//! lock), `list` and `find` (no lock: every file they read is replaced whole), `remove`,
//! `prune` and `hold`.
//!
//! A load does its slow work (reading, hashing, unpacking) in its tmp folder without the
//! write lock, then takes it to commit: layers renamed into `layers/`, the image records,
//! names.json. A layer it found already in the store may have been removed meanwhile by a
//! `remove` or `prune`: the commit unpacks it then.

use crate::digest::{self, Meter};
use crate::formats::{self, Blob, Found};
use crate::hold::{self, Hold, HoldNote};
use crate::records::{self, Names, StoredImage};
use crate::reference::{check_platform, id_prefix, normalize, repository_of};
use crate::source::Source;
use crate::unpack::{disk_full, unpack};
use crate::work::{disk_bytes, remove_any, sweep, write_lock, Work};
use crate::{Image, ImageId, ImageRecord, Pruned, Removed, RunConfig};
use anyhow::{anyhow, bail, Context};
use oci_spec::image::ImageConfiguration;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs;
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// The default store, when neither `--store` nor `$NSFLEET_IMAGES` names one.
pub const DEFAULT_ROOT: &str = "/var/lib/nsfleet/images";

/// nsfleet's image store at a root folder (see the crate's documentation for its layout).
#[derive(Clone, Debug)]
pub struct Store {
    root: PathBuf,
}

/// An image of an archive, checked and with its new layers unpacked, not yet committed.
struct Prepared<'a> {
    found: &'a Found,
    label: String,
    names: Vec<String>,
    image: StoredImage,
}

impl Store {
    /// The default root: $NSFLEET_IMAGES if set; else root's /var/lib/nsfleet/images, or
    /// a user's `$XDG_DATA_HOME/nsfleet/images` (`~/.local/share/nsfleet/images`
    /// without it), also from inside a fleet's user namespace, where the user is root.
    pub fn default_root() -> PathBuf {
        match std::env::var_os("NSFLEET_IMAGES") {
            Some(dir) if !dir.is_empty() => return PathBuf::from(dir),
            _ => {}
        }
        let hosts_root = nsfleet_sys::is_host_root();
        let absolute = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
        let data = (std::env::var_os("XDG_DATA_HOME").and_then(absolute)).or_else(|| {
            let home = std::env::var_os("HOME").and_then(absolute)?;
            Some(home.join(".local/share"))
        });
        match data {
            Some(data) if !hosts_root => data.join("nsfleet/images"),
            _ => PathBuf::from(DEFAULT_ROOT),
        }
    }

    /// Opens (creating its folders, mode 0700) the store at `root`.
    pub fn open(root: &Path) -> anyhow::Result<Store> {
        let mut dirs = fs::DirBuilder::new();
        dirs.recursive(true).mode(0o700);
        for sub in ["", "layers", "images", "tmp", "holds"] {
            let dir = root.join(sub);
            dirs.create(&dir)
                .with_context(|| format!("cannot create the image store's {}", dir.display()))?;
        }
        Ok(Store {
            root: root.to_path_buf(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub(crate) fn tmp(&self) -> PathBuf {
        self.root.join("tmp")
    }

    fn holds(&self) -> PathBuf {
        self.root.join("holds")
    }

    pub(crate) fn layer_dir(&self, hex: &str) -> PathBuf {
        self.root.join("layers").join(hex)
    }

    /// Loads every image of a `docker save`/`podman save` archive (legacy docker-archive
    /// with manifest.json, RepoTags, `<id>/layer.tar` or `blobs/sha256/...` as Docker 25+
    /// writes), an OCI image layout folder, or an OCI layout tar. `name` names the image
    /// when the archive names none (an OCI layout often gives only a tag: `--name alpine`
    /// then makes it `alpine:<that tag>`). All or nothing: an image that fails its checks
    /// leaves the store as it was. `progress` gets a line per layer.
    pub fn load(
        &self,
        archive: &Path,
        name: Option<&str>,
        progress: &mut dyn FnMut(&str),
    ) -> anyhow::Result<Vec<ImageRecord>> {
        let source = Source::open(archive)?;
        let found = formats::read(&source).with_context(|| archive.display().to_string())?;
        if found.is_empty() {
            bail!("{} holds no image", archive.display());
        }
        let mut names = archive_names(&found)?;
        name_the_unnamed(&found, &mut names, name, progress)?;
        let work = Work::new(&self.tmp())?;
        self.ingest(&source, &found, names, &work, progress)
    }

    /// Puts images into the store from their blobs in `source` (an archive for `load`, the
    /// folder a pull fetched them into for `pull`): every config and layer checked, the
    /// layers the store lacks unpacked into `work`, then all committed under the write
    /// lock. All or nothing. Layers already in the store need no blob in `source`.
    pub(crate) fn ingest(
        &self,
        source: &Source,
        found: &[Found],
        names: Vec<Vec<String>>,
        work: &Work,
        progress: &mut dyn FnMut(&str),
    ) -> anyhow::Result<Vec<ImageRecord>> {
        let mut unpacked = HashMap::new();
        let mut prepared = Vec::new();
        for (f, names) in found.iter().zip(names) {
            let p = self.prepare(source, f, names, work, &mut unpacked, progress)?;
            prepared.push(p);
        }
        let _lock = write_lock(&self.root)?;
        sweep(&self.tmp())?;
        let mut table = records::read_names(&self.root)?;
        let mut loaded = Vec::new();
        for p in &prepared {
            self.commit(source, p, work, &mut unpacked, &mut table)?;
            progress(&format!("stored {} ({})", p.label, p.image.id.short()));
            loaded.push(p.image.id.clone());
        }
        records::write_names(&self.root, work, &table)?;
        let records = loaded.iter().map(|id| self.record(id, &table));
        records.collect()
    }

    /// Reads and checks an image's config, and unpacks into `work` each of its layers that
    /// the store lacks (recorded in `unpacked`, diff_id hex -> folder and bytes).
    fn prepare<'a>(
        &self,
        source: &Source,
        found: &'a Found,
        names: Vec<String>,
        work: &Work,
        unpacked: &mut HashMap<String, (PathBuf, u64)>,
        progress: &mut dyn FnMut(&str),
    ) -> anyhow::Result<Prepared<'a>> {
        let bytes = source.read(&found.config.path)?;
        let id = ImageId(digest::of_bytes(&bytes));
        let label = names.first().cloned().unwrap_or_else(|| id.0.clone());
        check_blob(&label, "its config", found.config.digest.as_deref(), &id.0)?;
        let config = ImageConfiguration::from_reader(&bytes[..])
            .with_context(|| format!("image {label}: its config is not an OCI image config"))?;
        let (arch, os) = (config.architecture().to_string(), config.os().to_string());
        check_platform(&label, &arch, &os)?;
        let diff_ids = config.rootfs().diff_ids().clone();
        if diff_ids.len() != found.layers.len() {
            bail!(
                "image {label}: its manifest has {} layers, its config {}",
                found.layers.len(),
                diff_ids.len()
            );
        }
        let n = diff_ids.len();
        // The device files its layers held, skipped (said once, for the whole image).
        let mut devices = Vec::new();
        for (i, (diff_id, blob)) in diff_ids.iter().zip(&found.layers).enumerate() {
            let hex = digest::hex_of(diff_id, &format!("image {label}"))?;
            let step = format!("{label}: layer {} of {n} ({})", i + 1, &hex[..12]);
            if unpacked.contains_key(hex) || self.layer_dir(hex).exists() {
                progress(&format!("{step}: already in the store"));
                continue;
            }
            let (done, skipped) =
                self.unpack_layer(source, blob, diff_id, work, &label, &step, progress)?;
            devices.extend(skipped);
            unpacked.insert(hex.to_string(), done);
        }
        if let Some(first) = devices.first() {
            progress(&format!(
                "warning: image {label}: {} device file{} skipped ({first}{}): a node's /dev is made by nsfleet",
                devices.len(),
                if devices.len() > 1 { "s" } else { "" },
                if devices.len() > 1 { ", ..." } else { "" }
            ));
        }
        let image = StoredImage {
            id,
            architecture: arch,
            os,
            layers: diff_ids,
            size: 0,
            created_unix: config.created().as_deref().and_then(records::unix_time),
            run: run_config(&config),
        };
        Ok(Prepared {
            found,
            label,
            names,
            image,
        })
    }

    /// Unpacks one layer blob into `work/<diff-id hex>`, checking the blob's digest (when
    /// the format gives one) and the uncompressed tar's against `diff_id`. Its folder and
    /// bytes, and the device files it skipped.
    #[allow(clippy::too_many_arguments)]
    fn unpack_layer(
        &self,
        source: &Source,
        blob: &Blob,
        diff_id: &str,
        work: &Work,
        label: &str,
        step: &str,
        progress: &mut dyn FnMut(&str),
    ) -> anyhow::Result<((PathBuf, u64), Vec<String>)> {
        let hex = digest::hex_of(diff_id, label)?;
        let dest = work.path().join(hex);
        let (reader, size) = source.open_file(&blob.path)?;
        progress(&format!("{step}: unpacking {}", human_bytes(size)));
        let packed = Meter::default();
        let plain = Meter::default();
        let stream = Decoder::new(packed.reader(reader))?;
        let result =
            unpack(plain.reader(stream), &dest, label, diff_id).and_then(|(made, rest)| {
                // The digests cover each stream to its end: what follows the tar's last entry
                // (its end blocks), and what follows the compressed stream.
                let mut rest = rest;
                io::copy(&mut rest, &mut io::sink())?;
                io::copy(&mut rest.into_inner().into_inner()?, &mut io::sink())?;
                Ok(made)
            });
        let made = result.map_err(|e| {
            let _ = remove_any(&dest);
            if disk_full(&e) {
                anyhow!(
                    "image {label}, layer {diff_id}: the disk under {} is full",
                    self.root.display()
                )
            } else {
                e
            }
        })?;
        let checked = check_blob(
            label,
            &format!("layer blob {}", blob.path),
            blob.digest.as_deref(),
            &packed.digest(),
        )
        .and_then(|()| {
            check_blob(
                label,
                &format!("layer {diff_id}"),
                Some(diff_id),
                &plain.digest(),
            )
        });
        if let Err(e) = checked {
            let _ = remove_any(&dest);
            return Err(e);
        }
        progress(&format!("{step}: {} unpacked", human_bytes(made.bytes)));
        Ok(((dest, made.bytes), made.devices))
    }

    /// Puts a prepared image in the store: its layers into `layers/` (unpacking any that
    /// went away since `prepare` found it), its record, its names. With the write lock.
    fn commit(
        &self,
        source: &Source,
        p: &Prepared,
        work: &Work,
        unpacked: &mut HashMap<String, (PathBuf, u64)>,
        names: &mut Names,
    ) -> anyhow::Result<()> {
        let mut size = 0;
        let mut seen = HashSet::new();
        for (diff_id, blob) in p.image.layers.iter().zip(&p.found.layers) {
            let hex = digest::hex_of(diff_id, &p.label)?;
            let place = self.layer_dir(hex);
            if !seen.insert(hex) {
                continue;
            }
            if place.exists() {
                size += unpacked
                    .get(hex)
                    .map_or_else(|| disk_bytes(&place), |u| u.1);
                continue;
            }
            if !unpacked.contains_key(hex) {
                if !source.has(&blob.path) {
                    // A pull fetches only the layers the store has not: this one was
                    // removed (`rm`, `prune`) while the image was being added.
                    bail!(
                        "image {}: its layer {diff_id} was removed from the store meanwhile: add the image again",
                        p.label
                    );
                }
                let step = format!("{}: layer {}", p.label, &hex[..12]);
                // Its device files were said when `prepare` unpacked it first.
                let (done, _) =
                    self.unpack_layer(source, blob, diff_id, work, &p.label, &step, &mut |_| {})?;
                unpacked.insert(hex.to_string(), done);
            }
            let (dir, bytes) = &unpacked[hex];
            fs::rename(dir, &place)
                .with_context(|| format!("cannot move a layer into {}", place.display()))?;
            size += bytes;
        }
        let image = StoredImage {
            size,
            ..p.image.clone()
        };
        records::write_image(&self.root, work, &image)?;
        for n in &p.names {
            names.insert(n.clone(), image.id.clone());
        }
        Ok(())
    }

    /// Every image, sorted by name (images without a name last, by id).
    pub fn list(&self) -> anyhow::Result<Vec<ImageRecord>> {
        let names = records::read_names(&self.root)?;
        let mut list: Vec<ImageRecord> = records::all_images(&self.root)?
            .into_iter()
            .map(|i| i.record(names_of(&names, &i.id)))
            .collect();
        list.sort_by(|a, b| {
            let key =
                |r: &ImageRecord| (r.names.is_empty(), r.names.first().cloned(), r.id.clone());
            key(a).cmp(&key(b))
        });
        Ok(list)
    }

    pub(crate) fn record(&self, id: &ImageId, names: &Names) -> anyhow::Result<ImageRecord> {
        let image = records::read_image(&self.root, id.hex())?
            .ok_or_else(|| anyhow!("image {id} vanished from the store"))?;
        Ok(image.record(names_of(names, id)))
    }

    /// The image a reference names (normalized as Docker does: `alpine` is
    /// `docker.io/library/alpine:latest`), or an image id or unique id prefix
    /// (`sha256:abc…` or `abc…`, at least 4 hex digits). Ok(None) when absent.
    pub fn find(&self, reference: &str) -> anyhow::Result<Option<Image>> {
        let Some((id, name)) = self.resolve(reference, &records::read_names(&self.root)?)? else {
            return Ok(None);
        };
        let Some(stored) = records::read_image(&self.root, id.hex())? else {
            return Ok(None);
        };
        Ok(Some(Image {
            id,
            name,
            layers: self.layer_dirs(&stored)?,
            run: stored.run,
        }))
    }

    /// The image `reference` names and the name it was found by (the full id when found
    /// by id).
    pub(crate) fn resolve(
        &self,
        reference: &str,
        names: &Names,
    ) -> anyhow::Result<Option<(ImageId, String)>> {
        let explicit_id = reference.starts_with("sha256:");
        let name = if explicit_id {
            None
        } else {
            normalize(reference).ok()
        };
        if let Some(id) = name.as_ref().and_then(|n| names.get(n)) {
            return Ok(Some((id.clone(), name.expect("found by it"))));
        }
        let Some(prefix) = id_prefix(reference) else {
            // Neither a name of the store nor an id: an unparseable reference says why.
            normalize(reference)?;
            return Ok(None);
        };
        let mut matches: Vec<ImageId> = records::all_images(&self.root)?
            .into_iter()
            .map(|i| i.id)
            .filter(|id| id.hex().starts_with(prefix))
            .collect();
        match matches.len() {
            0 => Ok(None),
            1 => {
                let id = matches.remove(0);
                Ok(Some((id.clone(), id.0)))
            }
            n => bail!("{reference} is the start of {n} image ids: give more of it"),
        }
    }

    /// The image's layer folders, lowest first, each once (at its upper place).
    pub(crate) fn layer_dirs(&self, image: &StoredImage) -> anyhow::Result<Vec<PathBuf>> {
        let mut dirs: Vec<PathBuf> = Vec::new();
        for diff_id in image.layers.iter().rev() {
            let dir = self.layer_dir(digest::hex_of(diff_id, "a stored image")?);
            if !dir.is_dir() {
                bail!(
                    "image {}: its layer {diff_id} is missing from the store",
                    image.id
                );
            }
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
        dirs.reverse();
        Ok(dirs)
    }

    /// Removes a name (and the image once it has no name left), or with an id every name
    /// and the image; then the layers no image uses any more. Refused, naming the holder,
    /// when a living hold uses the image.
    pub fn remove(&self, reference: &str) -> anyhow::Result<Removed> {
        let _lock = write_lock(&self.root)?;
        let work = Work::new(&self.tmp())?;
        sweep(&self.tmp())?;
        let mut names = records::read_names(&self.root)?;
        let Some((id, by)) = self.resolve(reference, &names)? else {
            bail!(
                "no image {reference} in {} (`nsfleet image ls` lists them)",
                self.root.display()
            );
        };
        let (living, _) = hold::scan(&self.holds())?;
        if let Some(h) = living.iter().find(|h| h.ids.contains(&id)) {
            bail!(
                "image {reference} ({}) is in use by {h}: it stays until that ends",
                id.short()
            );
        }
        let mut removed = Removed::default();
        if by == id.0 {
            removed.names = names_of(&names, &id);
        } else {
            removed.names = vec![by];
        }
        names.retain(|n, _| !removed.names.contains(n));
        records::write_names(&self.root, &work, &names)?;
        if names.values().all(|i| *i != id) {
            remove_any(&self.root.join("images").join(format!("{}.json", id.hex())))?;
            removed.images.push(id);
        }
        (removed.layers, removed.bytes_freed) = self.drop_unused_layers(&work)?;
        Ok(removed)
    }

    /// Removes images without a name, layers no image uses, unfinished work (tmp entries
    /// whose writer is gone), the kept bytes of layer receives no receiver holds, and stale
    /// holds; with `all`, also every image that no living hold uses. Never removes what a
    /// living hold uses.
    pub fn prune(&self, all: bool) -> anyhow::Result<Pruned> {
        let _lock = write_lock(&self.root)?;
        let mut pruned = Pruned::default();
        (pruned.unfinished, pruned.bytes_freed) = sweep(&self.tmp())?;
        let (partials, partial_bytes) = self.drop_partials()?;
        pruned.partials = partials;
        pruned.bytes_freed += partial_bytes;
        let work = Work::new(&self.tmp())?;
        let (living, stale) = hold::scan(&self.holds())?;
        for path in &stale {
            remove_any(path)?;
        }
        pruned.stale_holds = stale.len();
        let held: HashSet<&ImageId> = living.iter().flat_map(|h| &h.ids).collect();
        let mut names = records::read_names(&self.root)?;
        for image in records::all_images(&self.root)? {
            let named = names.values().any(|i| *i == image.id);
            if held.contains(&image.id) || (named && !all) {
                continue;
            }
            pruned.names.extend(names_of(&names, &image.id));
            names.retain(|_, i| *i != image.id);
            remove_any(
                &self
                    .root
                    .join("images")
                    .join(format!("{}.json", image.id.hex())),
            )?;
            pruned.images.push(image.id);
        }
        records::write_names(&self.root, &work, &names)?;
        let (layers, bytes) = self.drop_unused_layers(&work)?;
        pruned.layers = layers;
        pruned.bytes_freed += bytes;
        Ok(pruned)
    }

    /// Deletes every layer no image uses: moved into `work` first (a rename), so that a
    /// deletion cut short never leaves half a layer in `layers/`. With the write lock.
    fn drop_unused_layers(&self, work: &Work) -> anyhow::Result<(Vec<String>, u64)> {
        let used: BTreeSet<String> = records::all_images(&self.root)?
            .into_iter()
            .flat_map(|i| i.layers)
            .collect();
        let mut dropped = Vec::new();
        let mut bytes = 0;
        for entry in fs::read_dir(self.root.join("layers"))? {
            let hex = entry?.file_name().to_string_lossy().into_owned();
            let diff_id = format!("sha256:{hex}");
            // Only what the store made: a name that is no digest is left alone.
            if digest::hex_of(&diff_id, "").is_err() || used.contains(&diff_id) {
                continue;
            }
            let trash = work.path().join(format!("gone-{hex}"));
            fs::rename(self.layer_dir(&hex), &trash)?;
            bytes += disk_bytes(&trash);
            remove_any(&trash)?;
            dropped.push(diff_id);
        }
        dropped.sort();
        Ok((dropped, bytes))
    }

    /// Records that the calling process uses these images for as long as the returned
    /// `Hold` lives, or any process that has its descriptor (a forked child inherits it):
    /// a file under `ROOT/holds/` locked with flock(2), so that a process killed with
    /// SIGKILL lets go of it. `who` names the holder in messages (`fleet lab`).
    pub fn hold(&self, who: &str, ids: &[ImageId]) -> anyhow::Result<Hold> {
        let _lock = write_lock(&self.root)?;
        for id in ids {
            if records::read_image(&self.root, id.hex())?.is_none() {
                bail!("no image {id} in {}", self.root.display());
            }
        }
        let note = HoldNote {
            who: who.to_string(),
            pid: std::process::id(),
            ids: ids.to_vec(),
        };
        hold::create(&self.holds(), &note)
    }
}

/// The names the archive gives each image, normalized.
fn archive_names(found: &[Found]) -> anyhow::Result<Vec<Vec<String>>> {
    let normalize_all = |f: &Found| -> anyhow::Result<Vec<String>> {
        let names = f
            .names
            .iter()
            .map(|n| normalize(n).context("a name the archive gives"));
        names.collect()
    };
    found.iter().map(normalize_all).collect()
}

/// Gives `name` to the one image the archive names not (with the archive's tag when
/// `name` has none). Images left without a name are loaded all the same, findable by id.
fn name_the_unnamed(
    found: &[Found],
    names: &mut [Vec<String>],
    name: Option<&str>,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<()> {
    let unnamed: Vec<usize> = (0..found.len()).filter(|&i| names[i].is_empty()).collect();
    match (name, unnamed.as_slice()) {
        (Some(_), []) => progress("the archive names its images: --name is not used"),
        (Some(name), [i]) => {
            let (repository, tagged) = repository_of(name)?;
            names[*i] = match &found[*i].tag {
                Some(tag) if !tagged => vec![normalize(&format!("{repository}:{tag}"))?],
                _ => vec![normalize(name)?],
            };
        }
        (Some(_), several) => bail!(
            "the archive has {} images without a name: --name can name only one",
            several.len()
        ),
        (None, _) => {
            for &i in &unnamed {
                let tag = found[i]
                    .tag
                    .as_deref()
                    .map(|t| format!(" (tag {t})"))
                    .unwrap_or_default();
                progress(&format!(
                    "an image has no name{tag}: give it one with --name, or find it by id"
                ));
            }
        }
    }
    Ok(())
}

pub(crate) fn names_of(names: &Names, id: &ImageId) -> Vec<String> {
    names
        .iter()
        .filter(|(_, i)| *i == id)
        .map(|(n, _)| n.clone())
        .collect()
}

/// Refuses a blob whose digest `got` is not the one the archive gave (`want`, if any).
fn check_blob(label: &str, what: &str, want: Option<&str>, got: &str) -> anyhow::Result<()> {
    match want {
        Some(want) if want != got => bail!(
            "image {label}: {what} has digest {got}, not {want}: the archive is damaged or was altered"
        ),
        _ => Ok(()),
    }
}

fn run_config(config: &ImageConfiguration) -> RunConfig {
    let Some(c) = config.config() else {
        return RunConfig::default();
    };
    RunConfig {
        entrypoint: c.entrypoint().clone().unwrap_or_default(),
        cmd: c.cmd().clone().unwrap_or_default(),
        env: c.env().clone().unwrap_or_default(),
        workdir: c.working_dir().clone().filter(|w| !w.is_empty()),
        user: c.user().clone().filter(|u| !u.is_empty()),
    }
}

/// Bytes for people: `3.4 MB`.
pub(crate) fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit < UNITS.len() - 1 {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A layer blob's stream, decompressed as its first bytes say: gzip (1f 8b), zstd
/// (28 b5 2f fd), or a plain tar.
enum Decoder<R: Read> {
    Plain(BufReader<R>),
    /// Boxed: zlib-rs's state is large, and the other variants small.
    Gzip(Box<flate2::bufread::MultiGzDecoder<BufReader<R>>>),
    Zstd(zstd::stream::read::Decoder<'static, BufReader<R>>),
}

impl<R: Read> Decoder<R> {
    fn new(inner: R) -> io::Result<Decoder<R>> {
        let mut buffered = BufReader::with_capacity(1 << 16, inner);
        let magic = buffered.fill_buf()?;
        Ok(if magic.starts_with(&[0x1f, 0x8b]) {
            Decoder::Gzip(Box::new(flate2::bufread::MultiGzDecoder::new(buffered)))
        } else if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Decoder::Zstd(zstd::stream::read::Decoder::with_buffer(buffered)?)
        } else {
            Decoder::Plain(buffered)
        })
    }

    /// The compressed stream, for reading what the decoder left of it.
    fn into_inner(self) -> io::Result<BufReader<R>> {
        Ok(match self {
            Decoder::Plain(r) => r,
            Decoder::Gzip(d) => d.into_inner(),
            Decoder::Zstd(d) => d.finish(),
        })
    }
}

impl<R: Read> Read for Decoder<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Decoder::Plain(r) => r.read(buf),
            Decoder::Gzip(d) => d.read(buf),
            Decoder::Zstd(d) => d.read(buf),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_for_people() {
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(3_400_000), "3.4 MB");
    }
}

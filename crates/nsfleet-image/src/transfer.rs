//! Moving an image from one store to another through a byte stream that may drop (a
//! `kubectl exec` pipe): the sender says what the image is (`portable`) and makes each
//! layer a stream (`export_layer`, `write_from`); the receiver says which layers it has
//! and how much of a dropped stream it kept (`receiving`), takes the rest
//! (`receive_layer`), and records the image once every layer is in (`adopt`).
//!
//! A layer's stream is an uncompressed tar in OCI layer form, made anew from its folder
//! each time and the same bytes each time (entries sorted by path, only what the folder
//! holds in them), so that a sender resumes a stream at any byte by making it again. A
//! receiver never trusts the bytes it kept: it hashes them again before appending, checks
//! the whole stream's digest and size before unpacking anything, and unpacks as it unpacks
//! any layer (`unpack`: hostile input). This module never writes outside `ROOT/partial`,
//! `ROOT/tmp` and, under the write lock, `layers/`, `images/` and names.json; it never
//! resumes a stream whose bytes failed a check.
//!
//! A stream's digest checks the transport, not the layer: the receiver cannot recompute a
//! diff_id (the digest of the tar the layer was first loaded from, which no store keeps),
//! so it takes the layer's diff_id on its sender's word.

use crate::digest;
use crate::records::{self, StoredImage};
use crate::reference::{check_platform, normalize};
use crate::store::{human_bytes, names_of};
use crate::unpack::{disk_full, kept_xattr, unpack, OPAQUE, OPAQUE_XATTR, WHITEOUT};
use crate::work::{disk_bytes, remove_any, write_lock, Work};
use crate::{ImageId, ImageRecord, RunConfig, Store};
use anyhow::{anyhow, bail, Context};
use nsfleet_sys::{flock, lgetxattr, llistxattr, FlockOp};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Seek, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// An image as another store needs it to adopt it: its record and process fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Portable {
    pub id: ImageId,
    /// The names to give it on arrival, normalized: all its names in the sender's store.
    pub names: Vec<String>,
    pub architecture: String,
    pub os: String,
    /// Its layers' diff_ids, lowest first (as `ImageRecord::layers`).
    pub layers: Vec<String>,
    pub created_unix: Option<u64>,
    pub run: RunConfig,
}

/// One stored layer as a stream: a deterministic tar of its folder.
#[derive(Clone, Debug)]
pub struct LayerExport {
    diff_id: String,
    dir: PathBuf,
    digest: String,
    size: u64,
}

/// Where a receiver of a layer stands before any byte is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Receiving {
    /// The store has the layer: send nothing.
    Present,
    /// Send the stream from this byte: the bytes before it are kept from an earlier try
    /// that dropped (0 when none).
    From(u64),
}

/// How errors of `unpack` name the image of a received layer (none is known yet).
const RECEIVED: &str = "from another store";

/// The largest value of an extended attribute (Linux's XATTR_SIZE_MAX).
const XATTR_MAX: usize = 65536;

impl LayerExport {
    pub fn diff_id(&self) -> &str {
        &self.diff_id
    }

    /// `sha256:<hex>` of the whole stream.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Bytes of the whole stream.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Writes the stream from byte `offset` (0..=size) to its end: the stream is made
    /// again and its first `offset` bytes skipped. Errors if what it made is not the
    /// stream `export_layer` measured (the folder changed).
    pub fn write_from(&self, offset: u64, out: &mut dyn Write) -> anyhow::Result<()> {
        if offset > self.size {
            bail!(
                "layer {}: its stream has {} bytes, it cannot start at byte {offset}",
                self.diff_id,
                self.size
            );
        }
        let out = BufWriter::with_capacity(1 << 16, out);
        let tally = write_stream(&self.dir, &self.diff_id, Tally::new(out, offset))?;
        let (digest, size, mut out) = tally.finish();
        out.flush()
            .with_context(|| format!("layer {}: cannot send its stream", self.diff_id))?;
        if (digest.as_str(), size) != (self.digest.as_str(), self.size) {
            bail!(
                "layer {}: its stream is now {digest} ({size} bytes), not the {} ({} bytes) it was when exported: its folder {} changed",
                self.diff_id,
                self.digest,
                self.size,
                self.dir.display()
            );
        }
        Ok(())
    }
}

impl Store {
    /// `ROOT/partial`, made by the first receive (not by `open`: a store opened only to
    /// be read may not be the opener's to write).
    fn partial_dir(&self) -> PathBuf {
        self.root().join("partial")
    }

    /// The image `reference` names (a name or an id, as `find` takes it), ready to send
    /// with every name it has here; None if absent. Errors if a layer of it is missing.
    pub fn portable(&self, reference: &str) -> anyhow::Result<Option<Portable>> {
        let names = records::read_names(self.root())?;
        let Some((id, _)) = self.resolve(reference, &names)? else {
            return Ok(None);
        };
        let Some(stored) = records::read_image(self.root(), id.hex())? else {
            return Ok(None);
        };
        self.layer_dirs(&stored)?;
        Ok(Some(Portable {
            names: names_of(&names, &id),
            id,
            architecture: stored.architecture,
            os: stored.os,
            layers: stored.layers,
            created_unix: stored.created_unix,
            run: stored.run,
        }))
    }

    /// Pass 1 over the layer's folder: its stream's digest and size (nothing written).
    pub fn export_layer(&self, diff_id: &str) -> anyhow::Result<LayerExport> {
        let hex = digest::hex_of(diff_id, "a layer to send")?;
        let dir = self.layer_dir(hex);
        if !dir.is_dir() {
            bail!("layer {diff_id} is not in {}", self.root().display());
        }
        let tally = write_stream(&dir, diff_id, Tally::new(io::sink(), 0))?;
        let (digest, size, _) = tally.finish();
        Ok(LayerExport {
            diff_id: diff_id.to_string(),
            dir,
            digest,
            size,
        })
    }

    /// The unpacked bytes of a stored layer (0 when the store lacks it).
    pub fn layer_bytes(&self, diff_id: &str) -> u64 {
        digest::hex_of(diff_id, "").map_or(0, |hex| disk_bytes(&self.layer_dir(hex)))
    }

    /// Whether `layers/` has the layer (false for what is no diff_id).
    pub fn has_layer(&self, diff_id: &str) -> bool {
        digest::hex_of(diff_id, "").is_ok_and(|hex| self.layer_dir(hex).is_dir())
    }

    /// Where a receive of the layer `diff_id`, as the stream `digest`, would start. Waits
    /// while another receiver writes that stream, then finds it Present or where that one
    /// stopped.
    pub fn receiving(&self, diff_id: &str, digest: &str) -> anyhow::Result<Receiving> {
        let stream_hex = stream_hex(diff_id, digest)?;
        if self.has_layer(diff_id) {
            return Ok(Receiving::Present);
        }
        let partial = Partial::wait(&self.partial_dir(), stream_hex)?;
        if self.has_layer(diff_id) {
            return Ok(Receiving::Present);
        }
        Ok(Receiving::From(partial.kept()))
    }

    /// Takes the stream's bytes from `offset` (as `receiving` said) from `input` until EOF,
    /// appending them to the kept partial; once `size` bytes are held and their sha256 is
    /// `digest`, unpacks them and moves the layer into `layers/` under the write lock.
    ///
    /// A stream of another digest, or longer than `size`, is removed and never resumed. A
    /// dropped input (EOF before `size`, or a read error) keeps what came for the next try
    /// and says how much. Kept bytes beyond `offset` (another receiver went further) are
    /// skipped in `input`. A layer the store has already, or gets meanwhile, is Ok: `input`
    /// is read to its end, for the sender to finish.
    pub fn receive_layer(
        &self,
        diff_id: &str,
        digest: &str,
        size: u64,
        offset: u64,
        input: &mut dyn Read,
    ) -> anyhow::Result<()> {
        let stream_hex = stream_hex(diff_id, digest)?;
        if self.has_layer(diff_id) {
            return drain(input);
        }
        let partial = Partial::wait(&self.partial_dir(), stream_hex)?;
        if self.has_layer(diff_id) {
            partial.discard();
            return drain(input);
        }
        self.check_room(diff_id, size, partial.kept())?;
        let want = Stream {
            diff_id,
            digest,
            size,
        };
        self.take_stream(&partial, &want, offset, input)?;
        self.install(&partial, diff_id)
    }

    /// Refuses a layer the store's filesystem has no room for, before a byte of it is
    /// taken: the rest of its stream, and its unpacked files (about as large). A
    /// receiver asks it before it says where a sender is to start, too: a sender then
    /// streams nothing to a store that cannot take it.
    pub fn check_room(&self, diff_id: &str, size: u64, kept: u64) -> anyhow::Result<()> {
        let free = nsfleet_sys::free_bytes(File::open(self.root())?.as_fd())?;
        let need = size.saturating_sub(kept) + size;
        if free < need {
            bail!(
                "layer {diff_id}: the disk under {} is full: {} free, and the layer needs about {} (its stream, then its unpacked files); free room there (`nsfleet image prune`)",
                self.root().display(),
                human_bytes(free),
                human_bytes(need)
            );
        }
        Ok(())
    }

    /// Records an image whose every layer is in the store, with its names (a name another
    /// image has moves to this one, as `load` does). All or nothing; refused, naming them,
    /// if layers are missing.
    pub fn adopt(&self, image: &Portable) -> anyhow::Result<ImageRecord> {
        let label = image.names.first().unwrap_or(&image.id.0).clone();
        let id_hex = digest::hex_of(&image.id.0, &format!("image {label}: its id"))?;
        check_platform(&label, &image.architecture, &image.os)?;
        let names = image.names.iter().map(|n| {
            normalize(n).with_context(|| format!("image {label}: the name {n:?} it was sent with"))
        });
        let names = names.collect::<anyhow::Result<Vec<_>>>()?;
        let work = Work::new(&self.tmp())?;
        let _lock = write_lock(self.root())?;
        let size = self.layers_bytes(&label, &image.layers)?;
        let stored = StoredImage {
            id: image.id.clone(),
            architecture: image.architecture.clone(),
            os: image.os.clone(),
            layers: image.layers.clone(),
            size,
            created_unix: image.created_unix,
            run: image.run.clone(),
        };
        let mut table = records::read_names(self.root())?;
        let existed = records::read_image(self.root(), id_hex)?.is_some();
        records::write_image(self.root(), &work, &stored)?;
        for n in names {
            table.insert(n, stored.id.clone());
        }
        if let Err(e) = records::write_names(self.root(), &work, &table) {
            // All or nothing: a record that was not there before goes again.
            if !existed {
                let _ = remove_any(&self.root().join("images").join(format!("{id_hex}.json")));
            }
            return Err(e);
        }
        self.record(&stored.id, &table)
    }

    /// The unpacked bytes of these layers, each counted once (as a load's commit counts
    /// them); refused, naming them all, if some are not in `layers/`. With the write lock.
    fn layers_bytes(&self, label: &str, layers: &[String]) -> anyhow::Result<u64> {
        let (mut size, mut missing, mut seen) = (0, Vec::new(), HashSet::new());
        for diff_id in layers {
            let hex = digest::hex_of(diff_id, &format!("image {label}"))?;
            if !seen.insert(hex) {
                continue;
            }
            let dir = self.layer_dir(hex);
            if dir.is_dir() {
                size += disk_bytes(&dir);
            } else {
                missing.push(diff_id.as_str());
            }
        }
        if !missing.is_empty() {
            bail!(
                "image {label}: the store lacks its layer{} {}: receive {} first",
                if missing.len() > 1 { "s" } else { "" },
                missing.join(", "),
                if missing.len() > 1 { "them" } else { "it" }
            );
        }
        Ok(size)
    }

    /// Appends `input` to the partial until it holds the whole stream, checked. With the
    /// partial's lock.
    fn take_stream(
        &self,
        partial: &Partial,
        want: &Stream,
        offset: u64,
        input: &mut dyn Read,
    ) -> anyhow::Result<()> {
        let diff_id = want.diff_id;
        let mut kept = Kept::open(partial, diff_id)?;
        if kept.held > want.size {
            partial.discard();
            bail!(
                "layer {diff_id}: {} bytes were kept of its stream {}, which has {}: they are removed, send it again from 0",
                kept.held,
                want.digest,
                want.size
            );
        }
        if kept.held < offset {
            bail!(
                "layer {diff_id}: {} bytes of its stream are kept, not {offset}: ask where to start again",
                kept.held
            );
        }
        // Bytes kept beyond `offset` (a receiver went further meanwhile) are not taken
        // twice.
        let overlap = kept.held - offset;
        match io::copy(&mut (&mut *input).take(overlap), &mut io::sink()) {
            Ok(n) if n == overlap => {}
            Ok(_) => return Err(dropped(partial, want, kept.held, None)),
            Err(e) => return Err(dropped(partial, want, kept.held, Some(e))),
        }
        self.append_input(&mut kept, partial, want, input)?;
        let got = format!("sha256:{}", hex::encode(kept.hash.finalize()));
        if got != want.digest {
            partial.discard();
            bail!(
                "layer {diff_id}: its stream has digest {got}, not {}: refused, its bytes removed (send it again from 0)",
                want.digest
            );
        }
        Ok(())
    }

    /// Appends what `input` has to the kept bytes, to its end, which must be the stream's.
    fn append_input(
        &self,
        kept: &mut Kept,
        partial: &Partial,
        want: &Stream,
        input: &mut dyn Read,
    ) -> anyhow::Result<()> {
        let mut buf = vec![0; 1 << 20];
        loop {
            let n = match input.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(dropped(partial, want, kept.held, Some(e))),
            };
            if kept.held + n as u64 > want.size {
                partial.discard();
                bail!(
                    "layer {}: its stream {} is longer than the {} bytes it was said to have: refused, its bytes removed",
                    want.diff_id,
                    want.digest,
                    want.size
                );
            }
            if let Err(e) = kept.file.write_all(&buf[..n]) {
                // What a failed write left is not known: never resumed.
                partial.discard();
                return Err(self.write_failed(want.diff_id, &partial.shown(), e));
            }
            kept.hash.update(&buf[..n]);
            kept.held += n as u64;
        }
        if kept.held < want.size {
            return Err(dropped(partial, want, kept.held, None));
        }
        Ok(())
    }

    /// Unpacks a checked partial into a work folder and renames it into `layers/` under
    /// the write lock; then the partial goes. With the partial's lock.
    fn install(&self, partial: &Partial, diff_id: &str) -> anyhow::Result<()> {
        let hex = digest::hex_of(diff_id, "a received layer")?;
        let work = Work::new(&self.tmp())?;
        let dest = work.path().join(hex);
        let file = File::open(&partial.data)
            .with_context(|| format!("layer {diff_id}: cannot read {}", partial.shown()))?;
        let unpacked = unpack(
            BufReader::with_capacity(1 << 16, file),
            &dest,
            RECEIVED,
            diff_id,
        );
        // Its bytes were checked whole: what failed to unpack would fail again.
        let made = match unpacked {
            Ok((made, _)) => made,
            Err(e) => {
                partial.discard();
                if disk_full(&e) {
                    return Err(self.disk_is_full(diff_id));
                }
                return Err(e);
            }
        };
        if let Some(first) = made.devices.first() {
            partial.discard();
            bail!(
                "layer {diff_id}: its stream holds device files ({first}), which no store sends: refused"
            );
        }
        // A failed rename keeps the partial, whole and checked: the next try sends nothing
        // and unpacks it again.
        let lock = write_lock(self.root())?;
        let place = self.layer_dir(hex);
        // A load may have put the same layer in meanwhile: the one there stays.
        if !place.exists() {
            fs::rename(&dest, &place)
                .with_context(|| format!("cannot move a layer into {}", place.display()))?;
        }
        drop(lock);
        partial.discard();
        Ok(())
    }

    /// The error of a failed write of a partial: a full disk said as such.
    fn write_failed(&self, diff_id: &str, partial: &str, e: io::Error) -> anyhow::Error {
        if e.raw_os_error() == Some(libc::ENOSPC) {
            return self.disk_is_full(diff_id);
        }
        anyhow!(e).context(format!("layer {diff_id}: cannot write {partial}"))
    }

    fn disk_is_full(&self, diff_id: &str) -> anyhow::Error {
        anyhow!(
            "layer {diff_id}: the disk under {} is full: its received bytes are removed",
            self.root().display()
        )
    }

    /// Removes the partials no receiver holds: their streams' digests and bytes. With the
    /// write lock (`prune`), so it never waits for a partial's lock: a receiver holding
    /// one may be waiting for the write lock to install its layer.
    pub(crate) fn drop_partials(&self) -> anyhow::Result<(Vec<String>, u64)> {
        let dir = self.partial_dir();
        let (mut dropped, mut bytes) = (Vec::new(), 0);
        let entries = match fs::read_dir(&dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((dropped, bytes)),
            entries => entries.with_context(|| format!("cannot read {}", dir.display()))?,
        };
        for entry in entries {
            let name = entry?.file_name().to_string_lossy().into_owned();
            let hex = name.strip_suffix(".lock").unwrap_or(&name);
            // Only what a receiver made: a name that is no digest is left alone.
            if digest::hex_of(&format!("sha256:{hex}"), "").is_err() {
                continue;
            }
            let Some(partial) = Partial::try_take(&dir, hex)? else {
                continue; // a receiver is writing it
            };
            if let Ok(m) = fs::symlink_metadata(&partial.data) {
                bytes += m.len();
                dropped.push(format!("sha256:{hex}"));
            }
            partial.discard();
        }
        dropped.sort();
        dropped.dedup();
        Ok((dropped, bytes))
    }
}

/// A partial's file, open to append, and the digest and count of what it holds.
struct Kept {
    file: File,
    hash: Sha256,
    held: u64,
}

impl Kept {
    /// Opens (making it if missing) the partial's file and hashes what it holds again: the
    /// digest covers the whole stream, and kept bytes are never trusted.
    fn open(partial: &Partial, diff_id: &str) -> anyhow::Result<Kept> {
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&partial.data)
            .with_context(|| format!("layer {diff_id}: cannot open {}", partial.shown()))?;
        let mut hash = Sha256::new();
        let held = io::copy(&mut file, &mut hash)
            .with_context(|| format!("layer {diff_id}: cannot read {}", partial.shown()))?;
        Ok(Kept { file, hash, held })
    }
}

/// The stream a receiver is told it gets.
struct Stream<'a> {
    diff_id: &'a str,
    digest: &'a str,
    size: u64,
}

/// The hex of the stream digest `digest` of the layer `diff_id`, both checked: they name
/// files.
fn stream_hex<'a>(diff_id: &str, digest: &'a str) -> anyhow::Result<&'a str> {
    digest::hex_of(diff_id, "a layer to receive")?;
    digest::hex_of(digest, &format!("layer {diff_id}: its stream"))
}

/// The error of a stream that stopped before its end: what came is kept.
fn dropped(partial: &Partial, want: &Stream, held: u64, cause: Option<io::Error>) -> anyhow::Error {
    let why = cause.map_or("it ended".to_string(), |e| {
        format!("reading it failed: {e}")
    });
    anyhow!(
        "layer {}: its stream dropped after {held} of {} bytes ({why}): {held} bytes are kept in {} for the next try",
        want.diff_id,
        want.size,
        partial.shown()
    )
}

/// Reads `input` to its end, for a sender whose layer turned out not to be needed.
fn drain(input: &mut dyn Read) -> anyhow::Result<()> {
    // The layer is in: a broken input no longer matters.
    let _ = io::copy(input, &mut io::sink());
    Ok(())
}

/// A receiver's hold on one stream's partial: `partial/<hex>.lock` flock(2)ed, the kept
/// bytes in `partial/<hex>`. The kernel lets go of the lock however the receiver dies.
struct Partial {
    data: PathBuf,
    lock_path: PathBuf,
    _lock: File,
}

impl Partial {
    /// Waits for the partial's lock, then takes it.
    fn wait(dir: &Path, hex: &str) -> anyhow::Result<Partial> {
        let taken = Partial::take(dir, hex, FlockOp::Exclusive)?;
        Ok(taken.expect("a lock waited for is taken"))
    }

    /// Takes the partial's lock if nobody holds it.
    fn try_take(dir: &Path, hex: &str) -> anyhow::Result<Option<Partial>> {
        Partial::take(dir, hex, FlockOp::ExclusiveNoWait)
    }

    fn take(dir: &Path, hex: &str, op: FlockOp) -> anyhow::Result<Option<Partial>> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let lock_path = dir.join(format!("{hex}.lock"));
        loop {
            let lock = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&lock_path)
                .with_context(|| format!("cannot open {}", lock_path.display()))?;
            match flock(lock.as_fd(), op) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) => {
                    return Err(e).with_context(|| format!("cannot lock {}", lock_path.display()))
                }
            }
            // Its last holder removes the lock file before letting go of it: a lock of a
            // file no longer there is no one's, so take the one there now.
            let still_there = fs::symlink_metadata(&lock_path).is_ok_and(|m| {
                Some((m.dev(), m.ino())) == lock.metadata().ok().map(|l| (l.dev(), l.ino()))
            });
            if still_there {
                return Ok(Some(Partial {
                    data: dir.join(hex),
                    lock_path,
                    _lock: lock,
                }));
            }
        }
    }

    /// The bytes kept (0 when none).
    fn kept(&self) -> u64 {
        fs::symlink_metadata(&self.data).map_or(0, |m| m.len())
    }

    /// Removes the kept bytes: never resumed.
    fn discard(&self) {
        let _ = remove_any(&self.data);
    }

    fn shown(&self) -> String {
        self.data.display().to_string()
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        // An empty partial keeps nothing worth a file.
        if self.kept() == 0 {
            self.discard();
        }
        // The lock file goes before the lock (closed just after): a receiver waiting on it
        // then finds it gone, and takes a new one.
        let _ = fs::remove_file(&self.lock_path);
    }
}

/// Where a stream goes: hashed and counted whole, and passed on from byte `skip`.
struct Tally<W> {
    out: W,
    skip: u64,
    seen: u64,
    hash: Sha256,
    /// Set on an error: what tar's Builder writes as it is dropped (its end blocks) must
    /// not reach `out`, where a receiver would keep it as the stream's next bytes.
    stopped: bool,
}

impl<W: Write> Tally<W> {
    fn new(out: W, skip: u64) -> Tally<W> {
        Tally {
            out,
            skip,
            seen: 0,
            hash: Sha256::new(),
            stopped: false,
        }
    }

    /// The stream's digest and size, and where it went.
    fn finish(self) -> (String, u64, W) {
        let digest = format!("sha256:{}", hex::encode(self.hash.finalize()));
        (digest, self.seen, self.out)
    }
}

impl<W: Write> Write for Tally<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.stopped {
            return Ok(buf.len());
        }
        let before = self.skip.saturating_sub(self.seen).min(buf.len() as u64) as usize;
        self.out.write_all(&buf[before..])?;
        self.hash.update(buf);
        self.seen += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// What an entry of a layer's folder is in its stream.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
    Symlink,
    Fifo,
    /// A character device 0/0: overlayfs's whiteout, `.wh.NAME` in the stream.
    Whiteout,
}

/// One entry of a layer's folder.
struct Node {
    /// Its path in the stream, relative (a whiteout's named `.wh.NAME`); empty for the top.
    name: PathBuf,
    /// Its path below the layer's folder; empty for the top.
    rel: PathBuf,
    meta: fs::Metadata,
    kind: Kind,
}

/// Writes the layer folder `dir` as its stream into `out`. The same folder always gives
/// the same bytes: entries sorted by their path's bytes (a folder before what it holds),
/// and nothing of the moment (no names of owners, a time only where unpacking keeps it).
fn write_stream<W: Write>(dir: &Path, diff_id: &str, out: Tally<W>) -> anyhow::Result<Tally<W>> {
    let nodes = walk(dir).with_context(|| format!("layer {diff_id}"))?;
    let mut tar = tar::Builder::new(out);
    // The first path of each inode with more than one link: its other paths link to it.
    let mut first_paths = HashMap::new();
    for node in &nodes {
        let appended = append(&mut tar, dir, node, &mut first_paths);
        if let Err(e) = appended {
            tar.get_mut().stopped = true;
            let entry = node.rel.display();
            return Err(e).with_context(|| format!("layer {diff_id}, entry {entry:?}"));
        }
    }
    tar.into_inner()
        .with_context(|| format!("layer {diff_id}: cannot write its stream's end"))
}

/// Every entry of the layer's folder `dir` (itself first), sorted by stream path.
fn walk(dir: &Path) -> anyhow::Result<Vec<Node>> {
    let mut nodes = Vec::new();
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        let path = path_of(dir, &rel);
        let meta = fs::symlink_metadata(&path)
            .with_context(|| format!("cannot look at {}", path.display()))?;
        let kind = kind_of(&meta).with_context(|| path.display().to_string())?;
        let name = match rel.file_name() {
            Some(n) if n.as_bytes().starts_with(WHITEOUT.as_bytes()) => bail!(
                "{} is named like a whiteout ({WHITEOUT}NAME), which a stream cannot carry",
                path.display()
            ),
            Some(n) if kind == Kind::Whiteout => {
                let mut wh = OsString::from(WHITEOUT);
                wh.push(n);
                rel.with_file_name(wh)
            }
            _ => rel.clone(),
        };
        if kind == Kind::Dir {
            let cannot = || format!("cannot read {}", path.display());
            for entry in fs::read_dir(&path).with_context(cannot)? {
                todo.push(rel.join(entry.with_context(cannot)?.file_name()));
            }
        }
        nodes.push(Node {
            name,
            rel,
            meta,
            kind,
        });
    }
    nodes.sort_by(|a, b| {
        a.name
            .as_os_str()
            .as_bytes()
            .cmp(b.name.as_os_str().as_bytes())
    });
    Ok(nodes)
}

/// `rel` below `dir` (`dir` itself for the empty path, without the `/` join would add).
fn path_of(dir: &Path, rel: &Path) -> PathBuf {
    if rel.as_os_str().is_empty() {
        dir.to_path_buf()
    } else {
        dir.join(rel)
    }
}

/// What an entry is; an error for what no unpacked layer holds (a block device, a socket,
/// a character device other than a whiteout).
fn kind_of(meta: &fs::Metadata) -> anyhow::Result<Kind> {
    let t = meta.file_type();
    Ok(if t.is_dir() {
        Kind::Dir
    } else if t.is_file() {
        Kind::File
    } else if t.is_symlink() {
        Kind::Symlink
    } else if t.is_fifo() {
        Kind::Fifo
    } else if t.is_char_device() && meta.rdev() == 0 {
        Kind::Whiteout
    } else {
        bail!("a device or a socket, which no unpacked layer holds: it cannot be sent")
    })
}

/// Appends one entry (and, after an opaque folder, its `.wh..wh..opq`).
fn append<W: Write>(
    tar: &mut tar::Builder<W>,
    top: &Path,
    node: &Node,
    first_paths: &mut HashMap<(u64, u64), PathBuf>,
) -> anyhow::Result<()> {
    let path = path_of(top, &node.rel);
    let mut h = header(node)?;
    if node.kind == Kind::Dir {
        let (xattrs, opaque) = xattrs(&path)?;
        append_xattrs(tar, &xattrs)?;
        // A folder's name ends with `/`, as tar writes it; the top is `./`.
        let mut name = if node.name.as_os_str().is_empty() {
            OsString::from(".")
        } else {
            node.name.clone().into_os_string()
        };
        name.push("/");
        tar.append_data(&mut h, name, io::empty())?;
        if opaque {
            let mut marker = marker_header();
            tar.append_data(&mut marker, node.name.join(OPAQUE), io::empty())?;
        }
        return Ok(());
    }
    if node.kind != Kind::Whiteout && node.meta.nlink() > 1 {
        let inode = (node.meta.dev(), node.meta.ino());
        if let Some(first) = first_paths.get(&inode) {
            h.set_entry_type(tar::EntryType::Link);
            h.set_size(0);
            tar.append_link(&mut h, &node.name, first)?;
            return Ok(());
        }
        first_paths.insert(inode, node.name.clone());
    }
    match node.kind {
        Kind::File => {
            let (xattrs, _) = xattrs(&path)?;
            append_xattrs(tar, &xattrs)?;
            let mut file = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)?;
            let len = node.meta.len();
            tar.append_data(&mut h, &node.name, (&file).take(len))?;
            // A file cut shorter than its header says would shift every entry after it.
            if file.stream_position()? != len {
                bail!("it was cut shorter while it was read ({len} bytes before)");
            }
        }
        Kind::Symlink => {
            let target = fs::read_link(&path)?;
            tar.append_link(&mut h, &node.name, target)?;
        }
        Kind::Fifo | Kind::Whiteout => tar.append_data(&mut h, &node.name, io::empty())?,
        Kind::Dir => unreachable!("folders are appended above"),
    }
    Ok(())
}

/// An entry's header as unpacking reads it back: type, mode, owners and time as stored,
/// no names of owners. What unpacking does not keep is written fixed, so that a layer
/// received and sent on gives the same stream: a symbolic link's mode and a symbolic
/// link's or a FIFO's time (never set), a whiteout's everything (it becomes a device 0/0).
fn header(node: &Node) -> anyhow::Result<tar::Header> {
    let m = &node.meta;
    if node.kind == Kind::Whiteout {
        return Ok(marker_header());
    }
    let mut h = tar::Header::new_gnu();
    h.set_uid(m.uid().into());
    h.set_gid(m.gid().into());
    h.set_mode(m.mode() & 0o7777);
    h.set_mtime(0);
    h.set_size(0);
    let stored_time =
        || u64::try_from(m.mtime()).context("its time is before 1970: a tar cannot carry it");
    use tar::EntryType as T;
    match node.kind {
        Kind::Dir => {
            h.set_entry_type(T::Directory);
            h.set_mtime(stored_time()?);
        }
        Kind::File => {
            h.set_entry_type(T::Regular);
            h.set_mtime(stored_time()?);
            h.set_size(m.len());
        }
        Kind::Symlink => {
            h.set_entry_type(T::Symlink);
            h.set_mode(0o777);
        }
        Kind::Fifo => h.set_entry_type(T::Fifo),
        Kind::Whiteout => unreachable!("whiteouts are answered above"),
    }
    Ok(h)
}

/// The header of a whiteout (`.wh.NAME`) or an opaque marker (`.wh..wh..opq`): an empty
/// file, root's, mode 0644, time 0, as Docker writes them.
fn marker_header() -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_mode(0o644);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h.set_size(0);
    h
}

/// Extended attributes: names and values.
type Xattrs = Vec<(String, Vec<u8>)>;

/// The extended attributes of `path` a layer keeps, sorted by name, and whether it is an
/// opaque folder.
fn xattrs(path: &Path) -> anyhow::Result<(Xattrs, bool)> {
    let names = match llistxattr(path) {
        Ok(names) => names,
        // A file system without extended attributes has none to send.
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => return Ok((Vec::new(), false)),
        Err(e) => return Err(e).context("cannot list its extended attributes"),
    };
    let (mut kept, mut opaque) = (Vec::new(), false);
    for name in names {
        let Some(name) = name
            .to_str()
            .filter(|n| kept_xattr(n) || *n == OPAQUE_XATTR)
        else {
            if name.as_bytes().starts_with(b"user.") {
                bail!("its extended attribute {name:?} is not UTF-8: a tar cannot carry it");
            }
            continue;
        };
        let value = lgetxattr(path, name, XATTR_MAX)
            .with_context(|| format!("cannot read its extended attribute {name}"))?;
        if name == OPAQUE_XATTR {
            opaque = value == b"y";
            continue;
        }
        // tar 0.4.46 reads a PAX record up to the first newline, not by its length, and its
        // key up to the first `=`: such an attribute would come out damaged, or refused.
        if name.contains(['=', '\n']) || value.contains(&b'\n') {
            bail!(
                "its extended attribute {name} has a newline (or its name an `=`), which the tar reader of the receiving end cannot read back: it cannot be sent"
            );
        }
        kept.push((name.to_string(), value));
    }
    kept.sort();
    Ok((kept, opaque))
}

/// The PAX records (`SCHILY.xattr.NAME`) of an entry's extended attributes, before it.
fn append_xattrs<W: Write>(tar: &mut tar::Builder<W>, xattrs: &Xattrs) -> io::Result<()> {
    if xattrs.is_empty() {
        return Ok(());
    }
    let records: Vec<(String, &[u8])> = xattrs
        .iter()
        .map(|(name, value)| (format!("SCHILY.xattr.{name}"), value.as_slice()))
        .collect();
    tar.append_pax_extensions(records.iter().map(|(k, v)| (k.as_str(), *v)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{write_oci_layout, Compression, Entry, ImageSpec, Layer};
    use nsfleet_sys::{lsetxattr, make_fifo};
    use std::collections::BTreeMap;
    use std::ffi::OsStr;
    use std::sync::atomic::{AtomicU32, Ordering};

    const NAME: &str = "docker.io/library/transfer:1";

    /// A folder under the temp dir, removed whatever happens.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(test: &str) -> Scratch {
            static N: AtomicU32 = AtomicU32::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!(
                "nsfleet-test-image-transfer-{test}-{}-{n}",
                std::process::id()
            ));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }

        fn store(&self, name: &str) -> Store {
            Store::open(&self.0.join(name)).unwrap()
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// A capability set of `cap_net_raw=ep` (VFS_CAP_REVISION_2), as setcap writes it.
    const CAP_NET_RAW: [u8; 20] = [
        0x01, 0, 0, 0x02, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    fn spec() -> ImageSpec {
        let long_path = format!("deep/{}/file", "d".repeat(120));
        let lower = vec![
            Entry::dir("bin"),
            Entry::file("bin/busybox", 0o4755, "#!busybox"),
            Entry::HardLink {
                path: "bin/ls".into(),
                target: "bin/busybox".into(),
            },
            Entry::symlink("bin/sh", "busybox"),
            Entry::dir("etc"),
            Entry::file("etc/passwd", 0o644, "root:x:0:0::/root:/bin/sh\n"),
            Entry::file("etc/x", 0o600, "deleted by the layer above"),
            Entry::file("etc/empty", 0o644, ""),
            Entry::dir("opt"),
            Entry::file("opt/old", 0o644, "hidden by the layer above"),
            Entry::owned_file("home/user/.profile", 0o640, "export A=1\n", 1000, 1001),
            Entry::file(&long_path, 0o644, "a name longer than a tar header's"),
        ];
        let upper = vec![
            Entry::Whiteout {
                path: "etc/x".into(),
            },
            Entry::Dir {
                path: "opt".into(),
                mode: 0o750,
            },
            Entry::Opaque { path: "opt".into() },
            Entry::file("opt/new", 0o644, "new"),
            // Sorts before `.wh..wh..opq` ('+' < '.'): the marker still follows its folder.
            Entry::file("opt/+plus", 0o644, "plus"),
            Entry::dir("var"),
            Entry::dir("var/empty"),
        ];
        ImageSpec {
            layers: vec![
                Layer {
                    entries: lower,
                    compression: Compression::Gzip,
                },
                Layer {
                    entries: upper,
                    compression: Compression::None,
                },
            ],
            run: RunConfig {
                entrypoint: vec!["/bin/sh".into()],
                cmd: vec!["-c".into(), "echo hi".into()],
                env: vec!["PATH=/bin".into(), "A=1".into()],
                workdir: Some("/home/user".into()),
                user: Some("1000:1001".into()),
            },
            architecture: crate::host_arch().to_string(),
        }
    }

    /// Store `a` of scratch `s`, with the test image loaded and its lower layer given what
    /// build cannot write: extended attributes, a FIFO, a long link target, a name that is
    /// not UTF-8.
    fn sender(s: &Scratch) -> Store {
        let layout = s.0.join("layout");
        write_oci_layout(&layout, "transfer:1", &spec()).unwrap();
        let a = s.store("a");
        a.load(&layout, None, &mut |_| {}).unwrap();
        let lower = &a.find(NAME).unwrap().unwrap().layers[0];
        lsetxattr(
            &lower.join("bin/busybox"),
            "security.capability",
            &CAP_NET_RAW,
        )
        .unwrap();
        lsetxattr(&lower.join("etc/passwd"), "user.note", b"kept").unwrap();
        lsetxattr(&lower.join("etc"), "user.folder", b"a folder's").unwrap();
        make_fifo(&lower.join("run.fifo"), 0o620).unwrap();
        std::os::unix::fs::symlink("t".repeat(150), lower.join("long-link")).unwrap();
        fs::write(lower.join(OsStr::from_bytes(b"caf\xe9")), b"latin-1").unwrap();
        a
    }

    fn stream_of(export: &LayerExport, offset: u64) -> Vec<u8> {
        let mut bytes = Vec::new();
        export.write_from(offset, &mut bytes).unwrap();
        bytes
    }

    /// Sends the whole layer from `a` to `b`.
    fn send(a: &Store, b: &Store, diff_id: &str) {
        let export = a.export_layer(diff_id).unwrap();
        let bytes = stream_of(&export, 0);
        b.receive_layer(diff_id, export.digest(), export.size(), 0, &mut &bytes[..])
            .unwrap();
    }

    fn layer_of(store: &Store, diff_id: &str) -> PathBuf {
        store.layer_dir(digest::hex_of(diff_id, "test").unwrap())
    }

    fn partials(store: &Store) -> Vec<OsString> {
        let entries = fs::read_dir(store.partial_dir()).unwrap();
        entries.map(|e| e.unwrap().file_name()).collect()
    }

    /// An input whose pipe dropped.
    struct Broken;

    impl Read for Broken {
        fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
            Err(io::Error::new(
                io::ErrorKind::ConnectionReset,
                "the pipe dropped",
            ))
        }
    }

    /// What a comparison of two layers looks at in an entry.
    #[derive(Debug, PartialEq)]
    struct Seen {
        kind: &'static str,
        mode: u32,
        uid: u32,
        gid: u32,
        /// Folders' and files' only: unpacking sets no other time.
        mtime: Option<i64>,
        content: Option<Vec<u8>>,
        target: Option<PathBuf>,
        rdev: Option<u64>,
        xattrs: Vec<(OsString, Vec<u8>)>,
        /// Every path of its inode, when it has more than one.
        links: Vec<PathBuf>,
    }

    /// Every entry below `top` (itself as the empty path).
    fn tree(top: &Path) -> BTreeMap<PathBuf, Seen> {
        let (mut seen, mut inodes) = (BTreeMap::new(), BTreeMap::<u64, Vec<PathBuf>>::new());
        let mut todo = vec![PathBuf::new()];
        while let Some(rel) = todo.pop() {
            let path = path_of(top, &rel);
            let m = fs::symlink_metadata(&path).unwrap();
            let t = m.file_type();
            let kind = match () {
                _ if t.is_dir() => "dir",
                _ if t.is_file() => "file",
                _ if t.is_symlink() => "symlink",
                _ if t.is_fifo() => "fifo",
                _ if t.is_char_device() => "char",
                _ => "other",
            };
            if t.is_dir() {
                for e in fs::read_dir(&path).unwrap() {
                    todo.push(rel.join(e.unwrap().file_name()));
                }
            } else {
                inodes.entry(m.ino()).or_default().push(rel.clone());
            }
            let mut xattrs: Vec<_> = llistxattr(&path)
                .unwrap()
                .into_iter()
                .map(|n| {
                    let value = lgetxattr(&path, n.to_str().unwrap(), XATTR_MAX).unwrap();
                    (n, value)
                })
                .collect();
            xattrs.sort();
            let entry = Seen {
                kind,
                mode: m.mode(),
                uid: m.uid(),
                gid: m.gid(),
                mtime: (t.is_dir() || t.is_file()).then_some(m.mtime()),
                content: t.is_file().then(|| fs::read(&path).unwrap()),
                target: t.is_symlink().then(|| fs::read_link(&path).unwrap()),
                rdev: t.is_char_device().then_some(m.rdev()),
                xattrs,
                links: Vec::new(),
            };
            seen.insert(rel, entry);
        }
        for mut paths in inodes.into_values().filter(|p| p.len() > 1) {
            paths.sort();
            for p in &paths {
                seen.get_mut(p).unwrap().links = paths.clone();
            }
        }
        seen
    }

    #[test]
    fn an_image_moves_to_another_store_layer_by_layer() {
        let s = Scratch::new("move");
        let (a, b) = (sender(&s), s.store("b"));
        let sent = a.portable("transfer:1").unwrap().unwrap();
        assert_eq!(sent.names, [NAME]);
        assert_eq!(sent.layers.len(), 2);
        for diff_id in &sent.layers {
            let export = a.export_layer(diff_id).unwrap();
            let at = b.receiving(diff_id, export.digest()).unwrap();
            assert_eq!(at, Receiving::From(0));
            send(&a, &b, diff_id);
            let at = b.receiving(diff_id, export.digest()).unwrap();
            assert_eq!(at, Receiving::Present);
            let again = b.export_layer(diff_id).unwrap();
            assert_eq!(
                (again.digest(), again.size()),
                (export.digest(), export.size()),
                "a layer received and sent on is the same stream"
            );
        }
        let record = b.adopt(&sent).unwrap();
        assert_eq!(record.names, [NAME]);
        assert_eq!(record.id, sent.id);
        let bytes: u64 = sent
            .layers
            .iter()
            .map(|l| disk_bytes(&layer_of(&a, l)))
            .sum();
        assert_eq!(record.size, bytes);
        assert_eq!(b.portable(NAME).unwrap().as_ref(), Some(&sent));
        let (from, to) = (
            a.find(NAME).unwrap().unwrap(),
            b.find(NAME).unwrap().unwrap(),
        );
        assert_eq!(to.run, from.run);
        assert_eq!(to.id, from.id);
        for (la, lb) in from.layers.iter().zip(&to.layers) {
            assert_eq!(tree(la), tree(lb), "layer {}", la.display());
        }
        // The comparison saw what matters.
        let (lower, upper) = (tree(&to.layers[0]), tree(&to.layers[1]));
        assert_eq!(lower[Path::new("bin/ls")].links.len(), 2);
        assert_eq!(lower[Path::new("run.fifo")].kind, "fifo");
        let caps = &lower[Path::new("bin/busybox")].xattrs;
        assert_eq!(
            caps,
            &[("security.capability".into(), CAP_NET_RAW.to_vec())]
        );
        assert_eq!(lower[Path::new("home/user/.profile")].uid, 1000);
        assert_eq!(lower[Path::new("etc")].xattrs.len(), 1);
        assert!(lower.contains_key(Path::new(OsStr::from_bytes(b"caf\xe9"))));
        assert_eq!(upper[Path::new("etc/x")].kind, "char");
        assert_eq!(upper[Path::new("etc/x")].rdev, Some(0));
        let opaque = (OsString::from(OPAQUE_XATTR), b"y".to_vec());
        assert_eq!(upper[Path::new("opt")].xattrs, [opaque]);
        assert_eq!(upper[Path::new("opt")].mode & 0o7777, 0o750);
        assert!(partials(&b).is_empty(), "no partial is left");
    }

    /// An entry of a stream as a tar reader sees it.
    struct Listed {
        path: Vec<u8>,
        kind: tar::EntryType,
        link: Option<Vec<u8>>,
        /// The keys of its PAX records.
        pax: Vec<String>,
    }

    /// Every entry of a stream, checking that none names an owner.
    fn listed(bytes: &[u8]) -> Vec<Listed> {
        let mut archive = tar::Archive::new(bytes);
        let mut list = Vec::new();
        for e in archive.entries().unwrap() {
            let mut e = e.unwrap();
            let h = e.header();
            assert_eq!(h.username_bytes().unwrap_or_default(), b"");
            assert_eq!(h.groupname_bytes().unwrap_or_default(), b"");
            let (path, kind) = (e.path_bytes().into_owned(), h.entry_type());
            let link = e.link_name_bytes().map(|l| l.into_owned());
            let mut pax = Vec::new();
            for ext in e.pax_extensions().unwrap().into_iter().flatten() {
                pax.push(ext.unwrap().key().unwrap().to_string());
            }
            list.push(Listed {
                path,
                kind,
                link,
                pax,
            });
        }
        list
    }

    #[test]
    fn a_layers_stream_is_the_same_bytes_every_time_in_oci_layer_form() {
        let s = Scratch::new("stream");
        let a = sender(&s);
        let layers = a.portable(NAME).unwrap().unwrap().layers;
        let mut streams = Vec::new();
        for diff_id in &layers {
            let (one, two) = (
                a.export_layer(diff_id).unwrap(),
                a.export_layer(diff_id).unwrap(),
            );
            assert_eq!((one.digest(), one.size()), (two.digest(), two.size()));
            let bytes = stream_of(&one, 0);
            assert_eq!(bytes, stream_of(&two, 0));
            assert_eq!(bytes.len() as u64, one.size());
            assert_eq!(digest::of_bytes(&bytes), one.digest());
            let third = one.size() / 3;
            assert_eq!(stream_of(&one, third), bytes[third as usize..]);
            assert!(stream_of(&one, one.size()).is_empty());
            assert!(one.write_from(one.size() + 1, &mut Vec::new()).is_err());
            streams.push(bytes);
        }
        let (lower, upper) = (listed(&streams[0]), listed(&streams[1]));
        let find = |list: &[Listed], p: &[u8]| list.iter().position(|e| e.path == p).unwrap();
        let ls = &lower[find(&lower, b"bin/ls")];
        assert_eq!(ls.kind, tar::EntryType::Link);
        assert_eq!(ls.link.as_deref(), Some(&b"bin/busybox"[..]));
        let busybox = &lower[find(&lower, b"bin/busybox")];
        assert_eq!(busybox.pax, ["SCHILY.xattr.security.capability"]);
        assert_eq!(
            lower[find(&lower, b"etc/")].pax,
            ["SCHILY.xattr.user.folder"]
        );
        assert_eq!(lower[0].path, b"./");
        let long_link = &lower[find(&lower, b"long-link")];
        assert_eq!(long_link.link.as_deref(), Some("t".repeat(150).as_bytes()));
        let whiteout = &upper[find(&upper, b"etc/.wh.x")];
        assert_eq!(whiteout.kind, tar::EntryType::Regular);
        let opt = find(&upper, b"opt/");
        let marker = &upper[opt + 1].path;
        assert_eq!(marker, b"opt/.wh..wh..opq", "the marker follows its folder");
        // Sorted by path, a folder before what it holds (the markers aside).
        for list in [&lower, &upper] {
            let paths: Vec<&[u8]> = list
                .iter()
                .map(|e| e.path.strip_suffix(b"/").unwrap_or(&e.path))
                .filter(|p| !p.ends_with(OPAQUE.as_bytes()))
                .map(|p| if p == b"." { &b""[..] } else { p })
                .collect();
            assert!(paths.windows(2).all(|w| w[0] < w[1]), "{paths:?}");
        }
    }

    #[test]
    fn a_dropped_receive_keeps_its_bytes_and_resumes() {
        let s = Scratch::new("resume");
        let (a, b) = (sender(&s), s.store("b"));
        let layers = a.portable(NAME).unwrap().unwrap().layers;
        // Cut by a read error half-way, resumed where it stopped.
        let (lower, export) = (&layers[0], a.export_layer(&layers[0]).unwrap());
        let (digest, size) = (export.digest(), export.size());
        let bytes = stream_of(&export, 0);
        let half = bytes.len() / 2;
        let mut cut = (&bytes[..half]).chain(Broken);
        let err = b
            .receive_layer(lower, digest, size, 0, &mut cut)
            .unwrap_err();
        let said = format!("{err:#}");
        assert!(said.contains(&format!("{half} bytes are kept")), "{said}");
        assert!(
            said.contains("the pipe dropped") && said.contains(lower.as_str()),
            "{said}"
        );
        assert!(!b.has_layer(lower));
        let n = match b.receiving(lower, digest).unwrap() {
            Receiving::From(n) => n,
            other => panic!("{other:?}"),
        };
        assert_eq!(n, half as u64);
        let rest = stream_of(&export, n);
        b.receive_layer(lower, digest, size, n, &mut &rest[..])
            .unwrap();
        assert_eq!(tree(&layer_of(&a, lower)), tree(&layer_of(&b, lower)));

        // Cut twice by an early end, then sent by a sender that did not ask (from 0).
        let (upper, export) = (&layers[1], a.export_layer(&layers[1]).unwrap());
        let (digest, size) = (export.digest(), export.size());
        let bytes = stream_of(&export, 0);
        let third = bytes.len() / 3;
        let err = b
            .receive_layer(upper, digest, size, 0, &mut &bytes[..third])
            .unwrap_err();
        assert!(format!("{err:#}").contains("it ended"), "{err:#}");
        let more = &bytes[third..2 * third];
        b.receive_layer(upper, digest, size, third as u64, &mut &more[..])
            .unwrap_err();
        let kept = 2 * third as u64;
        assert_eq!(b.receiving(upper, digest).unwrap(), Receiving::From(kept));
        let ahead = b.receive_layer(upper, digest, size, kept + 1, &mut &bytes[..]);
        assert!(format!("{:#}", ahead.unwrap_err()).contains("ask where to start"));
        assert_eq!(b.receiving(upper, digest).unwrap(), Receiving::From(kept));
        b.receive_layer(upper, digest, size, 0, &mut &bytes[..])
            .unwrap();
        assert_eq!(tree(&layer_of(&a, upper)), tree(&layer_of(&b, upper)));
        assert!(partials(&b).is_empty());
    }

    #[test]
    fn a_stream_of_another_digest_or_size_is_refused_and_not_kept() {
        let s = Scratch::new("wrong");
        let (a, b) = (sender(&s), s.store("b"));
        let diff_id = &a.portable(NAME).unwrap().unwrap().layers[0];
        let export = a.export_layer(diff_id).unwrap();
        let bytes = stream_of(&export, 0);
        let wrong = digest::of_bytes(b"another stream");
        let err = b.receive_layer(diff_id, &wrong, export.size(), 0, &mut &bytes[..]);
        let said = format!("{:#}", err.unwrap_err());
        assert!(
            said.contains(diff_id.as_str()) && said.contains("digest"),
            "{said}"
        );
        assert!(!b.has_layer(diff_id));
        assert!(partials(&b).is_empty(), "a wrong stream is not kept");
        assert_eq!(b.receiving(diff_id, &wrong).unwrap(), Receiving::From(0));
        let short = export.size() - 1;
        let err = b.receive_layer(diff_id, export.digest(), short, 0, &mut &bytes[..]);
        assert!(format!("{:#}", err.unwrap_err()).contains("longer than"));
        assert!(!b.has_layer(diff_id));
        assert!(partials(&b).is_empty());
        let err = b.receive_layer(diff_id, "sha256:../../etc", 1, 0, &mut &bytes[..]);
        assert!(err.is_err(), "a digest is a file name: only a digest");
        assert!(fs::read_dir(b.root().join("layers"))
            .unwrap()
            .next()
            .is_none());
    }

    #[test]
    fn a_layer_the_disk_has_no_room_for_is_refused_before_a_byte_is_kept() {
        let s = Scratch::new("full");
        let (a, b) = (sender(&s), s.store("b"));
        let diff_id = &a.portable(NAME).unwrap().unwrap().layers[0];
        let export = a.export_layer(diff_id).unwrap();
        let bytes = stream_of(&export, 0);
        // Said to be 1 EB: more than any disk under the temp dir has.
        let huge = 1 << 60;
        let err = b.receive_layer(diff_id, export.digest(), huge, 0, &mut &bytes[..]);
        let said = format!("{:#}", err.unwrap_err());
        assert!(
            said.contains("is full") && said.contains(diff_id.as_str()),
            "{said}"
        );
        assert!(!b.has_layer(diff_id));
        assert_eq!(
            b.receiving(diff_id, export.digest()).unwrap(),
            Receiving::From(0)
        );
    }

    #[test]
    fn a_layer_the_store_has_is_present_and_not_received_again() {
        let s = Scratch::new("present");
        let a = sender(&s);
        let diff_id = &a.portable(NAME).unwrap().unwrap().layers[0];
        let export = a.export_layer(diff_id).unwrap();
        let before = tree(&layer_of(&a, diff_id));
        assert_eq!(
            a.receiving(diff_id, export.digest()).unwrap(),
            Receiving::Present
        );
        // Read to its end and dropped: the layer there stays as it is.
        let mut garbage = &b"not the stream"[..];
        a.receive_layer(diff_id, export.digest(), export.size(), 0, &mut garbage)
            .unwrap();
        assert!(garbage.is_empty());
        assert_eq!(tree(&layer_of(&a, diff_id)), before);
    }

    #[test]
    fn adopting_an_image_without_its_layers_is_refused_and_writes_nothing() {
        let s = Scratch::new("adopt");
        let (a, b) = (sender(&s), s.store("b"));
        let sent = a.portable(NAME).unwrap().unwrap();
        send(&a, &b, &sent.layers[0]);
        let said = format!("{:#}", b.adopt(&sent).unwrap_err());
        assert!(said.contains(&sent.layers[1]), "{said}");
        assert!(!said.contains(&sent.layers[0]), "{said}");
        assert!(b.list().unwrap().is_empty());
        assert!(fs::read_dir(b.root().join("images"))
            .unwrap()
            .next()
            .is_none());
        assert!(!b.root().join("names.json").exists());
        assert!(b.find(NAME).unwrap().is_none());
    }

    #[test]
    fn prune_removes_the_partials_no_receiver_holds() {
        let s = Scratch::new("prune");
        let (a, b) = (sender(&s), s.store("b"));
        let diff_id = &a.portable(NAME).unwrap().unwrap().layers[0];
        let export = a.export_layer(diff_id).unwrap();
        let bytes = stream_of(&export, 0);
        let mut cut = (&bytes[..1000]).chain(Broken);
        let (digest, size) = (export.digest(), export.size());
        b.receive_layer(diff_id, digest, size, 0, &mut cut)
            .unwrap_err();
        let hex = digest::hex_of(digest, "test").unwrap();
        let holder = Partial::wait(&b.partial_dir(), hex).unwrap();
        let pruned = b.prune(false).unwrap();
        assert!(pruned.partials.is_empty(), "a receiver holds it");
        assert_eq!(holder.kept(), 1000);
        drop(holder);
        let pruned = b.prune(false).unwrap();
        assert_eq!(pruned.partials, [digest]);
        assert_eq!(pruned.bytes_freed, 1000);
        assert!(partials(&b).is_empty());
        assert_eq!(b.receiving(diff_id, digest).unwrap(), Receiving::From(0));
    }

    #[test]
    fn a_second_receiver_waits_for_the_first() {
        let s = Scratch::new("wait");
        let b = s.store("b");
        let (diff_id, stream) = (digest::of_bytes(b"layer"), digest::of_bytes(b"stream"));
        let first = Partial::wait(&b.partial_dir(), digest::hex_of(&stream, "").unwrap()).unwrap();
        fs::write(&first.data, b"abc").unwrap();
        let second = {
            let (b, diff_id, stream) = (b.clone(), diff_id.clone(), stream.clone());
            std::thread::spawn(move || b.receiving(&diff_id, &stream))
        };
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!second.is_finished(), "it waits while the first writes");
        drop(first);
        assert_eq!(second.join().unwrap().unwrap(), Receiving::From(3));
    }

    #[test]
    fn an_xattr_the_receiver_could_not_read_back_is_not_sent() {
        let s = Scratch::new("newline");
        let a = sender(&s);
        let diff_id = &a.portable(NAME).unwrap().unwrap().layers[0];
        let file = layer_of(&a, diff_id).join("etc/passwd");
        lsetxattr(&file, "user.lines", b"two\nlines").unwrap();
        let said = format!("{:#}", a.export_layer(diff_id).unwrap_err());
        assert!(
            said.contains("etc/passwd") && said.contains("user.lines"),
            "{said}"
        );
    }
}

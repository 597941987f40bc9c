//! The front-ends: each reads one format's text (nsfleet's TOML in [`toml`],
//! containerlab's YAML in [`clab`], with the span-keeping [`yaml`] reader) into neutral
//! declarations (`decl`, with their places) and hands them to the resolver
//! (`resolve/`), which the front-ends call and which never calls them. This file is the
//! front door: which front-end reads a file, and the file's text, read safely.
//!
//! A front-end never touches the kernel or the host (but for reading its file, and the
//! files a topology names, through the resolver).

pub mod clab;
pub(crate) mod toml;
pub mod yaml;

use crate::resolve::draft::Draft;
use crate::TopologyError;
use serde::Serialize;
use std::path::Path;

/// The fleet `nsfleet up` builds when given no file.
pub const DEFAULT_FLEET: &str = include_str!("../../../../examples/default.toml");
pub const DEFAULT_FLEET_FILE: &str = "<built-in default fleet>";

/// The languages a topology file may be written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// nsfleet's own (TOML).
    Toml,
    /// containerlab's topology file (YAML).
    Clab,
}

impl Format {
    /// What a file's name says it is: `.yml` and `.yaml` (`lab.clab.yml`) are
    /// containerlab's, anything else nsfleet's TOML.
    pub fn of(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some("yml" | "yaml") => Format::Clab,
            _ => Format::Toml,
        }
    }
}

/// What the nodes that name an image run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Software {
    /// Their images: the image's files and process.
    #[default]
    Images,
    /// The host's own files and programs, as if no image were named (images are only
    /// recorded); a containerlab node of FRR's image runs the host's FRR.
    Host,
}

/// A file read by the front-end of `format`, or of the one its name says, its nodes
/// running their images.
pub fn read_file(path: &Path, format: Option<Format>) -> Result<Draft, TopologyError> {
    read_file_with(path, format, Software::Images, &[])
}

/// A file read by the front-end of `format`, its nodes running what `software` says; a
/// containerlab file rendered with the template variables of `vars` (see
/// [`clab::read_with_vars`]).
pub fn read_file_with(
    path: &Path,
    format: Option<Format>,
    software: Software,
    vars: &[std::path::PathBuf],
) -> Result<Draft, TopologyError> {
    let file = path.display().to_string();
    let text = read_text(path)?;
    let format = format.unwrap_or_else(|| Format::of(path));
    if format == Format::Toml && !vars.is_empty() {
        let m = "template variables (--vars) are for containerlab files, which are Go templates";
        return Err(TopologyError::new(&file, crate::Place::default(), m));
    }
    let mut draft = match format {
        Format::Toml => toml::read(&file, &text),
        Format::Clab => clab::read_with_vars(&file, &text, software, vars),
    }?;
    if software == Software::Host {
        draft.forget_images();
    }
    Ok(draft)
}

/// Largest topology file read: a written fleet of 50,000 routers and their links is about
/// a fifth of it. Bigger files are refused before reading on (a larger fleet is written
/// with `[[generate]]`).
pub const MAX_TOPOLOGY_BYTES: u64 = 16 << 20;

/// A topology file's text: a regular file (a FIFO, device, socket or directory is refused
/// without being opened), at most [`MAX_TOPOLOGY_BYTES`] (no more is read), UTF-8 (an
/// invalid byte is named by its line and column).
pub fn read_text(path: &Path) -> Result<String, TopologyError> {
    use std::io::Read;
    let file = path.display().to_string();
    // About the file as a whole: no place in it.
    let whole = |message: String| TopologyError::new(&file, crate::Place::default(), message);
    let unreadable = |e: std::io::Error| whole(format!("cannot read the topology file: {e}"));
    let meta = std::fs::metadata(path).map_err(unreadable)?;
    if !meta.is_file() {
        let what = kind_of(&meta.file_type());
        return Err(whole(format!(
            "a topology file is a regular file, not {what}: not read"
        )));
    }
    let too_big = || {
        whole(format!(
            "over {} MiB: a topology file is at most that (write large fleets with [[generate]]); not read further",
            MAX_TOPOLOGY_BYTES >> 20
        ))
    };
    if meta.len() > MAX_TOPOLOGY_BYTES {
        return Err(too_big());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    let f = std::fs::File::open(path).map_err(unreadable)?;
    f.take(MAX_TOPOLOGY_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > MAX_TOPOLOGY_BYTES {
        return Err(too_big());
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = crate::Place::of(e.as_bytes(), e.utf8_error().valid_up_to());
        TopologyError::new(&file, at, "expected UTF-8 text: this byte is not")
    })
}

/// What a file that is not a regular file is, as a user would say it.
fn kind_of(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else {
        "a special file"
    }
}

//! nsfleet-image: nsfleet's content-addressed image store. It lets fleet nodes run OCI and
//! Docker container images without a container engine: `docker save` / `podman save`
//! archives and OCI image layouts (folders or tars) are loaded, and images are pulled from
//! registries (the OCI distribution API), every blob checked against its digest, each
//! layer unpacked once into the form overlayfs takes as a lower layer, and an image found
//! by name or id hands a node its layer folders and process fields.
//!
//! It never touches a namespace or a mount, never talks to a Docker daemon, reaches the
//! network only to pull from a registry (`pull`), and writes only under its root. It has
//! no `unsafe`: the syscalls std lacks (flock, mknod, extended attributes) are
//! `nsfleet-sys` wrappers.
//!
//! # The store on disk
//!
//! ```text
//! ROOT/lock                 flock(2)ed exclusively by every writer of names, images, layers
//! ROOT/names.json           name ("docker.io/library/alpine:latest") -> image id
//! ROOT/images/<hex>.json    one image: its ImageRecord and its config's process fields,
//!                           <hex> the sha256 of its config blob (Docker's image id)
//! ROOT/layers/<hex>/        one unpacked layer, <hex> the sha256 of its uncompressed tar
//!                           (its diff_id), shared by every image that has it
//! ROOT/tmp/<work>/          work in progress, with ROOT/tmp/<work>.lock beside it
//! ROOT/holds/<hold>.json    who uses which images, flock(2)ed by its holder while it lives
//! ROOT/partial/<hex>        the first bytes of a layer's stream from another store, kept
//!                           when that stream dropped, to resume it: <hex> the sha256 of
//!                           the whole stream, as its sender said it (made by the first
//!                           receive)
//! ROOT/partial/<hex>.lock   flock(2)ed by the one receiver writing <hex>; others wait
//! ```
//!
//! Every write goes to `ROOT/tmp` first and is renamed into place only once its digests
//! are checked, so an interrupted load or pull (Ctrl-C, SIGKILL) leaves only tmp entries, and those
//! are never trusted. A writer keeps a flock on its `<work>.lock`; the next writer that can
//! take that lock knows the writer is gone and sweeps its entry. Removal goes the other way:
//! a layer is renamed into tmp before it is deleted, so a half-deleted layer is never in
//! `layers/`. Readers (`list`, `find`) take no lock: every file they read is replaced whole
//! by a rename.
//!
//! A layer moves to another store (`transfer`) as a stream: a tar its sender makes anew
//! from the layer's folder, the same bytes every time, so that a receive cut short resumes
//! where it stopped. Its kept bytes are never trusted: they are hashed again on resume,
//! and only once the whole stream has the digest its sender gave is it unpacked (as any
//! layer, hostile input) and renamed into `layers/`. A stream of the wrong digest or size
//! is removed, never resumed. Partials are not tmp entries, so the sweep of tmp leaves them;
//! `prune` removes those no receiver holds. Until `adopt` records its image, a received
//! layer is one no image uses, which `remove` and `prune` delete as any other (`adopt`
//! then names it missing).
//!
//! Holds keep images in use safe from `remove` and `prune`: a hold's file stays locked for
//! as long as some process has its descriptor, so a node that dies with SIGKILL lets go of
//! its images, and a forked child that inherits the descriptor keeps them.

pub mod build;
mod credentials;
mod digest;
mod engine;
mod formats;
mod hold;
pub mod local_registry;
mod pull;
mod records;
mod reference;
mod source;
mod store;
pub mod transfer;
mod unpack;
mod work;

pub use credentials::pull_credentials_for;
pub use engine::Engine;
pub use hold::Hold;
pub use pull::{PullOptions, PullProgress};
pub use reference::{host_arch, normalize};
pub use store::{Store, DEFAULT_ROOT};
pub use transfer::{LayerExport, Portable, Receiving};

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// An image's id: `sha256:<hex>` of its config blob (Docker's image id).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
pub struct ImageId(pub String);

impl ImageId {
    /// The 64 hex digits, without `sha256:`.
    pub fn hex(&self) -> &str {
        self.0.strip_prefix("sha256:").unwrap_or(&self.0)
    }

    /// The first 12 hex digits, as `docker images` shows an id.
    pub fn short(&self) -> &str {
        let hex = self.hex();
        &hex[..hex.len().min(12)]
    }
}

impl std::fmt::Display for ImageId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// An image as `list` shows it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ImageRecord {
    pub id: ImageId,
    /// Its names, normalized (`docker.io/library/alpine:latest`), sorted; empty when the
    /// image has none left (`prune` removes it then).
    pub names: Vec<String>,
    pub architecture: String,
    pub os: String,
    /// Its layers' diff_ids (`sha256:<hex>`), lowest first.
    pub layers: Vec<String>,
    /// Unpacked bytes (the sizes of its layers' regular files).
    pub size: u64,
    /// When the image was built, from its config's `created`.
    pub created_unix: Option<u64>,
}

/// What a node needs to run an image: its layers as folders (lowest first, each an unpacked
/// layer in overlayfs's lower-layer form) and the configuration's process fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Image {
    pub id: ImageId,
    /// The reference as asked for, normalized; the full id when asked for by id.
    pub name: String,
    /// `ROOT/layers/<hex>`, lowest first. A layer the image lists twice appears once, at
    /// its upper place (overlayfs refuses a folder twice; applying it at the upper place
    /// alone gives the same tree).
    pub layers: Vec<PathBuf>,
    pub run: RunConfig,
}

/// The process fields of an image's config (`config` in the OCI image config).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    /// `K=V`, as the image sets them.
    pub env: Vec<String>,
    pub workdir: Option<String>,
    pub user: Option<String>,
}

/// What `remove` removed.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Removed {
    /// The names taken off.
    pub names: Vec<String>,
    /// The images deleted (they had no name left and no hold).
    pub images: Vec<ImageId>,
    /// The layers deleted (no image uses them any more), as diff_ids.
    pub layers: Vec<String>,
    /// Unpacked bytes freed.
    pub bytes_freed: u64,
}

/// What `prune` removed.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Pruned {
    pub images: Vec<ImageId>,
    /// Names taken off with the images (`prune --all` only).
    pub names: Vec<String>,
    /// Layers no image used, as diff_ids.
    pub layers: Vec<String>,
    /// Unfinished work of writers that are gone (`ROOT/tmp` entries).
    pub unfinished: Vec<String>,
    /// The kept bytes of layer streams whose receiver is gone (`ROOT/partial`), as the
    /// streams' digests.
    pub partials: Vec<String>,
    /// Hold files whose holders are gone.
    pub stale_holds: usize,
    pub bytes_freed: u64,
}

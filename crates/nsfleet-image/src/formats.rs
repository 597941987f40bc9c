//! The archive formats, read into one shape: the images an archive holds, each with its
//! names, its config blob and its layer blobs (and their digests where the format gives
//! them). A `docker save` / `podman save` archive has `manifest.json` (its `RepoTags` are
//! full references); an OCI image layout has `oci-layout` and `index.json`, whose
//! descriptors may name an image (`io.containerd.image.name`, or
//! `org.opencontainers.image.ref.name`, often only a tag).

use crate::digest;
use crate::reference::host_arch;
use crate::source::Source;
use anyhow::{bail, Context};
use oci_spec::image::{Descriptor, ImageIndex, ImageManifest, MediaType};
use serde::Deserialize;

/// A blob of the archive: where it is, and the digest it must have if the format says.
pub(crate) struct Blob {
    pub path: String,
    pub digest: Option<String>,
}

/// One image of an archive, before it is checked.
pub(crate) struct Found {
    /// Full references the archive gives it.
    pub names: Vec<String>,
    /// A tag the archive gives it without a repository (an OCI `ref.name` such as `3.20`).
    pub tag: Option<String>,
    pub config: Blob,
    pub layers: Vec<Blob>,
}

/// Every image of the archive.
pub(crate) fn read(source: &Source) -> anyhow::Result<Vec<Found>> {
    if source.has("manifest.json") {
        return docker(source);
    }
    if source.has("oci-layout") && source.has("index.json") {
        return oci(source);
    }
    bail!("not an image archive: it has neither manifest.json (docker save) nor oci-layout and index.json (an OCI image layout)")
}

/// One image of `docker save`'s manifest.json.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct DockerEntry {
    config: String,
    #[serde(default)]
    repo_tags: Option<Vec<String>>,
    layers: Vec<String>,
}

fn docker(source: &Source) -> anyhow::Result<Vec<Found>> {
    let text = source.read("manifest.json")?;
    let entries: Vec<DockerEntry> =
        serde_json::from_slice(&text).context("manifest.json is not a docker save manifest")?;
    let found = entries.into_iter().map(|e| Found {
        names: e.repo_tags.unwrap_or_default(),
        tag: None,
        config: docker_blob(e.config),
        layers: e.layers.into_iter().map(docker_blob).collect(),
    });
    Ok(found.collect())
}

/// A docker-archive path with the digest its name carries: `blobs/sha256/<hex>` (Docker 25
/// and later) or the legacy config `<hex>.json`. A legacy `<id>/layer.tar` carries none:
/// its uncompressed digest is checked against the config's diff_id.
fn docker_blob(path: String) -> Blob {
    let name = path.rsplit('/').next().unwrap_or(&path);
    let stem = name.strip_suffix(".json").unwrap_or(name);
    let in_blobs = path.trim_start_matches("./").starts_with("blobs/sha256/");
    let named_by_digest = (in_blobs || name.ends_with(".json")) && stem.len() == 64;
    let digest = named_by_digest
        .then(|| format!("sha256:{stem}"))
        .filter(|d| digest::hex_of(d, "").is_ok());
    Blob { path, digest }
}

fn oci(source: &Source) -> anyhow::Result<Vec<Found>> {
    let index = ImageIndex::from_reader(&source.read("index.json")?[..])
        .context("index.json is not an OCI image index")?;
    let mut found = Vec::new();
    for d in index.manifests() {
        let (names, tag) = names_of(d);
        let manifest = match d.media_type() {
            m if is_index(m) => manifest_for_host(source, d)?,
            _ => manifest(source, d)?,
        };
        found.push(Found {
            names,
            tag,
            config: blob(manifest.config())?,
            layers: manifest
                .layers()
                .iter()
                .map(blob)
                .collect::<Result<_, _>>()?,
        });
    }
    Ok(found)
}

fn is_index(m: &MediaType) -> bool {
    matches!(m, MediaType::ImageIndex)
        || m.as_ref() == "application/vnd.docker.distribution.manifest.list.v2+json"
}

/// The names a descriptor's annotations give: a full reference, or only a tag.
fn names_of(d: &Descriptor) -> (Vec<String>, Option<String>) {
    let get = |k: &str| d.annotations().as_ref().and_then(|a| a.get(k)).cloned();
    if let Some(full) = get("io.containerd.image.name") {
        return (vec![full], None);
    }
    match get("org.opencontainers.image.ref.name") {
        // A tag has no `/` and no `:`; anything else is a reference of its own.
        Some(r) if r.contains('/') || r.contains(':') => (vec![r], None),
        Some(tag) => (vec![], Some(tag)),
        None => (vec![], None),
    }
}

/// Where the blob of digest `digest` is in an OCI layout.
fn blob_path(digest: &str) -> anyhow::Result<String> {
    Ok(format!(
        "blobs/sha256/{}",
        digest::hex_of(digest, "a blob of index.json")?
    ))
}

fn blob(d: &Descriptor) -> anyhow::Result<Blob> {
    let digest = d.digest().to_string();
    Ok(Blob {
        path: blob_path(&digest)?,
        digest: Some(digest),
    })
}

/// The JSON blob `d` points at, checked against its digest.
fn checked_json(source: &Source, d: &Descriptor) -> anyhow::Result<Vec<u8>> {
    let want = d.digest().to_string();
    let bytes = source.read(&blob_path(&want)?)?;
    let got = digest::of_bytes(&bytes);
    if got != want {
        bail!("the manifest blob {want} has digest {got}: the archive is damaged");
    }
    Ok(bytes)
}

fn manifest(source: &Source, d: &Descriptor) -> anyhow::Result<ImageManifest> {
    let bytes = checked_json(source, d)?;
    ImageManifest::from_reader(&bytes[..])
        .with_context(|| format!("{} is not an image manifest", d.digest()))
}

/// The manifest of a multi-platform index for this machine's platform.
fn manifest_for_host(source: &Source, d: &Descriptor) -> anyhow::Result<ImageManifest> {
    let bytes = checked_json(source, d)?;
    let index = ImageIndex::from_reader(&bytes[..])
        .with_context(|| format!("{} is not an image index", d.digest()))?;
    manifest(
        source,
        entry_for_host(&index, &format!("the index {}", d.digest()))?,
    )
}

/// The entry of a multi-platform index for linux and this machine's architecture, or an
/// error saying what `index` (named `what`) offers instead.
pub(crate) fn entry_for_host<'a>(
    index: &'a ImageIndex,
    what: &str,
) -> anyhow::Result<&'a Descriptor> {
    let host = host_arch();
    let mut offered = Vec::new();
    for m in index.manifests() {
        let Some(p) = m.platform() else { continue };
        let (arch, os) = (p.architecture().to_string(), p.os().to_string());
        if arch == host && os == "linux" {
            return Ok(m);
        }
        // Attestations (Docker's build provenance) are entries for `unknown/unknown`.
        if os != "unknown" {
            offered.push(format!("{os}/{arch}"));
        }
    }
    bail!(
        "{what} has no image for linux/{host}; it has {}",
        if offered.is_empty() {
            "none with a platform".to_string()
        } else {
            offered.join(", ")
        }
    )
}

pub(crate) fn is_index_type(media_type: &str) -> bool {
    is_index(&MediaType::from(media_type))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_paths_carry_their_digests() {
        let hex = "ab".repeat(32);
        let d = |p: &str| docker_blob(p.to_string()).digest;
        assert_eq!(
            d(&format!("blobs/sha256/{hex}")),
            Some(format!("sha256:{hex}"))
        );
        assert_eq!(d(&format!("{hex}.json")), Some(format!("sha256:{hex}")));
        assert_eq!(d(&format!("{hex}/layer.tar")), None);
        assert_eq!(d("blobs/sha256/short"), None);
    }
}

//! Images made from files nsfleet is given, written as an OCI image layout: what the
//! tests and `nsfleet bench images` run, built here because no registry is reachable
//! from them. A layer is a list of entries written as a tar (plain, gzip or zstd), with
//! Docker's whiteouts for what it deletes; the layout is what `skopeo copy oci:DIR`
//! and `nsfleet image load DIR` read.

use crate::RunConfig;
use anyhow::Context;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::path::Path;

/// One entry of a layer.
#[derive(Clone, Debug)]
pub enum Entry {
    Dir {
        path: String,
        mode: u32,
    },
    File {
        path: String,
        mode: u32,
        data: Vec<u8>,
    },
    /// A file of another owner than root's.
    OwnedFile {
        path: String,
        mode: u32,
        data: Vec<u8>,
        uid: u32,
        gid: u32,
    },
    Symlink {
        path: String,
        target: String,
    },
    /// A hard link to an earlier entry of the same layer.
    HardLink {
        path: String,
        target: String,
    },
    /// Deletes `path` of the layers below (Docker's `.wh.NAME`).
    Whiteout {
        path: String,
    },
    /// Hides everything the layers below have in folder `path` (`.wh..wh..opq`).
    Opaque {
        path: String,
    },
}

impl Entry {
    pub fn file(path: &str, mode: u32, data: impl Into<Vec<u8>>) -> Entry {
        let (path, data) = (path.to_string(), data.into());
        Entry::File { path, mode, data }
    }

    /// A file of owner `uid`, group `gid`.
    pub fn owned_file(
        path: &str,
        mode: u32,
        data: impl Into<Vec<u8>>,
        uid: u32,
        gid: u32,
    ) -> Entry {
        let (path, data) = (path.to_string(), data.into());
        Entry::OwnedFile {
            path,
            mode,
            data,
            uid,
            gid,
        }
    }

    pub fn dir(path: &str) -> Entry {
        Entry::Dir {
            path: path.to_string(),
            mode: 0o755,
        }
    }

    pub fn symlink(path: &str, target: &str) -> Entry {
        let (path, target) = (path.to_string(), target.to_string());
        Entry::Symlink { path, target }
    }
}

/// How a layer's tar is compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

/// A layer to write.
#[derive(Clone, Debug)]
pub struct Layer {
    pub entries: Vec<Entry>,
    pub compression: Compression,
}

/// An image to write: its layers, lowest first, and its configuration's process.
#[derive(Clone, Debug)]
pub struct ImageSpec {
    pub layers: Vec<Layer>,
    pub run: RunConfig,
    /// `amd64`, `arm64`...: the machine's own ([`crate::host_arch`]) unless a test wants
    /// another.
    pub architecture: String,
}

/// Writes `image` as an OCI image layout in the folder `dir` (made if missing), its
/// index naming it `reference` (`org.opencontainers.image.ref.name`). Returns the image's
/// id, the digest of its config.
pub fn write_oci_layout(dir: &Path, reference: &str, image: &ImageSpec) -> anyhow::Result<String> {
    let blobs = dir.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).with_context(|| format!("making {}", blobs.display()))?;
    let put = |bytes: &[u8]| -> anyhow::Result<(String, usize)> {
        let hex = hex::encode(Sha256::digest(bytes));
        std::fs::write(blobs.join(&hex), bytes)?;
        Ok((format!("sha256:{hex}"), bytes.len()))
    };
    let (mut descriptors, mut diff_ids) = (Vec::new(), Vec::new());
    for layer in &image.layers {
        let tar = tar_of(&layer.entries)?;
        diff_ids.push(format!("sha256:{}", hex::encode(Sha256::digest(&tar))));
        let (bytes, media) = compress(&tar, layer.compression)?;
        let (digest, size) = put(&bytes)?;
        descriptors.push(json!({"mediaType": media, "digest": digest, "size": size}));
    }
    let r = &image.run;
    let config = json!({
        "architecture": image.architecture,
        "os": "linux",
        "config": {
            "Entrypoint": (!r.entrypoint.is_empty()).then_some(&r.entrypoint),
            "Cmd": (!r.cmd.is_empty()).then_some(&r.cmd),
            "Env": r.env,
            "WorkingDir": r.workdir.clone().unwrap_or_default(),
            "User": r.user.clone().unwrap_or_default(),
        },
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    });
    let (config_digest, config_size) = put(&serde_json::to_vec(&config)?)?;
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config_size},
        "layers": descriptors,
    });
    let (manifest_digest, manifest_size) = put(&serde_json::to_vec(&manifest)?)?;
    let index = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": manifest_digest,
            "size": manifest_size,
            "annotations": annotations(reference),
        }],
    });
    std::fs::write(dir.join("index.json"), serde_json::to_vec(&index)?)?;
    std::fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#)?;
    Ok(config_digest)
}

/// The index's names of the image: `reference`, and when it is a full reference (with a
/// registry or a path), containerd's name too, which `ctr images import` names it by.
fn annotations(reference: &str) -> serde_json::Value {
    let mut a = json!({"org.opencontainers.image.ref.name": reference});
    if reference.contains('/') {
        a["io.containerd.image.name"] = json!(reference);
    }
    a
}

/// A layer's entries as an uncompressed tar, owned by root (but `OwnedFile`s), dated 0.
fn tar_of(entries: &[Entry]) -> anyhow::Result<Vec<u8>> {
    let mut tar = tar::Builder::new(Vec::new());
    for e in entries {
        let mut h = tar::Header::new_gnu();
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(0);
        let (path, data): (String, &[u8]) = match e {
            Entry::Dir { path, mode } => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(*mode);
                (format!("{path}/"), &[])
            }
            Entry::File { path, mode, data } => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(*mode);
                (path.clone(), data)
            }
            Entry::OwnedFile {
                path,
                mode,
                data,
                uid,
                gid,
            } => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(*mode);
                h.set_uid((*uid).into());
                h.set_gid((*gid).into());
                (path.clone(), data)
            }
            Entry::Symlink { path, target } | Entry::HardLink { path, target } => {
                let kind = match e {
                    Entry::Symlink { .. } => tar::EntryType::Symlink,
                    _ => tar::EntryType::Link,
                };
                h.set_entry_type(kind);
                h.set_mode(0o777);
                h.set_link_name(target)?;
                (path.clone(), &[])
            }
            Entry::Whiteout { path } => (whiteout(path, None), &[]),
            Entry::Opaque { path } => (whiteout(path, Some(".wh..wh..opq")), &[]),
        };
        if matches!(e, Entry::Whiteout { .. } | Entry::Opaque { .. }) {
            h.set_entry_type(tar::EntryType::Regular);
            h.set_mode(0o644);
        }
        h.set_size(data.len() as u64);
        tar.append_data(&mut h, path.trim_start_matches('/'), data)?;
    }
    Ok(tar.into_inner()?)
}

/// The tar name of a whiteout: `.wh.NAME` beside `path`, or `name` inside it.
fn whiteout(path: &str, name: Option<&str>) -> String {
    let path = path.trim_end_matches('/');
    match name {
        Some(n) => format!("{path}/{n}"),
        None => match path.rsplit_once('/') {
            Some((dir, base)) => format!("{dir}/.wh.{base}"),
            None => format!(".wh.{path}"),
        },
    }
}

fn compress(tar: &[u8], c: Compression) -> anyhow::Result<(Vec<u8>, &'static str)> {
    use std::io::Write;
    Ok(match c {
        Compression::None => (tar.to_vec(), "application/vnd.oci.image.layer.v1.tar"),
        Compression::Gzip => {
            // gzip's default level, as image builders compress: incompressible data goes
            // in stored blocks. The fastest level codes it with static Huffman codes
            // instead, 12% larger and several times slower to inflate than any real
            // image's (measured: a 100 MB pull 1.8x skopeo's, against 1.0x).
            let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            z.write_all(tar)?;
            (z.finish()?, "application/vnd.oci.image.layer.v1.tar+gzip")
        }
        Compression::Zstd => (
            zstd::encode_all(tar, 3)?,
            "application/vnd.oci.image.layer.v1.tar+zstd",
        ),
    })
}

//! `Store::pull`: an image from its registry over the OCI distribution API (oci-client:
//! token auth, manifests, blobs), on a current-thread tokio runtime made for the pull (the
//! rest of nsfleet is synchronous). First the manifest (for a multi-platform index, its
//! entry for linux and this machine's architecture) and the config; then each layer blob
//! the store lacks, a few at a time, streamed into the pull's own tmp work folder while its
//! sha256 is computed, and named by its digest only once that digest matches. What was
//! fetched then goes through the store's `ingest`, the path `load` takes too: every check,
//! the unpacking and the commit are the same.
//!
//! It never writes outside its tmp work folder (`ingest` moves what is checked into
//! place), never keeps a blob whose digest does not match, and talks plain HTTP only to
//! loopback registries and those the caller names insecure. An interrupted pull leaves
//! only its tmp folder, swept by the next writer.

use crate::credentials::{self, Login};
use crate::digest;
use crate::formats::{entry_for_host, is_index_type, Blob, Found};
use crate::reference::check_platform;
use crate::source::Source;
use crate::work::Work;
use crate::{ImageRecord, Store};
use anyhow::{anyhow, bail, Context};
use futures_util::{StreamExt, TryStreamExt};
use oci_client::client::{BlobResponse, ClientConfig, ClientProtocol};
use oci_client::errors::{DigestError, OciDistributionError, OciErrorCode};
use oci_client::{Client, Reference, RegistryOperation};
use oci_spec::image::{Descriptor, ImageConfiguration, ImageIndex, ImageManifest};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::cell::RefCell;
use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Layer blobs fetched at once: enough to hide a registry's latency, few enough not to
/// compete with each other for the link.
const PARALLEL_FETCHES: usize = 3;

/// The most bytes of a manifest or a config (they are read whole).
const MAX_JSON: u64 = 64 << 20;

/// Bytes between two `LayerBytes` reports of one layer.
const REPORT_EVERY: u64 = 1 << 20;

/// The manifest types a pull asks for: OCI's and Docker's schema 2, images and indexes.
const MANIFEST_TYPES: &[&str] = &[
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// How `pull` reaches registries.
#[derive(Clone, Debug, Default)]
pub struct PullOptions {
    /// Registries reached over plain HTTP besides the loopback ones (127.0.0.0/8, ::1 and
    /// localhost, which Docker allows too): `HOST` (any port) or `HOST:PORT`.
    pub insecure_registries: Vec<String>,
    /// Docker's config file, whose `auths` give credentials; None: `$DOCKER_CONFIG/config.json`,
    /// else `~/.docker/config.json`.
    pub docker_config: Option<PathBuf>,
    /// Docker's config file's text, given in memory instead (a Kubernetes Secret handed to
    /// a machine's pull, never written to its disk), and what to call it in messages.
    pub docker_config_text: Option<(String, String)>,
}

/// What a pull reports as it goes. Digests are the blobs' (as the manifest lists them).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum PullProgress {
    /// The registry gave the image's manifest.
    Resolved {
        /// The reference, normalized.
        image: String,
        /// The manifest's digest (for an index, the digest of the entry chosen).
        manifest: String,
        /// `linux/amd64`: the platform of the image pulled.
        platform: String,
        layers: usize,
        /// The bytes of its layer blobs, all of them (those already present included).
        bytes: u64,
    },
    /// A layer the store has already: not fetched.
    LayerPresent {
        digest: String,
        size: u64,
    },
    LayerStarted {
        digest: String,
        size: u64,
    },
    LayerBytes {
        digest: String,
        done: u64,
        total: u64,
    },
    /// A layer fetched whole, its digest checked.
    LayerFetched {
        digest: String,
        size: u64,
    },
    /// A line of the store's checking, unpacking and committing (what `load` prints).
    Store {
        line: String,
    },
}

/// One pull's connection to its registry, and what its messages name.
struct Remote {
    client: Client,
    reference: Reference,
    /// The reference normalized, as the store names the image.
    label: String,
    login: Login,
    /// `http://127.0.0.1:5000`: where the registry was looked for.
    base: String,
    /// The Docker config the credentials were looked for in, as messages name it.
    credentials_from: String,
    /// The credentials came in memory (`docker_config_text`), not from a file here.
    credentials_given: bool,
}

/// A layer to fetch.
#[derive(Clone)]
struct Want {
    digest: String,
    size: u64,
}

impl Store {
    /// Pulls `reference` from its registry into the store (a no-op beyond re-checking names
    /// when every layer is already there), returning its record.
    pub fn pull(
        &self,
        reference: &str,
        opts: &PullOptions,
        progress: &mut dyn FnMut(PullProgress),
    ) -> anyhow::Result<ImageRecord> {
        let parsed = crate::reference::parse(reference)?;
        let label = parsed.whole();
        let remote = Remote::new(parsed, label, opts)?;
        let work = Work::new(&self.tmp())?;
        let blobs = work.path().join("blobs/sha256");
        fs::create_dir_all(&blobs)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the pull's runtime")?;
        let found = runtime.block_on(remote.fetch(self, &blobs, progress))?;
        let names = vec![vec![remote.label.clone()]];
        let source = Source::Dir(work.path().to_path_buf());
        let mut lines = |line: &str| {
            // The layers the store had were reported as `LayerPresent` already.
            if !line.ends_with(": already in the store") {
                progress(PullProgress::Store {
                    line: line.to_string(),
                })
            }
        };
        let mut records = self.ingest(&source, &[found], names, &work, &mut lines)?;
        Ok(records.remove(0))
    }
}

impl Remote {
    fn new(reference: Reference, label: String, opts: &PullOptions) -> anyhow::Result<Remote> {
        let registry = reference.resolve_registry().to_string();
        let plain = plain_http(&registry, &opts.insecure_registries);
        let config = ClientConfig {
            protocol: if plain {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            // Indexes are read here, to name the platforms they offer when none fits.
            platform_resolver: None,
            connect_timeout: Some(Duration::from_secs(30)),
            read_timeout: Some(Duration::from_secs(120)),
            ..ClientConfig::default()
        };
        let config_path = opts
            .docker_config
            .clone()
            .or_else(credentials::default_config_path);
        let (login, credentials_from) = match &opts.docker_config_text {
            Some((called, text)) => (
                // Given text (a cluster's pull Secret) names no helper to run here.
                credentials::login_from(reference.registry(), text.as_bytes(), called, false),
                called.clone(),
            ),
            None => (
                credentials::login_for(reference.registry(), config_path.as_deref()),
                config_path.as_ref().map_or(
                    "no Docker config file (neither $DOCKER_CONFIG nor $HOME is set)".to_string(),
                    |p| p.display().to_string(),
                ),
            ),
        };
        let login = login.with_context(|| format!("image {label}: its registry's credentials"))?;
        let scheme = if plain { "http" } else { "https" };
        Ok(Remote {
            client: Client::new(config),
            base: format!("{scheme}://{registry}"),
            reference,
            label,
            login,
            credentials_from,
            credentials_given: opts.docker_config_text.is_some(),
        })
    }

    /// Logs in, reads the manifest and the config, and fetches into `blobs` every layer
    /// the store lacks. The image as `ingest` takes it.
    async fn fetch(
        &self,
        store: &Store,
        blobs: &Path,
        progress: &mut dyn FnMut(PullProgress),
    ) -> anyhow::Result<Found> {
        self.client
            .auth(&self.reference, &self.login.auth, RegistryOperation::Pull)
            .await
            .map_err(|e| self.explain(e, "log in"))?;
        let (manifest, manifest_digest) = self.manifest().await?;
        let config_digest = manifest.config().digest().to_string();
        let config_size = manifest.config().size();
        if config_size > MAX_JSON {
            bail!(
                "image {}: its config is {config_size} bytes: too big for a config",
                self.label
            );
        }
        let mut quiet = |_: PullProgress| {};
        let quiet: RefCell<&mut dyn FnMut(PullProgress)> = RefCell::new(&mut quiet);
        let config_path = self
            .fetch_blob("config", &config_digest, config_size, blobs, &quiet)
            .await?;
        let config = ImageConfiguration::from_file(&config_path).with_context(|| {
            format!(
                "image {}: its config is not an OCI image config",
                self.label
            )
        })?;
        let (arch, os) = (config.architecture().to_string(), config.os().to_string());
        check_platform(&self.label, &arch, &os)?;
        let layers = manifest.layers();
        let diff_ids = config.rootfs().diff_ids();
        if diff_ids.len() != layers.len() {
            bail!(
                "image {}: its manifest has {} layers, its config {}",
                self.label,
                layers.len(),
                diff_ids.len()
            );
        }
        progress(PullProgress::Resolved {
            image: self.label.clone(),
            manifest: manifest_digest,
            platform: format!("{os}/{arch}"),
            layers: layers.len(),
            bytes: layers.iter().map(|l| l.size()).sum(),
        });
        let wants = self.missing(store, layers, diff_ids, progress)?;
        self.fetch_layers(&wants, blobs, progress).await?;
        Ok(Found {
            names: vec![self.label.clone()],
            tag: None,
            config: blob_of(&config_digest)?,
            layers: layers
                .iter()
                .map(|l| blob_of(l.digest().as_ref()))
                .collect::<anyhow::Result<_>>()?,
        })
    }

    /// The image's manifest and its digest; for a multi-platform index, that of its entry
    /// for linux and this machine's architecture.
    async fn manifest(&self) -> anyhow::Result<(ImageManifest, String)> {
        let (bytes, digest) = self.manifest_bytes(&self.reference).await?;
        if !is_index_bytes(&bytes) {
            return Ok((self.parse_manifest(&bytes)?, digest));
        }
        let index = ImageIndex::from_reader(&bytes[..]).with_context(|| {
            format!("image {}: its index is not an OCI image index", self.label)
        })?;
        let what = format!("image {} (index {digest})", self.label);
        let entry: &Descriptor = entry_for_host(&index, &what)?;
        let at = self.reference.clone_with_digest(entry.digest().to_string());
        let (bytes, digest) = self.manifest_bytes(&at).await?;
        Ok((self.parse_manifest(&bytes)?, digest))
    }

    /// A manifest's bytes, checked against the digest the reference or the registry gives.
    async fn manifest_bytes(&self, at: &Reference) -> anyhow::Result<(Vec<u8>, String)> {
        let result = self
            .client
            .pull_manifest_raw(at, &self.login.auth, MANIFEST_TYPES)
            .await;
        let (bytes, digest) = match result {
            Ok(found) => found,
            Err(e) if is_not_found(&e) => return Err(self.not_found().await),
            Err(e) => return Err(self.explain(e, "read the manifest")),
        };
        if bytes.len() as u64 > MAX_JSON {
            bail!("image {}: its manifest is too big", self.label);
        }
        Ok((bytes.to_vec(), digest))
    }

    fn parse_manifest(&self, bytes: &[u8]) -> anyhow::Result<ImageManifest> {
        ImageManifest::from_reader(bytes).with_context(|| {
            format!(
                "image {}: its manifest is not an OCI or Docker image manifest",
                self.label
            )
        })
    }

    /// The layers to fetch: those whose diff_id the store lacks, each blob once. Reports
    /// the others as present.
    fn missing(
        &self,
        store: &Store,
        layers: &[Descriptor],
        diff_ids: &[String],
        progress: &mut dyn FnMut(PullProgress),
    ) -> anyhow::Result<Vec<Want>> {
        let mut wants = Vec::new();
        let mut seen = HashSet::new();
        for (layer, diff_id) in layers.iter().zip(diff_ids) {
            let (digest, size) = (layer.digest().to_string(), layer.size());
            if !seen.insert(digest.clone()) {
                continue;
            }
            let hex = digest::hex_of(diff_id, &format!("image {}", self.label))?;
            if store.layer_dir(hex).exists() {
                progress(PullProgress::LayerPresent { digest, size });
            } else {
                wants.push(Want { digest, size });
            }
        }
        Ok(wants)
    }

    /// Fetches `wants` into `blobs`, a few at a time; the first failure stops the others.
    async fn fetch_layers(
        &self,
        wants: &[Want],
        blobs: &Path,
        progress: &mut dyn FnMut(PullProgress),
    ) -> anyhow::Result<()> {
        // The fetches run on this one thread, taking turns: the reporter is never borrowed
        // across an await.
        let report = RefCell::new(progress);
        futures_util::stream::iter(wants.iter().map(Ok))
            .try_for_each_concurrent(PARALLEL_FETCHES, |w| async {
                self.fetch_blob("layer", &w.digest, w.size, blobs, &report)
                    .await?;
                Ok(())
            })
            .await
    }

    /// Streams one blob (the image's `kind`: layer, config) into `blobs/<hex>.part` while
    /// hashing it, and renames it to `blobs/<hex>` once its digest is the one asked for.
    /// Its path.
    async fn fetch_blob(
        &self,
        kind: &str,
        digest: &str,
        size: u64,
        blobs: &Path,
        report: &RefCell<&mut dyn FnMut(PullProgress)>,
    ) -> anyhow::Result<PathBuf> {
        let hex = digest::hex_of(digest, &format!("image {}", self.label))?;
        let (part, done) = (blobs.join(format!("{hex}.part")), blobs.join(hex));
        let say = |p: PullProgress| (report.borrow_mut())(p);
        say(PullProgress::LayerStarted {
            digest: digest.to_string(),
            size,
        });
        let result = self.stream_to(kind, &part, digest, size, &say).await;
        let got = match result {
            Ok(got) => got,
            Err(e) => {
                let _ = fs::remove_file(&part);
                return Err(e);
            }
        };
        if got != digest {
            let _ = fs::remove_file(&part);
            bail!(
                "image {}: {kind} {digest} came from the registry with digest {got}: the registry sent damaged or altered data, and nothing of it was kept",
                self.label
            );
        }
        fs::rename(&part, &done)?;
        say(PullProgress::LayerFetched {
            digest: digest.to_string(),
            size,
        });
        Ok(done)
    }

    /// Writes the blob `digest` to `path`: the sha256 of what came.
    async fn stream_to(
        &self,
        kind: &str,
        path: &Path,
        digest: &str,
        size: u64,
        say: &dyn Fn(PullProgress),
    ) -> anyhow::Result<String> {
        let what = format!("fetch {kind} {digest}");
        // Asked as a range from byte 0, which the registry answers as part of the blob: the
        // client then leaves the digest to us. Its own check would hash every byte a
        // second time, without the CPU's SHA instructions (measured: 41% of a 100 MB
        // pull's CPU), where ours hashes them once, with them.
        let response = self
            .client
            .pull_blob_stream_partial(&self.reference, digest, 0, None)
            .await
            .map_err(|e| self.explain(e, &what))?;
        let mut stream = match response {
            BlobResponse::Full(s) | BlobResponse::Partial(s) => s,
        };
        let file =
            File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let mut hasher = Sha256::new();
        let (mut done, mut reported) = (0u64, 0u64);
        while let Some(chunk) = stream.next().await {
            let chunk = match chunk {
                Ok(c) => c,
                // oci-client checks the digest too, at the end: ours says it better.
                Err(e) if is_digest_error(&e) => break,
                Err(e) => {
                    return Err(e).with_context(|| format!("image {}: cannot {what}", self.label))
                }
            };
            done += chunk.len() as u64;
            if done > size {
                bail!(
                    "image {}: {kind} {digest} is longer than the {size} bytes its manifest says: the registry sent something else",
                    self.label
                );
            }
            hasher.update(&chunk);
            out.write_all(&chunk)
                .with_context(|| format!("cannot write {}", path.display()))?;
            if done - reported >= REPORT_EVERY || done == size {
                reported = done;
                say(PullProgress::LayerBytes {
                    digest: digest.to_string(),
                    done,
                    total: size,
                });
            }
        }
        out.flush()
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(format!("sha256:{}", hex::encode(hasher.finalize())))
    }

    /// A registry's error as people need it: what was refused, by whom, and what to do.
    fn explain(&self, e: OciDistributionError, doing: &str) -> anyhow::Error {
        let (label, base) = (&self.label, &self.base);
        match e {
            OciDistributionError::RequestError(r) => {
                let hint = if self.base.starts_with("https:") {
                    " (if it serves plain HTTP, allow that with --insecure-registry HOST[:PORT])"
                } else {
                    ""
                };
                anyhow!("image {label}: cannot reach the registry at {base}: {}{hint}", causes(&r))
            }
            OciDistributionError::UnauthorizedError { .. } => self.refused("401 Unauthorized"),
            OciDistributionError::AuthenticationFailure(reason) => {
                self.refused(&format!("its token service said: {}", reason.trim()))
            }
            OciDistributionError::RegistryError { envelope, .. } => {
                let code = envelope.errors.first().map(|e| &e.code);
                match code {
                    Some(OciErrorCode::ManifestUnknown) => self.no_tag(),
                    Some(OciErrorCode::NameUnknown) => self.no_repository(),
                    Some(OciErrorCode::Unauthorized) => self.refused("401 Unauthorized"),
                    Some(OciErrorCode::Denied) => self.refused("403 Denied"),
                    Some(OciErrorCode::BlobUnknown) => anyhow!(
                        "image {label}: the registry at {base} lacks a blob its manifest names (cannot {doing}): the image there is incomplete"
                    ),
                    _ => anyhow!("image {label}: the registry at {base} refused to {doing}: {envelope}"),
                }
            }
            OciDistributionError::ServerError { code: 404, .. } => self.no_tag(),
            OciDistributionError::ServerError { code: 403, .. } => self.refused("403 Forbidden"),
            OciDistributionError::DigestError(DigestError::VerificationError {
                expected,
                actual,
            }) => anyhow!(
                "image {label}: cannot {doing}: the registry at {base} sent data of digest {actual}, not {expected}"
            ),
            other => anyhow!("image {label}: cannot {doing} from the registry at {base}: {other}"),
        }
    }

    /// The error for a manifest the registry does not have: its repository's tags say
    /// whether the repository is missing too (a registry answers MANIFEST_UNKNOWN for both).
    async fn not_found(&self) -> anyhow::Error {
        let tags = self
            .client
            .list_tags(&self.reference, &self.login.auth, Some(1), None)
            .await;
        match tags {
            Err(e) if is_not_found(&e) => self.no_repository(),
            _ => self.no_tag(),
        }
    }

    fn no_repository(&self) -> anyhow::Error {
        anyhow!(
            "image {}: the registry at {} has no repository {}",
            self.label,
            self.base,
            self.reference.repository()
        )
    }

    fn no_tag(&self) -> anyhow::Error {
        let r = &self.reference;
        let what = match (r.digest(), r.tag()) {
            (Some(d), _) => format!("no manifest {d}"),
            (None, t) => format!("no tag {}", t.unwrap_or("latest")),
        };
        anyhow!(
            "image {}: the registry at {} has {what} in repository {}",
            self.label,
            self.base,
            r.repository()
        )
    }

    /// A refused login, saying whether credentials were sent and where they came from.
    fn refused(&self, how: &str) -> anyhow::Error {
        let registry = self.reference.registry();
        let file = &self.credentials_from;
        let sent = match (&self.login.from, &self.login.unused) {
            (Some(from), _) => format!("the credentials of {from} were refused: check the user and password, and that this user may pull it"),
            (None, Some(unused)) => format!("it was asked anonymously: {unused}"),
            (None, None) if self.credentials_given => format!("it was asked anonymously: {file} has no credentials for {registry}"),
            (None, None) => format!("it was asked anonymously: {file} has no credentials for {registry}; `docker login {registry}` (or `skopeo login --authfile {file} {registry}`) saves them there"),
        };
        anyhow!(
            "image {}: the registry at {} refused access ({how}): {sent}",
            self.label,
            self.base
        )
    }
}

/// Whether `registry` (`host[:port]`) is reached over plain HTTP: a loopback one, or one
/// named in `insecure` (by host, or host and port).
fn plain_http(registry: &str, insecure: &[String]) -> bool {
    let host = host_of(registry);
    let loopback = host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    loopback
        || insecure.iter().any(|i| {
            let i = i
                .trim_start_matches("http://")
                .trim_start_matches("https://");
            let i = i.trim_end_matches('/');
            i == registry || i == host
        })
}

/// The host of `host[:port]`, without the brackets of an IPv6 address.
fn host_of(registry: &str) -> &str {
    if let Some(rest) = registry.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match registry.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => registry,
    }
}

/// Whether a manifest's bytes are an index (by its media type, or by having `manifests`
/// when it gives none).
fn is_index_bytes(bytes: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Head {
        #[serde(default, rename = "mediaType")]
        media_type: Option<String>,
        #[serde(default)]
        manifests: Option<serde_json::Value>,
    }
    match serde_json::from_slice::<Head>(bytes) {
        Ok(Head {
            media_type: Some(m),
            ..
        }) => is_index_type(&m),
        Ok(h) => h.manifests.is_some(),
        Err(_) => false,
    }
}

fn blob_of(digest: &str) -> anyhow::Result<Blob> {
    let hex = digest::hex_of(digest, "a blob of the manifest")?;
    Ok(Blob {
        path: format!("blobs/sha256/{hex}"),
        digest: Some(digest.to_string()),
    })
}

/// Whether the registry answered 404: MANIFEST_UNKNOWN, NAME_UNKNOWN, or no error body.
fn is_not_found(e: &OciDistributionError) -> bool {
    match e {
        OciDistributionError::RegistryError { envelope, .. } => envelope.errors.iter().any(|e| {
            matches!(
                e.code,
                OciErrorCode::ManifestUnknown | OciErrorCode::NameUnknown | OciErrorCode::NotFound
            )
        }),
        OciDistributionError::ServerError { code, .. } => *code == 404,
        _ => false,
    }
}

fn is_digest_error(e: &std::io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<DigestError>())
}

/// An error and its causes, the last one said plainly: `connection refused` rather than
/// the HTTP library's wrapping of it.
fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return "connection refused (is a registry listening there?)".to_string();
            }
        }
        source = s.source();
    }
    let mut chain = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        chain.push(s.to_string());
        source = s.source();
    }
    chain.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_registries_are_plain_http() {
        assert!(plain_http("127.0.0.1:5000", &[]));
        assert!(plain_http("127.8.9.1", &[]));
        assert!(plain_http("localhost:5000", &[]));
        assert!(plain_http("[::1]:5000", &[]));
        assert!(!plain_http("index.docker.io", &[]));
        assert!(!plain_http("10.0.0.5:5000", &[]));
        assert!(plain_http("10.0.0.5:5000", &["10.0.0.5".into()]));
        assert!(plain_http("10.0.0.5:5000", &["10.0.0.5:5000".into()]));
        assert!(!plain_http("10.0.0.5:5001", &["10.0.0.5:5000".into()]));
    }

    #[test]
    fn indexes_are_told_by_their_type_or_their_manifests() {
        assert!(is_index_bytes(
            br#"{"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}"#
        ));
        assert!(is_index_bytes(br#"{"schemaVersion":2,"manifests":[]}"#));
        assert!(!is_index_bytes(
            br#"{"mediaType":"application/vnd.docker.distribution.manifest.v2+json"}"#
        ));
    }
}

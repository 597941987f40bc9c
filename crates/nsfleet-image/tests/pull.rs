//! `Store::pull` against a real registry: Debian's docker-registry (the distribution
//! registry v2), started by each test on 127.0.0.1 at a free port with its storage in the
//! test's folder, and fed by skopeo with OCI layouts the tests build
//! (`build::write_oci_layout`). Nothing of the registry is mocked: a corrupted blob is a
//! blob file overwritten in the registry's own storage. A pull killed mid-download is this
//! test binary run again as the puller (`killed_pull_child`), SIGKILLed. Docker Hub's
//! bearer-token flow is that registry behind a front of the test's own (`TokenFront`),
//! which only asks for the token and gives it.
//!
//! Every test works in its own /tmp/nsfleet-test-pull-* folder; guards kill and reap the
//! registries and remove the folders even when a test fails. Skipped, with a note, where
//! docker-registry or skopeo is not installed.

use nsfleet_image::build::{write_oci_layout, Compression, Entry, ImageSpec, Layer};
use nsfleet_image::local_registry::{self, LocalRegistry};
use nsfleet_image::{host_arch, ImageRecord, PullOptions, PullProgress, RunConfig, Store};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

// ---- what the tests need installed ----

/// True when the tools are here; else says why the test is skipped.
fn tools() -> bool {
    let missing = local_registry::missing_tools();
    if !missing.is_empty() {
        eprintln!(
            "skipped: {} not installed (apt-get install docker-registry skopeo)",
            missing.join(" and ")
        );
    }
    missing.is_empty()
}

// ---- a folder removed whatever happens ----

struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = PathBuf::from(format!(
            "/tmp/nsfleet-test-pull-{test}-{}-{n}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn store(&self, name: &str) -> Store {
        Store::open(&self.0.join(name)).unwrap()
    }

    /// Options that read no one's real Docker config.
    fn opts(&self) -> PullOptions {
        PullOptions {
            docker_config: Some(self.0.join("no-docker-config.json")),
            ..PullOptions::default()
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

// ---- a registry, killed and reaped whatever happens ----

// ---- images ----

fn layer(entries: Vec<Entry>, compression: Compression) -> Layer {
    Layer {
        entries,
        compression,
    }
}

fn spec(layers: Vec<Layer>, architecture: &str) -> ImageSpec {
    ImageSpec {
        layers,
        run: RunConfig {
            cmd: vec!["/bin/app".into()],
            env: vec!["PATH=/bin".into()],
            ..RunConfig::default()
        },
        architecture: architecture.to_string(),
    }
}

fn base_layer() -> Layer {
    layer(
        vec![
            Entry::dir("bin"),
            Entry::file("bin/app", 0o755, b"#!/bin/sh\necho base\n".to_vec()),
            Entry::symlink("bin/sh", "app"),
        ],
        Compression::Gzip,
    )
}

fn top_layer(text: &str, compression: Compression) -> Layer {
    layer(
        vec![
            Entry::dir("etc"),
            Entry::file("etc/motd", 0o644, text.as_bytes().to_vec()),
        ],
        compression,
    )
}

/// An OCI layout under `dir/<name>` of `image`, tagged `1`.
fn layout(dir: &Path, name: &str, image: &ImageSpec) -> PathBuf {
    let path = dir.join(name);
    write_oci_layout(&path, "1", image).unwrap();
    path
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
}

fn blob(layout: &Path, digest: &str) -> PathBuf {
    layout
        .join("blobs/sha256")
        .join(digest.strip_prefix("sha256:").unwrap())
}

/// The layer blob digests of a layout's one image, lowest first.
fn layer_digests(layout: &Path) -> Vec<String> {
    let index = read_json(&layout.join("index.json"));
    let digest = index["manifests"][0]["digest"].as_str().unwrap();
    let manifest = read_json(&blob(layout, digest));
    let layers = manifest["layers"].as_array().unwrap();
    layers
        .iter()
        .map(|l| l["digest"].as_str().unwrap().to_string())
        .collect()
}

/// Makes a layout's one image the only entry of a multi-platform index (for `arch`).
fn wrap_in_index(layout: &Path, arch: &str) {
    let index = read_json(&layout.join("index.json"));
    let entry = &index["manifests"][0];
    let inner = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": entry["mediaType"],
            "digest": entry["digest"],
            "size": entry["size"],
            "platform": {"architecture": arch, "os": "linux"},
        }],
    });
    let bytes = serde_json::to_vec(&inner).unwrap();
    let digest = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
    fs::write(blob(layout, &digest), &bytes).unwrap();
    let outer = json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "digest": digest,
            "size": bytes.len(),
            "annotations": {"org.opencontainers.image.ref.name": "1"},
        }],
    });
    fs::write(
        layout.join("index.json"),
        serde_json::to_vec(&outer).unwrap(),
    )
    .unwrap();
}

// ---- pulling ----

fn pull(
    store: &Store,
    reference: &str,
    opts: &PullOptions,
) -> (anyhow::Result<ImageRecord>, Vec<PullProgress>) {
    let mut events = Vec::new();
    let result = store.pull(reference, opts, &mut |p| events.push(p));
    (result, events)
}

fn fetched(events: &[PullProgress]) -> Vec<String> {
    let digests = events.iter().filter_map(|e| match e {
        PullProgress::LayerStarted { digest, .. } => Some(digest.clone()),
        _ => None,
    });
    digests.collect()
}

fn present(events: &[PullProgress]) -> Vec<String> {
    let digests = events.iter().filter_map(|e| match e {
        PullProgress::LayerPresent { digest, .. } => Some(digest.clone()),
        _ => None,
    });
    digests.collect()
}

/// What a store holds: its files, relative, with their sizes (tmp's entries included).
fn contents(root: &Path) -> Vec<(String, u64)> {
    let mut all = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            if rel == "lock" {
                continue;
            }
            if meta.is_dir() {
                stack.push(path);
            }
            all.push((rel, if meta.is_file() { meta.len() } else { 0 }));
        }
    }
    all.sort();
    all
}

fn err_text(result: anyhow::Result<ImageRecord>) -> String {
    format!("{:#}", result.expect_err("the pull fails"))
}

#[test]
fn a_pull_gives_what_load_gives_and_fetches_each_layer_once() {
    if !tools() {
        return;
    }
    let s = Scratch::new("same");
    let registry = LocalRegistry::start(&s.0.join("registry"), None).unwrap();
    let image = spec(
        vec![base_layer(), top_layer("one\n", Compression::Zstd)],
        host_arch(),
    );
    let app = layout(&s.0, "app", &image);
    let reference = registry.push(&app, "1", "test/app:1", None, false).unwrap();

    let loaded = s
        .store("loaded")
        .load(&app, Some("app"), &mut |_| {})
        .unwrap();
    let store = s.store("pulled");
    let (record, events) = pull(&store, &reference, &s.opts());
    let record = record.unwrap();
    assert_eq!(record.id, loaded[0].id, "the same image id as load's");
    assert_eq!(record.layers, loaded[0].layers, "the same layers as load's");
    assert_eq!(record.size, loaded[0].size);
    assert_eq!(record.names, std::slice::from_ref(&reference));
    assert_eq!(fetched(&events), layer_digests(&app));
    assert!(matches!(
        &events[0],
        PullProgress::Resolved { layers: 2, .. }
    ));
    let found = store.find(&reference).unwrap().expect("found by its name");
    assert_eq!(found.run.cmd, ["/bin/app"]);
    assert_eq!(
        fs::read(found.layers[1].join("etc/motd")).unwrap(),
        b"one\n"
    );

    // Pulled again: nothing fetched, the names checked again.
    let (again, events) = pull(&store, &reference, &s.opts());
    assert_eq!(again.unwrap().id, record.id);
    assert_eq!(fetched(&events), Vec::<String>::new());
    assert_eq!(present(&events), layer_digests(&app));

    // An image sharing the base layer: only its own layer is fetched.
    let other = spec(
        vec![base_layer(), top_layer("two\n", Compression::Gzip)],
        host_arch(),
    );
    let other_layout = layout(&s.0, "other", &other);
    let other_ref = registry
        .push(&other_layout, "1", "test/other:1", None, false)
        .unwrap();
    let (pulled, events) = pull(&store, &other_ref, &s.opts());
    let pulled = pulled.unwrap();
    let digests = layer_digests(&other_layout);
    assert_eq!(present(&events), digests[..1]);
    assert_eq!(fetched(&events), digests[1..]);
    assert_eq!(pulled.layers[0], record.layers[0]);
    assert_eq!(store.list().unwrap().len(), 2);
    let tmp = fs::read_dir(store.root().join("tmp")).unwrap().count();
    assert_eq!(tmp, 0, "a finished pull leaves nothing in tmp");
}

#[test]
fn missing_tags_repositories_and_registries_are_named() {
    if !tools() {
        return;
    }
    let s = Scratch::new("missing");
    let registry = LocalRegistry::start(&s.0.join("registry"), None).unwrap();
    let app = layout(&s.0, "app", &spec(vec![base_layer()], host_arch()));
    registry.push(&app, "1", "test/app:1", None, false).unwrap();
    let store = s.store("store");
    let addr = registry.addr();

    let e = err_text(pull(&store, &format!("{addr}/test/app:nope"), &s.opts()).0);
    assert!(e.contains(&format!("image {addr}/test/app:nope")), "{e}");
    assert!(e.contains("no tag nope in repository test/app"), "{e}");

    let e = err_text(pull(&store, &format!("{addr}/test/nothere:1"), &s.opts()).0);
    assert!(e.contains(&format!("image {addr}/test/nothere:1")), "{e}");
    assert!(e.contains("no repository test/nothere"), "{e}");

    // A port nobody listens on: bound, read, and let go.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = err_text(pull(&store, &format!("127.0.0.1:{closed}/test/app:1"), &s.opts()).0);
    assert!(e.contains(&format!("http://127.0.0.1:{closed}")), "{e}");
    assert!(e.contains("connection refused"), "{e}");

    let e = err_text(pull(&store, "Not A Reference", &s.opts()).0);
    assert!(e.contains("not an image reference"), "{e}");
    assert!(store.list().unwrap().is_empty());
}

#[test]
fn images_for_other_platforms_are_refused_naming_theirs() {
    if !tools() {
        return;
    }
    let s = Scratch::new("platform");
    let registry = LocalRegistry::start(&s.0.join("registry"), None).unwrap();
    let other_arch = if host_arch() == "arm64" {
        "s390x"
    } else {
        "arm64"
    };
    let image = spec(vec![base_layer()], other_arch);

    let multi = layout(&s.0, "multi", &image);
    wrap_in_index(&multi, other_arch);
    let multi_ref = registry
        .push(&multi, "1", "test/multi:1", None, true)
        .unwrap();
    let store = s.store("store");
    let e = err_text(pull(&store, &multi_ref, &s.opts()).0);
    assert!(e.contains(&format!("image {multi_ref}")), "{e}");
    assert!(
        e.contains(&format!("no image for linux/{}", host_arch())),
        "{e}"
    );
    assert!(e.contains(&format!("it has linux/{other_arch}")), "{e}");

    let single = layout(&s.0, "single", &image);
    let single_ref = registry
        .push(&single, "1", "test/single:1", None, false)
        .unwrap();
    let e = err_text(pull(&store, &single_ref, &s.opts()).0);
    assert!(e.contains(&format!("is for {other_arch}")), "{e}");
    assert!(store.list().unwrap().is_empty());
}

#[test]
fn a_corrupted_blob_is_refused_and_the_store_is_unchanged() {
    if !tools() {
        return;
    }
    let s = Scratch::new("corrupt");
    let registry = LocalRegistry::start(&s.0.join("registry"), None).unwrap();
    let kept = layout(&s.0, "kept", &spec(vec![base_layer()], host_arch()));
    let kept_ref = registry
        .push(&kept, "1", "test/kept:1", None, false)
        .unwrap();
    let image = spec(
        vec![base_layer(), top_layer("damaged\n", Compression::Gzip)],
        host_arch(),
    );
    let app = layout(&s.0, "app", &image);
    let reference = registry.push(&app, "1", "test/app:1", None, false).unwrap();
    let store = s.store("store");
    pull(&store, &kept_ref, &s.opts()).0.unwrap();
    let before = contents(store.root());

    // The same length, other bytes: only the digest can tell.
    let top = layer_digests(&app)[1].clone();
    let file = registry.blob_file(&top);
    let mut bytes = fs::read(&file).unwrap();
    for b in bytes.iter_mut().skip(10) {
        *b ^= 0x5a;
    }
    fs::write(&file, &bytes).unwrap();

    let e = err_text(pull(&store, &reference, &s.opts()).0);
    assert!(e.contains(&format!("image {reference}")), "{e}");
    assert!(e.contains(&format!("layer {top}")), "{e}");
    assert!(e.contains("digest"), "{e}");
    assert_eq!(contents(store.root()), before, "the store is as it was");
}

#[test]
fn a_registry_with_basic_auth_takes_docker_config_credentials() {
    if !tools() {
        return;
    }
    let s = Scratch::new("auth");
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    let registry =
        LocalRegistry::start(&s.0.join("registry"), Some(&format!("tester:{hash}\n"))).unwrap();
    let app = layout(&s.0, "app", &spec(vec![base_layer()], host_arch()));
    let reference = registry
        .push(&app, "1", "test/app:1", Some("tester:s3cret"), false)
        .unwrap();
    let store = s.store("store");

    let e = err_text(pull(&store, &reference, &s.opts()).0);
    assert!(e.contains(&format!("image {reference}")), "{e}");
    assert!(e.contains("401"), "{e}");
    assert!(e.contains("anonymously"), "{e}");

    let config = |dir: &str, password: &str| {
        let dir = s.0.join(dir);
        fs::create_dir_all(&dir).unwrap();
        let auth = base64_of(&format!("tester:{password}"));
        let text = json!({"auths": {registry.addr(): {"auth": auth}}});
        fs::write(dir.join("config.json"), text.to_string()).unwrap();
        dir
    };
    let wrong = config("wrong", "guess").join("config.json");
    let opts = PullOptions {
        docker_config: Some(wrong.clone()),
        ..PullOptions::default()
    };
    let e = err_text(pull(&store, &reference, &opts).0);
    assert!(
        e.contains(&format!("credentials of {}", wrong.display())),
        "{e}"
    );

    // As `docker login` leaves it: $DOCKER_CONFIG/config.json, found by default.
    std::env::set_var("DOCKER_CONFIG", config("right", "s3cret"));
    let (record, _) = pull(&store, &reference, &PullOptions::default());
    std::env::remove_var("DOCKER_CONFIG");
    assert_eq!(record.unwrap().names, std::slice::from_ref(&reference));

    // Kept by a credential helper, as Docker Desktop keeps them (`auths` then holds an
    // empty entry): the helper is asked for this registry, and the pull logs in with its
    // answer. The helper is a program on PATH (appended to, so nothing else changes).
    let bin = s.0.join("bin");
    fs::create_dir_all(&bin).unwrap();
    let helper = bin.join("docker-credential-nsfleet-kt");
    let script = format!(
        "#!/bin/sh\n[ \"$1\" = get ] || exit 2\nread -r server\nif [ \"$server\" = \"{}\" ]; then\n  echo '{{\"ServerURL\":\"'$server'\",\"Username\":\"tester\",\"Secret\":\"s3cret\"}}'\nelse\n  echo 'credentials not found in native keychain'; exit 1\nfi\n",
        registry.addr()
    );
    fs::write(&helper, script).unwrap();
    fs::set_permissions(&helper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = std::env::var("PATH").unwrap_or_default();
    std::env::set_var("PATH", format!("{path}:{}", bin.display()));
    let stored = s.0.join("helper/config.json");
    fs::create_dir_all(stored.parent().unwrap()).unwrap();
    let text = json!({"auths": {registry.addr(): {}}, "credsStore": "nsfleet-kt"});
    fs::write(&stored, text.to_string()).unwrap();
    let opts = PullOptions {
        docker_config: Some(stored),
        ..PullOptions::default()
    };
    let again = s.store("store-helper");
    let (record, _) = pull(&again, &reference, &opts);
    assert_eq!(record.unwrap().names, [reference]);
}

#[test]
fn a_registry_that_wants_a_bearer_token_gets_one_for_the_docker_config_credentials() {
    if !tools() {
        return;
    }
    let s = Scratch::new("token");
    let registry = LocalRegistry::start(&s.0.join("registry"), None).unwrap();
    let app = layout(&s.0, "app", &spec(vec![base_layer()], host_arch()));
    registry.push(&app, "1", "test/app:1", None, false).unwrap();
    let front = TokenFront::start(registry.addr(), "tester:s3cret");
    let reference = format!("{}/test/app:1", front.addr);
    let store = s.store("store");

    // Anonymously, the token service refuses: said, with where credentials would be.
    let e = err_text(pull(&store, &reference, &s.opts()).0);
    assert!(e.contains(&format!("image {reference}")), "{e}");
    assert!(e.contains("token service"), "{e}");
    assert!(e.contains("anonymously"), "{e}");

    // As `docker login` leaves it, for the registry (not the token service).
    let dir = s.0.join("docker");
    fs::create_dir_all(&dir).unwrap();
    let auth = base64_of("tester:s3cret");
    let text = json!({"auths": {front.addr.clone(): {"auth": auth}}});
    fs::write(dir.join("config.json"), text.to_string()).unwrap();
    let opts = PullOptions {
        docker_config: Some(dir.join("config.json")),
        ..PullOptions::default()
    };
    let (record, events) = pull(&store, &reference, &opts);
    assert_eq!(record.unwrap().names, [reference]);
    assert!(!fetched(&events).is_empty());
    let scopes = front.scopes.lock().unwrap().clone();
    assert!(
        scopes
            .iter()
            .any(|q| q.contains("scope=repository%3Atest%2Fapp%3Apull")),
        "the token asked for: {scopes:?}"
    );
}

/// A registry that wants a bearer token, as Docker Hub does, in front of a real one: a
/// `/v2/` request without `Authorization: Bearer TOKEN` gets 401 and a challenge naming
/// the token service (`/token` here, as Docker Hub's auth.docker.io), which gives TOKEN
/// for the basic credentials `user:password` only; with it, the registry's own answer.
/// Each connection gets one answer and is closed. Its threads end with the test process.
struct TokenFront {
    addr: String,
    /// The query strings the token service was asked with (scope, service).
    scopes: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

const TOKEN: &str = "nsfleet-test-token";

impl TokenFront {
    fn start(registry: String, credentials: &str) -> TokenFront {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let scopes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let front = TokenFront {
            addr: addr.clone(),
            scopes: scopes.clone(),
        };
        let basic = format!("Basic {}", base64_of(credentials));
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (registry, basic, addr, scopes) = (
                    registry.clone(),
                    basic.clone(),
                    addr.clone(),
                    scopes.clone(),
                );
                std::thread::spawn(move || {
                    let _ = answer(conn, &registry, &basic, &addr, &scopes);
                });
            }
        });
        front
    }
}

/// One request of `conn`, answered (see [`TokenFront`]).
fn answer(
    mut conn: std::net::TcpStream,
    registry: &str,
    basic: &str,
    addr: &str,
    scopes: &std::sync::Mutex<Vec<String>>,
) -> std::io::Result<()> {
    use std::io::{BufRead, BufReader, Write};
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end().to_string();
        if line.is_empty() {
            break;
        }
        headers.push(line);
    }
    let header = |name: &str| {
        (headers.iter())
            .find_map(|h| {
                h.split_once(':')
                    .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            })
            .map(|(_, v)| v.trim().to_string())
    };
    let target = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or("/")
        .to_string();
    let reply = |conn: &mut std::net::TcpStream, status: &str, extra: &str, body: &str| {
        write!(
            conn,
            "HTTP/1.1 {status}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    if let Some(query) = target.strip_prefix("/token") {
        scopes.lock().unwrap().push(query.to_string());
        if header("Authorization").as_deref() != Some(basic) {
            return reply(&mut conn, "401 Unauthorized", "", "{}");
        }
        let token = json!({"token": TOKEN, "access_token": TOKEN, "expires_in": 300});
        let json = "Content-Type: application/json\r\n";
        return reply(&mut conn, "200 OK", json, &token.to_string());
    }
    if header("Authorization") != Some(format!("Bearer {TOKEN}")) {
        let repository = (target.strip_prefix("/v2/"))
            .and_then(|t| t.split_once("/manifests/").or(t.split_once("/blobs/")))
            .map(|(name, _)| format!(",scope=\"repository:{name}:pull\""))
            .unwrap_or_default();
        let challenge = format!(
            "WWW-Authenticate: Bearer realm=\"http://{addr}/token\",service=\"nsfleet-test\"{repository}\r\n"
        );
        return reply(&mut conn, "401 Unauthorized", &challenge, "{}");
    }
    // The registry's answer, relayed as it comes.
    let mut upstream = std::net::TcpStream::connect(registry)?;
    let method = request_line.split_whitespace().next().unwrap_or("GET");
    let mut ask =
        format!("{method} {target} HTTP/1.1\r\nHost: {registry}\r\nConnection: close\r\n");
    for h in &headers {
        let name = h.split(':').next().unwrap_or("").to_ascii_lowercase();
        if !["host", "authorization", "connection"].contains(&name.as_str()) {
            ask.push_str(&format!("{h}\r\n"));
        }
    }
    ask.push_str("\r\n");
    upstream.write_all(ask.as_bytes())?;
    std::io::copy(&mut upstream, &mut conn)?;
    Ok(())
}

/// Base64 as Docker's config writes `auth` (standard alphabet, padded).
fn base64_of(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// A process, killed (SIGKILL) and reaped whatever happens.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The files under `dir` whose names end with `suffix`.
fn files_ending(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            found.extend(files_ending(&path, suffix));
        } else if path.to_string_lossy().ends_with(suffix) {
            found.push(path);
        }
    }
    found
}

/// The child's half of `a_killed_pull_leaves_only_tmp_entries`: a pull, run only when
/// that test runs this binary again with NSFLEET_TEST_PULL_CHILD="STORE REFERENCE MARK".
/// Once its first bytes are written, it makes the file MARK and stops there (the download
/// is mid-way, its blob half-written) until it is killed: whatever the machine's pace.
#[test]
fn killed_pull_child() {
    let Ok(args) = std::env::var("NSFLEET_TEST_PULL_CHILD") else {
        return;
    };
    let mut args = args.split(' ');
    let (root, reference, mark) = (
        args.next().unwrap(),
        args.next().unwrap(),
        args.next().unwrap(),
    );
    let opts = PullOptions {
        docker_config: Some(PathBuf::from(root).join("no-docker-config.json")),
        ..PullOptions::default()
    };
    let store = Store::open(Path::new(root)).unwrap();
    let _ = store.pull(reference, &opts, &mut |p| {
        if matches!(p, PullProgress::LayerBytes { .. }) {
            fs::write(mark, "mid-way").unwrap();
            std::thread::sleep(Duration::from_secs(3600));
        }
    });
}

#[test]
fn a_killed_pull_leaves_only_tmp_entries() {
    if !tools() {
        return;
    }
    let s = Scratch::new("killed");
    let registry = LocalRegistry::start(&s.0.join("registry"), None).unwrap();
    // Big enough to be caught in the middle of its download.
    let big = layer(
        vec![Entry::file("big", 0o644, vec![0x5a; 32 << 20])],
        Compression::None,
    );
    let app = layout(&s.0, "app", &spec(vec![big], host_arch()));
    let reference = registry.push(&app, "1", "test/app:1", None, false).unwrap();
    let store = s.store("store");

    let mark = s.0.join("mid-way");
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["killed_pull_child", "--exact", "--test-threads=1"])
        .env(
            "NSFLEET_TEST_PULL_CHILD",
            format!("{} {reference} {}", store.root().display(), mark.display()),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = Killed(child);
    let tmp = store.root().join("tmp");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !mark.exists() {
        assert!(
            Instant::now() < deadline,
            "the pull never started its download"
        );
        assert!(
            child.0.try_wait().unwrap().is_none(),
            "the pull ended before it could be killed"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(
        !files_ending(&tmp, ".part").is_empty(),
        "a blob half-written"
    );
    child.0.kill().unwrap();
    child.0.wait().unwrap();

    assert!(store.list().unwrap().is_empty(), "no image recorded");
    let layers = fs::read_dir(store.root().join("layers")).unwrap().count();
    assert_eq!(layers, 0, "no layer moved into place");
    assert!(
        fs::read_dir(&tmp).unwrap().count() > 0,
        "its tmp entries stay"
    );

    // The next writer sweeps them, and the pull succeeds.
    let (record, _) = pull(&store, &reference, &s.opts());
    assert_eq!(record.unwrap().names, [reference]);
    assert_eq!(fs::read_dir(&tmp).unwrap().count(), 0, "swept");
}

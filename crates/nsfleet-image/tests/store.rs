//! The image store on images these tests build themselves (tar's Builder) as OCI layouts
//! (folders and tars) and docker-archives: loading, finding, sharing layers, whiteouts,
//! compression, holds, removal, pruning, sweeping, and hostile inputs refused with the
//! store left as it was. Every test works in its own /tmp/nsfleet-test-image-* folder,
//! removed by a guard even when the test fails. Run as root (owners are kept).

use nsfleet_image::{ImageId, Store};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::fs;
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

// ---- a folder removed whatever happens ----

struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = PathBuf::from(format!(
            "/tmp/nsfleet-test-image-{test}-{}-{n}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn store(&self) -> Store {
        Store::open(&self.0.join("store")).unwrap()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

// ---- layers ----

enum E<'a> {
    Dir(&'a str),
    File(&'a str, &'a [u8]),
    Mode(&'a str, &'a [u8], u32, u64),
    Hard(&'a str, &'a str),
    Sym(&'a str, &'a str),
    Char(&'a str),
    Fifo(&'a str),
    Xattr(&'a str, &'a str, &'a [u8]),
}

/// A header whose name and link name are written as raw bytes: tar's Builder refuses `..`,
/// and hostile layers need it.
fn header(
    kind: tar::EntryType,
    path: &str,
    link: &str,
    size: u64,
    mode: u32,
    uid: u64,
) -> tar::Header {
    let mut h = tar::Header::new_ustar();
    h.set_entry_type(kind);
    h.set_size(size);
    h.set_mode(mode);
    h.set_uid(uid);
    h.set_gid(uid);
    h.set_mtime(1_700_000_000);
    let old = h.as_old_mut();
    old.name[..path.len()].copy_from_slice(path.as_bytes());
    old.linkname[..link.len()].copy_from_slice(link.as_bytes());
    h.set_cksum();
    h
}

fn layer(entries: &[E]) -> Vec<u8> {
    use tar::EntryType as T;
    let mut b = tar::Builder::new(Vec::new());
    for e in entries {
        let (h, data): (tar::Header, &[u8]) = match *e {
            E::Dir(p) => (header(T::Directory, p, "", 0, 0o755, 0), b""),
            E::File(p, d) => (header(T::Regular, p, "", d.len() as u64, 0o644, 0), d),
            E::Mode(p, d, mode, uid) => (header(T::Regular, p, "", d.len() as u64, mode, uid), d),
            E::Hard(p, to) => (header(T::Link, p, to, 0, 0o644, 0), b""),
            E::Sym(p, to) => (header(T::Symlink, p, to, 0, 0o777, 0), b""),
            E::Char(p) => (header(T::Char, p, "", 0, 0o666, 0), b""),
            E::Fifo(p) => (header(T::Fifo, p, "", 0, 0o600, 0), b""),
            E::Xattr(p, name, value) => {
                let key = format!("SCHILY.xattr.{name}");
                b.append_pax_extensions([(key.as_str(), value)]).unwrap();
                (header(T::Regular, p, "", 1, 0o644, 0), b"x")
            }
        };
        b.append(&h, data).unwrap();
    }
    b.into_inner().unwrap()
}

fn sha(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn hex_of(digest: &str) -> &str {
    digest.strip_prefix("sha256:").unwrap()
}

#[derive(Clone, Copy, PartialEq)]
enum Pack {
    Plain,
    Gzip,
    Zstd,
}

fn pack(tar: &[u8], how: Pack) -> Vec<u8> {
    match how {
        Pack::Plain => tar.to_vec(),
        Pack::Gzip => {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(tar).unwrap();
            gz.finish().unwrap()
        }
        Pack::Zstd => zstd::encode_all(tar, 3).unwrap(),
    }
}

// ---- images ----

#[derive(Clone)]
struct TestImage {
    config: Vec<u8>,
    /// Each layer's blob (maybe compressed) and media type.
    blobs: Vec<(Vec<u8>, &'static str)>,
}

impl TestImage {
    fn id(&self) -> String {
        sha(&self.config)
    }
}

fn host() -> &'static str {
    nsfleet_image::host_arch()
}

/// An image of these layers (uncompressed tars), packed as `how`, for `arch`.
fn image_for(arch: &str, layers: &[Vec<u8>], how: Pack, cmd: &str) -> TestImage {
    let diff_ids: Vec<String> = layers.iter().map(|l| sha(l)).collect();
    image_with_diff_ids(arch, layers, how, cmd, diff_ids)
}

fn image(layers: &[Vec<u8>], how: Pack) -> TestImage {
    image_for(host(), layers, how, "/bin/sh")
}

fn image_with_diff_ids(
    arch: &str,
    layers: &[Vec<u8>],
    how: Pack,
    cmd: &str,
    diff_ids: Vec<String>,
) -> TestImage {
    let config = json!({
        "architecture": arch,
        "os": "linux",
        "created": "2024-05-22T18:18:12.052034407Z",
        "config": {"Env": ["PATH=/bin", "A=b"], "Cmd": [cmd], "WorkingDir": "/srv", "User": "1000"},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    });
    let media = match how {
        Pack::Plain => "application/vnd.oci.image.layer.v1.tar",
        Pack::Gzip => "application/vnd.oci.image.layer.v1.tar+gzip",
        Pack::Zstd => "application/vnd.oci.image.layer.v1.tar+zstd",
    };
    TestImage {
        config: serde_json::to_vec(&config).unwrap(),
        blobs: layers.iter().map(|l| (pack(l, how), media)).collect(),
    }
}

fn descriptor(media: &str, blob: &[u8]) -> serde_json::Value {
    json!({"mediaType": media, "digest": sha(blob), "size": blob.len()})
}

fn put_blob(dir: &Path, blob: &[u8]) {
    let path = dir.join("blobs/sha256").join(hex_of(&sha(blob)));
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, blob).unwrap();
}

/// An OCI image layout folder with these images, each with its `ref.name` annotation.
fn write_oci(dir: &Path, images: &[(Option<&str>, &TestImage)]) {
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    let mut manifests = Vec::new();
    for (name, img) in images {
        put_blob(dir, &img.config);
        let layers: Vec<_> = img
            .blobs
            .iter()
            .map(|(b, m)| {
                put_blob(dir, b);
                descriptor(m, b)
            })
            .collect();
        let manifest = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": descriptor("application/vnd.oci.image.config.v1+json", &img.config),
            "layers": layers,
        }))
        .unwrap();
        put_blob(dir, &manifest);
        let mut d = descriptor("application/vnd.oci.image.manifest.v1+json", &manifest);
        if let Some(n) = name {
            d["annotations"] = json!({"org.opencontainers.image.ref.name": n});
        }
        manifests.push(d);
    }
    let index = json!({"schemaVersion": 2, "manifests": manifests});
    fs::write(dir.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
}

/// A tar of the folder `dir`'s files (an OCI layout tar).
fn tar_of(dir: &Path, out: &Path) {
    let mut b = tar::Builder::new(fs::File::create(out).unwrap());
    b.append_dir_all(".", dir).unwrap();
    b.finish().unwrap();
}

/// A `docker save` archive: legacy (`<id>.json`, `<n>/layer.tar`) or as Docker 25 and
/// later write it (everything under `blobs/sha256/`).
fn write_docker(out: &Path, images: &[(&[&str], &TestImage)], blobs_style: bool) {
    let mut b = tar::Builder::new(fs::File::create(out).unwrap());
    let add = |b: &mut tar::Builder<fs::File>, path: &str, data: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, path, data).unwrap();
    };
    let mut manifest = Vec::new();
    for (i, (tags, img)) in images.iter().enumerate() {
        let config_path = if blobs_style {
            format!("blobs/sha256/{}", hex_of(&img.id()))
        } else {
            format!("{}.json", hex_of(&img.id()))
        };
        add(&mut b, &config_path, &img.config);
        let mut layers = Vec::new();
        for (j, (blob, _)) in img.blobs.iter().enumerate() {
            let path = if blobs_style {
                format!("blobs/sha256/{}", hex_of(&sha(blob)))
            } else {
                format!("{i}-{j}/layer.tar")
            };
            add(&mut b, &path, blob);
            layers.push(path);
        }
        manifest.push(json!({"Config": config_path, "RepoTags": tags, "Layers": layers}));
    }
    add(
        &mut b,
        "manifest.json",
        &serde_json::to_vec(&manifest).unwrap(),
    );
    b.finish().unwrap();
}

fn base_layer() -> Vec<u8> {
    layer(&[
        E::Dir("bin/"),
        E::File("bin/sh", b"#!shell"),
        E::Dir("etc/"),
        E::File("etc/os-release", b"ID=test"),
    ])
}

fn quiet() -> impl FnMut(&str) {
    |_: &str| {}
}

/// The store's layers, images and names: what a refused load must leave as it was. Its
/// tmp must be empty too.
fn snapshot(store: &Store) -> (Vec<String>, Vec<String>, String) {
    let ls = |sub: &str| {
        let mut v: Vec<String> = fs::read_dir(store.root().join(sub))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert!(ls("tmp").is_empty(), "tmp left behind: {:?}", ls("tmp"));
    let names = fs::read_to_string(store.root().join("names.json")).unwrap_or_default();
    (ls("layers"), ls("images"), names)
}

// ---- loading and finding ----

#[test]
fn an_oci_layout_loads_and_is_found_by_short_name_and_id_prefix() {
    let s = Scratch::new("oci");
    let img = image(&[base_layer()], Pack::Plain);
    write_oci(
        &s.0.join("layout"),
        &[(Some("docker.io/library/demo:1"), &img)],
    );
    let store = s.store();
    let mut lines = Vec::new();
    let loaded = store
        .load(&s.0.join("layout"), None, &mut |l| {
            lines.push(l.to_string())
        })
        .unwrap();
    assert_eq!(loaded.len(), 1);
    assert_eq!(loaded[0].id.0, img.id());
    assert_eq!(loaded[0].names, ["docker.io/library/demo:1"]);
    assert!(
        lines.iter().any(|l| l.contains("layer 1 of 1")),
        "{lines:?}"
    );

    let found = store.find("demo:1").unwrap().expect("found by short name");
    assert_eq!(found.name, "docker.io/library/demo:1");
    assert_eq!(found.layers.len(), 1);
    assert!(found.layers[0].join("bin/sh").is_file());
    assert_eq!(found.run.cmd, ["/bin/sh"]);
    assert_eq!(found.run.env, ["PATH=/bin", "A=b"]);
    assert_eq!(found.run.workdir.as_deref(), Some("/srv"));
    assert_eq!(found.run.user.as_deref(), Some("1000"));

    let id = img.id();
    let prefix = &hex_of(&id)[..6];
    let by_id = store.find(prefix).unwrap().expect("found by id prefix");
    assert_eq!(by_id.id, found.id);
    assert_eq!(by_id.name, img.id());
    assert!(store.find(&format!("sha256:{prefix}")).unwrap().is_some());
    assert!(store.find("demo:2").unwrap().is_none());
    assert!(store.find("ffff").unwrap().is_none());
}

#[test]
fn a_docker_archive_loads_legacy_and_docker_25_style() {
    for blobs_style in [false, true] {
        let s = Scratch::new("docker");
        let img = image(
            &[base_layer(), layer(&[E::File("etc/motd", b"hi")])],
            Pack::Plain,
        );
        let archive = s.0.join("image.tar");
        write_docker(
            &archive,
            &[(&["demo:latest", "ghcr.io/o/demo:2"], &img)],
            blobs_style,
        );
        let store = s.store();
        let loaded = store.load(&archive, None, &mut quiet()).unwrap();
        assert_eq!(
            loaded[0].names,
            ["docker.io/library/demo:latest", "ghcr.io/o/demo:2"]
        );
        assert_eq!(loaded[0].layers.len(), 2);
        assert_eq!(loaded[0].created_unix, Some(1716401892));
        let found = store.find("demo").unwrap().unwrap();
        assert!(found.layers[1].join("etc/motd").is_file());
        assert_eq!(
            store.find("ghcr.io/o/demo:2").unwrap().unwrap().id,
            found.id
        );
    }
}

#[test]
fn an_oci_layout_tar_loads_and_a_tag_only_name_takes_the_repository_given() {
    let s = Scratch::new("ocitar");
    let img = image(&[base_layer()], Pack::Gzip);
    write_oci(&s.0.join("layout"), &[(Some("3.20"), &img)]);
    tar_of(&s.0.join("layout"), &s.0.join("layout.tar"));
    let store = s.store();
    let loaded = store
        .load(&s.0.join("layout.tar"), Some("alpine"), &mut quiet())
        .unwrap();
    assert_eq!(loaded[0].names, ["docker.io/library/alpine:3.20"]);
    // A name with its own tag is taken as it is.
    let s2 = Scratch::new("ocitar2");
    let store2 = s2.store();
    let loaded = store2
        .load(&s.0.join("layout"), Some("me/app:dev"), &mut quiet())
        .unwrap();
    assert_eq!(loaded[0].names, ["docker.io/me/app:dev"]);
}

#[test]
fn layers_two_images_share_are_unpacked_once() {
    let s = Scratch::new("shared");
    let a = image_for(
        host(),
        &[base_layer(), layer(&[E::File("a", b"a")])],
        Pack::Plain,
        "a",
    );
    let b = image_for(
        host(),
        &[base_layer(), layer(&[E::File("b", b"b")])],
        Pack::Gzip,
        "b",
    );
    write_oci(&s.0.join("a"), &[(Some("a:1"), &a)]);
    write_oci(&s.0.join("b"), &[(Some("b:1"), &b)]);
    let store = s.store();
    store.load(&s.0.join("a"), None, &mut quiet()).unwrap();
    let mut lines = Vec::new();
    store
        .load(&s.0.join("b"), None, &mut |l| lines.push(l.to_string()))
        .unwrap();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("layer 1 of 2") && l.contains("already in the store")),
        "{lines:?}"
    );
    let (fa, fb) = (
        store.find("a:1").unwrap().unwrap(),
        store.find("b:1").unwrap().unwrap(),
    );
    assert_eq!(
        fa.layers[0], fb.layers[0],
        "one folder for the shared layer"
    );
    assert_ne!(fa.layers[1], fb.layers[1]);
    assert_eq!(
        fs::read_dir(store.root().join("layers")).unwrap().count(),
        3
    );
}

#[test]
fn whiteouts_and_opaque_folders_take_overlayfs_form() {
    let s = Scratch::new("whiteout");
    let lower = layer(&[
        E::Dir("etc/"),
        E::File("etc/a", b"a"),
        E::File("etc/b", b"b"),
        E::Dir("opt/"),
        E::File("opt/x", b"x"),
    ]);
    let upper = layer(&[
        E::File("etc/.wh.a", b""),
        E::Dir("opt/"),
        E::File("opt/.wh..wh..opq", b""),
        E::File("opt/y", b"y"),
    ]);
    let img = image(&[lower, upper], Pack::Plain);
    write_oci(&s.0.join("layout"), &[(Some("wh:1"), &img)]);
    let store = s.store();
    store.load(&s.0.join("layout"), None, &mut quiet()).unwrap();
    let found = store.find("wh:1").unwrap().unwrap();
    let top = &found.layers[1];
    let gone = fs::symlink_metadata(top.join("etc/a")).unwrap();
    assert!(
        gone.file_type().is_char_device(),
        "a whiteout is a character device"
    );
    assert_eq!(gone.rdev(), 0, "device 0/0");
    assert!(!top.join("etc/.wh.a").exists());
    let opaque = nsfleet_sys::lgetxattr(&top.join("opt"), "trusted.overlay.opaque", 16).unwrap();
    assert_eq!(opaque, b"y");
    assert!(!top.join("opt/.wh..wh..opq").exists());
    assert!(top.join("opt/y").is_file());
    assert!(
        found.layers[0].join("etc/a").is_file(),
        "the lower layer is untouched"
    );
}

#[test]
fn gzip_and_zstd_layers_are_recognized_by_their_bytes() {
    let s = Scratch::new("compress");
    let store = s.store();
    for (how, name) in [(Pack::Gzip, "gz:1"), (Pack::Zstd, "zst:1")] {
        let img = image_for(host(), &[layer(&[E::File(name, b"data")])], how, name);
        let dir = s.0.join(name);
        write_oci(&dir, &[(Some(name), &img)]);
        store.load(&dir, None, &mut quiet()).unwrap();
        let found = store.find(name).unwrap().unwrap();
        assert_eq!(fs::read(found.layers[0].join(name)).unwrap(), b"data");
    }
}

#[test]
fn owners_modes_links_fifos_and_xattrs_are_kept() {
    let s = Scratch::new("meta");
    let l = layer(&[
        E::Dir("bin/"),
        E::Mode("bin/su", b"su", 0o4755, 1234),
        E::Hard("bin/su2", "bin/su"),
        E::Sym("bin/sh", "/bin/busybox"),
        E::Fifo("run.fifo"),
        E::Xattr("tagged", "user.note", b"hello"),
        E::File("./dup", b"first"),
        E::File("dup", b"second"),
        E::File("/abs", b"leading slash dropped"),
    ]);
    let img = image(&[l], Pack::Plain);
    write_oci(&s.0.join("layout"), &[(Some("meta:1"), &img)]);
    let store = s.store();
    store.load(&s.0.join("layout"), None, &mut quiet()).unwrap();
    let top = &store.find("meta:1").unwrap().unwrap().layers[0];
    let su = fs::symlink_metadata(top.join("bin/su")).unwrap();
    assert_eq!(su.mode() & 0o7777, 0o4755);
    assert_eq!((su.uid(), su.gid()), (1234, 1234));
    assert_eq!(su.mtime(), 1_700_000_000);
    assert_eq!(
        su.ino(),
        fs::symlink_metadata(top.join("bin/su2")).unwrap().ino()
    );
    assert_eq!(
        fs::read_link(top.join("bin/sh")).unwrap(),
        Path::new("/bin/busybox")
    );
    assert!(fs::symlink_metadata(top.join("run.fifo"))
        .unwrap()
        .file_type()
        .is_fifo());
    assert_eq!(
        nsfleet_sys::lgetxattr(&top.join("tagged"), "user.note", 64).unwrap(),
        b"hello"
    );
    assert_eq!(fs::read(top.join("dup")).unwrap(), b"second");
    assert!(top.join("abs").is_file());
}

#[test]
fn ls_lists_every_image_sorted_by_name() {
    let s = Scratch::new("ls");
    let a = image_for(host(), &[base_layer()], Pack::Plain, "a");
    let b = image_for(
        host(),
        &[base_layer(), layer(&[E::File("z", b"12345")])],
        Pack::Plain,
        "b",
    );
    write_docker(
        &s.0.join("x.tar"),
        &[(&["zeta:1"], &a), (&["alpha:1"], &b)],
        false,
    );
    let store = s.store();
    store.load(&s.0.join("x.tar"), None, &mut quiet()).unwrap();
    let list = store.list().unwrap();
    let names: Vec<&str> = list.iter().map(|r| r.names[0].as_str()).collect();
    assert_eq!(
        names,
        ["docker.io/library/alpha:1", "docker.io/library/zeta:1"]
    );
    assert_eq!(list[0].layers.len(), 2);
    assert_eq!(list[0].architecture, host());
    assert_eq!(list[0].size, list[1].size + 5);
}

// ---- holds, removal, pruning ----

#[test]
fn rm_refuses_a_held_image_until_the_hold_drops() {
    let s = Scratch::new("rmheld");
    let img = image(&[base_layer()], Pack::Plain);
    write_oci(&s.0.join("layout"), &[(Some("held:1"), &img)]);
    let store = s.store();
    store.load(&s.0.join("layout"), None, &mut quiet()).unwrap();
    let hold = store.hold("fleet lab", &[ImageId(img.id())]).unwrap();
    let e = store.remove("held:1").unwrap_err().to_string();
    assert!(
        e.contains("fleet lab") && e.contains(&std::process::id().to_string()),
        "{e}"
    );
    assert!(store.find("held:1").unwrap().is_some());
    drop(hold);
    let removed = store.remove("held:1").unwrap();
    assert_eq!(removed.names, ["docker.io/library/held:1"]);
    assert_eq!(removed.images, [ImageId(img.id())]);
    assert_eq!(removed.layers.len(), 1);
    assert!(removed.bytes_freed > 0);
    assert!(store.find("held:1").unwrap().is_none());
    assert_eq!(
        fs::read_dir(store.root().join("layers")).unwrap().count(),
        0
    );
    assert!(
        store.hold("x", &[ImageId(img.id())]).is_err(),
        "no hold on an image that is gone"
    );
}

#[test]
fn a_hold_lives_on_in_a_forked_child_and_dies_with_it() {
    let s = Scratch::new("fork");
    let img = image(&[base_layer()], Pack::Plain);
    write_oci(&s.0.join("layout"), &[(Some("forked:1"), &img)]);
    let store = s.store();
    store.load(&s.0.join("layout"), None, &mut quiet()).unwrap();
    let hold = store.hold("node r1", &[ImageId(img.id())]).unwrap();
    // SAFETY (test code): the child only waits for signals, which is async-signal-safe.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        loop {
            // SAFETY: pause(2) takes nothing.
            unsafe { libc::pause() };
        }
    }
    assert!(pid > 0);
    drop(hold.into_fd()); // our descriptor closes; the child's copy holds
    let kept = store.remove("forked:1");
    // SAFETY (test code): our own child.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    let e = kept.unwrap_err().to_string();
    assert!(e.contains("node r1"), "{e}");
    store
        .remove("forked:1")
        .expect("the hold died with the child");
    let pruned = store.prune(false).unwrap();
    assert_eq!(
        pruned.stale_holds, 1,
        "the given-away hold file is stale now"
    );
}

#[test]
fn prune_removes_unnamed_images_and_orphan_layers_and_leaves_held_ones() {
    let s = Scratch::new("prune");
    let old = image_for(
        host(),
        &[base_layer(), layer(&[E::File("v", b"1")])],
        Pack::Plain,
        "v1",
    );
    let new = image_for(
        host(),
        &[base_layer(), layer(&[E::File("v", b"2")])],
        Pack::Plain,
        "v2",
    );
    let held = image_for(host(), &[layer(&[E::File("h", b"h")])], Pack::Plain, "h");
    let store = s.store();
    for (dir, img, name) in [
        ("old", &old, "app:1"),
        ("new", &new, "app:1"),
        ("held", &held, "held:1"),
    ] {
        write_oci(&s.0.join(dir), &[(Some(name), img)]);
        store.load(&s.0.join(dir), None, &mut quiet()).unwrap();
    }
    // app:1 moved to the new image: the old one has no name left.
    let list = store.list().unwrap();
    assert!(list
        .iter()
        .any(|r| r.id.0 == old.id() && r.names.is_empty()));
    let _hold = store.hold("fleet lab", &[ImageId(held.id())]).unwrap();
    let pruned = store.prune(false).unwrap();
    assert_eq!(pruned.images, [ImageId(old.id())]);
    assert_eq!(
        pruned.layers.len(),
        1,
        "the old image's own layer; the base is shared"
    );
    assert!(pruned.bytes_freed > 0);
    let pruned = store.prune(true).unwrap();
    assert_eq!(
        pruned.images,
        [ImageId(new.id())],
        "--all spares the held image"
    );
    assert_eq!(pruned.names, ["docker.io/library/app:1"]);
    assert!(store.find("held:1").unwrap().is_some());
    assert_eq!(
        fs::read_dir(store.root().join("layers")).unwrap().count(),
        1
    );
}

#[test]
fn unfinished_work_of_a_killed_writer_is_swept_and_a_living_one_is_not() {
    let s = Scratch::new("sweep");
    let store = s.store();
    let tmp = store.root().join("tmp");
    fs::create_dir_all(tmp.join("999999-1-0/layer")).unwrap();
    fs::write(tmp.join("999999-1-0/layer/f"), b"half a layer").unwrap();
    fs::write(tmp.join("999999-1-0.lock"), b"").unwrap();
    fs::create_dir_all(tmp.join("999999-2-0")).unwrap(); // a folder whose lock file went
    fs::create_dir_all(tmp.join("alive")).unwrap();
    let lock = fs::File::create(tmp.join("alive.lock")).unwrap();
    nsfleet_sys::flock(
        std::os::fd::AsFd::as_fd(&lock),
        nsfleet_sys::FlockOp::Exclusive,
    )
    .unwrap();
    // The next writer (a load) sweeps.
    let img = image(&[base_layer()], Pack::Plain);
    write_oci(&s.0.join("layout"), &[(Some("x:1"), &img)]);
    store.load(&s.0.join("layout"), None, &mut quiet()).unwrap();
    let mut left: Vec<String> = fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["alive", "alive.lock"]);
    drop(lock);
    let pruned = store.prune(false).unwrap();
    assert_eq!(pruned.unfinished, ["alive"]);
}

// ---- hostile and wrong inputs ----

/// Loads an image of `layers` into a store that already has one, and checks the load is
/// refused with an error that has every one of `says`, the store left as it was.
fn refused(test: &str, layers: &[Vec<u8>], says: &[&str]) {
    refused_image(test, image(layers, Pack::Plain), says);
}

fn refused_image(test: &str, bad: TestImage, says: &[&str]) {
    refused_tampered(test, bad, |_| {}, says)
}

/// Like `refused_image`, with the bad layout changed by `tamper` once written.
fn refused_tampered(test: &str, bad: TestImage, tamper: impl Fn(&Path), says: &[&str]) {
    let s = Scratch::new(test);
    let store = s.store();
    let good = image(&[base_layer()], Pack::Plain);
    write_oci(&s.0.join("good"), &[(Some("good:1"), &good)]);
    store.load(&s.0.join("good"), None, &mut quiet()).unwrap();
    let before = snapshot(&store);
    write_oci(&s.0.join("bad"), &[(Some("bad:1"), &bad)]);
    tamper(&s.0.join("bad"));
    let e = format!(
        "{:#}",
        store
            .load(&s.0.join("bad"), None, &mut quiet())
            .unwrap_err()
    );
    eprintln!("{test}: {e}");
    for word in says {
        assert!(e.contains(word), "{test}: {word:?} not in: {e}");
    }
    assert_eq!(snapshot(&store), before, "{test}: the store changed");
    assert!(!Path::new("/tmp/nsfleet-test-image-escaped").exists());
}

#[test]
fn a_path_that_goes_up_is_refused() {
    let l = layer(&[E::File("a/../../nsfleet-test-image-escaped", b"x")]);
    refused(
        "dotdot",
        &[l],
        &["bad:1", "`..`", "nsfleet-test-image-escaped", "sha256:"],
    );
}

#[test]
fn a_hard_link_out_of_the_layer_is_refused() {
    let l = layer(&[E::Hard("passwd", "../../../../etc/passwd")]);
    refused("hardout", &[l], &["bad:1", "`..`", "passwd"]);
    let l = layer(&[E::Hard("passwd", "etc/passwd")]);
    refused("hardabs", &[l], &["not an earlier file of this layer"]);
}

#[test]
fn an_entry_through_a_symlink_is_refused() {
    let l = layer(&[E::Sym("a", "/etc"), E::File("a/passwd", b"root::0:0")]);
    refused("through", &[l], &["bad:1", "a/passwd", "symbolic link a"]);
}

/// A root from `debootstrap` put in by `docker import` holds /dev's device files: they
/// are skipped (a node's /dev is made for it), with one line for the image.
#[test]
fn device_files_are_skipped_with_one_warning() {
    let s = Scratch::new("device");
    let store = s.store();
    let l = layer(&[
        E::File("etc/os-release", b"ID=test"),
        E::Char("dev/console"),
        E::Char("dev/null"),
    ]);
    let img = image(&[l], Pack::Plain);
    write_oci(&s.0.join("layout"), &[(Some("devs:1"), &img)]);
    let mut said = Vec::new();
    store
        .load(&s.0.join("layout"), None, &mut |l: &str| {
            said.push(l.to_string())
        })
        .unwrap();
    let warnings: Vec<_> = said.iter().filter(|l| l.contains("warning")).collect();
    assert_eq!(
        warnings,
        ["warning: image docker.io/library/devs:1: 2 device files skipped (dev/console, ...): a node's /dev is made by nsfleet"],
        "{said:?}"
    );
    let found = store.find("devs:1").unwrap().unwrap();
    assert!(found.layers[0].join("etc/os-release").is_file());
    assert!(fs::symlink_metadata(found.layers[0].join("dev/console")).is_err());
}

#[test]
fn a_layer_whose_digest_does_not_match_is_refused() {
    let l = base_layer();
    let wrong = sha(b"something else");
    let bad = image_with_diff_ids(host(), &[l], Pack::Plain, "x", vec![wrong.clone()]);
    refused_image("digest", bad, &["bad:1", &wrong, "has digest"]);
    // A blob altered after its descriptor was written: a byte of the tar's end blocks,
    // so that it still unpacks and only the digests tell.
    let bad = image(&[layer(&[E::File("f", b"f")])], Pack::Plain);
    let blob = bad.blobs[0].0.clone();
    let path = format!("blobs/sha256/{}", hex_of(&sha(&blob)));
    let tamper = |dir: &Path| {
        let mut altered = blob.clone();
        *altered.last_mut().unwrap() = 1;
        fs::write(dir.join(&path), altered).unwrap();
    };
    refused_tampered(
        "blobdigest",
        bad,
        tamper,
        &["bad:1", "layer blob", "has digest", "not sha256:"],
    );
}

#[test]
fn an_image_for_another_architecture_is_refused() {
    let other = if host() == "arm64" { "amd64" } else { "arm64" };
    let bad = image_for(other, &[base_layer()], Pack::Plain, "x");
    refused_image(
        "arch",
        bad,
        &[&format!("is for {other}; this machine is {}", host())],
    );
}

#[test]
fn an_unparseable_reference_is_refused() {
    let s = Scratch::new("badref");
    let store = s.store();
    for bad in ["Upper/Case", "a b", "x:"] {
        let e = store.find(bad).unwrap_err().to_string();
        assert!(e.contains("not an image reference"), "{e}");
    }
    let img = image(&[base_layer()], Pack::Plain);
    write_oci(&s.0.join("layout"), &[(None, &img)]);
    let before = snapshot(&store);
    let e = store
        .load(&s.0.join("layout"), Some("No Good"), &mut quiet())
        .unwrap_err()
        .to_string();
    assert!(e.contains("not an image reference"), "{e}");
    assert_eq!(snapshot(&store), before);
    assert!(store.remove("x:").is_err());
}

// ---- skopeo's docker-archive ----

#[test]
fn a_docker_archive_skopeo_wrote_loads() {
    let skopeo = Path::new("/usr/bin/skopeo");
    if !skopeo.exists() {
        eprintln!("skipped: /usr/bin/skopeo is not installed");
        return;
    }
    let s = Scratch::new("skopeo");
    let img = image(
        &[
            base_layer(),
            layer(&[E::File("etc/.wh.os-release", b""), E::File("x", b"x")]),
        ],
        Pack::Gzip,
    );
    write_oci(&s.0.join("layout"), &[(Some("v1"), &img)]);
    let archive = s.0.join("docker.tar");
    let out = std::process::Command::new(skopeo)
        .arg("copy")
        .arg(format!("oci:{}:v1", s.0.join("layout").display()))
        .arg(format!(
            "docker-archive:{}:example.org/skopeo/test:v1",
            archive.display()
        ))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "skopeo: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let store = s.store();
    let loaded = store.load(&archive, None, &mut quiet()).unwrap();
    assert_eq!(loaded[0].names, ["example.org/skopeo/test:v1"]);
    let found = store.find("example.org/skopeo/test:v1").unwrap().unwrap();
    assert_eq!(found.layers.len(), 2);
    assert!(fs::symlink_metadata(found.layers[1].join("etc/os-release"))
        .unwrap()
        .file_type()
        .is_char_device());
}

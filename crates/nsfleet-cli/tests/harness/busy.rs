//! The test image of the image tests (and of images sent to a cluster's machines).

use nsfleet_image::build::{Compression, Entry, ImageSpec, Layer};
use nsfleet_image::RunConfig;

/// The test image: the host's static busybox as its only program (Debian's
/// busybox-static), its own /etc, a file a second layer deletes and a folder it makes
/// opaque; its process writes a mark and sleeps.
pub fn busy_image(version: &str) -> ImageSpec {
    let busybox = std::fs::read("/bin/busybox").expect("busybox-static is installed");
    let mut base = vec![
        Entry::dir("bin"),
        Entry::dir("etc"),
        Entry::Dir {
            path: "tmp".into(),
            mode: 0o1777,
        },
        Entry::dir("work"),
        Entry::dir("opq"),
        Entry::file("bin/busybox", 0o755, busybox),
        Entry::file(
            "etc/passwd",
            0o644,
            "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/work:/bin/sh\n",
        ),
        Entry::file("etc/group", 0o644, "root:x:0:\napp:x:1000:\n"),
        Entry::file("old.txt", 0o644, "deleted by the second layer\n"),
        Entry::file("opq/a", 0o644, "hidden by the second layer\n"),
    ];
    for tool in [
        "sh", "cat", "ls", "echo", "sleep", "id", "pwd", "ping", "ip", "test", "hostname",
    ] {
        base.push(Entry::symlink(&format!("bin/{tool}"), "busybox"));
    }
    let top = vec![
        Entry::file("etc/image-release", 0o644, format!("busy {version}\n")),
        Entry::Whiteout {
            path: "old.txt".into(),
        },
        Entry::Opaque { path: "opq".into() },
        Entry::file("opq/b", 0o644, "the second layer's\n"),
    ];
    ImageSpec {
        layers: vec![
            Layer {
                entries: base,
                compression: Compression::Gzip,
            },
            Layer {
                entries: top,
                compression: Compression::Zstd,
            },
        ],
        run: RunConfig {
            cmd: [
                "/bin/sh",
                "-c",
                "echo started > /tmp/started; exec sleep 1000000",
            ]
            .map(String::from)
            .to_vec(),
            env: vec!["PATH=/bin".into(), "IMG_VAR=from-image".into()],
            workdir: Some("/work".into()),
            ..RunConfig::default()
        },
        architecture: nsfleet_image::host_arch().to_string(),
    }
}

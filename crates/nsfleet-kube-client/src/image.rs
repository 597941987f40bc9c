//! `nsfleet kube image REF -o FILE`: the image a cluster runs nsfleet's controller and
//! agents from, built from this very program: it at /nsfleet (the entry point), the
//! libraries it links where the dynamic linker looks for them, and /bin and /sbin leading
//! into /usr, where the agents' DaemonSet mounts the machine's own /usr (its nodes run the
//! machine's programs, as a fleet on one machine does). Written as an OCI image layout, or
//! its tar (`oci-archive`), which `ctr images import`, `podman load` and
//! `skopeo copy oci-archive:FILE docker://REGISTRY/...` take.

use anyhow::{anyhow, bail, Context};
use nsfleet_image::build::{write_oci_layout, Compression, Entry, ImageSpec, Layer};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

pub fn image(reference: &str, out: &Path) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let mut entries = vec![
        Entry::dir("usr"),
        Entry::Dir {
            path: "tmp".into(),
            mode: 0o1777,
        },
        Entry::dir("run"),
        Entry::dir("etc"),
        Entry::symlink("bin", "usr/bin"),
        Entry::symlink("sbin", "usr/sbin"),
        Entry::file("nsfleet", 0o755, stripped(&exe)?),
    ];
    let libs = linked(&exe)?;
    let dirs: BTreeSet<PathBuf> = (libs.iter())
        .flat_map(|l| {
            l.ancestors()
                .skip(1)
                .map(Path::to_path_buf)
                .collect::<Vec<_>>()
        })
        .filter(|d| d.parent().is_some())
        .collect();
    for d in dirs {
        entries.push(Entry::dir(&d.display().to_string()));
    }
    for lib in &libs {
        let data = std::fs::read(lib).with_context(|| format!("reading {}", lib.display()))?;
        entries.push(Entry::file(&lib.display().to_string(), 0o755, data));
    }
    let spec = ImageSpec {
        layers: vec![Layer {
            entries,
            compression: Compression::Gzip,
        }],
        run: nsfleet_image::RunConfig {
            entrypoint: vec!["/nsfleet".into()],
            env: vec!["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()],
            user: Some("0:0".into()),
            ..Default::default()
        },
        architecture: nsfleet_image::host_arch().into(),
    };
    let archive = out.extension().is_some_and(|e| e == "tar");
    let layout = match archive {
        true => out.with_extension("layout.partial"),
        false => out.to_path_buf(),
    };
    let written = write_oci_layout(&layout, reference, &spec).and_then(|id| {
        if archive {
            tar_folder(&layout, out)?;
        }
        Ok(id)
    });
    if archive {
        let _ = std::fs::remove_dir_all(&layout);
    }
    let id = written.with_context(|| format!("writing {}", out.display()))?;
    println!(
        "{}: image {reference} ({id}), {} libraries",
        out.display(),
        libs.len()
    );
    Ok(())
}

/// The program without its symbols (`strip`, when the machine has it: a release build
/// is about 160 MB with them and a tenth of that without).
fn stripped(exe: &Path) -> anyhow::Result<Vec<u8>> {
    let dir = std::env::temp_dir().join(format!("nsfleet-image-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let out = dir.join("nsfleet");
    let done = std::process::Command::new("strip")
        .arg("-o")
        .arg(&out)
        .arg(exe)
        .status()
        .is_ok_and(|s| s.success());
    let data = match done {
        true => std::fs::read(&out),
        false => {
            eprintln!("nsfleet: no `strip` here: the image holds nsfleet with its symbols");
            std::fs::read(exe)
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    Ok(data?)
}

/// The shared libraries `exe` links, and the dynamic linker, as `ldd` finds them (none
/// for a static build).
fn linked(exe: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let out = std::process::Command::new("ldd")
        .arg(exe)
        .output()
        .map_err(|e| anyhow!("ldd {}: {e} (libc-bin has it)", exe.display()))?;
    let said = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    if said.contains("not a dynamic executable") || said.contains("statically linked") {
        return Ok(Vec::new());
    }
    if !out.status.success() {
        bail!("ldd {}: {said}", exe.display());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with('/')))
        .map(PathBuf::from)
        .collect())
}

/// An OCI layout folder as one tar (an `oci-archive`).
fn tar_folder(dir: &Path, out: &Path) -> anyhow::Result<()> {
    let file = std::fs::File::create(out)?;
    let mut tar = tar::Builder::new(file);
    tar.append_dir_all(".", dir)?;
    tar.into_inner()?;
    Ok(())
}

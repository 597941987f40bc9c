//! Debian's kernels (the one archive these machines reach): `--debian 6.12` is the newest
//! `linux-image-6.12.*-amd64-unsigned` the package lists know, fetched with `apt-get
//! download` and unpacked with `dpkg-deb` into a cache folder of the user's. An entry
//! appears whole or not at all: it is unpacked beside the cache and renamed into it.

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The kernel image of Debian's newest `VERSION` kernel (`6.1`, `6.12`), fetched into
/// the cache unless it is there already.
pub fn kernel(version: &str) -> anyhow::Result<PathBuf> {
    if version.is_empty() || !version.chars().all(|c| c.is_ascii_digit() || c == '.') {
        bail!("--debian {version:?}: expected a kernel version like 6.1 or 6.12");
    }
    let package = newest(version)?;
    let cache = cache_dir()?;
    let entry = cache.join(&package);
    if let Some(image) = image_in(&entry) {
        return Ok(image);
    }
    eprintln!(
        "nsfleet: vm: fetching {package} from Debian's archive into {}",
        cache.display()
    );
    let partial = cache.join(format!(".{package}.partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial)?;
    let unpacked = fetch(&package, &partial).and_then(|()| {
        let deb = (std::fs::read_dir(&partial)?.flatten())
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "deb"))
            .context("apt-get download left no package")?;
        run(Command::new("dpkg-deb")
            .arg("-x")
            .arg(&deb)
            .arg(partial.join("root")))
    });
    let done = unpacked.and_then(|()| Ok(std::fs::rename(partial.join("root"), &entry)?));
    let _ = std::fs::remove_dir_all(&partial);
    done?;
    image_in(&entry).with_context(|| format!("{package} has no boot/vmlinuz-*"))
}

/// The newest package of kernel `version` the package lists have.
fn newest(version: &str) -> anyhow::Result<String> {
    let pattern = format!(
        "^linux-image-{}\\.[0-9]+.*-amd64-unsigned$",
        version.replace('.', "\\.")
    );
    let out = Command::new("apt-cache")
        .args(["search", "--names-only", &pattern])
        .output()
        .context("apt-cache (Debian's package tools) is needed for --debian")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut names: Vec<&str> = (text.lines())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| !n.contains("-rt-") && !n.contains("-cloud-"))
        .collect();
    names.sort_by_key(|n| numbers(n));
    match names.last() {
        Some(n) => Ok(n.to_string()),
        None => bail!("Debian's package lists have no kernel {version} (linux-image-{version}.*-amd64-unsigned); `apt-get update` may be needed, or the version does not exist"),
    }
}

/// The numbers in `s`, in order: a version sort key.
fn numbers(s: &str) -> Vec<u64> {
    s.split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn fetch(package: &str, into: &Path) -> anyhow::Result<()> {
    run(Command::new("apt-get")
        .args(["download", "-q", package])
        .current_dir(into))
}

fn run(cmd: &mut Command) -> anyhow::Result<()> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// `boot/vmlinuz-*` of an unpacked package.
fn image_in(entry: &Path) -> Option<PathBuf> {
    (std::fs::read_dir(entry.join("boot")).ok()?.flatten())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
        })
}

/// `$XDG_CACHE_HOME/nsfleet/kernels`, or `~/.cache/nsfleet/kernels`.
fn cache_dir() -> anyhow::Result<PathBuf> {
    let base = match std::env::var_os("XDG_CACHE_HOME") {
        Some(c) if !c.is_empty() => PathBuf::from(c),
        _ => PathBuf::from(std::env::var_os("HOME").context("no HOME for the kernel cache")?)
            .join(".cache"),
    };
    let dir = base.join("nsfleet/kernels");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

//! Debian's kernels (the one archive these machines reach): `--debian 6.12` is the newest
//! `linux-image-6.12.*-amd64-unsigned` the package lists know, fetched with `apt-get
//! download` and unpacked with `dpkg-deb` into a cache folder of the user's. An entry
//! appears whole or not at all: it is unpacked beside the cache and renamed into it.

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::scratch::Scratch;
use crate::stop::Stop;

/// The kernel image of Debian's newest kernel matching `spec`, fetched into the cache
/// unless it is there already. `spec` is a version (`6.1`, `6.12`, `6.12.107`,
/// `6.1.0-47`) and optionally a flavour: `6.12-rt` (PREEMPT_RT), `6.12-cloud` (no 9p:
/// it cannot boot into the host's filesystem, kept for what else it shows).
pub fn kernel(spec: &str, stop: &Stop) -> anyhow::Result<PathBuf> {
    let (version, flavour) = parse(spec)?;
    let package = newest(version, flavour, stop)?;
    let cache = crate::cache::kernels_dir(true)?;
    let entry = cache.join(&package);
    if let Some(image) = image_in(&entry) {
        return Ok(image);
    }
    eprintln!(
        "nsfleet: vm: fetching {package} from Debian's archive into {}",
        cache.display()
    );
    // Removed when this ends, however it ends; after a SIGKILL, by the next run (its
    // name starts with a dot, as the sweep of the cache expects).
    let partial = Scratch::new(
        &cache,
        &format!(".{package}.partial-{}", crate::scratch::me()?),
    )?;
    let dir = partial.path();
    run(
        Command::new("apt-get")
            .args(["download", "-q", &package])
            .current_dir(dir),
        stop,
    )?;
    let deb = (std::fs::read_dir(dir)?.flatten())
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .context("apt-get download left no package")?;
    run(
        Command::new("dpkg-deb")
            .arg("-x")
            .arg(&deb)
            .arg(dir.join("root")),
        stop,
    )?;
    std::fs::rename(dir.join("root"), &entry)?;
    image_in(&entry).with_context(|| format!("{package} has no boot/vmlinuz-*"))
}

/// `6.12-rt` as (`6.12`, `rt-`); the plain flavour is "".
pub(crate) fn parse(spec: &str) -> anyhow::Result<(&str, &str)> {
    let (version, flavour) = match spec.rsplit_once('-') {
        Some((v, "rt")) => (v, "rt-"),
        Some((v, "cloud")) => (v, "cloud-"),
        _ => (spec, ""),
    };
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    if !version.split(['.', '-']).all(digits) {
        bail!("{spec:?}: expected a Debian kernel version like 6.1, 6.12, 6.12.107 or 6.1.0-47, optionally followed by -rt or -cloud");
    }
    Ok((version, flavour))
}

/// The newest package of kernel `version` and `flavour` the package lists have.
fn newest(version: &str, flavour: &str, stop: &Stop) -> anyhow::Result<String> {
    // A wide search; `matches` picks the version and flavour exactly.
    let pattern = format!("^linux-image-{}", version.replace('.', "\\."));
    let mut search = Command::new("apt-cache");
    search.args(["search", "--names-only", &pattern]);
    let out = (stop.output(&mut search))
        .context("apt-cache (Debian's package tools) is needed for --debian")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let suffix = format!("-{flavour}amd64-unsigned");
    let mut names: Vec<&str> = (text.lines())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| matches(n, version, &suffix))
        .collect();
    names.sort_by_key(|n| numbers(n));
    match names.last() {
        Some(n) => Ok(n.to_string()),
        None => bail!("Debian's package lists have no kernel {version} (linux-image-{version}*{suffix}); `apt-get update` may be needed, or the version does not exist"),
    }
}

/// Whether package `name` is kernel `version` (a whole prefix of its version) of the
/// flavour that ends in `suffix`: `linux-image-6.1.0-56-amd64-unsigned` is 6.1 and
/// 6.1.0-56, not 6.1.0-5 nor `-rt-`.
fn matches(name: &str, version: &str, suffix: &str) -> bool {
    let Some(full) = (name.strip_prefix("linux-image-")).and_then(|n| n.strip_suffix(suffix))
    else {
        return false;
    };
    let flavoured = ["-rt", "-cloud"].iter().any(|f| full.ends_with(f));
    full.strip_prefix(version)
        .is_some_and(|rest| !flavoured && (rest.is_empty() || rest.starts_with(['.', '-', '+'])))
}

/// The numbers in `s`, in order: a version sort key.
fn numbers(s: &str) -> Vec<u64> {
    s.split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Runs a helper to its end (a signal kills it: see [`Stop`]); its complaint if it fails.
fn run(cmd: &mut Command, stop: &Stop) -> anyhow::Result<()> {
    let out = stop
        .output(cmd)
        .with_context(|| format!("running {cmd:?}"))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_matches_whole_parts_of_a_packages_version_and_its_flavour() {
        let plain = "-amd64-unsigned";
        assert!(matches("linux-image-6.1.0-56-amd64-unsigned", "6.1", plain));
        assert!(matches(
            "linux-image-6.1.0-56-amd64-unsigned",
            "6.1.0-56",
            plain
        ));
        assert!(!matches(
            "linux-image-6.1.0-56-amd64-unsigned",
            "6.1.0-5",
            plain
        ));
        assert!(!matches(
            "linux-image-6.12.117+deb12-amd64-unsigned",
            "6.1",
            plain
        ));
        assert!(matches(
            "linux-image-6.12.117+deb12-amd64-unsigned",
            "6.12.117",
            plain
        ));
        assert!(!matches(
            "linux-image-6.12.117+deb12-rt-amd64-unsigned",
            "6.12",
            plain
        ));
        assert!(matches(
            "linux-image-6.12.117+deb12-rt-amd64-unsigned",
            "6.12",
            "-rt-amd64-unsigned"
        ));
        assert_eq!(parse("6.12-rt").unwrap(), ("6.12", "rt-"));
        assert_eq!(parse("6.1.0-47").unwrap(), ("6.1.0-47", ""));
        assert!(parse("6.x").is_err() && parse("").is_err() && parse("6.12-foo").is_err());
    }
}

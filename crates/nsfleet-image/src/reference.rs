//! Image references as Docker reads them (`alpine` is `docker.io/library/alpine:latest`),
//! ids and id prefixes, and the host's architecture in the images' words.

use anyhow::{anyhow, bail};
use oci_spec::distribution::Reference;
use regex::Regex;
use std::sync::OnceLock;

/// Docker's reference grammar (distribution/reference's `ReferenceRegexp`): the name, then
/// the tag and the digest as groups 2 and 3. It is oci-spec's, whose `Reference::from_str`
/// we do not call: its tag's `\w` is Unicode's (Go's is ASCII), and compiling that bounded
/// repetition of Unicode's classes cost every process that reads one reference 32 ms of
/// CPU and 4.3 MB that a fleet's supervisor, forked from `up`, then kept (measured).
const GRAMMAR: &str = concat!(
    r"^((?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])",
    r"(?:(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+)?(?::[0-9]+)?/)?",
    r"[a-z0-9]+(?:(?:(?:[._]|__|[-]*)[a-z0-9]+)+)?",
    r"(?:(?:/[a-z0-9]+(?:(?:(?:[._]|__|[-]*)[a-z0-9]+)+)?)+)?)",
    r"(?::([A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?",
    r"(?:@([A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?$",
);

/// A repository's longest name, as Docker's `NameTotalLengthMax`.
const NAME_MAX: usize = 255;

/// `reference` parsed as Docker does (see [`GRAMMAR`]): registry (`docker.io` when it
/// names none), repository (`library/` for Docker Hub's official images), and tag
/// (`latest` when it names neither a tag nor a digest).
pub fn parse(reference: &str) -> anyhow::Result<Reference> {
    let bad = |why: &str| {
        anyhow!("{reference:?} is not an image reference ({why}): write NAME[:TAG], as in alpine:3.20 or ghcr.io/org/app:1.0")
    };
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| Regex::new(GRAMMAR).expect("the reference grammar compiles"));
    let caps = re
        .captures(reference)
        .ok_or_else(|| bad("invalid reference format"))?;
    let (registry, repository) = split_domain(&caps[1]);
    if repository.len() > NAME_MAX {
        return Err(bad("repository name must not be more than 255 characters"));
    }
    let tag = caps.get(2).map(|m| m.as_str().to_string());
    let digest = caps.get(3).map(|m| m.as_str().to_string());
    if let Some((algorithm, hex)) = digest.as_deref().and_then(|d| d.split_once(':')) {
        let hex_len = match algorithm {
            "sha256" => 64,
            "sha384" => 96,
            "sha512" => 128,
            _ => return Err(bad("unsupported digest algorithm")),
        };
        if hex.len() != hex_len {
            return Err(bad("invalid checksum digest length"));
        }
    }
    Ok(match (tag, digest) {
        (Some(t), Some(d)) => Reference::with_tag_and_digest(registry, repository, t, d),
        (None, Some(d)) => Reference::with_digest(registry, repository, d),
        (t, None) => Reference::with_tag(registry, repository, t.unwrap_or("latest".into())),
    })
}

/// A name's registry and repository, as Docker splits them: the first component is a
/// registry only if it has a `.` or a `:`, or is `localhost`.
fn split_domain(name: &str) -> (String, String) {
    let (registry, repository) = match name.split_once('/') {
        Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => {
            (first, rest.to_string())
        }
        _ => ("docker.io", name.to_string()),
    };
    let registry = if registry == "index.docker.io" {
        "docker.io"
    } else {
        registry
    };
    let repository = if registry == "docker.io" && !repository.contains('/') {
        format!("library/{repository}")
    } else {
        repository
    };
    (registry.to_string(), repository)
}

/// `reference` normalized as Docker does: registry, repository (`library/` for Docker
/// Hub's official images) and tag (`latest` when it names none); a digest is kept.
pub fn normalize(reference: &str) -> anyhow::Result<String> {
    Ok(parse(reference)?.whole())
}

/// `reference`'s repository (`docker.io/library/alpine`) and whether it names a tag or a
/// digest of its own (`alpine` does not: its `latest` is Docker's default).
pub(crate) fn repository_of(reference: &str) -> anyhow::Result<(String, bool)> {
    let parsed = parse(reference)?;
    let repository = format!("{}/{}", parsed.registry(), parsed.repository());
    // What follows the last `/` names a tag only if it has a `:` (a registry's port is
    // before a `/`), and a digest has an `@`.
    let last = reference.rsplit('/').next().unwrap_or(reference);
    Ok((repository, last.contains(':') || reference.contains('@')))
}

/// An image id or a prefix of one, as `find` and `remove` take it: `sha256:` and 64 hex
/// digits, or at least 4 hex digits (with or without `sha256:`). The hex digits, lowercase.
pub(crate) fn id_prefix(reference: &str) -> Option<&str> {
    let (hex, explicit) = match reference.strip_prefix("sha256:") {
        Some(h) => (h, true),
        None => (reference, false),
    };
    let is_hex = hex
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    let long_enough = hex.len() >= 4 || (explicit && !hex.is_empty());
    (is_hex && long_enough && hex.len() <= 64).then_some(hex)
}

/// The host's architecture as images name it (Go's GOARCH): amd64 on x86_64, arm64 on
/// aarch64.
pub fn host_arch() -> &'static str {
    arch_name(std::env::consts::ARCH)
}

fn arch_name(rust_arch: &'static str) -> &'static str {
    match rust_arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "arm" => "arm",
        "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
        "powerpc64" => "ppc64",
        "loongarch64" => "loong64",
        other => other,
    }
}

/// Refuses an image whose config is for another machine than this one.
pub(crate) fn check_platform(image: &str, arch: &str, os: &str) -> anyhow::Result<()> {
    let host = host_arch();
    if os != "linux" {
        bail!("image {image} is for {os}/{arch}; nsfleet runs only linux images");
    }
    if arch != host {
        bail!("image {image} is for {arch}; this machine is {host}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_are_docker_hub_official_images_at_latest() {
        let n = |r| normalize(r).unwrap();
        assert_eq!(n("alpine"), "docker.io/library/alpine:latest");
        assert_eq!(n("alpine:3.20"), "docker.io/library/alpine:3.20");
        assert_eq!(n("org/app"), "docker.io/org/app:latest");
        assert_eq!(n("index.docker.io/org/app:1"), "docker.io/org/app:1");
        assert_eq!(
            n("localhost:5000/app"),
            "localhost:5000/app:latest",
            "a host with a port is a registry"
        );
        assert_eq!(n("ghcr.io/o/a:v1"), "ghcr.io/o/a:v1");
    }

    #[test]
    fn unparseable_references_say_what_to_write() {
        for bad in ["", "Alpine", "a b", "alpine:", "-x", "a:b:c"] {
            let e = normalize(bad).unwrap_err().to_string();
            assert!(e.contains("not an image reference"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn parsed_as_oci_spec_parses_them() {
        let digest = format!("sha256:{}", "ab".repeat(32));
        let refs = [
            "busybox".to_string(),
            "test.com:tag".into(),
            "test:5000/repo:tag".into(),
            "localhost/a/b_c__d-e:1.2-x_Y".into(),
            "index.docker.io/busybox".into(),
            format!("ghcr.io/o/a@{digest}"),
            format!("ghcr.io/o/a:v1@{digest}"),
            "a:b:c".into(),
            "ghcr.io/o/a@sha256:abcd".into(),
            "ghcr.io/o/a@md5:0123456789abcdef0123456789abcdef".into(),
            format!("x/{}", "a".repeat(256)),
        ];
        for r in refs {
            let theirs = r.parse::<Reference>().map(|p| p.whole()).ok();
            assert_eq!(parse(&r).map(|p| p.whole()).ok(), theirs, "{r}");
        }
        // Go's `\w`, as Docker reads a tag, is ASCII.
        assert!(parse("alpine:\u{e9}t\u{e9}").is_err());
    }

    #[test]
    fn repository_and_whether_a_tag_was_given() {
        let r = |s| repository_of(s).unwrap();
        assert_eq!(r("alpine"), ("docker.io/library/alpine".into(), false));
        assert_eq!(r("alpine:edge"), ("docker.io/library/alpine".into(), true));
        assert_eq!(
            r("localhost:5000/app"),
            ("localhost:5000/app".into(), false)
        );
        assert_eq!(
            r("localhost:5000/app:1"),
            ("localhost:5000/app".into(), true)
        );
    }

    #[test]
    fn ids_and_prefixes() {
        assert_eq!(id_prefix("sha256:abcd"), Some("abcd"));
        assert_eq!(id_prefix("abcd12"), Some("abcd12"));
        assert_eq!(id_prefix("abc"), None, "too short to be an id");
        assert_eq!(id_prefix("alpine"), None);
        assert_eq!(id_prefix("ABCD"), None, "ids are lowercase");
    }

    #[test]
    fn architectures_in_go_words() {
        assert_eq!(arch_name("x86_64"), "amd64");
        assert_eq!(arch_name("aarch64"), "arm64");
        assert_eq!(arch_name("riscv64"), "riscv64");
    }
}

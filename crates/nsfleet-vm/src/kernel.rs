//! A kernel to boot: its image checked to be one (an x86 bzImage), its version read from
//! it, its modules found and matched to it, and the options nsfleet needs looked up in
//! its config.

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};

/// Modules the guest loads, in dependency order (a kernel without `modules.dep`, as
/// Debian's package ships it, is loaded by this list): the host's filesystem over 9p, the
/// writable overlay, then what fleets use. One that is built in has no file and is skipped.
pub const MODULES: &[&str] = &[
    "netfs",
    "9pnet",
    "9pnet_virtio",
    "9p",
    "overlay",
    "llc",
    "stp",
    "bridge",
    "veth",
    "sch_netem",
    "sch_tbf",
    "udp_tunnel",
    "ip6_udp_tunnel",
    "vxlan",
];

/// Kernel options nsfleet or the guest's start needs, and what each is for.
const NEEDED: &[(&str, &str)] = &[
    ("NET_NS", "network namespaces"),
    ("VETH", "veth pairs"),
    ("BRIDGE", "switches"),
    ("NET_SCH_NETEM", "impairments (netem)"),
    ("NET_SCH_TBF", "rate limits (tbf)"),
    ("NET_9P_VIRTIO", "the host's filesystem (9p over virtio)"),
    ("9P_FS", "the host's filesystem (9p)"),
    ("OVERLAY_FS", "the guest's writable scratch (overlayfs)"),
    ("DEVPORT", "the command's exit status (/dev/port)"),
];

pub struct Kernel {
    pub image: PathBuf,
    /// The release it reports (`uname -r`), from the image's header.
    pub release: String,
    pub modules: Option<PathBuf>,
    /// Options of [`NEEDED`] its config lacks, with what they are for; `None` without a
    /// config to read.
    pub lacks: Option<Vec<String>>,
}

impl Kernel {
    /// The kernel at `image`, with the modules of `modules` (or, without it, those beside
    /// it as a package lays them out: `boot/vmlinuz-R` and `lib/modules/R`).
    pub fn open(image: &Path, modules: Option<&Path>) -> anyhow::Result<Kernel> {
        let bytes = std::fs::read(image)
            .with_context(|| format!("{}: cannot read the kernel", image.display()))?;
        let release = release_of(&bytes).ok_or_else(|| {
            anyhow::anyhow!(
                "{}: not a kernel image (an x86 bzImage, like /boot/vmlinuz-*)",
                image.display()
            )
        })?;
        let beside = image
            .parent()
            .map(|b| b.join("../lib/modules").join(&release));
        let modules = match modules {
            Some(m) => {
                let name = m
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if !m.is_dir() {
                    bail!("--modules {}: not a directory", m.display());
                }
                if name != release {
                    bail!("--modules {}: these are modules of {name:?}, and the kernel is {release:?}", m.display());
                }
                Some(m.to_path_buf())
            }
            None => beside.filter(|b| b.is_dir()),
        };
        let config = image.parent().map(|b| b.join(format!("config-{release}")));
        let lacks = config
            .and_then(|c| std::fs::read_to_string(c).ok())
            .map(|c| lacking(&c));
        Ok(Kernel {
            image: image.to_path_buf(),
            release,
            modules,
            lacks,
        })
    }

    /// The files of [`MODULES`] this kernel has, in that order.
    pub fn module_files(&self) -> Vec<(String, PathBuf)> {
        let Some(dir) = &self.modules else {
            return Vec::new();
        };
        let mut all = Vec::new();
        walk(dir, &mut all);
        (MODULES.iter())
            .filter_map(|m| {
                let file = all.iter().find(|p| {
                    let n = p
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    n == format!("{m}.ko") || n == format!("{m}.ko.xz")
                })?;
                Some((m.to_string(), file.clone()))
            })
            .collect()
    }
}

/// The release string of a bzImage (its setup header's `kernel_version`), if `bytes` is
/// one: "HdrS" at 0x202, the version's offset (from 0x200) at 0x20e.
fn release_of(bytes: &[u8]) -> Option<String> {
    if bytes.get(0x202..0x206)? != b"HdrS" {
        return None;
    }
    let at = u16::from_le_bytes(bytes.get(0x20e..0x210)?.try_into().ok()?) as usize + 0x200;
    let text = bytes.get(at..at + 256)?;
    let end = text.iter().position(|b| *b == 0 || *b == b' ')?;
    Some(String::from_utf8_lossy(&text[..end]).into_owned()).filter(|r| !r.is_empty())
}

/// The options of [`NEEDED`] that `config` (a kernel's .config) has neither built in nor
/// as a module.
fn lacking(config: &str) -> Vec<String> {
    (NEEDED.iter())
        .filter(|(opt, _)| {
            !config
                .lines()
                .any(|l| l == format!("CONFIG_{opt}=y") || l == format!("CONFIG_{opt}=m"))
        })
        .map(|(opt, what)| format!("CONFIG_{opt} ({what})"))
        .collect()
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bzimage_says_its_release_and_anything_else_is_not_one() {
        let mut img = vec![0u8; 0x1000];
        img[0x202..0x206].copy_from_slice(b"HdrS");
        img[0x20e..0x210].copy_from_slice(&0x300u16.to_le_bytes());
        img[0x500..0x520].copy_from_slice(b"6.12.117+deb12-amd64 (debian) #1");
        assert_eq!(release_of(&img).as_deref(), Some("6.12.117+deb12-amd64"));
        assert_eq!(release_of(b"#!/bin/sh\necho not a kernel\n"), None);
    }

    #[test]
    fn options_missing_from_a_config_are_named() {
        let config = "CONFIG_NET_NS=y\nCONFIG_VETH=m\n# CONFIG_NET_SCH_NETEM is not set\n";
        let lacks = lacking(config);
        assert!(lacks.iter().any(|l| l.starts_with("CONFIG_NET_SCH_NETEM")));
        assert!(!lacks.iter().any(|l| l.starts_with("CONFIG_VETH ")));
    }
}

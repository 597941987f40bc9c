//! A kernel to boot: its image checked to be one (an x86 bzImage), its version read from
//! it, its modules found and matched to it, and the options nsfleet needs looked up in
//! its config.

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};

/// Modules the guest loads, with what they depend on (see [`Kernel::module_files`]): the
/// virtio bus (built in from 6.12 in Debian, a module in 6.1), the host's filesystem over
/// 9p, the writable overlay, then what fleets use (Open vSwitch's kernel datapath, and tun
/// for its userspace one's internal ports). One that is built in has no file and is
/// skipped.
pub const MODULES: &[&str] = &[
    "virtio_pci",
    "9pnet_virtio",
    "9p",
    "overlay",
    "bridge",
    "veth",
    "sch_netem",
    "sch_tbf",
    "vxlan",
    "dummy",
    // libcrc32c's soft dependency (its crc32c algorithm), which insmod does not follow:
    // without it, libcrc32c, nf_conntrack and openvswitch fail to load.
    "crc32c_generic",
    "openvswitch",
    "tun",
];

/// A kernel option nsfleet or the guest's start needs.
#[derive(Debug, PartialEq, Eq)]
pub struct Needed {
    /// Without `CONFIG_`.
    pub option: &'static str,
    /// What it is for.
    pub what: &'static str,
    /// Without it the guest cannot start at all (rather than one feature failing).
    pub to_start: bool,
}

impl std::fmt::Display for Needed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CONFIG_{} ({})", self.option, self.what)
    }
}

const fn needed(option: &'static str, what: &'static str, to_start: bool) -> Needed {
    Needed {
        option,
        what,
        to_start,
    }
}

const NEEDED: &[Needed] = &[
    needed("NET_NS", "network namespaces", false),
    needed("VETH", "veth pairs", false),
    needed("BRIDGE", "switches", false),
    needed("NET_SCH_NETEM", "impairments (netem)", false),
    needed("NET_SCH_TBF", "rate limits (tbf)", false),
    needed("VIRTIO_PCI", "the host's filesystem (virtio)", true),
    needed(
        "NET_9P_VIRTIO",
        "the host's filesystem (9p over virtio)",
        true,
    ),
    needed("9P_FS", "the host's filesystem (9p)", true),
    needed(
        "OVERLAY_FS",
        "the guest's writable scratch (overlayfs)",
        true,
    ),
];

pub struct Kernel {
    pub image: PathBuf,
    /// The release it reports (`uname -r`), from the image's header.
    pub release: String,
    pub modules: Option<PathBuf>,
    /// Its `.config`, where the image has one beside it (`boot/config-R`).
    pub config: Option<PathBuf>,
    /// Options of [`NEEDED`] its config lacks; `None` without a config to read.
    pub lacks: Option<Vec<&'static Needed>>,
}

/// The running kernel's release (`uname -r`); empty if /proc is not readable.
pub fn running_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

impl Kernel {
    /// What its config lacks that the guest cannot start without.
    pub fn cannot_start(&self) -> Vec<&'static Needed> {
        let lacks = self.lacks.iter().flatten().copied();
        lacks.filter(|n| n.to_start).collect()
    }

    /// The running kernel (`--kernel host`): its image where a distribution puts it
    /// (`/boot/vmlinuz-R`, `/lib/modules/R/vmlinuz`), with its modules.
    pub fn host() -> anyhow::Result<Kernel> {
        let release = running_release();
        let modules = Path::new("/lib/modules").join(&release);
        let places = [
            PathBuf::from(format!("/boot/vmlinuz-{release}")),
            modules.join("vmlinuz"),
        ];
        let Some(image) = places.iter().find(|p| std::fs::File::open(p).is_ok()) else {
            bail!(
                "--kernel host: the running kernel's image ({release}) is not readable here (looked for {}); this machine was booted from an image it does not keep. Give one with --kernel BZIMAGE, or --debian VERSION",
                places.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            );
        };
        let modules = modules.is_dir().then_some(modules);
        Kernel::open(image, modules.as_deref())
    }

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
        let config = (image.parent())
            .map(|b| b.join(format!("config-{release}")))
            .filter(|c| c.is_file());
        let lacks = (config.as_ref())
            .and_then(|c| std::fs::read_to_string(c).ok())
            .map(|c| lacking(&c));
        Ok(Kernel {
            image: image.to_path_buf(),
            release,
            modules,
            config,
            lacks,
        })
    }

    /// The files of [`MODULES`] this kernel has and of the modules they depend on, in an
    /// order that loads each after its dependencies. Dependencies are read from each
    /// module's own `depends=` (a kernel package need not ship `modules.dep`); one that
    /// is not a file here is built in.
    pub fn module_files(&self) -> anyhow::Result<Vec<(String, PathBuf)>> {
        let Some(dir) = &self.modules else {
            return Ok(Vec::new());
        };
        let mut all = Vec::new();
        walk(dir, &mut all);
        let by_name: std::collections::HashMap<String, PathBuf> = all
            .into_iter()
            .filter_map(|p| Some((module_name(&p)?, p)))
            .collect();
        let mut order = Vec::new();
        for m in MODULES {
            load_after_deps(m, &by_name, &mut order, 0)?;
        }
        Ok(order)
    }
}

/// Appends `name` to `order` after what it depends on, unless it is there already or
/// not a module file of this kernel.
fn load_after_deps(
    name: &str,
    by_name: &std::collections::HashMap<String, PathBuf>,
    order: &mut Vec<(String, PathBuf)>,
    depth: usize,
) -> anyhow::Result<()> {
    let Some(file) = by_name.get(name) else {
        return Ok(());
    };
    if order.iter().any(|(n, _)| n == name) {
        return Ok(());
    }
    if depth > 32 {
        bail!("{}: module dependencies loop", file.display());
    }
    for dep in depends_of(file)? {
        load_after_deps(&dep, by_name, order, depth + 1)?;
    }
    order.push((name.to_string(), file.clone()));
    Ok(())
}

/// A module's name from its file name (`9pnet_virtio.ko`, `veth.ko.xz`).
fn module_name(p: &Path) -> Option<String> {
    let n = p.file_name()?.to_string_lossy().into_owned();
    let stem = n.strip_suffix(".ko.xz").or_else(|| n.strip_suffix(".ko"))?;
    Some(stem.to_string())
}

/// The modules `file` depends on: its `.modinfo`'s `depends=` (xz-compressed modules are
/// read through `xz -dc`).
fn depends_of(file: &Path) -> anyhow::Result<Vec<String>> {
    let bytes = if file.extension().is_some_and(|e| e == "xz") {
        let out = std::process::Command::new("xz")
            .arg("-dc")
            .arg(file)
            .output()
            .context("xz is needed to read compressed kernel modules: apt-get install xz-utils")?;
        if !out.status.success() {
            bail!("{}: xz cannot decompress it", file.display());
        }
        out.stdout
    } else {
        std::fs::read(file).with_context(|| format!("reading {}", file.display()))?
    };
    Ok(modinfo_depends(&bytes))
}

/// The names after `depends=` in a module's `.modinfo` strings (NUL-separated).
fn modinfo_depends(module: &[u8]) -> Vec<String> {
    const KEY: &[u8] = b"\0depends=";
    let Some(at) = module.windows(KEY.len()).position(|w| w == KEY) else {
        return Vec::new();
    };
    let rest = &module[at + KEY.len()..];
    let end = rest.iter().position(|b| *b == 0).unwrap_or(rest.len());
    String::from_utf8_lossy(&rest[..end])
        .split(',')
        .filter(|d| !d.is_empty())
        .map(str::to_string)
        .collect()
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
fn lacking(config: &str) -> Vec<&'static Needed> {
    (NEEDED.iter())
        .filter(|n| {
            let (y, m) = (
                format!("CONFIG_{}=y", n.option),
                format!("CONFIG_{}=m", n.option),
            );
            !config.lines().any(|l| l == y || l == m)
        })
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
    fn a_modules_dependencies_are_read_from_its_modinfo() {
        let ko = b"\x7fELF...\0license=GPL\0depends=9pnet,fscache,netfs\0retpoline=Y\0";
        assert_eq!(modinfo_depends(ko), ["9pnet", "fscache", "netfs"]);
        assert!(modinfo_depends(b"\0depends=\0name=netfs\0").is_empty());
        assert!(modinfo_depends(b"no modinfo").is_empty());
    }

    #[test]
    fn options_missing_from_a_config_are_named() {
        let config = "CONFIG_NET_NS=y\nCONFIG_VETH=m\n# CONFIG_NET_SCH_NETEM is not set\n";
        let lacks: Vec<String> = lacking(config).iter().map(|n| n.to_string()).collect();
        assert!(lacks.iter().any(|l| l.starts_with("CONFIG_NET_SCH_NETEM")));
        assert!(!lacks.iter().any(|l| l.starts_with("CONFIG_VETH ")));
    }
}

//! Which kernel, as a user names one: `host` (the running kernel), `debian:VERSION`
//! (Debian's, fetched into the cache), or the path of a bzImage. Parsed without touching
//! anything, so that a list of them is refused before the first is booted.

use crate::Kernel;
use anyhow::bail;
use std::path::PathBuf;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Spec {
    Host,
    Debian(String),
    Image(PathBuf),
}

impl std::str::FromStr for Spec {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Spec> {
        if s == "host" {
            return Ok(Spec::Host);
        }
        if let Some(v) = s.strip_prefix("debian:") {
            crate::debian::parse(v)?;
            return Ok(Spec::Debian(v.to_string()));
        }
        if s.contains('/') || std::path::Path::new(s).is_file() {
            return Ok(Spec::Image(PathBuf::from(s)));
        }
        bail!("{s:?}: expected `host`, `debian:VERSION` (6.1, 6.12, 6.12-rt...) or the path of a kernel image")
    }
}

impl Spec {
    /// A name for file names and report columns: `host`, `debian-6.12`, or the image's
    /// file name.
    pub fn label(&self) -> String {
        match self {
            Spec::Host => "host".into(),
            Spec::Debian(v) => format!("debian-{v}"),
            Spec::Image(p) => p
                .file_name()
                .map_or_else(|| "image".into(), |n| n.to_string_lossy().into_owned()),
        }
    }

    /// The kernel to boot: Debian's fetched if need be (a signal stops the fetch),
    /// `host`'s image if readable.
    pub fn kernel(
        &self,
        modules: Option<&std::path::Path>,
        stop: &crate::Stop,
    ) -> anyhow::Result<Kernel> {
        match self {
            Spec::Host => Kernel::host(),
            Spec::Debian(v) => Kernel::open(&crate::debian::kernel(v, stop)?, modules),
            Spec::Image(p) => Kernel::open(p, modules),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_are_named_so() {
        assert_eq!("host".parse::<Spec>().unwrap(), Spec::Host);
        assert_eq!(
            "debian:6.12-rt".parse::<Spec>().unwrap(),
            Spec::Debian("6.12-rt".into())
        );
        assert_eq!("debian:6.1".parse::<Spec>().unwrap().label(), "debian-6.1");
        assert_eq!(
            "./arch/x86/boot/bzImage".parse::<Spec>().unwrap().label(),
            "bzImage"
        );
        assert!("debian:six".parse::<Spec>().is_err());
        assert!("hots".parse::<Spec>().is_err());
    }
}

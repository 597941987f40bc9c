//! Which accelerator boots the guest. KVM is fast where it works; on some hosts of this
//! class `/dev/kvm` opens but the guest never runs (a nested, paravirtualized KVM that
//! stops at the guest's first instructions), or QEMU refuses KVM at once. `auto` tries
//! KVM under a watchdog and falls back to TCG (emulation); what it learnt is kept as a
//! verdict in the cache, keyed by what makes it true (the host's kernel build and QEMU's
//! version), so that the next run goes to the right one at once.
//!
//! A verdict is a file `accel/KEY` whose first line is `kvm` or `tcg`, then why. One
//! that does not read so is reported and left alone: it is the user's, or a bug's, and
//! nothing of it is guessed.

use anyhow::bail;
use std::path::PathBuf;

/// The environment variable that chooses the accelerator when `--accel` is not given.
pub const ENV: &str = "NSFLEET_VM_ACCEL";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accel {
    /// The verdict's, or KVM under the watchdog and TCG if it shows no sign of life.
    Auto,
    /// KVM only: a KVM that shows no sign of life ends the run.
    Kvm,
    Tcg,
}

impl std::str::FromStr for Accel {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Accel> {
        match s {
            "auto" => Ok(Accel::Auto),
            "kvm" => Ok(Accel::Kvm),
            "tcg" => Ok(Accel::Tcg),
            _ => bail!("{s:?}: expected kvm, tcg or auto"),
        }
    }
}

impl Accel {
    /// `flag` if given, else `$NSFLEET_VM_ACCEL` if set, else `auto`.
    pub fn chosen(flag: Option<Accel>) -> anyhow::Result<Accel> {
        if let Some(a) = flag {
            return Ok(a);
        }
        match std::env::var(ENV) {
            Ok(v) if !v.is_empty() => v.parse().map_err(|e| anyhow::anyhow!("{ENV}={e}")),
            _ => Ok(Accel::Auto),
        }
    }

    /// QEMU's name for it (`-accel NAME`).
    pub fn qemu_name(self) -> &'static str {
        match self {
            Accel::Kvm | Accel::Auto => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// What was learnt of KVM on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It ran a guest.
    Kvm,
    /// It did not; why.
    Tcg(String),
}

/// The verdict file of this host's kernel and QEMU; none without a cache folder (no
/// HOME), and then nothing is remembered.
pub struct Verdicts {
    path: Option<PathBuf>,
}

impl Verdicts {
    /// The verdict for this host's kernel build and `qemu`'s version.
    pub fn here(qemu: &str) -> Verdicts {
        let version = std::process::Command::new(qemu)
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let version = version.lines().next().unwrap_or("unknown");
        let version = version.trim_start_matches("QEMU emulator version ");
        let build = std::fs::read_to_string("/proc/sys/kernel/version").unwrap_or_default();
        let key = format!(
            "host-{}-{}-qemu-{}",
            crate::kernel::running_release(),
            build.trim(),
            version
        );
        Verdicts {
            path: (crate::cache::accel_dir(false).ok()).map(|d| d.join(file_name(&key))),
        }
    }

    /// Where the verdict is kept, for messages.
    pub fn location(&self) -> String {
        self.path
            .as_ref()
            .map_or_else(|| "nowhere".into(), |p| p.display().to_string())
    }

    /// The verdict, if one was kept; a file that is not one is said and ignored.
    pub fn read(&self) -> Option<Verdict> {
        let text = std::fs::read_to_string(self.path.as_ref()?).ok()?;
        match parse(&text) {
            Some(v) => Some(v),
            None => {
                eprintln!(
                    "nsfleet: vm: {} is not a verdict (its first line should be `kvm` or `tcg`): ignored and left as it is; remove it to let nsfleet keep one",
                    self.location()
                );
                None
            }
        }
    }

    /// Keeps `v`, unless the file holds something that is not a verdict (left alone).
    /// A cache that cannot be written costs only the next run's probe.
    pub fn keep(&self, v: &Verdict) {
        let Some(path) = &self.path else {
            return;
        };
        if std::fs::read_to_string(path).is_ok_and(|t| parse(&t).is_none()) {
            return;
        }
        let text = match v {
            Verdict::Kvm => "kvm\nKVM ran a guest here.\n".to_string(),
            Verdict::Tcg(why) => format!("tcg\nKVM did not run a guest here: {why}\n"),
        };
        let Some(dir) = path.parent() else {
            return;
        };
        let tmp = dir.join(format!(".verdict-{}", std::process::id()));
        let _ = std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(&tmp, text))
            .and_then(|()| std::fs::rename(&tmp, path));
        let _ = std::fs::remove_file(&tmp);
    }
}

fn parse(text: &str) -> Option<Verdict> {
    let mut lines = text.lines();
    let why = |rest: Option<&str>| {
        let r = rest.unwrap_or("").trim();
        r.strip_prefix("KVM did not run a guest here: ")
            .unwrap_or(r)
            .to_string()
    };
    match lines.next()?.trim() {
        "kvm" => Some(Verdict::Kvm),
        "tcg" => Some(Verdict::Tcg(why(lines.next()))),
        _ => None,
    }
}

/// `key` as one file name: what is not a letter, digit, `.`, `-` or `_` becomes `_`.
fn file_name(key: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
    let name: String = key.chars().map(|c| if safe(c) { c } else { '_' }).collect();
    name.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_accelerator_is_named_and_anything_else_is_refused() {
        assert_eq!("kvm".parse::<Accel>().unwrap(), Accel::Kvm);
        assert_eq!("auto".parse::<Accel>().unwrap(), Accel::Auto);
        let e = "KVM".parse::<Accel>().unwrap_err().to_string();
        assert_eq!(e, "\"KVM\": expected kvm, tcg or auto");
    }

    #[test]
    fn a_verdict_reads_back_and_anything_else_is_not_one() {
        assert_eq!(parse("kvm\nKVM ran a guest here.\n"), Some(Verdict::Kvm));
        assert_eq!(
            parse("tcg\nKVM did not run a guest here: no sign of life\n"),
            Some(Verdict::Tcg("no sign of life".into()))
        );
        assert_eq!(parse("maybe\n"), None);
        assert_eq!(parse(""), None);
        assert_eq!(
            file_name("host-6.18 #1 SMP/x-qemu-7.2 (Debian 1:7.2)"),
            "host-6.18__1_SMP_x-qemu-7.2__Debian_1_7.2_"
        );
    }
}

//! The kernel lab's cache, under the user's cache folder (`$XDG_CACHE_HOME/nsfleet`, or
//! `~/.cache/nsfleet`): Debian's kernels (`kernels/`) and what was learnt of this
//! machine's KVM (`accel/`). Nothing else of the host is written.

use anyhow::Context;
use std::path::PathBuf;

/// `$XDG_CACHE_HOME/nsfleet/SUB`, or `~/.cache/nsfleet/SUB`; made if `create`.
fn dir(sub: &str, create: bool) -> anyhow::Result<PathBuf> {
    let base = match std::env::var_os("XDG_CACHE_HOME") {
        Some(c) if !c.is_empty() => PathBuf::from(c),
        _ => PathBuf::from(std::env::var_os("HOME").context("no HOME for nsfleet's cache")?)
            .join(".cache"),
    };
    let dir = base.join("nsfleet").join(sub);
    if create {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    Ok(dir)
}

/// Where Debian's kernels are unpacked.
pub fn kernels_dir(create: bool) -> anyhow::Result<PathBuf> {
    dir("kernels", create)
}

/// Where the verdicts on this machine's KVM are kept.
pub fn accel_dir(create: bool) -> anyhow::Result<PathBuf> {
    dir("accel", create)
}

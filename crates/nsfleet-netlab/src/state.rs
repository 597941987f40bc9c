//! What one `nsfleet netlab` run's stand-ins tell each other, kept in the run's folder:
//! the one owner of that state. `netlab` names the folder to the stand-ins (the variable
//! [`STATE`]); `sudo` remembers the forwarding masks netlab asks of its bridges before
//! the lab exists, and `containerlab deploy` reads them back once it does.

use std::path::PathBuf;

/// The variable that tells the stand-ins their run's folder, where they keep what one
/// step tells a later one (the forwarding masks netlab asks of its bridges before the
/// lab exists).
pub(crate) const STATE: &str = "NSFLEET_STANDIN_DIR";

/// Where the sudo stand-in keeps the forwarding masks netlab asked of its bridges.
fn fwd_masks_file() -> Option<PathBuf> {
    std::env::var_os(STATE).map(|d| PathBuf::from(d).join("group_fwd_mask"))
}

/// Remembers that netlab asked bridge `bridge` to forward the link-local groups of
/// `mask` (LLDP, 802.1X, ...), for when its switch exists.
pub(crate) fn remember_fwd_mask(bridge: &str, mask: u16) -> anyhow::Result<()> {
    let Some(file) = fwd_masks_file() else {
        return Ok(());
    };
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&file)?;
    std::io::Write::write_all(&mut f, format!("{bridge} {mask}\n").as_bytes())?;
    Ok(())
}

/// The forwarding masks remembered, a `BRIDGE MASK` line each; none without a run's
/// folder or before any was asked.
pub(crate) fn fwd_masks() -> Option<String> {
    fwd_masks_file().and_then(|f| std::fs::read_to_string(f).ok())
}

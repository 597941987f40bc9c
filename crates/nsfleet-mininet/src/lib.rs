//! `nsfleet mn SCRIPT.py [ARGS]`: a script written for Mininet, run unchanged on nsfleet
//! by the Python package (`python3 -m nsfleet.mn`), whose `mininet.*` imports are answered
//! by `nsfleet.mininet.*`; `nsfleet mn [OPTIONS]`: Mininet's own `mn` command, run so.
//! The Python found is the one installed beside this executable (the virtual environment
//! `pip install .` put both in), else `python3` on PATH. This crate only finds and
//! starts it; it never reads the script.
//!
//! Mininet's front, a crate of its own although it is small: the Python package is
//! Mininet's API, and this only hands it the command line. It needs nothing of the
//! general client (it reaches no fleet itself), and the general client never imports it.

use anyhow::{bail, Context};
use std::os::unix::process::CommandExt;

/// Runs the script (or Mininet's `mn`) on nsfleet's Python package; with `privileged`,
/// its hosts are the host's root (the package's `Mininet(privileged=True)`).
pub fn mn(script_and_args: &[String], privileged: bool) -> anyhow::Result<()> {
    // No script, or options first: Mininet's `mn`, which the Python package finds.
    if let Some(script) = script_and_args.first().filter(|s| !s.starts_with('-')) {
        if !std::path::Path::new(script).is_file() {
            bail!("{script}: no such script");
        }
    }
    let python = nsfleet::sys::host::python_with("nsfleet.mn").map_err(anyhow::Error::msg)?;
    let mut command = std::process::Command::new(&python);
    if privileged {
        command.env("NSFLEET_MN_PRIVILEGED", "1");
    }
    let err = command
        .args(["-m", "nsfleet.mn"])
        .args(script_and_args)
        .exec();
    Err(err).with_context(|| {
        format!(
            "starting {} (nsfleet mn needs nsfleet's Python package: pip install . in nsfleet's repository)",
            python.display()
        )
    })
}

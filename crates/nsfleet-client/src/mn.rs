//! `nsfleet mn SCRIPT.py [ARGS]`: a script written for Mininet, run unchanged on nsfleet
//! by the Python package (`python3 -m nsfleet.mn`), whose `mininet.*` imports are answered
//! by `nsfleet.mininet.*`. The Python found is the one installed beside this executable
//! (the virtual environment `pip install .` put both in), else `python3` on PATH. This
//! module only finds and starts it; it never reads the script.

use anyhow::{bail, Context};
use std::os::unix::process::CommandExt;

pub fn mn(script_and_args: &[String]) -> anyhow::Result<()> {
    let Some(script) = script_and_args.first() else {
        bail!("nsfleet mn SCRIPT.py [ARGS]: which Mininet script?");
    };
    if !std::path::Path::new(script).is_file() {
        bail!("{script}: no such script");
    }
    let python = nsfleet::sys::host::python_with("nsfleet.mn").map_err(anyhow::Error::msg)?;
    let err = std::process::Command::new(&python)
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

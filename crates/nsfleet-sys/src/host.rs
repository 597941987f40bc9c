//! What the host has installed: programs on `PATH`, users, files, a Python with nsfleet's
//! package. Reads only; for the probe that checks a topology's kinds against the host,
//! and for the commands that run the host's tools.

use std::path::PathBuf;

/// A program's path, found as a shell would find it.
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// A user's uid and primary gid, from /etc/passwd (the host's users are the nodes').
pub fn user(name: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 3 && f[0] == name).then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))?
    })
}

/// The Python that has nsfleet's package (`import MODULE` works): the one installed
/// beside the running executable (the virtual environment `pip install .` made), else
/// python3 on PATH. The error says how to install the package.
pub fn python_with(module: &str) -> Result<PathBuf, String> {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join("python3")))
        .filter(|p| p.is_file());
    let python = beside.unwrap_or_else(|| "python3".into());
    let imports = std::process::Command::new(&python)
        .args(["-c", &format!("import {module}")])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !imports {
        return Err(format!(
            "{} has no nsfleet package: pip install . in nsfleet's repository (into a virtual environment), and run that environment's nsfleet",
            python.display()
        ));
    }
    Ok(python)
}

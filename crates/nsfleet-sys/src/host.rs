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
    let (uid, gid) = entry(&passwd, |f| f[0] == name)?;
    Some((uid, gid?))
}

/// The name /etc/passwd gives `uid`, if it gives one.
pub fn user_name(uid: u32) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    let id = uid.to_string();
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 2 && f[2] == id).then(|| f[0].to_owned())
    })
}

/// The ids of `spec` (`name`, `uid`, `name:group`, `uid:gid`) as the /etc/passwd and
/// /etc/group of the caller's root say, as Docker reads a container's `USER`: a number
/// needs no entry; a name without one is an error.
pub fn user_ids(spec: &str) -> std::io::Result<(u32, u32)> {
    let (who, group) = match spec.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (spec, None),
    };
    let table = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let (uid, primary) = match (
        entry(&table("/etc/passwd"), |f| f[0] == who || f[2] == who),
        who.parse(),
    ) {
        (Some((uid, gid)), _) => (uid, gid.unwrap_or(0)),
        (None, Ok(uid)) => (uid, 0),
        (None, Err(_)) => {
            return Err(std::io::Error::other(format!(
                "user {who:?}: not in /etc/passwd"
            )))
        }
    };
    let gid = match group {
        None => primary,
        Some(g) => match (
            entry(&table("/etc/group"), |f| f[0] == g || f[2] == g),
            g.parse(),
        ) {
            (Some((gid, _)), _) => gid,
            (None, Ok(gid)) => gid,
            (None, Err(_)) => {
                return Err(std::io::Error::other(format!(
                    "group {g:?}: not in /etc/group"
                )))
            }
        },
    };
    Ok((uid, gid))
}

/// The third and fourth fields of the first line of a `name:x:id:id:...` table whose
/// fields `matches`.
fn entry(table: &str, matches: impl Fn(&[&str]) -> bool) -> Option<(u32, Option<u32>)> {
    table.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        if f.len() < 4 || !matches(&f) {
            return None;
        }
        Some((f[2].parse().ok()?, f[3].parse().ok()))
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

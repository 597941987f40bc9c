//! `sudo`, for the commands netlab runs as root on the host (`ip netns exec NS ...` into a
//! node's named namespace, `tcpdump`, `tc`): nsfleet runs as root already, so the command
//! runs as it is, with this environment (as `sudo -E` keeps it). What would change the
//! host itself for a lab is refused: the Linux bridges netlab makes for multi-access
//! links (containerlab needs them on the host; nsfleet's switches are namespaces of
//! their own, and netlab's LANs are not stood in for yet).

use super::{options, Tool};
use anyhow::{bail, Context};
use std::os::unix::process::CommandExt;

pub fn answer(args: &[String]) -> anyhow::Result<i32> {
    let (_, command) = options(Tool::Sudo, args, &["-E", "-n"], &[])?;
    let Some(program) = command.first() else {
        bail!("sudo: no command given");
    };
    // SAFETY: geteuid(2) cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        bail!("nsfleet's sudo stand-in runs commands as root only, and this is not root");
    }
    if makes_a_host_bridge(command) {
        bail!(
            "`sudo {}`: netlab makes a Linux bridge on the host for a multi-access link, which nsfleet does not let a lab do (its switches are namespaces of their own); netlab's LANs are not stood in for yet",
            command.join(" ")
        );
    }
    let e = std::process::Command::new(program)
        .args(&command[1..])
        .exec();
    Err(e).with_context(|| format!("sudo: running {program}"))
}

/// `ip link add ... type bridge`, `brctl addbr ...`.
fn makes_a_host_bridge(command: &[String]) -> bool {
    let words: Vec<&str> = command.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["ip", "link", "add", rest @ ..] => rest.windows(2).any(|w| w == ["type", "bridge"]),
        ["brctl", "addbr", ..] => true,
        _ => false,
    }
}

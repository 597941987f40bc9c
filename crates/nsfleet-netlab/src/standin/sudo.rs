//! `sudo`, for the commands netlab runs as root on the host (`ip netns exec NS ...` into a
//! node's named namespace, `tcpdump`, `tc`): nsfleet runs as root already, so the command
//! runs as it is, with this environment (as `sudo -E` keeps it). The Linux bridges netlab
//! makes on the host for multi-access links (containerlab needs them there) are answered
//! without touching the host, for the bridges the lab's `clab.yml` declares as `kind:
//! bridge`: nsfleet makes each as a switch of the lab's own. Any other bridge is refused.

use super::{options, Tool};
use anyhow::{bail, Context};
use std::os::unix::process::CommandExt;

pub fn answer(args: &[String]) -> anyhow::Result<i32> {
    let (_, command) = options(Tool::Sudo, args, &["-E", "-n"], &[])?;
    let Some(program) = command.first() else {
        bail!("sudo: no command given");
    };
    if !nsfleet::sys::is_root() {
        bail!("nsfleet's sudo stand-in runs commands as root only, and this is not root");
    }
    if let Some((bridge, mask)) = host_bridge(command) {
        if !lab_bridges().contains(&bridge.to_string()) {
            bail!(
                "`sudo {}`: a Linux bridge on the host, which is not one the lab's clab.yml declares (kind: bridge): nsfleet does not make it",
                command.join(" ")
            );
        }
        if let Some(mask) = mask {
            // For the bridge's switch, once the lab is deployed (containerlab's stand-in).
            crate::state::remember_fwd_mask(bridge, mask)?;
        }
        eprintln!(
            "nsfleet: {bridge} is made by nsfleet as a switch of the lab's own, not on the host: `{}` is not run",
            command.join(" ")
        );
        return Ok(0);
    }
    let e = std::process::Command::new(program)
        .args(&command[1..])
        .exec();
    Err(e).with_context(|| format!("sudo: running {program}"))
}

/// The bridge a command makes, brings up, sets forwarding on or deletes on the host, as
/// netlab's Linux-bridge steps say it: `ip link add name BR type bridge`, `ip link set
/// dev BR up`, `sh -c 'echo N >/sys/class/net/BR/bridge/group_fwd_mask'` (and its mask
/// N), `ip link del dev BR`, `brctl addbr BR`.
fn host_bridge(command: &[String]) -> Option<(&str, Option<u16>)> {
    let words: Vec<&str> = command.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["ip", "link", "add", "name", br, "type", "bridge"]
        | ["ip", "link", "add", br, "type", "bridge"] => Some((br, None)),
        ["ip", "link", "set", "dev", br, "up"] | ["ip", "link", "del", "dev", br] => {
            Some((br, None))
        }
        ["brctl", "addbr", br] => Some((br, None)),
        ["sh", "-c", script] => {
            let (mask, path) = script
                .strip_prefix("echo ")?
                .split_once(">/sys/class/net/")?;
            let br = path.strip_suffix("/bridge/group_fwd_mask")?;
            Some((br, mask.trim().parse().ok()))
        }
        _ => None,
    }
}

/// The `kind: bridge` nodes of the lab's clab.yml in the current folder (netlab runs in
/// the lab's); none without one.
fn lab_bridges() -> Vec<String> {
    let file = "clab.yml";
    let Ok(text) = std::fs::read_to_string(file) else {
        return Vec::new();
    };
    nsfleet::topology::clab::bridge_nodes(file, &text).unwrap_or_default()
}

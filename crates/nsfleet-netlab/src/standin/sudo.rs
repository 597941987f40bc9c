//! `sudo`, for the commands netlab runs as root on the host (`ip netns exec NS ...` into a
//! node's named namespace, `tcpdump`, `tc`, `modprobe`): nsfleet run by root runs the
//! command as it is, with this environment (as `sudo -E` keeps it). Run by a user
//! (docs/rootless.md), whose lab lives in a user namespace of their own, with no named
//! namespace: `ip netns exec clab-LAB-NODE CMD` enters the node's network namespace as
//! `ip netns exec` does (through the lab's user namespace, where the user is root), and
//! nothing else of it: netlab's host-side scripts read the lab's folder; `modprobe` of a module the kernel has loaded already does
//! nothing, of another is refused (it needs the host's root); anything else is refused,
//! by name, rather than run without the root it asked for. The Linux bridges netlab
//! makes on the host for multi-access links (containerlab needs them there) are answered
//! without touching the host, for the bridges the lab's `clab.yml` declares as `kind:
//! bridge`: nsfleet makes each as a switch of the lab's own. Any other bridge is refused.

use super::{options, Tool};
use anyhow::{bail, Context};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

pub fn answer(args: &[String], run_dir: PathBuf) -> anyhow::Result<i32> {
    let (_, command) = options(Tool::Sudo, args, &["-E", "-n"], &[])?;
    let Some(program) = command.first() else {
        bail!("sudo: no command given");
    };
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
    if !nsfleet::sys::is_host_root() {
        return as_user(command, run_dir);
    }
    let e = std::process::Command::new(program)
        .args(&command[1..])
        .exec();
    Err(e).with_context(|| format!("sudo: running {program}"))
}

/// A user's `sudo COMMAND` (see the module).
fn as_user(command: &[String], run_dir: PathBuf) -> anyhow::Result<i32> {
    let words: Vec<&str> = command.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["ip", "netns", "exec", container, _, ..] => {
            let rd = nsfleet::rundir::RunDir::new(&run_dir);
            let lab = super::docker::lab_of(&rd, container)?;
            match nsfleet_client::exec::exec_in_network(nsfleet_client::exec::ExecArgs {
                fleet: nsfleet_client::FleetRef { name: lab, run_dir },
                node: container.to_string(),
                command: command[4..].to_vec(),
            })? {}
        }
        ["modprobe", module] if loaded(module) => Ok(0),
        ["modprobe", module] => bail!(
            "`sudo modprobe {module}`: loading a kernel module needs the host's root, and nsfleet runs as a user here: ask for it to be loaded (as root: modprobe {module})"
        ),
        _ => bail!(
            "`sudo {}`: nsfleet runs as a user here (docs/rootless.md), and its sudo stand-in runs nothing as the host's root",
            command.join(" ")
        ),
    }
}

/// Whether the kernel has `module`: loaded (/sys/module), or built in (modules.builtin
/// of the running kernel, which names the built-in ones /sys/module may not).
fn loaded(module: &str) -> bool {
    let name = module.replace('-', "_");
    if name.contains('/') {
        return false;
    }
    if Path::new("/sys/module").join(&name).exists() {
        return true;
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let builtin = format!("/lib/modules/{}/modules.builtin", release.trim());
    let builtin = std::fs::read_to_string(builtin).unwrap_or_default();
    (builtin.lines()).any(|l| {
        let file = l.rsplit('/').next().unwrap_or(l);
        file.strip_suffix(".ko").unwrap_or(file).replace('-', "_") == name
    })
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

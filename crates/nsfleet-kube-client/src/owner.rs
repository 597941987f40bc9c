//! `up --kube --owner PID`: a fleet on a cluster that goes when a process of the user's
//! machine ends, however it ends. The cluster cannot see that process, so a watcher of
//! ours beside it (`nsfleet kube own`, started by `up` in a process group of its own)
//! deletes the Fleet when it ends, and meanwhile renews the Fleet's lease; the controller
//! deletes a Fleet whose lease is not renewed (the watcher killed, the machine gone).
//!
//! It never touches a fleet but the one it was started for, and never a process.

use crate::Cluster;
use anyhow::Context;
use nsfleet_kube::crd::{FleetOwner, OWNER_LEASE_S, OWNER_RENEW_S};
use nsfleet_kube::remote;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

/// How long the watcher waits for the fleet's parts to be taken down once it deleted it.
const DOWN_BOUND: Duration = Duration::from_secs(300);

/// The owner as the Fleet records it; an error when `pid` is no process.
pub(crate) fn owner(pid: i32) -> anyhow::Result<FleetOwner> {
    nsfleet::sys::pidfd_open(pid).with_context(|| format!("--owner {pid}: no such process"))?;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    Ok(FleetOwner {
        process: format!("process {pid} on {}", host.trim()),
        lease_seconds: OWNER_LEASE_S,
    })
}

/// Starts the watcher of fleet `name` for process `pid`, apart from this process's group
/// (a Ctrl-C of `up` does not reach it); its pid.
pub(crate) fn start_watcher(name: &str, pid: i32, c: &Cluster) -> anyhow::Result<u32> {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(std::env::current_exe()?);
    cmd.args(["kube", "own", name, "--pid", &pid.to_string()])
        .args(["--namespace", &c.namespace]);
    if let Some(context) = &c.context {
        cmd.args(["--context", context]);
    }
    let child = cmd
        .process_group(0)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("starting the owner's watcher (`nsfleet kube own`)")?;
    Ok(child.id())
}

/// `nsfleet kube own FLEET --pid PID`: renews the fleet's lease until process PID ends,
/// then deletes the fleet (and waits for its parts to go); ends at once when the fleet
/// is gone. Errors from the cluster meanwhile are tried again at the next renewal.
pub fn own(name: &str, pid: i32, c: &Cluster) -> anyhow::Result<()> {
    let owner = Arc::new(
        nsfleet::sys::pidfd_open(pid).with_context(|| format!("--pid {pid}: no such process"))?,
    );
    c.with_client(|client| async move {
        for renewal in 0u64.. {
            match remote::renew_owner(&client, &c.namespace, name, &renewal.to_string()).await {
                Ok(true) => {}
                Ok(false) => return Ok(()),
                Err(e) => eprintln!("nsfleet kube own: fleet {name}: {e}"),
            }
            let fd = owner.clone();
            let wait = Duration::from_secs(OWNER_RENEW_S);
            let ended = tokio::task::spawn_blocking(move || {
                nsfleet::sys::poll_readable(&[fd.as_fd()], Some(wait))
            })
            .await??;
            if ended[0] {
                remote::delete(&client, &c.namespace, name, DOWN_BOUND).await?;
                return Ok(());
            }
        }
        Ok(())
    })
}

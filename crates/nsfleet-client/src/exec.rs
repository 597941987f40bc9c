//! `nsfleet exec`: run a command inside a node, as `ip netns exec` does: this process
//! enters the node's network namespace (a descriptor the supervisor passes us), gets a
//! private mount namespace with /sys remounted for it, and becomes the command. Standard
//! input, output, error and the exit status are the command's own.

use super::connect;
use anyhow::{anyhow, bail, Context};
use nsfleet::control::{Reply, Request};
use nsfleet::rundir::RunDir;
use nsfleet::sys;
use std::os::fd::AsFd;
use std::path::PathBuf;

pub struct ExecArgs {
    pub name: String,
    pub node: String,
    pub command: Vec<String>,
    pub run_dir: PathBuf,
}

/// Returns only on failure; on success this process has become the command.
pub fn exec(a: ExecArgs) -> anyhow::Result<std::convert::Infallible> {
    if a.command.is_empty() {
        bail!(
            "no command given: nsfleet exec {} {} -- CMD [ARGS...]",
            a.name,
            a.node
        );
    }
    let rd = RunDir::new(&a.run_dir);
    let mut c = connect(&rd, &a.name)?;
    let Reply::Netns { .. } = c.call(&Request::Netns {
        node: a.node.clone(),
    })?
    else {
        bail!("unexpected reply from the supervisor");
    };
    let ns = c
        .take_fd()
        .ok_or_else(|| anyhow!("the supervisor sent no namespace descriptor"))?;
    drop(c);
    sys::setns_net(ns.as_fd()).context("entering the node's network namespace")?;
    drop(ns);
    // Best effort, as for `ip netns exec` in a container without mount privileges: the
    // network namespace is what matters, /sys/class/net is a convenience.
    let _ = sys::remount_sys_for_netns();
    let e = sys::exec(&a.command);
    let code = if e.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    };
    eprintln!("nsfleet: exec {}: {e}", a.command[0]);
    std::process::exit(code)
}

//! `nsfleet exec`: run a command inside a node. In a node with a world (one that runs
//! processes), this process enters all of the world's namespaces (network, mount, UTS and
//! PID, through a pidfd of its init the supervisor passes us) and forks the command, as
//! `nsenter --fork` does, to be in the PID namespace; it waits and exits with the
//! command's status, with the node's environment only (as `docker exec` has the
//! container's, see nsfleet-subsys's `process::environment`). In any other node it does what `ip netns exec` does: enters the
//! network namespace, gets a private mount namespace with /sys remounted for it, and
//! becomes the command. Standard input, output and error are the command's own.

use super::{FleetRef, NodeNamespace};
use anyhow::{bail, Context};
use nsfleet::sys;
use std::io::IsTerminal;
use std::os::fd::AsFd;

pub struct ExecArgs {
    pub fleet: FleetRef,
    pub node: String,
    pub command: Vec<String>,
}

/// Returns only on failure; on success this process has become the command.
pub fn exec(a: ExecArgs) -> anyhow::Result<std::convert::Infallible> {
    check_command(&a)?;
    let NodeNamespace {
        fd: ns,
        world,
        env,
        image,
        restrictions,
        ..
    } = a.fleet.node_namespace(&a.node)?;
    a.fleet.enter_as_user()?;
    // Marks the command and what it starts as ours: `apply` will not remove the node
    // under them. Set while this process is still single-threaded.
    std::env::set_var(nsfleet::control::EXEC_MARKER, &a.fleet.name);
    if world {
        // A confined node's user namespace.
        let userns = sys::userns::of_process(ns.as_fd()).context("the node's user namespace")?;
        join_cgroup(ns.as_fd())?;
        let all = libc::CLONE_NEWNET
            | libc::CLONE_NEWNS
            | libc::CLONE_NEWUTS
            | libc::CLONE_NEWPID
            | libc::CLONE_NEWIPC
            | libc::CLONE_NEWCGROUP;
        sys::setns(ns.as_fd(), all).context("entering the node's namespaces")?;
        if let Some(userns) = userns {
            sys::userns::become_root_in(userns.as_fd())
                .context("entering the node's user namespace as its root")?;
        }
        drop(ns);
        // What the node's processes give up, this one's too (and so the command's): as
        // `docker exec` runs a command with the container's confinement.
        restrictions
            .apply()
            .context("giving up what the node's processes give up")?;
        let mut command = std::process::Command::new(&a.command[0]);
        if let Some(image) = &image {
            in_image(&mut command, image)?;
        }
        // The node's environment only, as its processes have it: none of ours, but the
        // marker `apply` looks for, and the terminal's type when the command has ours
        // (as `docker exec -t` gives one).
        command.args(&a.command[1..]).env_clear().envs(env);
        command.env(nsfleet::control::EXEC_MARKER, &a.fleet.name);
        if let Some(term) = std::env::var_os("TERM").filter(|_| std::io::stdin().is_terminal()) {
            command.env("TERM", term);
        }
        let child = command.spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => cannot_run(&a.command[0], e),
        };
        // Signals go to the command, as `docker exec` passes them on: this process only
        // waits for it, and a caller that signals it (a closed terminal, Mininet's
        // `popen(...).terminate()` or `send_signal(SIGINT)`) means the command. The
        // terminal's own Ctrl-C reaches the command directly, and is not passed twice.
        // By a handler: a process that has entered another PID namespace may not start a
        // thread to take them.
        let passed = [libc::SIGTERM, libc::SIGHUP, libc::SIGINT, libc::SIGQUIT];
        sys::forward_signals(child.id() as libc::pid_t, &passed)
            .context("passing signals on to the command")?;
        let status = child.wait().context("waiting for the command")?;
        use std::os::unix::process::ExitStatusExt;
        std::process::exit(
            status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
        );
    }
    in_network(ns, &a.command)
}

/// What `ip netns exec` does, in a node of any kind (netlab's host-side scripts, through
/// a user's `sudo`): this process enters the node's network namespace only (a user's
/// process the fleet's user namespace first), keeps the host's files and its folder, and
/// becomes the command. Returns only on failure.
pub fn exec_in_network(a: ExecArgs) -> anyhow::Result<std::convert::Infallible> {
    check_command(&a)?;
    let node = a.fleet.node_namespace(&a.node)?;
    a.fleet.enter_as_user()?;
    in_network(node.fd, &a.command)
}

fn check_command(a: &ExecArgs) -> anyhow::Result<()> {
    if a.command.is_empty() {
        bail!(
            "no command given: nsfleet exec {} {} -- CMD [ARGS...]",
            a.fleet.name,
            a.node
        );
    }
    Ok(())
}

/// Enters the network namespace `ns` (of a node, or a pidfd of its init), with /sys
/// remounted for it where this process may, and becomes `command`.
fn in_network(
    ns: std::os::fd::OwnedFd,
    command: &[String],
) -> anyhow::Result<std::convert::Infallible> {
    sys::setns_net(ns.as_fd()).context("entering the node's network namespace")?;
    drop(ns);
    // Best effort, as for `ip netns exec` in a container without mount privileges: the
    // network namespace is what matters, /sys/class/net is a convenience.
    let _ = sys::remount_sys_for_netns();
    cannot_run(&command[0], sys::exec(command))
}

/// Joins the cgroup of the node whose init's pidfd is `init`, as `docker exec` does: what
/// the command uses is the node's, under the node's limits. While still the host's root
/// (or, for a user, in the user namespace that owns the node's group).
fn join_cgroup(init: std::os::fd::BorrowedFd<'_>) -> anyhow::Result<()> {
    use nsfleet::subsys::world::cgroups::BASE;
    let pid = sys::host_pid_of(init).context("the node's init has ended")?;
    let all = sys::cgroup::hierarchies().context("reading the cgroup mounts")?;
    let dirs =
        sys::cgroup::of_process(&all, pid as i32, BASE).context("reading the node's cgroup")?;
    sys::cgroup::join_dirs(&dirs).with_context(|| match sys::is_host_root() {
        true => "joining the node's cgroup".to_string(),
        false => "joining the node's cgroup: a user's command joins it only from a group of the cgroup v2 subtree delegated to them that the fleet's `up` ran in".to_string(),
    })
}

/// A command in a node that runs an image, as `docker exec` runs one: in the image's
/// working directory, as its user (looked up in the node's root, which this process is
/// in now).
fn in_image(
    command: &mut std::process::Command,
    image: &nsfleet::control::ExecIn,
) -> anyhow::Result<()> {
    use std::os::unix::process::CommandExt;
    if let Some(w) = &image.workdir {
        command.current_dir(w);
    }
    if let Some(u) = &image.user {
        let (uid, gid) = sys::host::user_ids(u).context("the image's user")?;
        command.uid(uid).gid(gid);
    }
    Ok(())
}

/// Says why `program` could not be run and exits as a shell would: 127 when it is not
/// found, 126 otherwise.
fn cannot_run(program: &str, e: std::io::Error) -> ! {
    eprintln!("nsfleet: exec {program}: {e}");
    std::process::exit(if e.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    })
}

//! Processes per node: the topology's `commands`, started inside the node once the fleet
//! is configured, each through `/bin/sh -c` in a process group of its own, stdout and
//! stderr appended to `<log dir>/<node>.log`.
//!
//! At teardown `exit` sends SIGTERM to every group of the node; `exit_batch` then waits
//! for the whole batch at once on pidfds, SIGKILLs what is left after the grace period,
//! and reaps. Processes also die with the fleet's owner: PR_SET_PDEATHSIG here, and the
//! supervisor's PID namespace for anything that escapes its group.

use crate::core::{InitCtx, Node, Phase, Subsystem};
use crate::sys;
use crate::topology::NodeConfig;
use anyhow::Context;
use std::fs::OpenOptions;
use std::os::fd::{AsFd, OwnedFd};
use std::process::{Command, Stdio};
use std::time::Duration;

pub struct Processes {
    /// How long processes get between SIGTERM and SIGKILL.
    pub grace: Duration,
}

impl Default for Processes {
    fn default() -> Self {
        Processes {
            grace: Duration::from_secs(3),
        }
    }
}

struct Proc {
    /// As fork returned it: in the supervisor's own PID namespace, and the process group.
    pid: i32,
    pidfd: OwnedFd,
    command: String,
}

/// A node's processes (this subsystem's per-node state).
#[derive(Default)]
pub struct Procs {
    list: Vec<Proc>,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ProcInfo {
    /// The pid as the host sees it.
    pub pid: i64,
    pub command: String,
    pub running: bool,
}

impl Procs {
    pub fn describe(&self) -> Vec<ProcInfo> {
        self.list
            .iter()
            .map(|p| {
                let running = matches!(sys::poll_exited(&[p.pidfd.as_fd()], Duration::ZERO), Ok(0));
                ProcInfo {
                    pid: sys::host_pid_of(p.pidfd.as_fd()).unwrap_or(p.pid as i64),
                    command: p.command.clone(),
                    running,
                }
            })
            .collect()
    }

    fn signal_all(&self, sig: libc::c_int) {
        for p in &self.list {
            // ESRCH: the group is already gone.
            let _ = sys::kill_group(p.pid, sig);
        }
    }
}

impl Subsystem for Processes {
    type State = Procs;

    fn name(&self) -> &'static str {
        "processes"
    }

    fn phase(&self) -> Phase {
        Phase::Start
    }

    fn wants(&self, config: &NodeConfig) -> bool {
        !config.commands.is_empty()
    }

    fn init(&self, cx: &mut InitCtx<'_>, procs: &mut Procs) -> anyhow::Result<()> {
        let path = cx.log_dir.join(format!("{}.log", cx.node.name()));
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        for command in &cx.config().commands {
            match spawn(command, &log) {
                Ok(p) => procs.list.push(p),
                Err(e) => {
                    // Leave nothing behind of our own: the core only undoes earlier subsystems.
                    self.exit_batch(&mut [(cx.node, procs)]);
                    return Err(e.context(format!("starting {command:?}")));
                }
            }
        }
        Ok(())
    }

    fn exit(&self, _node: &Node, procs: &mut Procs) {
        procs.signal_all(libc::SIGTERM);
    }

    fn exit_batch(&self, batch: &mut [(&Node, &mut Procs)]) {
        let all: Vec<&Proc> = batch.iter().flat_map(|(_, p)| p.list.iter()).collect();
        let fds: Vec<_> = all.iter().map(|p| p.pidfd.as_fd()).collect();
        if sys::poll_exited(&fds, Duration::ZERO).unwrap_or(0) < fds.len() {
            for (_, procs) in batch.iter() {
                procs.signal_all(libc::SIGTERM);
            }
        }
        if sys::poll_exited(&fds, self.grace).unwrap_or(0) < fds.len() {
            for (_, procs) in batch.iter() {
                procs.signal_all(libc::SIGKILL);
            }
            let _ = sys::poll_exited(&fds, Duration::from_secs(5));
        }
        for fd in fds {
            sys::reap_pidfd(fd);
        }
    }
}

fn spawn(command: &str, log: &std::fs::File) -> anyhow::Result<Proc> {
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log.try_clone()?);
    let (pid, pidfd) = sys::spawn_node_process(&mut cmd)?;
    Ok(Proc {
        pid,
        pidfd,
        command: command.to_string(),
    })
}

//! Where a fleet lives: this machine ([`Here`]) or a Kubernetes cluster (nsfleet-kube-client's
//! `Cluster`). The command line chooses one from its arguments, once, and each command that
//! can reach a fleet in either place calls the same method on it, with the local command's
//! arguments. What a place does not offer (`up --kube --wait`, say) its implementation
//! refuses, by name.

use crate::apply::{self, ApplyArgs};
use crate::capture::{self, CaptureArgs};
use crate::down::{self, DownArgs};
use crate::exec::{self, ExecArgs};
use crate::link::{self, LinkArgs};
use crate::status::{self, StatusArgs};
use crate::up::{self, UpArgs};

/// The commands that reach a fleet wherever it lives.
pub trait Backend {
    /// `up`; `machines` are the machines of a cluster to spread over (none here).
    fn up(&self, a: UpArgs, machines: Vec<String>) -> anyhow::Result<()>;
    fn down(&self, a: DownArgs) -> anyhow::Result<()>;
    fn status(&self, a: StatusArgs) -> anyhow::Result<()>;
    /// The command's exit status (here, the command replaces nsfleet: it returns only to
    /// say why it could not).
    fn exec(&self, a: ExecArgs) -> anyhow::Result<i32>;
    fn link(&self, a: LinkArgs) -> anyhow::Result<()>;
    fn apply(&self, a: ApplyArgs) -> anyhow::Result<()>;
    /// The capture's exit status.
    fn capture(&self, a: CaptureArgs) -> anyhow::Result<i32>;
}

/// This machine: the fleets under the run directory the arguments name.
pub struct Here;

impl Backend for Here {
    fn up(&self, a: UpArgs, _machines: Vec<String>) -> anyhow::Result<()> {
        up::up(a)
    }

    fn down(&self, a: DownArgs) -> anyhow::Result<()> {
        down::down(a)
    }

    fn status(&self, a: StatusArgs) -> anyhow::Result<()> {
        status::status(a)
    }

    fn exec(&self, a: ExecArgs) -> anyhow::Result<i32> {
        exec::exec(a).map(|never| match never {})
    }

    fn link(&self, a: LinkArgs) -> anyhow::Result<()> {
        link::link(a)
    }

    fn apply(&self, a: ApplyArgs) -> anyhow::Result<()> {
        apply::apply(a)
    }

    fn capture(&self, a: CaptureArgs) -> anyhow::Result<i32> {
        capture::capture(a).map(|()| 0)
    }
}

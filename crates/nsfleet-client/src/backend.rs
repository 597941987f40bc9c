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

/// How `up` spreads a fleet over a cluster's machines (nothing of it applies here).
#[derive(Clone, Debug, Default)]
pub struct Spread {
    /// The machines to use; all by default.
    pub machines: Vec<String>,
    /// Images the user's store lacks are pulled by each machine from their registries.
    pub machines_pull: bool,
    /// Registries the machines reach over plain HTTP.
    pub insecure_registries: Vec<String>,
}

/// The commands that reach a fleet wherever it lives.
pub trait Backend {
    /// `up`; `spread` says how over a cluster's machines.
    fn up(&self, a: UpArgs, spread: Spread) -> anyhow::Result<()>;
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
    fn up(&self, a: UpArgs, _spread: Spread) -> anyhow::Result<()> {
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

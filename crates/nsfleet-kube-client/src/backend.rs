//! A fleet on a Kubernetes cluster, as the commands that reach a fleet wherever it lives
//! call it (nsfleet-client's `Backend`): each method takes the local command's arguments,
//! refuses by name what the cluster does not offer, and calls [`fleet`](crate::fleet) or
//! [`capture`](crate::capture).

use crate::{capture, fleet, Cluster};
use anyhow::bail;
use nsfleet_client::apply::ApplyArgs;
use nsfleet_client::backend::{Backend, Spread};
use nsfleet_client::capture::CaptureArgs;
use nsfleet_client::down::DownArgs;
use nsfleet_client::exec::ExecArgs;
use nsfleet_client::link::LinkArgs;
use nsfleet_client::status::StatusArgs;
use nsfleet_client::up::UpArgs;

impl Backend for Cluster {
    fn up(&self, a: UpArgs, spread: Spread) -> anyhow::Result<()> {
        let Some(file) = a.file.clone() else {
            bail!("up --kube needs a topology file");
        };
        if a.dry_run {
            bail!("--dry-run with --kube: not offered yet (the cluster places the fleet); `nsfleet up FILE --dry-run` checks the file here");
        }
        fleet::up(&file, a, spread, self)
    }

    fn down(&self, a: DownArgs) -> anyhow::Result<()> {
        if a.no_wait {
            bail!("--no-wait with --kube: each machine's agent always waits for its part's reclamation");
        }
        fleet::down(&a.fleet.name, self, a.json)
    }

    fn status(&self, a: StatusArgs) -> anyhow::Result<()> {
        let Some(name) = a.name else {
            bail!("status --kube needs the fleet's name");
        };
        fleet::status(&name, self, a.json)
    }

    fn exec(&self, a: ExecArgs) -> anyhow::Result<i32> {
        fleet::exec(&a.fleet.name, &a.node, &a.command, self)
    }

    fn link(&self, a: LinkArgs) -> anyhow::Result<()> {
        fleet::link(&a.fleet.name, &a.target, a.action.as_deref(), self, a.json)
    }

    fn apply(&self, a: ApplyArgs) -> anyhow::Result<()> {
        fleet::apply(a, self)
    }

    fn capture(&self, a: CaptureArgs) -> anyhow::Result<i32> {
        let on = capture::CaptureOn {
            targets: a.targets,
            write: a.write,
            count: a.count,
            snaplen: a.snaplen,
            filter: a.filter,
        };
        capture::capture(&a.fleet.name, on, self)
    }
}

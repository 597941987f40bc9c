//! nsfleet-kube: one fleet spread over a Kubernetes cluster's machines. Kubernetes is the
//! engine that keeps the pieces running; nsfleet does not become one.
//!
//! - [`crd`]: the `Fleet` resource (the user's) and the `FleetPart` (one machine's share).
//! - [`plan`]: a topology and the cluster's machines in, each machine's part out (pure).
//! - [`controller`]: places fleets and keeps their status (a Deployment).
//! - [`agent`]: runs its machine's parts with nsfleet's supervisor (a DaemonSet).
//! - [`agents`]: the machines, as the agents' pods say them.
//! - [`manifests`]: what `nsfleet kube install` applies, with the least RBAC each needs.
//! - [`remote`]: the user's side (`up --kube`, `status`, `exec`, `down`), as data.
//!
//! It never touches a network namespace itself: each machine's agent runs nsfleet's own
//! commands, which do. It never prints for people: nsfleet-client does.

pub mod agent;
pub mod agents;
pub mod controller;
pub mod crd;
pub mod manifests;
pub mod plan;
pub mod remote;

/// The cluster connection [`remote::connect`] gives, which the rest of `remote` takes.
pub use kube::Client;

/// What went wrong, in words for the Fleet's status or the user.
#[derive(Debug)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl From<kube::Error> for Error {
    fn from(e: kube::Error) -> Self {
        Error(match e {
            kube::Error::Api(a) if a.code == 403 => format!(
                "the cluster refused: {} (does the service account have nsfleet's RBAC? `nsfleet kube install`)",
                a.message
            ),
            e => e.to_string(),
        })
    }
}

/// Runs `work` until it ends or the process gets SIGTERM (as the first process of its
/// container, it would otherwise ignore it: Kubernetes would wait out the grace period).
pub(crate) async fn until_terminated(
    work: impl std::future::Future<Output = ()>,
    said: &str,
) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        _ = work => {}
        _ = term.recv() => eprintln!("{said}"),
    }
    Ok(())
}

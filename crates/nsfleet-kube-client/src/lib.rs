//! The Kubernetes front, on the client side: a fleet spread over a cluster's machines,
//! reached from here. The `--kube` forms of `up`, `apply`, `status`, `exec`, `link` and
//! `down` ([`fleet`]) and of `capture` ([`capture`]); `nsfleet kube` ([`cluster`]:
//! install, the controller, the agent, one machine's part) and `nsfleet kube image`
//! ([`image`]). What is done in the cluster is nsfleet-kube's; the printing for people and
//! machines is here.
//!
//! The only crate of the client side that runs tokio (a current-thread runtime per
//! command, [`runtime`]) and uses nsfleet-kube. It never touches a network namespace
//! itself (a machine's agent runs nsfleet's own commands there), never forks from its
//! runtime, and the general client never imports it.

mod backend;
pub mod capture;
pub mod cluster;
pub mod fleet;
pub mod image;
pub mod owner;
pub mod transfer;

/// Which cluster, and which namespace of it.
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    pub context: Option<String>,
    pub namespace: String,
}

impl Cluster {
    /// Runs `body` with a client of this cluster, on a runtime of its own: how every
    /// `--kube` command that reaches a fleet opens.
    pub(crate) fn with_client<T, F, Fut>(&self, body: F) -> anyhow::Result<T>
    where
        F: FnOnce(nsfleet_kube::Client) -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<T>>,
    {
        let context = self.context.as_deref();
        runtime()?.block_on(async { body(nsfleet_kube::remote::connect(context).await?).await })
    }
}

/// A runtime for one command's calls to the cluster.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    // The cluster's connections are written with writev(2), which raises SIGPIPE when
    // the other end has closed (std's vectored writes pass no MSG_NOSIGNAL): an exec
    // stream whose command ended first (a receiver that refused a layer) killed `up
    // --kube` there, leaving its Fleet half-made. Ignored, the write fails with EPIPE,
    // which the caller handles; a closed standard output then fails a print instead.
    nsfleet::sys::signals::ignore_sigpipe();
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

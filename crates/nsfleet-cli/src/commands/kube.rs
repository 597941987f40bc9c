//! `nsfleet kube`: nsfleet in a Kubernetes cluster: what to install there, and the
//! controller and agent that run there.

use clap::Subcommand;
use std::path::PathBuf;

/// Fleets larger than one machine, on Kubernetes.
///
/// One fleet is spread over the machines of a cluster: a controller (a Deployment)
/// places its nodes on the machines that run nsfleet's agent (a DaemonSet, privileged,
/// in each machine's own network), cutting as few links as it can, and each agent
/// brings up its machine's part with nsfleet's own supervisor, at nsfleet's pace. A link
/// between nodes on two machines is a VXLAN tunnel between the machines' addresses
/// (its MTU lowered by 50 bytes, and said); every node keeps its name and addresses
/// wherever it lands.
///
///   nsfleet kube install --image REGISTRY/nsfleet:TAG   # CRDs, RBAC, controller, agents
///
///   nsfleet up lab.toml --kube                          # a Fleet resource, followed until up
///
///   nsfleet status lab --kube [--json]                  # --json: each node's machine
///
///   nsfleet exec lab r7 --kube -- ping -c1 10.0.0.1     # in the node, on its machine
///
///   nsfleet link lab r7:eth1 down --kube                # on r7's machine
///
///   nsfleet capture lab r7:eth1 --kube -w r7.pcapng     # on r7's machine, written here
///
///   nsfleet apply lab.toml --kube                       # changed in place; nodes stay put
///
///   nsfleet down lab --kube                             # every machine's part reclaimed
///
///   kubectl get fleets; kubectl delete fleet lab        # the same, from kubectl
///
/// The image is nsfleet's binary at /nsfleet (its entry point) and the libraries it
/// links; `nsfleet kube image` builds it from this program:
///
///   nsfleet kube image registry.example/nsfleet:1 -o nsfleet.tar
///
///   skopeo copy oci-archive:nsfleet.tar docker://registry.example/nsfleet:1
///
/// A test cluster on this box: `scripts/kube-cluster up --machines 3`.
#[derive(Subcommand)]
pub enum KubeCommand {
    /// Apply nsfleet's resources, RBAC, controller and agents to the cluster.
    Install {
        /// The image holding nsfleet (its entry point `nsfleet`).
        #[arg(long)]
        image: String,
        /// HOST:PORT where pods reach the API server, when the cluster's service address
        /// does not work from a machine's own network (a cluster without kube-proxy).
        #[arg(long)]
        api_server: Option<String>,
        /// Let Fleets run unconfined nodes (`up --kube --privileged`), each as its
        /// machine's root: whoever may create a Fleet may then be root on every machine.
        /// Without it, each agent refuses such a Fleet, which is rolled back.
        #[arg(long)]
        allow_privileged: bool,
        /// The kubeconfig's context to use instead of its current one.
        #[arg(long)]
        context: Option<String>,
    },
    /// Build nsfleet's image (for `install --image`) from this program
    ///
    /// Build nsfleet's image (for `install --image`) from this program: an OCI image
    /// archive (FILE.tar: `ctr images import`, `podman load`, `skopeo copy
    /// oci-archive:FILE.tar docker://...`) or an OCI layout folder (any other name).
    Image {
        /// The image's name, as `install --image` will give it (REGISTRY/NAME:TAG).
        reference: String,
        /// Where to write it.
        #[arg(short = 'o', long, value_name = "FILE")]
        output: PathBuf,
    },
    /// Print what `install` applies, as one JSON list (`| kubectl apply -f -`).
    Manifests {
        #[arg(long)]
        image: String,
        #[arg(long)]
        api_server: Option<String>,
        #[arg(long)]
        allow_privileged: bool,
    },
    /// Run the controller (the Deployment's command).
    Controller,
    /// Run a machine's agent (the DaemonSet's command).
    Agent,
    /// Bring up one machine's part of a fleet (the agent's command).
    #[command(hide = true)]
    UpPart { file: PathBuf },
    /// Change one machine's running part to its changed spec (the agent's command).
    #[command(hide = true)]
    ApplyPart { file: PathBuf },
    /// Say, as JSON, which layers of a part's images this machine's store lacks, after
    /// pulling those it is to pull itself (the agent's command).
    #[command(hide = true)]
    PartImages {
        file: PathBuf,
        /// The pulls' Docker config comes on standard input (from the fleet's Secret).
        #[arg(long)]
        credentials_on_stdin: bool,
    },
    /// Renew an owned fleet's lease until process PID ends, then take the fleet down
    /// (started by `up --kube --owner PID`).
    #[command(hide = true)]
    Own {
        fleet: String,
        #[arg(long)]
        pid: i32,
        #[arg(long, default_value = "default")]
        namespace: String,
        #[arg(long)]
        context: Option<String>,
    },
    /// Take one layer's stream on standard input into this machine's store (sent by
    /// `up --kube` through the agent).
    #[command(hide = true)]
    ReceiveLayer {
        diff_id: String,
        digest: String,
        size: u64,
    },
}

impl KubeCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        match self {
            KubeCommand::Install {
                image,
                api_server,
                allow_privileged,
                context,
            } => {
                nsfleet_kube_client::cluster::install(image, api_server, allow_privileged, context)
            }
            KubeCommand::Manifests {
                image,
                api_server,
                allow_privileged,
            } => nsfleet_kube_client::cluster::print_manifests(image, api_server, allow_privileged),
            KubeCommand::Image { reference, output } => {
                nsfleet_kube_client::image::image(&reference, &output)
            }
            KubeCommand::Controller => nsfleet_kube_client::cluster::controller(),
            KubeCommand::Agent => nsfleet_kube_client::cluster::agent(),
            KubeCommand::UpPart { file } => nsfleet_kube_client::cluster::up_part(&file, run_dir),
            KubeCommand::ApplyPart { file } => {
                nsfleet_kube_client::cluster::apply_part(&file, run_dir)
            }
            KubeCommand::Own {
                fleet,
                pid,
                namespace,
                context,
            } => {
                let c = nsfleet_kube_client::Cluster { context, namespace };
                nsfleet_kube_client::owner::own(&fleet, pid, &c)
            }
            KubeCommand::PartImages {
                file,
                credentials_on_stdin,
            } => nsfleet_kube_client::cluster::part_images(&file, credentials_on_stdin),
            KubeCommand::ReceiveLayer {
                diff_id,
                digest,
                size,
            } => nsfleet_kube_client::cluster::receive_layer(&diff_id, &digest, size),
        }
    }
}

//! `nsfleet image`: the image store's subcommands (`pull`, `load`, `ls`, `rm`, `prune`),
//! their arguments and help, handed to `nsfleet_client::image`.

use clap::{Args, Subcommand};
use nsfleet_client::image as cmd;
use std::path::PathBuf;

/// Container images for nodes, in nsfleet's own image store
///
/// Container images for nodes, without a container engine: OCI and Docker images kept in
/// nsfleet's own content-addressed store, each layer checked against its digest and
/// unpacked once, shared by every image that has it.
///
///   nsfleet image pull alpine:3.20                # from its registry (Docker Hub here)
///   docker save alpine:3.20 -o alpine.tar && nsfleet image load alpine.tar
///   skopeo copy docker://alpine:3.20 oci:alpine-oci:3.20
///   nsfleet image load alpine-oci --name alpine   # an OCI layout names only the tag
///   nsfleet image ls
///   nsfleet image rm alpine:3.20                  # or by id: nsfleet image rm 3f57d9401f8d
///   nsfleet image prune --all                     # every image no running node uses
///   nsfleet image prune --kube                    # on every machine of the cluster
///
/// The store is /var/lib/nsfleet/images (a user's: $XDG_DATA_HOME/nsfleet/images) unless
/// --store or $NSFLEET_IMAGES says otherwise.
#[derive(Subcommand)]
#[command(verbatim_doc_comment)]
pub enum ImageCommand {
    /// Pull images from their registries
    ///
    /// Each reference is read as Docker reads it (`alpine` is
    /// docker.io/library/alpine:latest). From a multi-platform image, the one for linux and
    /// this machine's architecture is taken. Only the layers the store lacks are fetched,
    /// three at a time, each checked against its digest before it is unpacked; an image
    /// whose layers are all here already only has its name checked again.
    ///
    /// Registries are reached over HTTPS, except loopback ones (127.0.0.0/8, ::1,
    /// localhost), which are plain HTTP as Docker allows, and those named with
    /// --insecure-registry. Credentials are those `docker login` saves, in
    /// $DOCKER_CONFIG/config.json, else ~/.docker/config.json: from the credential helper
    /// it names for the registry (`credHelpers`, else `credsStore`: the program
    /// docker-credential-NAME on PATH), else from its `auths`; with neither, the pull is
    /// anonymous. Progress goes to stderr: bars on a terminal, lines otherwise.
    ///
    ///   nsfleet image pull alpine:3.20 ghcr.io/me/app:1.0
    ///   nsfleet image pull localhost:5000/lab/router:dev       # a local registry, plain HTTP
    ///   nsfleet image pull --insecure-registry 192.0.2.7:5000 192.0.2.7:5000/lab/app:1
    ///   nsfleet image pull frrouting/frr:v8.4.0 --json | jq -r '.pulled[0].id'
    #[command(verbatim_doc_comment)]
    Pull {
        /// Image references: NAME[:TAG] or NAME@sha256:DIGEST.
        #[arg(required = true)]
        references: Vec<String>,
        /// A registry (HOST or HOST:PORT) to reach over plain HTTP; may be repeated.
        #[arg(long = "insecure-registry", value_name = "HOST[:PORT]")]
        insecure_registry: Vec<String>,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Load the images of a `docker save` archive or an OCI image layout
    ///
    /// The file is a `docker save` / `podman save` archive, an OCI image layout folder, or
    /// a tar of one. Every blob is checked against its digest and every layer
    /// against its config's diff_id; an image for another architecture, a layer that
    /// would write outside itself (`..`, a path through a symbolic link, a hard link out)
    /// is refused, and the store is left as it was. Device files in a layer are skipped
    /// (a node's /dev is made for it), with a warning. Progress goes to stderr.
    ///
    ///   nsfleet image load alpine.tar
    ///   nsfleet image load ./oci-layout --name ghcr.io/me/app
    ///   nsfleet image load --from podman alpine:3.20  # what this machine's podman holds
    #[command(verbatim_doc_comment)]
    Load {
        /// The archive (a tar) or the OCI layout folder; with --from, the image's name in
        /// that engine.
        file: PathBuf,
        /// Take the image from this machine's docker or podman, which already holds it
        /// (its own `save`, no registry): `nsfleet image load --from podman alpine:3.20`.
        #[arg(long, value_name = "ENGINE", value_parser = ["docker", "podman"])]
        from: Option<String>,
        /// The name of an image the archive does not name (an OCI layout's tag is kept
        /// when this names none): `alpine`, `ghcr.io/me/app:1.0`.
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// List the images.
    ///
    /// A table of NAME, ID (12 hex digits), ARCH, LAYERS and unpacked SIZE, one row per
    /// name; --json gives every field.
    Ls {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Remove images by name or id
    ///
    /// A name is read as Docker reads it (`alpine` is docker.io/library/alpine:latest); an
    /// id may be cut to its first hex digits (at least 4). A name goes; the image goes with its last name, and its
    /// layers with the last image that has them. An image a running node uses is kept,
    /// and the error says who uses it.
    ///
    ///   nsfleet image rm alpine:3.20 ghcr.io/me/app:1.0
    #[command(verbatim_doc_comment)]
    Rm {
        /// Image names or ids.
        #[arg(required = true)]
        references: Vec<String>,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Remove what no image or node needs.
    ///
    /// Images without a name, layers no image uses, what interrupted loads left and holds
    /// whose processes are gone. Never touches what a running node uses. With --kube, each
    /// machine's store of the cluster instead, by its agent.
    Prune {
        /// Also every named image that no running node uses.
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        store: StoreArgs,
        /// Prune the image store of every machine of the Kubernetes cluster of $KUBECONFIG
        /// (or ~/.kube/config) that runs nsfleet's agent (/var/lib/nsfleet/images on each;
        /// --store is this machine's and is not used), each machine's result said.
        #[arg(long)]
        kube: bool,
        /// With --kube: the kubeconfig's context to use instead of its current one.
        #[arg(long, requires = "kube", value_name = "CONTEXT")]
        context: Option<String>,
    },
}

/// What every image command takes, last among its options: whether to answer in JSON,
/// and the store.
#[derive(Args)]
pub struct StoreArgs {
    /// JSON on stdout, for machines.
    #[arg(long)]
    json: bool,
    /// The image store's folder [default: /var/lib/nsfleet/images as root;
    /// $XDG_DATA_HOME/nsfleet/images as a user]
    #[arg(long = "store", env = "NSFLEET_IMAGES")]
    dir: Option<PathBuf>,
}

impl StoreArgs {
    fn dir(&self) -> PathBuf {
        (self.dir.clone()).unwrap_or_else(cmd::default_store)
    }
}

impl ImageCommand {
    pub fn run(self) -> anyhow::Result<()> {
        match self {
            ImageCommand::Pull {
                references,
                insecure_registry,
                store,
            } => cmd::pull(cmd::PullArgs {
                references,
                json: store.json,
                store: store.dir(),
                insecure_registries: insecure_registry,
            }),
            ImageCommand::Load {
                file,
                from,
                name,
                store,
            } => cmd::load(cmd::LoadArgs {
                file,
                from,
                name,
                json: store.json,
                store: store.dir(),
            }),
            ImageCommand::Ls { store } => cmd::ls(store.dir(), store.json),
            ImageCommand::Rm { references, store } => cmd::rm(store.dir(), &references, store.json),
            ImageCommand::Prune {
                all,
                store,
                kube: true,
                context,
            } => {
                let c = nsfleet_kube_client::Cluster {
                    context,
                    namespace: String::new(),
                };
                nsfleet_kube_client::fleet::prune_images(all, &c, store.json)
            }
            ImageCommand::Prune { all, store, .. } => cmd::prune(store.dir(), all, store.json),
        }
    }
}

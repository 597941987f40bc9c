//! The resources nsfleet keeps in a Kubernetes cluster, group `nsfleet.dev`, version
//! `v1alpha1`: a [`Fleet`] is the user's (the topology, and the whole fleet's status); a
//! [`FleetPart`] is one machine's share of it, made by the controller, owned by its Fleet,
//! and carried out by that machine's agent, which reports in its status.
//!
//! Everything the controller and the agents know lives in these resources: a controller
//! restarted, or an agent restarted, reads its work back from them.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const GROUP: &str = "nsfleet.dev";
/// The finalizer on a Fleet (the controller's: its parts are gone) and on a FleetPart (the
/// agent's: its machine's part is down and reclaimed).
pub const FINALIZER: &str = "nsfleet.dev/reclaimed";
/// The label that names a part's machine, which its agent selects on.
pub const MACHINE_LABEL: &str = "nsfleet.dev/machine";
/// The label that names a part's fleet.
pub const FLEET_LABEL: &str = "nsfleet.dev/fleet";

/// The label selector of a fleet's parts.
pub fn parts_of(fleet: &str) -> String {
    format!("{FLEET_LABEL}={fleet}")
}

/// A fleet of network namespaces spread over the cluster's machines.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "nsfleet.dev",
    version = "v1alpha1",
    kind = "Fleet",
    namespaced,
    status = "FleetStatus",
    shortname = "fl",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Nodes","type":"integer","jsonPath":".status.nodes"}"#,
    printcolumn = r#"{"name":"Up","type":"integer","jsonPath":".status.nodesUp"}"#,
    printcolumn = r#"{"name":"Machines","type":"integer","jsonPath":".status.machineCount"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct FleetSpec {
    /// The topology, inline: nsfleet's TOML or a containerlab file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<String>,
    /// The topology from a ConfigMap of the Fleet's namespace instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapKey>,
    /// `toml` (nsfleet's) or `clab` (containerlab's); by default, whichever the text is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// Machines to use (Kubernetes node names); all that run the agent by default.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machines: Vec<String>,
    /// Counted up by each `nsfleet apply --kube`: applying the same text again (after a
    /// change was refused) is a new generation, which the controller acts on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    /// What the nodes that name an image run, and those images as the user's store holds
    /// them (`up --kube` fills them in).
    #[serde(flatten)]
    pub software: Software,
    /// How each machine brings its part up.
    #[serde(flatten)]
    pub up: UpOptions,
    /// A process (on the user's machine) whose end takes the fleet down: `up --kube
    /// --owner PID`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<FleetOwner>,
}

/// A fleet's owner: a process outside the cluster, watched by a process of nsfleet's on
/// the same machine, which deletes the Fleet when the owner ends and meanwhile renews
/// the Fleet's [`OWNER_RENEWED`] annotation every [`OWNER_RENEW_S`] seconds. A Fleet whose
/// annotation the controller has not seen change for `leaseSeconds` (its watcher killed,
/// or its machine gone) is deleted by the controller.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FleetOwner {
    /// Who it is, for people: `process 4242 on laptop`.
    pub process: String,
    pub lease_seconds: u64,
}

/// The annotation an owned Fleet's watcher renews (any new value will do).
pub const OWNER_RENEWED: &str = "nsfleet.dev/owner-renewed";
/// How often the watcher renews it.
pub const OWNER_RENEW_S: u64 = 5;
/// How long the controller waits for a renewal before it deletes an owned fleet.
pub const OWNER_LEASE_S: u64 = 30;

/// How each machine brings its part up, as a local `up` is told: `--workers`, and
/// `--wait` (the part is Running once its nodes are ready by that condition; one that is
/// not within the bound fails, and while the fleet deploys that rolls it back).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UpOptions {
    /// Worker threads on each machine; by default, one per CPU of the machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<u32>,
    /// `started`, `healthy` or `converged` (each machine's routers have routes to every
    /// router loopback of its part).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<String>,
    /// With `wait`: seconds each machine waits at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_timeout_s: Option<u64>,
    /// The nodes run unconfined, as the machine's root (`up --privileged`): only where
    /// nsfleet was installed with `--allow-privileged`; each agent refuses it otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub privileged: bool,
}

/// What the nodes that name an image run, and the images: on a Fleet, all of them; on a
/// part, those its own nodes name, which its machine's store must hold before it starts.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Software {
    /// The nodes run each machine's own programs, not the images they name
    /// (`--host-software`); `images` is empty then.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub host_software: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<FleetImage>,
    /// How machines pull the images marked `fromRegistry` (`up --kube --pull-on-machines`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull: Option<MachinePull>,
}

/// How each machine pulls images from their registries itself.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachinePull {
    /// A Secret of the Fleet's namespace, of type `kubernetes.io/dockerconfigjson`, holding
    /// the user's credentials for those registries, and labelled [`PULL_SECRET_LABEL`] with
    /// the fleet's name (an agent reads no other). Each agent reads it into memory for the
    /// pull; no machine writes it to its disk. None: the pulls are anonymous.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// Registries reached over plain HTTP (`HOST` or `HOST:PORT`), as `image pull
    /// --insecure-registry`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub insecure_registries: Vec<String>,
}

/// The label that marks a Secret as holding the pull credentials of the fleet it names:
/// the agents read a fleet's Secret only when it carries this label with that fleet's name,
/// so that a Fleet cannot have them read another Secret of its namespace.
pub const PULL_SECRET_LABEL: &str = "nsfleet.dev/pull-credentials-of";

/// An image a fleet's nodes name: the reference as the topology writes it, and the image
/// it resolved to in the user's store (its id, layers and process fields), which a
/// machine's store adopts once it holds every layer.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FleetImage {
    pub reference: String,
    /// Pulled by each machine from its registry (the user's store lacks it): only the
    /// reference is known here, and the fields below are empty.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_registry: bool,
    /// `sha256:<hex>` of its config (Docker's image id).
    #[serde(default)]
    pub id: String,
    /// The names it has in the user's store, normalized.
    #[serde(default)]
    pub names: Vec<String>,
    #[serde(default)]
    pub architecture: String,
    #[serde(default)]
    pub os: String,
    /// Its layers' diff_ids, lowest first.
    #[serde(default)]
    pub layers: Vec<String>,
    /// Unpacked bytes of each layer, as `layers`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layer_sizes: Vec<u64>,
    /// Unpacked bytes of its layers (what a machine's disk is asked for).
    #[serde(default)]
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_unix: Option<u64>,
    #[serde(default)]
    pub entrypoint: Vec<String>,
    #[serde(default)]
    pub cmd: Vec<String>,
    #[serde(default)]
    pub env: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// The references of those of `images` that have any of `layers` (what a message about
/// those layers names). An image a machine pulls has no layers known here.
pub fn with_any_layer<'a>(images: &'a [FleetImage], layers: &[String]) -> Vec<&'a str> {
    (images.iter())
        .filter(|i| i.layers.iter().any(|l| layers.contains(l)))
        .map(|i| i.reference.as_str())
        .collect()
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct ConfigMapKey {
    pub name: String,
    pub key: String,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FleetStatus {
    /// Deploying, Running, Applying (a change being made), Degraded, Failed, Deleting.
    pub phase: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub nodes: u64,
    #[serde(default)]
    pub nodes_up: u64,
    #[serde(default)]
    pub machine_count: u64,
    /// Links cut by the placement: each a VXLAN tunnel between two machines.
    #[serde(default)]
    pub tunnels: u64,
    /// The MTU of those tunnels' ends (the underlay's less VXLAN's 50 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel_mtu: Option<u32>,
    /// The first of the fleet's VXLAN network identifiers (it has `tunnels` of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vni_base: Option<u32>,
    #[serde(default)]
    pub machines: Vec<MachineStatus>,
    /// While the fleet is deleted: the machines whose part was let go without its agent
    /// saying it was reclaimed (no agent ran there for the controller's bound).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreclaimed: Vec<String>,
    /// The Fleet's generation the parts were last placed or changed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Why the last change of the topology (`nsfleet apply --kube`) was refused, or failed
    /// on a machine; empty when it was made.
    #[serde(default)]
    pub change_error: String,
    /// What every part ran before the last change: what they are all put back to when a
    /// machine refuses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_change: Option<Running>,
}

/// A fleet's topology and software, as its parts run them.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Running {
    pub topology: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    #[serde(flatten)]
    pub software: Software,
}

/// One machine's share, as its agent last said it.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    pub machine: String,
    pub address: String,
    pub nodes: u64,
    pub nodes_up: u64,
    pub phase: String,
    #[serde(default)]
    pub reclaimed: bool,
    #[serde(default)]
    pub message: String,
}

/// One machine's part of a fleet: its nodes and its tunnels. Made by the controller.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "nsfleet.dev",
    version = "v1alpha1",
    kind = "FleetPart",
    namespaced,
    status = "PartStatus",
    printcolumn = r#"{"name":"Fleet","type":"string","jsonPath":".spec.fleet"}"#,
    printcolumn = r#"{"name":"Machine","type":"string","jsonPath":".spec.machine"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Up","type":"integer","jsonPath":".status.nodesUp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct FleetPartSpec {
    pub fleet: String,
    /// The Kubernetes node (machine) whose agent runs it.
    pub machine: String,
    /// The machine's address, which the other machines' tunnels reach.
    pub address: String,
    /// The whole topology (every machine resolves the same), and its format.
    pub topology: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// The names of the nodes placed here.
    pub nodes: Vec<String>,
    /// The links between a node here and one elsewhere.
    #[serde(default)]
    pub tunnels: Vec<Tunnel>,
    /// Bytes of the machine's memory the placement gave this part (what later fleets'
    /// placements leave aside).
    #[serde(default)]
    pub weight: u64,
    /// As the Fleet's, with only the images this part's nodes name.
    #[serde(flatten)]
    pub software: Software,
    /// As the Fleet's.
    #[serde(flatten)]
    pub up: UpOptions,
    /// Bytes of its images' layers the machine's store lacked when the part was planned:
    /// what it must fetch.
    #[serde(default)]
    pub fetch_bytes: u64,
}

/// A cut link, as both ends' machines see it: `a` and `b` are `node:iface`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Tunnel {
    pub a: String,
    pub b: String,
    pub a_address: String,
    pub b_address: String,
    pub vni: u32,
    pub port: u16,
    pub mtu: u32,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PartStatus {
    /// Fetching (its machine's store lacks layers of its images), Deploying, Running,
    /// Failed, Reclaimed.
    pub phase: String,
    /// While Fetching: the diff_ids of the layers the machine's store lacks, which the
    /// user's `up --kube` sends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_layers: Vec<String>,
    /// The part's generation (its spec) that runs on the machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// A generation the machine could not change its part to: the change was undone
    /// there, and `message` says why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_generation: Option<i64>,
    #[serde(default)]
    pub nodes_up: u64,
    #[serde(default)]
    pub reclaimed: bool,
    #[serde(default)]
    pub message: String,
}

//! What more than one command takes: the argument groups they flatten in, the value
//! parsers that check values while clap parses, so that a bad one is a usage error (exit 2),
//! and what turns flags into the library's settings.

use clap::Args;
use nsfleet_clab as clab;
use nsfleet_client as cmd;
use std::path::PathBuf;
use std::time::Duration;

/// Which containerlab lab: by its file, its name, or all of them.
#[derive(Args)]
pub struct LabArgs {
    /// The topology file (or a folder with one); without it, the only *.clab.yml in the
    /// current folder (for inspect: or else every lab).
    #[arg(short = 't', long = "topo")]
    topo: Option<PathBuf>,
    /// The lab by name instead.
    #[arg(long, conflicts_with = "topo")]
    name: Option<String>,
    /// Every deployed containerlab lab.
    #[arg(short = 'a', long, conflicts_with_all = ["topo", "name"])]
    all: bool,
}

impl From<LabArgs> for clab::lab::Lab {
    fn from(a: LabArgs) -> Self {
        clab::lab::Lab {
            topo: a.topo,
            name: a.name,
            all: a.all,
        }
    }
}

/// The running fleet a command acts on, named first (`nsfleet link NAME ...`): with the
/// run directory, the client's [`cmd::FleetRef`], made here once for every such command.
#[derive(Args)]
pub struct FleetName {
    /// The fleet.
    name: String,
}

impl FleetName {
    /// The fleet under `run_dir`, as the client's commands take it. Unpacked whole, as
    /// each command unpacks its own: a field added here and not passed on fails the build.
    pub fn under(self, run_dir: PathBuf) -> cmd::FleetRef {
        let FleetName { name } = self;
        cmd::FleetRef { name, run_dir }
    }
}

/// How `up` (and `deploy`) bring a fleet up.
#[derive(Args)]
pub struct LaunchArgs {
    #[command(flatten)]
    engine: EngineArgs,
    /// Print the result as one JSON object; errors go to stderr as JSON too, one
    /// {"error": {"message", "file", "line", "column"}} object per error, its place in
    /// the topology file as fields (file null when the error is about no file; line and
    /// column null when it is about no place in it).
    #[arg(long)]
    pub json: bool,
    /// Validate the file and check it against this machine, then stop: nothing is
    /// created.
    #[arg(long)]
    pub dry_run: bool,
    /// The fleet goes down when process PID ends, however it ends (SIGKILL included),
    /// as when its `down` is asked: a program that makes a fleet for itself (a Mininet
    /// script through nsfleet's Python package, which passes its own pid) leaves nothing
    /// running behind it. With --kube, a watcher of nsfleet's beside PID takes the fleet
    /// down when PID ends and renews the Fleet's lease meanwhile; if the watcher itself
    /// ends, the cluster's controller takes the fleet down 30 s later.
    #[arg(long, value_name = "PID", value_parser = within::<1, 4194304>)]
    owner: Option<u64>,
    #[command(flatten)]
    images: ImageArgs,
    /// Run every node as the host's root with every capability, as nsfleet did before
    /// it confined nodes. Without it, each node that runs software is root only inside a
    /// user namespace of its own: every capability over its own network, mounts and
    /// processes (interfaces, routes, nftables, tc, `net.*` sysctls, tmpfs, `ip netns`),
    /// and on the host an id of the fleet's range (from 1879048192 up), with none.
    #[arg(long)]
    pub privileged: bool,
    /// Return only once the fleet is ready, its progress on stderr: `started`, every
    /// node's commands have run (each exited with status 0, or runs on as a daemon in
    /// the foreground); `healthy`, started and each node's health check (containerlab's
    /// `healthcheck`, or TOML's) has passed; `converged`, started and every router (kind frr or
    /// bird, or `router = true`) has a route in its kernel to every other router's
    /// loopback addresses (those on its `lo`). A command that fails (a configuration its
    /// daemon refuses: the daemon's message and the file's line are said) takes the
    /// fleet down and nothing is left; a node whose health check fails its retries, or
    /// --wait-timeout, is said (the routers that lack routes, and which) and the fleet is
    /// left up to look into (`nsfleet down` takes it). Either exits 1. `nsfleet events`
    /// says when a wait ended; `nsfleet wait` waits for a fleet that is up already. With
    /// --json, no progress, and the fleet's object has `ready`: {"fleet", "condition",
    /// "since_up_s", "of"}, or null when the wait was not met (the fleet left up) or
    /// could not finish (nothing on stdout when a failed node took the fleet down).
    #[arg(long, value_name = "CONDITION", value_parser = cmd::ready::parse_condition)]
    wait: Option<nsfleet::ready::Condition>,
    /// With --wait: how many seconds to wait at most.
    #[arg(long, value_name = "SECONDS", value_parser = duration, default_value = "300", requires = "wait")]
    wait_timeout: Duration,
}

/// Where nodes that name an image get it, or whether they run the host's software.
#[derive(Args)]
pub struct ImageArgs {
    /// Nodes that name an image run the host's own files and programs instead (images
    /// are only recorded; a containerlab node of FRR's image runs the host's FRR), as
    /// nsfleet did before it ran images. Without it, an image the store lacks is an
    /// error at the line that names it, and nothing starts.
    #[arg(long)]
    host_software: bool,
    /// The image store's folder (see `nsfleet image --help`) [default: /var/lib/nsfleet/images
    /// as root; $XDG_DATA_HOME/nsfleet/images as a user]
    #[arg(long = "image-store", value_name = "DIR", env = "NSFLEET_IMAGES")]
    images: Option<PathBuf>,
}

impl ImageArgs {
    /// The store's folder: the one given, or its user's default.
    pub fn store(&self) -> PathBuf {
        (self.images.clone()).unwrap_or_else(cmd::image::default_store)
    }

    pub fn software(&self) -> nsfleet::topology::Software {
        match self.host_software {
            true => nsfleet::topology::Software::Host,
            false => nsfleet::topology::Software::Images,
        }
    }
}

impl LaunchArgs {
    /// `up`'s arguments: these, with the file and name that `up` (not `deploy`) takes.
    pub fn up(
        self,
        file: Option<PathBuf>,
        format: Option<nsfleet::topology::Format>,
        name: Option<String>,
        run_dir: PathBuf,
    ) -> cmd::up::UpArgs {
        cmd::up::UpArgs {
            file,
            format,
            name,
            workers: self.engine.workers,
            max_unreclaimed: self.engine.max_unreclaimed,
            run_dir,
            json: self.json,
            dry_run: self.dry_run,
            software: self.images.software(),
            images: self.images.store(),
            netns_names: false,
            vars: Vec::new(),
            owner: self.owner.map(|p| p as i32),
            privileged: self.privileged,
            wait: self.wait.map(|until| cmd::ready::Wait {
                until,
                bound: self.wait_timeout,
            }),
        }
    }
}

/// The engine's knobs: its worker threads and its bound on unreclaimed namespaces.
#[derive(Args)]
struct EngineArgs {
    /// Worker threads creating nodes in parallel (default: one per CPU).
    #[arg(long, value_parser = within_usize::<1, 1024>, default_value_t = default_workers())]
    workers: usize,
    /// Most torn-down namespaces the kernel may still be reclaiming at once; bounds
    /// memory under create/destroy churn.
    #[arg(long, value_parser = within_usize::<1, 10_000_000>, default_value_t = cmd::up::DEFAULT_MAX_UNRECLAIMED)]
    max_unreclaimed: usize,
}

pub use cmd::up::default_workers;

/// A whole number from LO to HI, as the parser checks it: out of range is a usage error,
/// never a value that fails (or divides by zero) later.
pub fn within<const LO: u64, const HI: u64>(s: &str) -> Result<u64, String> {
    let n: u64 = (s.trim().parse())
        .map_err(|_| format!("expected a whole number from {LO} to {HI}, not {s:?}"))?;
    if !(LO..=HI).contains(&n) {
        return Err(format!(
            "expected a whole number from {LO} to {HI}, not {n}"
        ));
    }
    Ok(n)
}

/// [`within`], for a count held as a `usize` (every bound here fits one).
pub fn within_usize<const LO: u64, const HI: u64>(s: &str) -> Result<usize, String> {
    within::<LO, HI>(s).map(|n| n as usize)
}

/// A duration in seconds, above zero and at most a day.
pub fn seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x > 0.0 && x <= 86_400.0 => Ok(x),
        _ => Err(format!(
            "expected seconds above 0 and at most 86400, not {s:?}"
        )),
    }
}

/// [`seconds`] as the duration the library takes: converted here, once, for every
/// command that takes one.
pub fn duration(s: &str) -> Result<Duration, String> {
    seconds(s).map(Duration::from_secs_f64)
}

/// The flags given, by name, as `impair` and `gen` hand them on: a flag not given is
/// left out, never sent empty.
pub fn given<const N: usize>(
    flags: [(&'static str, Option<String>); N],
) -> Vec<(&'static str, String)> {
    flags
        .into_iter()
        .filter_map(|(k, v)| Some((k, v?)))
        .collect()
}

/// A topology file's language, as `--format` names it: toml, or clab (containerlab).
pub fn parse_format(s: &str) -> Result<nsfleet::topology::Format, String> {
    match s {
        "toml" => Ok(nsfleet::topology::Format::Toml),
        "clab" | "containerlab" => Ok(nsfleet::topology::Format::Clab),
        _ => Err(format!("expected toml or clab, got {s:?}")),
    }
}

/// `--kube`: the fleet is on a Kubernetes cluster (see `nsfleet kube --help`), not here.
#[derive(Args, Clone, Debug, Default)]
pub struct KubeArgs {
    /// The fleet is spread over a Kubernetes cluster's machines: the cluster of
    /// $KUBECONFIG (or ~/.kube/config), where `nsfleet kube install` has put nsfleet.
    #[arg(long)]
    pub kube: bool,
    /// With --kube: the kubeconfig's context to use instead of its current one.
    #[arg(long, requires = "kube", value_name = "CONTEXT")]
    pub context: Option<String>,
    /// With --kube: the namespace of the Fleet resource.
    #[arg(
        long = "kube-namespace",
        requires = "kube",
        default_value = "default",
        value_name = "NS"
    )]
    pub namespace: String,
}

impl KubeArgs {
    /// Where the fleet lives: the cluster when --kube was given, else this machine.
    pub fn backend(&self) -> Box<dyn cmd::backend::Backend> {
        match self.kube {
            true => Box::new(nsfleet_kube_client::Cluster {
                context: self.context.clone(),
                namespace: self.namespace.clone(),
            }),
            false => Box::new(cmd::backend::Here),
        }
    }
}

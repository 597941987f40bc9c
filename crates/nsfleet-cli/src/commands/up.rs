//! `nsfleet up`: build a fleet from a topology file (or the default one) and leave
//! its supervisor running.

use super::args::{parse_format, KubeArgs, LaunchArgs};
use clap::Args;
use std::path::PathBuf;

/// Build a fleet from a topology file and leave its supervisor running
///
/// Build a fleet and leave its supervisor running; returns once every node is ready.
///
/// Validates the whole file first (errors name file:line:column, and nothing is
/// created), then creates the nodes in parallel, configures them, starts their
/// processes, and prints the time of each phase and the node rate.
///
/// A node that runs software gets a world of its own, as a container would: host name,
/// PID namespace, private /run, /proc, /sys, folders and files, and the fleet's
/// /etc/hosts. Node keys: kind ("linux", "frr", "bird"), config, daemons, commands,
/// hostname, dirs, dirs_from_host, binds, files, loopback, restart, router, sysctls,
/// routes, image, healthcheck.
///
/// image = "alpine:3.20": the node runs a container image, its root filesystem over
/// overlayfs with a writable layer of its own (in memory), its entrypoint and cmd, env,
/// working directory and user. An image nsfleet's store lacks is pulled first; one that
/// cannot be had is an error at its line. --host-software runs the host's programs
/// instead. See `nsfleet image --help`.
/// Templates {name} {i} {fleet} {addr.IF} {addr6.IF} are filled per node. Examples:
/// examples/frr-ospf-ring.toml, examples/bird-grid.toml; the README has every key.
///
/// containerlab files (*.clab.yml, *.clab.yaml, or --format clab) run as they are,
/// without a container engine: see `nsfleet deploy --help`.
///
/// Limits, checked before anything is created: a file of at most 16 MiB of UTF-8
/// text; at most 1,000,000 nodes (over a cluster's machines: see --kube); and what this
/// machine can hold, said with what it
/// would take: user.max_net_namespaces, the descriptors the supervisor needs (one per
/// node and process: RLIMIT_NOFILE, fs.nr_open; beyond them holder processes keep the
/// namespaces), a host link's name or subnet already in use on the host.
#[derive(Args)]
pub struct UpCommand {
    /// Topology file (TOML, see examples/; or containerlab's YAML); without it, the
    /// built-in default fleet. A regular file of UTF-8 text, at most 16 MiB (write
    /// larger fleets with [[generate]]); anything else is refused without reading on.
    file: Option<PathBuf>,
    /// The file's language when its name does not say: toml, or clab (containerlab).
    /// Files ending in .yml or .yaml are read as containerlab's.
    #[arg(long, value_parser = parse_format)]
    format: Option<nsfleet::topology::Format>,
    /// Use this fleet name instead of the file's [fleet] name.
    #[arg(long)]
    name: Option<String>,
    #[command(flatten)]
    launch: LaunchArgs,
    #[command(flatten)]
    kube: KubeArgs,
    /// With --kube: only these machines (the cluster's node names, comma-separated);
    /// by default every machine that runs nsfleet's agent.
    #[arg(long, requires = "kube", value_delimiter = ',', value_name = "M1,M2")]
    machines: Vec<String>,
    /// With --kube: an image the user's store lacks is pulled by each machine from its
    /// registry, not pulled here and sent (images the store holds are still sent). The
    /// credentials Docker's config file has for those registries (as `image pull` reads
    /// them) go to the cluster as a Secret the Fleet owns, which the agents read into
    /// memory for the pull and never write to a machine's disk. A machine that cannot
    /// pull one (refused, unreachable) fails the fleet, which is taken down everywhere.
    #[arg(long, requires = "kube")]
    pull_on_machines: bool,
    /// With --pull-on-machines: a registry the machines reach over plain HTTP
    /// (HOST or HOST:PORT; repeat for more).
    #[arg(
        long = "insecure-registry",
        requires = "pull_on_machines",
        value_name = "HOST[:PORT]"
    )]
    insecure_registries: Vec<String>,
}

impl UpCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        let UpCommand {
            file,
            format,
            name,
            launch,
            kube,
            machines,
            pull_on_machines,
            insecure_registries,
        } = self;
        let spread = nsfleet_client::backend::Spread {
            machines,
            machines_pull: pull_on_machines,
            insecure_registries,
        };
        kube.backend()
            .up(launch.up(file, format, name, run_dir), spread)
    }
}

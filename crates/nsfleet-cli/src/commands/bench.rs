//! `nsfleet bench`: the benchmark scenarios, one subcommand each, their arguments and
//! the runs across kernels (`--kernels`), all handed to `nsfleet_bench`.

use super::args::{default_workers, seconds, within, within_usize};
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// Benchmarks: nsfleet and its peers measured in the same run
///
/// Benchmarks: the seeds' experiments, nsfleet and its peers measured in the same run,
/// as result files (JSON) with medians, ratios and charts.
#[derive(Subcommand)]
pub enum Bench {
    /// Seed 000: bare nodes, nsfleet against raw unshare and ip netns loops
    ///
    /// Seed 000: bare nodes (loopback up). nsfleet with 1 to --workers workers vs a raw
    /// in-process unshare(CLONE_NEWNET) loop, seed 000's `unshare -n bash -c exit` loop and
    /// an `ip netns add` loop: rates, per-operation latency, teardown to full reclamation.
    Create {
        /// Nodes to create (the raw loops create as many).
        #[arg(long, value_parser = within::<1, 10_000_000>, default_value_t = d().create_count)]
        count: u64,
        /// Operations of the process-per-namespace loops (`unshare -n`, `ip netns add`).
        #[arg(long, value_parser = within::<0, 10_000_000>, default_value_t = d().shell_count)]
        shell_count: u64,
        #[command(flatten)]
        common: BenchRuns,
    },
    /// Seed 001: teardown by nsfleet's batched reaper against one at a time
    ///
    /// Seed 001: N namespaces torn down by nsfleet's batched reaper vs one at a time, each
    /// waited for until the kernel has reclaimed it; memory given back over time.
    Teardown {
        /// Namespaces (loopback up) each contender tears down.
        #[arg(long, value_parser = within::<1, 10_000_000>, default_value_t = d().teardown_count)]
        count: u64,
        #[command(flatten)]
        common: BenchRuns,
    },
    /// Seed 002: create/destroy cycles with and without the reaper's bound
    ///
    /// Seed 002: M create/destroy cycles with and without the reaper's bound on namespaces
    /// awaiting reclamation, and the raw loop (each batch made on one thread and dropped at
    /// once); MemAvailable and Slab through the run, peak drop, throughput.
    Churn {
        /// Namespaces created and destroyed, in each of the three runs.
        #[arg(long, value_parser = within::<1, 1_000_000_000>, default_value_t = d().churn_cycles)]
        cycles: u64,
        /// Namespaces per create call.
        #[arg(long, value_parser = within::<1, 1_000_000>, default_value_t = d().churn_batch)]
        batch: u64,
        /// The bound for the bounded run (`nsfleet up --max-unreclaimed`).
        #[arg(long, value_parser = within_usize::<1, 10_000_000>, default_value_t = d().churn_bound)]
        bound: usize,
        #[command(flatten)]
        common: BenchRuns,
    },
    /// Seed 003: fake routers, nsfleet against raw loops, ip and Mininet
    ///
    /// Seed 003's fake routers (lo up, eth0 on a shared switch, an address, forwarding):
    /// nsfleet vs a raw in-process loop doing the same kernel work at each count; nsfleet
    /// with `ports = "macvlan"` (a macvlan per router instead of a veth pair and a bridge
    /// port) vs the same raw loop, and a raw loop of macvlans; vs seed 003's
    /// one-`ip`-per-step script, and Mininet's LinearTopo vs nsfleet's `linear` (with a raw
    /// loop building the same topology: what the kernel work alone allows).
    ///
    /// The curve (--steps): is nsfleet's rate flat as routers accumulate? The kernel's own
    /// rate falls too, and moves from run to run, so it is judged against the kernel's
    /// bend, measured alike. A warm-up round first (the smallest step, at most 1,000
    /// routers of each contender, not recorded) takes the first run's costs: module
    /// loads, fresh slab pages, a cold page cache. Then each of --runs rounds measures
    /// every step in order, nsfleet and the raw loops alternated within each step (the
    /// order flips round by round), so drift lands on both alike; every figure is a median
    /// [min-max] over the rounds. Flatness is the rate at a step over the rate at the
    /// smallest, round by round, for nsfleet and its raw loop side by side, on veth ports
    /// and on macvlan ports; nsfleet's flatness over the raw loop's is 1.0 when nsfleet
    /// bends exactly as the kernel does on this machine, below when it bends more
    /// (`nsfleet_flatness_vs_raw_at_N`, `nsfleet_macvlan_flatness_vs_raw_macvlan_at_N`;
    /// judge them against a baseline with `bench compare --beyond-range`).
    Routers {
        /// Routers to build (nsfleet and the raw loop).
        #[arg(long, value_parser = within::<1, 10_000_000>, default_value_t = d().routers_count)]
        count: u64,
        /// Measure at several counts instead, e.g. 1000,3000,10000 (the rate-vs-count
        /// curve of both, and its flatness against the smallest count).
        #[arg(long, value_parser = within::<1, 10_000_000>, value_delimiter = ',')]
        steps: Vec<u64>,
        /// Routers the ip script builds (about 20 per second; 0 skips it). nsfleet builds
        /// as many in the same run for the ratio.
        #[arg(long, value_parser = within::<0, 10_000_000>, default_value_t = d().script_count)]
        script_count: u64,
        /// k of Mininet's LinearTopo(k) (0 skips it; skipped if Mininet is not installed).
        /// nsfleet's `linear` of k and the raw loop are built in the same run.
        #[arg(long, value_parser = within::<0, 10_000_000>, default_value_t = d().mininet_count)]
        mininet_count: u64,
        #[command(flatten)]
        common: BenchRuns,
    },
    /// BIRD OSPF routers in a grid, from `up` to full convergence
    ///
    /// Routers that run real software: N BIRD OSPF routers in a grid from one template,
    /// from `up` to full convergence (every router has a route to every loopback), memory
    /// per router (kernel, BIRD, nsfleet's init) and `down` to reclamation. Needs bird2.
    /// Each router's phases are recorded as they happen and printed: BIRD started, its
    /// first and last route to another router's loopback; then the protocol's floor.
    /// Each run also brings the same routers up `--privileged`: what confinement costs
    /// (target: up and down within 1.1x, memory within 1.05x).
    Daemons {
        /// Routers (a grid as close to square as the count allows).
        #[arg(long, value_parser = within::<1, 10_000_000>, default_value_t = d().daemons_count)]
        count: u64,
        /// Give up if OSPF has not converged after this many seconds.
        #[arg(long, value_parser = within::<1, 86_400>, default_value_t = d().daemons_timeout.as_secs())]
        timeout: u64,
        #[command(flatten)]
        common: BenchRuns,
    },
    /// A containerlab lab of FRR routers in a grid, up to OSPF convergence
    ///
    /// A containerlab lab of N FRR routers in a grid, as its users write one (a .clab.yml
    /// and a startup configuration per router): `up` of the file to full OSPF
    /// convergence, memory per router (kernel, FRR's daemons, nsfleet's init), and down to
    /// reclamation. Needs frr. Each router's phases are recorded as they happen and
    /// printed: its daemons and `vtysh -b` started and returned (the kernel's process
    /// events), adjacencies Full and SPF runs (ospfd's own counters), its first and last
    /// route to another router's loopback (a route socket in its namespace); CPU per
    /// router; then the protocol's floor (phases not with --peer). Each run also brings
    /// the same lab up `--privileged`: what confinement costs (target: up and down within
    /// 1.1x, memory within 1.05x).
    ///
    /// With --peer containerlab (where Docker and containerlab run: see
    /// ../shared/notes/containerlab-peer.md), the same files with both tools in the same
    /// run: first what each node sees (interfaces, MTUs, MACs' form, addresses, routes,
    /// hostname, /etc/hosts, DNS, environment, exec lines' effects, forwarding,
    /// reachability, inspect's JSON), every difference listed with the README's reason
    /// or as undocumented; then deploy and destroy of lines of --lines linux nodes, and
    /// FRR grids of --grids routers from deploy to converged, runs alternated, medians,
    /// ranges and ratios.
    Clab {
        /// Routers (a grid as close to square as the count allows).
        #[arg(long, value_parser = within::<1, 10_000_000>, default_value_t = d().clab_count)]
        count: u64,
        /// Give up if OSPF has not converged after this many seconds.
        #[arg(long, value_parser = within::<1, 86_400>, default_value_t = d().daemons_timeout.as_secs())]
        timeout: u64,
        /// Measure against this peer, on the same files: containerlab.
        #[arg(long, value_parser = ["containerlab"])]
        peer: Option<String>,
        /// containerlab's executable (with --peer).
        #[arg(long, default_value = "containerlab", requires = "peer")]
        containerlab: PathBuf,
        /// Docker's client (with --peer).
        #[arg(long, default_value = "docker", requires = "peer")]
        docker: PathBuf,
        /// With --peer: lines of this many linux nodes, comma-separated.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "20,100,200",
            requires = "peer"
        )]
        lines: Vec<u64>,
        /// With --peer: FRR grids of about this many routers, comma-separated.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "25,100",
            requires = "peer"
        )]
        grids: Vec<u64>,
        #[command(flatten)]
        common: BenchRuns,
    },
    /// A live fleet's cables pulled, timed to the carrier's loss
    ///
    /// A live fleet's cables: N hosts on a switch, each host's eth0 pulled (`nsfleet link
    /// ... down`) one after the other, timed to the event that the switch port lost its
    /// carrier (`nsfleet events`, from the kernel's notification): median and p99.
    Cable {
        /// Links pulled.
        #[arg(long, value_parser = within::<1, 10_000_000>, default_value_t = d().cable_count)]
        count: u64,
        #[command(flatten)]
        common: BenchRuns,
    },
    /// The lab server: keystroke to echo, a big page's first render, memory
    ///
    /// The lab server (`nsfleet serve`) as a person at the workbench feels it: T
    /// terminals open in a fleet of N nodes over its WebSockets, one key at a time into
    /// each, timed to its echo (median, p99), against the same shells on this process's
    /// own pseudo-terminals (`nsfleet exec` without the server), and against the same
    /// terminals over HTTPS (a server given a certificate made here); the workbench's first
    /// render of a fleet of R nodes in headless Chromium (from navigation to the graph
    /// drawn) against `nsfleet graph --serve`'s page of the same fleet; the server's
    /// memory. Needs Debian's chromium and openssl.
    Serve {
        /// Nodes of the fleet the terminals are open in.
        #[arg(long, value_parser = within::<1, 1_000_000>, default_value_t = 1000)]
        nodes: u64,
        /// Terminals open at once.
        #[arg(long, value_parser = within::<1, 1000>, default_value_t = 20)]
        terminals: u64,
        /// Keys typed into each terminal.
        #[arg(long, value_parser = within::<1, 100_000>, default_value_t = 50)]
        keys: u64,
        /// Nodes of the fleet whose page is rendered.
        #[arg(long, value_parser = within::<1, 1_000_000>, default_value_t = 10_000)]
        render_nodes: u64,
        #[command(flatten)]
        common: BenchRuns,
    },
    /// Nodes that run one container image, against the host's software
    ///
    /// Nodes that run one container image (built here from the host's static busybox and
    /// 16 MiB of incompressible data, loaded into a store of the bench's own), up and
    /// reclaimed, against the same nodes running the host's software and against the
    /// same image nodes `--privileged` (unconfined), alternated in the same run: up and
    /// down times and their ratios (targets: image nodes within 1.5x of the host's
    /// software; confined within 1.1x, and memory within 1.05x, of `--privileged`),
    /// memory per node, the image's layers on disk (once, whatever the count) and each
    /// node's writable layer.
    Images {
        /// Node counts, measured in turn, e.g. 100,1000.
        #[arg(long, value_delimiter = ',', value_parser = within::<1, 1_000_000>, default_values_t = d().image_counts)]
        count: Vec<u64>,
        #[command(flatten)]
        common: BenchRuns,
    },
    /// A user's fleets against root's
    ///
    /// The same fleets brought up and reclaimed by root and by an ordinary user (a fleet
    /// in a user namespace of the user's own: docs/rootless.md), alternated in the same
    /// run: N bare nodes, and N fake routers on a switch. Up is `nsfleet up`'s wall
    /// time, reclaimed `nsfleet down`'s; the ratios are the user's over root's (the
    /// target: within 1.25x). Runs as root, which starts the user's commands as --user.
    User {
        /// Node counts, measured in turn, e.g. 1000,10000.
        #[arg(long, value_delimiter = ',', value_parser = within::<1, 1_000_000>, default_values_t = d().user_counts)]
        count: Vec<u64>,
        /// The user whose fleets are measured (an ordinary one of /etc/passwd).
        #[arg(long, default_value = "nobody")]
        user: String,
        #[command(flatten)]
        common: BenchRuns,
    },
    /// One `nsfleet stats` refresh, against a process per node
    ///
    /// One `nsfleet stats` refresh of a star of N hosts: the CPU time of the supervisor and
    /// the client per refresh (the target: under 1 s at 10,000 nodes), against reading the
    /// same counters with a process per node (`nsfleet exec NODE -- ip -s -j link`) over K
    /// of the nodes, per node, in the same run.
    Stats {
        /// Hosts on the switch.
        #[arg(long, value_parser = within::<1, 200_000>, default_value_t = d().stats_count)]
        count: u64,
        /// Nodes read by a process each, for the comparison.
        #[arg(long, value_parser = within::<1, 200_000>, default_value_t = d().stats_peer_count)]
        peer_count: u64,
        #[command(flatten)]
        common: BenchRuns,
    },
    /// `nsfleet apply` adding routers to a running fleet, against `up`
    ///
    /// `nsfleet apply` adding K routers to a running line of N, and removing them again,
    /// against `up` of K routers in a fleet of their own, in the same run: routers per
    /// second of each, and apply's rate over up's (1.0: apply adds at up's pace).
    Apply {
        /// Sizes N of the running fleet.
        #[arg(long, value_parser = within::<1, 10_000_000>, value_delimiter = ',', default_values_t = d().apply_sizes)]
        sizes: Vec<u64>,
        /// Routers K added to it.
        #[arg(long, value_parser = within::<1, 10_000_000>, value_delimiter = ',', default_values_t = d().apply_adds)]
        adds: Vec<u64>,
        #[command(flatten)]
        common: BenchRuns,
    },
    /// Seed 003: moving a thread between namespaces, setns against nsenter
    ///
    /// Seed 003: the cost of moving a thread between namespaces, per setns call, with N
    /// namespaces alive, vs a process per move (nsenter, as `ip netns exec` does).
    Setns {
        /// setns calls per repetition.
        #[arg(long, value_parser = within::<1, 1_000_000_000_000>, default_value_t = d().setns_calls)]
        calls: u64,
        /// Namespaces alive, visited in turn.
        #[arg(long, value_parser = within::<1, 10_000_000>, default_value_t = d().setns_alive)]
        alive: u64,
        /// Moves made by a process each.
        #[arg(long, value_parser = within::<0, 10_000_000>, default_value_t = d().process_calls)]
        process_calls: u64,
        #[command(flatten)]
        common: BenchRuns,
    },
    /// Seed 004: `nsfleet gen` against trafgen over a veth pair
    ///
    /// Seed 004: `nsfleet gen` against netsniff-ng's trafgen, 64-byte UDP over a veth pair
    /// between two fleet nodes: one core each, two threads against one, and the device
    /// list read lock-free against under a mutex per packet (the ablation).
    Traffic {
        /// Seconds each contender sends for.
        #[arg(long, value_parser = seconds, default_value_t = d().traffic_seconds)]
        seconds: f64,
        /// Packets through the generator loop alone, per ablation run.
        #[arg(long, value_parser = within::<1, 1_000_000_000_000>, default_value_t = d().loop_packets)]
        loop_packets: u64,
        #[command(flatten)]
        common: BenchRuns,
    },
    /// Mininet's tree1024: nsfleet's Mininet API, Mininet itself and `up`
    ///
    /// Mininet's tree1024 network (TreeNet(depth=2, fanout=32): 1,024 hosts) from start
    /// to pingAll-ready and stop, in the same run: nsfleet's Mininet API (Python), Mininet
    /// itself (no controller; needs mininet, and bridge-utils or Open vSwitch), and
    /// nsfleet's `up` of the same topology. Needs nsfleet's Python package (pip install .):
    /// run it with the nsfleet of that virtual environment.
    Mininet {
        /// The tree's depth.
        #[arg(long, value_parser = within::<1, 8>, default_value_t = 2)]
        depth: u64,
        /// Children of each switch.
        #[arg(long, value_parser = within::<1, 1024>, default_value_t = 32)]
        fanout: u64,
        /// The switches: "bridge" (Linux bridges), "ovs" (Open vSwitch in standalone
        /// mode, Mininet's OVSBridge, on the userspace datapath on both sides; Mininet's
        /// runs on an ovsdb-server and ovs-vswitchd of the bench's own, in a mount
        /// namespace where Open vSwitch's folders are empty, never the host's), or
        /// "ovs-controller" (Open vSwitch in secure mode under Open vSwitch's test
        /// controller, Mininet's OVSController, on both sides: ready is when the
        /// controller's flows carry the first ping; it takes 16 switches, so Mininet's
        /// own cannot connect a tree of more).
        #[arg(long, value_parser = ["bridge", "ovs", "ovs-controller"], default_value = "bridge")]
        switch: String,
        #[command(flatten)]
        common: BenchRuns,
    },
    /// Every scenario at its default size, each result in a file
    ///
    /// Every scenario at its default size (or --quick), each result in DIR/SCENARIO.json
    /// (--dir, default bench-results).
    All {
        #[command(flatten)]
        common: BenchRuns,
    },
    /// Compare two result files of one scenario, for `git bisect run`
    ///
    /// Compares two result files of one scenario, metric by metric (medians). Exit 0: no
    /// regression beyond the threshold; 1: a regression; 125: the candidate could not be
    /// measured; 128: the baseline is unusable, or the runs differ in scenario or size.
    /// Made for `git bisect run`.
    Compare {
        /// The result file of the known-good run (`nsfleet bench SCENARIO -o FILE`).
        baseline: PathBuf,
        /// The result file of the run under test, of the same scenario and sizes.
        candidate: PathBuf,
        /// Largest change in the wrong direction that is not a regression: "10%" or "0.1".
        #[arg(long, default_value = "10%", value_parser = nsfleet_values::fraction)]
        threshold: f64,
        /// Judge only this figure (repeatable); the others are shown, not judged. For a
        /// bisection after one regression.
        #[arg(long, value_name = "NAME")]
        metric: Vec<String>,
        /// Judge against the baseline's range instead of its median: a figure regresses
        /// only when the candidate's median is past the baseline's worst run by more than
        /// the threshold (a baseline of several runs, whose own noise is then no verdict).
        #[arg(long)]
        beyond_range: bool,
        #[arg(long)]
        json: bool,
    },
}

fn d() -> nsfleet_bench::Defaults {
    nsfleet_bench::Defaults::default()
}

/// What every benchmark takes.
#[derive(Args)]
pub struct BenchRuns {
    /// Repetitions; medians and ranges are reported.
    #[arg(long, value_parser = within_usize::<1, 1000>, default_value_t = 3)]
    runs: usize,
    /// Worker threads of nsfleet's fleets (default: one per CPU).
    #[arg(long, value_parser = within_usize::<1, 1024>, default_value_t = default_workers())]
    workers: usize,
    /// Print the result file (JSON) on stdout instead of the summary.
    #[arg(long)]
    json: bool,
    /// Also write the result file here (for `nsfleet report` and `nsfleet bench compare`).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// A smoke run: small sizes, one repetition, well under a minute.
    #[arg(long)]
    quick: bool,
    /// Run the scenario on each of these kernels, one after the other: `host` (the
    /// running kernel, here), `debian:VERSION` (6.1, 6.12, 6.12-rt...: fetched, booted
    /// under QEMU, the same nsfleet run inside), or a bzImage's path. Results go to
    /// DIR/SCENARIO-KERNEL.json, side by side in DIR/report.html. A guest under TCG
    /// emulation is far slower than the host: compare its ratios with the host's.
    ///
    ///   nsfleet bench routers --steps 500,1000,2000 --kernels host,debian:6.1,debian:6.12 --dir results
    #[arg(long, value_delimiter = ',', value_parser = kernel_spec, value_name = "KERNELS", verbatim_doc_comment)]
    kernels: Vec<nsfleet_vm::Spec>,
    /// Where the result files go with --kernels (required there) and for `bench all`
    /// (default bench-results).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Memory of each guest with --kernels, in MiB.
    #[arg(long, default_value_t = 4096, value_parser = within::<256, 65536>)]
    vm_mem: u64,
}

fn kernel_spec(s: &str) -> Result<nsfleet_vm::Spec, String> {
    s.parse().map_err(|e: anyhow::Error| e.to_string())
}

impl BenchRuns {
    fn common(self) -> nsfleet_bench::Common {
        nsfleet_bench::Common {
            runs: self.runs,
            workers: self.workers,
            json: self.json,
            output: self.output,
            quick: self.quick,
        }
    }
}

impl Bench {
    pub fn run(self) -> anyhow::Result<()> {
        use nsfleet_bench::*;
        if let Some((scenario, runs)) = self.runs() {
            if !runs.kernels.is_empty() {
                return across_kernels(scenario, runs);
            }
            if runs.dir.is_some() && scenario != "all" {
                anyhow::bail!(
                    "--dir goes with --kernels (or bench all); one result file is -o FILE"
                );
            }
        }
        match self {
            Bench::Create {
                count,
                shell_count,
                common,
            } => create(CreateArgs {
                count,
                shell_count,
                common: common.common(),
            }),
            Bench::Teardown { count, common } => teardown(TeardownArgs {
                count,
                common: common.common(),
            }),
            Bench::Churn {
                cycles,
                batch,
                bound,
                common,
            } => churn(ChurnArgs {
                cycles,
                batch,
                bound,
                common: common.common(),
            }),
            Bench::Routers {
                count,
                steps,
                script_count,
                mininet_count,
                common,
            } => routers(RoutersArgs {
                steps: if steps.is_empty() { vec![count] } else { steps },
                script_count,
                mininet_count,
                common: common.common(),
            }),
            Bench::Daemons {
                count,
                timeout,
                common,
            } => daemons(DaemonsArgs {
                suite: Suite::Bird,
                count,
                timeout: std::time::Duration::from_secs(timeout),
                common: common.common(),
            }),
            Bench::Apply {
                sizes,
                adds,
                common,
            } => apply(ApplyArgs {
                sizes,
                adds,
                common: common.common(),
            }),
            Bench::Images { count, common } => images(ImagesArgs {
                counts: count,
                common: common.common(),
            }),
            Bench::User {
                count,
                user,
                common,
            } => nsfleet_bench::user(nsfleet_bench::UserArgs {
                counts: count,
                user,
                common: common.common(),
            }),
            Bench::Serve {
                nodes,
                terminals,
                keys,
                render_nodes,
                common,
            } => nsfleet_bench::serve(nsfleet_bench::ServeArgs {
                nodes,
                terminals,
                keys,
                render_nodes,
                common: common.common(),
            }),
            Bench::Cable { count, common } => cable(CableArgs {
                count,
                common: common.common(),
            }),
            Bench::Stats {
                count,
                peer_count,
                common,
            } => nsfleet_bench::stats(nsfleet_bench::StatsArgs {
                count,
                peer_count,
                common: common.common(),
            }),
            Bench::Clab {
                peer: Some(_),
                containerlab,
                docker,
                lines,
                grids,
                timeout,
                common,
                ..
            } => nsfleet_bench::clab_peer(nsfleet_bench::ClabPeerArgs {
                containerlab,
                docker,
                lines,
                grids,
                timeout: std::time::Duration::from_secs(timeout),
                common: common.common(),
            }),
            Bench::Clab {
                count,
                timeout,
                common,
                ..
            } => daemons(DaemonsArgs {
                suite: Suite::FrrClab,
                count,
                timeout: std::time::Duration::from_secs(timeout),
                common: common.common(),
            }),
            Bench::Setns {
                calls,
                alive,
                process_calls,
                common,
            } => setns(SetnsArgs {
                calls,
                alive,
                process_calls,
                common: common.common(),
            }),
            Bench::Traffic {
                seconds,
                loop_packets,
                common,
            } => traffic(TrafficArgs {
                seconds,
                loop_packets,
                common: common.common(),
            }),
            Bench::Mininet {
                depth,
                fanout,
                switch,
                common,
            } => mininet(MininetArgs {
                depth,
                fanout,
                switch,
                common: common.common(),
            }),
            Bench::All { common } => {
                let dir = common.dir.clone().unwrap_or_else(|| "bench-results".into());
                all(&common.common(), &dir)
            }
            Bench::Compare {
                baseline,
                candidate,
                threshold,
                metric,
                beyond_range,
                json,
            } => {
                use nsfleet_bench::Against::{Median, Range};
                let against = if beyond_range { Range } else { Median };
                let judged = (threshold, against);
                std::process::exit(compare(&baseline, &candidate, judged, &metric, json))
            }
        }
    }

    /// The scenario's name and what every scenario takes (`compare` runs none).
    fn runs(&self) -> Option<(&'static str, &BenchRuns)> {
        Some(match self {
            Bench::Create { common, .. } => ("create", common),
            Bench::Teardown { common, .. } => ("teardown", common),
            Bench::Churn { common, .. } => ("churn", common),
            Bench::Routers { common, .. } => ("routers", common),
            Bench::Daemons { common, .. } => ("daemons", common),
            Bench::Clab { common, .. } => ("clab", common),
            Bench::Cable { common, .. } => ("cable", common),
            Bench::Serve { common, .. } => ("serve", common),
            Bench::Images { common, .. } => ("images", common),
            Bench::User { common, .. } => ("user", common),
            Bench::Stats { common, .. } => ("stats", common),
            Bench::Apply { common, .. } => ("apply", common),
            Bench::Setns { common, .. } => ("setns", common),
            Bench::Traffic { common, .. } => ("traffic", common),
            Bench::Mininet { common, .. } => ("mininet", common),
            Bench::All { common } => ("all", common),
            Bench::Compare { .. } => return None,
        })
    }
}

/// `bench SCENARIO --kernels ...`: the same command, without the options of the run
/// across kernels, on each kernel.
fn across_kernels(scenario: &str, runs: &BenchRuns) -> anyhow::Result<()> {
    let Some(dir) = runs.dir.clone() else {
        anyhow::bail!("--kernels needs --dir DIR: where each kernel's result file goes");
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    nsfleet_bench::kernels::across(&nsfleet_bench::kernels::Across {
        kernels: runs.kernels.clone(),
        dir,
        scenario: scenario.to_string(),
        args: nsfleet_bench::kernels::without_own_options(&argv),
        vm_mem_mib: runs.vm_mem as u32,
        vm_timeout: std::time::Duration::from_secs(24 * 3600),
        accel: nsfleet_vm::Accel::chosen(None)?,
    })
}

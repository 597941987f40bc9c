//! The `nsfleet` command. It only parses arguments and calls the `nsfleet` library; every
//! behaviour lives there.

use clap::{Args, Parser, Subcommand};
use nsfleet_client as cmd;
use std::path::PathBuf;

const ABOUT: &str = "Fleets of Linux network namespaces at kernel speed.

A fleet is a set of nodes (network namespaces) described by a TOML topology file, owned by
one supervisor process: nothing of the fleet outlives it. Run as root.";

const AFTER: &str = "Examples:
  nsfleet up                         # the built-in default fleet (100 fake routers)
  nsfleet up examples/hosts.toml     # a fleet from a topology file
  nsfleet deploy -t lab.clab.yml     # a containerlab topology, without Docker
  nsfleet status                     # every fleet; `--json` for machines
  nsfleet exec default h1 -- ip addr # a command inside node h1
  nsfleet down default               # tear down, wait for the kernel to reclaim
  nsfleet bench create --count 2000  # nsfleet against raw unshare and a shell loop";

#[derive(Parser)]
#[command(name = "nsfleet", version, about = ABOUT, after_help = AFTER)]
struct Cli {
    /// Folder for fleets' control sockets, records and logs.
    #[arg(long, global = true, env = "NSFLEET_RUN_DIR", default_value = nsfleet::rundir::DEFAULT_RUN_DIR)]
    run_dir: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build a fleet and leave its supervisor running; returns once every node is ready.
    ///
    /// Validates the whole file first (errors name file:line:column, and nothing is
    /// created), then creates the nodes in parallel, configures them, starts their
    /// processes, and prints the time of each phase and the node rate.
    ///
    /// A node that runs software gets a world of its own, as a container would: host name,
    /// PID namespace, private /run, /proc, /sys, folders and files, and the fleet's
    /// /etc/hosts. Node keys: kind ("linux", "frr", "bird"), config, daemons, commands,
    /// hostname, dirs, dirs_from_host, files, loopback, restart, router, sysctls, routes.
    /// Templates {name} {i} {fleet} {addr.IF} {addr6.IF} are filled per node. Examples:
    /// examples/frr-ospf-ring.toml, examples/bird-grid.toml; the README has every key.
    ///
    /// containerlab files (*.clab.yml, *.clab.yaml, or --format clab) run as they are,
    /// without a container engine: see `nsfleet deploy --help`.
    ///
    /// Limits, checked before anything is created: a file of at most 16 MiB of UTF-8
    /// text; at most 200,000 nodes; and what this machine can hold, said with what it
    /// would take: user.max_net_namespaces, the descriptors the supervisor needs (one per
    /// node and process: RLIMIT_NOFILE, fs.nr_open; beyond them holder processes keep the
    /// namespaces), a host link's name or subnet already in use on the host.
    Up {
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
    },
    /// Run a containerlab topology file as it is: no Docker, no images (containerlab's verb
    /// for `up`).
    ///
    /// The lab is a fleet named after the file's `name`. Kinds: linux (its cmd, then its
    /// exec lines), frr (the host's FRR with the startup-config), linux with FRR's image
    /// (the host's FRR with the frr.conf and daemons it binds), bridge (a switch in a
    /// namespace of its own, not a bridge on the host), host. Vendor kinds (srl, ceos,
    /// crpd, vr-*, ...) are refused. Every node gets eth0 on the management network
    /// (172.20.20.0/24 and 3fff:172:20:20::/64 by default, addresses from .2 in file
    /// order), which the host reaches through a host link holding the gateway; nodes'
    /// names (and clab-LAB-NODE) are in the fleet's /etc/hosts, never the host's. Images
    /// are recorded and shown, not pulled; binds are mounted in the node's world only.
    /// Keys nsfleet does not apply are warned about with file:line; keys that would
    /// change the lab (user, pid-mode, network-mode host) are refused. Example:
    /// examples/clab/frr01/frr01.clab.yml (containerlab's own lab-examples/frr01).
    Deploy {
        /// The topology file (or a folder with one); without it, the only *.clab.yml in
        /// the current folder. At most 16 MiB of UTF-8 text, as for `up`.
        #[arg(short = 't', long = "topo")]
        topo: Option<PathBuf>,
        /// Destroy the lab first if it is deployed.
        #[arg(short = 'c', long)]
        reconfigure: bool,
        #[command(flatten)]
        launch: LaunchArgs,
    },
    /// Take a containerlab lab down (containerlab's verb for `down`): returns once the
    /// kernel has reclaimed every namespace. Nothing is left on the host.
    Destroy {
        #[command(flatten)]
        lab: LabArgs,
        /// Accepted for containerlab's sake: nsfleet writes no lab directory to clean.
        #[arg(short = 'c', long)]
        cleanup: bool,
        #[arg(long)]
        json: bool,
    },
    /// A lab's nodes as containerlab shows them: Name (clab-LAB-NODE), Kind/Image,
    /// State, IPv4/6 Address (eth0's, on the management network).
    Inspect {
        #[command(flatten)]
        lab: LabArgs,
        /// Each cell on one line.
        #[arg(short = 'w', long)]
        wide: bool,
        /// containerlab's JSON: {"LAB": [{"lab_name", "name", "kind", "image", "state",
        /// "ipv4_address", "ipv6_address"}]}.
        #[arg(long)]
        json: bool,
    },
    /// Tear a fleet down; by default returns when the kernel has reclaimed every namespace.
    Down {
        /// The fleet: its [fleet] name, or the --name it was brought up with.
        name: String,
        /// Return as soon as every namespace is dropped, before the kernel reclaims them.
        #[arg(long)]
        no_wait: bool,
        #[arg(long)]
        json: bool,
    },
    /// Fleets, their nodes and processes, kernel memory, namespaces awaiting reclamation.
    Status {
        /// One fleet, with its nodes; without it, a line per fleet.
        name: Option<String>,
        /// {"fleets": [{"name", "pid", "state", "nodes": [{"name", ...}], ...}]}
        #[arg(long)]
        json: bool,
    },
    /// Run a command inside a node, like `ip netns exec`: stdio and exit status pass through.
    ///
    /// In a node that runs software, the command runs in the node's whole world (its PID,
    /// mount and UTS namespaces too), so `vtysh`, `birdc`, `ps` and `hostname` see the
    /// node, with NSFLEET_FLEET, NSFLEET_NODE and NSFLEET_INDEX set.
    Exec {
        /// The fleet: its [fleet] name, or the --name it was brought up with.
        name: String,
        /// The node to run in, by name (`nsfleet status NAME` lists them), or by its
        /// containerlab container name (clab-LAB-NODE).
        node: String,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Impair one interface of a live fleet (tc netem; on kernels without netem, only
    /// --rate, with tbf). Replaces the interface's current impairment.
    Impair {
        /// The fleet.
        name: String,
        /// The interface, as NODE:IFACE (`nsfleet status NAME` lists them).
        target: String,
        /// Added delay of each packet, e.g. 20ms.
        #[arg(long)]
        delay: Option<String>,
        /// Random variation of the delay, e.g. 5ms (needs --delay).
        #[arg(long)]
        jitter: Option<String>,
        /// Packets dropped, e.g. 1%.
        #[arg(long)]
        loss: Option<String>,
        /// Packets sent twice, e.g. 0.5%.
        #[arg(long)]
        duplicate: Option<String>,
        /// Packets with a flipped bit, e.g. 0.1%.
        #[arg(long)]
        corrupt: Option<String>,
        /// Packets sent at once, ahead of those --delay holds back, e.g. 25% (needs
        /// --delay).
        #[arg(long)]
        reorder: Option<String>,
        /// Bandwidth limit, e.g. 100mbit, 1gbit, 10mbps (bytes).
        #[arg(long)]
        rate: Option<String>,
        /// Remove the interface's impairment.
        #[arg(long)]
        clear: bool,
        #[arg(long)]
        json: bool,
    },
    /// Pull a link's cable and plug it back, on a live fleet; or look at the link.
    ///
    /// `down` takes the end NODE:IFACE down: its peer loses carrier (NO-CARRIER), as a
    /// port whose cable is pulled; addresses stay. `up` plugs it back. Without either,
    /// shows both ends (up, carrier, counters) and the impairment.
    ///
    ///   nsfleet link lab r1:eth1 down
    ///   nsfleet link lab r1:eth1            # r1:eth1 DOWN ...; peer r2:eth1 UP, NO-CARRIER
    ///   nsfleet link lab r1:eth1 up
    #[command(verbatim_doc_comment)]
    Link {
        /// The fleet.
        name: String,
        /// One end of the link, as NODE:IFACE (`nsfleet status NAME` lists them).
        target: String,
        /// down (pull the cable) or up (plug it back); nothing to look.
        #[arg(value_parser = ["down", "up"])]
        action: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Change a running fleet into FILE, only where they differ: nodes and switches
    /// added or removed, interfaces, addresses, routes, impairments, sysctls and processes
    /// of the others changed. Nodes the change does not touch keep their processes and
    /// counters; a node whose processes' commands, files or environment change restarts
    /// them. All or nothing: a failure half-way puts the fleet back as it was. The fleet
    /// is the file's; nodes are removed last, once nothing can fail.
    ///
    ///   nsfleet apply lab.toml --dry-run   # the plan: + added, - removed, ~ changed
    ///   nsfleet apply lab.toml             # make it so
    ///
    /// Refused, with nothing changed: a file for another fleet, an invalid file, a switch
    /// that would need more bridges, and removing a node that `nsfleet exec` runs in or
    /// the traffic generator sends from. `status` waits for an apply in progress.
    #[command(verbatim_doc_comment)]
    Apply {
        /// The topology file (TOML or containerlab's YAML), as for `up` (at most 16 MiB).
        file: PathBuf,
        /// The file's language when its name does not say: toml or clab.
        #[arg(long, value_parser = parse_format)]
        format: Option<nsfleet::topology::Format>,
        /// The running fleet, when it is not the file's name.
        #[arg(long)]
        name: Option<String>,
        /// Show the plan; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// {"fleet", "dry_run", "applied", "changes": [{"op": "add" | "remove" | "change",
        /// "object", "detail"}], "report": {"added", "changed", "removed", "steps"} | null}
        #[arg(long)]
        json: bool,
    },
    /// Capture packets of one or more interfaces of a live fleet, as tcpdump would.
    ///
    /// Each NODE:IFACE is captured in its node's namespace; several are merged in the
    /// order of the kernel's timestamps. The filter (tcpdump's syntax, compiled by libpcap
    /// and run in the kernel) follows the interfaces. Without -w, one line a packet (times
    /// in UTC); with -w, pcapng with one interface per NODE:IFACE, named so. Ctrl-C ends
    /// it; the counts of packets captured, received and dropped by the kernel follow.
    ///
    ///   nsfleet capture lab r1:eth0 icmp
    ///   nsfleet capture lab r1:eth0 r2:eth1 -w ospf.pcapng ip proto 89
    ///   nsfleet capture lab r1:eth0 -w - | wireshark -k -i -
    ///   nsfleet capture lab r1:eth0 -w - | tcpdump -n -r -
    #[command(verbatim_doc_comment)]
    Capture {
        /// The fleet.
        name: String,
        /// NODE:IFACE to capture (one or more), then the filter, if any: words that are not
        /// NODE:IFACE start it.
        #[arg(required = true, num_args = 1..)]
        args: Vec<String>,
        /// Write pcapng to FILE, or to standard output with `-`.
        #[arg(short = 'w', value_name = "FILE")]
        write: Option<std::path::PathBuf>,
        /// Stop after this many packets.
        #[arg(short = 'c', value_parser = within::<1, 1_000_000_000_000>)]
        count: Option<u64>,
        /// Bytes kept of each packet (the rest is counted in its length).
        #[arg(short = 's', default_value_t = cmd::capture::DEFAULT_SNAPLEN as u64, value_parser = within::<64, 262144>)]
        snaplen: u64,
    },
    /// Per-interface packets, bytes, drops and errors, and per-process CPU and memory, of
    /// a live fleet: once, or refreshed like top with rates (--watch).
    ///
    /// Each refresh is one netlink dump in each node's namespace, spread over the
    /// supervisor's workers (no process per node).
    ///
    ///   nsfleet stats lab                     # every interface and process, counters
    ///   nsfleet stats lab r1                  # one node
    ///   nsfleet stats lab r1:eth0 --json      # one interface, for machines
    ///   nsfleet stats lab --watch --sort rx   # the busiest interfaces, every second
    #[command(verbatim_doc_comment)]
    Stats {
        /// The fleet.
        name: String,
        /// NODE or NODE:IFACE; the whole fleet without it.
        target: Option<String>,
        /// Refresh until Ctrl-C, showing rates between two readings.
        #[arg(long)]
        watch: bool,
        /// Seconds between refreshes with --watch.
        #[arg(long, default_value_t = 1.0, value_parser = seconds)]
        interval: f64,
        /// Sort rows by name, rx, tx, drops, errors (interfaces) or cpu, mem (processes);
        /// largest first.
        #[arg(long, default_value = "name")]
        sort: cmd::stats::SortKey,
        /// Show at most this many rows of each table (20 with --watch).
        #[arg(long, value_parser = within_usize::<1, 1_000_000>)]
        limit: Option<usize>,
        /// {"at": seconds since the epoch, "nodes": [{"name", "interfaces": [{"name",
        /// "rx_packets", ...}], "processes": [{"pid", "command", "cpu_seconds",
        /// "rss_bytes"}]}]}; one per line with --watch.
        #[arg(long)]
        json: bool,
    },
    /// Draw a fleet: one self-contained HTML page (no network needed) from a topology file
    /// or a running fleet, or its graph for other tools.
    ///
    /// The page lays the fleet out so that 5 or 10,000 nodes stay readable: switches are
    /// squares, routers orange and hosts green circles; zoom with the wheel, pan by
    /// dragging, search a node by name, hover for its addresses and impairments. With
    /// --serve, a running fleet's page is served on 127.0.0.1 and follows the fleet: links
    /// down (from its events), impairments and counters.
    ///
    ///   nsfleet graph lab.toml                     # graph.html
    ///   nsfleet graph lab -o lab.html              # the running fleet, as it is now
    ///   nsfleet graph lab --serve 8080             # live, on http://127.0.0.1:8080/
    ///   nsfleet graph lab.toml --format dot | dot -Tsvg > lab.svg
    #[command(verbatim_doc_comment)]
    Graph {
        /// A topology file (TOML or containerlab YAML), or the name of a running fleet.
        source: String,
        /// html, dot, mermaid or json.
        #[arg(long, default_value = "html")]
        format: cmd::graph::Format,
        /// Write it here (`-` for standard output). HTML goes to graph.html without it,
        /// the other formats to standard output.
        #[arg(short = 'o', long, value_name = "FILE")]
        output: Option<std::path::PathBuf>,
        /// Serve the running fleet's live page on 127.0.0.1:PORT until Ctrl-C (0 picks
        /// a free port).
        #[arg(long, value_name = "PORT", value_parser = within::<0, 65535>)]
        serve: Option<u64>,
    },
    /// Stream what happens in a live fleet until it ends: links up, down or without
    /// carrier (the kernel's own notifications in each node, not polling), processes
    /// started and exited with their status, node actions, and nodes and interfaces added,
    /// changed or removed by `apply`.
    ///
    ///   nsfleet events lab            # 12:04:31.250 UTC  link     r1:eth0 no-carrier
    ///   nsfleet events lab --json     # {"event":"link","node":"r1","iface":"eth0","state":"no-carrier","at":...}
    #[command(verbatim_doc_comment)]
    Events {
        /// The fleet.
        name: String,
        /// One JSON object per line: {"event": "link" | "node" | "process_started" |
        /// "process_exited" | "fleet_down", "at": seconds since the epoch, ...}.
        #[arg(long)]
        json: bool,
    },
    /// Stop, start, restart, pause or resume one node's processes on a live fleet; its
    /// namespace, links and addresses stay.
    ///
    /// stop ends them (SIGTERM, SIGKILL after 3 s) and the node's world with them; start
    /// brings them up as `up` did (a new world, the node's commands); restart is both.
    /// pause stops every process of the node (SIGSTOP, through its init), resume lets them
    /// go on; `status` shows them paused.
    ///
    ///   nsfleet node lab r1 restart
    ///   nsfleet node lab r1 pause
    #[command(verbatim_doc_comment)]
    Node {
        /// The fleet.
        name: String,
        /// The node (`nsfleet status NAME` lists them).
        node: String,
        #[arg(value_parser = node_actions())]
        action: nsfleet::control::NodeAction,
        #[arg(long)]
        json: bool,
    },
    /// Send packets between nodes with the traffic generator (pktgen's model: a pinned
    /// thread per core, devices spread over them), then report sent and delivered packets.
    ///
    /// Examples:
    ///   nsfleet gen lab --dev h1:eth0 --dst 10.0.0.2 --count 10M
    ///   nsfleet gen lab --dev h1:eth0 --dst 10.0.0.2 --rate 100mbit --duration 10s
    ///   nsfleet gen lab --dev h1:eth0 --dst-min 10.0.0.2 --dst-max 10.0.0.9 --udp-dst-max 99
    ///   nsfleet gen lab --file gen.conf   (pktgen-style lines: `thread 0 add_device h1:eth0`,
    ///                                     `dev h1:eth0 count 1M`, `device_list locked`, ...)
    ///
    /// The destination's node, when the address belongs to the fleet, gives the frames'
    /// MAC and counts what arrives. `--method auto` uses XDP live frames when every frame is
    /// the same, the device is not paced and the destination is the link's other end (its
    /// GRO is turned on for that, and off again by the next `gen`), and the AF_PACKET TX
    /// ring otherwise; the report says which, and why.
    #[command(verbatim_doc_comment)]
    Gen(Box<GenCli>),
    /// Run a command on another kernel: boot it under QEMU with this machine's root
    /// filesystem read-only inside (a writable scratch over it, in the guest's memory), so
    /// that nsfleet and the host's tools run there unchanged; the command's output comes
    /// here and its exit status is nsfleet's.
    ///
    /// KVM when it works, TCG (emulation) otherwise, saying which: a guest that shows no
    /// sign of life under KVM within 10 s is killed and booted again under TCG, and the
    /// verdict is kept (~/.cache/nsfleet/accel, per host kernel and QEMU version) so that
    /// the next run goes to TCG at once; --accel (or NSFLEET_VM_ACCEL) overrides it.
    /// Ctrl-C or SIGTERM in any phase stops QEMU, removes the run's folder and exits
    /// with 128+signal; QEMU dies with nsfleet even after a SIGKILL, and the folder of a
    /// killed run is removed by the next run (or `nsfleet clean --all`). The kernel's modules
    /// come from --modules or from beside the image (`boot/vmlinuz-R`, `lib/modules/R`);
    /// the kernel options nsfleet needs that its config lacks are listed before the
    /// command runs. Needs qemu-system-x86 and busybox-static.
    ///
    ///   nsfleet vm --debian 6.12 -- uname -r
    ///   nsfleet vm --debian 6.1 --rwdir /tmp/out -- nsfleet bench teardown -o /tmp/out/t.json
    ///   nsfleet vm --debian 6.12-rt --append rcu_nocbs=0-1 -- nsfleet bench routers --quick
    ///   nsfleet vm --kernel ~/linux/arch/x86/boot/bzImage --modules /tmp/mods/lib/modules/6.13.0 -- ./test.sh
    #[command(verbatim_doc_comment)]
    Vm(VmCommand),
    /// Run a script written for Mininet unchanged on nsfleet: its `mininet.*` imports are
    /// answered by nsfleet's Python package (`nsfleet.mininet`: Mininet, Topo, TreeTopo,
    /// Host, TCLink, CLI...). Needs the package (`pip install .` in nsfleet's repository);
    /// the Python beside this executable is used, else python3 on PATH. A feature nsfleet
    /// lacks (RemoteController, xterms, CPULimitedHost) is refused at the script's line
    /// before the network is built.
    ///
    ///   sudo nsfleet mn /usr/share/doc/mininet/examples/linuxrouter.py
    #[command(verbatim_doc_comment)]
    Mn {
        /// The script and its arguments.
        #[arg(
            required = true,
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "SCRIPT.py [ARGS]"
        )]
        script: Vec<String>,
    },
    /// Remove what crashed fleets left behind (run folders, stale sockets). Never touches
    /// a running fleet or anything without an nsfleet record.
    Clean {
        /// The dead fleet to clean up after.
        name: Option<String>,
        /// Every dead fleet under the run directory, and what killed `nsfleet vm` runs left
        /// (their scratch folders, a kernel half unpacked in the cache).
        #[arg(long)]
        all: bool,
    },
    /// Benchmarks: the seeds' experiments, nsfleet and its peers measured in the same run,
    /// as result files (JSON) with medians, ratios and charts.
    #[command(subcommand)]
    Bench(Bench),
    /// One self-contained HTML page (SVG charts, no network) from bench result files; one
    /// column and one series per file, so that two kernels sit side by side.
    Report {
        /// Result files of `nsfleet bench ... -o FILE` or `nsfleet bench all`.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[arg(short, long, default_value = "report.html")]
        output: PathBuf,
        /// Also rewrite the results table between the markers in this Markdown file:
        /// `<!-- SECTION:begin (nsfleet report --readme) -->` and `<!-- SECTION:end -->`.
        /// Several files of one scenario (one per kernel) are set side by side.
        #[arg(long)]
        readme: Option<PathBuf>,
        /// Which table of --readme.
        #[arg(long, default_value = "results", requires = "readme")]
        section: String,
    },
}

/// `nsfleet vm`'s arguments.
#[derive(Args)]
#[command(group = clap::ArgGroup::new("image").required(true).args(["kernel", "debian"]))]
struct VmCommand {
    /// The kernel image (a bzImage), or `host`: the running kernel's, where this
    /// machine keeps it (/boot/vmlinuz-R, /lib/modules/R/vmlinuz).
    #[arg(long, value_name = "BZIMAGE")]
    kernel: Option<std::path::PathBuf>,
    /// Debian's newest kernel of this version (6.1, 6.12, 6.12.107, 6.1.0-47; -rt for
    /// PREEMPT_RT), fetched once into ~/.cache/nsfleet/kernels.
    #[arg(long, value_name = "VERSION")]
    debian: Option<String>,
    /// The kernel's modules (a lib/modules/RELEASE folder).
    #[arg(long, value_name = "DIR")]
    modules: Option<std::path::PathBuf>,
    /// Virtual CPUs.
    #[arg(long, default_value_t = 2, value_parser = within::<1, 64>)]
    cpus: u64,
    /// Memory, in MiB.
    #[arg(long, default_value_t = 2048, value_parser = within::<256, 65536>)]
    mem: u64,
    /// Kill the guest after this many seconds.
    #[arg(long, default_value_t = 600, value_parser = within::<1, 86_400>)]
    timeout: u64,
    /// A host folder the guest may write, at the same path (everything else it
    /// writes is lost when it stops). Repeatable.
    #[arg(long, value_name = "DIR")]
    rwdir: Vec<std::path::PathBuf>,
    /// A kernel parameter for the guest (`rcu_nocbs=0-1`...). Repeatable.
    #[arg(long, value_name = "PARAM", allow_hyphen_values = true)]
    append: Vec<String>,
    /// The accelerator: `auto` (the verdict kept for this host, else KVM with the
    /// fallback to TCG), `kvm` (no fallback), `tcg`. Default: $NSFLEET_VM_ACCEL, else auto.
    #[arg(long, value_name = "kvm|tcg|auto", value_parser = accel)]
    accel: Option<nsfleet_vm::Accel>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

fn accel(s: &str) -> Result<nsfleet_vm::Accel, String> {
    s.parse().map_err(|e: anyhow::Error| e.to_string())
}

/// Which containerlab lab: by its file, its name, or all of them.
#[derive(Args)]
struct LabArgs {
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

/// How `up` (and `deploy`) bring a fleet up.
#[derive(Args)]
struct LaunchArgs {
    #[command(flatten)]
    engine: EngineArgs,
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
    /// Validate the file and check it against this machine, then stop: nothing is
    /// created.
    #[arg(long)]
    dry_run: bool,
}

impl LaunchArgs {
    fn up(
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
        }
    }
}

#[derive(Args)]
struct EngineArgs {
    /// Worker threads creating nodes in parallel (default: one per CPU).
    #[arg(long, value_parser = within_usize::<1, 1024>, default_value_t = default_workers())]
    workers: usize,
    /// Most torn-down namespaces the kernel may still be reclaiming at once; bounds
    /// memory under create/destroy churn.
    #[arg(long, value_parser = within_usize::<1, 10_000_000>, default_value_t = 4096)]
    max_unreclaimed: usize,
}

#[derive(Subcommand)]
enum Bench {
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
    /// Seed 001: N namespaces torn down by nsfleet's batched reaper vs one at a time, each
    /// waited for until the kernel has reclaimed it; memory given back over time.
    Teardown {
        /// Namespaces (loopback up) each contender tears down.
        #[arg(long, value_parser = within::<1, 10_000_000>, default_value_t = d().teardown_count)]
        count: u64,
        #[command(flatten)]
        common: BenchRuns,
    },
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
    /// Seed 003's fake routers (lo up, eth0 on a shared switch, an address, forwarding):
    /// nsfleet vs a raw in-process loop doing the same kernel work at each count; nsfleet
    /// with `ports = "macvlan"` (a macvlan per router instead of a veth pair and a bridge
    /// port) vs the same raw loop, and a raw loop of macvlans; vs seed 003's
    /// one-`ip`-per-step script, and Mininet's LinearTopo vs nsfleet's `linear` (with a raw
    /// loop building the same topology: what the kernel work alone allows).
    Routers {
        /// Routers to build (nsfleet and the raw loop).
        #[arg(long, value_parser = within::<1, 10_000_000>, default_value_t = d().routers_count)]
        count: u64,
        /// Measure at several counts instead, e.g. 1000,2000,5000,10000 (the rate-vs-count
        /// curve of both).
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
    /// Routers that run real software: N BIRD OSPF routers in a grid from one template,
    /// from `up` to full convergence (every router has a route to every loopback), memory
    /// per router (kernel, BIRD, nsfleet's init) and `down` to reclamation. Needs bird2.
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
    /// A containerlab lab of N FRR routers in a grid, as its users write one (a .clab.yml
    /// and a startup configuration per router): `up` of the file to full OSPF
    /// convergence, memory per router (kernel, FRR's daemons, nsfleet's init), and down to
    /// reclamation. Needs frr. The README sets it beside containerlab's published figures.
    Clab {
        /// Routers (a grid as close to square as the count allows).
        #[arg(long, value_parser = within::<1, 10_000_000>, default_value_t = d().clab_count)]
        count: u64,
        /// Give up if OSPF has not converged after this many seconds.
        #[arg(long, value_parser = within::<1, 86_400>, default_value_t = d().daemons_timeout.as_secs())]
        timeout: u64,
        #[command(flatten)]
        common: BenchRuns,
    },
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
    /// Mininet's tree1024 network (TreeNet(depth=2, fanout=32): 1,024 hosts) from start
    /// to pingAll-ready and stop, in the same run: nsfleet's Mininet API (Python), Mininet
    /// itself (Linux bridges, no controller; needs mininet and bridge-utils), and nsfleet's
    /// `up` of the same topology. Needs nsfleet's Python package (pip install .): run it
    /// with the nsfleet of that virtual environment.
    Mininet {
        /// The tree's depth.
        #[arg(long, value_parser = within::<1, 8>, default_value_t = 2)]
        depth: u64,
        /// Children of each switch.
        #[arg(long, value_parser = within::<1, 1024>, default_value_t = 32)]
        fanout: u64,
        #[command(flatten)]
        common: BenchRuns,
    },
    /// Every scenario at its default size (or --quick), each result in DIR/SCENARIO.json
    /// (--dir, default bench-results).
    All {
        #[command(flatten)]
        common: BenchRuns,
    },
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
        #[arg(long)]
        json: bool,
    },
}

fn d() -> nsfleet_bench::Defaults {
    nsfleet_bench::Defaults::default()
}

/// What every benchmark takes.
#[derive(Args)]
struct BenchRuns {
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

fn bench(b: Bench) -> anyhow::Result<()> {
    use nsfleet_bench::*;
    if let Some((scenario, runs)) = b.runs() {
        if !runs.kernels.is_empty() {
            return across_kernels(scenario, runs);
        }
        if runs.dir.is_some() && scenario != "all" {
            anyhow::bail!("--dir goes with --kernels (or bench all); one result file is -o FILE");
        }
    }
    match b {
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
            count,
            timeout,
            common,
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
            common,
        } => mininet(MininetArgs {
            depth,
            fanout,
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
            json,
        } => std::process::exit(compare(&baseline, &candidate, threshold, &metric, json)),
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

impl Bench {
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

fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

impl From<LabArgs> for cmd::clab::Lab {
    fn from(a: LabArgs) -> Self {
        cmd::clab::Lab {
            topo: a.topo,
            name: a.name,
            all: a.all,
        }
    }
}

/// `nsfleet vm`: the guest's exit status becomes ours; a signal's, 128+signal.
fn vm(v: VmCommand) -> anyhow::Result<()> {
    use nsfleet_vm::Spec;
    let spec = match (v.kernel, v.debian) {
        (Some(k), _) if k.as_os_str() == "host" => Spec::Host,
        (Some(k), _) => Spec::Image(k),
        (None, Some(d)) => Spec::Debian(d),
        (None, None) => unreachable!("clap requires one"),
    };
    let accel = nsfleet_vm::Accel::chosen(v.accel)?;
    let stop = nsfleet_vm::Stop::watch()?;
    let code = nsfleet_vm::run(
        &nsfleet_vm::VmArgs {
            kernel: spec.kernel(v.modules.as_deref(), &stop)?,
            cpus: v.cpus as u32,
            mem_mib: v.mem as u32,
            timeout: std::time::Duration::from_secs(v.timeout),
            rwdirs: v.rwdir,
            append: v.append,
            command: v.command,
            accel,
        },
        &stop,
    )?;
    std::process::exit(code)
}

/// `nsfleet node`'s actions: listed in --help, checked by clap.
fn node_actions() -> impl clap::builder::TypedValueParser<Value = nsfleet::control::NodeAction> {
    use clap::builder::{PossibleValuesParser, TypedValueParser};
    let names = PossibleValuesParser::new(nsfleet::control::NodeAction::names());
    names.map(|s| s.parse().expect("clap checked the name"))
}

/// A whole number from LO to HI, as the parser checks it: out of range is a usage error,
/// never a value that fails (or divides by zero) later.
fn within<const LO: u64, const HI: u64>(s: &str) -> Result<u64, String> {
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
fn within_usize<const LO: u64, const HI: u64>(s: &str) -> Result<usize, String> {
    within::<LO, HI>(s).map(|n| n as usize)
}

/// A duration in seconds, above zero and at most a day.
fn seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x > 0.0 && x <= 86_400.0 => Ok(x),
        _ => Err(format!(
            "expected seconds above 0 and at most 86400, not {s:?}"
        )),
    }
}

fn parse_format(s: &str) -> Result<nsfleet::topology::Format, String> {
    match s {
        "toml" => Ok(nsfleet::topology::Format::Toml),
        "clab" | "containerlab" => Ok(nsfleet::topology::Format::Clab),
        _ => Err(format!("expected toml or clab, got {s:?}")),
    }
}

fn main() {
    let cli = Cli::parse();
    // `nsfleet status | head` ends quietly, as Unix tools do. The supervisor that `up`
    // forks ignores SIGPIPE again, for itself and its holders: they must outlive any reader
    // that goes away.
    nsfleet::sys::die_on_sigpipe();
    let run_dir = cli.run_dir;
    // Every command that makes, reads or reaches a fleet trusts the run directory: it is
    // checked once, here (the bench and the report keep to folders of their own).
    let trusts = !matches!(
        cli.command,
        Command::Bench(_) | Command::Report { .. } | Command::Vm(_) | Command::Mn { .. }
    );
    if trusts {
        if let Err(e) = nsfleet::rundir::RunDir::new(&run_dir).check() {
            eprintln!("nsfleet: {e:#}");
            std::process::exit(1);
        }
    }
    let result = match cli.command {
        Command::Up {
            file,
            format,
            name,
            launch,
        } => cmd::up::up(launch.up(file, format, name, run_dir)),
        Command::Deploy {
            topo,
            reconfigure,
            launch,
        } => cmd::clab::deploy(cmd::clab::DeployArgs {
            topo,
            reconfigure,
            up: launch.up(None, None, None, run_dir),
        }),
        Command::Destroy {
            lab,
            cleanup: _,
            json,
        } => cmd::clab::destroy(cmd::clab::DestroyArgs {
            lab: lab.into(),
            json,
            run_dir,
        }),
        Command::Inspect { lab, wide, json } => cmd::clab::inspect(cmd::clab::InspectArgs {
            lab: lab.into(),
            json,
            wide,
            run_dir,
        }),
        Command::Down {
            name,
            no_wait,
            json,
        } => cmd::down::down(cmd::down::DownArgs {
            name,
            no_wait,
            json,
            run_dir,
        }),
        Command::Status { name, json } => cmd::status::status(cmd::status::StatusArgs {
            name,
            json,
            run_dir,
        }),
        Command::Exec {
            name,
            node,
            command,
        } => cmd::exec::exec(cmd::exec::ExecArgs {
            name,
            node,
            command,
            run_dir,
        })
        .map(|_| ()),
        Command::Impair {
            name,
            target,
            delay,
            jitter,
            loss,
            duplicate,
            corrupt,
            reorder,
            rate,
            clear,
            json,
        } => {
            let given = [
                ("delay", delay),
                ("jitter", jitter),
                ("loss", loss),
                ("duplicate", duplicate),
                ("corrupt", corrupt),
                ("reorder", reorder),
                ("rate", rate),
            ];
            let set = given
                .into_iter()
                .filter_map(|(k, v)| Some((k, v?)))
                .collect();
            cmd::impair::impair(cmd::impair::ImpairArgs {
                name,
                target,
                set,
                clear,
                json,
                run_dir,
            })
        }
        Command::Gen(g) => g.run(run_dir),
        Command::Apply {
            file,
            format,
            name,
            dry_run,
            json,
        } => cmd::apply::apply(cmd::apply::ApplyArgs {
            file,
            format,
            name,
            dry_run,
            json,
            run_dir,
        }),
        Command::Capture {
            name,
            args,
            write,
            count,
            snaplen,
        } => {
            // NODE:IFACE words first; the filter from the first word that is not one.
            let split = args
                .iter()
                .position(|w| !w.contains(':'))
                .unwrap_or(args.len());
            let (targets, filter) = args.split_at(split);
            cmd::capture::capture(cmd::capture::CaptureArgs {
                name,
                targets: targets.to_vec(),
                write,
                count,
                snaplen: snaplen as u32,
                filter: filter.to_vec(),
                run_dir,
            })
        }
        Command::Stats {
            name,
            target,
            watch,
            interval,
            sort,
            limit,
            json,
        } => cmd::stats::stats(cmd::stats::StatsArgs {
            name,
            target,
            watch,
            interval: std::time::Duration::from_secs_f64(interval),
            json,
            sort,
            limit,
            run_dir,
        }),
        Command::Graph {
            source,
            format,
            output,
            serve,
        } => cmd::graph::graph(cmd::graph::GraphArgs {
            source,
            format,
            output,
            serve: serve.map(|p| p as u16),
            run_dir,
        }),
        Command::Events { name, json } => cmd::events::events(cmd::events::EventsArgs {
            name,
            json,
            run_dir,
        }),
        Command::Node {
            name,
            node,
            action,
            json,
        } => cmd::node::node(cmd::node::NodeArgs {
            name,
            node,
            action,
            json,
            run_dir,
        }),
        Command::Link {
            name,
            target,
            action,
            json,
        } => cmd::link::link(cmd::link::LinkArgs {
            name,
            target,
            action,
            json,
            run_dir,
        }),
        Command::Clean { name, all } => {
            let fleets = cmd::clean::clean(cmd::clean::CleanArgs { name, all, run_dir });
            // The kernel lab's own leftovers: folders of `nsfleet vm` runs that were killed.
            if all {
                for r in nsfleet_vm::scratch::sweep_all() {
                    println!(
                        "removed {} (an `nsfleet vm` run, its process gone)",
                        r.display()
                    );
                }
            }
            fleets
        }
        Command::Bench(b) => bench(b),
        Command::Report {
            files,
            output,
            readme,
            section,
        } => cmd::report::report(cmd::report::ReportArgs {
            files,
            output,
            readme,
            section,
        }),
        Command::Vm(v) => vm(v),
        Command::Mn { script } => cmd::mn::mn(&script),
    };
    if let Err(e) = result {
        // A signal's end is said plainly, whatever phase it cut short.
        if let Some(stopped) = e.downcast_ref::<nsfleet_vm::Interrupted>() {
            eprintln!("nsfleet: {stopped}");
            std::process::exit(stopped.exit_code());
        }
        eprintln!("nsfleet: {e:#}");
        std::process::exit(1);
    }
}

#[derive(clap::Args)]
struct GenCli {
    /// The fleet.
    name: String,
    /// A device to send from, NODE:IFACE; repeat for more (spread over the threads).
    #[arg(long = "dev")]
    devs: Vec<String>,
    /// Destination address (dst_min = dst_max).
    #[arg(long)]
    dst: Option<String>,
    #[arg(long)]
    dst_min: Option<String>,
    #[arg(long)]
    dst_max: Option<String>,
    /// Source address (default: the device's own IPv4 address).
    #[arg(long)]
    src: Option<String>,
    #[arg(long)]
    src_min: Option<String>,
    #[arg(long)]
    src_max: Option<String>,
    #[arg(long)]
    udp_src_min: Option<String>,
    #[arg(long)]
    udp_src_max: Option<String>,
    #[arg(long)]
    udp_dst_min: Option<String>,
    #[arg(long)]
    udp_dst_max: Option<String>,
    /// Frame size on the wire, FCS included, as pktgen counts it: 64 to 1518.
    #[arg(long)]
    pkt_size: Option<String>,
    /// Packets per device: 1000, 10M; 0 sends until stopped. Default 1M.
    #[arg(long, default_value = "1M")]
    count: String,
    /// Frames per call to the kernel (ring) or per batch (XDP), 1 to 256.
    #[arg(long)]
    burst: Option<String>,
    /// Rate per device, in bits (100mbit, 1gbit) or packets (1Mpps) per second.
    #[arg(long, conflicts_with = "ratep")]
    rate: Option<String>,
    /// Packet rate per device: 250000, 1Mpps.
    #[arg(long)]
    ratep: Option<String>,
    /// Concurrent flows over the address and port ranges.
    #[arg(long)]
    flows: Option<String>,
    /// Packets per flow before it takes the next combination.
    #[arg(long)]
    flowlen: Option<String>,
    /// The frames' destination MAC (default: the destination node's interface).
    #[arg(long)]
    dst_mac: Option<String>,
    /// auto, ring (AF_PACKET TX ring), xdp (XDP live frames) or null (build, never send).
    #[arg(long)]
    method: Option<String>,
    /// Generator threads, pinned one per CPU in turn (default: one per CPU), 1 to 1024.
    #[arg(long, value_parser = within_usize::<1, 1024>)]
    threads: Option<usize>,
    /// How threads read their device lists: rcu (a snapshot) or locked (a mutex per packet).
    #[arg(long)]
    device_list: Option<String>,
    /// Also count arrivals with a packet socket on each receiver (IPv4 UDP only).
    #[arg(long)]
    sink: bool,
    /// Stop after this long: 10s, 500ms.
    #[arg(long)]
    duration: Option<String>,
    /// pktgen-style command file, applied after a reset and before the flags.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Only stop what runs, and report.
    #[arg(long, conflicts_with = "results")]
    stop: bool,
    /// Only report the last run.
    #[arg(long)]
    results: bool,
    /// Add to what runs instead of resetting: new devices start, running ones go on.
    /// Returns at once (`--results` follows up, `--stop` ends it).
    #[arg(long, conflicts_with_all = ["stop", "results"])]
    keep: bool,
    #[arg(long)]
    json: bool,
}

impl GenCli {
    fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        let given = [
            ("dst", self.dst),
            ("dst_min", self.dst_min),
            ("dst_max", self.dst_max),
            ("src", self.src),
            ("src_min", self.src_min),
            ("src_max", self.src_max),
            ("udp_src_min", self.udp_src_min),
            ("udp_src_max", self.udp_src_max),
            ("udp_dst_min", self.udp_dst_min),
            ("udp_dst_max", self.udp_dst_max),
            ("pkt_size", self.pkt_size),
            ("count", Some(self.count)),
            ("burst", self.burst),
            ("rate", self.rate),
            ("ratep", self.ratep),
            ("flows", self.flows),
            ("flowlen", self.flowlen),
            ("dst_mac", self.dst_mac),
            ("method", self.method),
        ];
        let duration = match self.duration {
            None => None,
            Some(d) => Some(std::time::Duration::from_nanos(
                nsfleet_values::duration_ns(&d).map_err(|e| anyhow::anyhow!("--duration: {e}"))?,
            )),
        };
        cmd::gen::gen(cmd::gen::GenArgs {
            name: self.name,
            devs: self.devs,
            params: given
                .into_iter()
                .filter_map(|(k, v)| Some((k, v?)))
                .collect(),
            file: self.file,
            threads: self.threads,
            device_list: self.device_list,
            sink: self.sink,
            duration,
            stop: self.stop,
            results: self.results,
            keep: self.keep,
            json: self.json,
            run_dir,
        })
    }
}

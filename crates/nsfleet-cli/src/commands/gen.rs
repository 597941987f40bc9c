//! `nsfleet gen`: drive a fleet's traffic generator with pktgen's settings, given as flags
//! or in a command file.

use super::args::{given, within_usize, FleetName};
use clap::Args;
use nsfleet_client as cmd;
use std::path::PathBuf;

/// Send packets between nodes with the traffic generator
///
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
#[derive(Args)]
#[command(verbatim_doc_comment)]
pub struct GenCommand {
    #[command(flatten)]
    fleet: FleetName,
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

impl GenCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        let params = given([
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
        ]);
        let duration = match self.duration {
            None => None,
            Some(d) => Some(std::time::Duration::from_nanos(
                nsfleet_values::duration_ns(&d).map_err(|e| anyhow::anyhow!("--duration: {e}"))?,
            )),
        };
        cmd::gen::gen(cmd::gen::GenArgs {
            fleet: self.fleet.under(run_dir),
            devs: self.devs,
            params,
            file: self.file,
            threads: self.threads,
            device_list: self.device_list,
            sink: self.sink,
            duration,
            stop: self.stop,
            results: self.results,
            keep: self.keep,
            json: self.json,
        })
    }
}

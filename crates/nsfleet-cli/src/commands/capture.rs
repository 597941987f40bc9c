//! `nsfleet capture`: capture packets of a live fleet's interfaces. Interfaces and the
//! filter share one list of words, split here.

use super::args::{within, FleetName, KubeArgs};
use clap::Args;
use nsfleet_client as cmd;
use std::path::PathBuf;

/// Capture packets of a live fleet's interfaces, as tcpdump would
///
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
///   nsfleet capture lab r1:eth0 r9:eth1 --kube -w both.pcapng   # on each one's machine,
///                                                                # merged here
#[derive(Args)]
#[command(verbatim_doc_comment)]
pub struct CaptureCommand {
    #[command(flatten)]
    fleet: FleetName,
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
    #[command(flatten)]
    kube: KubeArgs,
    /// End when standard input ends (how `capture --kube` runs on a machine).
    #[arg(long, hide = true)]
    until_stdin_closes: bool,
}

impl CaptureCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        let CaptureCommand {
            fleet,
            args,
            write,
            count,
            snaplen,
            kube,
            until_stdin_closes,
        } = self;
        // NODE:IFACE words first; the filter from the first word that is not one.
        let split = args
            .iter()
            .position(|w| !w.contains(':'))
            .unwrap_or(args.len());
        let (targets, filter) = args.split_at(split);
        let code = kube.backend().capture(cmd::capture::CaptureArgs {
            fleet: fleet.under(run_dir),
            targets: targets.to_vec(),
            write,
            count,
            snaplen: snaplen as u32,
            filter: filter.to_vec(),
            until_stdin_closes,
        })?;
        if code != 0 {
            std::process::exit(code);
        }
        Ok(())
    }
}

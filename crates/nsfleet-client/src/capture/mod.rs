//! `nsfleet capture`: packets of one or more `node:iface` of a running fleet, as pcapng
//! (`-w FILE`, or `-w -` for `wireshark -k -i -` and `tcpdump -r -`) or as one line each.
//!
//! Each interface gets an AF_PACKET socket opened inside its node's network namespace (the
//! supervisor passes the namespace; the socket stays in it), with the filter compiled by
//! libpcap attached in the kernel, so that what the filter refuses is never copied out.
//! Packets of several interfaces are merged in the order of the kernel's timestamps: each
//! is held [`HOLD`] before it is written, so that one read a little late from another
//! socket still goes first. Everything that can be wrong (a node, an interface, the filter,
//! the output) is refused before the first packet is read.

pub mod merge;
mod pcapng;
mod summary;

use super::FleetRef;
use anyhow::{anyhow, bail, Context};
use nsfleet::sys;
use nsfleet::sys::packet::{self, PacketStats};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long a packet waits for older ones from the other interfaces before it is written.
const HOLD: Duration = Duration::from_millis(20);
/// Each socket's receive buffer: a burst of a few thousand full-size frames.
const BUFFER: i32 = 8 << 20;
/// tcpdump's default snapshot length.
pub const DEFAULT_SNAPLEN: u32 = 262_144;

pub struct CaptureArgs {
    pub fleet: FleetRef,
    /// `node:iface`, one or more.
    pub targets: Vec<String>,
    /// pcapng to this file (`-` for standard output); one line a packet without it.
    pub write: Option<PathBuf>,
    pub count: Option<u64>,
    pub snaplen: u32,
    /// tcpdump's filter syntax, in words as given.
    pub filter: Vec<String>,
    /// Also end when standard input ends: run on a machine for `capture --kube`, whose
    /// standard input closes when the user's `nsfleet` ends, Ctrl-C included.
    pub until_stdin_closes: bool,
}

/// One interface being captured.
struct Tap {
    label: String,
    sock: OwnedFd,
    open: bool,
}

pub fn capture(a: CaptureArgs) -> anyhow::Result<()> {
    if a.targets.is_empty() {
        bail!("no interface to capture: give NODE:IFACE before the filter, like r1:eth0");
    }
    // While this process has one thread: a user's taps are opened in their fleet.
    a.fleet.enter_as_user()?;
    let filter = a.filter.join(" ");
    let program = match filter.trim() {
        "" => None,
        f => {
            Some(sys::bpf::compile_filter(f, a.snaplen).map_err(|e| anyhow!("filter {f:?}: {e}"))?)
        }
    };
    let mut taps = Vec::new();
    for t in &a.targets {
        taps.push(open_tap(&a.fleet, t, program.as_deref())?);
    }
    let mut out = Output::open(a.write.as_ref(), &a.fleet.name, &taps, a.snaplen)?;
    let labels: Vec<&str> = taps.iter().map(|t| t.label.as_str()).collect();
    eprintln!(
        "nsfleet: capturing on {} (snapshot length {}); Ctrl-C ends it",
        labels.join(", "),
        a.snaplen
    );
    let started = now_ns();
    let closed = Arc::new(AtomicBool::new(false));
    if a.until_stdin_closes {
        let closed = closed.clone();
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
            closed.store(true, Ordering::Relaxed);
        });
    }
    let written = run(&mut taps, &mut out, a.snaplen, a.count, &closed)?;
    let stats: Vec<PacketStats> = (taps.iter())
        .map(|t| packet::packet_stats(&t.sock).unwrap_or_default())
        .collect();
    out.finish(started, &stats)?;
    let received: u64 = stats.iter().map(|s| s.packets).sum();
    let dropped: u64 = stats.iter().map(|s| s.drops).sum();
    eprintln!("{written} packets captured");
    eprintln!("{received} packets received by filter");
    eprintln!("{dropped} packets dropped by kernel");
    Ok(())
}

/// A packet socket on `target` (`node:iface`) of `fleet`, inside the node's network
/// namespace, with `program` attached, bound and stamping packets.
fn open_tap(
    fleet: &FleetRef,
    target: &str,
    program: Option<&[libc::sock_filter]>,
) -> anyhow::Result<Tap> {
    let Some((node, iface)) = target
        .split_once(':')
        .filter(|(n, i)| !n.is_empty() && !i.is_empty())
    else {
        bail!("{target:?}: expected NODE:IFACE, like r1:eth0");
    };
    let ns = fleet.node_namespace(node)?.fd;
    let (iface, program) = (iface.to_string(), program.map(<[_]>::to_vec));
    // A thread of its own enters the namespace and ends there: the socket it makes stays
    // in the namespace, and this thread never leaves the host's.
    let sock = std::thread::spawn(move || -> anyhow::Result<OwnedFd> {
        sys::setns(ns.as_fd(), libc::CLONE_NEWNET)
            .context("entering the node's network namespace")?;
        let index = sys::ifindex(&iface).map_err(|_| no_such_interface(&iface))?;
        let sock = packet::packet_socket(0)?;
        if let Some(p) = &program {
            packet::attach_filter(&sock, p).context("attaching the filter")?;
        }
        packet::enable_timestamps(&sock)?;
        if packet::force_rcvbuf(&sock, BUFFER).is_err() {
            packet::set_rcvbuf(&sock, BUFFER)?;
        }
        packet::bind_packet(&sock, index, libc::ETH_P_ALL as u16)?;
        Ok(sock)
    })
    .join()
    .map_err(|_| anyhow!("opening a socket in node {node} failed"))?
    .with_context(|| target.to_string())?;
    Ok(Tap {
        label: target.to_string(),
        sock,
        open: true,
    })
}

/// "no interface "eth9" (it has eth0, eth1, lo; did you mean eth0?)", in the namespace the
/// calling thread is in.
fn no_such_interface(iface: &str) -> anyhow::Error {
    let have = packet::interface_names().unwrap_or_default();
    let names: Vec<&str> = have.iter().map(String::as_str).collect();
    let close = nsfleet::topology::closest(iface, &names);
    let hint = match close.is_empty() {
        true => String::new(),
        false => format!("; did you mean {}?", close.join(" or ")),
    };
    anyhow!("no interface {iface:?} (it has {}{hint})", names.join(", "))
}

/// One packet read, waiting for its turn.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Held {
    at_ns: u64,
    /// Order of reading, for packets stamped the same nanosecond.
    seq: u64,
    tap: usize,
    len: usize,
    outgoing: bool,
    data: Vec<u8>,
}

/// Reads until `count` packets are written, Ctrl-C (or SIGTERM), `closed`, or every
/// interface is gone; returns how many were written.
fn run(
    taps: &mut [Tap],
    out: &mut Output,
    snaplen: u32,
    count: Option<u64>,
    closed: &AtomicBool,
) -> anyhow::Result<u64> {
    let stop = [libc::SIGINT, libc::SIGTERM];
    let _held_signals = sys::SignalsHeld::new(&stop)?;
    let mut queue: BinaryHeap<Reverse<Held>> = BinaryHeap::new();
    let (mut seq, mut written) = (0u64, 0u64);
    let limit = count.unwrap_or(u64::MAX);
    let mut buf = vec![0u8; snaplen.max(64) as usize];
    while written < limit && taps.iter().any(|t| t.open) {
        if sys::take_signal(&stop, Duration::ZERO)?.is_some() || closed.load(Ordering::Relaxed) {
            break;
        }
        let fds: Vec<_> = taps.iter().map(|t| t.sock.as_fd()).collect();
        let ready = sys::poll_readable(&fds, Some(Duration::from_millis(50)))?;
        drop(fds);
        for (i, tap) in taps
            .iter_mut()
            .enumerate()
            .filter(|(i, t)| ready[*i] && t.open)
        {
            // A bounded drain: one busy interface does not starve the others.
            for _ in 0..256 {
                match packet::recv_stamped(&tap.sock, &mut buf) {
                    Ok(Some(r)) => {
                        let kept = r.len.min(buf.len());
                        seq += 1;
                        queue.push(Reverse(Held {
                            at_ns: r.at.as_nanos() as u64,
                            seq,
                            tap: i,
                            len: r.len,
                            outgoing: r.outgoing,
                            data: buf[..kept].to_vec(),
                        }));
                    }
                    Ok(None) => break,
                    Err(e) => {
                        eprintln!("nsfleet: capture: {}: {e}; capturing the others", tap.label);
                        tap.open = false;
                        break;
                    }
                }
            }
        }
        let due = now_ns().saturating_sub(HOLD.as_nanos() as u64);
        written += out.drain(&mut queue, taps, Some(due), limit - written)?;
    }
    written += out.drain(&mut queue, taps, None, limit - written)?;
    Ok(written)
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Where packets go: pcapng blocks, or a line each.
enum Output {
    Pcapng(Box<dyn Write>),
    Lines(std::io::Stdout),
}

impl Output {
    /// The output, opened (and for pcapng, its header and interfaces written) before any
    /// packet is read: a path that cannot be written is refused here.
    fn open(
        write: Option<&PathBuf>,
        fleet: &str,
        taps: &[Tap],
        snaplen: u32,
    ) -> anyhow::Result<Output> {
        let Some(path) = write else {
            return Ok(Output::Lines(std::io::stdout()));
        };
        let mut w: Box<dyn Write> = if path.as_os_str() == "-" {
            Box::new(std::io::stdout())
        } else {
            let f = std::fs::File::create(path)
                .with_context(|| format!("-w {}: cannot write it", path.display()))?;
            Box::new(std::io::BufWriter::new(f))
        };
        w.write_all(&pcapng::section_header(&format!(
            "nsfleet {}",
            env!("CARGO_PKG_VERSION")
        )))?;
        for t in taps {
            w.write_all(&pcapng::interface(
                &t.label,
                snaplen,
                &format!("fleet {fleet}"),
            ))?;
        }
        w.flush()?;
        Ok(Output::Pcapng(w))
    }

    /// Writes the held packets stamped before `due` (all with `None`), oldest first, at
    /// most `room` of them; returns how many.
    fn drain(
        &mut self,
        queue: &mut BinaryHeap<Reverse<Held>>,
        taps: &[Tap],
        due: Option<u64>,
        room: u64,
    ) -> anyhow::Result<u64> {
        let mut n = 0;
        while n < room {
            match queue.peek() {
                Some(Reverse(p)) if due.is_none_or(|d| p.at_ns <= d) => {}
                _ => break,
            }
            let Reverse(p) = queue.pop().expect("peeked");
            match self {
                Output::Pcapng(w) => w.write_all(&pcapng::packet(
                    p.tap as u32,
                    p.at_ns,
                    &p.data,
                    p.len,
                    p.outgoing,
                ))?,
                Output::Lines(w) => writeln!(
                    w,
                    "{} {} {} {}",
                    clock(p.at_ns),
                    taps[p.tap].label,
                    if p.outgoing { "Out" } else { "In " },
                    summary::describe(&p.data)
                )?,
            }
            n += 1;
        }
        match self {
            Output::Pcapng(w) => w.flush()?,
            Output::Lines(w) => w.flush()?,
        }
        Ok(n)
    }

    /// For pcapng, each interface's counters.
    fn finish(&mut self, started: u64, stats: &[PacketStats]) -> anyhow::Result<()> {
        if let Output::Pcapng(w) = self {
            let end = now_ns();
            for (i, s) in stats.iter().enumerate() {
                w.write_all(&pcapng::statistics(
                    i as u32, started, end, s.packets, s.drops,
                ))?;
            }
            w.flush()?;
        }
        Ok(())
    }
}

/// `HH:MM:SS.micros` of a timestamp, in UTC.
fn clock(ns: u64) -> String {
    let s = ns / 1_000_000_000;
    let micros = (ns / 1000) % 1_000_000;
    format!(
        "{:02}:{:02}:{:02}.{micros:06}",
        s / 3600 % 24,
        s / 60 % 60,
        s % 60
    )
}

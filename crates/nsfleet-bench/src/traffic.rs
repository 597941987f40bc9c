//! `nsfleet bench traffic`, seed 004's engine against netsniff-ng's trafgen, on one veth
//! pair between two fleet nodes, 64-byte UDP, in the same run:
//!
//! - trafgen on one core (AF_PACKET TX ring, qdisc bypassed: its default) against
//!   `nsfleet gen` with one thread, by its best method (`auto`) and by the same ring;
//! - two threads on two pairs against one;
//! - seed 004's ablation: the generator loop alone (`method null`) and the ring, each with
//!   the device list read through the snapshot and through a mutex per packet.
//!
//! Rates are counted where the packets arrive (the receiver's rx_packets), over a window
//! that leaves out each sender's start. The receiver answers no ICMP
//! (`net.ipv4.icmp_msgs_per_sec = 0`) for every contender alike: otherwise its
//! port-unreachable route lookups, not the senders, set every rate.

use super::{emit, machine, metric, need_root, note, ratio, versus, which, Cli, Common, Ratio};
use anyhow::{bail, Context};
use nsfleet_results::{Better, Results};
use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

pub struct TrafficArgs {
    /// Seconds each contender sends for.
    pub seconds: f64,
    /// Packets per run of the generator loop alone (the ablation).
    pub loop_packets: u64,
    pub common: Common,
}

const TOPOLOGY: &str = r#"
[[node]]
name = "tx"
[[node]]
name = "rx"
sysctls = { "net.ipv4.icmp_msgs_per_sec" = 0 }
[[link]]
a = { at = "tx:eth0", addrs = ["10.30.0.1/24"] }
b = { at = "rx:eth0", addrs = ["10.30.0.2/24"] }
[[link]]
a = { at = "tx:eth1", addrs = ["10.31.0.1/24"] }
b = { at = "rx:eth1", addrs = ["10.31.0.2/24"] }
"#;

/// Both pairs, a device per thread: the two-core run.
const TWO_THREADS: &str = "thread 0 add_device tx:eth0\ndev tx:eth0 dst 10.30.0.2\ndev tx:eth0 count 0\nthread 1 add_device tx:eth1\ndev tx:eth1 dst 10.31.0.2\ndev tx:eth1 count 0\n";

#[derive(Default)]
struct Samples {
    trafgen: Vec<f64>,
    auto: Vec<f64>,
    ring: Vec<f64>,
    ring_locked: Vec<f64>,
    two: Vec<f64>,
    loop_rcu: Vec<f64>,
    loop_locked: Vec<f64>,
    method: String,
}

pub fn traffic(a: TrafficArgs) -> anyhow::Result<()> {
    need_root("traffic")?;
    let c = &a.common;
    let secs = if c.quick {
        a.seconds.min(0.5)
    } else {
        a.seconds
    };
    let loop_packets = c.size(a.loop_packets, 2_000_000);
    let has_trafgen = which("trafgen");
    if !has_trafgen {
        note("trafgen is not installed (Debian: netsniff-ng): measuring nsfleet alone");
    }
    let up = Cli::new()?.up_with(TOPOLOGY, c.workers)?;
    let cli = &up.cli;
    let two_file = cli.file("two.gen", TWO_THREADS)?;
    let mut s = Samples::default();
    let d = format!("{}ms", (secs * 1e3) as u64);
    for r in 0..c.repetitions() {
        let run = |what: &str| note(&format!("run {}/{}: {what}", r + 1, c.repetitions()));
        let one = [
            "--dev",
            "tx:eth0",
            "--dst",
            "10.30.0.2",
            "--count",
            "0",
            "--duration",
            &d,
            "--threads",
            "1",
        ];
        run("nsfleet gen, one thread, method auto");
        let g = gen(cli, &one, &["--method", "auto"])?;
        s.method = g.method.clone();
        s.auto.push(g.delivered_pps);
        run("nsfleet gen, two threads on two pairs");
        s.two.push(
            gen(
                cli,
                &["--file", &two_file, "--duration", &d, "--threads", "2"],
                &[],
            )?
            .delivered_pps,
        );
        run("nsfleet gen, one thread, TX ring (rcu, then locked)");
        s.ring
            .push(gen(cli, &one, &["--method", "ring"])?.delivered_pps);
        s.ring_locked
            .push(gen(cli, &one, &["--method", "ring", "--device-list", "locked"])?.delivered_pps);
        run("the generator loop alone (method null), rcu and locked");
        let n = loop_packets.to_string();
        let null = [
            "--dev",
            "tx:eth0",
            "--dst",
            "10.30.0.2",
            "--count",
            &n,
            "--threads",
            "1",
            "--method",
            "null",
        ];
        s.loop_rcu.push(gen(cli, &null, &[])?.sent_pps);
        s.loop_locked
            .push(gen(cli, &null, &["--device-list", "locked"])?.sent_pps);
        if has_trafgen {
            run("trafgen, one core");
            s.trafgen.push(trafgen(cli, secs)?);
        }
    }
    drop(up);
    note(&format!("nsfleet's method under auto: {}", s.method));
    let res = results(&s, secs, loop_packets, c);
    emit(
        &res,
        c,
        "64-byte UDP over a veth pair between two fleet nodes",
    )
}

struct Run {
    sent_pps: f64,
    delivered_pps: f64,
    method: String,
}

/// One `nsfleet gen` run; rates summed over its devices.
fn gen(cli: &Cli, args: &[&str], more: &[&str]) -> anyhow::Result<Run> {
    let mut all = vec!["gen", "bench", "--json"];
    all.extend_from_slice(args);
    all.extend_from_slice(more);
    let v = cli.run(&all)?;
    let devices: Vec<&Value> = (v["results"]["threads"].as_array().into_iter().flatten())
        .flat_map(|t| t["devices"].as_array().into_iter().flatten())
        .collect();
    let mut run = Run {
        sent_pps: 0.0,
        delivered_pps: 0.0,
        method: String::new(),
    };
    for d in devices {
        let secs = d["seconds"].as_f64().unwrap_or(0.0);
        let got = (v["delivered"].as_array().into_iter().flatten())
            .find(|x| x["dev"] == d["dev"])
            .and_then(|x| x["rx_packets"].as_f64());
        run.sent_pps += d["pps"].as_f64().unwrap_or(0.0);
        run.delivered_pps += got.map_or(0.0, |n| n / secs.max(1e-9));
        run.method = d["method"].as_str().unwrap_or("?").to_string();
    }
    Ok(run)
}

/// trafgen on one core, the same frame; packets per second arriving, after its start.
fn trafgen(cli: &Cli, secs: f64) -> anyhow::Result<f64> {
    let mac = |node: &str| -> anyhow::Result<String> {
        let out = cli
            .command(&[
                "exec",
                "bench",
                node,
                "--",
                "cat",
                "/sys/class/net/eth0/address",
            ])
            .output()?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let conf = format!(
        "{{ eth(da={}, sa={}), ipv4(saddr=10.30.0.1, daddr=10.30.0.2, ttl=64, df), udp(sp=9, dp=9, csum=0), fill(0x00, 18) }}\n",
        mac("rx")?,
        mac("tx")?
    );
    let conf = cli.file("udp64.trafgen", &conf)?;
    let mut child = cli
        .command(&[
            "exec", "bench", "tx", "--", "taskset", "-c", "0", "trafgen", "--dev", "eth0",
            "--conf", &conf, "-P", "1", "-Q", "-q",
        ])
        // trafgen sends from a child of its own: a group of their own lets both be stopped.
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting trafgen")?;
    std::thread::sleep(Duration::from_millis(500));
    let rx = || -> anyhow::Result<f64> {
        let out = cli
            .command(&[
                "exec",
                "bench",
                "rx",
                "--",
                "cat",
                "/sys/class/net/eth0/statistics/rx_packets",
            ])
            .output()?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
    };
    let (a, t) = (rx()?, Instant::now());
    std::thread::sleep(Duration::from_secs_f64(secs));
    let (b, dt) = (rx()?, t.elapsed().as_secs_f64());
    // Our own child (exec'd into trafgen), not reaped yet: its id cannot have been reused.
    let _ = nsfleet::sys::kill_group(child.id() as libc::pid_t, libc::SIGINT);
    child.wait()?;
    if b <= a {
        bail!("trafgen delivered nothing (is netsniff-ng's trafgen working here?)");
    }
    Ok((b - a) / dt)
}

fn results(s: &Samples, secs: f64, loop_packets: u64, c: &Common) -> Results {
    use Better::*;
    use Ratio::*;
    let mut res = Results::new(
        "traffic",
        machine(),
        serde_json::json!({"seconds": secs, "loop_packets": loop_packets, "pkt_size": 64, "runs": c.repetitions(), "quick": c.quick}),
    );
    let ns = |v: &[f64]| v.iter().map(|p| 1e9 / p).collect::<Vec<f64>>();
    let saving = |locked: &[f64], rcu: &[f64]| {
        ns(locked)
            .iter()
            .zip(ns(rcu))
            .map(|(l, r)| l - r)
            .collect::<Vec<f64>>()
    };
    res.metric("nsfleet_pps", metric("pps", Higher, s.auto.clone()))
        .metric("nsfleet_ring_pps", metric("pps", Higher, s.ring.clone()))
        .metric(
            "loop_ns_per_packet_rcu",
            metric("ns", Lower, ns(&s.loop_rcu)),
        )
        .metric(
            "loop_ns_per_packet_locked",
            metric("ns", Lower, ns(&s.loop_locked)),
        )
        .metric(
            "rcu_saving_loop_ns_per_packet",
            metric("ns", Neither, saving(&s.loop_locked, &s.loop_rcu)).with_target("reported"),
        )
        .metric(
            "rcu_saving_ring_ns_per_packet",
            metric("ns", Neither, saving(&s.ring_locked, &s.ring)),
        );
    let two = (Some("nsfleet_two_threads_pps"), &s.two[..]);
    versus(
        &mut res.metrics,
        "pps",
        two,
        (None, &s.auto),
        OursPerTheirs("two_threads_vs_one", Higher),
    )
    .target = Some(">= 1.6".into());
    if !s.trafgen.is_empty() {
        let m = &mut res.metrics;
        let trafgen = (Some("trafgen_pps"), &s.trafgen[..]);
        versus(
            m,
            "pps",
            (None, &s.auto),
            trafgen,
            OursPerTheirs("nsfleet_vs_trafgen", Higher),
        )
        .target = Some(">= 2".into());
        m.insert(
            "nsfleet_ring_vs_trafgen".into(),
            ratio(Higher, &s.ring, &s.trafgen),
        );
    }
    res
}

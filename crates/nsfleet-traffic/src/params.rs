//! A device's parameters and pktgen's commands, with one parser for every way they arrive.
//!
//! A command is one line, as pktgen's proc files take them:
//!
//! ```text
//! thread 0 add_device r1:eth0      # kpktgend_0
//! thread 0 rem_device_all
//! dev r1:eth0 count 10M            # the device's own file
//! dev r1:eth0 dst_min 10.0.0.2
//! device_list rcu                  # the ablation switch: rcu | locked
//! start | stop | reset             # pgctrl
//! ```
//!
//! Parsing checks every value; [`DeviceParams::check`] checks a device as a whole (a range
//! whose minimum is above its maximum, a rate and a ratep at once, ...).

use nsfleet_values as values;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::Ipv4Addr;

/// pktgen's `rate 300` means 300 Mbit/s.
const PKTGEN_BARE_RATE: Option<f64> = Some(1e6);

/// Smallest frame pktgen sends: 60 bytes and the 4-byte FCS, as pktgen counts `pkt_size`.
pub const MIN_PKT_SIZE: u16 = 64;
/// Ethernet's own maximum with a 1,500-byte MTU, FCS included.
pub const MAX_PKT_SIZE: u16 = 1518;
/// Most frames handed to a device in one burst.
pub const MAX_BURST: u32 = 256;

/// How frames reach the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// XDP live frames where the device and its frames allow it, the TX ring otherwise.
    #[default]
    Auto,
    /// AF_PACKET TX ring with PACKET_QDISC_BYPASS.
    Ring,
    /// BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES: one frame repeated per call.
    Xdp,
    /// Frames built and counted, never sent: the generator loop's own cost.
    Null,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Auto => "auto",
            Method::Ring => "ring",
            Method::Xdp => "xdp",
            Method::Null => "null",
        }
    }
}

/// Everything that says what one device sends. Addresses left `None` are filled in by
/// whoever knows the network (the fleet): the device's own address, the receiver's MAC.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceParams {
    /// Packets to send; 0 sends until stopped.
    pub count: u64,
    /// Frame size on the wire, FCS included (pktgen's convention).
    pub pkt_size: u16,
    pub burst: u32,
    /// Packets per second; 0 is as fast as possible (unless `rate_bps` is set).
    pub ratep: u64,
    /// Bits per second, turned into packets per second by `pkt_size` when sending starts.
    pub rate_bps: u64,
    pub dst_min: Option<Ipv4Addr>,
    pub dst_max: Option<Ipv4Addr>,
    pub src_min: Option<Ipv4Addr>,
    pub src_max: Option<Ipv4Addr>,
    pub udp_src_min: u16,
    pub udp_src_max: u16,
    pub udp_dst_min: u16,
    pub udp_dst_max: u16,
    /// Concurrent flows; 0 lets every packet take the next address and port combination.
    pub flows: u32,
    /// Packets a flow sends before it moves to the next combination.
    pub flowlen: u32,
    pub dst_mac: Option<[u8; 6]>,
    pub method: Method,
}

impl Default for DeviceParams {
    fn default() -> Self {
        DeviceParams {
            count: 1000,
            pkt_size: MIN_PKT_SIZE,
            burst: 64,
            ratep: 0,
            rate_bps: 0,
            dst_min: None,
            dst_max: None,
            src_min: None,
            src_max: None,
            udp_src_min: 9,
            udp_src_max: 9,
            udp_dst_min: 9,
            udp_dst_max: 9,
            flows: 0,
            flowlen: 1,
            dst_mac: None,
            method: Method::Auto,
        }
    }
}

/// One device parameter with its value, as `dev D <param> <value>` sets it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "param", content = "value", rename_all = "snake_case")]
pub enum Param {
    Count(u64),
    PktSize(u16),
    Burst(u32),
    /// Bits per second (pktgen's `rate`), turned into packets per second by `pkt_size`.
    Rate(u64),
    Ratep(u64),
    Dst(Ipv4Addr),
    DstMin(Ipv4Addr),
    DstMax(Ipv4Addr),
    Src(Ipv4Addr),
    SrcMin(Ipv4Addr),
    SrcMax(Ipv4Addr),
    UdpSrcMin(u16),
    UdpSrcMax(u16),
    UdpDstMin(u16),
    UdpDstMax(u16),
    Flows(u32),
    Flowlen(u32),
    DstMac([u8; 6]),
    Method(Method),
}

/// How the generator threads read their device lists: seed 004's before and after.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ListMode {
    /// A snapshot checked once per burst; no atomic operation per packet.
    #[default]
    Rcu,
    /// A mutex taken and released for every packet, as pktgen's if_lock was.
    Locked,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Command {
    Start,
    Stop,
    Reset,
    AddDevice { thread: usize, dev: String },
    RemDeviceAll { thread: usize },
    Set { dev: String, set: Param },
    DeviceList { mode: ListMode },
}

impl Command {
    /// One command line; `#` starts a comment. `Ok(None)` for a blank line.
    pub fn parse(line: &str) -> Result<Option<Command>, String> {
        let line = line.split('#').next().unwrap_or("").trim();
        let words: Vec<&str> = line.split_whitespace().collect();
        let cmd = match words.as_slice() {
            [] => return Ok(None),
            ["start"] | ["pgctrl", "start"] => Command::Start,
            ["stop"] | ["pgctrl", "stop"] => Command::Stop,
            ["reset"] | ["pgctrl", "reset"] => Command::Reset,
            ["thread", n, "add_device", dev] => Command::AddDevice {
                thread: thread_number(n)?,
                dev: device_name(dev)?,
            },
            ["thread", n, "rem_device_all"] => Command::RemDeviceAll {
                thread: thread_number(n)?,
            },
            ["dev", dev, param, value] => Command::Set {
                dev: device_name(dev)?,
                set: Param::parse(param, value)?,
            },
            ["device_list", mode] => Command::DeviceList {
                mode: match *mode {
                    "rcu" => ListMode::Rcu,
                    "locked" => ListMode::Locked,
                    m => return Err(format!("device_list takes rcu or locked, not {m:?}")),
                },
            },
            _ => return Err(format!(
                "expected `start`, `stop`, `reset`, `thread N add_device NODE:IF`, `thread N rem_device_all`, `dev NODE:IF PARAM VALUE` or `device_list rcu|locked`, got {line:?}"
            )),
        };
        Ok(Some(cmd))
    }

    /// Every command of a file, or the first bad line as `FILE:LINE: why`.
    pub fn parse_file(path: &str, text: &str) -> Result<Vec<Command>, String> {
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            match Command::parse(line) {
                Ok(Some(c)) => out.push(c),
                Ok(None) => {}
                Err(e) => return Err(format!("{path}:{}: {e}", i + 1)),
            }
        }
        Ok(out)
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Command::Start => write!(f, "start"),
            Command::Stop => write!(f, "stop"),
            Command::Reset => write!(f, "reset"),
            Command::AddDevice { thread, dev } => write!(f, "thread {thread} add_device {dev}"),
            Command::RemDeviceAll { thread } => write!(f, "thread {thread} rem_device_all"),
            Command::Set { dev, set } => write!(f, "dev {dev} {set}"),
            Command::DeviceList { mode } => write!(f, "device_list {mode:?}"),
        }
    }
}

fn thread_number(s: &str) -> Result<usize, String> {
    s.parse()
        .map_err(|_| format!("a thread is a number (0, 1, ...), not {s:?}"))
}

fn device_name(s: &str) -> Result<String, String> {
    match s.split_once(':') {
        Some((node, iface)) if !node.is_empty() && !iface.is_empty() => Ok(s.to_string()),
        _ => Err(format!("a device is NODE:IFACE, like r1:eth0, not {s:?}")),
    }
}

impl Param {
    pub fn parse(name: &str, v: &str) -> Result<Param, String> {
        let bad = |what: &str| format!("{name}: expected {what}, got {v:?}");
        let ip = || v.parse::<Ipv4Addr>().map_err(|_| bad("an IPv4 address"));
        let port = || v.parse::<u16>().map_err(|_| bad("a UDP port (0-65535)"));
        let small = || v.parse::<u32>().map_err(|_| bad("a whole number"));
        Ok(match name {
            "count" => Param::Count(values::count(v).map_err(|_| bad("a number, like 1000 or 10M"))?),
            "pkt_size" => {
                let n = v.parse::<u16>().map_err(|_| bad("a frame size in bytes"))?;
                if !(MIN_PKT_SIZE..=MAX_PKT_SIZE).contains(&n) {
                    return Err(bad(&format!("{MIN_PKT_SIZE} to {MAX_PKT_SIZE} bytes (FCS included)")));
                }
                Param::PktSize(n)
            }
            "burst" => match small()? {
                n @ 1..=MAX_BURST => Param::Burst(n),
                _ => return Err(bad(&format!("1 to {MAX_BURST}"))),
            },
            // A packet rate given to `rate` (1Mpps) means what it says.
            "rate" if v.to_ascii_lowercase().ends_with("pps") => Param::Ratep(
                values::packet_rate(v).map_err(|_| bad("packets per second, like 1Mpps"))?,
            ),
            "rate" => Param::Rate(values::rate_bps_bare(v, PKTGEN_BARE_RATE).map_err(|_| bad("a bit rate, like 100mbit or 1gbit, or a packet rate, like 1Mpps"))?),
            "ratep" => Param::Ratep(values::packet_rate(v).map_err(|_| bad("packets per second, like 250000 or 1Mpps"))?),
            "dst" => Param::Dst(ip()?),
            "dst_min" => Param::DstMin(ip()?),
            "dst_max" => Param::DstMax(ip()?),
            "src" => Param::Src(ip()?),
            "src_min" => Param::SrcMin(ip()?),
            "src_max" => Param::SrcMax(ip()?),
            "udp_src_min" => Param::UdpSrcMin(port()?),
            "udp_src_max" => Param::UdpSrcMax(port()?),
            "udp_dst_min" => Param::UdpDstMin(port()?),
            "udp_dst_max" => Param::UdpDstMax(port()?),
            "flows" => Param::Flows(small()?),
            "flowlen" => match small()? {
                0 => return Err(bad("at least 1 packet")),
                n => Param::Flowlen(n),
            },
            "dst_mac" => Param::DstMac(values::mac(v).map_err(|_| bad("a MAC address, like 02:00:00:00:00:01"))?),
            "method" => Param::Method(match v {
                "auto" => Method::Auto,
                "ring" => Method::Ring,
                "xdp" => Method::Xdp,
                "null" => Method::Null,
                _ => return Err(bad("auto, ring, xdp or null")),
            }),
            _ => return Err(format!(
                "unknown parameter {name:?}: expected count, pkt_size, burst, rate, ratep, dst, dst_min, dst_max, src, src_min, src_max, udp_src_min, udp_src_max, udp_dst_min, udp_dst_max, flows, flowlen, dst_mac or method"
            )),
        })
    }
}

impl fmt::Display for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = serde_json::to_value(self).unwrap_or_default();
        let name = v["param"].as_str().unwrap_or("?").to_string();
        let value = match self {
            Param::DstMac(m) => values::format_mac(m),
            Param::Method(m) => m.name().to_string(),
            Param::Rate(bps) => values::rate_text(*bps),
            _ => v["value"].to_string().trim_matches('"').to_string(),
        };
        write!(f, "{name} {value}")
    }
}

impl DeviceParams {
    pub fn apply(&mut self, p: &Param) {
        match *p {
            Param::Count(n) => self.count = n,
            Param::PktSize(n) => self.pkt_size = n,
            Param::Burst(n) => self.burst = n,
            Param::Rate(bps) => (self.rate_bps, self.ratep) = (bps, 0),
            Param::Ratep(n) => (self.ratep, self.rate_bps) = (n, 0),
            Param::Dst(a) => (self.dst_min, self.dst_max) = (Some(a), Some(a)),
            Param::DstMin(a) => self.dst_min = Some(a),
            Param::DstMax(a) => self.dst_max = Some(a),
            Param::Src(a) => (self.src_min, self.src_max) = (Some(a), Some(a)),
            Param::SrcMin(a) => self.src_min = Some(a),
            Param::SrcMax(a) => self.src_max = Some(a),
            Param::UdpSrcMin(n) => self.udp_src_min = n,
            Param::UdpSrcMax(n) => self.udp_src_max = n,
            Param::UdpDstMin(n) => self.udp_dst_min = n,
            Param::UdpDstMax(n) => self.udp_dst_max = n,
            Param::Flows(n) => self.flows = n,
            Param::Flowlen(n) => self.flowlen = n,
            Param::DstMac(m) => self.dst_mac = Some(m),
            Param::Method(m) => self.method = m,
        }
    }

    /// The checks a device needs as a whole before it may start. `label` names it.
    pub fn check(&self, label: &str) -> Result<(), String> {
        let range = |what: &str, lo: u32, hi: u32| {
            if lo > hi {
                Err(format!("{label}: {what}_min is above {what}_max"))
            } else {
                Ok(())
            }
        };
        let (Some(dmin), Some(dmax)) = (self.dst_min, self.dst_max) else {
            return Err(format!("{label}: no destination: set dst (like 10.0.0.2)"));
        };
        range("dst", dmin.into(), dmax.into())?;
        if let (Some(lo), Some(hi)) = (self.src_min, self.src_max) {
            range("src", lo.into(), hi.into())?;
        }
        range("udp_src", self.udp_src_min.into(), self.udp_src_max.into())?;
        range("udp_dst", self.udp_dst_min.into(), self.udp_dst_max.into())?;
        if self.method == Method::Xdp && self.varies() {
            return Err(format!(
                "{label}: method xdp repeats one frame per call; address or port ranges need method ring (or auto)"
            ));
        }
        Ok(())
    }

    /// Packets per second to keep to, 0 for as fast as possible (pktgen counts a packet's
    /// bits as `pkt_size * 8`).
    pub fn pps(&self) -> u64 {
        match (self.ratep, self.rate_bps) {
            (0, 0) => 0,
            (0, bps) => (bps / (self.pkt_size as u64 * 8)).max(1),
            (pps, _) => pps,
        }
    }

    /// Whether consecutive packets differ (any range wider than one value).
    pub fn varies(&self) -> bool {
        self.dst_min != self.dst_max
            || self.src_min != self.src_max
            || self.udp_src_min != self.udp_src_max
            || self.udp_dst_min != self.udp_dst_max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(Param::parse("rate", "300"), Ok(Param::Rate(300_000_000)));
        assert_eq!(Param::parse("count", "10M"), Ok(Param::Count(10_000_000)));
        assert_eq!(Param::parse("rate", "1Mpps"), Ok(Param::Ratep(1_000_000)));
        assert_eq!(
            Param::parse("rate", "1gbit"),
            Ok(Param::Rate(1_000_000_000))
        );
        assert!(Param::parse("dst_mac", "02:00:0a:00:00").is_err());
    }

    #[test]
    fn commands_round_trip_through_text() {
        let text = "thread 1 add_device r1:eth0\ndev r1:eth0 count 10M # ten million\n\ndev r1:eth0 dst_mac 02:00:00:00:00:01\ndev r1:eth0 method ring\nstart\n";
        let cmds = Command::parse_file("g.conf", text).unwrap();
        assert_eq!(cmds.len(), 5);
        for c in &cmds {
            let again = Command::parse(&c.to_string()).unwrap().unwrap();
            assert_eq!(&again, c, "{c}");
        }
    }

    #[test]
    fn every_example_command_file_parses() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let files = std::fs::read_dir(root).unwrap().flatten();
        for e in files.filter(|e| e.path().extension().is_some_and(|x| x == "gen")) {
            let text = std::fs::read_to_string(e.path()).unwrap();
            let cmds = Command::parse_file(&e.path().display().to_string(), &text).unwrap();
            assert!(!cmds.is_empty());
        }
    }

    #[test]
    fn bad_lines_say_where_and_what() {
        let e = Command::parse_file("g.conf", "start\ndev r1:eth0 pkt_size 20\n").unwrap_err();
        assert!(
            e.starts_with("g.conf:2: pkt_size: expected 64 to 1518"),
            "{e}"
        );
        let e = Command::parse("dev r1 count 5").unwrap_err();
        assert!(e.contains("NODE:IFACE"), "{e}");
        let e = Command::parse("dev r1:eth0 colour blue").unwrap_err();
        assert!(e.contains("unknown parameter \"colour\""), "{e}");
    }

    #[test]
    fn device_checks() {
        let mut p = DeviceParams::default();
        assert!(p.check("r1:eth0").unwrap_err().contains("no destination"));
        p.apply(&Param::DstMin("10.0.0.9".parse().unwrap()));
        p.apply(&Param::DstMax("10.0.0.2".parse().unwrap()));
        assert!(p
            .check("d")
            .unwrap_err()
            .contains("dst_min is above dst_max"));
        p.apply(&Param::Dst("10.0.0.2".parse().unwrap()));
        p.apply(&Param::UdpDstMax(100));
        p.apply(&Param::Method(Method::Xdp));
        assert!(p.check("d").unwrap_err().contains("method ring"));
        p.apply(&Param::Method(Method::Auto));
        assert!(p.check("d").is_ok());
    }
}

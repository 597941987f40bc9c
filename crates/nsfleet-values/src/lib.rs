//! nsfleet-values: the small values nsfleet reads from people, one parser per kind, shared
//! by the topology file, the traffic engine's commands and the command line:
//! addresses with prefixes (`10.0.0.1/24`), durations (`20ms`), percentages (`1%`), bit
//! rates (`100mbit`), packet rates (`1Mpps`), counts (`10M`), MAC addresses and seccomp's
//! actions and comparisons.
//!
//! Each parser returns what was expected on failure, in words a user can act on. This
//! crate is pure: no I/O, no kernel, no knowledge of where a value was written.

mod seccomp;

pub use seccomp::{SeccompAction, SeccompArg, SeccompCmp};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::str::FromStr;

/// An address with its prefix length: `10.0.0.1/24`, `fd00::1/64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpNet {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl IpNet {
    fn width(addr: IpAddr) -> u8 {
        if addr.is_ipv4() {
            32
        } else {
            128
        }
    }

    fn bits(&self) -> u128 {
        match self.addr {
            IpAddr::V4(a) => u32::from(a) as u128,
            IpAddr::V6(a) => u128::from(a),
        }
    }

    fn from_bits(v4: bool, bits: u128, prefix: u8) -> IpNet {
        let addr = if v4 {
            IpAddr::V4((bits as u32).into())
        } else {
            IpAddr::V6(bits.into())
        };
        IpNet { addr, prefix }
    }

    fn host_bits(&self) -> u32 {
        (Self::width(self.addr) - self.prefix) as u32
    }

    /// The network itself: host bits cleared.
    pub fn network(&self) -> IpNet {
        let h = self.host_bits();
        let mask = if h >= 128 { 0 } else { !0u128 << h };
        Self::from_bits(self.addr.is_ipv4(), self.bits() & mask, self.prefix)
    }

    pub fn contains(&self, other: &IpNet) -> bool {
        self.addr.is_ipv4() == other.addr.is_ipv4()
            && other.prefix >= self.prefix
            && IpNet {
                addr: other.addr,
                prefix: self.prefix,
            }
            .network()
                == self.network()
    }

    pub fn overlaps(&self, other: &IpNet) -> bool {
        self.contains(other) || other.contains(self)
    }

    /// How many host addresses the network has (network and broadcast excluded in IPv4
    /// networks larger than a /31), capped at `u64::MAX`.
    pub fn capacity(&self) -> u64 {
        let h = self.host_bits();
        let all = if h >= 64 { u64::MAX } else { 1u64 << h };
        if self.addr.is_ipv4() && h >= 2 {
            all - 2
        } else if !self.addr.is_ipv4() && h >= 1 {
            all - 1
        } else {
            all
        }
    }

    /// The `n`-th host address (from 0) with this network's prefix.
    pub fn host(&self, n: u64) -> IpNet {
        let skip = if self.addr.is_ipv4() && self.host_bits() < 2 {
            0
        } else {
            1
        };
        let bits = self.network().bits() + n as u128 + skip;
        Self::from_bits(self.addr.is_ipv4(), bits, self.prefix)
    }

    /// The `n`-th subnet of length `prefix` inside this network.
    pub fn subnet(&self, prefix: u8, n: u64) -> IpNet {
        let size = Self::width(self.addr) - prefix;
        let bits = self.network().bits() + ((n as u128) << size);
        Self::from_bits(self.addr.is_ipv4(), bits, prefix)
    }

    /// How many subnets of length `prefix` fit, capped at `u64::MAX`.
    pub fn subnets(&self, prefix: u8) -> u64 {
        if prefix < self.prefix {
            return 0;
        }
        let d = (prefix - self.prefix) as u32;
        if d >= 64 {
            u64::MAX
        } else {
            1 << d
        }
    }
}

impl std::fmt::Display for IpNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl FromStr for IpNet {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!("expected an address with a prefix length, like \"10.0.0.1/24\" or \"fd00::1/64\", got {s:?}")
        };
        let (a, p) = s.split_once('/').ok_or_else(bad)?;
        let addr: IpAddr = a.parse().map_err(|_| bad())?;
        let prefix: u8 = p.parse().map_err(|_| bad())?;
        if prefix > Self::width(addr) {
            return Err(bad());
        }
        Ok(IpNet { addr, prefix })
    }
}

/// A network prefix (`10.9.0.0/16`, `fd00::/64`): an address with its host bits set is
/// refused, as `ip route` and Docker refuse it, rather than guessed at.
pub fn network_prefix(s: &str) -> Result<IpNet, String> {
    let net: IpNet = s.parse()?;
    if net.network() != net {
        let n = net.network();
        return Err(format!(
            "expected a network prefix, got {s:?}: its host bits are set (the network is {n})"
        ));
    }
    Ok(net)
}

impl Serialize for IpNet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for IpNet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

fn split_unit(s: &str) -> (&str, &str) {
    let i = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    (&s[..i], s[i..].trim())
}

/// `20ms`, `1.5s`, `250us`, `100ns`.
pub fn duration_ns(s: &str) -> Result<u64, String> {
    let (num, unit) = split_unit(s.trim());
    let scale = match unit {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => f64::NAN,
    };
    match num.parse::<f64>() {
        Ok(v) if scale.is_finite() && v * scale <= 3600e9 => Ok((v * scale) as u64),
        _ => Err(format!(
            "expected a duration like \"20ms\", \"1.5s\" or \"250us\" (at most an hour), got {s:?}"
        )),
    }
}

/// `1%`, `0.5%`.
pub fn percent(s: &str) -> Result<f64, String> {
    let (num, unit) = split_unit(s.trim());
    match num.parse::<f64>() {
        Ok(v) if unit == "%" && (0.0..=100.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "expected a percentage from 0% to 100%, like \"1%\", got {s:?}"
        )),
    }
}

/// A bit rate in tc's units: `bit`, `kbit`, `mbit`, `gbit` (bits per second), `bps`,
/// `kbps`, `mbps`, `gbps` (bytes per second). A bare number is refused, as tc refuses it.
pub fn rate_bps(s: &str) -> Result<u64, String> {
    rate_bps_bare(s, None)
}

/// [`rate_bps`], where a bare number means `bare` bits per second (pktgen's `rate 300`
/// is 300 Mbit/s: `Some(1e6)`).
pub fn rate_bps_bare(s: &str, bare: Option<f64>) -> Result<u64, String> {
    let (num, unit) = split_unit(s.trim());
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" => bare.unwrap_or(f64::NAN),
        "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "bps" => 8.0,
        "kbps" => 8e3,
        "mbps" => 8e6,
        "gbps" => 8e9,
        _ => f64::NAN,
    };
    match num.parse::<f64>() {
        Ok(v) if scale.is_finite() && v * scale >= 8.0 && v * scale <= 1e13 => {
            Ok((v * scale) as u64)
        }
        _ => Err(format!(
            "expected a rate like \"100mbit\", \"1gbit\" or \"10mbps\" (bytes), got {s:?}"
        )),
    }
}

/// A rate in bits per second in the largest of tc's bit units that gives a whole number,
/// as it was most likely written: `100mbit`, `1500kbit`.
pub fn rate_text(bps: u64) -> String {
    let units = [
        (1_000_000_000, "gbit"),
        (1_000_000, "mbit"),
        (1_000, "kbit"),
    ];
    let (scale, unit) = (units.into_iter())
        .find(|(scale, _)| bps.is_multiple_of(*scale))
        .unwrap_or((1, "bit"));
    format!("{}{unit}", bps / scale)
}

/// A MAC address, six hex pairs: `02:00:00:00:00:01`.
pub fn mac(s: &str) -> Result<[u8; 6], String> {
    let bad = || format!("expected a MAC address like \"02:00:00:00:00:01\", got {s:?}");
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(bad());
    }
    let mut m = [0u8; 6];
    for (slot, p) in m.iter_mut().zip(&parts) {
        if p.len() != 2 {
            return Err(bad());
        }
        *slot = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    Ok(m)
}

/// A MAC address an interface may have: [`mac`], neither multicast nor all zeroes.
pub fn unicast_mac(s: &str) -> Result<[u8; 6], String> {
    match mac(s) {
        Ok(m) if m[0] & 1 == 0 && m != [0; 6] => Ok(m),
        _ => Err(format!(
            "expected a unicast MAC address like \"02:00:00:00:00:01\", got {s:?}"
        )),
    }
}

/// `02:00:0a:00:00:ff`: the form [`mac`] reads.
pub fn format_mac(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// `1000`, `10k`, `10M`, `2G`: powers of ten, as packet counts are spoken.
pub fn count(s: &str) -> Result<u64, String> {
    let bad = || format!("expected a number, like 1000 or 10M, got {s:?}");
    let (num, unit) = split_unit(s.trim());
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        _ => return Err(bad()),
    };
    match num.parse::<f64>() {
        Ok(n) if n >= 0.0 && n * mult <= u64::MAX as f64 => Ok((n * mult).round() as u64),
        _ => Err(bad()),
    }
}

/// A packet rate: a [`count`] per second, `pps` optional: `250000`, `250k`, `1Mpps`.
pub fn packet_rate(s: &str) -> Result<u64, String> {
    let l = s.trim().to_ascii_lowercase();
    match count(l.strip_suffix("pps").unwrap_or(&l)) {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!(
            "expected packets per second, like 250000 or 1Mpps, got {s:?}"
        )),
    }
}

/// A fraction as a percentage or a plain number: `10%` or `0.1`.
pub fn fraction(s: &str) -> Result<f64, String> {
    let (num, scale) = match s.trim().strip_suffix('%') {
        Some(p) => (p, 100.0),
        None => (s, 1.0),
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(v / scale),
        _ => Err(format!(
            "expected a fraction like \"10%\" or \"0.1\", got {s:?}"
        )),
    }
}

/// A size in bytes as Docker reads one (go-units' `RAMInBytes`, which containerlab's
/// `memory` and `shm-size` go through): a number and a binary unit, `b`, `k`, `m`, `g`,
/// `t` with an optional `i` and `b` in any case: `64m`, `64MB`, `1.5GiB`, `1048576`.
pub fn memory_bytes(s: &str) -> Result<u64, String> {
    let bad =
        || format!("expected a size like \"64M\", \"512MiB\" or \"2G\" (binary units), got {s:?}");
    let t = s.trim().to_ascii_lowercase();
    let t = t.strip_suffix('b').unwrap_or(&t);
    let t = t.strip_suffix('i').unwrap_or(t);
    let (num, unit) = split_unit(t.trim_end());
    let shift = match unit {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        "p" => 50,
        _ => return Err(bad()),
    };
    match num.trim().parse::<f64>() {
        Ok(n) if n >= 0.0 && n.is_finite() && n * (1u64 << shift) as f64 <= u64::MAX as f64 => {
            Ok((n * (1u64 << shift) as f64) as u64)
        }
        _ => Err(bad()),
    }
}

/// A size as [`memory_bytes`] reads it, in its largest whole binary unit: `64 MB`.
pub fn memory_text(bytes: u64) -> String {
    for (shift, unit) in [(40, "TB"), (30, "GB"), (20, "MB"), (10, "kB")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    if bytes >= 1 << 20 {
        return format!("{:.1} MB", bytes as f64 / (1u64 << 20) as f64);
    }
    format!("{bytes} bytes")
}

/// A list of CPUs as the kernel writes one (`0-3,6`, `1`): the CPUs in order, each once.
pub fn cpu_list(s: &str) -> Result<Vec<u32>, String> {
    let bad = || format!("expected CPUs like \"0-3\" or \"0,2\", got {s:?}");
    let mut cpus = std::collections::BTreeSet::new();
    for part in s.trim().split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b) = (a.trim().parse::<u32>(), b.trim().parse::<u32>());
        match (a, b) {
            (Ok(a), Ok(b)) if a <= b && b < 1 << 16 => cpus.extend(a..=b),
            _ => return Err(bad()),
        }
    }
    Ok(cpus.into_iter().collect())
}

/// CPUs as the kernel writes a list: runs as ranges, `0-3,6`.
pub fn cpu_list_text(cpus: &[u32]) -> String {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &c in cpus {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == c => *end = c,
            _ => runs.push((c, c)),
        }
    }
    (runs.iter())
        .map(|(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// CPUs' worth of time, as Docker's `--cpus` takes it (`1.5`, `0.25`), in thousandths
/// of a CPU: 1,500 and 250. At least a thousandth, as the kernel's quota is at least 1 ms.
pub fn cpus_milli(n: f64) -> Result<u64, String> {
    if (0.01..=4096.0).contains(&n) {
        Ok((n * 1000.0).round() as u64)
    } else {
        Err(format!(
            "expected a number of CPUs like 1.5 or 0.25 (from 0.01 to 4096), got {n}"
        ))
    }
}

/// The kernel's capabilities by number (linux/capability.h), without `CAP_`.
pub const CAPABILITIES: [&str; 41] = [
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
];

/// Every capability of [`CAPABILITIES`], a bit each.
pub const ALL_CAPABILITIES: u64 = (1 << CAPABILITIES.len()) - 1;

/// The bits of a capability as Docker takes its name: `NET_ADMIN`, `CAP_NET_ADMIN`, in
/// any case, or `ALL`.
pub fn capability(name: &str) -> Result<u64, String> {
    let upper = name.trim().to_ascii_uppercase();
    let bare = upper.strip_prefix("CAP_").unwrap_or(&upper);
    if bare == "ALL" {
        return Ok(ALL_CAPABILITIES);
    }
    match CAPABILITIES.iter().position(|c| *c == bare) {
        Some(bit) => Ok(1 << bit),
        None => Err(format!(
            "{name:?} is not a capability: expected a name of capabilities(7), as NET_ADMIN or CAP_NET_ADMIN, or ALL"
        )),
    }
}

/// The names of the capabilities in `bits`, as `capability` takes them.
pub fn capability_names(bits: u64) -> Vec<&'static str> {
    (CAPABILITIES.iter().enumerate())
        .filter(|(bit, _)| bits & (1 << bit) != 0)
        .map(|(_, name)| *name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_hand_out_hosts_and_subnets() {
        let p: IpNet = "10.0.0.0/16".parse().unwrap();
        assert_eq!(p.host(0).to_string(), "10.0.0.1/16");
        assert_eq!(p.host(255).to_string(), "10.0.1.0/16");
        assert_eq!(p.capacity(), 65534);
        let s = p.subnet(30, 2);
        assert_eq!(s.to_string(), "10.0.0.8/30");
        assert_eq!(s.host(1).to_string(), "10.0.0.10/30");
        assert!(p.overlaps(&"10.0.3.0/24".parse().unwrap()));
        assert!(!p.overlaps(&"10.1.0.0/24".parse().unwrap()));
        let v6: IpNet = "fd00::/64".parse().unwrap();
        assert_eq!(v6.host(0).to_string(), "fd00::1/64");
    }

    #[test]
    fn units() {
        assert_eq!(duration_ns("20ms"), Ok(20_000_000));
        assert_eq!(percent("0.5%"), Ok(0.5));
        assert_eq!(rate_bps("100mbit"), Ok(100_000_000));
        for written in ["100mbit", "1500kbit", "2gbit", "12345bit"] {
            assert_eq!(rate_text(rate_bps(written).unwrap()), written);
        }
        assert!(unicast_mac("03:00:00:00:00:01").is_err());
        assert_eq!(mac("02:00:0a:00:00:ff"), Ok([2, 0, 10, 0, 0, 255]));
        assert!(mac("02:00:0a:00:00").is_err());
        assert_eq!(count("10M"), Ok(10_000_000));
        assert_eq!(count("1.5k"), Ok(1500));
        assert!(count("7x").is_err());
        assert_eq!(rate_bps_bare("300", Some(1e6)), Ok(300_000_000));
        assert!(rate_bps("300").is_err());
        assert_eq!(packet_rate("1Mpps"), Ok(1_000_000));
        assert!(packet_rate("0").is_err());
        assert_eq!(fraction("10%"), Ok(0.1));
        assert!(duration_ns("20").is_err());
        assert_eq!(memory_bytes("64m"), Ok(64 << 20));
        assert_eq!(memory_bytes("64 MiB"), Ok(64 << 20));
        assert_eq!(memory_bytes("1.5GB"), Ok(3 << 29));
        assert_eq!(memory_bytes("4096"), Ok(4096));
        assert!(memory_bytes("64x").is_err() && memory_bytes("-1m").is_err());
        assert_eq!(memory_text(64 << 20), "64 MB");
        assert_eq!(cpu_list("3,0-1,1"), Ok(vec![0, 1, 3]));
        assert_eq!(cpu_list_text(&[0, 1, 2, 5]), "0-2,5");
        assert!(cpu_list("1-0").is_err() && cpu_list("a").is_err() && cpu_list("").is_err());
        assert_eq!(cpus_milli(1.5), Ok(1500));
        assert!(cpus_milli(0.0).is_err());
    }

    #[test]
    fn capabilities_are_read_as_docker_names_them() {
        assert_eq!(capability("NET_ADMIN"), Ok(1 << 12));
        assert_eq!(capability("cap_sys_admin"), Ok(1 << 21));
        assert_eq!(capability("ALL"), Ok(ALL_CAPABILITIES));
        assert!(capability("NET_ADMINN")
            .unwrap_err()
            .contains("not a capability"));
        assert_eq!(
            capability_names(1 << 12 | 1 << 13),
            ["NET_ADMIN", "NET_RAW"]
        );
    }
}

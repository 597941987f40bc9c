//! The small value types of a topology and their text forms: `10.0.0.1/24`, `20ms`, `1%`,
//! `100mbit`, `02:00:00:00:00:01`. Each parser returns what was expected on failure.

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

/// A link end's impairments, as tc netem applies them to what leaves the end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Impair {
    pub delay_ns: u64,
    pub jitter_ns: u64,
    /// Percentages, 0 to 100.
    pub loss: f64,
    pub duplicate: f64,
    pub corrupt: f64,
    /// Bits per second; 0 is unlimited.
    pub rate_bps: u64,
}

impl Impair {
    /// Sets one parameter from its topology or command-line form.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "delay" => self.delay_ns = duration_ns(value)?,
            "jitter" => self.jitter_ns = duration_ns(value)?,
            "loss" => self.loss = percent(value)?,
            "duplicate" => self.duplicate = percent(value)?,
            "corrupt" => self.corrupt = percent(value)?,
            "rate" => self.rate_bps = rate_bps(value)?,
            _ => {
                return Err(format!(
                    "unknown impairment {key:?}: expected delay, jitter, loss, duplicate, corrupt or rate"
                ))
            }
        }
        if self.jitter_ns > 0 && self.delay_ns == 0 {
            return Err("jitter needs a delay to vary around".into());
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        *self == Impair::default()
    }
}

impl std::fmt::Display for Impair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        let ms = |ns: u64| format!("{}ms", ns as f64 / 1e6);
        if self.delay_ns > 0 {
            parts.push(format!("delay {}", ms(self.delay_ns)));
        }
        if self.jitter_ns > 0 {
            parts.push(format!("jitter {}", ms(self.jitter_ns)));
        }
        for (k, v) in [
            ("loss", self.loss),
            ("duplicate", self.duplicate),
            ("corrupt", self.corrupt),
        ] {
            if v > 0.0 {
                parts.push(format!("{k} {v}%"));
            }
        }
        if self.rate_bps > 0 {
            parts.push(format!("rate {}", rate_text(self.rate_bps)));
        }
        if parts.is_empty() {
            parts.push("none".into());
        }
        write!(f, "{}", parts.join(" "))
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

/// tc's units: `bit`, `kbit`, `mbit`, `gbit` (bits per second), `bps`, `kbps`, `mbps`,
/// `gbps` (bytes per second).
pub fn rate_bps(s: &str) -> Result<u64, String> {
    let (num, unit) = split_unit(s.trim());
    let scale = match unit.to_ascii_lowercase().as_str() {
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
fn rate_text(bps: u64) -> String {
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

/// A unicast MAC address, `02:00:00:00:00:01`.
pub fn mac(s: &str) -> Result<[u8; 6], String> {
    let bad = || format!("expected a unicast MAC address like \"02:00:00:00:00:01\", got {s:?}");
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
    if m[0] & 1 != 0 || m == [0; 6] {
        return Err(bad());
    }
    Ok(m)
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
        assert!(mac("03:00:00:00:00:01").is_err());
        assert!(duration_ns("20").is_err());
    }
}

//! The small value types of a topology and their text forms: `10.0.0.1/24`, `20ms`, `1%`,
//! `100mbit`, `02:00:00:00:00:01`. Each parser returns what was expected on failure.

use serde::{Deserialize, Serialize};

use nsfleet_values::rate_text;
pub use nsfleet_values::{duration_ns, network_prefix, percent, rate_bps, unicast_mac, IpNet};

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

    /// Whether anything but `rate` is asked for: what only netem can do.
    pub fn needs_netem(&self) -> bool {
        let rate_only = Impair {
            rate_bps: self.rate_bps,
            ..Impair::default()
        };
        *self != rate_only
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

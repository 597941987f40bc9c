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
    /// The share of packets sent at once, ahead of those the delay holds back.
    #[serde(default)]
    pub reorder: f64,
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
            "reorder" => self.reorder = percent(value)?,
            _ => {
                return Err(format!(
                    "unknown impairment {key:?}: expected delay, jitter, loss, duplicate, corrupt, reorder or rate"
                ))
            }
        }
        Ok(())
    }

    /// What the parameters set together cannot do, once all are set (in any order).
    pub fn check(&self) -> Result<(), String> {
        if self.delay_ns == 0 {
            if self.jitter_ns > 0 {
                return Err("jitter needs a delay to vary around".into());
            }
            if self.reorder > 0.0 {
                return Err("reorder needs a delay: packets are reordered by sending some ahead of the delayed ones".into());
            }
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
            ("reorder", self.reorder),
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

#[cfg(test)]
mod tests {
    use super::Impair;

    #[test]
    fn what_needs_a_delay_is_checked_once_all_parameters_are_set_in_any_order() {
        let mut i = Impair::default();
        i.set("jitter", "5ms").unwrap();
        i.set("reorder", "25%").unwrap();
        assert!(i.check().unwrap_err().contains("jitter needs a delay"));
        i.set("delay", "10ms").unwrap();
        assert_eq!(i.check(), Ok(()));
        assert_eq!(i.to_string(), "delay 10ms jitter 5ms reorder 25%");
    }
}

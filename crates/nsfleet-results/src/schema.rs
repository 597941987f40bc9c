//! The result file: one scenario's run on one machine, as JSON.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The version of this format; files of another version are refused, not misread.
pub const FORMAT: u32 = 1;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Results {
    pub format: u32,
    /// `create`, `teardown`, `churn`, `routers`, `setns`.
    pub scenario: String,
    pub machine: Machine,
    /// What the scenario was asked to do (counts, runs, workers...).
    pub params: serde_json::Value,
    /// Every figure, by name; ratios against peers are metrics too.
    pub metrics: BTreeMap<String, Metric>,
    #[serde(default)]
    pub charts: Vec<Chart>,
}

/// What a result depends on besides the code: the kernel and the machine.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Machine {
    pub kernel: String,
    /// The CPU's model name: "QEMU TCG CPU ..." says the run was emulated (a kernel
    /// booted by `nsfleet vm`).
    #[serde(default)]
    pub cpu_model: String,
    pub cpus: usize,
    pub mem_total_bytes: u64,
    /// Kernel config options that change these results (CONFIG_PREEMPT, CONFIG_PREEMPT_RCU,
    /// CONFIG_RCU_NOCB_CPU...), where the running kernel's config is readable.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
}

/// Which way a metric improves. `Neither` marks a figure kept for the record (a count, a
/// peer's own rate) that `compare` does not judge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    Higher,
    Lower,
    Neither,
}

/// A figure over repetitions. A repetition that measured nothing is NaN (`null` in JSON).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Metric {
    pub unit: String,
    pub better: Better,
    #[serde(deserialize_with = "null_is_nan")]
    pub median: f64,
    #[serde(deserialize_with = "null_is_nan")]
    pub min: f64,
    #[serde(deserialize_with = "null_is_nan")]
    pub max: f64,
    /// One value per repetition.
    #[serde(deserialize_with = "nulls_are_nan")]
    pub samples: Vec<f64>,
    /// The target for it, as text ("≥ 5x"), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// The finite values of `v`, sorted.
fn sorted(v: &[f64]) -> Vec<f64> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    s.sort_by(f64::total_cmp);
    s
}

/// The median of the finite values of `v` (NaN for none).
pub fn median(v: &[f64]) -> f64 {
    let s = sorted(v);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// Percentiles 0, 1, ... 100 of the finite values of `v` (nearest rank); empty for none.
pub fn percentiles(v: &[f64]) -> Vec<f64> {
    let s = sorted(v);
    if s.is_empty() {
        return Vec::new();
    }
    (0..=100)
        .map(|p| s[(p * (s.len() - 1) + 50) / 100])
        .collect()
}

impl Metric {
    pub fn new(unit: &str, better: Better, samples: Vec<f64>) -> Self {
        let sorted = sorted(&samples);
        Metric {
            unit: unit.to_string(),
            better,
            median: median(&sorted),
            min: sorted.first().copied().unwrap_or(f64::NAN),
            max: sorted.last().copied().unwrap_or(f64::NAN),
            samples,
            target: None,
        }
    }

    pub fn with_target(mut self, target: &str) -> Self {
        self.target = Some(target.to_string());
        self
    }

    /// Half the range over the median: the run-to-run spread, as a fraction.
    pub fn spread(&self) -> f64 {
        (self.max - self.min) / 2.0 / self.median.abs().max(f64::MIN_POSITIVE)
    }
}

/// A line chart: several series over the same axes. Charts with the same `id` in several
/// result files are drawn as one, a series per file.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Chart {
    pub id: String,
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Axis {
    pub label: String,
    #[serde(default)]
    pub log: bool,
}

impl Axis {
    pub fn linear(label: &str) -> Self {
        Axis {
            label: label.to_string(),
            log: false,
        }
    }

    pub fn log(label: &str) -> Self {
        Axis {
            label: label.to_string(),
            log: true,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

impl Results {
    pub fn new(scenario: &str, machine: Machine, params: serde_json::Value) -> Self {
        Results {
            format: FORMAT,
            scenario: scenario.to_string(),
            machine,
            params,
            metrics: BTreeMap::new(),
            charts: Vec::new(),
        }
    }

    pub fn metric(&mut self, name: &str, m: Metric) -> &mut Self {
        self.metrics.insert(name.to_string(), m);
        self
    }

    /// Reads a result file; a file of another format version is an error.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let r: Results = serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}: not an nsfleet result file: {e}", path.display()))?;
        if r.format != FORMAT {
            anyhow::bail!(
                "{}: result format {} (this nsfleet reads {FORMAT})",
                path.display(),
                r.format
            );
        }
        Ok(r)
    }
}

// serde_json writes a NaN as `null`; read it back as NaN.
fn null_is_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

fn nulls_are_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    let v = Vec::<Option<f64>>::deserialize(d)?;
    Ok(v.into_iter().map(|x| x.unwrap_or(f64::NAN)).collect())
}

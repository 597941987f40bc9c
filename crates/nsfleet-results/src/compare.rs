//! Baseline against candidate, metric by metric: the verdict `git bisect run` needs.

use crate::schema::{Better, Metric, Results};
use std::fmt::Write;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Better,
    Worse,
    /// Within the threshold.
    Same,
    /// A figure kept for the record (`Better::Neither`), or not finite on one side.
    Unjudged,
    /// In the baseline, not in the candidate.
    Missing,
}

/// What a candidate's median is held against.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Against {
    /// The baseline's median: a move past the threshold is a verdict.
    #[default]
    Median,
    /// The baseline's range: a move is a verdict only past the baseline's worst run (or
    /// best) by more than the threshold, so the baseline's own run-to-run noise is none.
    Range,
}

#[derive(Clone, Debug)]
pub struct Row {
    pub metric: String,
    pub unit: String,
    pub base: f64,
    /// The baseline's runs' range (min, max).
    pub base_range: (f64, f64),
    pub cand: Option<f64>,
    /// Candidate over baseline, minus one (+0.25: 25% higher).
    pub change: f64,
    pub verdict: Verdict,
}

#[derive(Clone, Debug)]
pub struct Comparison {
    pub scenario: String,
    pub threshold: f64,
    pub against: Against,
    pub rows: Vec<Row>,
}

/// Compares medians. A judged metric regresses when it moved the wrong way by more than
/// `threshold` (0.10 for 10%); with `only` named, only those are judged (a bisection
/// after one figure). Fails when the two files are not the same scenario, or `only`
/// names a metric the baseline does not have.
pub fn compare(
    base: &Results,
    cand: &Results,
    threshold: f64,
    only: &[String],
) -> anyhow::Result<Comparison> {
    compare_against(base, cand, threshold, only, Against::Median)
}

/// [`compare`], each candidate median held `against` the baseline's median or range.
pub fn compare_against(
    base: &Results,
    cand: &Results,
    threshold: f64,
    only: &[String],
    against: Against,
) -> anyhow::Result<Comparison> {
    if base.scenario != cand.scenario {
        anyhow::bail!(
            "the baseline is a `{}` result, the candidate a `{}` one",
            base.scenario,
            cand.scenario
        );
    }
    // Figures of different sizes differ for that reason alone (the kernel's rate falls
    // as namespaces accumulate); only the number of repetitions may differ.
    let sized = |r: &Results| {
        let mut p = r.params.clone();
        if let Some(o) = p.as_object_mut() {
            o.remove("runs");
        }
        p
    };
    if sized(base) != sized(cand) {
        anyhow::bail!(
            "the two runs were asked different things, so their figures do not compare: \
             baseline {}, candidate {}",
            sized(base),
            sized(cand)
        );
    }
    if let Some(unknown) = only.iter().find(|m| !base.metrics.contains_key(*m)) {
        let names: Vec<&str> = base.metrics.keys().map(String::as_str).collect();
        anyhow::bail!(
            "--metric {unknown}: the baseline has no such figure; it has {}",
            names.join(", ")
        );
    }
    let judged = |name: &str| only.is_empty() || only.iter().any(|m| m == name);
    let rows = (base.metrics.iter())
        .map(|(name, b)| {
            let c = cand.metrics.get(name).map(|m| m.median);
            let change = c.map_or(f64::NAN, |c| c / b.median - 1.0);
            let verdict = match c {
                None => Verdict::Missing,
                Some(_) if b.better == Better::Neither || !change.is_finite() || !judged(name) => {
                    Verdict::Unjudged
                }
                Some(c) if against == Against::Range => judge_range(b, c, threshold),
                Some(_) => judge(b.better, change, threshold),
            };
            Row {
                metric: name.clone(),
                unit: b.unit.clone(),
                base: b.median,
                base_range: (b.min, b.max),
                cand: c,
                change,
                verdict,
            }
        })
        .collect();
    Ok(Comparison {
        scenario: base.scenario.clone(),
        threshold,
        against,
        rows,
    })
}

fn judge(better: Better, change: f64, threshold: f64) -> Verdict {
    let gain = if better == Better::Higher {
        change
    } else {
        -change
    };
    if gain < -threshold {
        Verdict::Worse
    } else if gain > threshold {
        Verdict::Better
    } else {
        Verdict::Same
    }
}

/// Worse only when `cand` is past the baseline's worst run by more than `threshold`,
/// better only past its best: with one run, the same verdicts as against the median.
fn judge_range(b: &Metric, cand: f64, threshold: f64) -> Verdict {
    let (worst, best) = if b.better == Better::Higher {
        (b.min, b.max)
    } else {
        (b.max, b.min)
    };
    let past = |bound: f64| judge(b.better, cand / bound - 1.0, threshold);
    match (past(worst), past(best)) {
        (Verdict::Worse, _) => Verdict::Worse,
        (_, Verdict::Better) => Verdict::Better,
        _ => Verdict::Same,
    }
}

impl Comparison {
    pub fn regressed(&self) -> bool {
        self.rows.iter().any(|r| r.verdict == Verdict::Worse)
    }

    /// Whether the candidate measured anything this comparison can judge: a run that
    /// failed half-way leaves metrics missing or not finite.
    pub fn measured(&self) -> bool {
        self.rows
            .iter()
            .any(|r| matches!(r.verdict, Verdict::Better | Verdict::Worse | Verdict::Same))
    }

    /// A table for a terminal.
    pub fn render(&self) -> String {
        let (against, bw) = match self.against {
            Against::Median => ("candidate against baseline, medians", 12),
            Against::Range => ("candidate's medians against baseline's ranges", 26),
        };
        let mut out = format!(
            "{}: {against} (threshold {:.0}%)\n",
            self.scenario,
            self.threshold * 100.0
        );
        let w = self
            .rows
            .iter()
            .map(|r| r.metric.len())
            .max()
            .unwrap_or(6)
            .max(6);
        let _ = writeln!(
            out,
            "  {:<w$} {:>bw$} {:>12} {:>9}  verdict",
            "metric", "baseline", "candidate", "change"
        );
        for r in &self.rows {
            let cand = r.cand.map_or("-".to_string(), num);
            let change = if r.change.is_finite() {
                format!("{:+.1}%", r.change * 100.0)
            } else {
                "-".to_string()
            };
            let verdict = match r.verdict {
                Verdict::Better => "better",
                Verdict::Worse => "REGRESSION",
                Verdict::Same => "same",
                Verdict::Unjudged => "",
                Verdict::Missing => "missing in candidate",
            };
            let _ = writeln!(
                out,
                "  {:<w$} {:>bw$} {:>12} {:>9}  {} {}",
                r.metric,
                self.base_figure(r),
                cand,
                change,
                verdict,
                if r.verdict == Verdict::Unjudged {
                    ""
                } else {
                    &r.unit
                }
            );
        }
        out
    }

    /// The baseline's median, with its range when that is what it is judged by.
    fn base_figure(&self, r: &Row) -> String {
        match self.against {
            Against::Median => num(r.base),
            Against::Range => {
                let (min, max) = r.base_range;
                format!("{} [{}-{}]", num(r.base), num(min), num(max))
            }
        }
    }
}

/// A figure with three significant digits or so, whatever its size.
pub(crate) fn num(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() {
        "-".to_string()
    } else if a >= 1e4 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.001 || a == 0.0 {
        format!("{v:.4}")
    } else {
        format!("{v:.2e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Machine, Metric};

    fn results(rate: f64, latency: f64) -> Results {
        let mut r = Results::new("create", Machine::default(), serde_json::json!({}));
        r.metric("rate", Metric::new("nodes/s", Better::Higher, vec![rate]));
        r.metric("latency", Metric::new("us", Better::Lower, vec![latency]));
        r.metric("count", Metric::new("nodes", Better::Neither, vec![7.0]));
        r
    }

    #[test]
    fn a_drop_beyond_the_threshold_is_a_regression_and_within_it_is_not() {
        let base = results(100.0, 10.0);
        let c = compare(&base, &results(95.0, 10.5), 0.10, &[]).unwrap();
        assert!(!c.regressed() && c.measured());
        let c = compare(&base, &results(80.0, 10.0), 0.10, &[]).unwrap();
        assert!(c.regressed());
        let c = compare(&base, &results(100.0, 12.0), 0.10, &[]).unwrap();
        assert!(c.regressed(), "latency up 20% is worse");
        let c = compare(&base, &results(150.0, 5.0), 0.10, &[]).unwrap();
        assert!(!c.regressed());
        assert!(c.rows.iter().any(|r| r.verdict == Verdict::Better));
    }

    #[test]
    fn nothing_finite_in_the_candidate_means_not_measured() {
        let c = compare(
            &results(100.0, 10.0),
            &results(f64::NAN, f64::NAN),
            0.1,
            &[],
        )
        .unwrap();
        assert!(!c.measured() && !c.regressed());
    }

    #[test]
    fn runs_of_different_sizes_do_not_compare_but_repetitions_may_differ() {
        let mut small = results(1.0, 1.0);
        small.params = serde_json::json!({"count": 200, "runs": 1});
        let mut big = results(1.0, 1.0);
        big.params = serde_json::json!({"count": 2000, "runs": 3});
        assert!(compare(&big, &small, 0.1, &[]).is_err());
        big.params = serde_json::json!({"count": 200, "runs": 3});
        assert!(compare(&big, &small, 0.1, &[]).is_ok());
    }

    #[test]
    fn only_the_named_metrics_are_judged() {
        let base = results(100.0, 10.0);
        // Both figures 50% worse; judged by the rate alone, the latency is only shown.
        let worse = results(50.0, 15.0);
        let c = compare(&base, &worse, 0.1, &["rate".into()]).unwrap();
        assert!(c.regressed());
        let row = |n: &str| c.rows.iter().find(|r| r.metric == n).unwrap().verdict;
        assert_eq!(row("rate"), Verdict::Worse);
        assert_eq!(row("latency"), Verdict::Unjudged);
        let e = compare(&base, &worse, 0.1, &["no_such".into()]).unwrap_err();
        assert!(e
            .to_string()
            .contains("--metric no_such: the baseline has no such figure"));
    }

    fn runs(rates: &[f64]) -> Results {
        let mut r = Results::new("routers", Machine::default(), serde_json::json!({}));
        let flat = Metric::new("x", Better::Higher, rates.to_vec());
        r.metric("flatness_vs_raw", flat);
        r.metric("down_s", Metric::new("s", Better::Lower, rates.to_vec()));
        r
    }

    fn verdict(c: &Comparison, metric: &str) -> Verdict {
        c.rows.iter().find(|r| r.metric == metric).unwrap().verdict
    }

    #[test]
    fn against_a_range_only_a_move_past_its_worst_run_by_the_threshold_is_a_verdict() {
        let base = runs(&[0.90, 1.00, 1.10]);
        let range = |cand: f64| {
            let c = compare_against(&base, &runs(&[cand]), 0.10, &[], Against::Range);
            c.unwrap()
        };
        // 0.85 is 15% under the median (a regression against it) but within 10% of the
        // baseline's worst run: its noise, not a bend.
        let median = compare(&base, &runs(&[0.85]), 0.10, &[]).unwrap();
        assert_eq!(verdict(&median, "flatness_vs_raw"), Verdict::Worse);
        assert_eq!(verdict(&range(0.85), "flatness_vs_raw"), Verdict::Same);
        assert_eq!(verdict(&range(0.80), "flatness_vs_raw"), Verdict::Worse);
        assert_eq!(verdict(&range(1.15), "flatness_vs_raw"), Verdict::Same);
        assert_eq!(verdict(&range(1.25), "flatness_vs_raw"), Verdict::Better);
        // Lower is better: the worst run is the highest.
        assert_eq!(verdict(&range(1.15), "down_s"), Verdict::Same);
        assert_eq!(verdict(&range(1.25), "down_s"), Verdict::Worse);
        assert_eq!(verdict(&range(0.80), "down_s"), Verdict::Better);
        assert!(range(0.80).render().contains("0.9000-1.10]"));
    }

    #[test]
    fn against_the_range_of_one_run_the_verdicts_are_the_medians() {
        for cand in [0.5, 0.95, 1.0, 1.05, 1.5] {
            let (base, cand) = (runs(&[1.0]), runs(&[cand]));
            let by_range = compare_against(&base, &cand, 0.1, &[], Against::Range).unwrap();
            let by_median = compare(&base, &cand, 0.1, &[]).unwrap();
            for (a, b) in by_range.rows.iter().zip(&by_median.rows) {
                assert_eq!(a.verdict, b.verdict, "{}", a.metric);
            }
        }
    }

    #[test]
    fn different_scenarios_do_not_compare() {
        let mut other = results(1.0, 1.0);
        other.scenario = "churn".into();
        assert!(compare(&results(1.0, 1.0), &other, 0.1, &[]).is_err());
    }
}

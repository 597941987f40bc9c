//! A scenario's record, in the three forms its readers want: a timeline for people (a line
//! per step as it ends), one JSON object for machines, and JUnit XML for CI systems'
//! test reporters (a test case per expectation; GitLab, Jenkins and GitHub's reporters
//! read it). Over `--repeat` runs, each expectation's times as median and range.
//!
//! Formats only: it runs nothing.

use crate::run::{Outcome, StepRecord};
use serde::Serialize;
use serde_json::{json, Value};

/// A step's line of the timeline: when it began, what, its verdict and what was seen.
pub fn timeline_line(s: &StepRecord) -> String {
    let verdict = match (s.kind, s.ok) {
        _ if s.seen == crate::run::INTERRUPTED => "STOPPED",
        ("do", true) => "done",
        ("expect", true) => "held",
        _ => "FAILED",
    };
    let mut line = format!(
        "{:>8.3}s  {:<6}  {:<44}  {verdict:<6}  {:>7.3}s",
        s.started_at, s.kind, s.text, s.took_s
    );
    if let (Some(t), Some(f)) = (s.since_fault_s, &s.fault) {
        line.push_str(&format!("  ({t:.3}s after {f})"));
    }
    if !s.seen.is_empty() {
        line.push_str(&format!("\n{:>13}{}", "", s.seen));
    }
    line
}

/// The timeline's head.
pub fn timeline_head() -> String {
    format!(
        "{:>9}  {:<6}  {:<44}  {:<6}  {:>8}",
        "AT", "STEP", "WHAT", "RESULT", "TOOK"
    )
}

/// One run's outcome as JSON: `{"ok", "steps": [...], "stopped", "left_in_place"}`.
pub fn run_json(o: &Outcome, restored: &[String]) -> Value {
    json!({
        "ok": o.ok(),
        "steps": o.steps,
        "stopped": o.stopped,
        "left_in_place": o.undo.left(),
        "restored": restored,
    })
}

/// Median and range of some seconds.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub runs: usize,
}

impl Spread {
    pub fn of(mut v: Vec<f64>) -> Option<Spread> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
            runs: n,
        })
    }
}

/// Over several runs: each expectation's time to hold (from its step's start) and, after
/// a fault, from the fault; only the runs where it held.
#[derive(Clone, Debug, Serialize)]
pub struct Times {
    pub index: usize,
    pub name: String,
    pub held: usize,
    pub of: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub took_s: Option<Spread>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since_fault_s: Option<Spread>,
}

pub fn times(runs: &[Outcome]) -> Vec<Times> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    let expectations = first.steps.iter().filter(|s| s.kind == "expect");
    expectations
        .map(|e| {
            let same: Vec<&StepRecord> = (runs.iter())
                .filter_map(|r| r.steps.iter().find(|s| s.index == e.index))
                .filter(|s| s.ok)
                .collect();
            Times {
                index: e.index,
                name: e.name.clone(),
                held: same.len(),
                of: runs.len(),
                took_s: Spread::of(same.iter().map(|s| s.took_s).collect()),
                since_fault_s: Spread::of(same.iter().filter_map(|s| s.since_fault_s).collect()),
            }
        })
        .collect()
}

/// The times for people: a line per expectation.
pub fn times_text(t: &[Times]) -> String {
    let mut out = String::new();
    for e in t {
        let spread = |s: &Option<Spread>| {
            s.as_ref().map_or("-".to_string(), |s| {
                format!("{:.3}s ({:.3}-{:.3})", s.median, s.min, s.max)
            })
        };
        out.push_str(&format!(
            "  step {:>2}  {:<44}  held {}/{}  time to hold {}  after the change {}\n",
            e.index + 1,
            e.name,
            e.held,
            e.of,
            spread(&e.took_s),
            spread(&e.since_fault_s)
        ));
    }
    out
}

/// JUnit XML of the runs: one test suite, a test case per expectation per run, a failure
/// with what was seen; the fleet's events as the suite's output.
pub fn junit(scenario: &str, runs: &[Outcome], events: &[Value]) -> String {
    let cases: Vec<(usize, &StepRecord)> = (runs.iter().enumerate())
        .flat_map(|(k, r)| {
            r.steps
                .iter()
                .filter(|s| s.kind == "expect" || !s.ok)
                .map(move |s| (k, s))
        })
        .collect();
    let failures = cases.iter().filter(|(_, s)| !s.ok).count();
    let time: f64 = runs.iter().flat_map(|r| &r.steps).map(|s| s.took_s).sum();
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    x.push_str(&format!(
        "<testsuites name=\"nsfleet scenario\" tests=\"{}\" failures=\"{failures}\" time=\"{time:.3}\">\n",
        cases.len()
    ));
    x.push_str(&format!(
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" time=\"{time:.3}\">\n",
        esc(scenario),
        cases.len()
    ));
    for (k, s) in &cases {
        let run = if runs.len() > 1 {
            format!(" (run {})", k + 1)
        } else {
            String::new()
        };
        let name = format!("step {}: {}{run}", s.index + 1, s.name);
        x.push_str(&format!(
            "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
            esc(scenario),
            esc(&name),
            s.took_s
        ));
        if s.ok {
            x.push_str(" />\n");
            continue;
        }
        x.push_str(&format!(
            ">\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n    </testcase>\n",
            esc(&s.seen),
            if s.kind == "do" {
                "step failed"
            } else {
                "expectation failed"
            },
            esc(&format!("{}\n{}", s.text, s.seen))
        ));
    }
    let lines: Vec<String> = events.iter().map(Value::to_string).collect();
    x.push_str(&format!(
        "    <system-out>{}</system-out>\n",
        esc(&lines.join("\n"))
    ));
    x.push_str("  </testsuite>\n</testsuites>\n");
    x
}

/// Text for XML's attributes and elements.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Characters XML 1.0 cannot hold at all.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn step(index: usize, kind: &'static str, ok: bool, took_s: f64) -> StepRecord {
        StepRecord {
            index,
            name: format!("s{index} <&>"),
            kind,
            text: "ping r1 10.0.0.2".into(),
            within_s: None,
            started_at: 0.0,
            took_s,
            ok,
            seen: "no answer".into(),
            since_fault_s: Some(took_s),
            fault: Some("link r1:eth1 down".into()),
            nodes: BTreeMap::new(),
        }
    }

    #[test]
    fn junit_has_a_case_per_expectation_and_a_failure_with_what_was_seen() {
        let run = Outcome {
            steps: vec![
                step(0, "do", true, 0.1),
                step(1, "expect", true, 1.0),
                step(2, "expect", false, 10.0),
            ],
            ..Outcome::default()
        };
        let x = junit("fail & heal", &[run], &[json!({"event": "link"})]);
        assert!(x.contains("tests=\"2\" failures=\"1\""), "{x}");
        assert!(x.contains("name=\"step 3: s2 &lt;&amp;&gt;\""), "{x}");
        assert!(
            x.contains("<failure message=\"no answer\" type=\"expectation failed\">"),
            "{x}"
        );
        assert!(x.contains("{&quot;event&quot;:&quot;link&quot;}"), "{x}");
    }

    #[test]
    fn times_over_runs_are_median_and_range_of_the_runs_that_held() {
        let runs: Vec<Outcome> = [1.0, 3.0, 2.0, 9.0]
            .iter()
            .map(|t| Outcome {
                steps: vec![step(0, "expect", *t < 5.0, *t)],
                ..Outcome::default()
            })
            .collect();
        let t = times(&runs);
        assert_eq!((t[0].held, t[0].of), (3, 4));
        assert_eq!(
            t[0].took_s,
            Some(Spread {
                median: 2.0,
                min: 1.0,
                max: 3.0,
                runs: 3
            })
        );
    }
}

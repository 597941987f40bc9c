//! The report: one self-contained HTML file (no network, no script from elsewhere) with a
//! metrics table and SVG charts per scenario, one column and one series per result file,
//! so that runs on two kernels or two configurations sit side by side. And the README's
//! table of ratios.

use crate::compare::num;
use crate::schema::{Chart, Results};
use crate::svg::{escape, line_chart};
use std::fmt::Write;

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th:first-child,td:first-child{text-align:left}.title{font-weight:600;text-anchor:middle}
.grid{stroke:#e4e4e4}.xtick{text-anchor:middle;font-size:11px}.ytick{text-anchor:end;font-size:11px}
.xlabel,.ylabel{text-anchor:middle;font-size:12px}.legend{font-size:12px}.spread{color:#888}
svg.chart{display:block;margin:1em 0;border:1px solid #eee}";

/// The HTML report of `files`, each a (label, results) pair; labels name the series.
pub fn report(files: &[(String, Results)]) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>nsfleet bench report</title><style>{STYLE}</style></head><body><h1>nsfleet bench report</h1>"
    );
    machines(&mut h, files);
    let mut scenarios: Vec<&str> = Vec::new();
    for (_, r) in files {
        if !scenarios.contains(&r.scenario.as_str()) {
            scenarios.push(&r.scenario);
        }
    }
    for sc in scenarios {
        let runs: Vec<&(String, Results)> =
            files.iter().filter(|(_, r)| r.scenario == sc).collect();
        let _ = write!(h, "<h2 id=\"{0}\">{0}</h2>", escape(sc));
        metrics(&mut h, &runs);
        for chart in merged_charts(&runs) {
            h.push_str(&chart);
        }
    }
    // Lets a headless browser (the tests) see that the page loaded and ran.
    h.push_str("<script>document.body.dataset.charts=document.querySelectorAll('svg.chart').length;</script></body></html>");
    h
}

fn machines(h: &mut String, files: &[(String, Results)]) {
    h.push_str("<table><tr><th>result</th><th>scenario</th><th>kernel</th><th>CPUs</th><th>memory</th><th>kernel config</th></tr>");
    for (label, r) in files {
        let m = &r.machine;
        let config: Vec<String> = m.config.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1} GiB</td><td>{}</td></tr>",
            escape(label),
            escape(&r.scenario),
            escape(&m.kernel),
            m.cpus,
            m.mem_total_bytes as f64 / (1u64 << 30) as f64,
            escape(&config.join(" "))
        );
    }
    h.push_str("</table>");
}

fn metrics(h: &mut String, runs: &[&(String, Results)]) {
    let mut names: Vec<&str> = Vec::new();
    for (_, r) in runs {
        for n in r.metrics.keys() {
            if !names.contains(&n.as_str()) {
                names.push(n);
            }
        }
    }
    h.push_str("<table><tr><th>metric (median, ± half the range)</th>");
    for (label, _) in runs {
        let _ = write!(h, "<th>{}</th>", escape(label));
    }
    h.push_str("<th>unit</th><th>target</th></tr>");
    for name in names {
        let any = runs.iter().find_map(|(_, r)| r.metrics.get(name));
        let _ = write!(h, "<tr><td>{}</td>", escape(name));
        for (_, r) in runs {
            match r.metrics.get(name) {
                Some(m) => {
                    let _ = write!(
                        h,
                        "<td>{} <span class=\"spread\">±{:.0}%</span></td>",
                        num(m.median),
                        m.spread() * 100.0
                    );
                }
                None => h.push_str("<td></td>"),
            }
        }
        let (unit, target) = any.map_or(("", ""), |m| {
            (m.unit.as_str(), m.target.as_deref().unwrap_or(""))
        });
        let _ = write!(
            h,
            "<td>{}</td><td>{}</td></tr>",
            escape(unit),
            escape(target)
        );
    }
    h.push_str("</table>");
}

/// Charts of the same id drawn once, with every file's series (named after the file when
/// there are several).
fn merged_charts(runs: &[&(String, Results)]) -> Vec<String> {
    let mut ids: Vec<&Chart> = Vec::new();
    for (_, r) in runs {
        for c in &r.charts {
            if !ids.iter().any(|k| k.id == c.id) {
                ids.push(c);
            }
        }
    }
    ids.into_iter()
        .map(|first| {
            let series: Vec<(String, Vec<(f64, f64)>)> = runs
                .iter()
                .flat_map(|(label, r)| {
                    let chart = r.charts.iter().find(|c| c.id == first.id);
                    chart.into_iter().flat_map(move |c| {
                        c.series.iter().map(move |s| {
                            let name = if runs.len() > 1 {
                                format!("{label}: {}", s.name)
                            } else {
                                s.name.clone()
                            };
                            (name, s.points.clone())
                        })
                    })
                })
                .collect();
            line_chart(&first.id, &first.title, &first.x, &first.y, &series)
        })
        .collect()
}

/// The README's results table: every ratio (unit `x`) and every figure with a target, of
/// every file.
pub fn markdown_table(files: &[(String, Results)]) -> String {
    let mut t = String::from(
        "| scenario | figure | median | runs' range | target |\n|---|---|---|---|---|\n",
    );
    let show = |v: f64, unit: &str| match unit {
        "x" => format!("{v:.2}x"),
        _ => format!("{} {unit}", num(v)),
    };
    for (_, r) in files {
        let listed = r
            .metrics
            .iter()
            .filter(|(_, m)| m.unit == "x" || m.target.is_some());
        for (name, m) in listed {
            let _ = writeln!(
                t,
                "| {} | {} | {} | {} - {} | {} |",
                r.scenario,
                name.replace('_', " "),
                show(m.median, &m.unit),
                show(m.min, &m.unit),
                show(m.max, &m.unit),
                m.target.as_deref().unwrap_or("")
            );
        }
    }
    if let Some((_, r)) = files.first() {
        let _ = writeln!(
            t,
            "\nKernel {}, {} CPUs, {:.0} GiB.",
            r.machine.kernel,
            r.machine.cpus,
            r.machine.mem_total_bytes as f64 / (1u64 << 30) as f64
        );
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Axis, Better, Machine, Metric, Series};

    fn run(kernel: &str, rate: f64) -> Results {
        let machine = Machine {
            kernel: kernel.into(),
            ..Machine::default()
        };
        let mut r = Results::new("routers", machine, serde_json::json!({}));
        r.metric(
            "vs_raw",
            Metric::new("x", Better::Higher, vec![1.0, 1.1]).with_target(">= 0.8"),
        );
        r.charts.push(Chart {
            id: "rate".into(),
            title: "rate vs count".into(),
            x: Axis::linear("routers"),
            y: Axis::linear("routers/s"),
            series: vec![Series {
                name: "nsfleet".into(),
                points: vec![(1000.0, rate), (2000.0, rate * 0.9)],
            }],
        });
        r
    }

    #[test]
    fn two_files_share_one_chart_with_a_series_each() {
        let html = report(&[
            ("a.json".into(), run("6.1", 500.0)),
            ("b.json".into(), run("6.18", 700.0)),
        ]);
        assert_eq!(html.matches("<svg class=\"chart\"").count(), 1);
        assert!(html.contains("a.json: nsfleet") && html.contains("b.json: nsfleet"));
        assert!(
            !html.contains("http://")
                || html.matches("http://").count()
                    == html.matches("xmlns=\"http://www.w3.org/2000/svg\"").count()
        );
    }

    #[test]
    fn the_readme_table_lists_ratios_with_targets() {
        let t = markdown_table(&[("a".into(), run("6.18", 1.0))]);
        assert!(
            t.contains("| routers | vs raw | 1.05x | 1.00x - 1.10x | >= 0.8 |"),
            "{t}"
        );
    }
}

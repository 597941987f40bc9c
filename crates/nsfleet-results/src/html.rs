//! The report: one self-contained HTML file (no network, no script from elsewhere) with a
//! metrics table and SVG charts per scenario, one column and one series per result file,
//! so that runs on two kernels or two configurations sit side by side. And the README's
//! table of ratios.

use crate::compare::num;
use crate::schema::{Better, Chart, Results};
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
            let mut html = line_chart(&first.id, &first.title, &first.x, &first.y, &series);
            // A rate of the very things counted on x: routers/s against routers.
            if first.y.label.strip_suffix("/s") == Some(first.x.label.as_str()) {
                html.push_str(&growth_table(&first.x.label, &series));
            }
            html
        })
        .collect()
}

/// Under a rate-against-count chart: each series' fitted growth (see [`crate::growth`]):
/// what the first item costs, what each one already made adds, and what that makes of
/// 50,000.
fn growth_table(items: &str, series: &[(String, Vec<(f64, f64)>)]) -> String {
    let fits: Vec<(&String, crate::growth::Growth)> = (series.iter())
        .filter_map(|(name, pts)| Some((name, crate::growth::fit(pts)?)))
        .collect();
    if fits.is_empty() {
        return String::new();
    }
    let mut t = format!(
        "<table class=\"growth\"><tr><th>fitted: the k-th of {0} costs a + b&middot;k</th><th>a: the first</th><th>b: added per 1,000 already made</th><th>R&sup2;</th><th>50,000 {0}, as fitted</th></tr>",
        escape(items)
    );
    for (name, g) in fits {
        let _ = write!(
            t,
            "<tr><td>{}</td><td>{} &micro;s</td><td>{} &micro;s</td><td>{:.3}</td><td>{} s</td></tr>",
            escape(name),
            num(g.first_s * 1e6),
            num(g.per_made_s * 1e9),
            g.r2,
            num(g.time_to(50_000.0))
        );
    }
    t.push_str("</table>");
    t
}

/// The README's results table. A scenario with one file gets a row per ratio (unit `x`)
/// and per figure with a target; a scenario with several files (one per kernel, say)
/// gets a table of its own with a column per file, every judged figure in it.
pub fn markdown_table(files: &[(String, Results)]) -> String {
    let mut scenarios: Vec<&str> = Vec::new();
    for (_, r) in files {
        if !scenarios.contains(&r.scenario.as_str()) {
            scenarios.push(&r.scenario);
        }
    }
    let of = |sc: &str| -> Vec<&(String, Results)> {
        files.iter().filter(|(_, r)| r.scenario == sc).collect()
    };
    let (single, several): (Vec<&str>, Vec<&str>) =
        scenarios.iter().partition(|sc| of(sc).len() == 1);
    let mut t = String::new();
    if !single.is_empty() {
        t.push_str(
            "| scenario | figure | median | runs' range | target |\n|---|---|---|---|---|\n",
        );
        for sc in &single {
            rows_of_one(&mut t, &of(sc)[0].1);
        }
        if let Some((_, r)) = files
            .iter()
            .find(|(_, r)| single.contains(&r.scenario.as_str()))
        {
            let _ = writeln!(t, "\n{}.", machine_line(r));
        }
    }
    for sc in several {
        if !t.is_empty() {
            t.push('\n');
        }
        side_by_side(&mut t, &of(sc));
    }
    t
}

/// A figure with its unit: `1.05x`, `2.3 s`.
fn shown(v: f64, unit: &str) -> String {
    match unit {
        "x" => format!("{v:.2}x"),
        _ => format!("{} {unit}", num(v)),
    }
}

fn rows_of_one(t: &mut String, r: &Results) {
    let listed = (r.metrics.iter()).filter(|(_, m)| m.unit == "x" || m.target.is_some());
    for (name, m) in listed {
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} - {} | {} |",
            r.scenario,
            name.replace('_', " "),
            shown(m.median, &m.unit),
            shown(m.min, &m.unit),
            shown(m.max, &m.unit),
            m.target.as_deref().unwrap_or("")
        );
    }
}

/// One scenario's runs in columns: medians, the runs' range below each.
fn side_by_side(t: &mut String, runs: &[&(String, Results)]) {
    let _ = write!(t, "| {} |", runs[0].1.scenario);
    for (label, r) in runs {
        let _ = write!(t, " {label}<br>{} |", r.machine.kernel);
    }
    t.push_str(" target |\n|---|");
    t.push_str(&"---|".repeat(runs.len() + 1));
    t.push('\n');
    let mut names: Vec<&str> = Vec::new();
    for (_, r) in runs {
        for (n, m) in &r.metrics {
            if compared(m) && !names.contains(&n.as_str()) {
                names.push(n);
            }
        }
    }
    names.sort_by_key(|n| natural(n));
    for name in names {
        let _ = write!(t, "| {} |", name.replace('_', " "));
        let mut target = "";
        for (_, r) in runs {
            match r.metrics.get(name) {
                Some(m) => {
                    target = m.target.as_deref().unwrap_or(target);
                    let _ = write!(
                        t,
                        " {} ({} - {}) |",
                        shown(m.median, &m.unit),
                        num(m.min),
                        num(m.max)
                    );
                }
                None => t.push_str(" |"),
            }
        }
        let _ = writeln!(t, " {target} |");
    }
    t.push('\n');
    for (label, r) in runs {
        let _ = writeln!(t, "- {label}: {}.", machine_line(r));
    }
}

/// Whether a figure goes into a side-by-side table: ratios, rates, times and what has a
/// target (memory and counts stay in the report's page).
fn compared(m: &crate::schema::Metric) -> bool {
    m.better != Better::Neither
        && (m.unit == "x" || m.unit == "s" || m.unit.ends_with("/s") || m.target.is_some())
}

/// A name's sort key with its numbers as numbers: `rate_at_500` before `rate_at_1000`.
fn natural(name: &str) -> (String, Vec<u64>) {
    let text: String = name.chars().filter(|c| !c.is_ascii_digit()).collect();
    let numbers = (name.split(|c: char| !c.is_ascii_digit()))
        .filter_map(|p| p.parse().ok())
        .collect();
    (text, numbers)
}

/// `Kernel 6.12.117+deb12-amd64, 2 CPUs (QEMU TCG CPU version 2.5+), 4 GiB`.
fn machine_line(r: &Results) -> String {
    let m = &r.machine;
    let cpu = if m.cpu_model.is_empty() {
        String::new()
    } else {
        format!(" ({})", m.cpu_model)
    };
    format!(
        "Kernel {}, {} CPUs{cpu}, {:.0} GiB",
        m.kernel,
        m.cpus,
        m.mem_total_bytes as f64 / (1u64 << 30) as f64
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Axis, Machine, Metric, Series};

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
    fn a_rate_against_its_count_gets_the_fitted_growth() {
        let html = report(&[("a".into(), run("6.18", 1000.0))]);
        assert!(
            html.contains("the k-th of routers costs a + b&middot;k"),
            "{html}"
        );
        assert!(html.contains("<td>nsfleet</td>"), "{html}");
        // Not under a rate against something else (workers, say).
        let mut r = run("6.18", 1000.0);
        r.charts[0].x = Axis::linear("workers");
        assert!(!report(&[("a".into(), r)]).contains("class=\"growth\""));
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
    fn runs_of_one_scenario_on_several_kernels_sit_side_by_side() {
        let t = markdown_table(&[
            ("routers-debian-6.1".into(), run("6.1.0-56-amd64", 1.0)),
            (
                "routers-debian-6.12".into(),
                run("6.12.117+deb12-amd64", 1.0),
            ),
        ]);
        assert!(
            t.starts_with("| routers | routers-debian-6.1<br>6.1.0-56-amd64 | routers-debian-6.12<br>6.12.117+deb12-amd64 | target |\n|---|---|---|---|\n"),
            "{t}"
        );
        assert!(
            t.contains("| vs raw | 1.05x (1.00 - 1.10) | 1.05x (1.00 - 1.10) | >= 0.8 |"),
            "{t}"
        );
        assert!(
            t.contains("- routers-debian-6.1: Kernel 6.1.0-56-amd64"),
            "{t}"
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

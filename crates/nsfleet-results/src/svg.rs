//! One kind of chart, drawn by hand as SVG: lines over two axes, linear or logarithmic,
//! with a legend. Rate-vs-count curves, latency distributions (as cumulative curves) and
//! memory over time are all this.

use crate::schema::Axis;
use std::fmt::Write;

const W: f64 = 720.0;
const H: f64 = 380.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 34.0;
const BOTTOM: f64 = 52.0;
const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

/// A scale from data to pixels along one axis.
struct Scale {
    lo: f64,
    hi: f64,
    /// Between linear ticks; `lo` and `hi` are multiples of it.
    step: f64,
    log: bool,
    /// Pixel range, in the direction values grow.
    from: f64,
    to: f64,
}

impl Scale {
    fn new(values: impl Iterator<Item = f64>, axis: &Axis, from: f64, to: f64) -> Self {
        let v: Vec<f64> = values
            .filter(|v| v.is_finite() && (!axis.log || *v > 0.0))
            .collect();
        let (mut lo, mut hi) = v
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
        if v.is_empty() {
            (lo, hi) = (0.0, 1.0);
        }
        let mut step = 1.0;
        if axis.log {
            (lo, hi) = (
                lo.log10().floor(),
                hi.log10().ceil().max(lo.log10().floor() + 1.0),
            );
        } else {
            // Quantities start at zero: a curve's height is then its size.
            if lo > 0.0 {
                lo = 0.0;
            }
            if hi <= lo {
                hi = lo + 1.0;
            }
            step = nice_step(hi - lo);
            (lo, hi) = ((lo / step).floor() * step, (hi / step).ceil() * step);
        }
        Scale {
            lo,
            hi,
            step,
            log: axis.log,
            from,
            to,
        }
    }

    fn px(&self, v: f64) -> f64 {
        let v = if self.log {
            v.max(f64::MIN_POSITIVE).log10()
        } else {
            v
        };
        self.from + (v - self.lo) / (self.hi - self.lo) * (self.to - self.from)
    }

    fn ticks(&self) -> Vec<f64> {
        if self.log {
            return (self.lo as i32..=self.hi as i32)
                .map(|k| 10f64.powi(k))
                .collect();
        }
        let n = ((self.hi - self.lo) / self.step).round() as i32;
        (0..=n).map(|i| self.lo + i as f64 * self.step).collect()
    }
}

/// A step of 1, 2 or 5 times a power of ten giving about five intervals over `range`.
fn nice_step(range: f64) -> f64 {
    let raw = range / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let m = raw / mag;
    mag * if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    }
}

fn label(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e4 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

pub(crate) fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// An SVG line chart of `series` (name, points), with its title, axes and legend.
pub(crate) fn line_chart(
    id: &str,
    title: &str,
    x: &Axis,
    y: &Axis,
    series: &[(String, Vec<(f64, f64)>)],
) -> String {
    let all = || series.iter().flat_map(|(_, p)| p.iter());
    let sx = Scale::new(all().map(|p| p.0), x, LEFT, W - RIGHT);
    let sy = Scale::new(all().map(|p| p.1), y, H - BOTTOM, TOP);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart" data-chart="{}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img"><title>{}</title>"#,
        escape(id),
        escape(title)
    );
    let _ = write!(
        s,
        r#"<text x="{}" y="20" class="title">{}</text>"#,
        W / 2.0,
        escape(title)
    );
    for t in sx.ticks() {
        let px = sx.px(t);
        let _ = write!(
            s,
            r#"<line x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{:.1}" class="grid"/><text x="{px:.1}" y="{:.1}" class="xtick">{}</text>"#,
            H - BOTTOM,
            H - BOTTOM + 16.0,
            label(t)
        );
    }
    for t in sy.ticks() {
        let py = sy.px(t);
        let _ = write!(
            s,
            r#"<line x1="{LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" class="grid"/><text x="{:.1}" y="{:.1}" class="ytick">{}</text>"#,
            W - RIGHT,
            LEFT - 6.0,
            py + 4.0,
            label(t)
        );
    }
    let _ = write!(
        s,
        r#"<text x="{:.1}" y="{:.1}" class="xlabel">{}{}</text><text x="14" y="{:.1}" class="ylabel" transform="rotate(-90 14 {:.1})">{}{}</text>"#,
        (LEFT + W - RIGHT) / 2.0,
        H - 12.0,
        escape(&x.label),
        if x.log { " (log)" } else { "" },
        (TOP + H - BOTTOM) / 2.0,
        (TOP + H - BOTTOM) / 2.0,
        escape(&y.label),
        if y.log { " (log)" } else { "" },
    );
    for (i, (name, points)) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let pts: Vec<String> = points
            .iter()
            .filter(|(a, b)| {
                a.is_finite() && b.is_finite() && (!x.log || *a > 0.0) && (!y.log || *b > 0.0)
            })
            .map(|&(a, b)| format!("{:.1},{:.1}", sx.px(a), sy.px(b)))
            .collect();
        let _ = write!(
            s,
            r#"<polyline class="series" points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
            pts.join(" ")
        );
        if pts.len() <= 12 {
            for p in &pts {
                let (cx, cy) = p.split_once(',').unwrap_or(("0", "0"));
                let _ = write!(s, r#"<circle cx="{cx}" cy="{cy}" r="3" fill="{color}"/>"#);
            }
        }
        let ly = TOP + 8.0 + 16.0 * i as f64;
        let _ = write!(
            s,
            r#"<rect x="{:.1}" y="{:.1}" width="12" height="3" fill="{color}"/><text x="{:.1}" y="{:.1}" class="legend">{}</text>"#,
            LEFT + 10.0,
            ly - 3.0,
            LEFT + 28.0,
            ly + 1.0,
            escape(name)
        );
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_data() {
        let s = Scale::new([3.0, 4870.0].into_iter(), &Axis::linear("x"), 0.0, 100.0);
        assert_eq!(s.ticks(), vec![0.0, 1000.0, 2000.0, 3000.0, 4000.0, 5000.0]);
        let n = Scale::new([-130.0, 960.0].into_iter(), &Axis::linear("x"), 0.0, 100.0);
        assert_eq!(n.ticks(), vec![-500.0, 0.0, 500.0, 1000.0]);
        let l = Scale::new([0.02, 37.0].into_iter(), &Axis::log("y"), 0.0, 100.0);
        assert_eq!(l.ticks(), vec![0.01, 0.1, 1.0, 10.0, 100.0]);
    }

    #[test]
    fn a_chart_has_a_line_per_series_and_escapes_names() {
        let svg = line_chart(
            "c",
            "a < b",
            &Axis::linear("n"),
            &Axis::linear("rate"),
            &[
                ("one".into(), vec![(1.0, 2.0), (2.0, 3.0)]),
                ("two & co".into(), vec![(1.0, 1.0)]),
            ],
        );
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("a &lt; b") && svg.contains("two &amp; co"));
    }
}

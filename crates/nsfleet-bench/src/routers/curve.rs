//! `bench routers` at its `--steps`: the rate-against-count curve of nsfleet's fake
//! routers, on veth ports and on macvlan ports, and of the raw loops doing the same
//! kernel work; and how flat each curve is.
//!
//! One run of it could not be trusted (issue 56): a step of 1,000 routers lasts under a
//! second, and the raw loop's own rate at 10,000 moved by a quarter between runs. So a
//! warm-up round comes first and is not recorded; then each round measures every step, in
//! step order, nsfleet and the raw loops alternated within each step; and every figure is
//! a median with its range. A step's flatness is its rate over the smallest step's, round
//! by round, for nsfleet and for the raw loop alike, and nsfleet's over the raw loop's
//! says how nsfleet bends against the kernel's own bend on this machine (1.0: exactly as
//! it does), which no absolute rate can.

use super::fake_routers;
use crate::{fig, metric, note, ratios, raw, versus, Common, Ratio};
use nsfleet::core::Fleet;
use nsfleet_results::{Axis, Better, Chart, Results, Series};

/// Every contender's samples at one count, one per round (NaN where a raw loop could not
/// run), so that round r of one step pairs with round r of another.
#[derive(Default, Clone)]
pub(super) struct Step {
    pub count: u64,
    nsfleet_up_s: Vec<f64>,
    nsfleet_down_s: Vec<f64>,
    user_cpu_share: Vec<f64>,
    kernel_per_router_bytes: Vec<f64>,
    rss_per_router_bytes: Vec<f64>,
    raw_up_s: Vec<f64>,
    raw_down_s: Vec<f64>,
    raw_macvlan_up_s: Vec<f64>,
    raw_macvlan_down_s: Vec<f64>,
    macvlan_up_s: Vec<f64>,
    macvlan_down_s: Vec<f64>,
    macvlan_kernel_per_router_bytes: Vec<f64>,
}

/// The warm-up's size at most: enough to load the modules, grow the slab caches and read
/// nsfleet into the page cache, little enough to cost seconds.
const WARM_UP: u64 = 1000;

/// Routers of each contender in the warm-up round: the smallest step, or [`WARM_UP`].
pub(super) fn warm_up_count(steps: &[u64]) -> u64 {
    steps.iter().min().map_or(0, |&n| n.min(WARM_UP))
}

/// A warm-up round, then `c.repetitions()` rounds of every step (`steps` ascending).
pub(super) fn measure(
    steps: &[u64],
    c: &Common,
    fleet: &Fleet,
    raw_fits: impl Fn(u64) -> bool,
) -> anyhow::Result<Vec<Step>> {
    // First-run costs (module loads, fresh slab pages, a cold page cache) would land on
    // the first step alone and bend the curve by themselves.
    let warm = warm_up_count(steps);
    note(&format!("warm-up: {warm} routers of each, not recorded"));
    round(&mut Step::at(warm), fleet, c.workers, true, raw_fits(warm))?;
    let mut measured: Vec<Step> = steps.iter().map(|&n| Step::at(n)).collect();
    let rounds = c.repetitions();
    for r in 0..rounds {
        for s in &mut measured {
            note(&format!("{} routers, round {}/{rounds}", s.count, r + 1));
            // The order flips round by round and holds across a round's steps: drift
            // through the run lands on nsfleet and the raw loop alike, at every step alike.
            let fits = raw_fits(s.count);
            round(s, fleet, c.workers, r % 2 == 0, fits)?;
        }
    }
    Ok(measured)
}

impl Step {
    fn at(count: u64) -> Self {
        Step {
            count,
            ..Step::default()
        }
    }
}

/// One round at `s.count`: nsfleet's two fleets, the raw loops before or after them.
fn round(
    s: &mut Step,
    fleet: &Fleet,
    workers: usize,
    nsfleet_first: bool,
    raw_fits: bool,
) -> anyhow::Result<()> {
    if !nsfleet_first {
        push_raw(s, fleet, raw_fits)?;
    }
    push_nsfleet(s, workers)?;
    if nsfleet_first {
        push_raw(s, fleet, raw_fits)?;
    }
    Ok(())
}

fn push_nsfleet(s: &mut Step, workers: usize) -> anyhow::Result<()> {
    let n = s.count as f64;
    let m = fake_routers(s.count, workers, "macvlan")?;
    s.macvlan_up_s.push(m.up_s);
    s.macvlan_down_s.push(m.down_s);
    s.macvlan_kernel_per_router_bytes.push(m.kernel_bytes / n);
    let b = fake_routers(s.count, workers, "veth")?;
    s.nsfleet_up_s.push(b.up_s);
    s.nsfleet_down_s.push(b.down_s);
    s.user_cpu_share.push(b.user_share);
    s.kernel_per_router_bytes.push(b.kernel_bytes / n);
    s.rss_per_router_bytes.push(b.rss / n);
    Ok(())
}

/// The raw loops' round; NaN for a loop that cannot run, to keep the rounds paired.
fn push_raw(s: &mut Step, fleet: &Fleet, fits: bool) -> anyhow::Result<()> {
    let none = (f64::NAN, f64::NAN);
    let (up, down) = if fits {
        raw::routers(fleet, s.count, false)?
    } else {
        none
    };
    s.raw_up_s.push(up);
    s.raw_down_s.push(down);
    // A reference, not a peer: a kernel without macvlan (CONFIG_MACVLAN) only loses it.
    let (up, down) = match fits.then(|| raw::routers(fleet, s.count, true)) {
        Some(Ok(times)) => times,
        Some(Err(e)) => {
            note(&format!("the raw macvlan loop could not run: {e:#}"));
            none
        }
        None => none,
    };
    s.raw_macvlan_up_s.push(up);
    s.raw_macvlan_down_s.push(down);
    Ok(())
}

/// Each curve: its metrics' prefix (`PREFIX_routers_per_s_at_N`) and its charts' series.
const CURVES: [(&str, &str); 4] = [
    ("nsfleet", "nsfleet"),
    ("raw", "raw loop, same kernel work"),
    ("nsfleet_macvlan", "nsfleet, macvlan ports"),
    ("raw_macvlan", "raw loop, macvlans"),
];

/// nsfleet's fleets, each with the raw loop doing its kernel work: (ports, nsfleet's
/// prefix, the raw loop's).
const PORTS: [(&str, &str, &str); 2] = [
    ("veth ports", "nsfleet", "raw"),
    ("macvlan ports", "nsfleet_macvlan", "raw_macvlan"),
];

/// Every step's figures, the flatness of every curve, and their charts.
pub(super) fn metrics(res: &mut Results, steps: &[Step]) {
    for s in steps {
        rate_metrics(res, s);
        cost_metrics(res, s);
    }
    let counts: Vec<u64> = steps.iter().map(|s| s.count).collect();
    let rates = curve_chart(res, &counts, "routers_per_s", f64::NAN);
    res.charts.push(Chart {
        id: "routers-rate".into(),
        title: "Fake routers: creation rate against the number built".into(),
        x: Axis::linear("routers"),
        y: Axis::linear("routers/s"),
        series: rates,
    });
    if counts.len() > 1 {
        flatness_metrics(res, &counts);
        let series = curve_chart(res, &counts, "flatness", 1.0);
        res.charts.push(Chart {
            id: "routers-flatness".into(),
            title: format!("Fake routers: rate over the rate at {}", counts[0]),
            x: Axis::linear("routers"),
            y: Axis::linear("x"),
            series,
        });
    }
}

fn rates(n: u64, times: &[f64]) -> Vec<f64> {
    times.iter().map(|s| n as f64 / s).collect()
}

/// Each fleet's rate, and its ratio to the raw veth pair's rate (which the first records).
fn rate_metrics(res: &mut Results, s: &Step) {
    use Better::*;
    let n = s.count;
    let raw = rates(n, &s.raw_up_s);
    let at = |what: &str| format!("{what}_at_{n}");
    for (ours, times, theirs, ratio, better, target) in [
        (
            "nsfleet_routers_per_s",
            &s.nsfleet_up_s,
            Some("raw_routers_per_s"),
            "nsfleet_vs_raw",
            Higher,
            Some(">= 0.8"),
        ),
        (
            "nsfleet_macvlan_routers_per_s",
            &s.macvlan_up_s,
            None,
            "nsfleet_macvlan_vs_raw",
            Higher,
            Some(">= 1.5"),
        ),
        (
            "raw_macvlan_routers_per_s",
            &s.raw_macvlan_up_s,
            None,
            "raw_macvlan_vs_raw",
            Neither,
            None,
        ),
    ] {
        let theirs = theirs.map(at);
        let theirs = (theirs.as_deref(), &raw[..]);
        let ratio = Ratio::OursPerTheirs(&at(ratio), better);
        let ours = (Some(&at(ours)[..]), &rates(n, times)[..]);
        versus(&mut res.metrics, "routers/s", ours, theirs, ratio).target =
            target.map(String::from);
    }
}

/// Teardown, CPU and memory at one step.
fn cost_metrics(res: &mut Results, s: &Step) {
    use Better::*;
    let at = |name: &str| format!("{name}_at_{}", s.count);
    let m = |unit, better, v: &[f64]| metric(unit, better, v.to_vec());
    for (name, better, v) in [
        (
            "nsfleet_macvlan_down_to_reclaimed_s",
            Lower,
            &s.macvlan_down_s,
        ),
        (
            "raw_macvlan_down_to_reclaimed_s",
            Neither,
            &s.raw_macvlan_down_s,
        ),
        ("nsfleet_down_to_reclaimed_s", Lower, &s.nsfleet_down_s),
        ("raw_down_to_reclaimed_s", Neither, &s.raw_down_s),
    ] {
        res.metric(&at(name), m("s", better, v));
    }
    for (name, v) in [
        (
            "kernel_per_router_bytes_macvlan",
            &s.macvlan_kernel_per_router_bytes,
        ),
        ("kernel_per_router_bytes", &s.kernel_per_router_bytes),
        ("supervisor_rss_per_router_bytes", &s.rss_per_router_bytes),
    ] {
        res.metric(&at(name), m("bytes", Lower, v));
    }
    let share: Vec<f64> = s.user_cpu_share.iter().map(|v| v * 100.0).collect();
    res.metric(
        &at("user_cpu_share"),
        metric("%", Lower, share).with_target("< 15"),
    );
}

/// What the flatness figures are held to.
const FLAT: &str = "1.0: bends as the kernel does; above: less";

/// At every step past the first, each curve's rate over its rate at the first, round by
/// round (`PREFIX_flatness_at_N`), and nsfleet's over its raw loop's
/// (`nsfleet_flatness_vs_raw_at_N`, `nsfleet_macvlan_flatness_vs_raw_macvlan_at_N`).
fn flatness_metrics(res: &mut Results, counts: &[u64]) {
    let Some((&first, rest)) = counts.split_first() else {
        return;
    };
    let rate = |res: &Results, who: &str, n: u64| {
        let m = res.metrics.get(&format!("{who}_routers_per_s_at_{n}"));
        m.map_or_else(Vec::new, |m| m.samples.clone())
    };
    for &n in rest {
        for (_, ours, theirs) in PORTS {
            let flat = |who| ratios(&rate(res, who, n), &rate(res, who, first));
            let (o, t) = (flat(ours), flat(theirs));
            let (ours_name, theirs_name) = (
                format!("{ours}_flatness_at_{n}"),
                format!("{theirs}_flatness_at_{n}"),
            );
            let relative = format!("{ours}_flatness_vs_{theirs}_at_{n}");
            versus(
                &mut res.metrics,
                "x",
                (Some(&ours_name), &o),
                (Some(&theirs_name), &t),
                Ratio::OursPerTheirs(&relative, Better::Higher),
            )
            .target = Some(FLAT.into());
        }
    }
}

/// A series per curve of the medians of `PREFIX_{what}_at_N`; `missing` where there is
/// no such metric (a flatness at the first count: 1 by definition).
fn curve_chart(res: &Results, counts: &[u64], what: &str, missing: f64) -> Vec<Series> {
    let point = |prefix: &str, n: u64| {
        let m = res.metrics.get(&format!("{prefix}_{what}_at_{n}"));
        (n as f64, m.map_or(missing, |m| m.median))
    };
    CURVES
        .iter()
        .map(|(prefix, name)| Series {
            name: name.to_string(),
            points: counts.iter().map(|&n| point(prefix, n)).collect(),
        })
        .collect()
}

/// The curves side by side for the terminal, per kind of ports: each step's rates and
/// flatness, nsfleet's and the raw loop's, medians [ranges] over the rounds.
pub(super) fn table(res: &Results, counts: &[u64]) -> String {
    let Some(&first) = counts.first() else {
        return String::new();
    };
    let cell = |name: String| match res.metrics.get(&name) {
        Some(m) => format!("{} [{}-{}]", fig(m.median), fig(m.min), fig(m.max)),
        None => "-".into(),
    };
    let row = |cells: [String; 6]| {
        let [a, b, c, d, e, f] = cells;
        format!("    {a:>8} {b:>22} {c:>22} {d:>22} {e:>22} {f:>22}\n")
    };
    let mut out = String::new();
    for (ports, ours, theirs) in PORTS {
        out += &format!("  {ports}: flatness = the rate at a step over the rate at {first}\n");
        let heads = ["routers", "nsfleet/s", "raw loop/s", "nsfleet flatness"];
        let [a, b, c, d] = heads.map(String::from);
        out += &row([a, b, c, d, "raw flatness".into(), "nsfleet/raw".into()]);
        for &n in counts {
            // At the first step each flatness is 1 by definition: no metric of it.
            let flat = |name: String| if n == first { "1".into() } else { cell(name) };
            out += &row([
                n.to_string(),
                cell(format!("{ours}_routers_per_s_at_{n}")),
                cell(format!("{theirs}_routers_per_s_at_{n}")),
                flat(format!("{ours}_flatness_at_{n}")),
                flat(format!("{theirs}_flatness_at_{n}")),
                flat(format!("{ours}_flatness_vs_{theirs}_at_{n}")),
            ]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step whose fleets took `nsfleet` seconds and raw loops `raw`, round by round
    /// (the same on either kind of ports).
    fn step(count: u64, nsfleet: &[f64], raw: &[f64]) -> Step {
        Step {
            nsfleet_up_s: nsfleet.to_vec(),
            macvlan_up_s: nsfleet.to_vec(),
            raw_up_s: raw.to_vec(),
            raw_macvlan_up_s: raw.to_vec(),
            ..Step::at(count)
        }
    }

    fn measured(steps: &[Step]) -> Results {
        let mut res = Results::new("routers", Default::default(), serde_json::json!({}));
        metrics(&mut res, steps);
        res
    }

    #[test]
    fn flatness_is_each_rounds_rate_over_the_first_steps_and_nsfleets_over_the_raw_loops() {
        // Round 1: nsfleet flat, the raw loop at half its rate; round 2: nsfleet at 0.8,
        // the raw loop (slow at 1,000 this time) flat.
        let res = measured(&[
            step(1000, &[1.0, 1.0], &[1.0, 2.0]),
            step(10_000, &[10.0, 12.5], &[20.0, 20.0]),
        ]);
        let samples = |name: &str| res.metrics[name].samples.clone();
        assert_eq!(samples("nsfleet_flatness_at_10000"), [1.0, 0.8]);
        assert_eq!(samples("raw_flatness_at_10000"), [0.5, 1.0]);
        assert_eq!(samples("nsfleet_flatness_vs_raw_at_10000"), [2.0, 0.8]);
        assert_eq!(
            samples("nsfleet_macvlan_flatness_vs_raw_macvlan_at_10000"),
            [2.0, 0.8]
        );
        let judged = |name: &str| res.metrics[name].better;
        assert_eq!(judged("nsfleet_flatness_vs_raw_at_10000"), Better::Higher);
        assert_eq!(judged("raw_macvlan_flatness_at_10000"), Better::Neither);
        assert!(!res.metrics.contains_key("nsfleet_flatness_at_1000"));
        let chart = res.charts.iter().find(|c| c.id == "routers-flatness");
        let points = &chart.unwrap().series[0].points;
        assert_eq!(points[0], (1000.0, 1.0));
        assert!((points[1].1 - 0.9).abs() < 1e-9, "{points:?}");
    }

    #[test]
    fn a_round_without_its_raw_loop_is_left_out_and_the_others_stay_paired() {
        let nan = f64::NAN;
        let res = measured(&[
            step(1000, &[1.0, 1.0, 1.0], &[1.0, 1.0, 1.0]),
            step(2000, &[2.0, 2.0, 2.5], &[nan, 4.0, 4.0]),
        ]);
        let m = &res.metrics["nsfleet_flatness_vs_raw_at_2000"];
        assert!(m.samples[0].is_nan());
        assert_eq!((m.min, m.max), (1.6, 2.0));
    }

    #[test]
    fn one_step_has_a_rate_and_no_flatness() {
        let res = measured(&[step(1000, &[1.0], &[1.0])]);
        assert!(res.metrics.contains_key("nsfleet_vs_raw_at_1000"));
        assert!(!res.metrics.keys().any(|k| k.contains("flatness")));
        assert_eq!(res.charts.len(), 1);
    }

    #[test]
    fn the_table_sets_each_curve_beside_its_raw_loops() {
        let res = measured(&[
            step(1000, &[1.0, 1.0], &[1.0, 2.0]),
            step(10_000, &[10.0, 12.5], &[20.0, 20.0]),
        ]);
        let t = table(&res, &[1000, 10_000]);
        assert!(t.contains("veth ports: flatness = the rate at a step over the rate at 1000"));
        assert!(t.contains("macvlan ports:"));
        let row = (t.lines()).find(|l| l.trim_start().starts_with("10000"));
        let cells: Vec<&str> = row.unwrap().split_whitespace().collect();
        // nsfleet/s, raw/s, then nsfleet's, the raw loop's and the relative flatness.
        assert_eq!(cells[1..3], ["900", "[800-1000]"]);
        assert_eq!(cells[5..7], ["0.9000", "[0.8000-1.00]"]);
        assert_eq!(cells[7..9], ["0.7500", "[0.5000-1.00]"]);
        assert_eq!(cells[9..11], ["1.40", "[0.8000-2.00]"]);
    }

    #[test]
    fn the_warm_up_is_the_smallest_step_up_to_a_thousand() {
        assert_eq!(warm_up_count(&[3000, 1000, 10_000]), 1000);
        assert_eq!(warm_up_count(&[200, 5000]), 200);
        assert_eq!(warm_up_count(&[5000]), 1000);
    }
}

//! A scenario run against a live fleet, step after step: faults made through the same
//! requests as `nsfleet link`, `impair`, `node`, `wait` and `apply`; expectations retried
//! until they hold or their `within` has passed, each timed from its step's start and from
//! the last fault before it. Everything the run changes is written down as it changes it
//! ([`Undo`]), so that an interrupted or finished run can say what it left and put it back.
//!
//! Never prints: what happens goes to the caller's [`Watch`] as it happens.

use crate::check::Shape;
use crate::file::{Scenario, Step, What};
use crate::probe::{self, Seen};
use crate::step::{Action, Target};
use nsfleet::control::NodeAction;
use nsfleet::topology::Impair;
use nsfleet_client::FleetRef;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How a run goes besides its file.
pub struct Options {
    pub fleet: FleetRef,
    pub seed: u64,
    /// How `apply` steps read their files: what nodes that name an image run, and the
    /// image store's folder.
    pub software: nsfleet::topology::Software,
    pub images: std::path::PathBuf,
}

/// What the caller is told as the run goes, and how it can stop it.
pub trait Watch {
    /// A step has begun.
    fn began(&mut self, _index: usize, _step: &Step) {}
    /// A step has ended.
    fn ended(&mut self, _record: &StepRecord) {}
    /// Waits `d`, or less when the run is to stop (a signal came): then `false`.
    fn pause(&mut self, d: Duration) -> bool;
}

/// One step as it went.
#[derive(Clone, Debug, Serialize)]
pub struct StepRecord {
    pub index: usize,
    pub name: String,
    /// "do" or "expect".
    pub kind: &'static str,
    /// The step's text: what it did (a random choice resolved) or expected.
    pub text: String,
    /// An expectation's bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub within_s: Option<f64>,
    /// Seconds after the run began.
    pub started_at: f64,
    pub took_s: f64,
    pub ok: bool,
    /// What was seen: a fault made, an expectation's evidence, or why it failed.
    pub seen: String,
    /// For an expectation that held after a change of the fleet (a fault, or its
    /// repair): the seconds from that change's end to the expectation holding, and the
    /// change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since_fault_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<String>,
    /// For an expectation on several nodes (a pattern): when it held on each, in
    /// seconds after the step's start.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub nodes: BTreeMap<String, f64>,
}

/// A run's outcome: every step that ran, whether it was cut short, and what it changed
/// that is still changed.
#[derive(Debug, Default)]
pub struct Outcome {
    pub steps: Vec<StepRecord>,
    /// A `do` step failed (the rest did not run), or a signal stopped the run.
    pub stopped: Option<String>,
    pub undo: Undo,
}

impl Outcome {
    /// Every expectation held and every step ran.
    pub fn ok(&self) -> bool {
        self.stopped.is_none() && self.steps.iter().all(|s| s.ok)
    }
}

/// What a run changed, as it was before: put back by [`Undo::restore`].
#[derive(Debug, Default)]
pub struct Undo {
    /// Each link end whose cable it pulled or plugged, and whether it was up.
    cables: BTreeMap<(String, String), bool>,
    /// Each end whose impairment it changed, and the one it had.
    impairments: BTreeMap<(String, String), Option<Impair>>,
    /// Each node it stopped or paused, and what undoes that.
    nodes: BTreeMap<String, NodeAction>,
    /// The cables partitions pulled, for `heal`.
    partitioned: Vec<(String, String)>,
    /// Files applied: not undone (the lab's own file applied puts it back).
    pub applied: Vec<String>,
}

impl Undo {
    /// What is still changed, for people: "cable r1:eth1 pulled", ...
    pub fn left(&self) -> Vec<String> {
        let cables = (self.cables.iter()).map(|((n, i), up)| {
            format!("cable {n}:{i} {}", if *up { "pulled" } else { "plugged" })
        });
        let imps = (self.impairments.keys()).map(|(n, i)| format!("impairment of {n}:{i} changed"));
        let nodes = (self.nodes.iter()).map(|(n, a)| {
            format!(
                "node {n} {}",
                if *a == NodeAction::Start {
                    "stopped"
                } else {
                    "paused"
                }
            )
        });
        let applied = (self.applied.iter())
            .map(|f| format!("{f} applied (not undone: apply the lab's own file)"));
        cables.chain(imps).chain(nodes).chain(applied).collect()
    }

    /// Everything put back as it was; what was put back, and what could not be.
    pub fn restore(&mut self, fleet: &FleetRef) -> (Vec<String>, Vec<String>) {
        let (mut done, mut failed) = (Vec::new(), Vec::new());
        let mut say = |what: String, r: anyhow::Result<()>| match r {
            Ok(()) => done.push(what),
            Err(e) => failed.push(format!("{what}: {e:#}")),
        };
        for (node, undo) in std::mem::take(&mut self.nodes) {
            say(
                format!("node {node} {}", undo.done()),
                node_action(fleet, &node, undo),
            );
        }
        for ((n, i), imp) in std::mem::take(&mut self.impairments) {
            let r = nsfleet_client::impair::set(fleet, &n, &i, imp).map(drop);
            say(format!("impairment of {n}:{i} put back"), r);
        }
        for ((n, i), up) in std::mem::take(&mut self.cables) {
            let word = if up { "plugged back" } else { "pulled again" };
            say(
                format!("cable {n}:{i} {word}"),
                cable(fleet, &n, &i, Some(up)).map(drop),
            );
        }
        self.partitioned.clear();
        (done, failed)
    }
}

/// Runs `sc` on the fleet, whose shape is `shape` as it starts: every step, in order,
/// until a `do` step fails or `watch` says stop. Expectations that fail do not stop it.
pub fn run(sc: &Scenario, opts: &Options, shape: Shape, watch: &mut dyn Watch) -> Outcome {
    let mut r = Runner {
        sc,
        opts,
        began: Instant::now(),
        last_change: None,
        random: Random(opts.seed),
        shape: Some(shape),
        out: Outcome::default(),
    };
    for (index, step) in sc.steps.iter().enumerate() {
        if !watch.pause(Duration::ZERO) {
            r.out.stopped = Some(INTERRUPTED.into());
            break;
        }
        if let Some(at) = step.at {
            let wait = at.saturating_sub(r.began.elapsed());
            if !wait.is_zero() && !watch.pause(wait) {
                r.out.stopped = Some(INTERRUPTED.into());
                break;
            }
        }
        watch.began(index, step);
        let record = r.step(index, step, watch);
        watch.ended(&record);
        let failed_do = !record.ok && record.kind == "do";
        let interrupted = record.seen == INTERRUPTED;
        r.out.steps.push(record);
        if interrupted {
            r.out.stopped = Some(INTERRUPTED.into());
            break;
        }
        if failed_do {
            r.out.stopped = Some(format!(
                "step {} failed: the steps after it did not run",
                index + 1
            ));
            break;
        }
    }
    r.out
}

/// What a step that a signal cut short saw, and why a run stopped.
pub const INTERRUPTED: &str = "interrupted";

struct Runner<'a> {
    sc: &'a Scenario,
    opts: &'a Options,
    began: Instant,
    /// The last change made (a fault or its repair), when it ended, for recovery times.
    last_change: Option<(Instant, String)>,
    random: Random,
    /// The fleet's shape, asked once (a big fleet's is megabytes) and again after an
    /// `apply` changed it.
    shape: Option<Shape>,
    out: Outcome,
}

impl Runner<'_> {
    /// The fleet's shape now.
    fn shape(&mut self) -> anyhow::Result<&Shape> {
        if self.shape.is_none() {
            self.shape = Some(Shape::of(&self.opts.fleet)?);
        }
        Ok(self.shape.as_ref().expect("just asked"))
    }

    fn step(&mut self, index: usize, step: &Step, watch: &mut dyn Watch) -> StepRecord {
        let start = Instant::now();
        let mut rec = StepRecord {
            index,
            name: step.name.clone(),
            kind: "do",
            text: String::new(),
            within_s: None,
            started_at: (start - self.began).as_secs_f64(),
            took_s: 0.0,
            ok: true,
            seen: String::new(),
            since_fault_s: None,
            fault: None,
            nodes: BTreeMap::new(),
        };
        match &step.what {
            What::Do(action) => {
                let (text, result) = self.act(action, watch);
                rec.text = text;
                match result {
                    Ok(seen) => rec.seen = seen,
                    Err(e) => (rec.ok, rec.seen) = (false, format!("{e:#}")),
                }
                if rec.ok && changes_the_fleet(action) {
                    self.last_change = Some((Instant::now(), rec.text.clone()));
                }
            }
            What::Expect {
                expect,
                within,
                output,
                window,
            } => {
                rec.kind = "expect";
                rec.text = step.text.clone();
                rec.within_s = Some(within.as_secs_f64());
                let fleet = &self.opts.fleet;
                let shape = self.shape().map_err(|e| format!("{e:#}"));
                let seen = match shape {
                    Ok(shape) => {
                        let how = probe::How {
                            within: *within,
                            output: output.as_ref(),
                            window: *window,
                        };
                        probe::expect(fleet, shape, expect, &how, start, watch)
                    }
                    Err(e) => Seen::failed(e),
                };
                (rec.ok, rec.seen, rec.nodes) = (seen.ok, seen.said, seen.nodes);
                if let (true, Some((at, fault))) = (rec.ok, &self.last_change) {
                    let held = start + Duration::from_secs_f64(seen.after_s);
                    rec.since_fault_s = Some(held.saturating_duration_since(*at).as_secs_f64());
                    rec.fault = Some(fault.clone());
                }
            }
        }
        rec.took_s = start.elapsed().as_secs_f64();
        rec
    }

    /// Does `a`: its text (a random choice resolved), and what was seen or why not.
    fn act(&mut self, a: &Action, watch: &mut dyn Watch) -> (String, anyhow::Result<String>) {
        let fleet = &self.opts.fleet;
        match a {
            Action::Link { target, up } => match self.end(target) {
                Ok((n, i)) => {
                    let text = format!("link {n}:{i} {}", if *up { "up" } else { "down" });
                    (text, self.set_cable(&n, &i, *up))
                }
                Err(e) => ("link".into(), Err(e)),
            },
            Action::Impair { target, impair } => match self.end(target) {
                Ok((n, i)) => {
                    let text = match impair {
                        Some(imp) => format!("impair {n}:{i} {imp}"),
                        None => format!("impair {n}:{i} --clear"),
                    };
                    (text, self.set_impairment(&n, &i, *impair))
                }
                Err(e) => ("impair".into(), Err(e)),
            },
            Action::Node { node, action } => {
                let text = format!("node {node} {}", action.name());
                (text, self.node(node, *action))
            }
            Action::Wait { until, bound } => {
                let w = nsfleet_client::ready::Wait {
                    until: *until,
                    bound: *bound,
                };
                // Stopped by a signal as a sleep is, not at the wait's end.
                let mut stop = || !watch.pause(Duration::ZERO);
                let r = nsfleet_client::ready::wait_or_stop(fleet, w, true, &mut stop);
                let r = r.and_then(|r| match r {
                    Ok(ready) => Ok(format!("{} ({} nodes checked)", until.name(), ready.of)),
                    Err(nsfleet_client::ready::NotReady::Stopped) => {
                        Err(anyhow::anyhow!(INTERRUPTED))
                    }
                    Err(not) => Err(anyhow::anyhow!("{not}")),
                });
                (format!("wait {}", until.name()), r)
            }
            Action::Sleep(d) => {
                let r = match watch.pause(*d) {
                    true => Ok(String::new()),
                    false => Err(anyhow::anyhow!(INTERRUPTED)),
                };
                (format!("sleep {}", d.as_secs_f64()), r)
            }
            Action::Partition { a, b } => (
                format!("partition {} {}", a.join(","), b.join(",")),
                self.partition(a, b),
            ),
            Action::Heal => ("heal".into(), self.heal()),
            Action::Apply(file) => (format!("apply {file}"), self.apply(file)),
        }
    }

    /// A named end, or one chosen by the seed among those that match.
    fn end(&mut self, t: &Target) -> anyhow::Result<(String, String)> {
        match t {
            Target::End { node, iface } => Ok((node.clone(), iface.clone())),
            Target::Random { node, iface } => {
                let ends = self.shape()?.ends_matching(node, iface);
                match ends.len() {
                    0 => anyhow::bail!(
                        "random({node}:{iface}) matches no interface of the fleet now"
                    ),
                    n => Ok(ends[self.random.below(n)].clone()),
                }
            }
        }
    }

    fn set_cable(&mut self, node: &str, iface: &str, up: bool) -> anyhow::Result<String> {
        let fleet = &self.opts.fleet;
        let before = cable(fleet, node, iface, None)?;
        let key = (node.to_string(), iface.to_string());
        let was = *self.out.undo.cables.entry(key.clone()).or_insert(before.up);
        if was == up {
            self.out.undo.cables.remove(&key);
        }
        let after = cable(fleet, node, iface, Some(up))?;
        Ok(match (after.up, after.far_carrier) {
            (false, Some(false)) => "pulled: the peer has no carrier".into(),
            (false, _) => "pulled".into(),
            (true, Some(true)) => "plugged: the peer has carrier".into(),
            (true, _) => "plugged".into(),
        })
    }

    fn set_impairment(
        &mut self,
        node: &str,
        iface: &str,
        imp: Option<Impair>,
    ) -> anyhow::Result<String> {
        let fleet = &self.opts.fleet;
        let before = cable(fleet, node, iface, None)?.impair;
        let key = (node.to_string(), iface.to_string());
        let was = *self
            .out
            .undo
            .impairments
            .entry(key.clone())
            .or_insert(before);
        let now = nsfleet_client::impair::set(fleet, node, iface, imp)?;
        if was == now {
            self.out.undo.impairments.remove(&key);
        }
        Ok(now.map_or_else(|| "no impairment".into(), |i| i.to_string()))
    }

    fn node(&mut self, node: &str, action: NodeAction) -> anyhow::Result<String> {
        node_action(&self.opts.fleet, node, action)?;
        let nodes = &mut self.out.undo.nodes;
        match action {
            // Stopped, whatever it was (a paused node too): started is what undoes it.
            NodeAction::Stop => {
                nodes.insert(node.into(), NodeAction::Start);
            }
            NodeAction::Pause => {
                nodes.entry(node.into()).or_insert(NodeAction::Resume);
            }
            NodeAction::Start | NodeAction::Restart | NodeAction::Resume => {
                nodes.remove(node);
            }
        }
        Ok(action.done().into())
    }

    fn partition(&mut self, a: &[String], b: &[String]) -> anyhow::Result<String> {
        let cut = self.shape()?.cut(a, b);
        for (n, i) in &cut {
            self.set_cable(n, i, false)?;
            self.out.undo.partitioned.push((n.clone(), i.clone()));
        }
        let names: Vec<String> = cut.iter().map(|(n, i)| format!("{n}:{i}")).collect();
        Ok(format!("{} cables pulled: {}", cut.len(), names.join(" ")))
    }

    fn heal(&mut self) -> anyhow::Result<String> {
        let cut = std::mem::take(&mut self.out.undo.partitioned);
        for (n, i) in &cut {
            self.set_cable(n, i, true)?;
        }
        Ok(format!("{} cables plugged back", cut.len()))
    }

    fn apply(&mut self, file: &str) -> anyhow::Result<String> {
        // Asked again after: the fleet the next steps name is the applied one.
        self.shape = None;
        let path = self.sc.folder.join(file);
        let plan = nsfleet_client::apply::plan(nsfleet_client::apply::ApplyArgs {
            file: path,
            format: None,
            name: Some(self.opts.fleet.name.clone()),
            dry_run: false,
            json: true,
            run_dir: self.opts.fleet.run_dir.clone(),
            software: self.opts.software,
            images: self.opts.images.clone(),
        })?;
        self.out.undo.applied.push(file.to_string());
        Ok(format!("{} changes made", plan.changes.len()))
    }
}

/// An end's state, after setting it (`up`) or not.
struct EndNow {
    up: bool,
    far_carrier: Option<bool>,
    impair: Option<Impair>,
}

fn cable(fleet: &FleetRef, node: &str, iface: &str, up: Option<bool>) -> anyhow::Result<EndNow> {
    use nsfleet::control::{Reply, Request};
    let req = Request::Link {
        node: node.into(),
        iface: iface.into(),
        up,
    };
    match fleet.connect()?.call(&req)? {
        Reply::Link {
            end, far, impair, ..
        } => Ok(EndNow {
            up: end.up,
            far_carrier: far.map(|f| f.carrier),
            impair,
        }),
        other => anyhow::bail!("unexpected reply from the supervisor: {other:?}"),
    }
}

fn node_action(fleet: &FleetRef, node: &str, action: NodeAction) -> anyhow::Result<()> {
    use nsfleet::control::{Reply, Request};
    let req = Request::Node {
        node: node.into(),
        action,
    };
    match fleet.connect()?.call(&req)? {
        Reply::Node { .. } => Ok(()),
        other => anyhow::bail!("unexpected reply from the supervisor: {other:?}"),
    }
}

/// Whether an action changes the fleet (a fault, or its repair), so that the
/// expectations after it measure the network's answer to it: its recovery from a cable
/// pulled, its return to the shape it had once the cable is plugged back.
fn changes_the_fleet(a: &Action) -> bool {
    !matches!(a, Action::Wait { .. } | Action::Sleep(_))
}

/// The scenario's random choices: splitmix64 from its seed, so that a seed gives the same
/// choices on every run and machine.
struct Random(u64);

impl Random {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) % n as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_chooses_the_same_ends_every_time() {
        let picks = |seed| {
            let mut r = Random(seed);
            (0..8).map(|_| r.below(10)).collect::<Vec<_>>()
        };
        assert_eq!(picks(7), picks(7));
        assert_ne!(picks(7), picks(8));
        assert!(picks(7).iter().all(|p| *p < 10));
    }

    #[test]
    fn what_is_left_is_said_for_people() {
        let mut u = Undo::default();
        u.cables.insert(("r1".into(), "eth1".into()), true);
        u.nodes.insert("r3".into(), NodeAction::Start);
        assert_eq!(u.left(), vec!["cable r1:eth1 pulled", "node r3 stopped"]);
    }
}

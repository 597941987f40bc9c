//! Changing a live fleet into another shape (`nsfleet apply`), all or nothing: nodes added,
//! running nodes given a new configuration and wiring, nodes removed.
//!
//! The order is what makes it undoable. First every changed node *retires* what it no
//! longer has, phases in reverse (processes, then addresses and routes, then links), so
//! that names and indexes given up are free; that includes its links to nodes being
//! removed, which are otherwise left alone. Then the new nodes are created, and phase by
//! phase the new nodes run `init` while changed nodes *extend* to their new shape.
//! Removal comes last, once nothing can fail: a node once destroyed cannot be brought
//! back, and its devices go in the kernel's batched namespace cleanup, not one RTM_DELLINK
//! (and one RCU grace period) each.
//!
//! A failure anywhere before that destroys the new nodes, puts back every changed node's
//! old shape and runs the same two passes with the shapes swapped (deletions tolerating
//! what is gone, additions what is there), on every node whatever fails on another, from
//! wherever the change stopped. Nodes to be removed only extend, from no links at all:
//! what changed nodes cut from them is made again, the rest is already there. Last, a
//! subsystem that the change brought up on a node where it had no state (a node stopped
//! with `nsfleet node stop`, say) is taken down again.

use super::{Fleet, OnError, Progress};
use crate::node::{Node, Shape};
use crate::registry::{exit_all, Registered};
use crate::subsystem::{enter_node, InitCtx, Phase};
use crate::worker::Worker;
use crate::SubsysId;
use anyhow::{anyhow, bail};
use nsfleet_topology::reshape::Reshape;
use nsfleet_topology::{NodeSpec, NodeWiring};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct ReshapeReport {
    pub added: usize,
    pub changed: usize,
    pub removed: usize,
    /// Wall time of each step: retire, then each phase, then remove.
    pub steps: Vec<(String, Duration)>,
    /// Removed nodes whose namespace something else still holds, and who.
    #[serde(default)]
    pub held: Vec<crate::Held>,
}

/// What an error from the kernel means "already so" in each pass (see `Subsystem::retire`).
const GONE: &[i32] = &[libc::ENODEV, libc::ENOENT, libc::ESRCH, libc::EADDRNOTAVAIL];
const THERE: &[i32] = &[libc::EEXIST];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pass {
    Retire,
    Extend { undoing: bool },
}

/// A running node in the change, and the shape it is changing from: what it had, or
/// (undoing) what it was being changed to.
#[derive(Clone)]
struct Touched {
    node: Arc<Node>,
    was: Arc<Shape>,
}

/// What undoing a change needs besides the new nodes.
struct Undo {
    /// Changed nodes, with their old shape and the subsystems that held state of them.
    changed: Vec<(Touched, Vec<SubsysId>)>,
    /// Nodes to remove, each with the shape an undo makes them whole from: no links.
    removed: Vec<Touched>,
}

impl Fleet {
    /// Changes the live fleet as `plan` says; on any failure puts it back as it was and
    /// returns the error. The caller serialises changes (one at a time per fleet).
    pub fn reshape(&self, plan: Reshape, progress: Progress<'_>) -> anyhow::Result<ReshapeReport> {
        crate::fault::stage("reshape");
        // Shared, as a creation holds it: the subsystems cannot change under a change.
        let subs = self.registry.read();
        let table = self.nodes();
        let running = |name: &str| {
            (table.get(name).cloned()).ok_or_else(|| anyhow!("no node named {name:?} is running"))
        };
        if let Some(n) = plan.add.iter().find(|n| table.get(&n.name).is_some()) {
            bail!("node {:?} already exists in this fleet", n.name);
        }
        let changed = (plan.change.iter())
            .map(|n| Ok((running(&n.name)?, shape(n))))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let removed = (plan.remove.iter())
            .map(|name| {
                let node = running(name)?;
                let cut = Shape {
                    config: node.config(),
                    wiring: Arc::new(NodeWiring::default()),
                };
                Ok(Touched {
                    node,
                    was: Arc::new(cut),
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let undo = Undo {
            changed: (changed.into_iter())
                .map(|(node, new)| {
                    let had = node.state_ids();
                    let was = node.reshape(new);
                    (Touched { node, was }, had)
                })
                .collect(),
            removed,
        };
        let mut report = ReshapeReport {
            added: plan.add.len(),
            changed: plan.change.len(),
            removed: plan.remove.len(),
            ..Default::default()
        };
        let touched: Vec<Touched> = undo.changed.iter().map(|(t, _)| t.clone()).collect();
        let mut created = Vec::new();
        let forward = self.transition(
            &subs,
            &touched,
            &plan.add,
            &mut created,
            &mut report,
            progress,
        );
        if let Err(e) = forward {
            return Err(self.undo(&subs, undo, created, e));
        }
        let t = Instant::now();
        let gone: Vec<&str> = plan.remove.iter().map(String::as_str).collect();
        drop(subs);
        report.held = self.destroy(&gone).wait_settled().held;
        report.steps.push(("remove".into(), t.elapsed()));
        self.relabel(&plan.keep);
        Ok(report)
    }

    /// Takes where the file now writes the nodes a change keeps as they are
    /// (`Reshape::keep`): each one's shape is swapped for its new spec's, equal but for
    /// the places, so that a later error about it names the file as it is now. No
    /// kernel work: nothing of the node changes. The caller serialises changes.
    pub fn relabel(&self, keep: &[NodeSpec]) {
        let table = self.nodes();
        for spec in keep {
            if let Some(node) = table.get(&spec.name) {
                node.reshape(shape(spec));
            }
        }
    }

    /// Retire, create, then each phase: the change itself.
    fn transition(
        &self,
        subs: &[Registered],
        touched: &[Touched],
        add: &[NodeSpec],
        created: &mut Vec<Arc<Node>>,
        report: &mut ReshapeReport,
        progress: Progress<'_>,
    ) -> anyhow::Result<()> {
        let t = Instant::now();
        for phase in Phase::ALL.into_iter().rev() {
            let ops = of_phase(subs, phase, true);
            self.pass(Pass::Retire, phase, ops, touched, &mut *progress)?;
        }
        report.steps.push(("retire".into(), t.elapsed()));
        for phase in Phase::ALL {
            let t = Instant::now();
            let ops = of_phase(subs, phase, false);
            if phase == Phase::Create {
                let items = add.iter().cloned().enumerate().collect();
                self.create_nodes(items, ops.clone(), created, &mut *progress)?;
                self.publish(created);
            } else if phase == Phase::Launch {
                let nodes: Vec<Arc<Node>> = (created.iter().cloned())
                    .chain(touched.iter().map(|t| t.node.clone()))
                    .collect();
                self.launch_phase(subs, &nodes, &mut *progress)?;
            } else if !ops.is_empty() {
                self.init_phase(phase, ops.clone(), created, &mut *progress)?;
            }
            let extend = Pass::Extend { undoing: false };
            self.pass(extend, phase, ops, touched, &mut *progress)?;
            report.steps.push((phase.name().into(), t.elapsed()));
        }
        Ok(())
    }

    /// Puts the fleet back after `error`: the new nodes destroyed, every changed node's
    /// old shape back and made so, the nodes to remove made whole again, and what the
    /// change brought up where nothing ran taken down. Every step runs on every node,
    /// whatever fails elsewhere. Returns the error to report.
    fn undo(
        &self,
        subs: &[Registered],
        undo: Undo,
        created: Vec<Arc<Node>>,
        error: anyhow::Error,
    ) -> anyhow::Error {
        // The new nodes go first, and are reclaimed before anything is re-made: their
        // ends of pairs with running nodes go with them.
        self.destroy_these(created).wait_settled();
        let back: Vec<Touched> = (undo.changed.iter())
            .map(|(t, _)| Touched {
                was: t.node.reshape(t.was.clone()),
                node: t.node.clone(),
            })
            .collect();
        let whole: Vec<Touched> = back.iter().chain(&undo.removed).cloned().collect();
        let mut quiet = |_: Phase, _: usize, _: usize| ControlFlow::Continue(());
        let mut failures = Vec::new();
        for phase in Phase::ALL.into_iter().rev() {
            let ops = of_phase(subs, phase, true);
            failures.extend(self.pass(Pass::Retire, phase, ops, &back, &mut quiet).err());
        }
        for phase in Phase::ALL {
            let ops = of_phase(subs, phase, false);
            let pass = Pass::Extend { undoing: true };
            failures.extend(self.pass(pass, phase, ops, &whole, &mut quiet).err());
            if phase == Phase::Launch {
                let nodes: Vec<Arc<Node>> = whole.iter().map(|t| t.node.clone()).collect();
                failures.extend(self.launch_phase(subs, &nodes, &mut quiet).err());
            }
        }
        for (t, had) in &undo.changed {
            let new = |r: &&Registered| !had.contains(&r.id) && t.node.has_state(r.id);
            for r in subs.iter().filter(new) {
                exit_all(&*r.ops, r.id, std::slice::from_ref(&t.node));
            }
        }
        match failures.first() {
            None => error.context("rolled back: the fleet is as it was"),
            Some(u) => error.context(format!(
                "rolling back failed too ({} error(s)), the fleet is not as it was: {u:#}",
                failures.len()
            )),
        }
    }

    /// One pass of one phase's subsystems over the touched nodes, on the workers; an undo
    /// goes on over every node after a failure.
    fn pass(
        &self,
        pass: Pass,
        phase: Phase,
        ops: Arc<Vec<Registered>>,
        touched: &[Touched],
        progress: Progress<'_>,
    ) -> anyhow::Result<()> {
        if ops.is_empty() || touched.is_empty() {
            return Ok(());
        }
        let (log_dir, table) = (self.log_dir.clone(), self.nodes());
        let work = move |w: &mut Worker, t: Touched| {
            let r = change_on(&ops, pass, w, &t.node, &t.was, &table, &log_dir);
            (None::<()>, r)
        };
        let on_error = match pass {
            Pass::Extend { undoing: true } => OnError::Continue,
            Pass::Retire | Pass::Extend { undoing: false } => OnError::Stop,
        };
        (self.run_phase(phase, touched.to_vec(), work, on_error, progress)).1
    }
}

fn shape(spec: &NodeSpec) -> Arc<Shape> {
    Arc::new(Shape {
        config: spec.config.clone(),
        wiring: spec.wiring.clone(),
    })
}

/// The subsystems of `phase`, in registration order or (for retiring) reversed.
fn of_phase(subs: &[Registered], phase: Phase, reversed: bool) -> Arc<Vec<Registered>> {
    let mut ops: Vec<Registered> = (subs.iter())
        .filter(|r| r.ops.phase() == phase)
        .cloned()
        .collect();
    if reversed {
        ops.reverse();
    }
    Arc::new(ops)
}

/// What one subsystem does to one node in a pass.
enum Step {
    /// Nothing: it has no state of the node and does not want it.
    Skip,
    /// It has no state of the node but wants it now: `init`, as on a new node.
    Init,
    /// Retire or extend from the state it has (retiring from a fresh one if it has none:
    /// a failed change may have left something of it).
    Change,
}

/// Each of `ops` retires or extends one node, inside it. A subsystem keeps its state of
/// the node only while it wants the node (and keeps what a failed `init` left, for the
/// undo to retire). An undo goes on to the next subsystem after a failure.
fn change_on(
    ops: &[Registered],
    pass: Pass,
    w: &mut Worker,
    node: &Node,
    was: &Shape,
    table: &crate::NodeTable,
    log_dir: &std::path::Path,
) -> anyhow::Result<()> {
    enter_node(w, node)?;
    let tolerate = match pass {
        Pass::Retire => GONE,
        Pass::Extend { undoing: true } => THERE,
        Pass::Extend { undoing: false } => &[],
    };
    let mut first_err = None;
    for r in ops {
        let had = node.take_state(r.id);
        let (fresh, wants) = (had.is_none(), r.ops.wants(node));
        let step = match (pass, had.is_some(), wants) {
            (Pass::Extend { .. }, false, false) => Step::Skip,
            (Pass::Extend { .. }, false, true) => Step::Init,
            _ => Step::Change,
        };
        let mut state = had.unwrap_or_else(|| r.ops.fresh());
        let mut cx = InitCtx {
            node,
            log_dir,
            worker: w,
            nodes: table,
            tolerate,
        };
        let result = match (step, pass) {
            (Step::Skip, _) => continue,
            (Step::Init, _) => r.ops.init_in(&mut cx, &mut state),
            (Step::Change, Pass::Retire) => r.ops.retire(&mut cx, &mut state, was),
            (Step::Change, Pass::Extend { .. }) => r.ops.extend(&mut cx, &mut state, was),
        };
        // Retiring makes no state where there was none (nor does it bring anything up).
        if wants && !(pass == Pass::Retire && fresh) {
            node.put_state(r.id, state);
        }
        if let Err(e) = result {
            let e = e.context(format!("node {}: {}", node.name(), r.ops.name()));
            if pass != (Pass::Extend { undoing: true }) {
                return Err(e);
            }
            first_err.get_or_insert(e);
        }
    }
    first_err.map_or(Ok(()), Err)
}

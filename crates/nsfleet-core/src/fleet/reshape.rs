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
//! what is gone, additions what is there), from wherever the change stopped. Nodes to be
//! removed extend too, from no links at all: what changed nodes cut from them is made
//! again, the rest is already there.

use super::{Fleet, Progress};
use crate::node::{Node, Shape};
use crate::registry::Registered;
use crate::subsystem::{enter_node, InitCtx, Phase};
use crate::worker::Worker;
use anyhow::{anyhow, bail, Context};
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
}

/// What an error from the kernel means "already so" in each pass (see `Subsystem::retire`).
const GONE: &[i32] = &[libc::ENODEV, libc::ENOENT, libc::ESRCH, libc::EADDRNOTAVAIL];
const THERE: &[i32] = &[libc::EEXIST];

#[derive(Clone, Copy)]
enum Pass {
    Retire,
    Extend { undoing: bool },
}

/// A running node in the change, and the shape it had before.
type Touched = (Arc<Node>, Arc<Shape>);

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
        // As they are, and as an undo sees them: cut off from the nodes that stay.
        let removed = (plan.remove.iter())
            .map(|name| {
                let node = running(name)?;
                let cut = Arc::new(Shape {
                    config: node.config(),
                    wiring: Arc::new(NodeWiring::default()),
                });
                Ok((node, cut))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let touched: Vec<Touched> = (changed.into_iter())
            .map(|(node, new)| {
                let was = node.reshape(new);
                (node, was)
            })
            .collect();
        let mut report = ReshapeReport {
            added: plan.add.len(),
            changed: plan.change.len(),
            removed: plan.remove.len(),
            ..Default::default()
        };
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
            return Err(self.undo(&subs, touched, removed, created, e));
        }
        let t = Instant::now();
        let gone: Vec<&str> = plan.remove.iter().map(String::as_str).collect();
        drop(subs);
        self.destroy(&gone).wait_settled();
        report.steps.push(("remove".into(), t.elapsed()));
        Ok(report)
    }

    /// Retire, create, then each phase: the change itself, forward or undoing.
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
            } else if !ops.is_empty() {
                self.init_phase(phase, ops.clone(), created, &mut *progress)?;
            }
            let extend = Pass::Extend { undoing: false };
            self.pass(extend, phase, ops, touched, &mut *progress)?;
            report.steps.push((phase.name().into(), t.elapsed()));
        }
        Ok(())
    }

    /// Puts the fleet back after `error`: the new nodes destroyed, every touched node's
    /// old shape back and made so, and the nodes to remove made whole again (`removed`:
    /// each with the shape it was cut to). Returns the error to report.
    fn undo(
        &self,
        subs: &[Registered],
        touched: Vec<Touched>,
        removed: Vec<Touched>,
        created: Vec<Arc<Node>>,
        error: anyhow::Error,
    ) -> anyhow::Error {
        // The new nodes go first, and are reclaimed before anything is re-made: their
        // ends of pairs with running nodes go with them.
        self.unpublish(|n| created.iter().any(|c| Arc::ptr_eq(c, n)));
        self.reaper.doom(created).wait_settled();
        let back: Vec<Touched> = (touched.into_iter())
            .map(|(node, was)| {
                let failed = node.reshape(was);
                (node, failed)
            })
            .chain(removed)
            .collect();
        let mut quiet = |_: Phase, _: usize, _: usize| ControlFlow::Continue(());
        let mut result = Ok(());
        for phase in Phase::ALL.into_iter().rev() {
            let ops = of_phase(subs, phase, true);
            result = result.and_then(|()| self.pass(Pass::Retire, phase, ops, &back, &mut quiet));
        }
        for phase in Phase::ALL {
            let ops = of_phase(subs, phase, false);
            let pass = Pass::Extend { undoing: true };
            result = result.and_then(|()| self.pass(pass, phase, ops, &back, &mut quiet));
        }
        match result {
            Ok(()) => error.context("rolled back: the fleet is as it was"),
            Err(u) => error.context(format!(
                "rolling back failed too, the fleet is not as it was: {u:#}"
            )),
        }
    }

    /// One pass of one phase's subsystems over the touched nodes, on the workers.
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
        let work = move |w: &mut Worker, (node, was): Touched| {
            let r = change_on(&ops, pass, w, &node, &was, &table, &log_dir);
            (None::<()>, r)
        };
        self.run_phase(phase, touched.to_vec(), work, progress).1
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

/// Each of `ops` retires or extends one node, inside it. A subsystem with no state on the
/// node retires from a fresh one (a failed change may have left something of it) and
/// keeps none; one that has none but wants the node now is brought up by `init`, as on a
/// new node (which also starts again a node stopped by `nsfleet node stop`: the file
/// says it runs).
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
    for r in ops {
        let had = node.take_state(r.id);
        let fresh = had.is_none();
        if fresh && matches!(pass, Pass::Extend { .. }) && !r.ops.wants(node) {
            continue;
        }
        let mut state = had.unwrap_or_else(|| r.ops.fresh());
        let mut cx = InitCtx {
            node,
            log_dir,
            worker: w,
            nodes: table,
            tolerate,
        };
        let result = match pass {
            Pass::Retire => r.ops.retire(&mut cx, &mut state, was),
            Pass::Extend { .. } if fresh => r.ops.init(&mut cx).map(|s| state = s),
            Pass::Extend { .. } => r.ops.extend(&mut cx, &mut state, was),
        };
        let keep = match pass {
            Pass::Retire => !fresh,
            Pass::Extend { .. } => !fresh || result.is_ok(),
        };
        if keep {
            node.put_state(r.id, state);
        }
        result.with_context(|| format!("node {}: {}", node.name(), r.ops.name()))?;
    }
    Ok(())
}

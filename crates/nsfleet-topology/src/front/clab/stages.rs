//! `stages` and their `wait-for`: containerlab's order of a node's life (create,
//! create-links, configure, healthy, exit), where a node's stage may wait for other
//! nodes' stages (netlab's `start_after` writes `stages.create.wait-for`). nsfleet makes
//! every node, then every link, and only then starts any node's processes: a wait for
//! another node's `create` or `create-links` is met by that order, and is taken. A wait
//! for a later stage (`configure`: the other's exec lines done; `healthy`; `exit`) is not
//! applied, and said so at its line; a stage's own `exec` likewise. A wait for a node the
//! lab does not have, an unknown stage, and waits that wait on each other in a circle are
//! errors at their line, before anything exists.

use super::node::NodeDecl;
use super::Lab;
use crate::error::TopologyError;
use crate::front::yaml::Yaml;
use std::collections::HashMap;
use std::ops::Range;

/// A node's stages, in the order containerlab takes them.
const STAGES: [&str; 5] = ["create", "create-links", "configure", "healthy", "exit"];

/// One `wait-for`: stage `stage` of node `node` waits for stage `on` of node `other`.
struct Wait {
    node: usize,
    stage: usize,
    other: usize,
    on: usize,
    at: Range<usize>,
}

pub(crate) fn check(lab: &mut Lab<'_>, nodes: &[NodeDecl<'_>]) -> Result<(), TopologyError> {
    let index: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    let mut waits = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        let Some(stages) = n.first("stages") else {
            continue;
        };
        for (k, v) in lab.map(
            stages,
            "stages: create, create-links, configure, healthy, exit",
        )? {
            let stage = stage_of(lab, k)?;
            if v.is_null() {
                continue;
            }
            lab.map(v, "a stage's wait-for and exec")?;
            for (key, value) in v.entries().unwrap_or_default() {
                match key.str() {
                    Some("wait-for") => {
                        for w in lab.list(value, "wait-for: [{node, stage}]")? {
                            waits.push(wait(lab, w, i, stage, &index)?);
                        }
                    }
                    Some("exec") => lab.warn(key.span.clone(), format!("node {}: a stage's `exec` is not run: exec lines run once the node has started", n.name)),
                    _ => return Err(lab.err(key.span.clone(), "expected wait-for or exec")),
                }
            }
        }
    }
    for w in &waits {
        if w.on > 1 {
            let m = format!(
                "node {} does not wait for {}'s {} stage: nsfleet starts every node's processes together, once every node and link exists",
                nodes[w.node].name, nodes[w.other].name, STAGES[w.on]
            );
            lab.warn(w.at.clone(), m);
        }
    }
    if let Some(w) = circle(&waits, nodes.len()) {
        let m = format!(
            "wait-for: node {}'s {} stage waits, through the others' waits, on itself",
            nodes[w.node].name, STAGES[w.stage]
        );
        return Err(lab.err(w.at.clone(), m));
    }
    Ok(())
}

fn stage_of(lab: &Lab<'_>, y: &Yaml) -> Result<usize, TopologyError> {
    let name = lab.string(y)?;
    STAGES.iter().position(|s| *s == name).ok_or_else(|| {
        lab.err(
            y.span.clone(),
            format!(
                "unknown stage {name:?}: expected one of {}",
                STAGES.join(", ")
            ),
        )
    })
}

fn wait(
    lab: &Lab<'_>,
    w: &Yaml,
    node: usize,
    stage: usize,
    index: &HashMap<&str, usize>,
) -> Result<Wait, TopologyError> {
    lab.map(w, "a wait: {node, stage}")?;
    let other = lab.need(w, "node", "the node waited for")?;
    let name = lab.string(other)?;
    let other = *index.get(name.as_str()).ok_or_else(|| {
        lab.err(
            other.span.clone(),
            format!("wait-for: there is no node {name:?} in topology.nodes"),
        )
    })?;
    // containerlab waits for the other's create stage when none is given.
    let on = match w.get("stage").filter(|s| !s.is_null()) {
        Some(s) => stage_of(lab, s)?,
        None => 0,
    };
    Ok(Wait {
        node,
        stage,
        other,
        on,
        at: w.span.clone(),
    })
}

/// A wait that waits on itself: stage s of a node follows its stage s - 1, and a wait
/// follows the stage it waits on. Depth-first over (node, stage).
fn circle(waits: &[Wait], nodes: usize) -> Option<&Wait> {
    let id = |n: usize, s: usize| n * STAGES.len() + s;
    let mut after: Vec<Vec<(usize, Option<&Wait>)>> = vec![Vec::new(); nodes * STAGES.len()];
    for n in 0..nodes {
        for s in 1..STAGES.len() {
            after[id(n, s)].push((id(n, s - 1), None));
        }
    }
    for w in waits {
        after[id(w.node, w.stage)].push((id(w.other, w.on), Some(w)));
    }
    // 0: not seen, 1: on the current path, 2: done.
    let mut state = vec![0u8; after.len()];
    for start in 0..after.len() {
        if state[start] != 0 {
            continue;
        }
        let mut path: Vec<(usize, usize, Option<&Wait>)> = vec![(start, 0, None)];
        state[start] = 1;
        while let Some(&mut (v, ref mut next, _)) = path.last_mut() {
            if let Some(&(u, w)) = after[v].get(*next) {
                *next += 1;
                match state[u] {
                    0 => {
                        state[u] = 1;
                        path.push((u, 0, w));
                    }
                    1 => {
                        // The circle is the path from u on: name one of its waits.
                        let from = path.iter().position(|(x, _, _)| *x == u).unwrap_or(0);
                        return w.or_else(|| path[from + 1..].iter().find_map(|(_, _, w)| *w));
                    }
                    _ => {}
                }
            } else {
                state[v] = 2;
                path.pop();
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    fn lab(stages: &str) -> Result<crate::Draft, crate::TopologyError> {
        let text = format!(
            "name: s\ntopology:\n  nodes:\n    a:\n      kind: linux\n{stages}    b:\n      kind: linux\n"
        );
        crate::clab::read_with("s.clab.yml", &text, crate::front::Software::Host)
    }

    #[test]
    fn a_wait_for_an_earlier_stage_is_met_and_a_later_one_is_said_not_applied() {
        let met = lab("      stages:\n        create:\n          wait-for:\n            - node: b\n              stage: create-links\n").unwrap();
        assert!(met.warnings().is_empty(), "{:?}", met.warnings());
        let later = lab("      stages:\n        create:\n          wait-for:\n            - {node: b, stage: configure}\n").unwrap();
        let w = &later.warnings()[0];
        assert_eq!(w.at.line, 9, "{w}");
        assert!(
            w.message.contains("does not wait for b's configure stage"),
            "{w}"
        );
    }

    #[test]
    fn a_circle_of_waits_an_unknown_node_and_an_unknown_stage_are_refused_at_their_line() {
        let text = "name: s\ntopology:\n  nodes:\n    a:\n      kind: linux\n      stages:\n        create:\n          wait-for: [{node: b, stage: create-links}]\n    b:\n      kind: linux\n      stages:\n        create:\n          wait-for: [{node: a}]\n";
        let e =
            crate::clab::read_with("s.clab.yml", text, crate::front::Software::Host).unwrap_err();
        assert!(
            e.message
                .contains("waits, through the others' waits, on itself"),
            "{e}"
        );
        assert!([8, 13].contains(&e.at.line), "{e}");
        let e =
            lab("      stages:\n        create:\n          wait-for: [{node: c}]\n").unwrap_err();
        assert_eq!(
            (e.at.line, e.message.contains("no node \"c\"")),
            (8, true),
            "{e}"
        );
        let e = lab("      stages:\n        boot:\n").unwrap_err();
        assert_eq!(
            (e.at.line, e.message.contains("unknown stage \"boot\"")),
            (7, true),
            "{e}"
        );
    }
}

//! A scenario checked against the running fleet before its first step: every node,
//! interface and pattern it names must be the fleet's, every `apply` file readable, every
//! partition a cut of at least one link. All errors are said at once, at their steps'
//! places. Reads the fleet's shape only.

use crate::file::{Scenario, What};
use crate::step::{self, Action, Expect, Target};
use nsfleet::control::{Reply, Request};
use nsfleet::topology::{Link, TopologyError};
use nsfleet_client::FleetRef;
use std::collections::BTreeMap;

/// The fleet as a scenario sees it: its nodes, and its links' ends with their peers.
#[derive(Clone, Debug, Default)]
pub struct Shape {
    pub nodes: Vec<String>,
    /// Every interface of every node, as (node, interface), in the fleet's order.
    pub ends: Vec<(String, String)>,
    /// Each end of a link between two nodes, and its peer's.
    pub peers: BTreeMap<(String, String), (String, String)>,
}

impl Shape {
    /// The fleet's shape as its supervisor has it now (after any `apply`).
    pub fn of(fleet: &FleetRef) -> anyhow::Result<Shape> {
        let mut c = fleet.connect()?;
        c.set_timeout(Some(std::time::Duration::from_secs(60)));
        let Reply::Shapes { nodes } = c.call(&Request::Shapes)? else {
            anyhow::bail!("unexpected reply from the supervisor");
        };
        let mut shape = Shape::default();
        for n in &nodes {
            shape.nodes.push(n.name.clone());
            for i in &n.wiring.ifaces {
                shape.ends.push((n.name.clone(), i.name.clone()));
                if let Link::Veth(p) = &i.link {
                    let (a, b) = (
                        (n.name.clone(), i.name.clone()),
                        (p.node.clone(), p.name.clone()),
                    );
                    shape.peers.insert(a.clone(), b.clone());
                    shape.peers.insert(b, a);
                }
            }
        }
        Ok(shape)
    }

    /// The nodes whose names match `pattern` (a name matches itself).
    pub fn nodes_matching(&self, pattern: &str) -> Vec<String> {
        (self.nodes.iter())
            .filter(|n| step::matches(pattern, n))
            .cloned()
            .collect()
    }

    /// The ends of links between two nodes whose node and interface match the two
    /// patterns, in the fleet's order: what `random(...)` chooses among (never a dummy
    /// interface or a host's link).
    pub fn ends_matching(&self, node: &str, iface: &str) -> Vec<(String, String)> {
        (self.ends.iter())
            .filter(|end| self.peers.contains_key(*end))
            .filter(|(n, i)| step::matches(node, n) && step::matches(iface, i))
            .cloned()
            .collect()
    }

    /// Each link between a node of `a` and one of `b`, by its end in `a`.
    pub fn cut(&self, a: &[String], b: &[String]) -> Vec<(String, String)> {
        let is_in = |g: &[String], n: &str| g.iter().any(|p| step::matches(p, n));
        (self.peers.iter())
            .filter(|((n, _), (far, _))| is_in(a, n) && is_in(b, far) && !is_in(a, far))
            .map(|(end, _)| end.clone())
            .collect()
    }
}

/// Every error of `sc` against the fleet `name` of shape `shape`, or none.
pub fn check(sc: &Scenario, name: &str, shape: &Shape) -> Result<(), TopologyError> {
    let mut errors = Vec::new();
    // After an `apply`, the fleet is another: its nodes are checked as the steps run.
    let mut applied = false;
    for s in &sc.steps {
        let problem = match &s.what {
            What::Do(a) if !applied => action(sc, name, shape, a),
            What::Expect { expect, .. } if !applied => expectation(name, shape, expect),
            _ => None,
        };
        if let What::Do(Action::Apply(_)) = &s.what {
            applied = true;
        }
        if let Some(message) = problem {
            errors.push(TopologyError::new(&sc.file, s.place, message));
        }
    }
    crate::file::all_of(errors).map_or(Ok(()), Err)
}

fn action(sc: &Scenario, fleet: &str, shape: &Shape, a: &Action) -> Option<String> {
    match a {
        Action::Link { target, .. } | Action::Impair { target, .. } => end(fleet, shape, target),
        Action::Node { node, .. } => node_named(fleet, shape, node),
        Action::Partition { a, b } => {
            let unknown = a
                .iter()
                .chain(b)
                .find(|p| shape.nodes_matching(p).is_empty());
            if let Some(p) = unknown {
                return Some(no_node(fleet, shape, p));
            }
            let both = (shape.nodes.iter()).find(|n| {
                a.iter().any(|p| step::matches(p, n)) && b.iter().any(|p| step::matches(p, n))
            });
            match (both, shape.cut(a, b).is_empty()) {
                (Some(n), _) => Some(format!("node {n:?} is in both groups of the partition")),
                (None, true) => Some(format!(
                    "no link of fleet {fleet:?} joins {} to {}",
                    a.join(","),
                    b.join(",")
                )),
                (None, false) => None,
            }
        }
        Action::Apply(file) => {
            let path = sc.folder.join(file);
            (!path.is_file()).then(|| format!("apply: no file {}", path.display()))
        }
        Action::Wait { .. } | Action::Sleep(_) | Action::Heal => None,
    }
}

/// What is wrong with expectation `e` on fleet `fleet`, if anything: a node it lacks.
pub fn expectation(fleet: &str, shape: &Shape, e: &Expect) -> Option<String> {
    let node = e.node();
    shape
        .nodes_matching(node)
        .is_empty()
        .then(|| no_node(fleet, shape, node))
}

fn end(fleet: &str, shape: &Shape, t: &Target) -> Option<String> {
    match t {
        Target::End { node, iface } => node_named(fleet, shape, node).or_else(|| {
            let ifaces: Vec<&str> = (shape.ends.iter())
                .filter(|(n, _)| n == node)
                .map(|(_, i)| i.as_str())
                .collect();
            (!ifaces.contains(&iface.as_str())).then(|| {
                format!(
                    "node {node:?} has no interface {iface:?} (it has {})",
                    listed(&ifaces)
                )
            })
        }),
        Target::Random { node, iface } => shape
            .ends_matching(node, iface)
            .is_empty()
            .then(|| format!("random({node}:{iface}) matches no end of a link between two nodes of fleet {fleet:?}")),
    }
}

fn node_named(fleet: &str, shape: &Shape, node: &str) -> Option<String> {
    (!shape.nodes.iter().any(|n| n == node)).then(|| no_node(fleet, shape, node))
}

fn no_node(fleet: &str, shape: &Shape, node: &str) -> String {
    let names: Vec<&str> = shape.nodes.iter().map(String::as_str).collect();
    match step::is_pattern(node) {
        true => format!(
            "{node:?} matches no node of fleet {fleet:?} (it has {})",
            listed(&names)
        ),
        false => format!(
            "fleet {fleet:?} has no node {node:?} (it has {})",
            listed(&names)
        ),
    }
}

/// A few names, and how many more.
fn listed(names: &[&str]) -> String {
    match names.len() {
        0 => "none".into(),
        n if n <= 8 => names.join(", "),
        n => format!("{}, and {} more", names[..8].join(", "), n - 8),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid() -> Shape {
        let mut s = Shape::default();
        for n in ["r1", "r2", "r3", "h1"] {
            s.nodes.push(n.into());
        }
        for (a, b) in [
            (("r1", "eth1"), ("r2", "eth1")),
            (("r2", "eth2"), ("r3", "eth1")),
            (("r3", "eth2"), ("h1", "eth0")),
        ] {
            for (x, y) in [(a, b), (b, a)] {
                s.ends.push((x.0.into(), x.1.into()));
                s.peers
                    .insert((x.0.into(), x.1.into()), (y.0.into(), y.1.into()));
            }
        }
        s
    }

    fn refused(steps: &str) -> String {
        let text = format!("[scenario]\nname = \"t\"\n{steps}");
        let sc = crate::file::parse(&text, "t.toml", ".".into(), false).unwrap();
        check(&sc, "lab", &grid()).unwrap_err().to_string()
    }

    #[test]
    fn names_the_fleet_lacks_are_refused_at_their_steps() {
        let e = refused(
            "[[step]]\ndo = \"link r9:eth1 down\"\n[[step]]\nexpect = \"ping x* 10.0.0.1\"\n",
        );
        assert!(
            e.starts_with("t.toml:4:7: fleet \"lab\" has no node \"r9\" (it has r1, r2, r3, h1)"),
            "{e}"
        );
        assert!(e.contains("t.toml:6:11: \"x*\" matches no node"), "{e}");
        let e = refused("[[step]]\ndo = \"impair r1:eth7 --delay 5ms\"\n");
        assert!(e.contains("no interface \"eth7\" (it has eth1)"), "{e}");
        assert!(refused("[[step]]\ndo = \"partition r1 h1\"\n").contains("no link"));
        assert!(refused("[[step]]\ndo = \"partition r* r2\"\n").contains("in both groups"));
    }

    #[test]
    fn a_partition_cuts_every_link_between_its_groups() {
        let s = grid();
        assert_eq!(
            s.cut(&["r1".into(), "r2".into()], &["r3".into(), "h1".into()]),
            vec![("r2".to_string(), "eth2".to_string())]
        );
        assert_eq!(s.ends_matching("r*", "eth2").len(), 2);
    }
}

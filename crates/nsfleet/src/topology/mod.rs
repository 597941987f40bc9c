//! What a fleet is made of, as validated data: the engine's input.
//!
//! A [`Topology`] is only ever built by [`parse`] (which validates everything) or
//! deserialized from the supervisor's own hand-off of one. It never touches the kernel.

mod parse;

pub(crate) use parse::sysctl_path;
pub use parse::{parse, parse_file, TopologyError, DEFAULT_FLEET, DEFAULT_FLEET_FILE};

use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A whole fleet: its name and its nodes, in groups that share one configuration.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Topology {
    pub name: String,
    pub groups: Vec<NodeGroup>,
}

/// Nodes that share a configuration: one written-out node, or `count` generated from a
/// name template. Generated nodes share one `Arc<NodeConfig>`, which keeps a large fleet
/// small in the supervisor.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeGroup {
    pub names: Names,
    pub config: Arc<NodeConfig>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Names {
    One(String),
    /// `template` with `{i}` replaced by `start`, `start + 1`, ... `start + count - 1`.
    Generated {
        template: String,
        start: u64,
        count: u64,
    },
}

/// What every subsystem reads about a node. Subsystems each read their own fields.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeConfig {
    /// Per-namespace sysctls as (`net.ipv4.ip_forward`, `1`), applied in this order.
    pub sysctls: Vec<(String, String)>,
    /// Shell command lines started inside the node once the fleet is built.
    pub commands: Vec<String>,
}

impl Names {
    pub fn len(&self) -> u64 {
        match self {
            Names::One(_) => 1,
            Names::Generated { count, .. } => *count,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = String> + '_ {
        let (template, start, count) = match self {
            Names::One(n) => (n.as_str(), 0, 1),
            Names::Generated {
                template,
                start,
                count,
            } => (template.as_str(), *start, *count),
        };
        (start..start + count).map(move |i| template.replace("{i}", &i.to_string()))
    }
}

impl Topology {
    pub fn node_count(&self) -> u64 {
        self.groups.iter().map(|g| g.names.len()).sum()
    }

    /// Every node as (name, shared configuration), in file order.
    pub fn nodes(&self) -> impl Iterator<Item = (String, Arc<NodeConfig>)> + '_ {
        self.groups
            .iter()
            .flat_map(|g| g.names.iter().map(move |n| (n, g.config.clone())))
    }

    /// A fleet of `count` bare nodes `n1..nN` with no configuration: the benchmark's input.
    pub fn bare(name: &str, count: u64) -> Self {
        Topology {
            name: name.to_string(),
            groups: vec![NodeGroup {
                names: Names::Generated {
                    template: "n{i}".into(),
                    start: 1,
                    count,
                },
                config: Arc::new(NodeConfig::default()),
            }],
        }
    }
}

/// Fleet and node names end up in file names, socket paths and command lines: keep them
/// to a portable, shell-safe alphabet.
pub fn check_name(what: &str, name: &str, max: usize) -> Result<(), String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.';
    if name.is_empty() || name.len() > max {
        return Err(format!(
            "{what} must be 1 to {max} characters long, got {:?}",
            name
        ));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) || !name.chars().all(ok_char) {
        return Err(format!(
            "{what} {name:?} may contain only letters, digits, '-', '_' and '.', and must start with a letter or digit"
        ));
    }
    Ok(())
}

pub const MAX_FLEET_NAME: usize = 32;
pub const MAX_NODE_NAME: usize = 64;

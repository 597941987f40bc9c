//! `shapes`: every node's configuration and wiring as they are now, after any `apply`
//! (what `nsfleet graph` draws).

use crate::control::{self, Reply};
use crate::Supervisor;

impl Supervisor {
    pub(super) fn shapes(&self) -> Reply {
        Reply::Shapes {
            nodes: (self.fleet.nodes().iter())
                .map(|n| control::NodeShape {
                    name: n.name().to_string(),
                    config: n.config(),
                    wiring: n.wiring(),
                })
                .collect(),
        }
    }
}

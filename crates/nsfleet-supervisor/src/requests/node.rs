//! `node`: a node's processes stopped, started, restarted, paused or resumed.

use crate::control::{self, Reply};
use crate::{watch, Supervisor};
use nsfleet_subsys::process::Procs;
use std::time::{Duration, Instant};

impl Supervisor {
    /// `nsfleet node`: a node's processes stopped, started, restarted, paused or resumed,
    /// through the processes subsystem's own exit and init (its namespace and links stay).
    pub(super) fn node(&self, node: &str, action: control::NodeAction) -> anyhow::Result<Reply> {
        use control::NodeAction::*;
        let _change = self.change()?;
        let n = self.known_node(node)?;
        let id = self.defaults.process;
        if n.config().ovs_hub.is_some() && matches!(action, Stop | Start | Restart) {
            // Its database is in its world, which a start makes afresh: every switch's
            // bridge would be gone, and nothing would make them again.
            anyhow::bail!("node {node} is the fleet's Open vSwitch: stopping or restarting it would lose every switch's bridge (pause and resume keep them); `nsfleet down` and `up` start it afresh");
        }
        if !n.config().has_world() {
            anyhow::bail!("node {node} runs no processes (it has no commands, kind or files)");
        }
        match action {
            Stop => {
                if !self.fleet.stop_on(id, node)? {
                    anyhow::bail!("node {node}'s processes are stopped already");
                }
            }
            Start => self.fleet.start_on(id, node)?,
            Restart => {
                self.fleet.stop_on(id, node)?;
                if let Err(e) = self.fleet.start_on(id, node) {
                    // Not all or nothing: what was stopped stays stopped, and is told.
                    let event = watch::FleetEvent::Node {
                        node: node.to_string(),
                        action: Stop.done(),
                    };
                    self.watchers.publish(&event);
                    return Err(e.context(format!(
                        "node {node}: stopped, but starting it again failed"
                    )));
                }
            }
            Pause | Resume => {
                let done = n.inspect::<Procs, _>(id, |p| p.pause(action == Pause));
                if done != Some(true) {
                    anyhow::bail!(
                        "node {node}'s processes are stopped: nothing to {}",
                        if action == Pause { "pause" } else { "resume" }
                    );
                }
            }
        }
        // The signals go through the node's init: look once the processes have taken them
        // (or after a second, and say what is).
        if matches!(action, Pause | Resume) {
            let deadline = Instant::now() + Duration::from_secs(1);
            let settled = || {
                let procs = n
                    .inspect::<Procs, _>(id, |p| p.describe())
                    .unwrap_or_default();
                procs
                    .iter()
                    .filter(|p| p.running)
                    .all(|p| p.paused == (action == Pause))
            };
            while !settled() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        let processes = n
            .inspect::<Procs, _>(id, |p| p.describe())
            .unwrap_or_default();
        let event = watch::FleetEvent::Node {
            node: node.to_string(),
            action: action.done(),
        };
        self.watchers.publish(&event);
        Ok(Reply::Node {
            node: node.to_string(),
            processes,
        })
    }
}

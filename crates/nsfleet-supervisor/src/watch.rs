//! `nsfleet events`: what happens in a live fleet, one JSON object per line, to every
//! connection that asked, until the fleet ends.
//!
//! - Links going up, down or losing carrier come from the kernel itself: a route netlink
//!   socket in each node, subscribed to RTNLGRP_LINK, opened when the first watcher comes
//!   (no socket, and no cost, for a fleet nobody watches), never by polling the links.
//! - Processes started and exited come from the processes subsystem's watcher.
//! - Node actions (`nsfleet node`) come from the supervisor.
//!
//! A watcher that does not keep up (a write blocked for a second) is dropped: a fleet
//! never waits for its audience. The link sockets keep their nodes' namespaces alive, so
//! [`Watchers::close`] comes before the fleet's teardown.

use nsfleet_core::Fleet;
use nsfleet_subsys::cable;
use parking_lot::Mutex;
use serde::Serialize;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Events of the fleet besides processes' (those are `process::ProcessEvent`).
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum FleetEvent {
    /// A link end's state changed: "up", "down" (administratively) or "no-carrier".
    Link {
        node: String,
        iface: String,
        state: &'static str,
    },
    /// `nsfleet node`: "stopped", "started", "restarted", "paused", "resumed".
    Node { node: String, action: &'static str },
    /// The fleet is going down: the last event.
    FleetDown,
}

#[derive(Default)]
pub struct Watchers {
    /// The connections that asked (lock order: `links` before `subs`).
    subs: Mutex<Vec<UnixStream>>,
    links: Mutex<Option<cable::LinkWatch>>,
}

impl Watchers {
    /// Writes `event` to every watcher, with the time it happened (`at`, seconds since
    /// the epoch); drops those that are gone or too slow.
    pub fn publish(&self, event: &impl Serialize) {
        let mut subs = self.subs.lock();
        if subs.is_empty() {
            return;
        }
        let mut v = serde_json::to_value(event).unwrap_or_default();
        let at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        v["at"] = serde_json::json!(at.as_millis() as f64 / 1e3);
        let mut line = v.to_string();
        line.push('\n');
        subs.retain(|s| std::io::Write::write_all(&mut &*s, line.as_bytes()).is_ok());
    }

    /// Adds a watcher; the first one starts the kernel's link notifications in every node.
    pub fn subscribe(self: &Arc<Self>, conn: &UnixStream, fleet: &Fleet) -> anyhow::Result<()> {
        let conn = conn.try_clone()?;
        conn.set_write_timeout(Some(Duration::from_secs(1)))?;
        let mut links = self.links.lock();
        if links.is_none() {
            let to = self.clone();
            let tell = move |node: &str, iface: String, state| {
                to.publish(&FleetEvent::Link {
                    node: node.to_string(),
                    iface,
                    state,
                })
            };
            *links = Some(cable::LinkWatch::start(fleet, tell)?);
        }
        self.subs.lock().push(conn);
        Ok(())
    }

    /// Tells every watcher the fleet is going down, lets them go, and closes the link
    /// sockets (which hold the nodes' namespaces).
    pub fn close(&self) {
        self.publish(&FleetEvent::FleetDown);
        if let Some(w) = self.links.lock().take() {
            w.stop();
        }
        self.subs.lock().clear();
    }
}

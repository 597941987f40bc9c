//! `nsfleet events`: what happens in a live fleet, one JSON object per line, to every
//! connection that asked, until the fleet ends.
//!
//! - Links going up, down or losing carrier come from the kernel itself: a route netlink
//!   socket in each node, subscribed to RTNLGRP_LINK, opened when the first watcher comes
//!   (no socket, and no cost, for a fleet nobody watches), never by polling the links.
//! - Processes started and exited come from the processes subsystem's watcher.
//! - Open vSwitch switches connecting to their controllers, or losing or failing to
//!   reach them, come from the controller relays.
//! - Node actions (`nsfleet node`) come from the supervisor.
//!
//! A watcher that does not keep up (a write blocked for a second) is dropped: a fleet
//! never waits for its audience. The link sockets keep their nodes' namespaces alive, so
//! [`Watchers::close`] comes before the fleet's teardown.

use crate::control::{self, Reply};
use nsfleet_core::Fleet;
use nsfleet_locks::{order, Mutex};
use nsfleet_subsys::cable;
use serde::Serialize;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Events of the fleet besides subsystems' (those are `nsfleet_subsys::Event`).
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum FleetEvent {
    /// A link end's state changed: "up", "down" (administratively) or "no-carrier".
    Link {
        node: String,
        iface: String,
        state: &'static str,
    },
    /// `nsfleet node`: "stopped", "started", "restarted", "paused", "resumed"; `apply`:
    /// "added", "changed", "removed".
    Node { node: String, action: &'static str },
    /// `apply` added or removed one of a node's interfaces ("added", "removed").
    Interface {
        node: String,
        iface: String,
        action: &'static str,
    },
    /// A wait for `condition` (`up --wait`, `nsfleet wait`) ended: met or not,
    /// `since_up_s` after the fleet's supervisor started.
    Ready {
        condition: crate::ready::Condition,
        met: bool,
        since_up_s: f64,
    },
    /// The fleet is going down: the last event.
    FleetDown,
}

pub struct Watchers {
    /// The connections that asked. Lock order: `links` before `subs`.
    subs: Mutex<Vec<UnixStream>>,
    links: Mutex<Links>,
}

/// The kernel's link notifications, started with the first watcher.
#[derive(Default)]
struct Links {
    watch: Option<cable::LinkWatch>,
    /// The fleet is going down: no new watcher, no new sockets in its nodes.
    closed: bool,
}

/// An event as its line: the event and when it happened (`at`, seconds since the epoch).
fn line(event: &impl Serialize) -> String {
    let mut v = serde_json::to_value(event).unwrap_or_default();
    let at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    v["at"] = serde_json::json!(at.as_millis() as f64 / 1e3);
    let mut line = v.to_string();
    line.push('\n');
    line
}

impl Default for Watchers {
    fn default() -> Self {
        Watchers {
            subs: Mutex::new(order::WATCH_SUBS, Vec::new()),
            links: Mutex::new(order::WATCH_LINKS, Links::default()),
        }
    }
}

impl Watchers {
    /// Writes `event` to every watcher; drops those that are gone or too slow.
    pub fn publish(&self, event: &impl Serialize) {
        let mut subs = self.subs.lock();
        if subs.is_empty() {
            return;
        }
        let line = line(event);
        subs.retain(|s| std::io::Write::write_all(&mut &*s, line.as_bytes()).is_ok());
    }

    /// Adds a watcher, answering it `watching` before any event can reach it; the first
    /// one starts the kernel's link notifications in every node.
    pub fn subscribe(self: &Arc<Self>, conn: &UnixStream, fleet: &Fleet) -> anyhow::Result<()> {
        let conn = conn.try_clone()?;
        conn.set_write_timeout(Some(Duration::from_secs(1)))?;
        let mut links = self.links.lock();
        if links.closed {
            anyhow::bail!("the fleet is going down");
        }
        if links.watch.is_none() {
            let to = self.clone();
            let tell = move |node: &str, iface: String, state| {
                to.publish(&FleetEvent::Link {
                    node: node.to_string(),
                    iface,
                    state,
                })
            };
            links.watch = Some(cable::LinkWatch::start(fleet, tell)?);
        }
        let mut subs = self.subs.lock();
        control::write_line(&conn, &Reply::Watching)?;
        subs.push(conn);
        Ok(())
    }

    /// Watches the link notifications of nodes new in the fleet too, if anyone watches.
    pub fn add_nodes(&self, fleet: &Fleet, names: &[String]) -> anyhow::Result<()> {
        match &self.links.lock().watch {
            Some(w) => w.add(fleet, names),
            None => Ok(()),
        }
    }

    /// Closes the link sockets in these nodes, which would keep them from being reclaimed.
    pub fn forget_nodes(&self, names: &[String]) {
        if let Some(w) = &self.links.lock().watch {
            w.forget(names);
        }
    }

    /// Closes the link sockets (which hold the nodes' namespaces), then tells every
    /// watcher the fleet is going down, as the last event, and lets them go.
    pub fn close(&self) {
        let mut links = self.links.lock();
        links.closed = true;
        if let Some(w) = links.watch.take() {
            w.stop();
        }
        drop(links);
        let subs = std::mem::take(&mut *self.subs.lock());
        let last = line(&FleetEvent::FleetDown);
        for s in subs {
            let _ = std::io::Write::write_all(&mut &s, last.as_bytes());
        }
    }
}

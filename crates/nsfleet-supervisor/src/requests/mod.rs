//! The control socket's requests, one handler per file: [`Supervisor::handle`] reads a
//! request, checks who asks, and dispatches. What several handlers share is here: the
//! right to change the live fleet ([`Supervisor::change`], the `changes` lock), a node
//! found by name or the closest names, and an error turned into a reply.

mod apply;
mod dial;
mod events;
mod gen;
mod impair;
mod link;
mod netns;
mod node;
mod probe;
mod shapes;
mod stats;
mod status;
mod wait;

use crate::control::{self, Reply, Request, MAX_REQUEST};
use crate::{Asker, Shutdown, Supervisor};
use anyhow::Context;
use nsfleet_core::Node;
use nsfleet_subsys::impair::Impaired;
use nsfleet_sys as sys;
use nsfleet_topology::Impair;
use std::io::{BufRead, BufReader, Read};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

impl Supervisor {
    /// One connection: its request read (at most [`MAX_REQUEST`] bytes, within 10 s),
    /// its asker checked (root only), its handler's reply written.
    pub(crate) fn handle(&self, conn: UnixStream) {
        // A client that says nothing, or too much, gets dropped; it never wedges anything
        // but its own connection thread.
        let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
        let mut line = Vec::new();
        // Kept for what follows the line: an `apply`'s topology.
        let mut reader = BufReader::new(&conn);
        let read = (&mut reader)
            .take(MAX_REQUEST as u64 + 1)
            .read_until(b'\n', &mut line);
        let req = match read {
            Ok(_) if line.len() > MAX_REQUEST => {
                Err(format!("request longer than {MAX_REQUEST} bytes"))
            }
            Ok(_) => serde_json::from_slice::<Request>(&line)
                .map_err(|e| format!("malformed request: {e}")),
            Err(e) => Err(format!("reading the request: {e}")),
        };
        let reply = |r: &Reply| control::write_line(&conn, r);
        // The socket is root's only (mode 0600); the kernel's word on who connected holds
        // even if that ever changes (a socket passed on, a folder made wrongly). Answered
        // once the request is read, so that the refusal reaches the asker.
        match sys::peer_uid(conn.as_fd()) {
            Ok(0) => {}
            who => {
                let who = who.map_or_else(|e| format!("unknown ({e})"), |uid| format!("uid {uid}"));
                let message = format!("refused: only root controls a fleet, and this is {who}");
                let _ = reply(&Reply::error(message));
                return;
            }
        }
        let _ = match req {
            Err(message) => reply(&Reply::error(message)),
            // Between changes: the fleet before one or after it, never half-way.
            Ok(Request::Status) => reply(&Reply::Status({
                let _between = self.changes.lock();
                self.status()
            })),
            Ok(Request::Netns { node }) => self.send_netns(&conn, &node),
            Ok(Request::Dial { port }) => self.dial(&conn, port),
            Ok(Request::Stats { node }) => reply(&answer(self.stats(node.as_deref()))),
            Ok(Request::Routes { node }) => reply(&answer(self.routes(&node))),
            Ok(Request::Ping {
                node,
                addr,
                count,
                interval_ms,
                timeout_ms,
            }) => reply(&answer(self.ping(
                &conn,
                &node,
                addr,
                count,
                interval_ms,
                timeout_ms,
            ))),
            Ok(Request::Shapes) => reply(&self.shapes()),
            Ok(Request::Impair {
                node,
                iface,
                impair,
            }) => reply(&answer(self.impair(node, iface, impair))),
            Ok(Request::Gen {
                commands,
                threads,
                sink,
            }) => reply(&self.gen(&commands, threads, sink)),
            Ok(Request::Link { node, iface, up }) => reply(&answer(self.link(&node, &iface, up))),
            Ok(Request::Node { node, action }) => reply(&answer(self.node(&node, action))),
            Ok(Request::Wait { until, bound_ms }) => {
                self.wait(&conn, until, Duration::from_millis(bound_ms))
            }
            Ok(Request::Apply {
                file,
                topology_len,
                dry_run,
                hold,
            }) => {
                let topo = topology_after(&mut reader, topology_len);
                let applied = topo.and_then(|t| self.apply(&file, t, dry_run, hold.as_deref()));
                reply(&answer(applied))
            }
            // `watching` is written by the subscription, before any event.
            Ok(Request::Events) => match self.subscribe(&conn) {
                Ok(()) => Ok(()),
                Err(e) => reply(&Reply::error(format!("watching the fleet: {e:#}"))),
            },
            // The main thread answers on this connection as the teardown goes.
            Ok(Request::Down { wait }) => conn.try_clone().map(|conn| {
                let _ = self.shutdown.send(Shutdown {
                    asker: Some(Asker { conn, wait }),
                });
            }),
        };
    }

    /// The right to change the live fleet: one change at a time, and none once the fleet
    /// is going down (or not up yet).
    fn change(&self) -> anyhow::Result<nsfleet_locks::MutexGuard<'_, ()>> {
        let guard = self.changes.lock();
        let state = *self.state.lock();
        if state != "up" {
            anyhow::bail!("fleet {:?} is {state}: it cannot be changed now", self.name);
        }
        Ok(guard)
    }

    /// Each interface's impairment now, as `nsfleet impair` left it.
    fn impairments(&self, n: &Node) -> Vec<(String, Impair)> {
        n.inspect::<Impaired, _>(self.defaults.impair, Clone::clone)
            .unwrap_or_default()
    }

    /// The node named `node`, or an error naming the closest ones.
    fn known_node(&self, node: &str) -> anyhow::Result<Arc<Node>> {
        let nodes = self.fleet.nodes();
        if let Some(n) = nodes.get(node) {
            return Ok(n.clone());
        }
        let names: Vec<&str> = nodes.iter().map(|n| n.name()).collect();
        let close = nsfleet_topology::closest(node, &names);
        let hint = if close.is_empty() {
            String::new()
        } else {
            format!(": did you mean {}?", close.join(" or "))
        };
        anyhow::bail!("fleet {:?} has no node {node:?}{hint}", self.name)
    }
}

/// The topology an `apply` sends after its request line: `len` bytes of JSON.
fn topology_after(reader: &mut impl Read, len: u64) -> anyhow::Result<nsfleet_topology::Topology> {
    if len > control::MAX_TOPOLOGY {
        anyhow::bail!(
            "a topology of {len} bytes: at most {} are taken",
            control::MAX_TOPOLOGY
        );
    }
    let topo = serde_json::from_reader(reader.take(len)).context("reading the topology")?;
    Ok(topo)
}

/// A change's reply, or its error as one.
fn answer(r: anyhow::Result<Reply>) -> Reply {
    r.unwrap_or_else(|e| Reply::failure(&e))
}

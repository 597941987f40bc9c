//! `routes` and `ping`: what a node's kernel says of where it can send, read in the node
//! for a scenario's expectations. Reads only: neither takes the `changes` lock, and a
//! ping's echoes go on the asker's connection thread, not on a worker.

use crate::control::Reply;
use crate::ready::Waiting;
use crate::Supervisor;
use anyhow::{bail, Context};
use nsfleet_subsys::reach::Reach;
use nsfleet_sys::ping::Pinger;
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most echoes one `ping` sends.
const MAX_COUNT: u32 = 100_000;
/// The longest interval between echoes, and the longest wait for one's reply, in ms.
const MAX_MS: u64 = 60_000;

impl Supervisor {
    /// `routes`: node `node`'s unicast routes of its main table, both families, by one
    /// dump each in its namespace.
    pub(super) fn routes(&self, node: &str) -> anyhow::Result<Reply> {
        self.known_node(node)?;
        let routes = (Reach::open(&self.fleet, &[node.to_string()]))
            .and_then(|mut r| r.routes(0))
            .with_context(|| format!("reading node {node:?}'s routes"))?;
        Ok(Reply::Routes {
            node: node.to_string(),
            routes,
        })
    }

    /// `ping`: `count` echo requests from node `node` to `addr`, the k-th sent at
    /// `k * interval_ms` from the first whatever is still unanswered (late ones are sent
    /// at once, and the schedule does not drift), each answered within `timeout_ms` or
    /// lost. The socket is opened in the node by a worker; the echoes are sent and read
    /// here. Ends early, with an error, when the fleet starts going down, the node is
    /// removed, or the asker hangs up: its socket holds the node's namespace.
    pub(super) fn ping(
        &self,
        conn: &UnixStream,
        node: &str,
        addr: IpAddr,
        count: u32,
        interval_ms: u64,
        timeout_ms: u64,
    ) -> anyhow::Result<Reply> {
        if !(1..=MAX_COUNT).contains(&count) {
            bail!("a ping sends 1 to {MAX_COUNT} echo requests, not {count}");
        }
        if !(1..=MAX_MS).contains(&interval_ms) {
            bail!("a ping's interval is 1 to {MAX_MS} ms, not {interval_ms}");
        }
        if !(1..=MAX_MS).contains(&timeout_ms) {
            bail!("a ping's timeout is 1 to {MAX_MS} ms, not {timeout_ms}");
        }
        let n = self.known_node(node)?;
        // Counted before the socket exists, dropped after it (declared first).
        let _counted = Waiting::new(self);
        let v6 = addr.is_ipv6();
        let mut pinger = (self.fleet)
            .on_node(node, move |_| Ok(Pinger::open(v6)?))
            .with_context(|| format!("opening an ICMP socket in node {node:?}"))?;
        let (interval, timeout) = (
            Duration::from_millis(interval_ms),
            Duration::from_millis(timeout_ms),
        );
        let failed = |e: std::io::Error| anyhow::anyhow!("pinging {addr} from node {node:?}: {e}");
        // Each echo's round trip, by its place in the schedule.
        let mut rtts: Vec<Option<Duration>> = vec![None; count as usize];
        // Sequence number to (place, sent at), of the echoes still waited for; and their
        // deadlines in the order they were sent, which is their deadlines' order.
        let mut waited: HashMap<u16, (usize, Instant)> = HashMap::new();
        let mut deadlines: VecDeque<(Instant, u16, usize)> = VecDeque::new();
        let start = Instant::now();
        let mut next: u32 = 0;
        loop {
            if let Some(why) = self.ping_stopped(conn, node, &n) {
                bail!("pinging {addr} from node {node:?}: stopped, {why}");
            }
            let now = Instant::now();
            while let Some(&(deadline, seq, k)) = deadlines.front() {
                if deadline > now {
                    break;
                }
                deadlines.pop_front();
                if waited.get(&seq).is_some_and(|(place, _)| *place == k) {
                    waited.remove(&seq);
                }
            }
            let send_at = (next < count).then(|| start + interval * next);
            if send_at.is_some_and(|at| at <= now) {
                let sent = Instant::now();
                if let Some(seq) = pinger.send(addr).map_err(failed)? {
                    let k = next as usize;
                    waited.insert(seq, (k, sent));
                    deadlines.push_back((sent + timeout, seq, k));
                }
                next += 1;
                continue;
            }
            // Every echo sent, and each answered or lost.
            if send_at.is_none() && waited.is_empty() {
                break;
            }
            // The next send, or the next deadline (of an echo maybe answered since: the
            // wake-up is then early, and harmless).
            let until = match (send_at, deadlines.front()) {
                (Some(at), Some(&(d, _, _))) => at.min(d),
                (Some(at), None) => at,
                (None, Some(&(d, _, _))) => d,
                // Not so: each echo waited for has its deadline queued.
                (None, None) => break,
            };
            // At most 50 ms at a time: a fleet going down is noticed within them, as a
            // wait notices it.
            let until = until.min(Instant::now() + Duration::from_millis(50));
            if let Some((seq, at)) = pinger.reply(until).map_err(failed)? {
                if let Some((k, sent)) = waited.remove(&seq) {
                    let rtt = at.saturating_duration_since(sent);
                    if rtt <= timeout {
                        rtts[k] = Some(rtt);
                    }
                }
            }
        }
        let rtt_ms: Vec<f64> = (rtts.iter().flatten())
            .map(|d| d.as_secs_f64() * 1e3)
            .collect();
        Ok(Reply::Pinged {
            node: node.to_string(),
            addr,
            sent: count,
            received: rtt_ms.len() as u32,
            rtt_ms,
        })
    }

    /// Why a ping must stop now, if it must: the fleet is going down, node `name` is not
    /// `node` any more (removed by an `apply`), or the asker closed its connection (it
    /// sends nothing after its request: its end readable means it is gone).
    fn ping_stopped(
        &self,
        conn: &UnixStream,
        name: &str,
        node: &Arc<nsfleet_core::Node>,
    ) -> Option<&'static str> {
        if self.going() {
            return Some("the fleet is going down");
        }
        let same = (self.fleet.nodes().get(name)).is_some_and(|now| Arc::ptr_eq(now, node));
        if !same {
            return Some("the node was removed");
        }
        let hung_up = nsfleet_sys::poll_readable(&[conn.as_fd()], Some(Duration::ZERO));
        if hung_up.map_or(true, |r| r[0]) {
            return Some("the asker is gone");
        }
        None
    }
}

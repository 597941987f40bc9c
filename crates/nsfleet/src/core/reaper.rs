//! The reaper: one thread that drains the death row in batches (seeds 001 and 002).
//!
//! For each batch: `exit` of every subsystem (in reverse registration order) on every node,
//! then each subsystem's `exit_batch` once, then the core frees the per-node state and
//! closes the namespaces' descriptors, then ONE wait until the kernel has reclaimed the
//! whole batch. A batch is at most `bound` nodes and the next one starts only when the
//! previous is reclaimed, so no more than `bound` destroyed-but-unreclaimed namespaces
//! are ever outstanding, whatever the churn.

use super::node::Node;
use super::reclaim::{Group, ReclaimWatch};
use super::registry::Registry;
use super::subsystem::AnyState;
use crate::sys;
use crossbeam_channel::{Receiver, Sender};
use nsfleet_netlink::NlSocket;
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the kernel may go without announcing any namespace of a batch before we look
/// for someone else holding them.
const STALL: Duration = Duration::from_secs(5);
/// After this long with no holder found and no announcement, stop waiting and say so.
const GIVE_UP: Duration = Duration::from_secs(300);

/// A namespace that outlived its node because something else holds it.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Held {
    pub node: String,
    /// Who holds it, as "pid 1234 (bash)"; empty when nobody could be found.
    pub holders: Vec<String>,
}

/// What a caller of `destroy` waits on.
#[derive(Default)]
pub struct Ticket {
    state: Mutex<TicketState>,
    changed: Condvar,
}

#[derive(Clone, Debug, Default)]
pub struct TicketState {
    pub total: usize,
    pub dropped: usize,
    pub reclaimed: usize,
    pub held: Vec<Held>,
    pub dropped_at: Option<Instant>,
    pub settled_at: Option<Instant>,
}

impl Ticket {
    fn new(total: usize) -> Arc<Self> {
        let t = Ticket::default();
        t.state.lock().total = total;
        if total == 0 {
            let mut s = t.state.lock();
            s.dropped_at = Some(Instant::now());
            s.settled_at = s.dropped_at;
        }
        Arc::new(t)
    }

    fn update(&self, f: impl FnOnce(&mut TicketState)) {
        let mut s = self.state.lock();
        f(&mut s);
        let now = Some(Instant::now());
        if s.dropped == s.total && s.dropped_at.is_none() {
            s.dropped_at = now;
        }
        if s.reclaimed + s.held.len() == s.total && s.settled_at.is_none() {
            s.settled_at = now;
        }
        self.changed.notify_all();
    }

    /// Waits until every node's namespace descriptor is closed.
    pub fn wait_dropped(&self) -> TicketState {
        let mut s = self.state.lock();
        while s.dropped_at.is_none() {
            self.changed.wait(&mut s);
        }
        s.clone()
    }

    /// Waits until every node is reclaimed by the kernel or found held by someone else.
    pub fn wait_settled(&self) -> TicketState {
        let mut s = self.state.lock();
        while s.settled_at.is_none() {
            self.changed.wait(&mut s);
        }
        s.clone()
    }

    pub fn peek(&self) -> TicketState {
        self.state.lock().clone()
    }
}

struct Doomed {
    node: Arc<Node>,
    ticket: Arc<Ticket>,
}

/// The death row's sending side and the reaper thread.
pub struct Reaper {
    tx: Option<Sender<Doomed>>,
    thread: Option<JoinHandle<()>>,
    waiting: Arc<AtomicUsize>,
}

struct ReaperThread {
    rx: Receiver<Doomed>,
    registry: Arc<Registry>,
    watch: Arc<ReclaimWatch>,
    hub: NlSocket,
    home: Arc<OwnedFd>,
    bound: usize,
    waiting: Arc<AtomicUsize>,
}

impl Reaper {
    pub fn start(
        registry: Arc<Registry>,
        watch: Arc<ReclaimWatch>,
        hub: &OwnedFd,
        home: Arc<OwnedFd>,
        bound: usize,
    ) -> io::Result<Self> {
        sys::setns_net(hub.as_fd())?;
        let hub_socket = NlSocket::open();
        sys::setns_net(home.as_fd())?;
        let (tx, rx) = crossbeam_channel::unbounded();
        let waiting = Arc::new(AtomicUsize::new(0));
        let t = ReaperThread {
            rx,
            registry,
            watch,
            hub: hub_socket?,
            home,
            bound: bound.max(1),
            waiting: waiting.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("nsfleet-reaper".into())
            .spawn(move || t.run())?;
        Ok(Reaper {
            tx: Some(tx),
            thread: Some(thread),
            waiting,
        })
    }

    /// Puts nodes on death row; the ticket tells when they are gone.
    pub fn doom(&self, nodes: Vec<Arc<Node>>) -> Arc<Ticket> {
        let ticket = Ticket::new(nodes.len());
        self.waiting.fetch_add(nodes.len(), Ordering::Relaxed);
        let tx = self.tx.as_ref().expect("reaper running");
        for node in nodes {
            tx.send(Doomed {
                node,
                ticket: ticket.clone(),
            })
            .expect("reaper running");
        }
        ticket
    }

    /// Nodes on death row or torn down but not yet reclaimed.
    pub fn awaiting_reclaim(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl ReaperThread {
    fn run(mut self) {
        while let Ok(first) = self.rx.recv() {
            let mut batch = vec![first];
            while batch.len() < self.bound {
                match self.rx.try_recv() {
                    Ok(d) => batch.push(d),
                    Err(_) => break,
                }
            }
            let group = self.teardown(&batch);
            for d in &batch {
                d.ticket.update(|s| s.dropped += 1);
            }
            let held = self.wait_reclaimed(&batch, group);
            // Before the tickets wake anyone: whoever a ticket wakes must see the count
            // without these nodes.
            self.waiting.fetch_sub(batch.len(), Ordering::Relaxed);
            for d in &batch {
                match held.get(d.node.name()) {
                    Some(h) => d.ticket.update(|s| s.held.push(h.clone())),
                    None => d.ticket.update(|s| s.reclaimed += 1),
                }
            }
        }
    }

    /// exit per node, exit_batch per subsystem, free states, close the namespaces.
    fn teardown(&self, batch: &[Doomed]) -> Group {
        // Shared, as cleanup_net holds pernet_ops_rwsem: the subsystems that ran init on
        // these nodes are the ones that run exit on them.
        let subs = self.registry.read();
        let mut states: Vec<Vec<(&Node, AnyState)>> = Vec::with_capacity(subs.len());
        for sub in subs.iter().rev() {
            let mut exiting = Vec::new();
            for d in batch {
                if let Some(mut state) = d.node.take_state(sub.id) {
                    sub.ops.exit(&d.node, &mut state);
                    exiting.push((&*d.node, state));
                }
            }
            states.push(exiting);
        }
        for (sub, exiting) in subs.iter().rev().zip(states.iter_mut()) {
            if !exiting.is_empty() {
                sub.ops.exit_batch(exiting);
            }
        }
        drop(states);
        drop(subs);
        let group = self.watch.expect(batch.iter().map(|d| d.node.nsid()));
        for d in batch {
            d.node.close_netns();
        }
        group
    }

    /// The one wait per batch. Returns the nodes found held by someone else.
    fn wait_reclaimed(&mut self, batch: &[Doomed], group: Group) -> HashMap<String, Held> {
        let mut held = HashMap::new();
        let started = Instant::now();
        loop {
            let mut ids = self.watch.wait(&group, STALL);
            if ids.is_empty() {
                break;
            }
            let stuck: Vec<&Arc<Node>> = batch
                .iter()
                .map(|d| &d.node)
                .filter(|n| ids.contains(&n.nsid()))
                .collect();
            let holders = holders_of(stuck.iter().map(|n| n.inode()).collect());
            let give_up = started.elapsed() > GIVE_UP;
            for n in stuck {
                let who = holders.get(&n.inode()).cloned().unwrap_or_default();
                if !who.is_empty() || give_up {
                    held.insert(
                        n.name().to_string(),
                        Held {
                            node: n.name().to_string(),
                            holders: who,
                        },
                    );
                    self.watch.forget(&group, &[n.nsid()]);
                    ids.retain(|i| *i != n.nsid());
                }
            }
            if ids.is_empty() {
                break;
            }
        }
        if held.len() < batch.len() {
            if let Err(e) = self.watch.fence(&mut self.hub, &self.home, GIVE_UP) {
                eprintln!("nsfleet: reclamation fence failed: {e}");
            }
        }
        held
    }
}

/// Who keeps these namespaces alive: tasks inside them, open descriptors, bind mounts.
/// Only called when the kernel has gone quiet, so a full /proc walk is affordable.
pub fn holders_of(inodes: Vec<u64>) -> HashMap<u64, Vec<String>> {
    let want: std::collections::HashSet<u64> = inodes.into_iter().collect();
    let mut found: HashMap<u64, Vec<String>> = HashMap::new();
    let ino_of = |link: &std::path::Path| -> Option<u64> {
        let t = std::fs::read_link(link).ok()?;
        t.to_str()?
            .strip_prefix("net:[")?
            .strip_suffix(']')?
            .parse()
            .ok()
    };
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return found;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let comm = std::fs::read_to_string(p.path().join("comm")).unwrap_or_default();
        let who = format!("pid {pid} ({})", comm.trim());
        let mut links: Vec<std::path::PathBuf> = Vec::new();
        if let Ok(tasks) = std::fs::read_dir(p.path().join("task")) {
            links.extend(tasks.flatten().map(|t| t.path().join("ns/net")));
        }
        if let Ok(fds) = std::fs::read_dir(p.path().join("fd")) {
            links.extend(fds.flatten().map(|f| f.path()));
        }
        for l in links {
            if let Some(ino) = ino_of(&l).filter(|i| want.contains(i)) {
                let v = found.entry(ino).or_default();
                if !v.contains(&who) {
                    v.push(who.clone());
                }
            }
        }
    }
    if let Ok(mounts) = std::fs::read_to_string("/proc/self/mountinfo") {
        for line in mounts.lines().filter(|l| l.contains(" nsfs ")) {
            for ino in &want {
                if line.contains(&format!("net:[{ino}]")) {
                    let target = line.split(' ').nth(4).unwrap_or("?");
                    found
                        .entry(*ino)
                        .or_default()
                        .push(format!("bind mount {target}"));
                }
            }
        }
    }
    found
}

//! The reaper: one thread that drains the death row in batches (seeds 001 and 002).
//!
//! For each batch, everything on the death row when it wakes: `exit` of every subsystem
//! (in reverse registration order) on every node, then each subsystem's `exit_batch` once,
//! then the core frees the per-node state and closes the namespaces' descriptors, then ONE
//! wait until the kernel has reclaimed the whole batch, and one look for anything that
//! still holds one of its namespaces.
//!
//! The bound on destroyed-but-unreclaimed namespaces is enforced where seed 002's danger
//! comes from, creation: [`Reaper::admit`] holds a new node back while the backlog is at
//! the bound, so create/destroy churn cannot outrun the kernel's reclamation. A batch is
//! what is on death row when the reaper wakes, so a fleet going down may take a few.
//! Forcing one batch for a whole fleet measured worse: 50,000 routers took 280 s to
//! reclaim, against 84 s.

use super::node::{AnyState, Node};
use super::reclaim::ReclaimWatch;
use super::registry::Registry;
use crossbeam_channel::{Receiver, Sender};
use nsfleet_sys as sys;
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long one reclamation fence may take before we stop waiting for the kernel.
const FENCE_STALL: Duration = Duration::from_secs(300);

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
    /// Protects what the waiter reads; the reaper updates it and notifies `changed`.
    /// A leaf lock.
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
    /// Set when the kernel could not be confirmed to have reclaimed the batch in time.
    pub unconfirmed: Option<String>,
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

/// Nodes on death row or torn down but not yet reclaimed, and the bound on them.
struct Backlog {
    /// Protects the count of doomed-and-unreclaimed nodes; `shrunk` is notified when it
    /// falls. A leaf lock: `admit` waits on it inside a creation (under the registry's
    /// shared lock), which is why the reaper takes that lock recursively.
    count: Mutex<usize>,
    shrunk: Condvar,
    bound: usize,
}

/// The death row's sending side and the reaper thread.
pub struct Reaper {
    tx: Option<Sender<Doomed>>,
    thread: Option<JoinHandle<()>>,
    backlog: Arc<Backlog>,
}

struct ReaperThread {
    rx: Receiver<Doomed>,
    /// Any nsfs descriptor: the filesystem that namespace handles are opened on.
    nsfs: OwnedFd,
    registry: Arc<Registry>,
    watch: Arc<ReclaimWatch>,
    backlog: Arc<Backlog>,
}

impl Reaper {
    pub fn start(
        registry: Arc<Registry>,
        watch: Arc<ReclaimWatch>,
        bound: usize,
    ) -> io::Result<Self> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let backlog = Arc::new(Backlog {
            count: Mutex::new(0),
            shrunk: Condvar::new(),
            bound: bound.max(1),
        });
        let t = ReaperThread {
            rx,
            nsfs: sys::current_netns()?,
            registry,
            watch,
            backlog: backlog.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("nsfleet-reaper".into())
            .spawn(move || t.run())?;
        Ok(Reaper {
            tx: Some(tx),
            thread: Some(thread),
            backlog,
        })
    }

    /// Puts nodes on death row, switches first; the ticket tells when they are gone.
    ///
    /// Why switches first: a switch's namespace holds a peer id for every namespace its
    /// ports lead to, and for each namespace it destroys, the kernel scans the ids of
    /// every namespace still alive (`unhash_nsid` in `cleanup_net`). Gone first, a
    /// switch's ids are not scanned again for each of its routers: at 50,000 routers
    /// over 50 shards, the other order cost 2.5 billion idr visits (130 s to reclaim).
    ///
    /// Before them, the nodes that tenants doomed with them live in: a tenant that goes
    /// while its host stays deletes its devices one by one (a veth's deletion waits for
    /// RCU grace periods: 13 s for the 1,056 ports of Mininet's tree1024), while a host
    /// gone first takes them all in one `cleanup_net` batch.
    pub fn doom(&self, mut nodes: Vec<Arc<Node>>) -> Arc<Ticket> {
        let hosts: std::collections::HashSet<String> = (nodes.iter())
            .filter_map(|n| n.config().netns_of.clone())
            .collect();
        nodes.sort_by_key(|n| (!hosts.contains(n.name()), !n.config().switch));
        let ticket = Ticket::new(nodes.len());
        *self.backlog.count.lock() += nodes.len();
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

    /// Blocks while the backlog of unreclaimed namespaces is at the bound; creation calls
    /// it before each new namespace. Costs one uncontended lock when there is no backlog.
    pub fn admit(&self) {
        let mut n = self.backlog.count.lock();
        while *n >= self.backlog.bound {
            self.backlog.shrunk.wait(&mut n);
        }
    }

    /// Returns once every node doomed so far is reclaimed (or found held): the reaper is
    /// idle, and no barrier of its own is waiting on the reclamation watch.
    pub fn wait_idle(&self) {
        let mut n = self.backlog.count.lock();
        while *n > 0 {
            self.backlog.shrunk.wait(&mut n);
        }
    }

    /// Nodes on death row or torn down but not yet reclaimed.
    pub fn awaiting_reclaim(&self) -> usize {
        *self.backlog.count.lock()
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
    fn run(self) {
        while let Ok(first) = self.rx.recv() {
            let mut batch = vec![first];
            batch.extend(self.rx.try_iter());
            self.teardown(&batch);
            for same in by_ticket(&batch) {
                same[0].ticket.update(|s| s.dropped += same.len());
            }
            let unconfirmed = self.watch.barrier(FENCE_STALL).err().map(|e| e.to_string());
            // Only now: some references go a grace period after their holder lets go
            // (a closed netlink socket's, for one), and the barrier spans several.
            let held = held_by_whom(self.still_open(&batch));

            {
                // Before the tickets wake anyone: whoever a ticket wakes must see the
                // backlog without these nodes.
                let mut n = self.backlog.count.lock();
                *n -= batch.len();
                self.backlog.shrunk.notify_all();
            }
            for same in by_ticket(&batch) {
                same[0].ticket.update(|s| {
                    for d in same {
                        // A tenant shares its host's inode, and had nothing to reclaim.
                        let held = held.get(&d.node.inode()).filter(|_| !d.node.is_tenant());
                        match held {
                            Some(h) => s.held.push(h.clone()),
                            None => s.reclaimed += 1,
                        }
                    }
                    if s.unconfirmed.is_none() {
                        s.unconfirmed.clone_from(&unconfirmed);
                    }
                });
            }
        }
    }

    /// exit per node, exit_batch per subsystem, free states, close the namespaces.
    fn teardown(&self, batch: &[Doomed]) {
        // Shared, as cleanup_net holds pernet_ops_rwsem: the subsystems that ran init on
        // these nodes are the ones that run exit on them. Recursive: a creation holding the
        // lock shared may be waiting for us in `admit`, and a registration queued behind
        // it must not make us wait for that creation.
        let subs = self.registry.read_recursive();
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
        for d in batch {
            d.node.close_netns();
        }
    }

    /// The batch's namespaces that may still exist once we let go of them: a handle that
    /// still opens proves one alive, and the reopened descriptor is kept until we know who
    /// holds it, so that its inode cannot pass to a new namespace under the scan. A handle
    /// that does not open proves nothing here (see `sys::reopen_ns`), nor is there one
    /// on older kernels: such a node is a suspect, named only if a holder of that very
    /// namespace (its handle, where it has one) turns up.
    fn still_open<'b>(&self, batch: &'b [Doomed]) -> Vec<(&'b Node, Option<OwnedFd>)> {
        let mut open = Vec::new();
        // A tenant's namespace is its host's: it had none of its own to reclaim.
        for d in batch.iter().filter(|d| !d.node.is_tenant()) {
            match d
                .node
                .handle()
                .map(|h| sys::reopen_ns(self.nsfs.as_fd(), h))
            {
                Some(Ok(Some(fd))) => open.push((&*d.node, Some(fd))),
                // Gone, or held only from other PID namespaces on a kernel that will not
                // say so to ours (see `sys::reopen_ns`): the /proc walk tells, by handle.
                Some(Ok(None)) | Some(Err(_)) | None => open.push((&*d.node, None)),
            }
        }
        open
    }
}

/// The batch in runs of nodes doomed together: one ticket update (one lock, one wake-up)
/// per run rather than per node. `doom` queues a ticket's nodes back to back.
fn by_ticket(batch: &[Doomed]) -> impl Iterator<Item = &[Doomed]> {
    batch.chunk_by(|a, b| Arc::ptr_eq(&a.ticket, &b.ticket))
}

/// Who holds each namespace still open, by inode. One /proc walk, only when needed.
fn held_by_whom(open: Vec<(&Node, Option<OwnedFd>)>) -> HashMap<u64, Held> {
    if open.is_empty() {
        return HashMap::new();
    }
    let want = (open.iter()).map(|(n, _)| (n.inode(), n.handle().cloned()));
    let holders = sys::netns_holders(&want.collect());
    let mut held = HashMap::new();
    for (n, fd) in &open {
        let who = holders.get(&n.inode()).cloned();
        // A handle that opened proves the namespace alive; without one, only a holder does.
        let who = if fd.is_some() {
            Some(who.unwrap_or_default())
        } else {
            who
        };
        if let Some(holders) = who {
            held.insert(
                n.inode(),
                Held {
                    node: n.name().to_string(),
                    holders,
                },
            );
        }
    }
    held
}

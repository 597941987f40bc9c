//! Knowing when the kernel has really destroyed a namespace (seeds 001 and 002).
//!
//! Every node gets an id (nsid) in the fleet's hub namespace. `cleanup_net` removes that
//! id as it takes the namespace, announcing RTM_DELNSID to RTNLGRP_NSID listeners in the
//! hub: a precise, per-namespace signal, no polling. `cleanup_net` runs on an ordered
//! workqueue and takes everything queued when it starts, so once every node of a batch
//! has been announced, a *fence* namespace dropped afterwards lands in a later run, which
//! starts only when the earlier ones have finished, exit_batch, rcu_barrier and free
//! included. Its RTM_DELNSID therefore means: the whole batch is reclaimed.

use crate::sys;
use nsfleet_netlink::{rtnl, Batch, NlSocket};
use parking_lot::{Condvar, Mutex};
use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Ids are assigned explicitly from here up, far above the ones the kernel hands out
/// itself (lowest free first) when a link crosses into the hub.
const FIRST_NSID: i32 = 1 << 20;

pub struct ReclaimWatch {
    next_id: AtomicI32,
    pending: Mutex<Pending>,
    changed: Condvar,
    stop: AtomicBool,
    listener: Mutex<Option<JoinHandle<()>>>,
}

/// Ids awaited, in groups (one per batch), so that an announcement costs O(1).
#[derive(Default)]
struct Pending {
    group_of: HashMap<i32, u64>,
    left: HashMap<u64, usize>,
    next_group: u64,
}

impl Pending {
    fn gone(&mut self, id: i32) {
        if let Some(g) = self.group_of.remove(&id) {
            if let Some(n) = self.left.get_mut(&g) {
                *n -= 1;
            }
        }
    }
}

/// A set of ids awaited together (see [`ReclaimWatch::expect`]).
pub struct Group(u64);

impl ReclaimWatch {
    /// Starts listening in `hub`; the listener thread opens its sockets there and returns
    /// to `home`, so it pins nothing.
    pub fn start(hub: &OwnedFd, home: &OwnedFd) -> io::Result<Arc<Self>> {
        let watch = Arc::new(ReclaimWatch {
            next_id: AtomicI32::new(FIRST_NSID),
            pending: Mutex::new(Pending::default()),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
            listener: Mutex::new(None),
        });
        let (hub, home) = (hub.try_clone()?, home.try_clone()?);
        let (tx, rx) = crossbeam_channel::bounded(1);
        let w = watch.clone();
        let t = std::thread::Builder::new()
            .name("nsfleet-reclaim".into())
            .spawn(move || {
                let sockets = (|| {
                    sys::setns_net(hub.as_fd())?;
                    let listen = NlSocket::open()?;
                    listen.join_group(rtnl::RTNLGRP_NSID)?;
                    let dump = NlSocket::open()?;
                    sys::setns_net(home.as_fd())?;
                    Ok::<_, io::Error>((listen, dump))
                })();
                drop((hub, home));
                match sockets {
                    Ok((listen, dump)) => {
                        let _ = tx.send(Ok(()));
                        w.listen(listen, dump);
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                    }
                }
            })?;
        rx.recv().map_err(|_| io::Error::other("reclaim listener died"))??;
        *watch.listener.lock() = Some(t);
        Ok(watch)
    }

    pub fn alloc_id(&self) -> i32 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Registers ids whose RTM_DELNSID we are about to wait for. Call it before dropping
    /// the namespaces, or the announcement can come before anyone listens for it.
    pub fn expect(&self, ids: impl IntoIterator<Item = i32>) -> Group {
        let mut p = self.pending.lock();
        let g = p.next_group;
        p.next_group += 1;
        let mut n = 0;
        for id in ids {
            p.group_of.insert(id, g);
            n += 1;
        }
        p.left.insert(g, n);
        Group(g)
    }

    /// Waits until every id of the group is announced, or until none has been for
    /// `stall`. Returns the ids still awaited (empty: all announced, group closed).
    pub fn wait(&self, group: &Group, stall: Duration) -> Vec<i32> {
        let mut p = self.pending.lock();
                let mut left = p.left.get(&group.0).copied().unwrap_or(0);
        let mut deadline = Instant::now() + stall;
        while left > 0 {
            if self.changed.wait_until(&mut p, deadline).timed_out() {
                break;
            }
                        let now = p.left.get(&group.0).copied().unwrap_or(0);

            if now < left {
                left = now;
                deadline = Instant::now() + stall;
            }
        }
        if left == 0 {
            p.left.remove(&group.0);
            return Vec::new();
        }
        p.group_of.iter().filter(|(_, g)| **g == group.0).map(|(id, _)| *id).collect()
    }

    /// Stops waiting for these ids (their namespaces are held elsewhere).
    pub fn forget(&self, group: &Group, ids: &[i32]) {
        let mut p = self.pending.lock();
        for id in ids {
            p.gone(*id);
        }
        if p.left.get(&group.0) == Some(&0) {
            p.left.remove(&group.0);
        }
    }

    /// Drops a fresh namespace and waits for the kernel to take it: see the module doc.
    /// Creates it on the calling thread, which returns to `home` at once.
    pub fn fence(&self, hub: &mut NlSocket, home: &OwnedFd, stall: Duration) -> io::Result<()> {
        sys::unshare_net()?;
        let fd = sys::current_netns();
        sys::setns_net(home.as_fd())?;
        let fd = fd?;
        let id = self.alloc_id();
        let mut b = Batch::new();
        rtnl::new_nsid(&mut b, hub.next_seq(), fd.as_raw_fd(), id);
        hub.execute_all(&b)
            .map_err(|e| io::Error::from_raw_os_error(e.errno))?;
                let group = self.expect([id]);
        drop(fd);
        if self.wait(&group, stall).is_empty() {
            Ok(())
        } else {
            self.forget(&group, &[id]);
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the kernel did not reclaim the fence namespace",
            ))
        }
    }

    /// Stops the listener thread (it holds an `Arc` of the watch, so dropping cannot).
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.listener.lock().take() {
            let _ = t.join();
        }
    }

    fn listen(&self, mut listen: NlSocket, mut dump: NlSocket) {
        let mut gone = Vec::new();
        while !self.stop.load(Ordering::Relaxed) {
            let r = listen.recv_each(Some(Duration::from_millis(200)), |m| {
                if let Some((false, id)) = rtnl::parse_nsid(m) {
                    gone.push(id);
                }
            });
            match r {
                Ok(()) => self.announce(&mut gone),
                Err(e) if e.kind() == io::ErrorKind::TimedOut => {}
                // Announcements were dropped: ask the hub which ids still exist.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => self.resync(&mut dump),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    fn announce(&self, gone: &mut Vec<i32>) {
        if gone.is_empty() {
            return;
        }
        let mut p = self.pending.lock();
        for id in gone.drain(..) {
            p.gone(id);
        }
        self.changed.notify_all();
    }

    fn resync(&self, dump: &mut NlSocket) {
        let mut alive = HashSet::new();
        let mut b = Batch::new();
        rtnl::dump_nsids(&mut b, dump.next_seq());
        let ok = dump
            .dump(&b, |m| {
                if let Some((true, id)) = rtnl::parse_nsid(m) {
                    alive.insert(id);
                }
            })
            .is_ok();
        if ok {
            let mut p = self.pending.lock();
            let dead: Vec<i32> = p.group_of.keys().filter(|id| !alive.contains(id)).copied().collect();
            for id in dead {
                p.gone(id);
            }
            self.changed.notify_all();
        }
    }
}

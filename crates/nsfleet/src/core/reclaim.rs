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
use std::collections::HashSet;
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
    outstanding: Mutex<HashSet<i32>>,
    changed: Condvar,
    stop: AtomicBool,
    listener: Mutex<Option<JoinHandle<()>>>,
}

impl ReclaimWatch {
    /// Starts listening in `hub`; the listener thread opens its sockets there and returns
    /// to `home`, so it pins nothing.
    pub fn start(hub: &OwnedFd, home: &OwnedFd) -> io::Result<Arc<Self>> {
        let watch = Arc::new(ReclaimWatch {
            next_id: AtomicI32::new(FIRST_NSID),
            outstanding: Mutex::new(HashSet::new()),
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
        rx.recv()
            .map_err(|_| io::Error::other("reclaim listener died"))??;
        *watch.listener.lock() = Some(t);
        Ok(watch)
    }

    pub fn alloc_id(&self) -> i32 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Registers ids whose RTM_DELNSID we are about to wait for. Call it before dropping
    /// the namespaces, or the announcement can come before anyone listens for it.
    pub fn expect(&self, ids: impl IntoIterator<Item = i32>) {
        self.outstanding.lock().extend(ids);
    }

    /// Stops waiting for these ids (their namespaces are held elsewhere).
    pub fn forget(&self, ids: &[i32]) {
        let mut o = self.outstanding.lock();
        for id in ids {
            o.remove(id);
        }
    }

    /// Waits until none of `ids` is outstanding, or until nothing of them has been
    /// announced for `stall`. Returns the ids still outstanding (empty: all announced).
    pub fn wait(&self, ids: &[i32], stall: Duration) -> Vec<i32> {
        let mut o = self.outstanding.lock();
        let mut left = ids.iter().filter(|i| o.contains(i)).count();
        let mut last_progress = Instant::now();
        while left > 0 {
            let deadline = last_progress + stall;
            if self.changed.wait_until(&mut o, deadline).timed_out() {
                break;
            }
            let now_left = ids.iter().filter(|i| o.contains(i)).count();
            if now_left < left {
                left = now_left;
                last_progress = Instant::now();
            }
        }
        ids.iter().copied().filter(|i| o.contains(i)).collect()
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
        self.expect([id]);
        drop(fd);
        if self.wait(&[id], stall).is_empty() {
            Ok(())
        } else {
            self.forget(&[id]);
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
        let mut o = self.outstanding.lock();
        for id in gone.drain(..) {
            o.remove(&id);
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
            let mut o = self.outstanding.lock();
            o.retain(|id| alive.contains(id));
            self.changed.notify_all();
        }
    }
}

//! Knowing when the kernel has really destroyed the namespaces we dropped (seeds 001, 002).
//!
//! `cleanup_net` runs on an ordered workqueue and takes everything queued when it starts.
//! A *fence* is a fresh namespace with an id (nsid) in the fleet's hub namespace: dropped,
//! it is queued behind everything dropped before it, and `cleanup_net` announces the
//! removal of its id (RTM_DELNSID, to RTNLGRP_NSID listeners in the hub) as the run that
//! takes it starts. That run may still hold namespaces dropped just before the fence, so a
//! [`ReclaimWatch::barrier`] drops a second fence once the first is announced: a later run
//! takes it, and that run starts only when the earlier one has finished, exits,
//! `rcu_barrier` and frees included. Its announcement means: everything dropped before the
//! barrier began is reclaimed.
//!
//! Only fences get ids. Giving every node one would make the kernel's own work quadratic:
//! `__peernet2id()` scans a namespace's whole id table, on every assignment and for every
//! dying namespace.

use nsfleet_netlink::{rtnl, Batch, NlSocket};
use nsfleet_sys as sys;
use parking_lot::{Condvar, Mutex};
use std::collections::HashSet;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Drops `ns` and returns once the kernel has destroyed it, without its nsfs handle
/// (which some kernels do not open from a supervisor's PID namespace, see
/// `sys::reopen_ns`): a witness namespace of the calling thread's own gives it an id,
/// whose removal the kernel announces there as the cleanup run that takes it starts;
/// then a fence dropped after it, announced once that run has finished (as
/// [`ReclaimWatch::barrier`]). The thread returns to `home`; the witness, held by
/// nothing once this returns, goes in the kernel's next cleanup run.
pub fn drop_and_await(ns: impl AsFd, home: &OwnedFd, stall: Duration) -> io::Result<()> {
    let (mut listen, mut assign) = (|| -> io::Result<(NlSocket, NlSocket)> {
        sys::unshare_net()?;
        let mut listen = NlSocket::open()?;
        listen.join_group(rtnl::RTNLGRP_NSID)?;
        Ok((listen, NlSocket::open()?))
    })()
    .and_then(|s| sys::setns_net(home.as_fd()).map(|()| s))
    .inspect_err(|_| {
        let _ = sys::setns_net(home.as_fd());
    })?;
    give_nsid(&mut assign, ns.as_fd(), 1)?;
    drop(ns);
    await_removal(&mut listen, 1, stall)?;
    let fence = new_fence(home)?;
    give_nsid(&mut assign, fence.as_fd(), 2)?;
    drop(fence);
    await_removal(&mut listen, 2, stall)
}

/// A new network namespace for a fence, made on the calling thread, which returns to
/// `home` at once.
fn new_fence(home: &OwnedFd) -> io::Result<OwnedFd> {
    sys::unshare_net()?;
    let fd = sys::current_netns();
    sys::setns_net(home.as_fd())?;
    fd
}

/// Gives the namespace behind `fd` the id `id` in the namespace of `sock`, whose
/// listeners hear of its removal (RTM_DELNSID) when the kernel destroys it.
fn give_nsid(sock: &mut NlSocket, fd: std::os::fd::BorrowedFd<'_>, id: i32) -> io::Result<()> {
    let mut b = Batch::new();
    rtnl::new_nsid(&mut b, sock.next_seq(), fd.as_raw_fd(), id);
    sock.execute_all(&b)
        .map_err(|e| io::Error::from_raw_os_error(e.errno))
}

/// Waits up to `stall` for the kernel to say, on `listen`, that id `id` is gone.
fn await_removal(listen: &mut NlSocket, id: i32, stall: Duration) -> io::Result<()> {
    let deadline = std::time::Instant::now() + stall;
    let mut gone = false;
    while !gone {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the kernel did not destroy a namespace it was awaited for",
            ));
        }
        match listen.recv_each(Some(left), |m| {
            gone |= rtnl::parse_nsid(m) == Some((false, id))
        }) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub struct ReclaimWatch {
    next_id: AtomicI32,
    /// Protects the fence ids dropped and not yet announced; `announced` is notified when
    /// the listener removes one. A leaf lock, like every lock of the watch.
    awaited: Mutex<HashSet<i32>>,
    announced: Condvar,
    /// Protects the socket in the hub that assigns fence ids: one assignment at a time.
    /// `None` once the watch is shut down.
    hub: Mutex<Option<NlSocket>>,
    home: OwnedFd,
    /// Protects the pipe whose closing wakes the listener at shutdown.
    wake: Mutex<Option<std::io::PipeWriter>>,
    /// Protects the listener thread's handle, joined once at shutdown.
    listener: Mutex<Option<JoinHandle<()>>>,
}

impl ReclaimWatch {
    /// Starts listening in `hub`. The calling thread and the listener open their sockets
    /// there and return to `home`, so nothing here pins a namespace but the hub itself.
    pub fn start(hub: &OwnedFd, home: &OwnedFd) -> io::Result<Arc<Self>> {
        let in_hub = |f: &dyn Fn() -> io::Result<NlSocket>| -> io::Result<NlSocket> {
            sys::setns_net(hub.as_fd())?;
            let s = f();
            sys::setns_net(home.as_fd())?;
            s
        };
        let listen = in_hub(&|| {
            let mut s = NlSocket::open()?;

            s.join_group(rtnl::RTNLGRP_NSID)?;
            Ok(s)
        })?;
        let dump = in_hub(&NlSocket::open)?;
        let watch = Arc::new(ReclaimWatch {
            next_id: AtomicI32::new(1),
            awaited: Mutex::new(HashSet::new()),
            announced: Condvar::new(),
            hub: Mutex::new(Some(in_hub(&NlSocket::open)?)),
            home: home.try_clone()?,
            wake: Mutex::new(None),
            listener: Mutex::new(None),
        });
        let (woken, wake) = std::io::pipe()?;
        *watch.wake.lock() = Some(wake);
        let w = watch.clone();
        let t = std::thread::Builder::new()
            .name("nsfleet-reclaim".into())
            .spawn(move || w.listen(listen, dump, woken))?;
        *watch.listener.lock() = Some(t);
        Ok(watch)
    }

    /// Returns once the kernel has reclaimed every network namespace whose last reference
    /// was dropped before the call (see the module doc).
    pub fn barrier(&self, stall: Duration) -> io::Result<()> {
        self.fence(stall)?;
        self.fence(stall)
    }

    /// Drops one fence and waits for its announcement. Creates it on the calling thread,
    /// which returns home at once.
    fn fence(&self, stall: Duration) -> io::Result<()> {
        let fd = new_fence(&self.home)?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        {
            let mut hub = self.hub.lock();
            let hub = hub
                .as_mut()
                .ok_or_else(|| io::Error::other("the reclamation watch is shut down"))?;
            give_nsid(hub, fd.as_fd(), id)?;
        }
        let mut awaited = self.awaited.lock();
        awaited.insert(id);
        drop(fd);
        while awaited.contains(&id) {
            if self.announced.wait_for(&mut awaited, stall).timed_out() {
                awaited.remove(&id);
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the kernel did not reclaim a fence namespace",
                ));
            }
        }
        Ok(())
    }

    /// Stops the listener thread and closes every socket in the hub, so that the watch no
    /// longer holds the hub namespace (the listener holds an `Arc` of the watch, so
    /// dropping it cannot do this).
    pub fn shutdown(&self) {
        // Closing the pipe's write end makes its read end readable: the listener wakes.
        self.wake.lock().take();
        if let Some(t) = self.listener.lock().take() {
            let _ = t.join();
        }
        self.hub.lock().take();
    }

    fn listen(&self, mut listen: NlSocket, mut dump: NlSocket, woken: std::io::PipeReader) {
        let mut gone = Vec::new();
        loop {
            let ready = match sys::poll_readable(&[listen.as_fd(), woken.as_fd()], None) {
                Ok(r) => r,
                Err(_) => return,
            };
            if ready[1] {
                return;
            }
            let r = listen.recv_each(Some(Duration::ZERO), |m| {
                if let Some((false, id)) = rtnl::parse_nsid(m) {
                    gone.push(id);
                }
            });
            match r {
                Ok(()) => {
                    let mut awaited = self.awaited.lock();
                    for id in gone.drain(..) {
                        awaited.remove(&id);
                    }
                    self.announced.notify_all();
                }
                Err(e) if e.kind() == io::ErrorKind::TimedOut => {}
                // Announcements were dropped: ask the hub which ids still exist.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => self.resync(&mut dump),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    fn resync(&self, dump: &mut NlSocket) {
        let mut alive = HashSet::new();
        let mut b = Batch::new();
        rtnl::dump_nsids(&mut b, dump.next_seq());
        let listed = dump.dump(&b, |m| {
            if let Some((true, id)) = rtnl::parse_nsid(m) {
                alive.insert(id);
            }
        });
        if listed.is_ok() {
            self.awaited.lock().retain(|id| alive.contains(id));
            self.announced.notify_all();
        }
    }
}

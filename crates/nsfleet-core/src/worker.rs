//! Dedicated worker threads, each owning the namespace it is currently in (seed 003).
//!
//! A thread's network namespace is its own business: `unshare`/`setns` here touch only the
//! calling thread, and no shared structure records where a worker is. A worker keeps one
//! netlink socket in its current namespace (dropped when it moves: a socket pins its
//! namespace). After every job a worker goes home, so that it
//! never keeps a node's namespace alive. Never run this on an async runtime's threads.

use crossbeam_channel::{Receiver, Sender};
use nsfleet_netlink::NlSocket;
use nsfleet_sys as sys;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::thread::JoinHandle;

pub struct Worker {
    home: Arc<OwnedFd>,
    here: Option<NlSocket>,
    /// `/proc/sys/net` as this thread's namespace shows it, opened on first use.
    sysctl_dir: Option<OwnedFd>,
    away: bool,
}

impl Worker {
    /// Creates a new namespace and moves this thread into it; returns the descriptor
    /// that will hold it.
    pub fn enter_new(&mut self) -> io::Result<OwnedFd> {
        self.leave();
        crate::fault::point("creating a namespace")?;
        sys::unshare_net()?;
        self.away = true;
        sys::current_netns()
    }

    /// As [`enter_new`](Self::enter_new), for a confined node: the namespace is owned by
    /// a new user namespace of its own, whose root is `ids.first` outside (see
    /// `sys::userns`); the user namespace lives as long as the network namespace.
    pub fn enter_new_confined(&mut self, ids: sys::userns::IdRange) -> io::Result<OwnedFd> {
        self.leave();
        crate::fault::point("creating a namespace")?;
        let (_user, net) = sys::userns::new_user_and_net(ids)?;
        sys::setns_net(net.as_fd())?;
        self.away = true;
        Ok(net)
    }

    pub fn enter(&mut self, ns: BorrowedFd<'_>) -> io::Result<()> {
        self.leave();
        crate::fault::point("entering a namespace")?;
        self.away = true;
        sys::setns_net(ns)
    }

    pub fn home(&self) -> BorrowedFd<'_> {
        self.home.as_fd()
    }

    /// A netlink socket in the namespace this thread is in now.
    pub fn rtnl(&mut self) -> io::Result<&mut NlSocket> {
        if self.here.is_none() {
            self.here = Some(NlSocket::open()?);
        }
        Ok(self.here.as_mut().expect("opened above"))
    }

    /// Writes a sysctl of the namespace this thread is in now; `path` is relative to
    /// `/proc/sys/net` (`ipv4/ip_forward`). Every namespace's `net` directory hangs off
    /// the one `/proc/sys`, so the dcache looks each one up in a hash chain that grows
    /// with the number of namespaces that ever looked: that lookup costs ~0.1 ms at 250
    /// namespaces and ~2 ms at 4,000. Hence one lookup per node visit, and `openat`
    /// below it.
    pub fn write_sysctl(&mut self, path: &str, value: &str) -> io::Result<()> {
        crate::fault::point("writing a sysctl")?;
        sys::write_at(self.sysctl_dir()?, path, value.as_bytes())
    }

    /// Reads a sysctl of the namespace this thread is in now, as [`write_sysctl`]
    /// (Self::write_sysctl) writes one; without the trailing newline.
    pub fn read_sysctl(&mut self, path: &str) -> io::Result<String> {
        let text = sys::read_at(self.sysctl_dir()?, path)?;
        Ok(text.trim_end_matches('\n').to_string())
    }

    fn sysctl_dir(&mut self) -> io::Result<BorrowedFd<'_>> {
        if self.sysctl_dir.is_none() {
            self.sysctl_dir = Some(sys::open_dir(c"/proc/sys/net")?);
        }
        Ok(self.sysctl_dir.as_ref().expect("opened above").as_fd())
    }

    /// Drops what belongs to the namespace we are leaving: an open socket or directory
    /// would keep it alive or point into it.
    fn leave(&mut self) {
        self.here = None;
        self.sysctl_dir = None;
    }

    fn go_home(&mut self) {
        self.leave();
        if self.away {
            // A worker that cannot leave a node would keep it alive forever: that is a
            // broken invariant, not an error to report.
            sys::setns_net(self.home.as_fd()).expect("worker cannot return to its home namespace");
            self.away = false;
        }
    }
}

type Job = Box<dyn FnOnce(&mut Worker) + Send>;

/// What [`Workers::scatter`] runs on each item, on whichever worker takes it.
pub type Work<I, R> = Arc<dyn Fn(&mut Worker, I) -> R + Send + Sync>;

pub struct Workers {
    tx: Option<Sender<Job>>,
    threads: Vec<JoinHandle<()>>,
}

impl Workers {
    /// Starts `n` workers whose home is `home`.
    pub fn start(n: usize, home: Arc<OwnedFd>) -> io::Result<Self> {
        let (tx, rx) = crossbeam_channel::unbounded::<Job>();
        let mut threads = Vec::with_capacity(n);
        for i in 0..n.max(1) {
            let (rx, home) = (rx.clone(), home.clone());
            threads.push(
                std::thread::Builder::new()
                    .name(format!("nsfleet-worker-{i}"))
                    .spawn(move || worker_main(rx, home))?,
            );
        }
        Ok(Workers {
            tx: Some(tx),
            threads,
        })
    }

    #[allow(clippy::len_without_is_empty)] // a pool always has at least one worker
    pub fn len(&self) -> usize {
        self.threads.len()
    }

    /// Runs `work` on every item, spread over all workers, and hands each result to `each`
    /// on the calling thread as it arrives. Each worker drains a shared queue, so a slow
    /// item never holds up the others; a worker goes home once the queue is empty.
    pub fn scatter<I, R>(&self, items: Vec<I>, work: Work<I, R>, mut each: impl FnMut(R))
    where
        I: Send + 'static,
        R: Send + 'static,
    {
        let total = items.len();
        if total == 0 {
            return;
        }
        let (item_tx, item_rx) = crossbeam_channel::unbounded();
        for i in items {
            item_tx.send(i).expect("receiver alive");
        }
        drop(item_tx);
        let (res_tx, res_rx) = crossbeam_channel::unbounded();
        let tx = self.tx.as_ref().expect("workers running");
        for _ in 0..self.threads.len().min(total) {
            let (item_rx, res_tx, work) = (item_rx.clone(), res_tx.clone(), work.clone());
            tx.send(Box::new(move |w: &mut Worker| {
                for item in item_rx.iter() {
                    let r = work(w, item);
                    if res_tx.send(r).is_err() {
                        return;
                    }
                }
            }))
            .expect("workers running");
        }
        drop(res_tx);
        for r in res_rx.iter().take(total) {
            each(r);
        }
    }
}

fn worker_main(rx: Receiver<Job>, home: Arc<OwnedFd>) {
    // Best effort: without it a worker waits behind the daemons it has started.
    let _ = nsfleet_sys::prefer_this_thread();
    let mut w = Worker {
        home,
        here: None,
        sysctl_dir: None,
        away: false,
    };
    for job in rx.iter() {
        job(&mut w);
        w.go_home();
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.tx.take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

//! Generator threads on pktgen's model (seed 004).
//!
//! One thread per core, pinned, each owning a list of devices. A thread reads its list
//! through an RCU-style snapshot: control publishes a new list and bumps a generation; the
//! thread checks the generation once per burst and, only when it moved, takes the new list
//! and acknowledges it, after which the writer knows the old list is unused (the grace
//! period). Start, stop and removal reach a thread as flags read at that same point, once
//! per burst; nothing in the per-packet path takes a lock or makes an atomic
//! read-modify-write. Each device's counters have exactly one writer, its thread.
//!
//! `ListMode::Locked` puts back what seed 004 took out: a mutex taken and released around
//! every packet's read of the list, so that one run can measure what the snapshot saves.

use crate::frame::Frames;
use crate::params::{DeviceParams, ListMode, Method, Param};
use crate::sys;
use crate::tx::{Null, Ring, Transmit, Xdp};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering::*};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Where a device is: its namespace and its name there.
#[derive(Clone, Debug)]
pub struct Target {
    pub netns: Arc<OwnedFd>,
    pub ifname: String,
}

/// Devices were started: open the idle ones.
const START: u32 = 1;
const STOP: u32 = 2;
const EXIT: u32 = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum State {
    /// Added, never started: parameters may still be on their way.
    New,
    /// Started, waiting for its thread to open it at the next burst.
    Idle,
    Running,
    Done,
    Stopped,
    Removed,
    Failed,
}

impl State {
    fn from(v: u8) -> State {
        [
            State::New,
            State::Idle,
            State::Running,
            State::Done,
            State::Stopped,
            State::Removed,
            State::Failed,
        ][v as usize]
    }

    fn name(self) -> &'static str {
        match self {
            State::New => "new",
            State::Idle => "idle",
            State::Running => "running",
            State::Done => "done",
            State::Stopped => "stopped",
            State::Removed => "removed",
            State::Failed => "failed",
        }
    }
}

/// One device: its parameters (the control side's), and counters (its thread's).
struct Device {
    label: String,
    target: Target,
    params: Mutex<DeviceParams>,
    state: AtomicU8,
    sent: AtomicU64,
    errors: AtomicU64,
    /// Nanoseconds since the engine's epoch.
    started: AtomicU64,
    ended: AtomicU64,
    /// The method used and, when it is not the one asked for, why; or the failure.
    note: Mutex<(Option<Method>, Option<String>)>,
}

impl Device {
    fn state(&self) -> State {
        State::from(self.state.load(Acquire))
    }

    fn set_state(&self, s: State) {
        self.state.store(s as u8, Release);
    }

    /// Adds to a counter that only this device's thread writes: a load and a store, no
    /// locked instruction.
    fn add(counter: &AtomicU64, n: u64) {
        counter.store(counter.load(Relaxed) + n, Relaxed);
    }
}

/// A thread's device list: the published snapshot, its generation, and what the thread
/// has acknowledged.
struct DeviceList {
    current: Mutex<Arc<[Arc<Device>]>>,
    generation: AtomicU64,
    seen: AtomicU64,
}

struct GenThread {
    id: usize,
    cpu: usize,
    flags: AtomicU32,
    list: DeviceList,
    /// Devices removed from the list, kept for their counters until `reset`.
    retired: Mutex<Vec<Arc<Device>>>,
    handle: Mutex<Option<JoinHandle<()>>>,
}

pub struct Engine {
    threads: Vec<Arc<GenThread>>,
    mode: Arc<AtomicU8>,
    epoch: Instant,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Results {
    pub running: bool,
    pub list_mode: ListMode,
    pub threads: Vec<ThreadResult>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ThreadResult {
    pub id: usize,
    pub cpu: usize,
    pub sent: u64,
    pub pps: f64,
    pub devices: Vec<DeviceResult>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DeviceResult {
    pub dev: String,
    pub thread: usize,
    /// new, idle (started, not yet sending), running, done, stopped, removed or failed.
    pub state: String,
    pub method: Option<Method>,
    /// Why the method differs from the one asked for, or why the device failed.
    pub note: Option<String>,
    pub count: u64,
    pub sent: u64,
    pub errors: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub pps: f64,
    /// Bits per second on the wire as pktgen counts them (`pkt_size * 8` per packet).
    pub bps: f64,
    pub pkt_size: u16,
}

impl Engine {
    /// `threads` generator threads, the i-th pinned to CPU i modulo the CPUs there are.
    pub fn new(threads: usize) -> std::io::Result<Engine> {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mode = Arc::new(AtomicU8::new(ListMode::Rcu as u8));
        let epoch = Instant::now();
        let mut out = Vec::new();
        for id in 0..threads.max(1) {
            let t = Arc::new(GenThread {
                id,
                cpu: id % cpus,
                flags: AtomicU32::new(0),
                list: DeviceList {
                    current: Mutex::new(Arc::from(Vec::new())),
                    generation: AtomicU64::new(0),
                    seen: AtomicU64::new(0),
                },
                retired: Mutex::new(Vec::new()),
                handle: Mutex::new(None),
            });
            let (me, mode) = (t.clone(), mode.clone());
            let h = std::thread::Builder::new()
                .name(format!("nsfleet-gen-{id}"))
                .spawn(move || Worker::new(me, mode, epoch).run())?;
            *t.handle.lock() = Some(h);
            out.push(t);
        }
        Ok(Engine {
            threads: out,
            mode,
            epoch,
        })
    }

    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    fn thread(&self, n: usize) -> Result<&Arc<GenThread>, String> {
        self.threads.get(n).ok_or_else(|| {
            format!(
                "no thread {n}: this engine has threads 0 to {}",
                self.threads.len() - 1
            )
        })
    }

    fn find(&self, label: &str) -> Option<Arc<Device>> {
        self.threads
            .iter()
            .flat_map(|t| t.list.current.lock().to_vec())
            .find(|d| d.label == label)
    }

    /// The devices on one thread's list.
    pub fn labels(&self, thread: usize) -> Vec<String> {
        (self
            .threads
            .get(thread)
            .map(|t| t.list.current.lock().to_vec()))
        .unwrap_or_default()
        .iter()
        .map(|d| d.label.clone())
        .collect()
    }

    fn has_device(&self, label: &str) -> bool {
        self.find(label).is_some()
    }

    /// Every device on a thread's list that is not running, with its parameters: what
    /// the next `start` starts.
    pub fn startable(&self) -> Vec<(String, DeviceParams)> {
        (self.threads.iter())
            .flat_map(|t| t.list.current.lock().to_vec())
            .filter(|d| d.state() != State::Running)
            .map(|d| (d.label.clone(), d.params.lock().clone()))
            .collect()
    }

    /// Puts a device on a thread's list; it sends once started (`start`), from its
    /// thread's next burst, even while the thread runs others. A device belongs to one
    /// thread at a time.
    pub fn add_device(&self, thread: usize, label: &str, target: Target) -> Result<(), String> {
        let t = self.thread(thread)?;
        if self.has_device(label) {
            return Err(format!("{label} is on a thread already"));
        }
        let dev = Arc::new(Device {
            label: label.to_string(),
            target,
            params: Mutex::new(DeviceParams::default()),
            state: AtomicU8::new(State::New as u8),
            sent: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            started: AtomicU64::new(0),
            ended: AtomicU64::new(0),
            note: Mutex::new((None, None)),
        });
        t.publish(|l| l.push(dev));
        Ok(())
    }

    /// Empties a thread's list; returns once the thread no longer uses the old one.
    pub fn rem_device_all(&self, thread: usize) -> Result<(), String> {
        let t = self.thread(thread)?;
        let old = t.list.current.lock().to_vec();
        t.publish(Vec::clear);
        t.synchronize();
        for d in &old {
            if d.state() == State::Running {
                d.ended.store(self.now(), Relaxed);
            }
            d.set_state(State::Removed);
        }
        t.retired.lock().extend(old);
        Ok(())
    }

    /// Sets a device parameter; it takes effect at the device's next start.
    pub fn set(&self, label: &str, p: &Param) -> Result<(), String> {
        let dev = self.find(label).ok_or_else(|| {
            format!("no device {label}: add it to a thread first (thread 0 add_device {label})")
        })?;
        dev.params.lock().apply(p);
        Ok(())
    }

    pub fn set_list_mode(&self, mode: ListMode) {
        self.mode.store(mode as u8, Release);
    }

    /// Starts, from zero, every device that is not running, once each has been checked;
    /// running devices go on undisturbed.
    pub fn start(&self) -> Result<(), String> {
        let devices: Vec<Arc<Device>> = (self.threads.iter())
            .flat_map(|t| t.list.current.lock().to_vec())
            .filter(|d| d.state() != State::Running)
            .collect();
        if devices.is_empty() && !self.results().running {
            return Err("no device on any thread: add one (thread 0 add_device NODE:IF)".into());
        }
        for d in &devices {
            d.params.lock().check(&d.label)?;
        }
        for d in &devices {
            d.set_state(State::Idle);
        }
        for t in &self.threads {
            t.flags.fetch_or(START, Release);
            t.wake();
        }
        Ok(())
    }

    /// Stops every thread at its next burst; returns once they all have.
    pub fn stop(&self) {
        for t in &self.threads {
            t.flags.fetch_or(STOP, Release);
            t.wake();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while self
            .threads
            .iter()
            .any(|t| t.flags.load(Acquire) & STOP != 0)
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Stops everything, empties every list, forgets removed devices too, and goes back to
    /// the snapshot device list.
    pub fn reset(&self) {
        self.stop();
        self.set_list_mode(ListMode::Rcu);
        for t in &self.threads {
            let _ = self.rem_device_all(t.id);
            t.retired.lock().clear();
        }
    }

    pub fn results(&self) -> Results {
        let now = self.now();
        let mode = self.mode.load(Acquire);
        let threads: Vec<ThreadResult> = (self.threads.iter())
            .map(|t| {
                let mut devs = t.retired.lock().clone();
                devs.extend(t.list.current.lock().iter().cloned());
                let devices: Vec<DeviceResult> =
                    devs.iter().map(|d| result_of(d, t.id, now)).collect();
                ThreadResult {
                    id: t.id,
                    cpu: t.cpu,
                    sent: devices.iter().map(|d| d.sent).sum(),
                    pps: devices.iter().map(|d| d.pps).sum(),
                    devices,
                }
            })
            .collect();
        Results {
            running: (threads.iter().flat_map(|t| &t.devices)).any(|d| d.state == "running"),
            list_mode: if mode == ListMode::Locked as u8 {
                ListMode::Locked
            } else {
                ListMode::Rcu
            },
            threads,
        }
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }
}

fn result_of(d: &Device, thread: usize, now: u64) -> DeviceResult {
    let p = d.params.lock().clone();
    let state = d.state();
    let (sent, errors) = (d.sent.load(Relaxed), d.errors.load(Relaxed));
    let started = d.started.load(Relaxed);
    let end = match state {
        State::Running => now,
        _ => d.ended.load(Relaxed),
    };
    let seconds = end.saturating_sub(started) as f64 / 1e9;
    let pps = if seconds > 0.0 {
        sent as f64 / seconds
    } else {
        0.0
    };
    let (method, note) = d.note.lock().clone();
    DeviceResult {
        dev: d.label.clone(),
        thread,
        state: state.name().into(),
        method,
        note,
        count: p.count,
        sent,
        errors,
        bytes: sent * (p.pkt_size as u64 - 4),
        seconds,
        pps,
        bps: pps * p.pkt_size as f64 * 8.0,
        pkt_size: p.pkt_size,
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        for t in &self.threads {
            t.flags.fetch_or(EXIT, Release);
            t.wake();
        }
        for t in &self.threads {
            if let Some(h) = t.handle.lock().take() {
                let _ = h.join();
            }
        }
    }
}

impl GenThread {
    fn wake(&self) {
        if let Some(h) = &*self.handle.lock() {
            h.thread().unpark();
        }
    }

    /// Publishes a changed copy of the list. Writers serialise on the mutex; the thread
    /// takes it only to pick up a list whose generation moved, never per packet (in `Rcu`
    /// mode).
    fn publish(&self, change: impl FnOnce(&mut Vec<Arc<Device>>)) {
        let mut cur = self.list.current.lock();
        let mut next = cur.to_vec();
        change(&mut next);
        *cur = Arc::from(next);
        self.list.generation.fetch_add(1, Release);
        drop(cur);
        self.wake();
    }

    /// Waits until the thread has acknowledged the newest list: the grace period.
    fn synchronize(&self) {
        let want = self.list.generation.load(Acquire);
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.list.seen.load(Acquire) < want && Instant::now() < deadline {
            self.wake();
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// A transmitter, the method it is, and why that method when it was not the one asked for.
type Chosen = (Box<dyn Transmit>, Method, Option<String>);

/// What a thread keeps per device while it sends: all of it private to the thread.
struct Sending {
    dev: Arc<Device>,
    tx: Box<dyn Transmit>,
    frames: Frames,
    left: u64,
    /// Whether `auto` chose this transmitter (it may fall back until a call succeeds).
    auto: bool,
    sent_any: bool,
    /// Most frames per call: a millisecond's worth for a paced device.
    cap: u32,
    burst: u32,
    /// Nanoseconds between packets (0: as fast as possible), and when the next call is due.
    gap_ns: u64,
    due: u64,
}

/// The generator thread's own state.
struct Worker {
    me: Arc<GenThread>,
    mode: Arc<AtomicU8>,
    epoch: Instant,
    list: Arc<[Arc<Device>]>,
    sending: Vec<Sending>,
    next: usize,
    /// The namespace the thread is in now, by the address of its descriptor (0: its own).
    here: usize,
    xdp: Option<Arc<OwnedFd>>,
}

impl Worker {
    fn new(me: Arc<GenThread>, mode: Arc<AtomicU8>, epoch: Instant) -> Worker {
        let list = me.list.current.lock().clone();
        Worker {
            list,
            me,
            mode,
            epoch,
            sending: Vec::new(),
            next: 0,
            here: 0,
            xdp: None,
        }
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn run(mut self) {
        let _ = sys::pin_to_cpu(self.me.cpu);
        loop {
            // The known point: flags and list generation, once per burst.
            let flags = self.me.flags.load(Acquire);
            if flags & EXIT != 0 {
                return;
            }
            self.reload_list();
            if flags & STOP != 0 {
                self.finish_all(State::Stopped);
                if flags & START != 0 {
                    // A start asked before this stop and not yet taken (the thread was
                    // slow to wake): the stop cancels it, or its devices would start
                    // after `gen --stop` returned. No start can follow the stop before it
                    // is taken: `stop` waits for that, and the supervisor serialises both.
                    for dev in self.list.iter().filter(|d| d.state() == State::Idle) {
                        dev.set_state(State::Stopped);
                    }
                }
                self.me.flags.fetch_and(!(STOP | START), Release);
                continue;
            }
            if flags & START != 0 {
                // Cleared before the devices are read: a start racing this one is seen
                // at the next pass, and finds nothing left idle or opens what it started.
                self.me.flags.fetch_and(!START, AcqRel);
                self.open_new();
            }
            // Whether the thread runs is whether it has devices sending: no flag to keep.
            if self.sending.is_empty() {
                std::thread::park_timeout(Duration::from_millis(100));
            } else {
                self.burst();
            }
        }
    }

    /// Takes a newly published list, if there is one, and drops what left it.
    fn reload_list(&mut self) {
        let generation = self.me.list.generation.load(Acquire);
        if generation == self.me.list.seen.load(Relaxed) {
            return;
        }
        self.list = self.me.list.current.lock().clone();
        let now = self.now();
        let list = self.list.clone();
        self.sending.retain(|s| {
            let keep = list.iter().any(|d| Arc::ptr_eq(d, &s.dev));
            if !keep {
                s.dev.ended.store(now, Relaxed);
            }
            keep
        });
        self.me.list.seen.store(generation, Release);
    }

    /// Opens every listed device that is idle (started): it sends from now on.
    fn open_new(&mut self) {
        for dev in self.list.clone().iter() {
            if dev.state() != State::Idle {
                continue;
            }
            match self.open(dev) {
                Ok(s) => self.sending.push(s),
                Err(e) => {
                    dev.note.lock().1 = Some(e);
                    dev.set_state(State::Failed);
                }
            }
        }
    }

    fn enter(&mut self, ns: &Arc<OwnedFd>) -> Result<(), String> {
        let there = Arc::as_ptr(ns) as usize;
        if self.here != there {
            nsfleet_sys::setns_net(ns.as_fd())
                .map_err(|e| format!("entering the namespace: {e}"))?;
            self.here = there;
        }
        Ok(())
    }

    fn open(&mut self, dev: &Arc<Device>) -> Result<Sending, String> {
        let p = dev.params.lock().clone();
        let ifname = &dev.target.ifname;
        self.enter(&dev.target.netns)?;
        let src_mac = nsfleet_sys::hwaddr(ifname).map_err(|e| format!("{ifname}: {e}"))?;
        let dst_mac = p.dst_mac.ok_or("no dst_mac: set it (the receiver's MAC)")?;
        let frames = Frames::new(&p, src_mac, dst_mac);
        let (tx, method, why) = self.transmitter(&p, ifname, &frames)?;
        *dev.note.lock() = (Some(method), why);
        let now = self.now();
        dev.sent.store(0, Relaxed);
        dev.errors.store(0, Relaxed);
        dev.started.store(now, Relaxed);
        dev.set_state(State::Running);
        let gap_ns = 1_000_000_000u64.checked_div(p.pps()).unwrap_or(0);
        let cap = match gap_ns {
            0 => u32::MAX,
            gap => (tx.pacing_window().as_nanos() as u64 / gap).max(1) as u32,
        };
        Ok(Sending {
            dev: dev.clone(),
            tx,
            frames,
            left: if p.count == 0 { u64::MAX } else { p.count },
            cap,
            burst: p.burst,
            auto: p.method == Method::Auto,
            sent_any: false,
            gap_ns,
            due: now,
        })
    }

    /// The transmitter for a device's method. Under `auto`, XDP live frames when every
    /// frame is the same; if the kernel then refuses the first call, `burst` falls back to
    /// the ring (nothing was sent by a refused call, so nothing is miscounted).
    fn transmitter(
        &mut self,
        p: &DeviceParams,
        ifname: &str,
        frames: &Frames,
    ) -> Result<Chosen, String> {
        let xdp = |w: &mut Self| -> std::io::Result<Box<dyn Transmit>> {
            let prog = match &w.xdp {
                Some(p) => p.clone(),
                None => w.xdp.insert(Xdp::load()?).clone(),
            };
            Ok(Box::new(Xdp::new(
                prog,
                ifname,
                frames.template(),
                p.burst,
            )?))
        };
        match p.method {
            Method::Ring => ring(ifname, frames, None),
            Method::Null => Ok((Box::new(Null::new(frames.template())), Method::Null, None)),
            Method::Xdp => xdp(self)
                .map(|x| (x, Method::Xdp, None))
                .map_err(|e| format!("{ifname}: XDP live frames: {e}")),
            Method::Auto if frames.varies() => ring(
                ifname,
                frames,
                Some("ranges vary each packet; XDP live frames repeat one frame".into()),
            ),
            Method::Auto if p.pps() > 0 => ring(
                ifname,
                frames,
                Some("paced: an XDP live-frames call costs ~10 ms, too coarse to pace".into()),
            ),
            Method::Auto => match xdp(self) {
                Ok(x) => Ok((x, Method::Xdp, None)),
                Err(e) => ring(
                    ifname,
                    frames,
                    Some(format!("XDP live frames unavailable: {e}")),
                ),
            },
        }
    }

    /// One call's worth from the next device that is due, round robin.
    fn burst(&mut self) {
        let now = self.now();
        let n = self.sending.len();
        let Some(k) = (0..n)
            .map(|i| (self.next + i) % n)
            .find(|&i| self.sending[i].due <= now)
        else {
            let due = self.sending.iter().map(|s| s.due).min().unwrap_or(now);
            pause(Duration::from_nanos((due - now).min(1_000_000)));
            return;
        };
        self.next = (k + 1) % n;
        if self.sending[k].tx.needs_netns() {
            let ns = self.sending[k].dev.target.netns.clone();
            if let Err(e) = self.enter(&ns) {
                self.fail(k, e);
                return;
            }
        }
        let locked = self.mode.load(Relaxed) == ListMode::Locked as u8;
        let (list, shared) = (&self.list, &self.me.list.current);
        let s = &mut self.sending[k];
        let want = s.left.min(s.tx.call_size(s.burst).min(s.cap) as u64) as u32;
        let frames = &mut s.frames;
        // Seed 004's per-packet read of the device list, with or without its lock.
        let mut next = |buf: &mut [u8]| {
            if locked {
                std::hint::black_box(shared.lock().len());
            } else {
                std::hint::black_box(list.len());
            }
            frames.rewrite(buf);
        };
        match s.tx.send(want, &mut next) {
            Ok(sent) => {
                s.sent_any = true;
                Device::add(&s.dev.sent, sent.frames as u64);
                Device::add(&s.dev.errors, sent.errors as u64);
                s.left -= (sent.frames + sent.errors) as u64;
                s.due = s.due.max(now.saturating_sub(1_000_000)) + s.gap_ns * want as u64;
                if s.left == 0 {
                    self.finish(k, State::Done);
                }
            }
            Err(e) if s.auto && !s.sent_any => {
                let why = format!("XDP live frames refused: {e}");
                match ring(&s.dev.target.ifname, &s.frames, Some(why)) {
                    Ok((tx, method, why)) => {
                        s.tx = tx;
                        *s.dev.note.lock() = (Some(method), why);
                    }
                    Err(e) => self.fail(k, e),
                }
            }
            Err(e) => self.fail(k, format!("sending: {e}")),
        }
    }

    fn finish(&mut self, k: usize, state: State) {
        let s = self.sending.swap_remove(k);
        s.dev.ended.store(self.now(), Relaxed);
        s.dev.set_state(state);
    }

    fn fail(&mut self, k: usize, why: String) {
        self.sending[k].dev.note.lock().1 = Some(why);
        self.finish(k, State::Failed);
    }

    fn finish_all(&mut self, state: State) {
        while !self.sending.is_empty() {
            self.finish(0, state);
        }
    }
}

fn ring(ifname: &str, frames: &Frames, why: Option<String>) -> Result<Chosen, String> {
    Ring::open(ifname, frames.template())
        .map(|r| (Box::new(r) as Box<dyn Transmit>, Method::Ring, why))
        .map_err(|e| format!("{ifname}: opening a TX ring: {e}"))
}

/// Waits for a paced device: sleeping is too coarse below ~100 µs, so spin there.
fn pause(d: Duration) {
    if d > Duration::from_micros(100) {
        std::thread::sleep(d - Duration::from_micros(50));
    } else {
        let until = Instant::now() + d;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target {
            netns: Arc::new(std::fs::File::open("/proc/self/ns/net").unwrap().into()),
            ifname: "lo".into(),
        }
    }

    fn null_device(e: &Engine, thread: usize, label: &str, count: &str) {
        e.add_device(thread, label, target()).unwrap();
        for line in [
            "dst 10.0.0.2",
            "src 10.0.0.1",
            "udp_dst_max 20",
            "dst_mac 02:00:00:00:00:02",
            "method null",
        ]
        .into_iter()
        .chain([format!("count {count}").as_str()])
        {
            let (k, v) = line.split_once(' ').unwrap();
            e.set(label, &Param::parse(k, v).unwrap()).unwrap();
        }
    }

    fn wait_idle(e: &Engine) -> Results {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = e.results();
            if !r.running
                && r.threads
                    .iter()
                    .flat_map(|t| &t.devices)
                    .all(|d| d.state != "idle" && d.state != "new")
            {
                return r;
            }
            assert!(Instant::now() < deadline, "still running: {r:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn counts_are_exact_in_both_list_modes() {
        let e = Engine::new(2).unwrap();
        null_device(&e, 0, "a:x", "100001");
        null_device(&e, 1, "b:y", "5000");
        for mode in [ListMode::Rcu, ListMode::Locked] {
            e.set_list_mode(mode);
            e.start().unwrap();
            let r = wait_idle(&e);
            let sent: Vec<u64> = r
                .threads
                .iter()
                .flat_map(|t| &t.devices)
                .map(|d| d.sent)
                .collect();
            assert_eq!(sent, [100_001, 5000], "{mode:?}");
            assert_eq!(r.list_mode, mode);
        }
    }

    #[test]
    fn devices_added_and_removed_while_running_keep_their_counts() {
        let e = Engine::new(1).unwrap();
        null_device(&e, 0, "a:x", "0");
        e.start().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        null_device(&e, 0, "b:y", "0");
        e.start().unwrap();
        // A device added and started while the thread runs starts at its next burst.
        let deadline = Instant::now() + Duration::from_secs(5);
        while e.results().threads[0]
            .devices
            .iter()
            .filter(|d| d.sent > 0)
            .count()
            < 2
        {
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(1));
        }
        e.rem_device_all(0).unwrap();
        let r1 = e.results();
        std::thread::sleep(Duration::from_millis(20));
        let r2 = e.results();
        assert!(!r2.running);
        for (a, b) in r1.threads[0].devices.iter().zip(&r2.threads[0].devices) {
            assert_eq!(a.state, "removed");
            assert_eq!(a.sent, b.sent, "no packet counted after removal");
            assert!(a.sent > 0);
        }
        e.reset();
        assert!(e.results().threads[0].devices.is_empty());
    }

    #[test]
    fn stop_ends_an_endless_device() {
        let e = Engine::new(1).unwrap();
        null_device(&e, 0, "a:x", "0");
        e.start().unwrap();
        // Sending first (a stop before its thread takes the start cancels the start).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while e.results().threads[0].devices[0].sent == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the device never sent"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(10));
        e.stop();
        let r = e.results();
        let d = &r.threads[0].devices[0];
        assert_eq!(d.state, "stopped");
        assert!(d.sent > 0 && d.pps > 0.0);
    }

    #[test]
    fn bad_control_is_refused_with_reasons() {
        let e = Engine::new(1).unwrap();
        assert!(e.start().unwrap_err().contains("no device"));
        assert!(e
            .add_device(3, "a:x", target())
            .unwrap_err()
            .contains("no thread 3"));
        e.add_device(0, "a:x", target()).unwrap();
        assert!(e
            .add_device(0, "a:x", target())
            .unwrap_err()
            .contains("already"));
        assert!(e.start().unwrap_err().contains("no destination"));
        assert!(e
            .set("z:z", &Param::Count(1))
            .unwrap_err()
            .contains("add_device z:z"));
    }
}

//! XDP live frames: a two-instruction XDP program (`return XDP_TX`) run by BPF_PROG_RUN with
//! BPF_F_TEST_XDP_LIVE_FRAMES. The kernel builds the frames from one page-pool template and
//! sends each batch out of the device through the XDP redirect path, with no socket buffer.
//!
//! Limits, checked by the caller: one frame is repeated for a whole call (no per-packet
//! rewriting), the calling thread must be in the device's namespace (the kernel looks the
//! device up there), and a veth's peer takes XDP frames only while it runs NAPI (GRO on, or
//! an XDP program of its own); otherwise the kernel drops them and counts them as the
//! device's tx drops.

use super::{Sent, Transmit};
use crate::sys;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most frames the kernel takes per batch inside one call (TEST_XDP_MAX_BATCH).
const MAX_BATCH: u32 = 256;
/// How long one call should last. Each call sets up and tears down a page pool, which
/// waits for an RCU grace period (~12 ms measured here): calls must be long to pay for
/// it, and short enough that control flags, read between calls, take effect quickly.
const CALL_TIME: Duration = Duration::from_millis(200);
const MIN_CALL: u32 = 4096;
const MAX_CALL: u32 = 1 << 22;

pub struct Xdp {
    prog: Arc<OwnedFd>,
    frame: Vec<u8>,
    ifindex: u32,
    batch: u32,
    /// Frames per call, adapted to what the last call achieved.
    per_call: u32,
}

impl Xdp {
    /// Loads the program; one serves every device of a thread.
    pub fn load() -> io::Result<Arc<OwnedFd>> {
        // r0 = XDP_TX; exit
        let insns: [u64; 2] = [0xb7 | (3 << 32), 0x95];
        sys::bpf_load_xdp(&insns).map(Arc::new)
    }

    /// `ifname` is looked up in the calling thread's namespace.
    pub fn new(prog: Arc<OwnedFd>, ifname: &str, template: &[u8], burst: u32) -> io::Result<Xdp> {
        Ok(Xdp {
            prog,
            frame: template.to_vec(),
            ifindex: nsfleet_sys::ifindex(ifname)?,
            batch: burst.clamp(1, MAX_BATCH),
            per_call: MIN_CALL * 16,
        })
    }
}

impl Transmit for Xdp {
    fn send(&mut self, n: u32, next: &mut dyn FnMut(&mut [u8])) -> io::Result<Sent> {
        next(&mut self.frame);
        let t = Instant::now();
        sys::bpf_xdp_live(
            self.prog.as_raw_fd(),
            &self.frame,
            self.ifindex,
            n,
            self.batch.min(n),
        )?;
        if n >= self.per_call / 2 {
            let rate = n as f64 / t.elapsed().as_secs_f64().max(1e-6);
            self.per_call =
                (rate * CALL_TIME.as_secs_f64()).clamp(MIN_CALL as f64, MAX_CALL as f64) as u32;
        }
        Ok(Sent {
            frames: n,
            errors: 0,
        })
    }

    fn call_size(&self, _burst: u32) -> u32 {
        self.per_call
    }

    fn pacing_window(&self) -> Duration {
        CALL_TIME
    }

    fn needs_netns(&self) -> bool {
        true
    }
}

//! The ways a frame reaches a device. Each transmitter is owned by one generator thread and
//! never shared; the engine hands it a burst and a closure that turns each slot into the
//! next packet.

pub mod null;
pub mod ring;
pub mod xdp;

use std::io;

pub use null::Null;
pub use ring::Ring;
pub use xdp::Xdp;

pub trait Transmit: Send {
    /// Sends `n` frames; `next` rewrites each one (a copy of the template, or of an earlier
    /// frame) into the next packet. Returns how many went and how many the kernel refused.
    fn send(&mut self, n: u32, next: &mut dyn FnMut(&mut [u8])) -> io::Result<Sent>;

    /// Frames per call for a device whose burst is `burst`.
    fn call_size(&self, burst: u32) -> u32 {
        burst
    }

    /// The shortest time a paced device's call may stand for: finer pacing costs calls.
    fn pacing_window(&self) -> std::time::Duration {
        std::time::Duration::from_millis(1)
    }

    /// Whether the calling thread must be in the device's namespace when it sends.
    fn needs_netns(&self) -> bool {
        false
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sent {
    pub frames: u32,
    pub errors: u32,
}

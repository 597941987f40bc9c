//! An AF_PACKET TX ring (TPACKET_V2) that bypasses the qdisc, as trafgen uses: frames are
//! written into a ring shared with the kernel, and one `sendto` sends every frame marked
//! ready. Each slot holds a copy of the template from the start, so a packet costs only
//! the fields that vary, its length and its status word.

use super::{Sent, Transmit};
use crate::sys;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};

/// Slots in the ring: enough for a few bursts in flight.
const SLOTS: u32 = 1024;
/// Where a TPACKET_V2 frame's data starts in its slot without PACKET_TX_HAS_OFF:
/// TPACKET2_HDRLEN - sizeof(struct sockaddr_ll), as the kernel computes it.
const DATA_OFFSET: usize = 32;

pub struct Ring {
    fd: OwnedFd,
    map: *mut u8,
    map_len: usize,
    slot_size: usize,
    slots: u32,
    len: usize,
    head: u32,
}

// SAFETY: the mapping belongs to this value alone and is only touched through `&mut self`;
// moving it to another thread moves the only handle to it.
unsafe impl Send for Ring {}

impl Ring {
    /// A ring on `ifname` in the calling thread's namespace, every slot holding `template`.
    pub fn open(ifname: &str, template: &[u8]) -> io::Result<Ring> {
        let slot_size = (DATA_OFFSET + template.len()).next_power_of_two().max(128);
        let block_size = slot_size.max(4096);
        let per_block = (block_size / slot_size) as u32;
        let req = libc::tpacket_req {
            tp_block_size: block_size as u32,
            tp_block_nr: SLOTS.div_ceil(per_block),
            tp_frame_size: slot_size as u32,
            tp_frame_nr: SLOTS.div_ceil(per_block) * per_block,
        };
        let fd = sys::packet_socket(0)?;
        sys::setsockopt(
            &fd,
            libc::PACKET_VERSION,
            &(libc::tpacket_versions::TPACKET_V2 as i32),
        )?;
        sys::setsockopt(&fd, libc::PACKET_QDISC_BYPASS, &1i32)?;
        // A malformed frame is skipped and reported, rather than stalling the ring.
        sys::setsockopt(&fd, libc::PACKET_LOSS, &1i32)?;
        sys::setsockopt(&fd, libc::PACKET_TX_RING, &req)?;
        sys::bind_packet(&fd, nsfleet_sys::ifindex(ifname)?, 0)?;
        let map_len = (req.tp_block_size * req.tp_block_nr) as usize;
        let map = sys::mmap_shared(&fd, map_len)?;
        let mut ring = Ring {
            fd,
            map,
            map_len,
            slot_size,
            slots: req.tp_frame_nr,
            len: template.len(),
            head: 0,
        };
        for i in 0..ring.slots {
            ring.data(i).copy_from_slice(template);
        }
        Ok(ring)
    }

    fn header(&mut self, i: u32) -> *mut libc::tpacket2_hdr {
        // SAFETY: i < slots, so the header lies inside the mapping.
        unsafe { self.map.add(i as usize * self.slot_size).cast() }
    }

    fn data(&mut self, i: u32) -> &mut [u8] {
        let len = self.len;
        // SAFETY: slot i's data area (DATA_OFFSET.. + len) lies inside the mapping, and the
        // kernel does not read it while the slot's status is not SEND_REQUEST.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.map.add(i as usize * self.slot_size + DATA_OFFSET),
                len,
            )
        }
    }

    fn status(&mut self, i: u32) -> u32 {
        // SAFETY: the header is inside the mapping; the kernel writes the status word
        // concurrently, hence the volatile read.
        unsafe { std::ptr::addr_of!((*self.header(i)).tp_status).read_volatile() }
    }

    fn set_ready(&mut self, i: u32) {
        let h = self.header(i);
        let len = self.len as u32;
        // The frame's bytes must be visible before the kernel can see the status flip.
        fence(Ordering::Release);
        // SAFETY: as in `status`; the slot is ours until its status says SEND_REQUEST.
        unsafe {
            std::ptr::addr_of_mut!((*h).tp_len).write_volatile(len);
            std::ptr::addr_of_mut!((*h).tp_status).write_volatile(libc::TP_STATUS_SEND_REQUEST);
        }
    }

    /// Has the kernel send every ready frame, waiting until it has. A full queue below
    /// the socket (`ENOBUFS`: the device or its qdisc dropped the packet) is no failure:
    /// the kernel gives the frame back as SEND_REQUEST (`tpacket_snd`), and the next
    /// flush sends it. Seen with both CPUs busy: `nsfleet gen` failed its device on it.
    fn flush(&mut self) -> io::Result<()> {
        match sys::send_empty(self.fd.as_raw_fd()) {
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => Ok(()),
            done => done,
        }
    }
}

impl Transmit for Ring {
    fn send(&mut self, n: u32, next: &mut dyn FnMut(&mut [u8])) -> io::Result<Sent> {
        let mut sent = Sent::default();
        for _ in 0..n {
            let i = self.head;
            let mut status = self.status(i);
            if status & libc::TP_STATUS_SEND_REQUEST != 0 || status & libc::TP_STATUS_SENDING != 0 {
                self.flush()?;
                status = self.status(i);
            }
            if status & libc::TP_STATUS_WRONG_FORMAT != 0 {
                sent.errors += 1;
            }
            if status & (libc::TP_STATUS_SEND_REQUEST | libc::TP_STATUS_SENDING) != 0 {
                // Still the kernel's after a flush: count it refused rather than wait.
                sent.errors += 1;
                continue;
            }
            next(self.data(i));
            self.set_ready(i);
            self.head = if i + 1 == self.slots { 0 } else { i + 1 };
            sent.frames += 1;
        }
        match self.flush() {
            Ok(()) => Ok(sent),
            // The device went down or away under us: this burst is lost, and said so.
            Err(e)
                if e.raw_os_error() == Some(libc::ENETDOWN)
                    || e.raw_os_error() == Some(libc::ENXIO) =>
            {
                Ok(Sent {
                    frames: 0,
                    errors: sent.frames + sent.errors,
                })
            }
            Err(e) => Err(e),
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        sys::munmap(self.map, self.map_len);
    }
}

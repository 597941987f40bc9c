//! Captures of several machines made one (`capture --kube` over interfaces on more than one
//! machine): each machine's pcapng stream (as `capture -w -` writes it: little-endian,
//! nanosecond timestamps) cut into blocks; one section header; every stream's interfaces,
//! numbered after the earlier streams'; packets in the order of their timestamps, each
//! held a while for older ones from the other machines; the interface statistics last.
//! Bytes only: the caller feeds it and says when time has passed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Write};

const SECTION_HEADER: u32 = 0x0A0D_0D0A;
const INTERFACE_DESCRIPTION: u32 = 1;
const INTERFACE_STATISTICS: u32 = 5;
const ENHANCED_PACKET: u32 = 6;

/// Cuts a stream of bytes into whole pcapng blocks as they come.
#[derive(Default)]
struct Cutter {
    buf: Vec<u8>,
}

impl Cutter {
    fn push(&mut self, bytes: &[u8]) -> Vec<Vec<u8>> {
        self.buf.extend_from_slice(bytes);
        let mut blocks = Vec::new();
        while self.buf.len() >= 8 {
            let total = u32_at(&self.buf, 4) as usize;
            if total < 12 || self.buf.len() < total {
                break;
            }
            blocks.push(self.buf.drain(..total).collect());
        }
        blocks
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("four bytes"))
}

/// A block's interface number (an enhanced packet's or a statistics block's) moved by
/// `offset`.
fn renumber(block: &mut [u8], offset: u32) {
    let id = u32_at(block, 8) + offset;
    block[8..12].copy_from_slice(&id.to_le_bytes());
}

struct Stream {
    /// Interfaces it describes, and the number its first has in the merged file.
    interfaces: u32,
    offset: u32,
    described: Vec<Vec<u8>>,
    cutter: Cutter,
    ended: bool,
}

impl Stream {
    fn described_all(&self) -> bool {
        self.ended || self.described.len() as u32 >= self.interfaces
    }
}

pub struct Merge<W: Write> {
    out: W,
    streams: Vec<Stream>,
    /// The first stream's section header, until the merged one is written.
    section: Option<Vec<u8>>,
    header_written: bool,
    /// Packets not yet written, oldest first (ties in the order they came).
    held: BinaryHeap<Reverse<(u64, u64, Vec<u8>)>>,
    statistics: Vec<Vec<u8>>,
    came: u64,
    written: u64,
    limit: u64,
}

impl<W: Write> Merge<W> {
    /// A merge of streams each describing `interfaces[i]` interfaces, written to `out`,
    /// ending after `limit` packets if given.
    pub fn new(out: W, interfaces: &[u32], limit: Option<u64>) -> Merge<W> {
        let mut offset = 0;
        let streams = (interfaces.iter())
            .map(|&n| {
                offset += n;
                Stream {
                    interfaces: n,
                    offset: offset - n,
                    described: Vec::new(),
                    cutter: Cutter::default(),
                    ended: false,
                }
            })
            .collect();
        Merge {
            out,
            streams,
            section: None,
            header_written: false,
            held: BinaryHeap::new(),
            statistics: Vec::new(),
            came: 0,
            written: 0,
            limit: limit.unwrap_or(u64::MAX),
        }
    }

    /// Bytes of stream `i`, as they came.
    pub fn push(&mut self, i: usize, bytes: &[u8]) {
        for mut block in self.streams[i].cutter.push(bytes) {
            match u32_at(&block, 0) {
                SECTION_HEADER if self.section.is_none() => self.section = Some(block),
                INTERFACE_DESCRIPTION => self.streams[i].described.push(block),
                ENHANCED_PACKET => {
                    renumber(&mut block, self.streams[i].offset);
                    let ns = (u64::from(u32_at(&block, 12)) << 32) | u64::from(u32_at(&block, 16));
                    self.came += 1;
                    self.held.push(Reverse((ns, self.came, block)));
                }
                INTERFACE_STATISTICS => {
                    renumber(&mut block, self.streams[i].offset);
                    self.statistics.push(block);
                }
                _ => {}
            }
        }
    }

    /// Stream `i` has ended.
    pub fn end(&mut self, i: usize) {
        self.streams[i].ended = true;
    }

    /// Whether every packet asked for is written.
    pub fn done(&self) -> bool {
        self.written >= self.limit
    }

    /// Writes the packets stamped before `before` (ns since the epoch), once every stream
    /// has described its interfaces.
    pub fn release(&mut self, before: u64) -> io::Result<()> {
        if !self.header_written {
            if !self.streams.iter().all(Stream::described_all) {
                return Ok(());
            }
            if let Some(s) = self.section.take() {
                self.out.write_all(&s)?;
            }
            for b in self.streams.iter().flat_map(|s| &s.described) {
                self.out.write_all(b)?;
            }
            self.header_written = true;
        }
        while let Some(Reverse((ns, _, _))) = self.held.peek() {
            if *ns >= before || self.done() {
                break;
            }
            let Reverse((_, _, block)) = self.held.pop().expect("peeked");
            self.out.write_all(&block)?;
            self.written += 1;
        }
        self.out.flush()
    }

    /// Everything held written, then the statistics; the output back.
    pub fn finish(mut self) -> io::Result<W> {
        for s in &mut self.streams {
            s.ended = true;
        }
        self.release(u64::MAX)?;
        for b in std::mem::take(&mut self.statistics) {
            self.out.write_all(&b)?;
        }
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::pcapng;
    use super::*;

    fn stream(name: &str, packets: &[u64]) -> Vec<u8> {
        let mut s = pcapng::section_header("nsfleet");
        s.extend(pcapng::interface(name, 100, ""));
        for &ns in packets {
            s.extend(pcapng::packet(0, ns, &[0; 14], 60, false));
        }
        s.extend(pcapng::statistics(0, 1, 2, packets.len() as u64, 0));
        s
    }

    /// Each block's type and, for packets and statistics, interface and time.
    fn blocks(b: &[u8]) -> Vec<(u32, u32, u32)> {
        let mut c = Cutter::default();
        (c.push(b).iter())
            .map(|b| match u32_at(b, 0) {
                ENHANCED_PACKET => (ENHANCED_PACKET, u32_at(b, 8), u32_at(b, 16)),
                INTERFACE_STATISTICS => (INTERFACE_STATISTICS, u32_at(b, 8), 0),
                k => (k, 0, 0),
            })
            .collect()
    }

    #[test]
    fn two_machines_streams_are_one_file_in_time_order() {
        let (a, b) = (stream("r1:eth0", &[10, 30]), stream("r5:eth1", &[20, 40]));
        let mut m = Merge::new(Vec::new(), &[1, 1], None);
        // Bytes come in pieces, not on block boundaries.
        for (i, s) in [(0, &a), (1, &b)] {
            for piece in s.chunks(7) {
                m.push(i, piece);
            }
        }
        m.release(25).unwrap();
        let out = m.finish().unwrap();
        assert_eq!(
            blocks(&out),
            [
                (SECTION_HEADER, 0, 0),
                (INTERFACE_DESCRIPTION, 0, 0),
                (INTERFACE_DESCRIPTION, 0, 0),
                (ENHANCED_PACKET, 0, 10),
                (ENHANCED_PACKET, 1, 20),
                (ENHANCED_PACKET, 0, 30),
                (ENHANCED_PACKET, 1, 40),
                (INTERFACE_STATISTICS, 0, 0),
                (INTERFACE_STATISTICS, 1, 0),
            ]
        );
    }

    #[test]
    fn nothing_is_written_before_every_machine_has_described_its_interfaces() {
        let mut m = Merge::new(Vec::new(), &[1, 1], Some(1));
        m.push(0, &stream("r1:eth0", &[10, 30]));
        m.release(u64::MAX).unwrap();
        assert!(!m.done());
        m.push(1, &stream("r5:eth1", &[]));
        m.release(u64::MAX).unwrap();
        assert!(m.done(), "one packet asked for, one written");
        let out = m.finish().unwrap();
        let packets = blocks(&out)
            .iter()
            .filter(|b| b.0 == ENHANCED_PACKET)
            .count();
        assert_eq!(packets, 1);
    }
}

//! The pcapng file format (draft-ietf-opsawg-pcapng), as much of it as a capture of
//! several interfaces needs: a section header, one interface description per `node:iface`
//! (its name says which, timestamps in nanoseconds), enhanced packet blocks, and interface
//! statistics at the end (packets received and dropped). Bytes only: no sockets, no files.

/// DLT_EN10MB.
const LINKTYPE_ETHERNET: u16 = 1;

const SECTION_HEADER: u32 = 0x0A0D_0D0A;
const INTERFACE_DESCRIPTION: u32 = 1;
const INTERFACE_STATISTICS: u32 = 5;
const ENHANCED_PACKET: u32 = 6;
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;

const OPT_END: u16 = 0;
const OPT_COMMENT: u16 = 1;
const SHB_USERAPPL: u16 = 4;
const IF_NAME: u16 = 2;
const IF_TSRESOL: u16 = 9;
const ISB_STARTTIME: u16 = 2;
const ISB_ENDTIME: u16 = 3;
const ISB_IFRECV: u16 = 4;
const ISB_IFDROP: u16 = 5;
const EPB_FLAGS: u16 = 2;

/// A block: its type, body and options, framed by its total length.
struct Block {
    kind: u32,
    body: Vec<u8>,
}

impl Block {
    fn new(kind: u32) -> Block {
        Block {
            kind,
            body: Vec::new(),
        }
    }

    fn u16(mut self, v: u16) -> Self {
        self.body.extend_from_slice(&v.to_le_bytes());
        self
    }

    fn u32(mut self, v: u32) -> Self {
        self.body.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Bytes padded to 32 bits.
    fn bytes(mut self, b: &[u8]) -> Self {
        self.body.extend_from_slice(b);
        self.body.resize(self.body.len().next_multiple_of(4), 0);
        self
    }

    fn option(self, code: u16, value: &[u8]) -> Self {
        self.u16(code).u16(value.len() as u16).bytes(value)
    }

    /// A timestamp in nanoseconds since the epoch, high word first, as a 64-bit option.
    fn time_option(self, code: u16, ns: u64) -> Self {
        let mut v = ((ns >> 32) as u32).to_le_bytes().to_vec();
        v.extend_from_slice(&(ns as u32).to_le_bytes());
        self.option(code, &v)
    }

    fn end_options(self) -> Self {
        self.u16(OPT_END).u16(0)
    }

    fn encode(self) -> Vec<u8> {
        let total = (12 + self.body.len()) as u32;
        let mut out = Vec::with_capacity(total as usize);
        out.extend_from_slice(&self.kind.to_le_bytes());
        out.extend_from_slice(&total.to_le_bytes());
        out.extend_from_slice(&self.body);
        out.extend_from_slice(&total.to_le_bytes());
        out
    }
}

/// The section header, naming the program that wrote the file.
pub fn section_header(application: &str) -> Vec<u8> {
    Block::new(SECTION_HEADER)
        .u32(BYTE_ORDER_MAGIC)
        .u16(1)
        .u16(0)
        // Section length: not known in advance (a stream).
        .u32(u32::MAX)
        .u32(u32::MAX)
        .option(SHB_USERAPPL, application.as_bytes())
        .end_options()
        .encode()
}

/// An Ethernet interface named `name`, keeping `snaplen` bytes of each packet, with
/// timestamps in nanoseconds. Interfaces are numbered from 0 in the order written.
pub fn interface(name: &str, snaplen: u32, comment: &str) -> Vec<u8> {
    Block::new(INTERFACE_DESCRIPTION)
        .u16(LINKTYPE_ETHERNET)
        .u16(0)
        .u32(snaplen)
        .option(IF_NAME, name.as_bytes())
        .option(IF_TSRESOL, &[9])
        .option(OPT_COMMENT, comment.as_bytes())
        .end_options()
        .encode()
}

/// One packet of interface `interface`: `data` is what was kept of its `len` bytes, and
/// whether the interface sent it or received it.
pub fn packet(interface: u32, ns: u64, data: &[u8], len: usize, outgoing: bool) -> Vec<u8> {
    let direction: u32 = if outgoing { 2 } else { 1 };
    Block::new(ENHANCED_PACKET)
        .u32(interface)
        .u32((ns >> 32) as u32)
        .u32(ns as u32)
        .u32(data.len() as u32)
        .u32(len as u32)
        .bytes(data)
        .option(EPB_FLAGS, &direction.to_le_bytes())
        .end_options()
        .encode()
}

/// What interface `interface` saw between `start` and `end` (ns since the epoch):
/// packets that passed the filter and, of them, those the kernel dropped.
pub fn statistics(interface: u32, start: u64, end: u64, received: u64, dropped: u64) -> Vec<u8> {
    Block::new(INTERFACE_STATISTICS)
        .u32(interface)
        .u32((end >> 32) as u32)
        .u32(end as u32)
        .time_option(ISB_STARTTIME, start)
        .time_option(ISB_ENDTIME, end)
        .option(ISB_IFRECV, &received.to_le_bytes())
        .option(ISB_IFDROP, &dropped.to_le_bytes())
        .end_options()
        .encode()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }

    #[test]
    fn blocks_are_framed_by_their_length_and_padded() {
        for block in [
            section_header("nsfleet"),
            interface("r1:eth0", 262144, "fleet lab"),
            packet(0, 1_700_000_000_123_456_789, &[1, 2, 3, 4, 5], 60, false),
            statistics(0, 1, 2, 10, 3),
        ] {
            let total = u32_at(&block, 4) as usize;
            assert_eq!(total, block.len());
            assert_eq!(total % 4, 0);
            assert_eq!(u32_at(&block, total - 4) as usize, total);
        }
        let p = packet(1, 5 << 32 | 7, &[9; 5], 60, true);
        assert_eq!((u32_at(&p, 8), u32_at(&p, 12), u32_at(&p, 16)), (1, 5, 7));
        assert_eq!((u32_at(&p, 20), u32_at(&p, 24)), (5, 60));
    }
}

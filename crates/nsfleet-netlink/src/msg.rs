//! Netlink wire format: building a batch of requests and walking received messages.
//!
//! Pure byte handling; no syscalls here.

pub const NLMSG_HDRLEN: usize = 16;
pub const NLA_HDRLEN: usize = 4;

pub const NLM_F_REQUEST: u16 = 0x01;
pub const NLM_F_ACK: u16 = 0x04;
pub const NLM_F_ROOT: u16 = 0x100;
pub const NLM_F_MATCH: u16 = 0x200;
pub const NLM_F_DUMP: u16 = NLM_F_ROOT | NLM_F_MATCH;
pub const NLM_F_ACK_TLVS: u16 = 0x200;
pub const NLM_F_CREATE: u16 = 0x400;
pub const NLM_F_EXCL: u16 = 0x200;

pub const NLMSG_ERROR: u16 = 2;
pub const NLMSG_DONE: u16 = 3;
pub const NLA_F_NESTED: u16 = 1 << 15;

/// Attribute type of the human-readable message in an extended ACK.
pub const NLMSGERR_ATTR_MSG: u16 = 1;

pub const fn align(len: usize) -> usize {
    (len + 3) & !3
}

/// Several netlink requests laid out back to back, ready for one `sendmsg`.
#[derive(Default)]
pub struct Batch {
    buf: Vec<u8>,
    open: Option<usize>,
    seqs: Vec<u32>,
}

impl Batch {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a message; every request asks for an ACK so that errors come back per message.
    pub fn begin(&mut self, ty: u16, flags: u16, seq: u32) -> &mut Self {
        self.seqs.push(seq);
        self.start(ty, flags | NLM_F_ACK, seq)
    }

    /// Starts a message that asks for no ACK, and whose sequence number the socket does
    /// not wait for: nf_tables' batch end, which the kernel acknowledges only when the
    /// batch commits (an aborted batch's errors come back on the messages that failed).
    pub fn begin_unacked(&mut self, ty: u16, flags: u16, seq: u32) -> &mut Self {
        self.start(ty, flags, seq)
    }

    fn start(&mut self, ty: u16, flags: u16, seq: u32) -> &mut Self {
        assert!(self.open.is_none(), "netlink message begun inside another");
        self.open = Some(self.buf.len());
        let flags = flags | NLM_F_REQUEST;
        self.buf.extend_from_slice(&0u32.to_ne_bytes());
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self.buf.extend_from_slice(&flags.to_ne_bytes());
        self.buf.extend_from_slice(&seq.to_ne_bytes());
        self.buf.extend_from_slice(&0u32.to_ne_bytes());
        self
    }

    /// Appends a fixed header (ifinfomsg, rtgenmsg, ...), padded to four bytes.
    pub fn header(&mut self, bytes: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(bytes);
        self.pad();
        self
    }

    pub fn attr(&mut self, ty: u16, data: &[u8]) -> &mut Self {
        let len = (NLA_HDRLEN + data.len()) as u16;
        self.buf.extend_from_slice(&len.to_ne_bytes());
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self.buf.extend_from_slice(data);
        self.pad();
        self
    }

    pub fn attr_u32(&mut self, ty: u16, v: u32) -> &mut Self {
        self.attr(ty, &v.to_ne_bytes())
    }

    pub fn attr_i32(&mut self, ty: u16, v: i32) -> &mut Self {
        self.attr(ty, &v.to_ne_bytes())
    }

    pub fn attr_u64(&mut self, ty: u16, v: u64) -> &mut Self {
        self.attr(ty, &v.to_ne_bytes())
    }

    /// A NUL-terminated string attribute, as the kernel's NLA_STRING/NLA_NUL_STRING expect.
    pub fn attr_str(&mut self, ty: u16, s: &str) -> &mut Self {
        let mut v = Vec::with_capacity(s.len() + 1);
        v.extend_from_slice(s.as_bytes());
        v.push(0);
        self.attr(ty, &v)
    }

    /// Opens a nested attribute; close it with [`Batch::nest_end`] passing the returned mark.
    pub fn nest_begin(&mut self, ty: u16) -> usize {
        self.open_attr(ty | NLA_F_NESTED)
    }

    /// Opens an attribute whose value is written piecewise (a fixed header followed by
    /// attributes, as VETH_INFO_PEER and netem's TCA_OPTIONS are) and carries no
    /// NLA_F_NESTED flag; close it with [`Batch::nest_end`].
    pub fn open_attr(&mut self, ty: u16) -> usize {
        let mark = self.buf.len();
        self.buf.extend_from_slice(&0u16.to_ne_bytes());
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        mark
    }

    pub fn nest_end(&mut self, mark: usize) -> &mut Self {
        let len = (self.buf.len() - mark) as u16;
        self.buf[mark..mark + 2].copy_from_slice(&len.to_ne_bytes());
        self
    }

    pub fn end(&mut self) -> &mut Self {
        let start = self.open.take().expect("netlink message ended twice");
        let len = (self.buf.len() - start) as u32;
        self.buf[start..start + 4].copy_from_slice(&len.to_ne_bytes());
        self
    }

    fn pad(&mut self) {
        let padded = align(self.buf.len());
        self.buf.resize(padded, 0);
    }

    pub fn bytes(&self) -> &[u8] {
        assert!(
            self.open.is_none(),
            "netlink batch sent with a message still open"
        );
        &self.buf
    }

    /// Sequence numbers of the messages, in order.
    pub fn seqs(&self) -> &[u32] {
        &self.seqs
    }

    pub fn is_empty(&self) -> bool {
        self.seqs.is_empty()
    }

    pub fn clear(&mut self) {
        self.buf.clear();
        self.seqs.clear();
        self.open = None;
    }
}

/// One received netlink message, borrowed from the receive buffer.
#[derive(Clone, Copy, Debug)]
pub struct Message<'a> {
    pub ty: u16,
    pub flags: u16,
    pub seq: u32,
    /// Everything after the netlink header.
    pub payload: &'a [u8],
}

/// Walks the messages of one datagram; stops at the first malformed header.
pub fn messages(mut buf: &[u8]) -> impl Iterator<Item = Message<'_>> {
    std::iter::from_fn(move || {
        if buf.len() < NLMSG_HDRLEN {
            return None;
        }
        let len = u32::from_ne_bytes(buf[0..4].try_into().unwrap()) as usize;
        if len < NLMSG_HDRLEN || len > buf.len() {
            return None;
        }
        let msg = Message {
            ty: u16::from_ne_bytes(buf[4..6].try_into().unwrap()),
            flags: u16::from_ne_bytes(buf[6..8].try_into().unwrap()),
            seq: u32::from_ne_bytes(buf[8..12].try_into().unwrap()),
            payload: &buf[NLMSG_HDRLEN..len],
        };
        buf = &buf[align(len).min(buf.len())..];
        Some(msg)
    })
}

/// Walks the attributes in `buf` as (type without flag bits, value).
pub fn attrs(mut buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if buf.len() < NLA_HDRLEN {
            return None;
        }
        let len = u16::from_ne_bytes(buf[0..2].try_into().unwrap()) as usize;
        let ty = u16::from_ne_bytes(buf[2..4].try_into().unwrap()) & !NLA_F_NESTED & !(1 << 14);
        if len < NLA_HDRLEN || len > buf.len() {
            return None;
        }
        let value = &buf[NLA_HDRLEN..len];
        buf = &buf[align(len).min(buf.len())..];
        Some((ty, value))
    })
}

/// The errno and extended-ACK text of an NLMSG_ERROR message (errno 0 is a plain ACK).
pub fn parse_error(msg: &Message<'_>) -> Option<(i32, Option<String>)> {
    if msg.ty != NLMSG_ERROR || msg.payload.len() < 4 {
        return None;
    }
    let errno = -i32::from_ne_bytes(msg.payload[0..4].try_into().unwrap());
    let mut text = None;
    if msg.flags & NLM_F_ACK_TLVS != 0 {
        // With NETLINK_CAP_ACK the echoed request is only its header; the TLVs follow it.
        let tlvs = msg.payload.get(4 + NLMSG_HDRLEN..).unwrap_or(&[]);
        for (ty, value) in attrs(tlvs) {
            if ty == NLMSGERR_ATTR_MSG {
                let s = value.split(|b| *b == 0).next().unwrap_or(&[]);
                text = Some(String::from_utf8_lossy(s).into_owned());
            }
        }
    }
    Some((errno, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_lays_out_aligned_messages_with_lengths() {
        let mut b = Batch::new();
        b.begin(16, 0, 7)
            .header(&[0u8; 16])
            .attr_str(3, "eth0")
            .end();
        b.begin(16, 0, 8).header(&[0u8; 1]).attr_u32(1, 5).end();
        let msgs: Vec<_> = messages(b.bytes()).collect();
        assert_eq!(msgs.len(), 2);
        assert_eq!(msgs[0].seq, 7);
        assert_eq!(msgs[0].payload.len(), 16 + 4 + 8);
        let a: Vec<_> = attrs(&msgs[0].payload[16..]).collect();
        assert_eq!(a, vec![(3, &b"eth0\0"[..])]);
        assert_eq!(b.seqs(), &[7, 8]);
        assert_eq!(msgs[1].payload.len(), 4 + 8);
    }

    #[test]
    fn nested_attribute_length_covers_children() {
        let mut b = Batch::new();
        b.begin(16, 0, 1);
        let n = b.nest_begin(9);
        b.attr_u32(1, 1).attr_u32(2, 2);
        b.nest_end(n).end();
        let m = messages(b.bytes()).next().unwrap();
        let (ty, inner) = attrs(m.payload).next().unwrap();
        assert_eq!(ty, 9);
        assert_eq!(attrs(inner).count(), 2);
    }

    #[test]
    fn truncated_input_yields_nothing_rather_than_panicking() {
        assert_eq!(messages(&[1, 2, 3]).count(), 0);
        let mut bad = vec![0u8; 16];
        bad[0] = 200; // claims more bytes than there are
        assert_eq!(messages(&bad).count(), 0);
        assert_eq!(attrs(&[8, 0, 1]).count(), 0);
    }
}

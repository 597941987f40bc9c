//! The kernel's process events (the proc connector, NETLINK_CONNECTOR): the request that
//! subscribes a socket to them, and the events read back. Each event carries the
//! kernel's own time stamp on the monotonic clock, taken as the process execs or exits,
//! so a listener learns when things happened, not when it got round to reading.
//!
//! Encoding only, as the rest of this crate: the socket is [`crate::NlSocket`] opened on
//! `NETLINK_CONNECTOR` and joined to [`CN_IDX_PROC`]; the events are the host's (the
//! connector answers only in the first pid and user namespaces, to root).

use crate::msg::{Batch, Message};

/// The connector's netlink protocol, and the process events' index (its group too).
pub const NETLINK_CONNECTOR: libc::c_int = 11;
pub const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
const PROC_CN_MCAST_LISTEN: u32 = 1;
const PROC_CN_MCAST_IGNORE: u32 = 2;

const PROC_EVENT_EXEC: u32 = 0x0000_0002;
const PROC_EVENT_EXIT: u32 = 0x8000_0000;

/// struct cn_msg: id (idx, val), seq, ack, len, flags.
const CN_MSG_LEN: usize = 20;

/// The request that starts the events flowing to the socket that sends it. The kernel
/// builds process events for every fork, exec and exit while anyone listens: a listener
/// sends [`ignore`] when done (closing the socket alone does not count it out on every
/// kernel).
pub fn listen(b: &mut Batch, seq: u32) {
    control(b, seq, PROC_CN_MCAST_LISTEN);
}

/// The request that stops them: the listener counted out.
pub fn ignore(b: &mut Batch, seq: u32) {
    control(b, seq, PROC_CN_MCAST_IGNORE);
}

fn control(b: &mut Batch, seq: u32, op: u32) {
    let mut m = [0u8; CN_MSG_LEN + 4];
    m[0..4].copy_from_slice(&CN_IDX_PROC.to_ne_bytes());
    m[4..8].copy_from_slice(&CN_VAL_PROC.to_ne_bytes());
    m[8..12].copy_from_slice(&seq.to_ne_bytes());
    m[16..18].copy_from_slice(&4u16.to_ne_bytes());
    m[CN_MSG_LEN..].copy_from_slice(&op.to_ne_bytes());
    // The connector acknowledges nothing: the type is the one its listeners have always
    // sent, NLMSG_DONE.
    b.begin_unacked(crate::msg::NLMSG_DONE, 0, seq)
        .header(&m)
        .end();
}

/// What happened to a process, as far as these events say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcEventKind {
    /// It replaced its program (execve): its new name is in /proc/PID/comm.
    Exec,
    /// It ended, with the wait status `exit_code` holds.
    Exit { exit_code: u32 },
}

/// One process event: which thread group, what, and when (CLOCK_MONOTONIC, ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcEvent {
    pub tgid: i32,
    pub kind: ProcEventKind,
    pub monotonic_ns: u64,
}

/// An exec or an exit of a whole thread group (a thread's own exit is `None`, as is every
/// other event: forks, uid changes, comm changes, ...).
pub fn parse_proc_event(m: &Message<'_>) -> Option<ProcEvent> {
    let p = m.payload;
    let idx = u32::from_ne_bytes(p.get(0..4)?.try_into().ok()?);
    if idx != CN_IDX_PROC {
        return None;
    }
    // struct proc_event after the cn_msg: what, cpu, timestamp_ns, then the event's own.
    let e = p.get(CN_MSG_LEN..)?;
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(e.get(at..at + 4)?.try_into().ok()?))
    };
    let what = word(0)?;
    let monotonic_ns = u64::from_ne_bytes(e.get(8..16)?.try_into().ok()?);
    let (pid, tgid) = (word(16)? as i32, word(20)? as i32);
    let kind = match what {
        PROC_EVENT_EXEC => ProcEventKind::Exec,
        PROC_EVENT_EXIT if pid == tgid => ProcEventKind::Exit {
            exit_code: word(24)?,
        },
        _ => return None,
    };
    Some(ProcEvent {
        tgid,
        kind,
        monotonic_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::messages;

    /// An event as the kernel lays it out: nlmsghdr, cn_msg, proc_event.
    fn event(what: u32, pid: i32, tgid: i32, ts: u64, code: u32) -> Vec<u8> {
        let mut e = Vec::new();
        for w in [CN_IDX_PROC, CN_VAL_PROC, 0, 0] {
            e.extend_from_slice(&w.to_ne_bytes());
        }
        e.extend_from_slice(&40u16.to_ne_bytes());
        e.extend_from_slice(&0u16.to_ne_bytes());
        e.extend_from_slice(&what.to_ne_bytes());
        e.extend_from_slice(&1u32.to_ne_bytes());
        e.extend_from_slice(&ts.to_ne_bytes());
        for w in [pid as u32, tgid as u32, code, 0, 0, 0] {
            e.extend_from_slice(&w.to_ne_bytes());
        }
        let mut m = Vec::new();
        m.extend_from_slice(&((16 + e.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&3u16.to_ne_bytes());
        m.extend_from_slice(&0u16.to_ne_bytes());
        m.extend_from_slice(&[0; 8]);
        m.extend_from_slice(&e);
        m
    }

    fn parsed(bytes: &[u8]) -> Option<ProcEvent> {
        parse_proc_event(&messages(bytes).next().unwrap())
    }

    #[test]
    fn reads_exec_and_group_exit_and_skips_the_rest() {
        let exec = parsed(&event(PROC_EVENT_EXEC, 7, 7, 123, 0)).unwrap();
        assert_eq!(
            (exec.tgid, exec.kind, exec.monotonic_ns),
            (7, ProcEventKind::Exec, 123)
        );
        let exit = parsed(&event(PROC_EVENT_EXIT, 9, 9, 5, 256)).unwrap();
        assert_eq!(exit.kind, ProcEventKind::Exit { exit_code: 256 });
        assert_eq!(
            parsed(&event(PROC_EVENT_EXIT, 10, 9, 5, 0)),
            None,
            "a thread's exit"
        );
        assert_eq!(parsed(&event(1, 9, 9, 5, 0)), None, "a fork");
    }

    #[test]
    fn listen_is_one_unacknowledged_message() {
        let mut b = Batch::new();
        listen(&mut b, 5);
        let bytes = b.bytes();
        assert_eq!(bytes.len(), 16 + 24);
        assert!(
            b.seqs().is_empty(),
            "the connector sends no ACK to wait for"
        );
        assert_eq!(&bytes[16 + 20..], &PROC_CN_MCAST_LISTEN.to_ne_bytes());
        let mut b = Batch::new();
        ignore(&mut b, 6);
        assert_eq!(&b.bytes()[16 + 20..], &PROC_CN_MCAST_IGNORE.to_ne_bytes());
    }
}

//! The proc connector as the kernel runs it: a process started after the subscription is
//! seen to exec and then to exit, in that order on the kernel's clock. Needs root (the
//! connector answers only root in the first namespaces).

use nsfleet_netlink::proc_events::{self, ProcEventKind, CN_IDX_PROC, NETLINK_CONNECTOR};
use nsfleet_netlink::{Batch, NlSocket};
use std::time::{Duration, Instant};

#[test]
fn a_child_is_seen_to_exec_and_then_exit() {
    let mut cn = NlSocket::open_protocol(NETLINK_CONNECTOR).expect("a connector socket");
    cn.join_group(CN_IDX_PROC)
        .expect("the process events' group");
    let mut b = Batch::new();
    proc_events::listen(&mut b, cn.next_seq());
    cn.send_unacked(&b).expect("the subscription");
    let child = std::process::Command::new("true").spawn().expect("true");
    let pid = child.id() as i32;
    let (mut exec, mut exit) = (None, None);
    let t = Instant::now();
    while exit.is_none() && t.elapsed() < Duration::from_secs(10) {
        let r =
            cn.recv_each(
                Some(Duration::from_millis(500)),
                |m| match proc_events::parse_proc_event(m) {
                    Some(e) if e.tgid == pid && e.kind == ProcEventKind::Exec => exec = Some(e),
                    Some(e) if e.tgid == pid => exit = Some(e),
                    _ => {}
                },
            );
        if let Err(e) = r {
            assert!(
                matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) || e.raw_os_error() == Some(libc::ENOBUFS),
                "{e}"
            );
        }
    }
    let mut b = Batch::new();
    proc_events::ignore(&mut b, cn.next_seq());
    cn.send_unacked(&b).expect("the listener counted out");
    let mut child = child;
    assert!(child.wait().expect("reaped").success());
    let (exec, exit) = (exec.expect("its exec"), exit.expect("its exit"));
    assert_eq!(exit.kind, ProcEventKind::Exit { exit_code: 0 });
    assert!(
        exec.monotonic_ns <= exit.monotonic_ns,
        "{exec:?} after {exit:?}"
    );
}

//! `nsfleet capture`: packets of several interfaces of a live fleet, filtered in the
//! kernel, merged in time order, as pcapng that tcpdump reads (from a file and from a
//! pipe) or as lines; Ctrl-C ends it with the counts; bad input is refused before any
//! capture starts.

mod harness;

use harness::*;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};

const LINE: &str = "[fleet]\nname = \"cp\"\n[[generate]]\nkind = \"line\"\ncount = 3\n";

/// A capture running in the background, ended (and waited for) when dropped.
struct Capture {
    child: Child,
    stderr: BufReader<std::process::ChildStderr>,
}

impl Capture {
    /// Starts `nsfleet capture ARGS` with its stdout going to `stdout`, and returns once it
    /// says it is capturing.
    fn start(env: &Env, args: &[&str], stdout: Stdio) -> Capture {
        let mut child = env
            .cmd(&[&["capture", "cp"], args].concat())
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        stderr.read_line(&mut first).unwrap();
        assert!(first.contains("capturing on"), "{first}");
        Capture { child, stderr }
    }

    /// Waits for it to end; its exit code and the rest of what it said.
    fn finish(mut self) -> (Option<i32>, String) {
        let status = self.child.wait().unwrap();
        let mut rest = String::new();
        self.stderr.read_to_string(&mut rest).unwrap();
        (status.code(), rest)
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ping(env: &Env, node: &str, to: &str, count: &str) {
    env.ok(&[
        "exec", "cp", node, "--", "ping", "-c", count, "-i", "0.2", "-W", "1", to,
    ]);
}

/// The pcapng blocks of `bytes` as (type, body).
fn blocks(bytes: &[u8]) -> Vec<(u32, &[u8])> {
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    let mut out = Vec::new();
    let mut at = 0;
    while at + 12 <= bytes.len() {
        let (kind, len) = (word(at), word(at + 4) as usize);
        assert_eq!(
            word(at + len - 4) as usize,
            len,
            "block framed by its length"
        );
        out.push((kind, &bytes[at + 8..at + len - 4]));
        at += len;
    }
    assert_eq!(at, bytes.len(), "no trailing bytes");
    out
}

/// The value of option `code` in the options that start at `opts`.
fn option(mut opts: &[u8], code: u16) -> Option<&[u8]> {
    while opts.len() >= 4 {
        let c = u16::from_le_bytes([opts[0], opts[1]]);
        let len = u16::from_le_bytes([opts[2], opts[3]]) as usize;
        if c == code {
            return Some(&opts[4..4 + len]);
        }
        opts = &opts[4 + len.next_multiple_of(4)..];
    }
    None
}

#[test]
fn two_interfaces_merged_in_time_order_into_pcapng_that_tcpdump_reads() {
    let env = Env::new("capfile");
    let _f = env.up(LINE);
    let file = env.files.join("two.pcapng");
    let cap = Capture::start(
        &env,
        &[
            "r2:eth0",
            "r2:eth1",
            "-c",
            "8",
            "-w",
            file.to_str().unwrap(),
            "icmp",
        ],
        Stdio::null(),
    );
    // Echo requests and replies on eth0, then on eth1, then eth0 again: 8 ICMP packets,
    // and the ARP and IPv6 around them filtered out in the kernel.
    ping(&env, "r1", "10.0.0.2", "1");
    ping(&env, "r3", "10.0.0.5", "2");
    ping(&env, "r1", "10.0.0.2", "1");
    let (code, err) = cap.finish();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("8 packets captured"), "{err}");
    assert!(err.contains("0 packets dropped by kernel"), "{err}");

    let bytes = std::fs::read(&file).unwrap();
    let blocks = blocks(&bytes);
    let names: Vec<String> = (blocks.iter())
        .filter(|(k, _)| *k == 1)
        .map(|(_, b)| String::from_utf8(option(&b[8..], 2).unwrap().to_vec()).unwrap())
        .collect();
    assert_eq!(names, ["r2:eth0", "r2:eth1"]);
    let packets: Vec<(u32, u64)> = (blocks.iter())
        .filter(|(k, _)| *k == 6)
        .map(|(_, b)| {
            let w = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
            (w(0), (w(4) as u64) << 32 | w(8) as u64)
        })
        .collect();
    let ifaces: Vec<u32> = packets.iter().map(|p| p.0).collect();
    assert_eq!(
        ifaces,
        [0, 0, 1, 1, 1, 1, 0, 0],
        "eth0, then eth1, then eth0"
    );
    assert!(
        packets.windows(2).all(|w| w[0].1 <= w[1].1),
        "in time order"
    );
    assert_eq!(
        blocks.iter().filter(|(k, _)| *k == 5).count(),
        2,
        "statistics per interface"
    );

    // An independent reader: tcpdump (libpcap) reads the file.
    let read = Command::new("tcpdump")
        .args(["-n", "-r", file.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&read.stdout);
    assert!(
        read.status.success(),
        "{}",
        String::from_utf8_lossy(&read.stderr)
    );
    assert_eq!(text.lines().count(), 8, "{text}");
    assert_eq!(text.matches("ICMP echo request").count(), 4, "{text}");
    assert!(
        text.contains("10.0.0.6 > 10.0.0.5: ICMP echo request"),
        "{text}"
    );
}

#[test]
fn a_stream_to_a_pipe_is_read_live_and_lines_are_printed_without_w() {
    let env = Env::new("cappipe");
    let _f = env.up(LINE);
    let mut tcpdump = Command::new("tcpdump")
        .args(["-n", "-l", "-r", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let into = Stdio::from(tcpdump.stdin.take().unwrap());
    let cap = Capture::start(&env, &["r1:eth0", "-w", "-", "-c", "2", "icmp"], into);
    ping(&env, "r1", "10.0.0.2", "1");
    let (code, err) = cap.finish();
    assert_eq!(code, Some(0), "{err}");
    let out = tcpdump.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("IP 10.0.0.1 > 10.0.0.2: ICMP echo request"),
        "{text}"
    );
    assert!(
        text.contains("IP 10.0.0.2 > 10.0.0.1: ICMP echo reply"),
        "{text}"
    );

    // Without -w: a line a packet, saying which interface and which way.
    let cap = Capture::start(&env, &["r1:eth0", "-c", "2", "icmp"], Stdio::piped());
    ping(&env, "r1", "10.0.0.2", "1");
    let mut child = cap;
    let mut lines = String::new();
    child
        .child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut lines)
        .unwrap();
    let (code, err) = child.finish();
    assert_eq!(code, Some(0), "{err}");
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].ends_with("r1:eth0 Out IP 10.0.0.1 > 10.0.0.2: ICMP echo request, length 64"),
        "{lines:?}"
    );
    assert!(
        lines[1].contains("r1:eth0 In  IP 10.0.0.2 > 10.0.0.1: ICMP echo reply"),
        "{lines:?}"
    );
}

#[test]
fn ctrl_c_ends_a_capture_cleanly_with_its_counts() {
    let env = Env::new("capint");
    let _f = env.up(LINE);
    let file = env.files.join("int.pcapng");
    let cap = Capture::start(
        &env,
        &["r2:eth0", "-w", file.to_str().unwrap()],
        Stdio::null(),
    );
    ping(&env, "r1", "10.0.0.2", "2");
    signal(cap.child.id() as i32, libc::SIGINT);
    let (code, err) = cap.finish();
    assert_eq!(code, Some(0), "{err}");
    let captured: u64 = (err.lines())
        .find_map(|l| l.strip_suffix(" packets captured"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{err}"));
    assert!(captured >= 4, "{err}");
    assert!(err.contains("packets dropped by kernel"), "{err}");
    let bytes = std::fs::read(&file).unwrap();
    let blocks = blocks(&bytes);
    assert_eq!(
        blocks.iter().filter(|(k, _)| *k == 6).count() as u64,
        captured
    );
    assert_eq!(
        blocks.last().unwrap().0,
        5,
        "ends with the interface's statistics"
    );
}

#[test]
fn packets_the_kernel_drops_are_counted_and_reported() {
    let env = Env::new("capdrop");
    let _f = env.up(LINE);
    // A reader that does not read yet: the capture blocks writing to it, its socket's
    // buffer fills, and the kernel drops what comes after.
    let mut cap = Capture::start(&env, &["r2:eth0", "-w", "-", "icmp"], Stdio::piped());
    let mut out = cap.child.stdout.take().unwrap();
    env.ok(&[
        "exec", "cp", "r1", "--", "ping", "-q", "-f", "-c", "20000", "-s", "1400", "10.0.0.2",
    ]);
    let reader = std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    signal(cap.child.id() as i32, libc::SIGINT);
    let (code, err) = cap.finish();
    reader.join().unwrap().unwrap();
    assert_eq!(code, Some(0), "{err}");
    let count = |what: &str| -> u64 {
        (err.lines())
            .find_map(|l| l.strip_suffix(what))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {what:?} in {err}"))
    };
    let (captured, received, dropped) = (
        count(" packets captured"),
        count(" packets received by filter"),
        count(" packets dropped by kernel"),
    );
    assert!(dropped > 0, "{err}");
    // As tcpdump's: what was still queued in the socket at Ctrl-C was received, not
    // captured.
    assert!(captured + dropped <= received, "{err}");
}

#[test]
fn what_cannot_be_captured_is_refused_before_capturing() {
    let env = Env::new("capbad");
    let _f = env.up(LINE);
    let unwritable = env.files.join("no/such/dir/x.pcapng");
    let cases: [(&[&str], &str); 6] = [
        (
            &["capture", "cp", "r9:eth0"],
            "has no node \"r9\": did you mean r1 or r2 or r3?",
        ),
        (
            &["capture", "cp", "r2:eth3"],
            "no interface \"eth3\" (it has lo, eth0, eth1; did you mean eth0 or eth1?)",
        ),
        (
            &["capture", "cp", "r2:eth0", "tcp", "port", "banana"],
            "filter \"tcp port banana\": unknown port 'banana'",
        ),
        (
            &[
                "capture",
                "cp",
                "r2:eth0",
                "-w",
                unwritable.to_str().unwrap(),
            ],
            "cannot write it",
        ),
        (&["capture", "cp", "icmp"], "no interface to capture"),
        (&["capture", "nope", "r2:eth0"], "no fleet named \"nope\""),
    ];
    for (args, expected) in cases {
        let err = env.fails(args, expected);
        assert!(!err.contains("capturing on"), "{args:?}: {err}");
    }
    assert!(!unwritable.exists());
    let bad_snaplen = env.run(&["capture", "cp", "r2:eth0", "-s", "10"]);
    assert_eq!(bad_snaplen.status.code(), Some(2));
}

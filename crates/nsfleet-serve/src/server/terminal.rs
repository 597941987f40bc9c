//! `GET /api/v1/fleets/{fleet}/nodes/{node}/terminal`: a WebSocket to a shell in a node, on
//! a real pseudo-terminal: `nsfleet exec FLEET NODE -- sh` runs on its terminal end, as in
//! any terminal window (job control, Ctrl-C, colours, `vtysh`, `top`).
//!
//! Frames: binary ones carry the terminal's bytes both ways; the page's text frames are
//! commands, `{"resize": {"cols": C, "rows": R}}`. The socket closes when the shell ends
//! (its status in the close frame's reason; jobs it left running do not hold it open),
//! when the node is removed or the fleet goes down (said the same way), and the shell
//! ends when the socket closes: the terminal's hang-up (SIGHUP) first, then SIGKILL
//! after [`GRACE`].

use super::api::{ask, unexpected, watch};
use super::http::{ApiError, Request, Stream};
use super::{child, Server};
use nsfleet::control::{Client, Reply, Request as Ask};
use nsfleet::sys::pty;
use nsfleet_client::FleetRef;
use serde_json::Value;
use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};
use tungstenite::protocol::{frame::coding::CloseCode, CloseFrame, Role, WebSocket};
use tungstenite::{Error as WsError, Message};

/// How long a shell has to end after its terminal hangs up.
const GRACE: Duration = Duration::from_secs(2);
/// How long the page may leave the shell's output unread before the terminal is ended.
const STALLED: Duration = Duration::from_secs(30);
/// The shell a terminal runs: the node's bash when it has one, else its sh. Interactive,
/// not a login shell: a confined node's root may not read the host's /root, and bash would
/// say so on every terminal; without a readable ~/.bashrc, a prompt saying who and where.
const SHELL: &str = r#"command -v bash >/dev/null 2>&1 || exec sh -i; [ -r "$HOME/.bashrc" ] && exec bash -i; PS1='\u@\h:\w\$ ' exec bash --norc -i"#;

pub fn open(
    server: &Server,
    fleet: FleetRef,
    node: &str,
    r: &Request,
    reader: BufReader<Box<dyn Stream>>,
    socket: TcpStream,
) -> anyhow::Result<()> {
    let mut reader = reader;
    let key = match handshake_key(r) {
        Ok(k) => k,
        Err(e) => return Ok(e.send(reader.get_mut())?),
    };
    if let Err(e) = node_exists(&fleet, node) {
        return Ok(e.send(reader.get_mut())?);
    }
    // Without the fleet's events (a supervisor that cannot watch every node's links),
    // the terminal still works; its node's removal is then not seen by it.
    let mut events = watch(&fleet).ok();
    let size = |name: &str, default: u16| {
        (r.query.get(name).and_then(|v| v.parse().ok()))
            .filter(|v| (1..=1000).contains(v))
            .unwrap_or(default)
    };
    let (master, shell) =
        match start_shell(server, &fleet, node, size("rows", 24), size("cols", 80)) {
            Ok(s) => s,
            Err(e) => return Ok(e.send(reader.get_mut())?),
        };
    let mut shell = shell;
    let upgrade = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
        tungstenite::handshake::derive_accept_key(key.as_bytes())
    );
    reader.get_mut().write_all(upgrade.as_bytes())?;
    let early = reader.buffer().to_vec();
    let ws = WebSocket::from_partially_read(reader.into_inner(), early, Role::Server, None);
    let ended = relay(
        ws,
        &socket,
        &master,
        events.as_mut(),
        &mut shell,
        (&fleet.name, node),
    );
    // The terminal hangs up: the shell and what it runs get SIGHUP, as when a window
    // closes; what outlives the grace time is killed (as `shell` is dropped).
    drop(master);
    ended_within(&mut shell, GRACE);
    ended
}

/// The `Sec-WebSocket-Key` of a WebSocket request, or why `r` is not one.
fn handshake_key(r: &Request) -> Result<String, ApiError> {
    let upgrade = r
        .header("upgrade")
        .is_some_and(|u| u.eq_ignore_ascii_case("websocket"));
    let version = r.header("sec-websocket-version") == Some("13");
    match (upgrade, version, r.header("sec-websocket-key")) {
        (true, true, Some(k)) => Ok(k.to_string()),
        _ => Err(ApiError::new(
            400,
            "a terminal is a WebSocket (version 13): connect with Upgrade: websocket",
        )),
    }
}

/// Whether the fleet has `node`, asked of its supervisor (a 404 with the closest names
/// otherwise).
fn node_exists(fleet: &FleetRef, node: &str) -> Result<(), ApiError> {
    let netns = Ask::Netns {
        node: node.to_string(),
    };
    match ask(fleet, &netns, 500)?.0 {
        Reply::Netns { .. } => Ok(()),
        other => Err(unexpected(&other)),
    }
}

/// The shell, started on a new terminal of `rows` x `cols`; the terminal's other end.
fn start_shell(
    server: &Server,
    fleet: &FleetRef,
    node: &str,
    rows: u16,
    cols: u16,
) -> Result<(OwnedFd, child::Running), ApiError> {
    let fail = |e: std::io::Error| ApiError::new(500, format!("a pseudo-terminal: {e}"));
    let (master, slave) = pty::open().map_err(fail)?;
    pty::set_size(master.as_fd(), rows, cols).map_err(fail)?;
    pty::set_nonblocking(master.as_fd()).map_err(fail)?;
    let mut exec = server.nsfleet();
    exec.args(["exec", &fleet.name, node, "--", "sh", "-c", SHELL]);
    exec.env("TERM", "xterm-256color");
    pty::run_on(&mut exec, &slave).map_err(fail)?;
    let shell = child::start(exec)?;
    Ok((master, shell))
}

/// Why the terminal ends, if the events read now say it must.
fn node_gone(events: &mut Client, fleet: &str, node: &str) -> Option<String> {
    loop {
        let e = match events.next_as::<Value>() {
            Ok(Some(e)) => e,
            _ => return Some(format!("fleet {fleet} went away")),
        };
        match (e["event"].as_str(), e["action"].as_str()) {
            (Some("node"), Some("removed")) if e["node"].as_str() == Some(node) => {
                return Some(format!("node {node} was removed from fleet {fleet}"))
            }
            (Some("fleet_down"), _) => return Some(format!("fleet {fleet} went down")),
            _ => {}
        }
        if !events.has_line() {
            return None;
        }
    }
}

/// Carries bytes between the socket and the terminal until either ends, the shell ends,
/// the node goes, or the page stops reading for [`STALLED`]. Each side waits for the
/// other without blocking: what the page typed waits in `typed` while the shell reads
/// nothing (the socket is not read meanwhile), and what the shell wrote waits in the
/// socket's queue while the page reads nothing (the terminal is not read meanwhile).
fn relay(
    mut ws: WebSocket<Box<dyn Stream>>,
    socket: &TcpStream,
    master: &OwnedFd,
    mut events: Option<&mut Client>,
    shell: &mut child::Running,
    (fleet, node): (&str, &str),
) -> anyhow::Result<()> {
    use libc::{POLLIN, POLLOUT};
    socket.set_nonblocking(true)?;
    let mut terminal = std::fs::File::from(master.try_clone()?);
    let mut buf = vec![0u8; 32 << 10];
    let mut typed: Vec<u8> = Vec::new();
    // Since when a frame has waited for the socket to take it.
    let mut stalled: Option<Instant> = None;
    // The shell's end, readable once it has exited: seen even while a job it left in the
    // background holds the terminal open (its end then gives no EIO). A terminal window
    // closes when its shell ends, whatever the shell left running.
    let shell_ended = nsfleet::sys::process::pidfd_open(shell.child().id() as i32).ok();
    loop {
        let (reading_socket, reading_terminal) = (typed.is_empty(), stalled.is_none());
        let socket_wants =
            (if reading_socket { POLLIN } else { 0 }) | if reading_terminal { 0 } else { POLLOUT };
        let terminal_wants = (if reading_terminal { POLLIN } else { 0 })
            | if typed.is_empty() { 0 } else { POLLOUT };
        // The socket and the terminal, then what is there of the shell's end and the
        // fleet's events.
        let mut fds = vec![
            (socket.as_fd(), socket_wants),
            (master.as_fd(), terminal_wants),
        ];
        fds.extend(shell_ended.as_ref().map(|fd| (fd.as_fd(), POLLIN)));
        fds.extend(events.as_ref().map(|e| (e.as_fd(), POLLIN)));
        let left = stalled.map(|since| STALLED.saturating_sub(since.elapsed()));
        let mut ready = nsfleet::sys::poll::poll_events(&fds, left)?;
        drop(fds);
        let events_ready = events.is_some() && ready.pop() != Some(0);
        let shell_ready = shell_ended.is_some() && ready.pop() != Some(0);
        if stalled.is_some_and(|since| since.elapsed() >= STALLED) {
            // The page has not read for that long: it is gone, or wedged.
            return Ok(());
        }
        if ready[0] & (libc::POLLHUP | libc::POLLERR) != 0 {
            // The page's connection is gone (said at once, even while the socket is not
            // being read: poll would say so again and again).
            return Ok(());
        }
        if let (Some(e), true) = (events.as_deref_mut(), events_ready) {
            if let Some(why) = node_gone(e, fleet, node) {
                return close(&mut ws, CloseCode::Away, &why);
            }
        }
        if shell_ready {
            // What it wrote last goes to the page first: what the terminal holds, not
            // what a job left behind goes on writing.
            for _ in 0..16 {
                let Ok(n @ 1..) = terminal.read(&mut buf) else {
                    break;
                };
                if !flushed(ws.send(Message::binary(buf[..n].to_vec())))? {
                    break;
                }
            }
            return close(&mut ws, CloseCode::Normal, &shell_end(shell, node));
        }
        if ready[0] & POLLOUT != 0 && flushed(ws.flush())? {
            stalled = None;
        }
        if ready[0] & !POLLOUT != 0 && reading_socket {
            loop {
                match ws.read() {
                    Ok(Message::Binary(b)) => typed.extend_from_slice(&b),
                    Ok(Message::Text(t)) => command(&t, master),
                    // The page closed it: the answer tungstenite queued goes out.
                    Ok(Message::Close(_)) => return close(&mut ws, CloseCode::Normal, ""),
                    Ok(_) => {}
                    Err(WsError::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(WsError::ConnectionClosed | WsError::AlreadyClosed) => return Ok(()),
                    Err(e) => return Err(e.into()),
                }
            }
        }
        if !typed.is_empty() {
            match terminal.write(&typed) {
                Ok(n) => drop(typed.drain(..n)),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => {} // The shell's end: said when the terminal is read.
            }
        }
        if reading_terminal && ready[1] & !POLLOUT != 0 {
            match terminal.read(&mut buf) {
                Ok(n) if n > 0 => {
                    if !flushed(ws.send(Message::binary(buf[..n].to_vec())))? {
                        stalled = Some(Instant::now());
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                // EIO: every process on the terminal's end has gone, the shell first.
                _ => return close(&mut ws, CloseCode::Normal, &shell_end(shell, node)),
            }
        }
    }
}

/// What the close frame says of the shell's end.
fn shell_end(shell: &mut child::Running, node: &str) -> String {
    match ended_within(shell, GRACE) {
        Some(c) => format!("the shell in {node} ended (exit status {c})"),
        None => format!("the shell in {node} was killed"),
    }
}

/// Waits up to `grace` for the shell's end; its exit status, if it exited.
fn ended_within(shell: &mut child::Running, grace: Duration) -> Option<i32> {
    let deadline = Instant::now() + grace;
    loop {
        match shell.child().try_wait() {
            Ok(Some(status)) => return status.code(),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => return None,
        }
    }
}

/// Whether a send or flush has gone out whole; a socket that is full is not an error.
fn flushed(r: Result<(), WsError>) -> anyhow::Result<bool> {
    match r {
        Ok(()) => Ok(true),
        Err(WsError::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// A page's command: a resize. Anything else is ignored.
fn command(text: &str, master: &OwnedFd) {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return;
    };
    let (rows, cols) = (&v["resize"]["rows"], &v["resize"]["cols"]);
    if let (Some(r), Some(c)) = (rows.as_u64(), cols.as_u64()) {
        let _ = pty::set_size(
            master.as_fd(),
            r.clamp(1, 1000) as u16,
            c.clamp(1, 1000) as u16,
        );
    }
}

/// Closes the socket with `reason` (at most 123 bytes, as a close frame holds), waiting a
/// little for the page to see it.
fn close(ws: &mut WebSocket<Box<dyn Stream>>, code: CloseCode, reason: &str) -> anyhow::Result<()> {
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let frame = CloseFrame {
        code,
        reason: reason[..end].to_string().into(),
    };
    let _ = ws.close(Some(frame));
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        match ws.read().map(drop).or_else(|e| flushed(Err(e)).map(drop)) {
            Err(_) => break,
            Ok(()) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    let _ = ws.get_mut().flush();
    Ok(())
}

//! A user's fleet's door to the host: a forwarder in the host's namespaces, as
//! rootlesskit's builtin port driver is. A user's fleet lives in a network namespace of
//! its own, which a process of the host's may not enter, and whose supervisor may not
//! enter the host's; so `up` forks this forwarder before it makes the fleet, and it stays
//! behind in the host's namespaces. Both ways:
//! - In: published ports. `up` binds the host's ports first (a port taken, or below the
//!   host's unprivileged floor, is refused before anything exists). For each connection
//!   the forwarder accepts it asks the supervisor for one to the same port made inside
//!   the fleet (`dial`, a descriptor passed back) and copies both ways.
//! - Out: connections the supervisor asks for in the host's namespace (an Open vSwitch
//!   controller the user runs on the host), made and passed back over a socket pair
//!   whose other end only the supervisor holds (nsfleet-subsys's `host_dial`).
//!
//! It lives as long as the supervisor: it watches a pidfd of it and ends with it, `down`,
//! a crash or `kill -9` alike, and with the `up` that forked it if that fails before the
//! supervisor exists. It runs nothing of the fleet's and holds nothing but its sockets.

use crate::FleetRef;
use anyhow::{bail, Context};
use nsfleet::subsys::host_dial;
use nsfleet::sys;
use nsfleet::topology::{Proto, PublishedPort};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// Most ports one forwarder takes: its listeners are among the descriptors a helper keeps,
/// after its standard streams, the pipe it is told on and its end of the host's line.
pub const MOST_PORTS: usize = sys::MAX_KEPT - 5;

/// The forwarder of a fleet being made: told its supervisor once there is one.
pub struct Forwarder {
    tell: std::io::PipeWriter,
    /// The supervisor's end of the line on which the forwarder makes connections in the
    /// host's namespace, until it is handed to the supervisor.
    host_end: Option<OwnedFd>,
}

impl Forwarder {
    /// Binds `ports` on the host (their file is `file`, for the places of refusals) and
    /// forks the forwarder, which waits to be told the supervisor.
    pub fn start(file: &Path, ports: &[PublishedPort]) -> anyhow::Result<Forwarder> {
        let listeners = bind(file, ports)?;
        let (told, tell) = std::io::pipe()?;
        let (ours, host_end) = UnixStream::pair()?;
        // Nothing of the caller's streams: a caller that reads `up`'s output to its end
        // (a pipe, a test) would wait for this process too.
        let null = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")?;
        let mut fds: Vec<BorrowedFd<'_>> = vec![null.as_fd(), null.as_fd(), null.as_fd()];
        fds.push(told.as_fd());
        fds.push(ours.as_fd());
        fds.extend(listeners.iter().map(|(_, l)| l.as_fd()));
        let how = sys::HelperStart {
            name: c"nsfleet-fwd",
            fds: &fds,
            new_session: true,
            unblock_signals: true,
        };
        let ports: Vec<u16> = listeners.iter().map(|(p, _)| *p).collect();
        sys::fork_helper(&how, |kept| {
            let told = kept.take(3).map(std::io::PipeReader::from);
            let host = kept.take(4);
            let listeners: Vec<(u16, TcpListener)> = (ports.iter().enumerate())
                .filter_map(|(i, p)| Some((*p, TcpListener::from(kept.take(5 + i)?))))
                .collect();
            match (told, host) {
                (Some(told), Some(host)) => serve(told, host, listeners),
                _ => 1,
            }
        })
        .context("starting the fleet's forwarder in the host's namespaces")?;
        Ok(Forwarder {
            tell,
            host_end: Some(host_end.into()),
        })
    }

    /// The supervisor's end of the line on which the forwarder makes connections in the
    /// host's namespace (`SupervisorArgs::host_dialer`); once.
    pub fn take_host_end(&mut self) -> Option<OwnedFd> {
        self.host_end.take()
    }

    /// Tells the forwarder the fleet it forwards to: its supervisor and run folder; with
    /// `outbound`, to give the fleet's namespace the world through pasta, and waits until
    /// pasta has (a node's first connection out would fail before: `deploy` then `exec
    /// curl` did, seen in CI). By `up`, in the fleet's network namespace.
    pub fn serve(
        mut self,
        supervisor: i32,
        fleet: &FleetRef,
        outbound: bool,
    ) -> anyhow::Result<()> {
        let line = format!(
            "{supervisor} {} {} {}\n",
            u8::from(outbound),
            fleet.name,
            fleet.run_dir.display()
        );
        (self.tell.write_all(line.as_bytes())).context("telling the fleet's forwarder")?;
        if outbound && !wait_for_outbound_route(PASTA_PATIENCE) {
            let log = fleet.dir().log_dir(&fleet.name).join("pasta.log");
            eprintln!(
                "nsfleet: warning: pasta has not given the fleet a route to the world after {} s: the nodes reach no further than the fleet yet (see {})",
                PASTA_PATIENCE.as_secs(),
                log.display()
            );
        }
        Ok(())
    }
}

/// How long `up` waits for pasta to configure the fleet's namespace (it takes
/// milliseconds).
const PASTA_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// Waits, `bound` at most, until this thread's network namespace routes by default
/// through pasta's interface ([`nsfleet::subsys::outbound::IFACE`]): what pasta
/// configures last. Whether it does.
fn wait_for_outbound_route(bound: std::time::Duration) -> bool {
    use std::net::Ipv4Addr;
    let until = std::time::Instant::now() + bound;
    let routed = || {
        let table = std::fs::read_to_string("/proc/thread-self/net/route").unwrap_or_default();
        let default = nsfleet::sys::ipv4_route_device(&table, Ipv4Addr::UNSPECIFIED, 0);
        default.as_deref() == Some(nsfleet::subsys::outbound::IFACE)
    };
    while !routed() {
        if std::time::Instant::now() >= until {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    true
}

/// Each TCP port bound on all of the host's addresses (or the one given), or why not.
fn bind(file: &Path, ports: &[PublishedPort]) -> anyhow::Result<Vec<(u16, TcpListener)>> {
    if ports.len() > MOST_PORTS {
        let at = ports[MOST_PORTS].at;
        bail!(
            "{}:{at}: a user's fleet publishes at most {MOST_PORTS} ports",
            file.display()
        );
    }
    let floor = std::fs::read_to_string("/proc/sys/net/ipv4/ip_unprivileged_port_start")
        .ok()
        .and_then(|s| s.trim().parse::<u16>().ok())
        .unwrap_or(1024);
    let mut bound = Vec::new();
    for p in ports {
        let place = format!("{}:{}", file.display(), p.at);
        if p.proto != Proto::Tcp {
            bail!("{place}: a user's fleet forwards TCP ports only, not {:?} ones: run nsfleet as root to publish it", p.proto);
        }
        if p.host_port < floor {
            bail!("{place}: host port {} is below {floor}, the first a user may bind (sysctl net.ipv4.ip_unprivileged_port_start); publish it on {} or higher, or lower that sysctl", p.host_port, floor);
        }
        let addr = p
            .host_addr
            .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into());
        let l = TcpListener::bind((addr, p.host_port))
            .with_context(|| format!("{place}: host port {}", p.host_port))?;
        bound.push((p.host_port, l));
    }
    Ok(bound)
}

/// The forwarder's body: told the supervisor, it forwards until the supervisor ends.
fn serve(told: std::io::PipeReader, host: OwnedFd, listeners: Vec<(u16, TcpListener)>) -> i32 {
    // The supervisor's requests, on a thread of their own: a connection that does not
    // answer takes seconds, which the ports' connections do not wait for.
    std::thread::spawn(move || while let Ok(true) = host_dial::answer(host.as_fd()) {});
    let mut line = String::new();
    if BufReader::new(told).read_line(&mut line).is_err() || line.is_empty() {
        // `up` failed before there was a fleet, or ended: nothing to forward to.
        return 0;
    }
    let mut words = line.trim_end().splitn(4, ' ');
    let (Some(pid), Some(outbound), Some(name), Some(run_dir)) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return 1;
    };
    let Ok(supervisor) = pid
        .parse::<i32>()
        .map_err(drop)
        .and_then(|p| sys::pidfd_open(p).map_err(drop))
    else {
        return 1;
    };
    let fleet = FleetRef {
        name: name.to_string(),
        run_dir: PathBuf::from(run_dir),
    };
    // Killed with this process, which ends with the supervisor.
    let _pasta = (outbound == "1").then(|| pasta(pid, &fleet));
    let watched: Vec<BorrowedFd<'_>> = std::iter::once(supervisor.as_fd())
        .chain(listeners.iter().map(|(_, l)| l.as_fd()))
        .collect();
    loop {
        let Ok(ready) = sys::poll_readable(&watched, None) else {
            continue;
        };
        // A pidfd is readable once its process has ended.
        if ready[0] {
            return 0;
        }
        for ((port, l), _) in listeners.iter().zip(&ready[1..]).filter(|(_, r)| **r) {
            if let Ok((outside, _)) = l.accept() {
                let (fleet, port) = (fleet.clone(), *port);
                std::thread::spawn(move || forward(&fleet, port, outside));
            }
        }
    }
}

/// pasta, giving the fleet's namespace (that of `supervisor`, a pid) an interface to the
/// world (nsfleet-subsys's `outbound`): in the foreground, killed when this thread ends
/// (the forwarder's main thread, which ends with the supervisor), its messages in the
/// fleet's log folder. Told nothing of the host's ports: the forwarder publishes them.
fn pasta(supervisor: &str, fleet: &FleetRef) -> std::io::Result<std::process::Child> {
    let log = fleet.dir().log_dir(&fleet.name).join("pasta.log");
    let log = std::fs::File::create(log)?;
    let mut c = std::process::Command::new("pasta");
    c.args(["--config-net", "--foreground", "--quiet"])
        .args(["--ns-ifname", nsfleet::subsys::outbound::IFACE])
        .args(["-t", "none", "-u", "none", "-T", "none", "-U", "none"])
        .arg(supervisor)
        .stdout(log.try_clone()?)
        .stderr(log);
    sys::die_with_spawner(&mut c);
    c.spawn()
}

/// One connection: a connection to `port` inside the fleet, and both ways copied until
/// each side has said all it had.
fn forward(fleet: &FleetRef, port: u16, outside: TcpStream) {
    let Ok(inside) = dial(fleet, port) else {
        return;
    };
    let (Ok(outside2), Ok(inside2)) = (outside.try_clone(), inside.try_clone()) else {
        return;
    };
    let one_way = |mut from: TcpStream, mut to: TcpStream| {
        move || {
            let mut buf = [0u8; 64 << 10];
            while let Ok(n) = from.read(&mut buf) {
                if n == 0 || to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            let _ = to.shutdown(std::net::Shutdown::Write);
        }
    };
    let back = std::thread::spawn(one_way(inside2, outside2));
    one_way(outside, inside)();
    let _ = back.join();
}

/// A connection to `port` made by the fleet's supervisor in the fleet's namespace.
fn dial(fleet: &FleetRef, port: u16) -> anyhow::Result<TcpStream> {
    use nsfleet::control::{Reply, Request};
    let mut c = fleet.connect()?;
    match c.call(&Request::Dial { port })? {
        Reply::Dialed { .. } => {}
        Reply::Error { message, .. } => bail!("{message}"),
        _ => bail!("unexpected reply from the supervisor"),
    }
    let fd: OwnedFd = (c.take_fd()).context("the supervisor sent no connection")?;
    Ok(TcpStream::from(fd))
}

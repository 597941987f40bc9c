//! `routes` and `ping` on the real kernel, end to end: this test binary launches a
//! supervisor through the library (as nsfleet's own `embedded` test does) for a fleet of
//! two nodes on a veth (b with an address in a subnet a reaches only by its static
//! routes), then asks through nsfleet-client's `probe` as a scenario does.
//! Its guard ends the fleet and reaps the supervisor even when an assertion fails. Run as
//! root.

use nsfleet::control::{Client, Request, UpEvent};
use nsfleet::rundir::{ProcId, RunDir};
use nsfleet::supervisor::{launch, SupervisorArgs};
use nsfleet::sys;
use nsfleet::sys::ping::Pinger;
use nsfleet_client::probe::{self, Pinged};
use nsfleet_client::FleetRef;
use std::io::{BufRead, BufReader, Write};
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

const TOPOLOGY: &str = r#"
[[node]]
name = "a"
routes = ["10.255.0.0/24 via 10.0.0.2", "fd00:255::/64 via fd00::2"]

[[node]]
name = "b"

[[link]]
a = { at = "a:eth0", addrs = ["10.0.0.1/24", "fd00::1/64"] }
b = { at = "b:eth0", addrs = ["10.0.0.2/24", "fd00::2/64", "10.255.0.2/24", "fd00:255::2/64"] }
"#;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn a_node_reads_its_routes_and_pings_across_its_link() {
    let dir = TempDir::new();
    let rd = RunDir::new(dir.0.join("run"));
    let name = format!("probe{}", std::process::id());
    let text = format!("[fleet]\nname = \"{name}\"\n{TOPOLOGY}");
    let topo = nsfleet::topology::read("probe.toml", &text)
        .and_then(nsfleet::subsys::probe::validate)
        .expect("valid test topology");

    // What `nsfleet up` does, through the library.
    let mut record = rd.claim(&name).unwrap();
    let log = std::fs::File::create(rd.supervisor_log(&name)).unwrap();
    let args = SupervisorArgs {
        run_dir: rd.root().to_path_buf(),
        name: name.clone(),
        workers: 1,
        max_unreclaimed: 4096,
        holding: None,
        keep: None,
        netns_names: false,
        privileged: false,
        owner: None,
        host_dialer: None,
    };
    let sup = launch(args, log.into()).expect("launching the supervisor (run as root)");
    let mut guard = Guard {
        rd: &rd,
        name: &name,
        pid: Some(sup.pid),
    };
    record.supervisor = ProcId::of(sup.pid);
    rd.write_record(&record).unwrap();
    let mut topology = sup.topology;
    (topology.write_all(&serde_json::to_vec(&topo).unwrap())).unwrap();
    drop(topology);
    if let Err(e) = ready(sup.events) {
        panic!("{e}; log: {}", guard.log());
    }
    let fleet = FleetRef {
        name: name.clone(),
        run_dir: rd.root().to_path_buf(),
    };

    // Routes: a's connected ones without gateways, its static ones through b, both
    // families; then a multipath route added behind nsfleet's back, read back with each
    // next hop's gateway.
    let routes = probe::routes(&fleet, "a").unwrap();
    let find = |routes: &[nsfleet::control::RouteDst], dst: &str, prefix: u8| {
        (routes.iter())
            .find(|r| r.dst == ip(dst) && r.prefix == prefix)
            .unwrap_or_else(|| panic!("no route to {dst}/{prefix} in {routes:?}"))
            .clone()
    };
    assert!(find(&routes, "10.0.0.0", 24).gateways.is_empty());
    assert!(find(&routes, "10.0.0.0", 24).oif.is_some());
    assert_eq!(find(&routes, "10.255.0.0", 24).gateways, [ip("10.0.0.2")]);
    assert!(find(&routes, "fd00::", 64).gateways.is_empty());
    assert_eq!(find(&routes, "fd00:255::", 64).gateways, [ip("fd00::2")]);
    let add =
        "ip route add 10.9.0.0/16 nexthop via 10.0.0.2 dev eth0 nexthop via 10.0.0.3 dev eth0";
    in_node(&fleet, "a", &add.split(' ').collect::<Vec<_>>());
    let routes = probe::routes(&fleet, "a").unwrap();
    let multipath = find(&routes, "10.9.0.0", 16);
    assert_eq!(multipath.gateways, [ip("10.0.0.2"), ip("10.0.0.3")]);
    assert_eq!(multipath.oif, None);
    // b has no route to 10.9/16: a route dump is per node.
    let b = probe::routes(&fleet, "b").unwrap();
    assert!(b.iter().all(|r| r.dst != ip("10.9.0.0")), "{b:?}");

    // Pings that are answered: across the link, through the routes to b's other subnets, on a's
    // own loopback; both families.
    let ms = Duration::from_millis;
    for (to, count) in [
        ("10.0.0.2", 3),
        ("10.255.0.2", 2),
        ("127.0.0.1", 1),
        ("fd00::2", 3),
        ("fd00:255::2", 2),
        ("::1", 1),
    ] {
        let t = Instant::now();
        let p = probe::ping(&fleet, "a", ip(to), count, ms(20), ms(2000)).unwrap();
        // Done once the last is answered, not at its deadline.
        assert!(t.elapsed() < ms(1500), "{to}: took {:?}", t.elapsed());
        assert_eq!((p.sent, p.received), (count, count), "{to}: {p:?}");
        assert_eq!(p.rtt_ms.len(), count as usize, "{to}: {p:?}");
        assert!(
            p.rtt_ms.iter().all(|r| *r >= 0.0 && *r < 2000.0),
            "{to}: {p:?}"
        );
    }

    // Not answered: a neighbour that is not there (lost once the wait is over), and an
    // address with no route (refused at once). Echoes go on schedule however many are
    // unanswered: 5 of them 20 ms apart with 500 ms each take about 0.6 s, not 2.5.
    let t = Instant::now();
    let p = probe::ping(&fleet, "a", ip("10.0.0.3"), 5, ms(20), ms(500)).unwrap();
    let took = t.elapsed();
    let lost = Pinged {
        sent: 5,
        received: 0,
        rtt_ms: vec![],
    };
    assert_eq!(p, lost);
    assert!(took >= ms(580) && took < ms(1500), "took {took:?}");
    let p = probe::ping(&fleet, "a", ip("192.0.2.1"), 2, ms(10), ms(500)).unwrap();
    assert_eq!((p.sent, p.received), (2, 0));

    // nsfleet-sys's Pinger on its own, from a thread of this test gone into a's
    // namespace: one echo at a time, each waited for.
    let ns = fleet.node_namespace("a").unwrap();
    let echoes = std::thread::spawn(move || {
        sys::setns_net(ns.fd.as_fd()).unwrap();
        let mut v4 = Pinger::open(false).unwrap();
        let mut v6 = Pinger::open(true).unwrap();
        (
            v4.echo(ip("10.255.0.2"), ms(2000)).unwrap(),
            v4.echo(ip("10.0.0.3"), ms(200)).unwrap(),
            v6.echo(ip("fd00::2"), ms(2000)).unwrap(),
            v4.echo(ip("::1"), ms(200)).map_err(|e| e.kind()),
        )
    });
    let (answered, lost, answered6, mixed) = echoes.join().unwrap();
    assert!(answered.is_some_and(|d| d < ms(2000)), "{answered:?}");
    assert_eq!(lost, None);
    assert!(answered6.is_some_and(|d| d < ms(2000)), "{answered6:?}");
    assert_eq!(mixed, Err(std::io::ErrorKind::InvalidInput));

    // Refusals: bounds, and a node that does not exist, with the closest names.
    let e = probe::ping(&fleet, "a", ip("10.0.0.2"), 0, ms(20), ms(100)).unwrap_err();
    assert!(
        format!("{e:#}").contains("1 to 100000 echo requests"),
        "{e:#}"
    );
    let e = probe::ping(&fleet, "a", ip("10.0.0.2"), 1, ms(61_000), ms(100)).unwrap_err();
    assert!(
        format!("{e:#}").contains("interval is 1 to 60000 ms"),
        "{e:#}"
    );
    let e = probe::ping(&fleet, "aa", ip("10.0.0.2"), 1, ms(20), ms(100)).unwrap_err();
    assert!(
        format!("{e:#}").contains("has no node \"aa\": did you mean a"),
        "{e:#}"
    );
    let e = probe::routes(&fleet, "c").unwrap_err();
    assert!(format!("{e:#}").contains("has no node \"c\""), "{e:#}");

    // An asker that hangs up ends its ping: the raw socket it had in a goes with it.
    let raw_sockets = || {
        in_node(&fleet, "a", &["cat", "/proc/net/raw"])
            .lines()
            .count()
            - 1
    };
    let mut c = fleet.connect().unwrap();
    let long = Request::Ping {
        node: "a".into(),
        addr: ip("10.0.0.2"),
        count: 10_000,
        interval_ms: 10,
        timeout_ms: 100,
    };
    c.send(&long).unwrap();
    std::thread::sleep(ms(300));
    assert_eq!(raw_sockets(), 1);
    drop(c);
    let t = Instant::now();
    while raw_sockets() > 0 {
        assert!(t.elapsed() < ms(5000), "the ping goes on without its asker");
        std::thread::sleep(ms(20));
    }

    // A ping under way when the fleet goes down stops there, and lets go of the node's
    // namespace: the `down` is not held up by it.
    let long = {
        let fleet = fleet.clone();
        std::thread::spawn(move || {
            let t = Instant::now();
            let p = probe::ping(&fleet, "a", ip("10.0.0.2"), 10_000, ms(10), ms(100));
            (p, t.elapsed())
        })
    };
    std::thread::sleep(ms(300));
    let t = Instant::now();
    guard.down();
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "down took {:?}",
        t.elapsed()
    );
    let (p, took) = long.join().unwrap();
    let e = p.unwrap_err();
    assert!(
        format!("{e:#}").contains("stopped, the fleet is going down"),
        "{e:#}"
    );
    assert!(took < Duration::from_secs(20), "the ping took {took:?}");
}

/// Runs `cmd` in node `node`'s network namespace, by nsenter on the descriptor the
/// supervisor passes (as `nsfleet exec` is handed it); its output.
fn in_node(fleet: &FleetRef, node: &str, cmd: &[&str]) -> String {
    let ns = fleet.node_namespace(node).unwrap();
    assert!(
        !ns.world,
        "a node without processes is passed as its namespace"
    );
    let path = format!("/proc/{}/fd/{}", std::process::id(), ns.fd.as_raw_fd());
    let out = std::process::Command::new("nsenter")
        .arg(format!("--net={path}"))
        .args(cmd)
        .output()
        .expect("nsenter runs");
    assert!(
        out.status.success(),
        "{cmd:?} in {node}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Reads the supervisor's events until `Ready` or `Failed`/end-of-file, on a thread of
/// its own so that a supervisor that never answers fails the test, not hangs it.
fn ready(events: std::io::PipeReader) -> Result<(), String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(events).lines() {
            let Ok(line) = line else { break };
            match serde_json::from_str::<UpEvent>(&line) {
                Ok(UpEvent::Ready { .. }) => return tx.send(Ok(())),
                Ok(UpEvent::Failed { message, .. }) => return tx.send(Err(message)),
                _ => {}
            }
        }
        tx.send(Err(
            "the supervisor's events ended before it was ready".into()
        ))
    });
    rx.recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| Err("no Ready from the supervisor within 60 s".into()))
}

/// Ends the fleet however the test went: `down` if the supervisor still answers, else a
/// SIGKILL (everything of the fleet dies with it); then reaps it and removes its folder.
struct Guard<'a> {
    rd: &'a RunDir,
    name: &'a str,
    /// The supervisor, until the test has reaped it.
    pid: Option<i32>,
}

impl Guard<'_> {
    fn log(&self) -> String {
        std::fs::read_to_string(self.rd.supervisor_log(self.name)).unwrap_or_default()
    }

    /// `down`, waiting for the kernel to reclaim the fleet; the supervisor exits 0.
    fn down(&mut self) {
        let mut c = Client::connect(&self.rd.socket(self.name)).unwrap();
        c.set_timeout(Some(Duration::from_secs(60)));
        c.send(&Request::Down { wait: true }).unwrap();
        while c.next_reply().unwrap().is_some() {}
        let pid = self.pid.take().expect("the supervisor not reaped yet");
        let status = sys::wait_child(pid).unwrap();
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "wait status {status}"
        );
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        let Some(pid) = self.pid else { return };
        let down = Client::connect(&self.rd.socket(self.name)).and_then(|mut c| {
            c.set_timeout(Some(Duration::from_secs(30)));
            c.call(&Request::Down { wait: false })
                .map_err(std::io::Error::other)
        });
        if down.is_err() {
            // It leads its own session and process group: the group's pgid is its pid.
            let _ = sys::kill_group(pid, libc::SIGKILL);
        }
        let _ = sys::wait_child(pid);
        let _ = self.rd.remove(self.name, false);
    }
}

/// A directory removed on drop.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new() -> Self {
        let p = std::env::temp_dir().join(format!("nsfleet-test-{}-probe", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

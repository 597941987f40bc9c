//! The engine embedded in a program that is not `nsfleet`: this test binary (a libtest
//! harness, whose /proc/self/exe knows nothing of nsfleet) launches a supervisor through the
//! library, with holder processes forced, drives it over the control socket as any client
//! would, and takes it down. Its guard ends the fleet and reaps the supervisor even when an
//! assertion fails.

mod common;

use nsfleet::control::{Client, Reply, Request, UpEvent};
use nsfleet::core::holder::HOLDER_NAME;
use nsfleet::core::Holding;
use nsfleet::rundir::{ProcId, RunDir};
use nsfleet::supervisor::{launch, SupervisorArgs, SUPERVISOR_NAME};
use nsfleet::sys;
use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

#[test]
fn a_program_that_is_not_nsfleet_launches_a_supervisor_with_holders() {
    let dir = common::TempDir::new("embedded");
    let rd = RunDir::new(dir.0.join("run"));
    let name = "embedded";
    let topo = common::topo(&format!(
        "[fleet]\nname = \"{name}\"\n[[node]]\nname = \"n{{i}}\"\ncount = 3\n"
    ));

    // What `nsfleet up` does, through the library: claim the name, launch, record the
    // supervisor, hand it the topology, read its events.
    let mut record = rd.claim(name).unwrap();
    let log = std::fs::File::create(rd.supervisor_log(name)).unwrap();
    let args = SupervisorArgs {
        run_dir: rd.root().to_path_buf(),
        name: name.into(),
        workers: 1,
        max_unreclaimed: 4096,
        // As NSFLEET_HOLDER_CAP=1 would, without the environment of a threaded test.
        holding: Some(Holding::Holders {
            per_holder: Some(1),
        }),
        keep: None,
        netns_names: false,
        privileged: false,
        owner: None,
        host_dialer: None,
    };
    let sup = launch(args, log.into()).expect("launching the supervisor (run as root)");
    let mut guard = Guard {
        rd: &rd,
        name,
        pid: Some(sup.pid),
    };
    record.supervisor = ProcId::of(sup.pid);
    rd.write_record(&record).unwrap();
    let mut topology = sup.topology;
    topology
        .write_all(&serde_json::to_vec(&topo).unwrap())
        .unwrap();
    drop(topology);
    let ready = ready(sup.events);
    assert_eq!(
        ready.map_err(|e| format!("{e}; log: {}", guard.log())),
        Ok(sup.pid),
        "the supervisor reports ready, with its pid as we see it"
    );

    // The supervisor is a fork of this test binary, never exec'd, and PID 1 of a PID
    // namespace of its own, named for ps.
    let proc_of = |pid: i32, what: &str| std::fs::read_link(format!("/proc/{pid}/{what}")).ok();
    assert_eq!(
        proc_of(sup.pid, "exe"),
        std::fs::read_link("/proc/self/exe").ok()
    );
    assert_eq!(comm(sup.pid), SUPERVISOR_NAME.to_str().unwrap());
    assert_ne!(
        proc_of(sup.pid, "ns/pid"),
        std::fs::read_link("/proc/self/ns/pid").ok()
    );
    let status = std::fs::read_to_string(format!("/proc/{}/status", sup.pid)).unwrap();
    let nspid = status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .unwrap();
    assert!(nspid.trim_end().ends_with("\t1"), "NSpid:{nspid}");

    // Its control socket answers, with every node.
    let mut client = Client::connect(&rd.socket(name)).unwrap();
    client.set_timeout(Some(Duration::from_secs(30)));
    let Reply::Status(st) = client.call(&Request::Status).unwrap() else {
        panic!("status answered with something else");
    };
    assert_eq!((st.state.as_str(), st.pid), ("up", sup.pid));
    let mut nodes: Vec<&str> = st.nodes.iter().map(|n| n.name.as_str()).collect();
    nodes.sort();
    assert_eq!(nodes, ["n1", "n2", "n3"]);

    // Its holders, forked from it and named: one per node at most one each, each keeping
    // exactly one node's namespace.
    let holders = children_named(sup.pid, HOLDER_NAME.to_str().unwrap());
    assert_eq!(holders.len(), 3, "{holders:?}");
    let mut held: Vec<u64> = holders.iter().flat_map(|h| netns_inodes(*h)).collect();
    held.sort();
    let mut inodes: Vec<u64> = st.nodes.iter().map(|n| n.netns_inode).collect();
    inodes.sort();
    assert_eq!(
        held, inodes,
        "the holders keep the nodes' namespaces, and only them"
    );

    // Down, waiting for reclamation; the supervisor exits 0 and takes its holders and its
    // folder with it.
    let mut client = Client::connect(&rd.socket(name)).unwrap();
    client.set_timeout(Some(Duration::from_secs(60)));
    client.send(&Request::Down { wait: true }).unwrap();
    let mut reclaimed = None;
    while let Some(reply) = client.next_reply().unwrap() {
        if let Reply::Reclaimed {
            nodes,
            reclaimed: r,
            ..
        } = reply
        {
            reclaimed = Some((nodes, r));
        }
    }
    assert_eq!(reclaimed, Some((3, 3)));
    let status = sys::wait_child(sup.pid).unwrap();
    guard.pid = None;
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "wait status {status}"
    );
    for h in holders {
        assert!(
            !std::path::Path::new(&format!("/proc/{h}")).exists(),
            "holder {h} outlived its supervisor"
        );
    }
    assert!(
        !rd.fleet_dir(name).exists(),
        "the supervisor removed its folder"
    );
}

/// Reads the supervisor's events until `Ready` (its pid) or `Failed`/end-of-file, on a
/// thread of its own so that a supervisor that never answers fails the test, not hangs it.
fn ready(events: std::io::PipeReader) -> Result<i32, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(events).lines() {
            let Ok(line) = line else { break };
            match serde_json::from_str::<UpEvent>(&line) {
                Ok(UpEvent::Ready { pid, .. }) => return tx.send(Ok(pid)),
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

fn comm(pid: i32) -> String {
    let c = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    c.trim_end().to_string()
}

/// The live children of `parent` whose name (comm) is `name`.
fn children_named(parent: i32, name: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| {
            let status = std::fs::read_to_string(format!("/proc/{p}/status")).unwrap_or_default();
            status.contains(&format!("\nPPid:\t{parent}\n"))
                && !status.contains("\nState:\tZ")
                && comm(*p) == name
        })
        .collect()
}

/// The inodes of the network namespaces a process holds by descriptor.
fn netns_inodes(pid: i32) -> Vec<u64> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|f| {
            let target = std::fs::read_link(f.path()).ok()?;
            let target = target.to_str()?;
            target
                .strip_prefix("net:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
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

//! Helpers for engine tests on the real kernel. Every fleet a test makes has its own hub
//! namespace and is torn down (and reclaimed) when its guard drops, even on panic.

#![allow(dead_code)]

use nsfleet::core::{Fleet, FleetOptions, Node};
use nsfleet::topology::{self, Topology};
use std::path::PathBuf;
use std::process::Command;

pub struct TestFleet {
    pub fleet: Fleet,
    pub logs: TempDir,
}

pub fn fleet(workers: usize) -> TestFleet {
    let logs = TempDir::new("logs");
    let fleet = Fleet::new(FleetOptions {
        workers,
        log_dir: logs.0.clone(),
        ..FleetOptions::default()
    })
    .expect("starting a fleet (run the tests as root)");
    TestFleet { fleet, logs }
}

impl TestFleet {
    /// Where this fleet journals host links.
    pub fn journal(&self) -> PathBuf {
        self.logs.0.join("host-links")
    }

    /// The default subsystems, registered as a supervisor registers them for fleet
    /// `name`, its journals beside its logs.
    pub fn register_defaults(&self, name: &str) -> nsfleet::subsys::Defaults {
        let cgroups = self.logs.0.join("cgroups");
        nsfleet::subsys::register_defaults(&self.fleet, name, self.journal(), cgroups, None, None)
            .unwrap()
    }
}

pub fn topo(text: &str) -> Topology {
    topology::read("test.toml", text)
        .and_then(nsfleet::subsys::probe::validate)
        .expect("valid test topology")
}

/// Runs a command inside a node's namespace through nsenter: an observer independent of
/// nsfleet's own code.
pub fn in_node(node: &Node, cmd: &[&str]) -> String {
    let path = node
        .with_netns(|fd| {
            use std::os::fd::AsRawFd;
            format!("/proc/{}/fd/{}", std::process::id(), fd.as_raw_fd())
        })
        .expect("node alive");
    let out = Command::new("nsenter")
        .arg(format!("--net={path}"))
        .args(cmd)
        .output()
        .expect("nsenter runs");
    assert!(
        out.status.success(),
        "{cmd:?} in {}: {}",
        node.name(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "nsfleet-test-{}-{}-{}",
            std::process::id(),
            tag,
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

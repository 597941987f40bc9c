//! The hub: the start line of the fleet's Open vSwitch daemons (its database made and
//! served, then ovs-vswitchd in the foreground), and what the host sees of them once
//! started: their run folder through the hub's init's root, the database's socket and
//! whether it answers, whether the start line has become ovs-vswitchd, the hub's log.
//! It never starts, enters or signals a process: `process` runs the line, as any node's
//! command, and this file only reads what became of it, through [`Commands`] (what
//! `process` answers, handed over by `register_defaults`), never through `process`'s own
//! state.

use crate::Commands;
use nsfleet_core::Node;
use nsfleet_sys as sys;

/// What `processes` calls the hub's start line.
pub(super) const HUB_LABEL: &str = "ovs-vswitchd: the fleet's Open vSwitch";

/// The shell line that starts the fleet's Open vSwitch in the hub node: its database made
/// and served, then ovs-vswitchd in the foreground, the command nsfleet watches; with
/// what `status` and `events` call it. `None` for a node that is no hub. The same for
/// every hub: a change of the fleet's switches never starts it again.
pub(crate) fn start_command(node: &Node) -> Option<(String, String)> {
    let hub = node.config().ovs_hub.clone()?;
    // The userspace datapath forwards what it reads from its ports' packet sockets;
    // with TSO support on it keeps the senders' checksum offload (their packets'
    // checksums are left to the NIC) and completes them, and TCP across it works. The
    // kernel datapath ignores it. Without it (`ovs_tso = false`), each port's receive
    // buffers for TSO's 64 KB packets (about 0.2 MB) are never made, and the hosts on
    // its switches compute their own checksums (`software_checksums`).
    let tso = match hub.without_tso {
        false => " -- set Open_vSwitch . other_config:userspace-tso-enable=true",
        true => "",
    };
    let (settle, said) = match crate::probe::has_ovs_kernel_datapath() {
        true => (EARLY_BOOT, "the kernel has the openvswitch module: switches on datapath auto use the kernel datapath"),
        false => ("", "this kernel has no openvswitch module: switches use the userspace datapath"),
    };
    let line = format!(
        "set -e; mkdir -p /run/openvswitch; \
         ovsdb-tool create /etc/openvswitch/conf.db /usr/share/openvswitch/vswitch.ovsschema; \
         ovsdb-server /etc/openvswitch/conf.db --remote=punix:/run/openvswitch/db.sock --pidfile --detach --no-chdir --log-file; \
         ovs-vsctl --no-wait init{tso}; \
         echo \"nsfleet: the fleet's Open vSwitch; {said}\"; {settle}\
         exec ovs-vswitchd --pidfile --no-chdir --log-file"
    );
    Some((HUB_LABEL.to_string(), line))
}

/// Waits, said, until the system has been up 10 s. Open vSwitch 3.1 (Debian 12's) counts
/// the CPUs at most every 10 s of `time_msec()`, which starts at boot, and its count
/// starts at 0: an ovs-vswitchd started in a system's first 10 s gives the kernel
/// datapath no upcall handler (its log: "Overriding n-handler-threads to 0"), and every
/// packet that misses the datapath's flows is lost. Seen in a guest of `nsfleet vm`,
/// where a fleet comes up 5 s after boot; the userspace datapath has no handlers.
const EARLY_BOOT: &str = "up=$(cut -d. -f1 /proc/uptime); if [ \"$up\" -lt 10 ]; then \
     echo \"nsfleet: waiting $((10 - up)) s: Open vSwitch counts no CPU in a system's first 10 s and would start no upcall handler\"; \
     sleep $((10 - up)); fi; ";

/// The last lines of the hub's log in the fleet's log folder `log_dir`, indented; or why
/// there are none: what every failure of the hub's is said with (its log goes with the
/// fleet that the failure rolls back).
pub(super) fn log_end(hub: &Node, log_dir: &std::path::Path) -> String {
    let path = log_dir.join(format!("{}.log", hub.name()));
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            let from = lines.len().saturating_sub(5);
            lines[from..]
                .iter()
                .map(|l| format!("  {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        }
        Err(e) => format!("  ({}: {e})", path.display()),
    }
}

/// Open vSwitch's run folder in the hub's world, as the host reaches it (its init's
/// root); `None` while the hub has no world.
pub(super) fn hub_run_dir(hub: &Node, commands: &dyn Commands) -> Option<String> {
    let pid = commands.world_pid(hub)?;
    Some(format!("/proc/{pid}/root/run/openvswitch"))
}

/// The OpenFlow socket of `switch`'s bridge in the hub's run folder `dir` (see
/// [`hub_run_dir`]): ovs-vswitchd makes it when it takes the bridge.
pub(super) fn bridge_socket(dir: &str, switch: &Node) -> String {
    format!("{dir}/{}.mgmt", super::bridge_name(switch))
}

/// Where the hub's start line is: `Ok(true)` once it has become ovs-vswitchd (its last
/// step, an exec), `Ok(false)` before, `Err` with how it ended.
pub(super) fn vswitchd_runs(hub: &Node, commands: &dyn Commands) -> Result<bool, String> {
    match commands.run_of(hub, HUB_LABEL) {
        Some(Ok(pid)) => Ok(std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .is_ok_and(|c| c.trim_end() == "ovs-vswitchd")),
        Some(Err(sys::Exit::Code(c))) => Err(format!("exit status {c}")),
        Some(Err(sys::Exit::Signal(s))) => Err(format!("signal {s}")),
        Some(Err(sys::Exit::Unknown)) => Err("it ended".to_string()),
        None => Ok(false),
    }
}

/// Gives back the pages of ovs-vswitchd's code and constants that only it maps, once a
/// switch is ready: run in the foreground (the command `process` watches), it keeps
/// mapped all it touched while loading its libraries and starting, about 2.5 MB that a
/// daemon detached by a fork (Debian's, Mininet's) leaves in its parent. What it uses
/// comes back as it forwards (see `sys::page_out_file_pages`). Best effort: a kernel
/// without `process_madvise` (before 5.10) keeps them, and nothing else changes.
pub(super) fn give_back_start_pages(hub: &Node, commands: &dyn Commands) {
    if let Some((pidfd, pid)) = commands.running(hub, HUB_LABEL) {
        use std::os::fd::AsFd;
        let _ = sys::page_out_file_pages(pidfd.as_fd(), pid as i32);
    }
}

/// What a hub whose ovs-vswitchd runs and whose database refuses connections (`e`) is
/// told: its ovsdb-server has ended (the start line served the database before it
/// started ovs-vswitchd), and nothing that needs it can happen, or should wait.
pub(super) fn database_gone(e: &std::io::Error) -> anyhow::Error {
    anyhow::anyhow!(
        "the fleet's Open vSwitch database does not answer ({e}): its ovsdb-server has \
         ended (ovs-vswitchd runs on, with the switches as they were); `nsfleet down` and \
         `up` again start it afresh"
    )
}

/// The hub's database socket, as the host reaches it; `None` while the hub has no world.
pub(super) fn database_socket(hub: &Node, commands: &dyn Commands) -> Option<String> {
    Some(format!("{}/db.sock", hub_run_dir(hub, commands)?))
}

/// Whether the database at socket `sock` takes a connection (its socket exists a moment
/// before ovsdb-server listens on it).
pub(super) fn answers(sock: &str) -> bool {
    connect_error(sock).is_none()
}

/// Why the database at socket `sock` took no connection, if it took none.
pub(super) fn connect_error(sock: &str) -> Option<std::io::Error> {
    std::os::unix::net::UnixStream::connect(sock).err()
}

/// Whether a connect's error `e` says that nothing listens there (refused, or no socket),
/// not that the connect was cut short (interrupted): only then has the database ended.
pub(super) fn nothing_listens(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionRefused, NotFound};
    matches!(e.kind(), ConnectionRefused | NotFound)
}

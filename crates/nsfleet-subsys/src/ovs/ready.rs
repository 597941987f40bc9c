//! `ovs-ready`: a switch is up once the hub's ovs-vswitchd has taken every one of its
//! ports and its bridge's OpenFlow socket is there, or says why not (the start line
//! ended, the database gone, the wait's bound passed). It only looks (links' flags, the
//! hub's files and processes): it never changes a bridge, a port or a process.

use super::hub::{
    bridge_socket, connect_error, database_gone, database_socket, give_back_start_pages,
    hub_run_dir, log_end, nothing_listens, vswitchd_runs,
};
use crate::Commands;
use anyhow::Context;
use nsfleet_core::{InitCtx, Node, Phase, Shape, Subsystem};
use nsfleet_netlink::rtnl;
use std::time::Duration;

/// Waits, once a switch's processes are started, until its ovs-vswitchd has taken every
/// port, so that `up` returns with switches that forward: the userspace datapath puts
/// each port it opens in promiscuous mode (as a user's request, which the link's flags
/// show), the kernel's enslaves it to its `ovs-system` device (its promiscuity is then
/// the kernel's own, which the flags do not show); and until its bridge's OpenFlow
/// socket is there (`ovs-ofctl dump-flows s1` answers). About 0.13 s for a fresh fleet
/// on this machine class, most of it ovs-vswitchd's own start, which takes little CPU:
/// in the Ready phase, so that the switches' waits overlap.
pub struct Ready {
    /// What became of the hub's start line (`process` answers): a switch whose start line
    /// has ended is said at once, not after the wait's bound.
    pub commands: std::sync::Arc<dyn Commands>,
}

/// How long a switch's ovs-vswitchd gets to take its ports.
const READY_WAIT: Duration = Duration::from_secs(20);

/// How often a wait for ports asks whether the database still answers.
const DB_CHECK_EVERY: Duration = Duration::from_secs(1);

impl Subsystem for Ready {
    type State = ();

    fn name(&self) -> &'static str {
        "ovs-ready"
    }

    fn phase(&self) -> Phase {
        Phase::Ready
    }

    fn wants(&self, node: &Node) -> bool {
        node.config().ovs.is_some()
    }

    fn init(&self, cx: &mut InitCtx<'_>, _: &mut ()) -> anyhow::Result<()> {
        let wiring = cx.node.wiring();
        let hub = cx
            .node
            .host()
            .context("the fleet's Open vSwitch node is gone")?;
        // The bridge's OpenFlow socket, looked for once its ports are taken.
        let socket = hub_run_dir(&hub, &*self.commands).map(|dir| bridge_socket(&dir, cx.node));
        let has_socket = || {
            socket
                .as_ref()
                .is_some_and(|s| std::path::Path::new(s).exists())
        };
        let started = std::time::Instant::now();
        // When the database is next asked whether it still answers: once a second, as
        // every connection is a session of ovsdb-server's.
        let mut ask_db_at = started + DB_CHECK_EVERY;
        // The ports not seen taken yet: a port once taken is not asked about again.
        let mut left: Vec<i32> = wiring.ifaces.iter().map(|i| i.index).collect();
        loop {
            let runs = vswitchd_runs(&hub, &*self.commands);
            let taken = taken(cx, &left)?;
            left.retain(|i| !taken.contains(i));
            let missing: Vec<&str> = (wiring.ifaces.iter())
                .filter(|i| left.contains(&i.index))
                .map(|i| i.name.as_str())
                .collect();
            if missing.is_empty() && runs == Ok(true) && has_socket() {
                // At each switch, not once: ovs-vswitchd's start goes on until its last
                // bridge is set up. Given back at the first switch only, 0.4-0.5 MB more
                // of its file pages stayed (64 hosts, 9 switches); a call is a read of
                // its maps and one system call, about 0.5 ms.
                give_back_start_pages(&hub, &*self.commands);
                return Ok(());
            }
            if runs == Ok(true) && std::time::Instant::now() >= ask_db_at {
                ask_db_at += DB_CHECK_EVERY;
                let sock = database_socket(&hub, &*self.commands);
                let refused = sock.and_then(|s| connect_error(&s));
                if let Some(e) = refused.filter(nothing_listens) {
                    return Err(database_gone(&e));
                }
            }
            if let Err(exit) = runs {
                // Its log goes with the fleet that this failure rolls back: said here.
                anyhow::bail!(
                    "ovs-vswitchd's start line ended ({exit}) before it took port(s) {}; its log ends:\n{}",
                    missing.join(", "),
                    log_end(&hub, cx.log_dir)
                );
            }
            if started.elapsed() > READY_WAIT {
                let what = match missing.is_empty() {
                    true => "started".to_string(),
                    false => format!("taken port(s) {}", missing.join(", ")),
                };
                anyhow::bail!(
                    "ovs-vswitchd has not {what} within {} s; its log ends:\n{}",
                    READY_WAIT.as_secs(),
                    log_end(&hub, cx.log_dir)
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// A changed switch's bridge is changed or made again (see `Bridges`): waited for again.
    fn extend(&self, cx: &mut InitCtx<'_>, st: &mut (), _was: &Shape) -> anyhow::Result<()> {
        self.init(cx, st)
    }
}

/// Which of `indexes` (the switch's ports) a datapath has taken (see [`Ready`]). Asked
/// one link at a time: a dump of the whole namespace, which holds every switch's ports,
/// costs the kernel a scan of its peer ids per link (`peernet2id_alloc`), which at
/// Mininet's tree1024 (1,056 ports, 1,024 peers) took half the machine for 6 s.
fn taken(cx: &mut InitCtx<'_>, indexes: &[i32]) -> anyhow::Result<Vec<i32>> {
    let sock = cx.rtnl().context("opening a netlink socket")?;
    let mut out = Vec::new();
    for &index in indexes {
        let mut b = nsfleet_netlink::Batch::new();
        rtnl::get_link(&mut b, sock.next_seq(), index);
        sock.dump(&b, |m| {
            out.extend(
                rtnl::parse_link(m)
                    .filter(|l| l.flags & IFF_PROMISC != 0 || l.master.is_some())
                    .map(|l| l.index),
            )
        })?;
    }
    Ok(out)
}

const IFF_PROMISC: u32 = libc::IFF_PROMISC as u32;

//! Loopback up. A new network namespace has `lo` (always ifindex 1) down; nothing on a
//! node, not even 127.0.0.1, works until it is up.

use anyhow::Context;
use nsfleet_core::{InitCtx, Phase, Subsystem};
use nsfleet_netlink::{rtnl, Batch};

const LOOPBACK_IFINDEX: i32 = 1;

pub struct Loopback;

impl Subsystem for Loopback {
    type State = ();

    fn name(&self) -> &'static str {
        "loopback"
    }

    fn phase(&self) -> Phase {
        Phase::Create
    }

    fn init(&self, cx: &mut InitCtx<'_>, _: &mut ()) -> anyhow::Result<()> {
        let sock = cx.rtnl().context("opening a netlink socket")?;
        let mut b = Batch::new();
        rtnl::set_link(&mut b, sock.next_seq(), LOOPBACK_IFINDEX, true, None);
        sock.execute_all(&b).context("setting lo up")?;
        Ok(())
    }

    // No exit: the kernel unregisters lo with the namespace, in cleanup_net's own batch.
}

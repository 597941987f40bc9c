//! Veth pairs made by hand on a running fleet (containerlab's `tools veth create`), not
//! from the topology: the pair is made from the first end's namespace with its peer
//! placed straight into the second's, both brought up, an end in a switch made a port
//! of its Linux bridge (a port of an Open vSwitch bridge is the caller's to add: it is
//! a row of the fleet's Open vSwitch database). The fleet's wiring does not list them:
//! such a pair goes with the first of its namespaces to go, as any veth does (an end in
//! the host's namespace with its node's). Nothing here is a subsystem; the caller's thread never changes namespace
//! (a socket is opened in another namespace from a thread of its own).

use super::host::lookup;
use anyhow::{anyhow, bail, Context};
use nsfleet_netlink::rtnl::{self, LinkSpec};
use nsfleet_netlink::{Batch, NlSocket};
use nsfleet_sys as sys;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

/// One end: its namespace (`None`: the caller's; a namespace descriptor, or a pidfd of
/// a process in it), its name there, and the bridge it joins there, if any.
pub struct LooseEnd<'a> {
    pub netns: Option<BorrowedFd<'a>>,
    pub name: &'a str,
    pub bridge: Option<&'a str>,
}

/// Makes the pair `a`–`b`, up; refused if either name is taken where it goes.
pub fn make_pair(a: &LooseEnd<'_>, b: &LooseEnd<'_>, mtu: Option<u32>) -> anyhow::Result<()> {
    let ((sa, _), (sb, b_ns)) = (socket_in(a.netns)?, socket_in(b.netns)?);
    let mut socks = [sa, sb];
    for (s, e) in socks.iter_mut().zip([a, b]) {
        if lookup(s, e.name)?.is_some() {
            bail!("{} exists already where that end goes", e.name);
        }
    }
    let b_ns = b_ns.as_raw_fd();
    let local = LinkSpec {
        name: a.name,
        mtu,
        ..LinkSpec::default()
    };
    let peer = LinkSpec {
        name: b.name,
        mtu,
        netns_fd: Some(b_ns),
        ..LinkSpec::default()
    };
    // Whatever can fail before the pair exists is asked first.
    let mut bridges = [None, None];
    for ((s, e), br) in socks.iter_mut().zip([a, b]).zip(bridges.iter_mut()) {
        if let Some(name) = e.bridge {
            *br = Some(
                lookup(s, name)?
                    .ok_or_else(|| anyhow!("no bridge {name}"))?
                    .index,
            );
        }
    }
    let mut batch = Batch::new();
    rtnl::new_veth(&mut batch, socks[0].next_seq(), &local, &peer);
    (socks[0].execute_all(&batch)).map_err(|e| anyhow!("making the veth pair: {e}"))?;
    let up = bring_up(&mut socks, [a, b], bridges);
    if up.is_err() {
        let _ = delete_by_name(&mut socks[0], a.name);
    }
    up
}

/// Deletes the pair that has end `end` (the caller's undo of a pair it could not use).
pub fn remove_pair(end: &LooseEnd<'_>) -> anyhow::Result<()> {
    delete_by_name(&mut socket_in(end.netns)?.0, end.name)
}

/// Deletes link `name` of the namespace `s` is in: a veth pair goes whole with either end.
fn delete_by_name(s: &mut NlSocket, name: &str) -> anyhow::Result<()> {
    let mut batch = Batch::new();
    rtnl::del_link_by_name(&mut batch, s.next_seq(), name);
    (s.execute_all(&batch)).map_err(|e| anyhow!("deleting {name}: {e}"))
}

/// Each end up, a port of its bridge where it has one.
fn bring_up(
    socks: &mut [NlSocket; 2],
    ends: [&LooseEnd<'_>; 2],
    bridges: [Option<i32>; 2],
) -> anyhow::Result<()> {
    for ((s, e), bridge) in socks.iter_mut().zip(ends).zip(bridges) {
        let link =
            lookup(s, e.name)?.ok_or_else(|| anyhow!("{} is gone as soon as made", e.name))?;
        let mut batch = Batch::new();
        rtnl::set_link(&mut batch, s.next_seq(), link.index, true, bridge);
        (s.execute_all(&batch)).map_err(|err| anyhow!("bringing {} up: {err}", e.name))?;
    }
    Ok(())
}

/// A route socket in the namespace behind `netns` (the caller's when `None`), and a
/// descriptor of that namespace (IFLA_NET_NS_FD takes no pidfd).
pub(crate) fn socket_in(netns: Option<BorrowedFd<'_>>) -> anyhow::Result<(NlSocket, OwnedFd)> {
    let open = || -> anyhow::Result<(NlSocket, OwnedFd)> {
        let ns = sys::current_netns().context("opening a network namespace's descriptor")?;
        Ok((NlSocket::open()?, ns))
    };
    let Some(fd) = netns else {
        return open();
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            sys::setns_net(fd).context("entering the node's network namespace")?;
            open()
        })
        .join()
        .map_err(|_| anyhow!("the thread opening a socket in a node panicked"))?
    })
}

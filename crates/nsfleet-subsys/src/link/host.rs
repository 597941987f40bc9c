//! Host links: a veth from a node to the host's namespace (for management). The host's end
//! is the one thing of a fleet that lives outside it, so it is journalled before it is
//! created and carries a token (its interface alias) that `nsfleet clean` checks before it
//! deletes anything: a look-alike interface of the same name is never touched.
//!
//! Normally nothing is left to clean: deleting either end of a veth deletes the pair, and
//! the node's end dies with the node. The journal covers a node held alive by someone else.

use super::{At, LinkKind};
use anyhow::{anyhow, Context};
use nsfleet_core::{Node, Phase, Requests};
use nsfleet_locks::{order, Mutex};
use nsfleet_netlink::rtnl::{self, LinkSpec};
use nsfleet_netlink::{Batch, NlSocket};
use nsfleet_topology::{Iface, IpNet, Subject};
use std::hash::{BuildHasher, Hasher};
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

pub struct HostLinks {
    journal: PathBuf,
    /// Marks this fleet's host interfaces (as their alias).
    token: String,
    /// A socket in the host's namespace, opened where the fleet's owner runs.
    host: Mutex<NlSocket>,
    /// The host's namespace, where the far ends go.
    home: OwnedFd,
}

impl HostLinks {
    /// Must be called from a thread in the host's namespace.
    pub fn new(journal: PathBuf, fleet: &str) -> std::io::Result<Self> {
        let random = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        Ok(HostLinks {
            journal,
            token: format!("nsfleet:{fleet}:{random:016x}"),
            host: Mutex::new(order::HOST_SOCKET, NlSocket::open()?),
            home: nsfleet_sys::current_netns()?,
        })
    }

    fn journal(&self, ifname: &str) -> std::io::Result<()> {
        nsfleet_core::fault::point("journalling a host link")?;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.journal)?;
        writeln!(f, "{ifname} {}", self.token)?;
        f.sync_all()
    }

    /// Marks the host's end as ours, brings it up and gives it its addresses. A crash
    /// before the mark leaves an end that `clean` will not recognise, and so not delete:
    /// the safe side.
    fn configure_host_end(&self, name: &str, addrs: &[IpNet]) -> anyhow::Result<()> {
        nsfleet_core::fault::point("configuring a host link's host end")?;
        let mut sock = self.host.lock();
        let index = lookup(&mut sock, name)?
            .ok_or_else(|| anyhow!("host interface {name} vanished"))?
            .index;
        let mut b = Batch::new();
        let token = Some(self.token.as_str());
        rtnl::set_link_alias(&mut b, sock.next_seq(), index, true, None, token);
        for a in addrs {
            rtnl::new_addr(&mut b, sock.next_seq(), index, a.addr, a.prefix);
        }
        sock.execute_all(&b)
            .with_context(|| format!("addresses on host interface {name}"))
    }
}

/// The host's interface `name`, if it has one (`sock` is in the host's namespace).
pub fn lookup(sock: &mut NlSocket, name: &str) -> anyhow::Result<Option<rtnl::LinkInfo>> {
    let mut b = Batch::new();
    rtnl::get_link_by_name(&mut b, sock.next_seq(), name);
    let mut found = None;
    match sock.dump(&b, |m| found = found.take().or_else(|| rtnl::parse_link(m))) {
        Ok(()) => Ok(found),
        Err(e) if e.errno == libc::ENODEV => Ok(None),
        Err(e) => Err(anyhow!("looking up {name}: {e}")),
    }
}

/// A fleet's journal of host interfaces: (name, the fleet's token) per line.
fn journalled(journal: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(journal).unwrap_or_default();
    (text.lines())
        .filter_map(|l| l.split_once(' '))
        .map(|(name, token)| (name.to_string(), token.to_string()))
        .collect()
}

/// Those of `entries` that exist and carry their token, looked up one by one; `sock` is
/// in the host's namespace.
fn still_ours(entries: &[(String, String)], sock: &mut NlSocket) -> anyhow::Result<Vec<String>> {
    let mut ours = Vec::new();
    for (name, token) in entries {
        if lookup(sock, name)?.is_some_and(|l| l.alias.as_deref() == Some(token)) {
            ours.push(name.clone());
        }
    }
    Ok(ours)
}

/// Deletes the host interfaces a fleet's journal lists, each only if it still carries the
/// fleet's token. Returns the names removed. Runs in the host's namespace.
pub fn clean_journal(journal: &Path) -> anyhow::Result<Vec<String>> {
    let mut sock = NlSocket::open()?;
    let mut removed = Vec::new();
    for name in still_ours(&journalled(journal), &mut sock)? {
        let mut b = Batch::new();
        rtnl::del_link_by_name(&mut b, sock.next_seq(), &name);
        match sock.execute_all(&b) {
            Ok(()) => removed.push(name),
            // Gone since it was looked up: the kernel deletes a veth's host end with its
            // peer's namespace, which a killed fleet's may still be tearing down.
            Err(e) if e.errno == libc::ENODEV => {}
            Err(e) => return Err(e).with_context(|| format!("deleting host interface {name}")),
        }
    }
    Ok(removed)
}

/// Waits, up to `bound`, until none of the host interfaces a fleet's journal lists is
/// left; returns those still there at the bound. For the fleet's teardown, once the
/// kernel has said its nodes' namespaces are reclaimed: the kernel says so (RTM_DELNSID)
/// as it unhashes a dying namespace, and deletes its devices, and so the host ends of
/// their veths, only after an RCU grace period. Without this wait `down` could return
/// with a host end still there, and the same fleet brought up at once would find its name
/// taken. Deleting the host ends instead would cost 16 ms each under RTNL; the kernel's
/// batch deletes them all at once. Runs in the host's namespace.
pub fn wait_gone(journal: &Path, bound: std::time::Duration) -> anyhow::Result<Vec<String>> {
    let entries = journalled(journal);
    if entries.is_empty() {
        return Ok(Vec::new());
    }
    let mut sock = NlSocket::open()?;
    let started = std::time::Instant::now();
    loop {
        // One dump a round, however many host links: RTNL is what the kernel's own
        // deletion of them needs.
        let mut b = Batch::new();
        rtnl::dump_links(&mut b, sock.next_seq());
        let mut left = Vec::new();
        sock.dump(&b, |m| {
            if let Some(l) = rtnl::parse_link(m) {
                let ours = |(name, token): &(String, String)| {
                    *name == l.name && l.alias.as_deref() == Some(token.as_str())
                };
                if entries.iter().any(ours) {
                    left.push(l.name);
                }
            }
        })?;
        // A dump that met a deletion between two of its replies may have skipped a link
        // still there: "none left" is confirmed by name, one lookup each.
        if left.is_empty() {
            left = still_ours(&entries, &mut sock)?;
        }
        if left.is_empty() || started.elapsed() >= bound {
            return Ok(left);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

impl LinkKind for HostLinks {
    fn name(&self) -> &'static str {
        "host-links"
    }

    fn phase(&self) -> Phase {
        Phase::Wire
    }

    fn makes(&self, iface: &Iface) -> bool {
        iface.link.as_host().is_some()
    }

    fn prepare(&self, _: &Node, iface: &Iface) -> anyhow::Result<()> {
        let host = iface.link.as_host().expect("made by this kind");
        self.journal(&host.name)
            .context("writing the host-link journal")
    }

    fn wire(&self, out: &mut Requests<'_>, at: &At<'_>, i: &Iface) -> anyhow::Result<()> {
        let host = i.link.as_host().expect("made by this kind");
        let local = LinkSpec {
            name: &i.name,
            index: i.index,
            up: true,
            mtu: i.mtu,
            mac: i.mac,
            // A switch's end is a port (a management network reached from the host).
            master: super::bridge::master(i),
            ..Default::default()
        };
        let far = LinkSpec {
            name: &host.name,
            up: true,
            mtu: host.mtu,
            netns_fd: Some(self.home.as_raw_fd()),
            ..Default::default()
        };
        out.add(|b, seq| rtnl::new_veth(b, seq, &local, &far))?;
        // Before the host end comes up. The host end keeps the host's policy.
        crate::link_local_policy(out, i.index, i.bridge.is_some(), at.ipv6)
    }

    fn finish(&self, _: &Node, iface: &Iface) -> anyhow::Result<()> {
        let host = iface.link.as_host().expect("made by this kind");
        self.configure_host_end(&host.name, &host.addrs)
    }

    fn describe(&self, node: &Node, i: &Iface) -> Subject {
        let host = i.link.as_host().expect("made by this kind");
        let text = format!(
            "host link {}:{} <-> host:{}",
            node.name(),
            i.name,
            host.name
        );
        Subject::new(text, i.at)
    }
}

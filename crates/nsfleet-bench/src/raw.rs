//! Raw in-process loops: the kernel work of a topology, on one thread, with nothing around
//! it (no validation, no workers, no journal, no subsystems). They are the references that
//! say how much of nsfleet's time is its own, and what a topology costs the kernel on
//! this machine, so what any tool could reach against a peer. Never used to build fleets.
//!
//! Each loop runs on a thread of its own, which it leaves in the last namespace it made:
//! `unshare` moves only the calling thread, and the thread ends with the loop.

use nsfleet::core::Fleet;
use nsfleet::sys;
use nsfleet::topology::{bridge_index, IpNet, PORTS_PER_BRIDGE};
use nsfleet_netlink::rtnl::{self, LinkSpec};
use nsfleet_netlink::socket::MAX_BATCH;
use nsfleet_netlink::{Batch, NlSocket};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::Instant;

/// Runs `setup`, then `build` on what it made, under the clock, on a thread of its own.
/// `build` puts the descriptor of every namespace made in the list. Returns the build's
/// time and, once the list is dropped, how long the kernel took to reclaim it all (the
/// same measure as nsfleet's `down`).
fn timed<S>(
    fleet: &Fleet,
    setup: impl FnOnce() -> anyhow::Result<S> + Send + 'static,
    build: impl FnOnce(S, &mut Vec<OwnedFd>) -> anyhow::Result<()> + Send + 'static,
) -> anyhow::Result<(f64, f64)> {
    let (up, held) = std::thread::spawn(move || -> anyhow::Result<_> {
        let (mut held, made) = (Vec::new(), setup()?);
        let t = Instant::now();
        build(made, &mut held)?;
        Ok((t.elapsed().as_secs_f64(), held))
    })
    .join()
    .map_err(|_| anyhow::anyhow!("raw loop thread panicked"))??;
    let t = Instant::now();
    drop(held);
    fleet.reclaim_barrier()?;
    Ok((up, t.elapsed().as_secs_f64()))
}

/// A namespace this thread made, and a netlink socket inside it.
struct Ns {
    fd: OwnedFd,
    sock: NlSocket,
}

impl Ns {
    /// Moves this thread into a new namespace; `ipv6` false turns IPv6 off before any
    /// link exists, as nsfleet does in a switch that uses none.
    fn new(ipv6: bool) -> anyhow::Result<Ns> {
        sys::unshare_net()?;
        if !ipv6 && nsfleet::subsys::probe::has_ipv6() {
            // One lookup under /proc/sys, then openat, as `Worker::write_sysctl` does: a
            // path lookup there costs more the more namespaces the machine has.
            let dir = sys::open_dir(c"/proc/sys/net")?;
            for conf in ["all", "default"] {
                sys::write_at(dir.as_fd(), &format!("ipv6/conf/{conf}/disable_ipv6"), b"1")?;
            }
        }
        Ok(Ns {
            fd: sys::current_netns()?,
            sock: NlSocket::open()?,
        })
    }

    /// Sends `fill`'s requests and waits for every answer.
    fn send(&mut self, fill: impl FnOnce(&mut Batch, &mut NlSocket)) -> anyhow::Result<()> {
        let mut b = Batch::new();
        fill(&mut b, &mut self.sock);
        Ok(self.sock.execute_all(&b)?)
    }

    /// The far end of a veth, created in this namespace.
    fn far_end<'a>(&self, name: &'a str, index: i32) -> LinkSpec<'a> {
        LinkSpec {
            name,
            index,
            netns_fd: Some(self.fd.as_raw_fd()),
            ..Default::default()
        }
    }
}

/// A switch's port: up, in bridge `br`, at index `index`.
fn port(name: &str, index: i32, br: u16) -> LinkSpec<'_> {
    LinkSpec {
        name,
        index,
        up: true,
        master: Some(bridge_index(br)),
        ..Default::default()
    }
}

/// lo up, and an end with no IPv6 link-local address up with its address: a host's or
/// router's side of its link, as nsfleet configures it.
fn host_up(b: &mut Batch, s: &mut NlSocket, index: i32, a: IpNet) {
    rtnl::set_link(b, s.next_seq(), 1, true, None);
    rtnl::no_link_local(b, s.next_seq(), index);
    rtnl::set_link(b, s.next_seq(), index, true, None);
    rtnl::new_addr(b, s.next_seq(), index, a.addr, a.prefix);
}

/// lo and bridges `br0`..`br{n-1}` up: a switch's Create phase.
fn bridges_up(b: &mut Batch, s: &mut NlSocket, n: u16) {
    rtnl::set_link(b, s.next_seq(), 1, true, None);
    for k in 0..n {
        let spec = LinkSpec {
            name: &format!("br{k}"),
            index: bridge_index(k),
            ..Default::default()
        };
        rtnl::new_bridge(b, s.next_seq(), &spec, None);
        rtnl::set_link(b, s.next_seq(), spec.index, true, None);
    }
}

const ETH0: i32 = 1001;

/// nsfleet's fake routers: a switch namespace with its bridges (made before the clock
/// starts); per router a namespace, its `eth0` made from the switch and placed in the
/// router, then lo and eth0 up, the address and forwarding. `macvlan` false: `eth0` is a
/// veth whose near end is a port of a bridge (what nsfleet builds by default); true: a
/// macvlan (bridge mode) with that bridge as its lower, a third of the kernel objects (the
/// floor of what nsfleet builds for `ports = "macvlan"`, whose lowers are veths joined to
/// one bridge). Returns (up, down to reclaimed) seconds.
pub fn routers(fleet: &Fleet, count: u64, macvlan: bool) -> anyhow::Result<(f64, f64)> {
    let bridges = (count as usize).div_ceil(PORTS_PER_BRIDGE) as u16;
    timed(
        fleet,
        move || {
            let mut sw = Ns::new(false)?;
            sw.send(|b, s| bridges_up(b, s, bridges))?;
            Ok(sw)
        },
        move |mut sw, held| {
            let pool: IpNet = "10.0.0.0/16".parse().expect("a valid pool");
            for i in 0..count {
                let mut r = Ns::new(true)?;
                let (name, br) = (
                    format!("p{}", i + 1),
                    (i as usize / PORTS_PER_BRIDGE) as u16,
                );
                let far = r.far_end("eth0", ETH0);
                sw.send(|b, s| {
                    if macvlan {
                        rtnl::new_macvlan(b, s.next_seq(), &far, bridge_index(br))
                    } else {
                        let here = port(&name, 1000 + 2 * i as i32, br);
                        rtnl::new_veth(b, s.next_seq(), &here, &far)
                    }
                })?;
                r.send(|b, s| {
                    host_up(b, s, ETH0, pool.host(i));
                    rtnl::set_forwarding(b, s.next_seq(), ETH0, true);
                })?;
                held.push(r.fd);
            }
            held.push(sw.fd);
            Ok(())
        },
    )
}

/// nsfleet's `linear` of `k` (Mininet's LinearTopo): per position a host and a switch,
/// each a namespace; the switch's bridge; a veth from the switch to its host and one from
/// the previous switch, whose far end joins this switch's bridge; the host's end up with
/// its address. The whole topology is timed, as Mininet's start is.
pub fn linear(fleet: &Fleet, k: u64) -> anyhow::Result<(f64, f64)> {
    const TO_HOST: i32 = 1000;
    const TO_NEXT: i32 = 1002;
    const FROM_PREV: i32 = 1003;
    timed(
        fleet,
        || Ok(()),
        move |(), held| {
            let pool: IpNet = "10.0.0.0/8".parse().expect("a valid pool");
            let mut prev: Option<Ns> = None;
            for i in 0..k {
                let mut host = Ns::new(true)?;
                let mut sw = Ns::new(false)?;
                sw.send(|b, s| {
                    bridges_up(b, s, 1);
                    rtnl::new_veth(
                        b,
                        s.next_seq(),
                        &port("p1", TO_HOST, 0),
                        &host.far_end("eth0", ETH0),
                    );
                })?;
                if let Some(mut p) = prev.take() {
                    let next = sw.far_end("p3", FROM_PREV);
                    p.send(|b, s| rtnl::new_veth(b, s.next_seq(), &port("p2", TO_NEXT, 0), &next))?;
                    sw.send(|b, s| {
                        rtnl::set_link(b, s.next_seq(), FROM_PREV, true, Some(bridge_index(0)))
                    })?;
                    held.push(p.fd);
                }
                host.send(|b, s| host_up(b, s, ETH0, pool.host(i)))?;
                held.push(host.fd);
                prev = Some(sw);
            }
            held.extend(prev.map(|p| p.fd));
            Ok(())
        },
    )
}

/// The kernel's floor for a topology's links: `pairs` veth pairs created in one scratch
/// namespace, a full batch per `sendmsg`, and nothing else (no namespaces, bridges,
/// addresses). No tool builds those links faster on this machine.
pub fn links_floor(fleet: &Fleet, pairs: u64) -> anyhow::Result<f64> {
    let setup = || Ns::new(true);
    let (up, _) = timed(fleet, setup, move |Ns { fd, mut sock }, held| {
        held.push(fd);
        let mut b = Batch::new();
        for i in 0..pairs {
            let (a, z) = (format!("a{i}"), format!("z{i}"));
            let end = |name| LinkSpec {
                name,
                ..Default::default()
            };
            rtnl::new_veth(&mut b, sock.next_seq(), &end(&a), &end(&z));
            if b.seqs().len() == MAX_BATCH {
                sock.execute_all(&b)?;
                b.clear();
            }
        }
        Ok(sock.execute_all(&b)?)
    })?;
    Ok(up)
}

//! The supervisor's side of `nsfleet gen`: the fleet's traffic engine (nsfleet-traffic)
//! and what only the fleet knows.
//!
//! It turns `node:iface` into a namespace and a name, fills in what a device's parameters
//! leave to the network (its own address, the receiver's MAC), finds each destination's
//! node and counts what arrives there, and gives a veth peer NAPI (GRO on) so that it takes
//! XDP frames, turning it off again on `reset`. Commands are checked in full before the
//! first one is applied. It is dropped before the fleet's nodes are: the engine's threads
//! and sinks hold their namespaces.

use anyhow::{anyhow, bail, Context};
use nsfleet_core::{Fleet, Node};
use nsfleet_traffic::sink::Sink;
use nsfleet_traffic::{Command, DeviceParams, Engine, Method, Param, Results, Target};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct GenReport {
    pub results: Results,
    /// Per sending device, what its destination's interface received since `start`.
    pub delivered: Vec<Delivered>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Delivered {
    pub dev: String,
    /// `node:iface` of the destination address.
    pub receiver: String,
    /// The receiving interface's rx_packets since `start` (all its traffic).
    pub rx_packets: u64,
    /// UDP packets the counting sink saw, when there is one.
    pub sink: Option<u64>,
}

struct Receiver {
    node: String,
    iface: String,
    base: u64,
    sink: Option<Sink>,
}

#[derive(Default)]
pub struct Traffic {
    engine: Option<Engine>,
    receivers: BTreeMap<String, Receiver>,
    /// Interfaces given GRO for XDP frames, to turn it off again.
    gro: Vec<(String, String)>,
    /// Why a device's method was chosen for it here (the fleet's reasons).
    notes: BTreeMap<String, String>,
}

impl Traffic {
    /// Applies `commands` in order, after checking them all; then reports.
    pub fn apply(
        &mut self,
        fleet: &Fleet,
        commands: &[Command],
        threads: Option<usize>,
        sink: bool,
    ) -> anyhow::Result<GenReport> {
        self.ensure_engine(threads)?;
        self.check(fleet, commands)?;
        for c in commands {
            self.apply_one(fleet, c, sink)
                .with_context(|| format!("`{c}`"))?;
        }
        Ok(self.report(fleet))
    }

    /// Stops everything and lets go of every namespace the generator holds.
    pub fn shutdown(&mut self, fleet: &Fleet) {
        if let Some(e) = self.engine.take() {
            e.reset();
        }
        self.receivers.clear();
        self.restore_gro(fleet);
    }

    /// The nodes the generator holds a socket in (a device or a receiver), by name.
    pub fn nodes_in_use(&self) -> std::collections::BTreeSet<String> {
        let devices = (self.engine.iter()).flat_map(|e| (0..e.threads()).flat_map(|t| e.labels(t)));
        (devices.chain(self.receivers.keys().cloned()))
            .filter_map(|dev| Some(dev.split_once(':')?.0.to_string()))
            .collect()
    }

    /// The nodes a device is started on and not done: sending, or about to.
    pub fn sending_nodes(&self) -> std::collections::BTreeSet<String> {
        let results = self
            .engine
            .as_ref()
            .map(Engine::results)
            .unwrap_or_default();
        let devices = results.threads.iter().flat_map(|t| &t.devices);
        (devices.filter(|d| matches!(d.state.as_str(), "idle" | "running")))
            .filter_map(|d| Some(d.dev.split_once(':')?.0.to_string()))
            .collect()
    }

    fn engine(&self) -> &Engine {
        self.engine.as_ref().expect("made by ensure_engine")
    }

    fn ensure_engine(&mut self, threads: Option<usize>) -> anyhow::Result<()> {
        let want = threads.unwrap_or_else(|| {
            (self.engine.as_ref().map(Engine::threads))
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        });
        if !(1..=1024).contains(&want) {
            bail!("threads: expected 1 to 1024, got {want}");
        }
        match &self.engine {
            Some(e) if e.threads() == want => return Ok(()),
            Some(e) if e.results().running => bail!(
                "the generator is running with {} threads: stop it before asking for {want}",
                e.threads()
            ),
            _ => {}
        }
        self.engine = None;
        self.engine = Some(Engine::new(want).context("starting generator threads")?);
        Ok(())
    }

    /// Everything that can be known wrong before anything changes: the commands are run
    /// dry, over copies of the devices' parameters.
    fn check(&self, fleet: &Fleet, commands: &[Command]) -> anyhow::Result<()> {
        let e = self.engine();
        let mut devices: BTreeMap<String, DeviceParams> = e.startable().into_iter().collect();
        // Devices on a thread now, by thread, as the commands change them.
        let mut listed: Vec<Vec<String>> = (0..e.threads()).map(|t| e.labels(t)).collect();
        for c in commands {
            let fail = |e: String| anyhow!("`{c}`: {e}");
            match c {
                Command::AddDevice { thread, dev } => {
                    if *thread >= e.threads() {
                        return Err(fail(format!(
                            "no thread {thread}: the generator has threads 0 to {}",
                            e.threads() - 1
                        )));
                    }
                    interface(fleet, dev).map_err(|e| fail(e.to_string()))?;
                    if listed.iter().flatten().any(|l| l == dev) {
                        return Err(fail(format!("{dev} is on a thread already")));
                    }
                    listed[*thread].push(dev.clone());
                    devices.insert(dev.clone(), DeviceParams::default());
                }
                Command::Set { dev, set } => {
                    let p = devices.get_mut(dev).ok_or_else(|| {
                        fail(format!(
                            "no device {dev}: add it to a thread first (thread 0 add_device {dev})"
                        ))
                    })?;
                    p.apply(set);
                }
                Command::RemDeviceAll { thread } => {
                    let gone = listed
                        .get_mut(*thread)
                        .ok_or_else(|| fail(format!("no thread {thread}")))?;
                    for d in gone.drain(..) {
                        devices.remove(&d);
                    }
                }
                Command::Reset => {
                    devices.clear();
                    listed.iter_mut().for_each(Vec::clear);
                }
                Command::Start => {
                    for (dev, p) in &devices {
                        resolve(fleet, dev, p)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn apply_one(&mut self, fleet: &Fleet, c: &Command, sink: bool) -> anyhow::Result<()> {
        let e = self.engine();
        match c {
            Command::AddDevice { thread, dev } => {
                let (node, iface) = interface(fleet, dev)?;
                let netns = node
                    .dup_netns()
                    .ok_or_else(|| anyhow!("node {} is being torn down", node.name()))?;
                let target = Target {
                    netns: Arc::new(netns),
                    ifname: iface,
                };
                e.add_device(*thread, dev, target).map_err(|e| anyhow!(e))
            }
            Command::RemDeviceAll { thread } => e.rem_device_all(*thread).map_err(|e| anyhow!(e)),
            Command::Set { dev, set } => e.set(dev, set).map_err(|e| anyhow!(e)),
            Command::DeviceList { mode } => {
                e.set_list_mode(*mode);
                Ok(())
            }
            Command::Stop => {
                e.stop();
                Ok(())
            }
            Command::Reset => {
                e.reset();
                self.receivers.clear();
                self.notes.clear();
                self.restore_gro(fleet);
                Ok(())
            }
            Command::Start => self.start(fleet, sink),
        }
    }

    /// Fills in the addresses of each device about to start, readies its receiver, and
    /// starts; running devices and their receivers' counts are left alone.
    fn start(&mut self, fleet: &Fleet, sink: bool) -> anyhow::Result<()> {
        for (dev, p) in self.engine().startable() {
            self.prepare(fleet, &dev, &p, sink)?;
        }
        self.engine().start().map_err(|e| anyhow!(e))
    }

    /// Fills in what a device left to the network and readies its receiver.
    fn prepare(
        &mut self,
        fleet: &Fleet,
        dev: &str,
        p: &DeviceParams,
        sink: bool,
    ) -> anyhow::Result<()> {
        let r = resolve(fleet, dev, p)?;
        let set = |p: Param| self.engine().set(dev, &p).map_err(|e| anyhow!(e));
        if let Some(src) = r.src {
            set(Param::Src(src))?;
        }
        let Some((rnode, riface)) = r.receiver else {
            return Ok(());
        };
        if p.dst_mac.is_none() {
            let i = riface.clone();
            let mac = fleet.on_node(&rnode, move |_| {
                nsfleet_sys::hwaddr(&i).map_err(anyhow::Error::from)
            })?;
            set(Param::DstMac(mac))?;
        }
        match (p.method, r.direct) {
            // Nothing will be sent: nothing to count.
            (Method::Null, _) => return Ok(()),
            (Method::Auto | Method::Xdp, true) => self.enable_gro(fleet, &rnode, &riface)?,
            (Method::Auto, false) => {
                set(Param::Method(Method::Ring))?;
                self.notes.insert(dev.to_string(), format!(
                    "ring: {rnode}:{riface} is not this link's other end, and XDP frames reach only that end"
                ));
            }
            _ => {}
        }
        let receiver = open_receiver(fleet, &rnode, &riface, sink)?;
        self.receivers.insert(dev.to_string(), receiver);
        Ok(())
    }

    fn enable_gro(&mut self, fleet: &Fleet, node: &str, iface: &str) -> anyhow::Result<()> {
        let key = (node.to_string(), iface.to_string());
        if self.gro.contains(&key) {
            return Ok(());
        }
        let i = iface.to_string();
        fleet
            .on_node(node, move |_| {
                nsfleet_sys::set_offload(&i, nsfleet_sys::Offload::Gro, true).map_err(Into::into)
            })
            .with_context(|| format!("{node}:{iface}: turning GRO on for XDP frames"))?;
        self.gro.push(key);
        Ok(())
    }

    fn restore_gro(&mut self, fleet: &Fleet) {
        for (node, iface) in self.gro.drain(..) {
            let _ = fleet.on_node(&node, move |_| {
                nsfleet_sys::set_offload(&iface, nsfleet_sys::Offload::Gro, false)
                    .map_err(Into::into)
            });
        }
    }

    pub fn report(&mut self, fleet: &Fleet) -> GenReport {
        let mut results = match &self.engine {
            Some(e) => e.results(),
            None => Results::default(),
        };
        for d in results.threads.iter_mut().flat_map(|t| &mut t.devices) {
            if d.note.is_none() {
                d.note = self.notes.get(&d.dev).cloned();
            }
        }
        let delivered = (self.receivers.iter_mut())
            .map(|(dev, r)| {
                let i = r.iface.clone();
                let now = fleet
                    .on_node(&r.node, move |_| rx_packets(&i))
                    .unwrap_or(r.base);
                Delivered {
                    dev: dev.clone(),
                    receiver: format!("{}:{}", r.node, r.iface),
                    rx_packets: now.saturating_sub(r.base),
                    sink: r.sink.as_mut().and_then(|s| s.count().ok()),
                }
            })
            .collect();
        GenReport { results, delivered }
    }
}

/// What the fleet supplies for a device about to start.
struct Resolved {
    /// The device's own address, when `src` was left to it.
    src: Option<Ipv4Addr>,
    /// The node and interface holding the destination address, if a node does.
    receiver: Option<(String, String)>,
    /// Whether the receiver is the other end of the device's own veth.
    direct: bool,
}

fn resolve(fleet: &Fleet, dev: &str, p: &DeviceParams) -> anyhow::Result<Resolved> {
    p.check(dev).map_err(|e| anyhow!(e))?;
    let (node, iface) = interface(fleet, dev)?;
    let src = match p.src_min {
        Some(_) => None,
        None => Some(ipv4_of(&node, &iface).ok_or_else(|| {
            anyhow!("{dev} has no IPv4 address: set src (the address to send from)")
        })?),
    };
    let dst = p.dst_min.expect("checked above");
    let receiver = owner_of(fleet, dst);
    if receiver.is_none() && p.dst_mac.is_none() {
        bail!("{dev}: {dst} is no address of this fleet: set dst_mac (the next hop's MAC)");
    }
    let direct = (receiver.as_ref()).is_some_and(|(n, i)| is_peer(fleet, (&node, &iface), (n, i)));
    Ok(Resolved {
        src,
        receiver,
        direct,
    })
}

/// The node and interface a `node:iface` names, or why not.
fn interface(fleet: &Fleet, dev: &str) -> anyhow::Result<(Arc<Node>, String)> {
    let (node, iface) = dev
        .split_once(':')
        .ok_or_else(|| anyhow!("a device is NODE:IFACE, like r1:eth0, not {dev:?}"))?;
    let n = (fleet.nodes().get(node).cloned()).ok_or_else(|| anyhow!("no node named {node:?}"))?;
    let wiring = n.wiring();
    if !wiring.ifaces.iter().any(|i| i.name == iface) {
        let names: Vec<&str> = wiring.ifaces.iter().map(|i| i.name.as_str()).collect();
        bail!(
            "node {node} has no interface {iface:?} (it has: {})",
            names.join(", ")
        );
    }
    Ok((n, iface.to_string()))
}

fn ipv4_of(node: &Node, iface: &str) -> Option<Ipv4Addr> {
    let wiring = node.wiring();
    let i = wiring.ifaces.iter().find(|i| i.name == iface)?;
    i.addrs.iter().find_map(|a| match a.addr {
        IpAddr::V4(v) => Some(v),
        IpAddr::V6(_) => None,
    })
}

/// The node and interface that hold `addr`, if a node of the fleet does.
fn owner_of(fleet: &Fleet, addr: Ipv4Addr) -> Option<(String, String)> {
    let nodes = fleet.nodes();
    let found = nodes.iter().find_map(|n| {
        (n.wiring().ifaces.iter())
            .find(|i| i.addrs.iter().any(|a| a.addr == IpAddr::V4(addr)))
            .map(|i| (n.name().to_string(), i.name.clone()))
    });
    found
}

/// Whether two interfaces are the two ends of one veth pair.
fn is_peer(fleet: &Fleet, (a, ai): (&Node, &str), (b, bi): (&str, &str)) -> bool {
    let ends = |n: &Node, i: &str, other: &str, oi: &str| {
        (n.wiring().ifaces.iter()).any(|x| {
            x.name == i && (x.link.as_veth()).is_some_and(|p| p.name == oi && p.node == other)
        })
    };
    let nodes = fleet.nodes();
    ends(a, ai, b, bi) || nodes.get(b).is_some_and(|b| ends(b, bi, a.name(), ai))
}

fn open_receiver(fleet: &Fleet, node: &str, iface: &str, sink: bool) -> anyhow::Result<Receiver> {
    let i = iface.to_string();
    let (base, sink) = fleet
        .on_node(node, move |_| {
            let sink = if sink { Some(Sink::open(&i)?) } else { None };
            Ok((rx_packets(&i)?, sink))
        })
        .with_context(|| format!("{node}:{iface}: readying the receiver"))?;
    Ok(Receiver {
        node: node.to_string(),
        iface: iface.to_string(),
        base,
        sink,
    })
}

/// An interface's rx_packets, from /proc/thread-self/net/dev: the calling thread's
/// namespace's view.
fn rx_packets(iface: &str) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/net/dev")?;
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.trim() == iface)
        .and_then(|(_, v)| v.split_whitespace().nth(1)?.parse().ok())
        .ok_or_else(|| anyhow!("no interface {iface} in /proc/net/dev"))
}

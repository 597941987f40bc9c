//! Published ports (containerlab's `ports`): what comes to a port of the host goes to a
//! node's port at its address on one of its interfaces, as Docker publishes a
//! container's. Destination NAT in an nf_tables table of the fleet's own, in the host's
//! namespace: `inet nsfleet-FLEET`, with two base chains per node (`pre-NODE` on
//! prerouting for what comes from elsewhere, `out-NODE` on output for the host's own
//! connections) and one `postrouting` chain that masquerades what the host sends from its
//! loopback addresses.
//!
//! The table is made with the owner flag: it belongs to this process's netlink socket,
//! nobody else may change it, and the kernel removes it when the socket closes, however
//! the supervisor ended (`kill -9` included). A node's chains go at its exit. Nothing of
//! the host's other tables is read or written.
//!
//! The host's own connections to 127.0.0.1 can leave only through an interface whose
//! `route_localnet` is on (as Docker sets it on its bridge): nsfleet sets it on the host
//! end of the link that reaches the node, which is the fleet's own interface. Connections
//! from other machines need the host to forward (`net.ipv4.ip_forward`), which nsfleet
//! does not change; IPv6 ports are published to the node's IPv6 address too, but the
//! host's `::1` cannot be routed out at all.

use anyhow::{anyhow, bail};
use nsfleet_core::{InitCtx, Node, Phase, Subsystem};
use nsfleet_locks::{order, Mutex};
use nsfleet_netlink::nft::{self, Base, Expr, Hook, MetaKey, Reg};
use nsfleet_netlink::{rtnl, Batch, NlError, NlSocket};
use nsfleet_topology::{NodeConfig, NodeWiring, PublishedPort};
use std::net::IpAddr;
use std::time::Duration;

/// Where the node chains run among a hook's chains: nf_tables' `dstnat` and `srcnat`.
const DSTNAT: i32 = -100;
pub(crate) const SRCNAT: i32 = 100;
pub(crate) const FAMILY: u8 = nft::NFPROTO_INET;

pub struct Ports {
    table: String,
    /// The host's side: the table's owning socket, a route socket, and what is made.
    host: Mutex<Host>,
}

struct Host {
    /// The socket that owns the table: it must stay open as long as the fleet lives.
    /// A kernel without nf_tables (or with it as a module not loaded) has no such
    /// socket: only a fleet that publishes a port needs one.
    nft: std::io::Result<NlSocket>,
    route: NlSocket,
    table_made: bool,
    /// Host interfaces whose loopback traffic is let out and masqueraded already.
    localnet: Vec<String>,
    /// Nodes whose chains exist. The table goes with the last one's, so that `down`
    /// answers with it gone: left to the socket, it would outlive the answer by as long
    /// as the supervisor takes to exit.
    publishing: usize,
}

impl Ports {
    /// Must be called from a thread in the host's namespace. Makes nothing yet: the
    /// table comes with the first node that publishes a port (and a kernel without
    /// nf_tables fails only a fleet that publishes one).
    pub fn new(fleet: &str) -> std::io::Result<Self> {
        Ok(Ports {
            table: table_name(fleet),
            host: Mutex::new(
                order::PORTS_HOST,
                Host {
                    nft: NlSocket::open_protocol(nft::NETLINK_NETFILTER),
                    route: NlSocket::open()?,
                    table_made: false,
                    localnet: Vec::new(),
                    publishing: 0,
                },
            ),
        })
    }

    /// The table, its postrouting chain, and what each host interface needs, once.
    fn prepare(&self, host: &mut Host, ports: &[PublishedPort]) -> anyhow::Result<()> {
        let t = &self.table;
        let sock = match &mut host.nft {
            Ok(s) => s,
            Err(e) => bail!("this kernel has no nf_tables netlink ({e}): ports cannot be published (CONFIG_NF_TABLES, or the nf_tables module loaded)"),
        };
        if !host.table_made {
            commit(sock, |b, seq| {
                nft::new_owned_table(b, seq(), FAMILY, t);
                nft::new_nat_chain(b, seq(), FAMILY, t, "postrouting", Hook::Postrouting, SRCNAT);
            })
            .map_err(|e| match e.errno {
                libc::EEXIST => anyhow!("the host has an nf_tables table inet {t} already: another fleet of this name, under another run folder"),
                libc::EOPNOTSUPP => anyhow!("making the table inet {t} for published ports: {e}: ports need Linux 5.12 or later (a table owned by its socket)"),
                _ => anyhow!("making the table inet {t} for published ports: {e}"),
            })?;
            host.table_made = true;
        }
        for p in ports {
            if host.localnet.contains(&p.host_iface) {
                continue;
            }
            let link = (crate::link::host::lookup(&mut host.route, &p.host_iface)?)
                .ok_or_else(|| anyhow!("the host has no interface {}", p.host_iface))?;
            let mut b = Batch::new();
            rtnl::set_route_localnet(&mut b, host.route.next_seq(), link.index, true);
            (host.route.execute_all(&b))
                .map_err(|e| anyhow!("route_localnet on {}: {e}", p.host_iface))?;
            let masq = masquerade_loopback(&p.host_iface);
            commit(sock, |b, seq| {
                nft::new_rule(b, seq(), FAMILY, t, "postrouting", &masq)
            })
            .map_err(|e| {
                anyhow!(
                    "masquerading the host's loopback through {}: {e}",
                    p.host_iface
                )
            })?;
            host.localnet.push(p.host_iface.clone());
        }
        Ok(())
    }

    /// Removes node `node`'s chains and their rules (they exist together).
    fn remove_chains(&self, sock: &mut NlSocket, node: &Node) {
        // If this fails, the table goes with the supervisor's socket anyway.
        let _ = commit(sock, |b, seq| {
            for (chain, _) in chains(node) {
                nft::del_chain(b, [seq(), seq()], FAMILY, &self.table, &chain);
            }
        });
    }
}

/// How long the kernel may take to answer a transaction: it answers at once, so this
/// only bounds a kernel that never does.
const ANSWER: Duration = Duration::from_secs(10);

/// Rules per transaction: each a message, well under what a batch's ACKs may be.
const RULES_PER_COMMIT: usize = 200;

/// One nf_tables transaction of what `build` appends (each request taking a sequence
/// number from `seq`), sent on `sock`: all of it, or none.
pub(crate) fn commit(
    sock: &mut NlSocket,
    build: impl FnOnce(&mut Batch, &mut dyn FnMut() -> u32),
) -> Result<(), NlError> {
    nsfleet_core::fault::point("an nf_tables transaction")?;
    let mut b = Batch::new();
    let begin = sock.next_seq();
    nft::batch_begin(&mut b, begin);
    build(&mut b, &mut || sock.next_seq());
    nft::batch_end(&mut b, sock.next_seq());
    sock.execute_transaction(&b, begin, ANSWER)
}

/// Whether this kernel answers nf_tables requests here: `Err` says why not.
pub fn nf_tables_here() -> anyhow::Result<()> {
    let mut sock = NlSocket::open_protocol(nft::NETLINK_NETFILTER)?;
    let mut b = Batch::new();
    nft::get_gen(&mut b, sock.next_seq());
    sock.dump(&b, |_| {}).map_err(|e| anyhow!("{e}"))
}

/// The fleet's table: `nsfleet-FLEET`.
pub fn table_name(fleet: &str) -> String {
    format!("nsfleet-{fleet}")
}

fn chains(node: &Node) -> [(String, Hook); 2] {
    [
        (format!("pre-{}", node.name()), Hook::Prerouting),
        (format!("out-{}", node.name()), Hook::Output),
    ]
}

impl Subsystem for Ports {
    /// Whether the node's chains exist.
    type State = bool;

    fn name(&self) -> &'static str {
        "ports"
    }

    /// Once every link is made: the host's end of the management network is made by
    /// the switch's Wire phase, and the node's address is on its interface.
    fn phase(&self) -> Phase {
        Phase::Configure
    }

    fn wants(&self, node: &Node) -> bool {
        !node.config().ports.is_empty()
    }

    fn init(&self, cx: &mut InitCtx<'_>, made: &mut bool) -> anyhow::Result<()> {
        let config = cx.node.config();
        let mut rules = Vec::new();
        let wiring = cx.node.wiring();
        for p in &config.ports {
            for to in targets(cx.node, &wiring, p)? {
                rules.push(dnat(p, to));
            }
        }
        let mut host = self.host.lock();
        self.prepare(&mut host, &config.ports)?;
        let (t, sock) = (&self.table, host.nft.as_mut().expect("prepared"));
        let name = cx.node.name();
        let chains = chains(cx.node);
        // The chains come with the first rules, in one transaction; more rules than one
        // transaction holds follow in others, and a failure then takes the chains away.
        let per_commit = RULES_PER_COMMIT / chains.len();
        let batches: Vec<&[Vec<Expr>]> = match rules.len() {
            0 => vec![&[]],
            _ => rules.chunks(per_commit).collect(),
        };
        for (k, batch) in batches.into_iter().enumerate() {
            let added = commit(sock, |b, seq| {
                for (chain, hook) in &chains {
                    if k == 0 {
                        nft::new_nat_chain(b, seq(), FAMILY, t, chain, *hook, DSTNAT);
                    }
                    for r in batch {
                        nft::new_rule(b, seq(), FAMILY, t, chain, r);
                    }
                }
            });
            if let Err(e) = added {
                if k > 0 {
                    self.remove_chains(sock, cx.node);
                }
                bail!("publishing {name}'s ports: {e}");
            }
        }
        *made = true;
        host.publishing += 1;
        Ok(())
    }

    /// A node whose ports change, or the addresses they go to, loses its chains here, and
    /// `extend` makes them anew.
    fn retire(
        &self,
        cx: &mut InitCtx<'_>,
        made: &mut bool,
        was: &nsfleet_core::Shape,
    ) -> anyhow::Result<()> {
        let (node, config, wiring) = (cx.node, cx.node.config(), cx.node.wiring());
        if published(node, &config, &wiring) != published(node, &was.config, &was.wiring) {
            self.exit(cx.node, made);
        }
        Ok(())
    }

    fn extend(
        &self,
        cx: &mut InitCtx<'_>,
        made: &mut bool,
        _was: &nsfleet_core::Shape,
    ) -> anyhow::Result<()> {
        match *made {
            true => Ok(()),
            false => self.init(cx, made),
        }
    }

    fn exit(&self, node: &Node, made: &mut bool) {
        if !std::mem::take(made) {
            return;
        }
        let mut host = self.host.lock();
        host.publishing -= 1;
        let last = host.publishing == 0;
        let Ok(sock) = host.nft.as_mut() else {
            return;
        };
        self.remove_chains(sock, node);
        if last {
            // The table goes with the supervisor's socket anyway: made anew only once
            // this took it away.
            let gone = commit(sock, |b, seq| nft::del_table(b, seq(), FAMILY, &self.table));
            if gone.is_ok() {
                host.table_made = false;
                host.localnet.clear();
            }
        }
    }
}

/// What a shape publishes: each port with the addresses it goes to.
fn published<'a>(
    node: &Node,
    config: &'a NodeConfig,
    wiring: &NodeWiring,
) -> Vec<(&'a PublishedPort, Option<Vec<IpAddr>>)> {
    let to = |p| targets(node, wiring, p).ok();
    config.ports.iter().map(|p| (p, to(p))).collect()
}

/// The node's addresses a port goes to: on its interface, of the host address's family
/// (both families when the port is published on all of the host's addresses).
fn targets(node: &Node, wiring: &NodeWiring, p: &PublishedPort) -> anyhow::Result<Vec<IpAddr>> {
    let Some(iface) = wiring.iface(&p.iface) else {
        return Err(crate::no_interface(node, &p.iface));
    };
    let mut to: Vec<IpAddr> = Vec::new();
    for a in &iface.addrs {
        let family_fits = p.host_addr.is_none_or(|h| h.is_ipv4() == a.addr.is_ipv4());
        if family_fits && !to.iter().any(|t| t.is_ipv4() == a.addr.is_ipv4()) {
            to.push(a.addr);
        }
    }
    if to.is_empty() {
        bail!(
            "{}: port {} has no address to go to on {}",
            node.name(),
            p.node_port,
            p.iface
        );
    }
    Ok(to)
}

/// `[ip daddr HOST | fib daddr type local (ip6 daddr != ::1)] PROTO dport HOST_PORT dnat
/// to NODE:PORT`.
fn dnat(p: &PublishedPort, to: IpAddr) -> Vec<Expr> {
    let family = if to.is_ipv4() {
        nft::NFPROTO_IPV4
    } else {
        nft::NFPROTO_IPV6
    };
    let mut e = vec![
        Expr::Meta(MetaKey::NfProto, Reg::R1),
        Expr::CmpEq(Reg::R1, vec![family]),
    ];
    match p.host_addr {
        Some(a) => {
            // The destination address: 16 bytes into an IPv4 header, 24 into IPv6's.
            let (offset, len) = if a.is_ipv4() { (16, 4) } else { (24, 16) };
            e.push(Expr::Payload {
                base: Base::Network,
                offset,
                len,
                to: Reg::R1,
            });
            e.push(Expr::CmpEq(Reg::R1, nft::addr_bytes(a)));
        }
        None => {
            e.push(Expr::FibDaddrType(Reg::R1));
            e.push(Expr::CmpEq(Reg::R1, nft::RTN_LOCAL.to_ne_bytes().to_vec()));
            if !to.is_ipv4() {
                // Not ::1, which the kernel never routes out of the host: a connection
                // to it is refused at once rather than left to time out.
                e.push(Expr::Payload {
                    base: Base::Network,
                    offset: 24,
                    len: 16,
                    to: Reg::R1,
                });
                e.push(Expr::CmpNeq(
                    Reg::R1,
                    nft::addr_bytes(std::net::Ipv6Addr::LOCALHOST.into()),
                ));
            }
        }
    }
    e.extend([
        Expr::Meta(MetaKey::L4Proto, Reg::R1),
        Expr::CmpEq(Reg::R1, vec![p.proto.number()]),
        // The destination port: two bytes into a TCP or UDP header.
        Expr::Payload {
            base: Base::Transport,
            offset: 2,
            len: 2,
            to: Reg::R1,
        },
        Expr::CmpEq(Reg::R1, p.host_port.to_be_bytes().to_vec()),
        Expr::Immediate(Reg::R1, nft::addr_bytes(to)),
        Expr::Immediate(Reg::R2, p.node_port.to_be_bytes().to_vec()),
        Expr::Dnat {
            family,
            addr: Reg::R1,
            port: Reg::R2,
        },
    ]);
    e
}

/// `ip saddr 127.0.0.0/8 oifname IFACE masquerade`: the host's own connections to a
/// published port leave with the interface's address, which the node can answer.
fn masquerade_loopback(iface: &str) -> Vec<Expr> {
    vec![
        Expr::Meta(MetaKey::NfProto, Reg::R1),
        Expr::CmpEq(Reg::R1, vec![nft::NFPROTO_IPV4]),
        // The source address's first byte: 12 bytes into an IPv4 header.
        Expr::Payload {
            base: Base::Network,
            offset: 12,
            len: 1,
            to: Reg::R1,
        },
        Expr::CmpEq(Reg::R1, vec![127]),
        Expr::Meta(MetaKey::OifName, Reg::R1),
        Expr::CmpEq(Reg::R1, nft::ifname_bytes(iface)),
        Expr::Masquerade,
    ]
}

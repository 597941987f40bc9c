"""Mininet's `Mininet` on nsfleet: nodes, switches and links are described as a script
adds them, and `start()` brings the whole network up with one `nsfleet up` (validated
entirely before anything exists); `stop()` brings it down and waits for the kernel to
reclaim it. `pingAll`, `ping`, `iperf`, `configLinkStatus` and the node lookups behave
as Mininet's, printing what Mininet prints."""

from __future__ import annotations

import atexit
import ipaddress
import itertools
import math
import os
import re
import time
import weakref
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from .. import _toml
from ..fleet import Fleet
from . import log
from ._unsupported import Unsupported, once
from .link import Intf, Link, TCLink
from .node import (Controller, Host, Node, OVSKernelSwitch, Switch, give_bind_sources, script_reach,
                   make_bind_sources)
from .node import CPULimitedHost
from .topo import Topo, natural

_serial = itertools.count(1)

# Networks started and not stopped: a script that ends without stop() (an exception, an
# early exit) still leaves nothing behind, unlike Mininet, which needs `mn -c`.
_running: "weakref.WeakSet[Mininet]" = weakref.WeakSet()


@atexit.register
def _stop_the_forgotten() -> None:
    for net in list(_running):
        try:
            net.stop()
        except Exception:
            pass

NodeRef = Union[str, Node]

# The version of Mininet's API this package answers (`mn --version` prints it).
VERSION = "2.3.0"


class Mininet:
    """A network of hosts, switches and links, built on nsfleet when started."""

    def __init__(self, topo: Optional[Topo] = None, switch: Any = OVSKernelSwitch,
                 host: Any = Host, controller: Any = Controller, link: Any = Link,
                 intf: Any = Intf, build: bool = True, xterms: bool = False,
                 cleanup: bool = False, ipBase: str = "10.0.0.0/8", inNamespace: bool = False,
                 autoSetMacs: bool = False, autoStaticArp: bool = False,
                 autoPinCpus: bool = False, listenPort: Optional[int] = None,
                 waitConnected: bool = False, ovsTso: bool = True,
                 privileged: Optional[bool] = None) -> None:
        """Mininet's arguments, and two of nsfleet's own: ``ovsTso=False`` runs the
        network's Open vSwitch without its userspace datapath's TSO support (about
        0.2 MB less a port; the hosts on its switches compute their own checksums, and TCP
        crosses in packets of the MTU): the topology file's ``ovs_tso = false``.
        ``privileged=True`` makes every host the host's root, as Mininet's are, not
        confined (``nsfleet mn --privileged``, which sets ``NSFLEET_MN_PRIVILEGED=1``):
        a network of 1,024 hosts starts in a third of the time."""
        if xterms:
            raise Unsupported("xterms", "nodes have no X11 terminals (use nsfleet exec FLEET NODE)")
        if autoPinCpus:
            raise Unsupported("autoPinCpus", "nodes are not pinned to CPUs")
        self.topo = topo
        self.switch, self.host, self.controller, self.link, self.intf = switch, host, controller, link, intf
        self.waitConn = waitConnected
        self.ovsTso = ovsTso
        self.ipBase = ipBase
        self.network = ipaddress.ip_network(ipBase, strict=False)
        self.nextIP = 1
        self.autoSetMacs = autoSetMacs
        self.autoStaticArp = autoStaticArp
        self.hosts: List[Node] = []
        self.switches: List[Switch] = []
        self.controllers: List[Controller] = []
        self.links: List[Link] = []
        self.nameToNode: Dict[str, Any] = {}
        self.fleet: Optional[Fleet] = None
        self.privileged = (os.environ.get("NSFLEET_MN_PRIVILEGED") == "1"
                           if privileged is None else privileged)
        self._reach: Optional[Dict[str, List[str]]] = None
        # Each switch as the running fleet has it (see `_reshape`).
        self._applied: Dict[str, Any] = {}
        self.name = f"mn{os.getpid() % 100000}x{next(_serial)}"
        self.built = False
        # The controllers each switch connects to, where a script said (`s1.start([c1])`);
        # the others connect to every controller of the network, as Mininet's do.
        self.switchControllers: Dict[str, List[Controller]] = {}
        if topo is not None and build:
            self.build()

    @classmethod
    def init(cls) -> None:
        """Mininet's one-time set-up of the host (its limits, the kernel modules it needs):
        nothing to do here."""

    # -- describing --
    def addHost(self, name: str, cls: Any = None, **params: Any) -> Node:
        """A host; without `ip`, the next address of ipBase (10.0.0.1, ...). Each host
        takes the next number, given an `ip` or not, as Mininet numbers them (and its
        MAC with autoSetMacs: 00:00:00:00:00:01, ...)."""
        if "ip" not in params:
            addr = self.network.network_address + self.nextIP
            params["ip"] = f"{addr}/{self.network.prefixlen}"
        if self.autoSetMacs and "mac" not in params:
            params["mac"] = _mac(self.nextIP)
        self.nextIP += 1
        node = (cls or self.host)(name, **params)
        return self._add(node, self.hosts)

    def addSwitch(self, name: str, cls: Any = None, **params: Any) -> Switch:
        node = (cls or self.switch)(name, **params)
        return self._add(node, self.switches)

    def addController(self, name: Any = "c0", controller: Any = None, **params: Any) -> Controller:
        if isinstance(name, Controller):
            c = name
        else:
            cls = controller or self.controller
            c = cls(name, **params) if cls is not None else Controller(name)
        self.controllers.append(c)
        self.nameToNode[c.name] = c
        return c

    def addNAT(self, *args: Any, **kwargs: Any) -> Node:
        raise Unsupported("addNAT", "a NAT to the host's network is not made (use a host link in a topology file)")

    def _add(self, node: Any, where: List[Any]) -> Any:
        """Adds `node`; to a running network at once, through `nsfleet apply`."""
        if node.name in self.nameToNode:
            raise ValueError(f"node {node.name!r} added twice")
        node.net = self
        where.append(node)
        self.nameToNode[node.name] = node
        if self.fleet is not None:
            try:
                made = make_bind_sources(node)
                self._reshape()
                give_bind_sources(made, self.fleet.status().first_id)
            except Exception:
                # Refused: the network stays what the fleet is.
                where.remove(node)
                del self.nameToNode[node.name]
                raise
            if node in self.hosts:
                node.configDefault()
            if node in self.switches:
                # Running already, connected as the network's switches are (`connected`).
                setattr(node, "controllers", self._controllers_of(node))
        return node

    def _reshape(self) -> None:
        """The running fleet made what the network now describes (`nsfleet apply`: only
        what changed is touched)."""
        assert self.fleet is not None
        topology = self.topology()
        if log.enabled("debug"):
            log.debug("*** The network as nsfleet's topology (nsfleet apply):\n" + _toml.dumps(topology))
        self.fleet.apply(topology)
        # A changed Open vSwitch switch started again, in a world of its own: its shell
        # went with the old one.
        now = self._switch_shapes(topology)
        for sw in self.switches:
            if sw.name in self._applied and self._applied[sw.name] != now[sw.name]:
                sw.terminate()
        self._applied = now

    def _switch_shapes(self, topology: Dict[str, Any]) -> Dict[str, Any]:
        """Each switch as the fleet has it: its entry and its ports."""
        entries = {e["name"]: e for e in topology.get("switch", [])}
        return {sw.name: (repr(entries.get(sw.name)), tuple(sw.intfNames())) for sw in self.switches}

    # -- removing, as Mininet's delNode/delLink: from a running network at once --
    def delNode(self, node: Any, nodes: Optional[List[Any]] = None) -> None:
        """Removes `node` and its links (a controller: stopped, and no switch's any more)."""
        for link in [l for l in self.links if node in (l.intf1.node, l.intf2.node)]:
            self._forget(link)
        if isinstance(node, Controller):
            node.stop()
            for name, cs in self.switchControllers.items():
                self.switchControllers[name] = [c for c in cs if c is not node]
        else:
            node.terminate()
        (nodes if nodes is not None else self._list_of(node)).remove(node)
        del self.nameToNode[node.name]
        if self.fleet is not None:
            self._reshape()

    def delHost(self, host: Node) -> None:
        self.delNode(host, nodes=self.hosts)

    def delSwitch(self, switch: Switch) -> None:
        self.delNode(switch, nodes=self.switches)

    def delController(self, controller: Controller) -> None:
        self.delNode(controller, nodes=self.controllers)

    def delLink(self, link: Link) -> None:
        self._forget(link)
        if self.fleet is not None:
            self._reshape()

    def delLinkBetween(self, node1: Node, node2: Node, index: int = 0,
                       allLinks: bool = False) -> List[Link]:
        """Removes the `index`-th link between two nodes (or all of them); returns them."""
        between = [l for l in self.links if {l.intf1.node, l.intf2.node} == {node1, node2}]
        gone = between if allLinks else between[index:index + 1]
        for link in gone:
            self._forget(link)
        if gone and self.fleet is not None:
            self._reshape()
        return gone

    def _list_of(self, node: Any) -> List[Any]:
        for where in (self.hosts, self.switches, self.controllers):
            if node in where:
                return where
        raise ValueError(f"{node!r} is not a node of this network")

    def _forget(self, link: Link) -> None:
        self.links.remove(link)
        for intf in link.intfs():
            intf.node.delIntf(intf)

    def addLink(self, node1: NodeRef, node2: NodeRef, port1: Optional[int] = None,
                port2: Optional[int] = None, cls: Any = None, **params: Any) -> Link:
        n1 = self.nameToNode[node1] if isinstance(node1, str) else node1
        n2 = self.nameToNode[node2] if isinstance(node2, str) else node2
        if self.intf is not Intf:
            # Mininet(intf=...): every link's interfaces of that class, unless it says.
            params.setdefault("intf", self.intf)
        link = (cls or self.link)(n1, n2, port1=port1, port2=port2, **params)
        self.links.append(link)
        if self.fleet is not None:
            try:
                self._reshape()
            except Exception:
                # Refused: the network stays what the fleet is.
                self._forget(link)
                raise
        return link

    def build(self) -> None:
        """Describes the topology's nodes and links (nothing exists until start())."""
        if self.topo is not None and not self.built:
            topo = self.topo
            for name in topo.nodes(sort=False):
                opts = dict(topo.nodeInfo(name))
                cls = opts.pop("cls", None)
                if opts.pop("isSwitch", False):
                    self.addSwitch(name, cls=cls, **opts)
                else:
                    self.addHost(name, cls=cls, **opts)
            for a, b, info in topo.links(withInfo=True):
                info = dict(info)
                cls = info.pop("cls", None)
                info.pop("node1", None), info.pop("node2", None)
                self.addLink(a, b, cls=cls, **info)
        if not self.controllers and self.controller is not None and self.switches:
            # A class, an instance, or a list of them, as Mininet takes it.
            given = self.controller if isinstance(self.controller, list) else [self.controller]
            for i, c in enumerate(given):
                self.addController(c) if isinstance(c, Controller) else self.addController(f"c{i}", c)
        self.built = True

    # -- lookups --
    def getNodeByName(self, *args: str) -> Any:
        if len(args) == 1:
            return self.nameToNode[args[0]]
        return [self.nameToNode[n] for n in args]

    get = getNodeByName

    def __getitem__(self, key: str) -> Any:
        return self.nameToNode[key]

    def __iter__(self) -> Iterator[str]:
        every: List[Any] = [*self.hosts, *self.switches, *self.controllers]
        for n in every:
            yield n.name

    def __len__(self) -> int:
        return len(self.hosts) + len(self.switches) + len(self.controllers)

    def __contains__(self, item: str) -> bool:
        return item in self.nameToNode

    def keys(self) -> List[str]:
        return list(self)

    def values(self) -> List[Any]:
        return [self.nameToNode[n] for n in self]

    def items(self) -> List[Tuple[str, Any]]:
        return [(n, self.nameToNode[n]) for n in self]

    # -- the fleet --
    def topology(self) -> Dict[str, Any]:
        """The network as an nsfleet topology (a dict, as a TOML file would say it)."""
        nodes = []
        # The script's places as the network first saw them: a later os.chdir must not
        # change (and so start again) its running hosts.
        if self._reach is None:
            self._reach = script_reach()
        reach = self._reach
        for n in self.hosts:
            entry: Dict[str, Any] = {"name": n.name, **n.fleetDirs, **n.fleetLimits()}
            # A host is confined, as a node that runs software (its shell is started by
            # `nsfleet exec`), unless it or the network is given `privileged=True`.
            if self.privileged or n.params.get("privileged"):
                entry["privileged"] = True
            else:
                entry["confined"] = True
                for key, more in reach.items():
                    entry[key] = more + entry.get(key, [])
            route = n.params.get("defaultRoute")
            if route:
                route = str(route)
                entry["routes"] = [f"default {route}" if route.startswith(("via ", "dev ")) else f"default dev {route}"]
            nodes.append(entry)
        links = [{"a": _end(l.intf1, l.impair1), "b": _end(l.intf2, l.impair2)} for l in self.links]
        doc: Dict[str, Any] = {"fleet": {"name": self.name}}
        switches = self._switch_entries() if self.switches else []
        if not self.ovsTso and any(s.get("kind") == "ovs" for s in switches):
            doc["fleet"]["ovs_tso"] = False
        if nodes:
            doc["node"] = nodes
        if switches:
            doc["switch"] = switches
        if links:
            doc["link"] = links
        return doc

    def _switch_entries(self) -> List[Dict[str, Any]]:
        """Each switch with where its controllers are: a controller may send a switch to
        another of its processes (see `Controller.place`), which a running controller
        starts here when a switch first needs it."""
        controllers = {id(c): c for s in self.switches for c in self._controllers_of(s)}
        places = {key: c.place([s.name for s in self.switches
                                if any(x is c for x in self._controllers_of(s))])
                  for key, c in controllers.items()}
        dpids: set = set()
        out = []
        for s in self.switches:
            targets = [t for c in self._controllers_of(s) if (t := places[id(c)][s.name])]
            entry = s.entry(targets)
            # Mininet's dpid from a name (s1 and sw1 alike give 1) is given to the first
            # switch that has it; another gets one of Open vSwitch's, as a zero does.
            dpid = entry.get("dpid")
            if dpid is not None and (dpid in dpids or int(dpid, 16) == 0):
                del entry["dpid"]
            dpids.add(entry.get("dpid"))
            out.append(entry)
        return out

    def _controllers_of(self, switch: Switch) -> List[Controller]:
        return self.switchControllers.get(switch.name, self.controllers)

    def connect(self, switch: Switch, controllers: List[Controller]) -> None:
        """`switch.start(controllers)`: before the network runs, what it will connect to
        (and the network is launched); on a running network a change, made with
        `nsfleet apply` (the switch's Open vSwitch starts again)."""
        before = self._controllers_of(switch)
        self.switchControllers[switch.name] = controllers
        if self.fleet is None:
            self.launch()
        elif [id(c) for c in controllers] != [id(c) for c in before]:
            self._reshape()
            # Its Open vSwitch started again, in a world of its own: its shell went.
            switch.terminate()
        setattr(switch, "controllers", controllers)

    def launch(self) -> None:
        """The fleet, once: one `nsfleet up` of the whole topology, then each host's
        `config` (its own commands), as Mininet configures hosts. `start()` launches it;
        so does the first switch a script starts by hand (`s1.start([c0])`)."""
        if self.fleet is not None:
            return
        self.build()
        _raise_nofile()
        log.info("*** Configuring hosts\n" + " ".join(h.name for h in self.hosts) + " \n")
        # Owned by this process: however the script ends (SIGKILL, a closed terminal),
        # its network goes with it.
        topology = self.topology()
        if log.enabled("debug"):
            log.debug("*** The network as nsfleet's topology (nsfleet up):\n" + _toml.dumps(topology))
        made = [f for n in self.hosts for f in make_bind_sources(n)]
        # Said on every start, as `up` says a privileged node at its line (the API keeps
        # `up`'s own words to itself).
        privileged = [e["name"] for e in topology.get("node", []) if e.get("privileged")]
        if privileged:
            named = " ".join(privileged[:8]) + (f" ... ({len(privileged)} hosts)" if len(privileged) > 8 else "")
            log.warn(f"*** Not confined, the host's root (privileged): {named}\n")
        self.fleet = Fleet.from_dict(topology, owner=os.getpid())
        give_bind_sources(made, self.fleet.status().first_id)
        self._applied = self._switch_shapes(topology)
        _running.add(self)
        for h in self.hosts:
            h.runDeferred()
            h.configDefault()

    def start(self) -> None:
        """Starts the controllers (switches then connect at once), launches the fleet
        (see `launch`) and its switches."""
        self.build()
        if self.controllers:
            log.info("*** Starting controller\n" + " ".join(c.name for c in self.controllers) + " \n")
            for c in self.controllers:
                c.start()
        self.launch()
        log.info(f"*** Starting {len(self.switches)} switches\n" + " ".join(s.name for s in self.switches) + " ...\n")
        for s in self.switches:
            setattr(s, "controllers", self._controllers_of(s))
        if self.autoStaticArp:
            self.staticArp()
        if self.waitConn:
            # True waits as long as it takes; a number is seconds (Mininet's).
            self.waitConnected(None if self.waitConn is True else self.waitConn)

    def stop(self) -> None:
        """Ends every node's shell and brings the fleet down, to full reclamation."""
        if self.controllers:
            log.info(f"*** Stopping {len(self.controllers)} controllers\n" + " ".join(c.name for c in self.controllers) + " \n")
        log.info(f"*** Stopping {len(self.links)} links\n" + "." * len(self.links) + "\n")
        log.info(f"*** Stopping {len(self.switches)} switches\n" + " ".join(s.name for s in self.switches) + " \n")
        log.info(f"*** Stopping {len(self.hosts)} hosts\n" + " ".join(h.name for h in self.hosts) + " \n")
        for n in itertools.chain(self.hosts, self.switches):
            n.terminate()
        if self.fleet is not None:
            self.fleet.down()
            self.fleet = None
        for c in self.controllers:
            c.stop()
        _running.discard(self)
        log.info("*** Done\n")

    def run(self, test: Any, *args: Any, **kwargs: Any) -> Any:
        self.start()
        try:
            return test(*args, **kwargs)
        finally:
            self.stop()

    def waitConnected(self, timeout: Optional[float] = None, delay: float = 0.5) -> bool:
        """Waits until every switch forwards (standalone, or connected to a controller);
        True if they all do within `timeout` (None: forever)."""
        log.info("*** Waiting for switches to connect\n")
        waited = 0.0
        remaining = list(self.switches)
        while remaining:
            remaining = [s for s in remaining if not s.connected()]
            if not remaining:
                break
            if timeout is not None and waited >= timeout:
                log.warn(f"Timed out after {waited} seconds\n" + " ".join(s.name for s in remaining) + "\n")
                return False
            time.sleep(delay)
            waited += delay
        return True

    def staticArp(self) -> None:
        for src, dst in itertools.permutations(self.hosts, 2):
            ip, mac = dst.IP(), dst.MAC()
            if ip and mac:
                src.setARP(ip=ip, mac=mac)

    def configLinkStatus(self, src: str, dst: str, status: str) -> None:
        """Pulls (`down`) or plugs back (`up`) the cables between two nodes."""
        if status not in ("up", "down"):
            log.error(f"unknown link status: {status}\n")
            return
        a, b = self.nameToNode[src], self.nameToNode[dst]
        pairs = a.connectionsTo(b)
        if not pairs:
            log.error(f"src and dst not connected: {src} {dst}\n")
        assert self.fleet is not None
        for intf, other in pairs:
            end = intf if not isinstance(intf.node, Switch) else other
            link = self.fleet.link(f"{end.node.name}:{end.name}")
            link.down() if status == "down" else link.up()

    # -- tests --
    def ping(self, hosts: Optional[Sequence[Node]] = None, timeout: Optional[float] = None) -> float:
        """Pings between every pair of `hosts` (all by default), each source pinging its
        destinations at once; prints Mininet's lines; returns the loss in percent."""
        hosts = list(hosts or self.hosts)
        log.output("*** Ping: testing ping reachability\n")
        sent = received = 0
        for src in hosts:
            dsts = [d for d in hosts if d is not src]
            ok = _reachable(src, dsts, timeout)
            log.output(f"{src.name} -> " + " ".join(d.name if d.name in ok else "X" for d in dsts) + " \n")
            sent += len(dsts)
            received += len(ok)
        lost = 100.0 * (sent - received) / sent if sent else 0.0
        log.output(f"*** Results: {round(lost)}% dropped ({received}/{sent} received)\n")
        return lost

    def pingFull(self, hosts: Optional[Sequence[Node]] = None,
                 timeout: Optional[float] = None) -> List[Tuple[Node, Node, Tuple]]:
        """One ping per ordered pair, one after the other, with its round-trip times:
        [(src, dst, (sent, received, min, avg, max, mdev))], printed as Mininet does."""
        if not hosts:
            hosts = self.hosts
            log.output("*** Ping: testing ping reachability\n")
        results = []
        opts = f"-W {timeout} " if timeout else ""
        for src in hosts:
            log.output(f"{src.name} -> ")
            for dst in hosts:
                if dst is src:
                    continue
                r = _ping_figures(src.cmd(f"ping -c1 {opts}{dst.IP()}"))
                results.append((src, dst, r))
                log.output(f"{dst.name} " if r[1] else "X ")
            log.output("\n")
        log.output("*** Results: \n")
        for src, dst, (sent, received, lo, avg, hi, dev) in results:
            log.output(f" {src}->{dst}: {sent}/{received}, rtt min/avg/max/mdev {lo:0.3f}/{avg:0.3f}/{hi:0.3f}/{dev:0.3f} ms\n")
        return results

    def pingAllFull(self) -> List[Tuple[Node, Node, Tuple]]:
        return self.pingFull()

    def pingPairFull(self) -> List[Tuple[Node, Node, Tuple]]:
        return self.pingFull(self.hosts[:2])

    def pingAll(self, timeout: Optional[float] = None) -> float:
        return self.ping(timeout=timeout)

    def pingPair(self) -> float:
        return self.ping(self.hosts[:2])

    def iperf(self, hosts: Optional[Sequence[Node]] = None, l4Type: str = "TCP",
              udpBw: str = "10M", fmt: Optional[str] = None, seconds: int = 5,
              port: int = 5001) -> List[str]:
        """TCP (or UDP) bandwidth between two hosts with iperf: [server's, client's]."""
        client, server = list(hosts or (self.hosts[0], self.hosts[-1]))
        log.output(f"*** Iperf: testing {l4Type} bandwidth between {client.name} and {server.name} \n")
        udp = " -u" if l4Type == "UDP" else ""
        bw = f" -b {udpBw}" if l4Type == "UDP" else ""
        fmt_opt = f" -f {fmt}" if fmt else ""
        srv = server.popen(f"iperf -p {port} -s{udp}{fmt_opt}".split(), text=True)
        try:
            out = ""
            for _ in range(50):
                out = client.cmd(f"iperf -p {port} -t {seconds} -c {server.IP()}{udp}{bw}{fmt_opt}")
                if "connect failed" not in out:
                    break
            client_bw = _iperf_rate(out)
        finally:
            srv.terminate()
            srv_out = srv.communicate()[0]
        result = [_iperf_rate(srv_out) or client_bw, client_bw]
        log.output(f"*** Results: {result}\n")
        return result

    def runCpuLimitTest(self, cpu: float, duration: int = 5) -> List[float]:
        """Mininet's: busy loops in every host (as many as `cpu` of the machine's cores
        take), and each second the share of all cores each host got, read from its cgroup."""
        log.info(f"*** Testing CPU {cpu * 100:.0f}% bandwidth limit\n")
        cores = os.cpu_count() or 1
        loops: Dict[Node, List[str]] = {}
        for h in self.hosts:
            loops[h] = []
            for _ in range(int(math.ceil(cores * cpu))):
                h.cmd("while true; do a=1; done &")
                loops[h].append(h.cmd("echo $!").strip())
        used = {h: _cpu_ns(h) for h in self.hosts}
        shares: Dict[Node, List[float]] = {h: [] for h in self.hosts}
        for _ in range(duration):
            time.sleep(1)
            for h in self.hosts:
                now = _cpu_ns(h)
                shares[h].append((now - used[h]) / 1e9 / cores * 100)
                used[h] = now
        for h, pids in loops.items():
            for pid in pids:
                h.cmd(f"kill -9 {pid}")
        result = [pct for h in self.hosts for pct in shares[h]]
        log.output(f"*** Results: {result}\n")
        return result

    def iperfUdp(self, udpBw: str = "10M", **kwargs: Any) -> List[str]:
        """UDP bandwidth between the first and last hosts (`mn --test iperfudp`)."""
        return self.iperf(l4Type="UDP", udpBw=udpBw, **kwargs)

    def interact(self) -> None:
        from .cli import CLI
        self.start()
        CLI(self)
        self.stop()


def _cpu_ns(h: Node) -> int:
    """The CPU time host `h`'s cgroup has counted, in nanoseconds."""
    return h.cgroupGet("usage", "cpuacct")


def _end(intf: Intf, impair: Dict[str, str]) -> Any:
    """A link end as nsfleet's topology writes it: a switch's name, or `node:iface` with
    its address, MAC and impairment."""
    if isinstance(intf.node, Switch):
        # The switch's port by Mininet's name (s1-eth1), which Open vSwitch's tools use.
        at = f"{intf.node.name}:{intf.name}"
        return at if not impair else {"at": at, "impair": impair}
    end: Dict[str, Any] = {"at": f"{intf.node.name}:{intf.name}"}
    ip = intf.IP()
    if ip:
        end["addrs"] = [f"{ip}/{intf.prefixLen if intf.prefixLen is not None else 8}"]
    if intf.mac:
        # The MAC a script gave, never one read from the kernel: that would turn every
        # link into a changed one at the next apply.
        end["mac"] = intf.mac
    if impair:
        end["impair"] = impair
    return end


def _raise_nofile() -> None:
    """Each node's shell holds a descriptor here: the soft limit goes up to the hard one."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _mac(n: int) -> str:
    return ":".join(f"{b:02x}" for b in n.to_bytes(6, "big"))


def _reachable(src: Node, dsts: Sequence[Node], timeout: Optional[float]) -> set:
    """The names of `dsts` that answer one ping from `src`, pinged at once, a line of
    the shell's at a time."""
    # As Mininet's: with no timeout, ping's own wait for an unanswered packet (10 s),
    # which a reactive controller's first packet, or a switch still connecting to it, may
    # need. With 1 s, a script's first pingAll lost its first host's pings under load.
    wait = f"-W {max(1, int(timeout))}" if timeout else ""
    # Each line waits for its own pings only: the host may run jobs of its own
    # (`h1 iperf -s &`), which a bare `wait` would wait for. The first line defines the
    # ping function too: no round trip of its own.
    lines = _lines([f'_nsfleet_ping "{wait}" {d.IP()} {d.name} & p="$p $!";' for d in dsts])
    out = "".join(src.cmd((_PING_ONE + "; " if i == 0 else "") + "p=; " + " ".join(line)
                          + " wait $p")
                  for i, line in enumerate(lines))
    if "no-room" in out:
        once("neighbours", _NEIGHBOURS_FULL)
    return set(re.findall(r"ok:(\S+)", out))


# One ping (its options first: a timeout, or none), which says whether it was answered, or
# refused for want of a neighbour entry.
_PING_ONE = ("_nsfleet_ping() { out=$(ping -c1 $1 \"$2\" 2>&1) && echo \"ok:$3\" || "
             "case $out in *'No buffer space'*) echo no-room;; esac; }")

# A pseudo-terminal's line holds 4,095 characters (its canonical mode's buffer): a longer
# command is cut, and the shell waits for the rest of it forever. Room is left for the
# ping function's definition (_PING_ONE) on the first line.
_LINE = 3000


def _lines(words: List[str]) -> Iterator[List[str]]:
    """`words` in groups whose joined length stays below a line."""
    line: List[str] = []
    length = 0
    for w in words:
        if line and length + len(w) + 1 > _LINE:
            yield line
            line, length = [], 0
        line.append(w)
        length += len(w) + 1
    if line:
        yield line


# Mininet raises the host's limits when it starts (its fixLimits); nsfleet changes no
# setting of the host's, and says which one a network outgrew.
_NEIGHBOURS_FULL = (
    "pings failed with \"No buffer space available\": the machine's neighbour (ARP) table is full. "
    "It is one for every namespace, and hosts that all ping each other need an entry per pair "
    "(64 hosts: 4,032), past net.ipv4.neigh.default.gc_thresh3 (1,024 by default). Mininet raises "
    "it on the host when it starts; nsfleet changes no setting of the host's. To raise it: "
    "sysctl -w net.ipv4.neigh.default.gc_thresh1=4096 net.ipv4.neigh.default.gc_thresh2=8192 "
    "net.ipv4.neigh.default.gc_thresh3=16384")


def _ping_figures(out: str) -> Tuple[int, int, float, float, float, float]:
    """(sent, received, min, avg, max, mdev) of one ping's output; (1, 0, 0...) when it
    could not reach or cannot be read."""
    failed = (1, 0, 0.0, 0.0, 0.0, 0.0)
    counts = re.search(r"(\d+) packets transmitted, (\d+)( packets)? received", out)
    rtt = re.search(r"rtt min/avg/max/mdev = ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms", out)
    if re.search(r"[uU]nreachable", out) or counts is None or rtt is None:
        return failed
    lo, avg, hi, dev = (float(x) for x in rtt.groups())
    return int(counts.group(1)), int(counts.group(2)), lo, avg, hi, dev


def _iperf_rate(out: str) -> str:
    rates = re.findall(r"([\d.]+ [KMG]?bits/sec)", out)
    return rates[-1] if rates else ""


class MininetWithControlNet(Mininet):
    """Refused (`mn --innamespace`): controllers in namespaces of a control network of
    their own."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise Unsupported("MininetWithControlNet (mn --innamespace)",
                          "controllers run on the host here, not in a control network's namespaces")

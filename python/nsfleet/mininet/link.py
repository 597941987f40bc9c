"""Mininet's links and interfaces on nsfleet: a `Link` is a veth pair, a `TCLink`'s
parameters (bw in Mbit/s, delay, jitter, loss in percent) are nsfleet impairments on both
of its ends, and an interface's `config(...)` on a running network is `nsfleet impair`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Dict, Optional

from ._unsupported import Unsupported, once

if TYPE_CHECKING:
    from .node import Node


def impairment(bw: Any = None, delay: Any = None, jitter: Any = None, loss: Any = None,
               max_queue_size: Any = None, use_htb: Any = None, use_tbf: Any = None,
               speedup: Any = None, enable_ecn: Any = None, enable_red: Any = None,
               **_: Any) -> Dict[str, str]:
    """TCLink's parameters as an nsfleet impairment (`{"rate": "10mbit", ...}`)."""
    out: Dict[str, str] = {}
    if bw is not None:
        if float(bw) <= 0:
            raise Unsupported(f"TCLink(bw={bw})", "a bandwidth is a positive number of Mbit/s")
        out["rate"] = f"{float(bw):g}mbit"
    if delay is not None:
        out["delay"] = str(delay)
    if jitter is not None:
        out["jitter"] = str(jitter)
    if loss is not None and float(loss) > 0:
        out["loss"] = f"{float(loss):g}%"
    if max_queue_size is not None:
        once("queue", "TCLink max_queue_size is not applied (nsfleet impairments have no queue limit)")
    if enable_ecn or enable_red:
        once("red", "TCLink enable_ecn / enable_red are not applied")
    return out


class Intf:
    """An interface of a node: its name (`h1-eth0`), address and link."""

    def __init__(self, name: str, node: "Node", port: Optional[int] = None,
                 link: Optional["Link"] = None, mac: Optional[str] = None, **params: Any) -> None:
        self.name = name
        self.node = node
        self.link = link
        self.mac = mac
        self._kernel_mac: Optional[str] = None
        self.ip: Optional[str] = None
        self.prefixLen: Optional[int] = None
        self.params = params
        ip = params.get("ip")
        if ip:
            self._set(str(ip))
        node.addIntf(self, port=port)

    def _set(self, ip: str, prefixLen: Optional[int] = None) -> None:
        if "/" in ip:
            ip, plen = ip.split("/", 1)
            prefixLen = int(plen)
        self.ip, self.prefixLen = ip, prefixLen

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    def __str__(self) -> str:
        return self.name

    def IP(self) -> Optional[str]:
        return self.ip

    def MAC(self) -> Optional[str]:
        """The interface's MAC address: the one it was given, else, once the network
        runs, the kernel's (read, and never written into the topology: `mac` stays what
        the script gave)."""
        if self.mac is not None:
            return self.mac
        if self._kernel_mac is None and self.node.net is not None and self.node.net.fleet is not None:
            mac = self.node.cmd(f"cat /sys/class/net/{self.name}/address").strip()
            if re.fullmatch(r"([0-9a-f]{2}:){5}[0-9a-f]{2}", mac):
                self._kernel_mac = mac
        return self._kernel_mac

    def isUp(self, setUp: bool = False) -> bool:
        if setUp:
            self.node.cmd(f"ip link set {self.name} up")
        return "UP" in self.node.cmd(f"ip link show {self.name}")

    def setIP(self, ip: str, prefixLen: Optional[int] = None) -> str:
        """Sets the address (on a running network, in the node too)."""
        self._set(ip, prefixLen)
        if self.node.net is not None and self.node.net.fleet is not None:
            return self.node.cmd(f"ip addr flush dev {self.name} && ip addr add {self.ip}/{self.prefixLen or 8} dev {self.name}")
        return ""

    def config(self, **params: Any) -> Dict[str, Any]:
        """TCIntf's config on a running network: the interface's impairment replaced."""
        imp = impairment(**params)
        net = self.node.net
        if net is not None and net.fleet is not None and imp:
            net.fleet.impair(f"{self.node.name}:{self.name}", rate=imp.get("rate"),
                             delay=imp.get("delay"), jitter=imp.get("jitter"),
                             loss=imp.get("loss"))
        return imp

    def ifconfig(self, *args: str) -> str:
        return self.node.cmd("ip addr show", self.name)

    def delete(self) -> None:
        pass


class TCIntf(Intf):
    """An interface whose link is shaped (see `impairment`)."""


class Link:
    """A veth pair between two nodes (or a node and a switch, or two switches)."""

    def __init__(self, node1: "Node", node2: "Node", port1: Optional[int] = None,
                 port2: Optional[int] = None, intfName1: Optional[str] = None,
                 intfName2: Optional[str] = None, addr1: Optional[str] = None,
                 addr2: Optional[str] = None, intf: Any = Intf, cls1: Any = None,
                 cls2: Any = None, params1: Optional[Dict[str, Any]] = None,
                 params2: Optional[Dict[str, Any]] = None, fast: bool = True,
                 **params: Any) -> None:
        params1 = dict(params1 or {})
        params2 = dict(params2 or {})
        params1.update(params)
        params2.update(params)
        port1 = node1.newPort() if port1 is None else port1
        port2 = node2.newPort() if port2 is None else port2
        name1 = intfName1 or f"{node1.name}-eth{port1}"
        name2 = intfName2 or f"{node2.name}-eth{port2}"
        for n in (name1, name2):
            if len(n) > 15:
                raise Unsupported(f"interface name {n!r}", "Linux interface names are at most 15 characters")
        cls1 = cls1 or intf
        cls2 = cls2 or intf
        self.intf1 = cls1(name1, node=node1, port=port1, link=self, mac=addr1, **params1)
        self.intf2 = cls2(name2, node=node2, port=port2, link=self, mac=addr2, **params2)
        self.params1, self.params2 = params1, params2
        # A TCLink, or links whose interfaces are TCIntf (Mininet(intf=custom(TCIntf,
        # bw=10))): shaped by what their interfaces were given.
        self.impair1 = impairment(**self.intf1.params) if self._shapes(self.intf1) else {}
        self.impair2 = impairment(**self.intf2.params) if self._shapes(self.intf2) else {}

    shaped = False

    def _shapes(self, intf: Intf) -> bool:
        return self.shaped or isinstance(intf, TCIntf)

    def __str__(self) -> str:
        return f"{self.intf1}<->{self.intf2}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self}>"

    def intfs(self) -> "tuple[Intf, Intf]":
        return self.intf1, self.intf2

    def stop(self) -> None:
        pass

    def delete(self) -> None:
        pass

    def status(self) -> str:
        return "(OK OK)"


class TCLink(Link):
    """A link with bandwidth, delay, jitter and loss: nsfleet impairments on both ends."""

    shaped = True

    def __init__(self, node1: "Node", node2: "Node", port1: Optional[int] = None,
                 port2: Optional[int] = None, intfName1: Optional[str] = None,
                 intfName2: Optional[str] = None, addr1: Optional[str] = None,
                 addr2: Optional[str] = None, **params: Any) -> None:
        # Its interfaces are TCIntf whatever the network's are, as Mininet's TCLink's.
        params.pop("intf", None)
        super().__init__(node1, node2, port1=port1, port2=port2, intfName1=intfName1,
                         intfName2=intfName2, addr1=addr1, addr2=addr2, intf=TCIntf,
                         **params)


# Mininet's TCLink for UserSwitch (whose TCIntf it tunes for the reference switch): the
# same impaired veth pair here.
TCULink = TCLink


class OVSLink(Link):
    """Open vSwitch's patch links are veth pairs here."""

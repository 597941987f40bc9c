"""Mininet's topologies: a `Topo` is a description (nodes, switches, links with their
options) that `Mininet(topo=...)` builds. Pure Python, as in Mininet."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple


class Topo:
    """Subclass it and override `build(...)`, calling addHost, addSwitch, addLink."""

    def __init__(self, *args: Any, **params: Any) -> None:
        self._nodes: Dict[str, Dict[str, Any]] = {}
        self._order: List[str] = []
        self._links: List[Tuple[str, str, Dict[str, Any]]] = []
        self.hopts = params.pop("hopts", {})
        self.sopts = params.pop("sopts", {})
        self.lopts = params.pop("lopts", {})
        self.build(*args, **params)

    def build(self, *args: Any, **params: Any) -> None:
        """Adds the topology's nodes and links (override this)."""

    def addNode(self, name: str, **opts: Any) -> str:
        if name in self._nodes:
            raise ValueError(f"node {name!r} added twice")
        self._nodes[name] = opts
        self._order.append(name)
        return name

    def addHost(self, name: str, **opts: Any) -> str:
        return self.addNode(name, **{**self.hopts, **opts})

    def addSwitch(self, name: str, **opts: Any) -> str:
        return self.addNode(name, isSwitch=True, **{**self.sopts, **opts})

    def addLink(self, node1: str, node2: str, port1: Optional[int] = None,
                port2: Optional[int] = None, key: Any = None, **opts: Any) -> Tuple[str, str]:
        for n in (node1, node2):
            if n not in self._nodes:
                raise ValueError(f"link to {n!r}, which is not a node of the topology")
        info = {**self.lopts, **opts}
        if port1 is not None:
            info["port1"] = port1
        if port2 is not None:
            info["port2"] = port2
        self._links.append((node1, node2, info))
        return node1, node2

    def nodes(self, sort: bool = True) -> List[str]:
        return sorted(self._order, key=natural) if sort else list(self._order)

    def isSwitch(self, n: str) -> bool:
        return bool(self._nodes[n].get("isSwitch", False))

    def switches(self, sort: bool = True) -> List[str]:
        return [n for n in self.nodes(sort) if self.isSwitch(n)]

    def hosts(self, sort: bool = True) -> List[str]:
        return [n for n in self.nodes(sort) if not self.isSwitch(n)]

    def links(self, sort: bool = False, withKeys: bool = False, withInfo: bool = False) -> List[Any]:
        out: List[Any] = []
        for i, (a, b, info) in enumerate(self._links):
            if withKeys and withInfo:
                out.append((a, b, i, info))
            elif withInfo:
                out.append((a, b, info))
            elif withKeys:
                out.append((a, b, i))
            else:
                out.append((a, b))
        return sorted(out, key=lambda l: (natural(l[0]), natural(l[1]))) if sort else out

    def nodeInfo(self, name: str) -> Dict[str, Any]:
        return self._nodes[name]

    def setNodeInfo(self, name: str, info: Dict[str, Any]) -> None:
        self._nodes[name] = dict(info)

    def linkInfo(self, src: str, dst: str, key: Any = None) -> Dict[str, Any]:
        for a, b, info in self._links:
            if {a, b} == {src, dst}:
                return info
        raise KeyError((src, dst))


def natural(text: str) -> List[Any]:
    """A sort key with numbers as numbers: h2 before h10."""
    import re
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text)]


class SingleSwitchTopo(Topo):
    """k hosts on one switch."""

    def build(self, k: int = 2, **_opts: Any) -> None:
        self.k = k
        switch = self.addSwitch("s1")
        for h in range(1, k + 1):
            host = self.addHost(f"h{h}")
            self.addLink(host, switch)


class SingleSwitchReversedTopo(Topo):
    """k hosts on one switch, linked in reverse order."""

    def build(self, k: int = 2, **_opts: Any) -> None:
        self.k = k
        switch = self.addSwitch("s1")
        for h in range(1, k + 1):
            host = self.addHost(f"h{h}")
            self.addLink(host, switch, port1=0, port2=k - h + 1)


class MinimalTopo(SingleSwitchTopo):
    """Two hosts on one switch."""

    def build(self, **_opts: Any) -> None:  # type: ignore[override]
        super().build(k=2)


class LinearTopo(Topo):
    """k switches in a chain, n hosts on each."""

    def build(self, k: int = 2, n: int = 1, **_opts: Any) -> None:
        self.k, self.n = k, n
        last = None
        for i in range(1, k + 1):
            switch = self.addSwitch(f"s{i}")
            for j in range(1, n + 1):
                self.addLink(self.addHost(f"h{i}" if n == 1 else f"h{j}s{i}"), switch)
            if last:
                self.addLink(switch, last)
            last = switch

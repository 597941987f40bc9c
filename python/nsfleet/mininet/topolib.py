"""Mininet's library topologies: trees."""

from __future__ import annotations

from typing import Any

from .topo import Topo


class TreeTopo(Topo):
    """A tree of switches of the given depth and fanout, hosts at the leaves; hosts h1..N
    and switches s1..M numbered as Mininet numbers them."""

    def build(self, depth: int = 1, fanout: int = 2, **_opts: Any) -> None:  # type: ignore[override]
        self.hostNum = 1
        self.switchNum = 1
        self.addTree(depth, fanout)

    def addTree(self, depth: int, fanout: int) -> str:
        if depth > 0:
            node = self.addSwitch(f"s{self.switchNum}")
            self.switchNum += 1
            for _ in range(fanout):
                self.addLink(node, self.addTree(depth - 1, fanout))
        else:
            node = self.addHost(f"h{self.hostNum}")
            self.hostNum += 1
        return node


def TreeNet(depth: int = 1, fanout: int = 2, **kwargs: Any) -> Any:
    """A Mininet network of a TreeTopo."""
    from .net import Mininet
    return Mininet(TreeTopo(depth, fanout), **kwargs)


class TorusTopo(Topo):
    def __init__(self, *args: Any, **params: Any) -> None:
        from ._unsupported import Unsupported
        raise Unsupported("TorusTopo", "its loops need spanning tree, which nsfleet's bridges do not run")

"""Mininet's node library: `LinuxBridge` (a Linux bridge) and `NAT` (refused: nsfleet
makes no NAT to the host's network from a Mininet script)."""

from __future__ import annotations

from typing import Any

from ._unsupported import Unsupported
from .node import LinuxBridge, Node

__all__ = ["LinuxBridge", "NAT"]


class NAT(Node):
    """Refused, as `Mininet.addNAT` is."""

    def __init__(self, name: str, *args: Any, **params: Any) -> None:
        raise Unsupported("NAT", "a NAT to the host's network is not made (use a host link in a topology file)")

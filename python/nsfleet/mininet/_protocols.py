"""What a node sees of its interfaces, their links and its network, as protocols:
`node.py` is typed with these, so that it imports neither `link.py` nor `net.py`, which
import it (their `Intf`, `Link` and `Mininet` have these shapes). Types only: nothing here
runs, and nothing here imports another module of the package."""

from __future__ import annotations

from typing import Any, List, Optional, Protocol

from ..fleet import Fleet


class IntfLike(Protocol):
    """An interface (`link.Intf`), as its node and the node's callers use it."""

    name: str
    ip: Optional[str]
    mac: Optional[str]

    @property
    def node(self) -> object: ...

    @property
    def link(self) -> Optional[LinkLike]: ...

    def _set(self, ip: str, prefixLen: Optional[int] = None) -> None: ...

    def IP(self) -> Optional[str]: ...

    def MAC(self) -> Optional[str]: ...

    def setIP(self, ip: str, prefixLen: Optional[int] = None) -> str: ...


class LinkLike(Protocol):
    """A link (`link.Link`): its two ends."""

    @property
    def intf1(self) -> IntfLike: ...

    @property
    def intf2(self) -> IntfLike: ...


class NetLike(Protocol):
    """The network a node is in (`net.Mininet`): its fleet once started, and how a switch
    is connected to its controllers."""

    @property
    def fleet(self) -> Optional[Fleet]: ...

    def connect(self, switch: Any, controllers: List[Any]) -> None: ...

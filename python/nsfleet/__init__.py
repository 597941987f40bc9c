"""nsfleet from Python: fleets of Linux network namespaces at the kernel's own pace.

    import nsfleet
    with nsfleet.up("examples/hosts.toml") as fleet:
        print(fleet.node("web1").cmd("ip -br addr"))
        fleet.link("web1:eth0").down()
    print(fleet.down_report)

Needs root, as nsfleet does. The `nsfleet` executable comes with this package.
"""

from .errors import ExpectationFailed, NsfleetError, TopologyError
from .fleet import (DownReport, Fleet, FleetStatus, Impairment, Link, LinkEnd, LinkState,
                    Node, NodeStatus, Process, UpReport, up)

__all__ = [
    "DownReport", "ExpectationFailed", "Fleet", "FleetStatus", "Impairment", "Link",
    "LinkEnd", "LinkState",
    "Node", "NodeStatus", "NsfleetError", "Process", "TopologyError", "UpReport", "up",
]

"""Mininet's API on nsfleet: `from nsfleet.mininet.net import Mininet` in place of
`from mininet.net import Mininet`, or a script unchanged with `nsfleet mn SCRIPT.py`.

Hosts and routers are nsfleet nodes, switches are Linux bridges in namespaces of their
own (Open vSwitch classes are mapped to them, which is said once), links are veth pairs,
and TCLink's parameters are nsfleet impairments. A network is built with one `nsfleet
up` when it starts. What nsfleet does not have (an OpenFlow controller elsewhere, xterm,
CPU-limited hosts) is refused before the network is built, naming the script's line.
"""

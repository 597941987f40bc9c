"""Mininet's CLI, minimal: `h1 ping h2` (node names become their addresses), `pingall`,
`nodes`, `net`, `intfs`, `links`, `dump`, `iperf [h1 h2]`, `link s1 h1 down|up`, `sh CMD`,
`py EXPR`, `px STATEMENT`, `help`, `exit`. Reads standard input (or `script=`); ends at
EOF."""

from __future__ import annotations

import shlex
import sys
from typing import IO, Any, Optional

from .node import Switch


class CLI:
    prompt = "mininet> "

    def __init__(self, mininet: Any, stdin: IO[str] = sys.stdin, script: Optional[str] = None,
                 **_: Any) -> None:
        self.mn = mininet
        # What `py` and `px` see: the network, its nodes, and what `px` defined before.
        self.locals: dict = {"net": mininet}
        from . import log
        log.info("*** Starting CLI:\n")
        if script is not None:
            with open(script) as f:
                for line in f:
                    if not self.onecmd(line):
                        return
            return
        self.run(stdin)

    def run(self, stdin: IO[str]) -> None:
        interactive = stdin.isatty()
        while True:
            if interactive:
                sys.stdout.write(self.prompt)
                sys.stdout.flush()
            line = stdin.readline()
            if not line:
                if interactive:
                    print()
                return
            if not self.onecmd(line):
                return

    def onecmd(self, line: str) -> bool:
        """Runs one line; false once the CLI should end."""
        words = line.strip().split()
        if not words or words[0].startswith("#"):
            return True
        first, rest = words[0], words[1:]
        if first in ("exit", "quit", "EOF"):
            return False
        handler = getattr(self, f"do_{first}", None)
        if handler is not None:
            handler(rest)
        elif first in self.mn:
            self.node_command(first, rest)
        else:
            print(f"*** Unknown command: {line.strip()}")
        return True

    def node_command(self, name: str, words: list) -> None:
        node = self.mn[name]
        args = [self.mn[w].IP() if w in self.mn and not isinstance(self.mn[w], Switch)
                and hasattr(self.mn[w], "IP") else w for w in words]
        sys.stdout.write(node.cmd(" ".join(args)))
        sys.stdout.flush()

    def do_help(self, _: list) -> None:
        print("\nDocumented commands:\n" + __doc__)

    def do_nodes(self, _: list) -> None:
        print("available nodes are: \n" + " ".join(sorted(self.mn.keys())))

    def do_net(self, _: list) -> None:
        """Each node's interfaces and what they link to, as Mininet's `net` prints them
        (a switch's `lo` first, controllers last)."""
        for node in list(self.mn.hosts) + list(self.mn.switches):
            ends = ["lo: "] if isinstance(node, Switch) else []
            for intf in node.intfList():
                link = intf.link
                other = link.intf2 if link.intf1 is intf else link.intf1
                ends.append(f"{intf.name}:{other.name}")
            print(f"{node.name} " + " ".join(ends))
        for c in self.mn.controllers:
            print(c.name)

    def do_intfs(self, _: list) -> None:
        """Each node's interfaces, as Mininet's `intfs` lists them (a switch's `lo` first)."""
        for node in list(self.mn.hosts) + list(self.mn.switches):
            names = (["lo"] if isinstance(node, Switch) else []) + node.intfNames()
            print(f"{node.name}: {','.join(names)}")
        for c in self.mn.controllers:
            print(f"{c.name}: ")

    def do_links(self, _: list) -> None:
        for link in self.mn.links:
            print(f"{link} {link.status()}")

    def do_dump(self, _: list) -> None:
        for node in list(self.mn.hosts) + list(self.mn.switches) + list(self.mn.controllers):
            print(repr(node))

    def do_pingall(self, _: list) -> None:
        self.mn.pingAll()

    def do_iperf(self, args: list) -> None:
        hosts = [self.mn[a] for a in args] if len(args) == 2 else None
        self.mn.iperf(hosts)

    def do_link(self, args: list) -> None:
        if len(args) != 3:
            print("usage: link end1 end2 [up down]")
            return
        self.mn.configLinkStatus(*args)

    def do_sh(self, args: list) -> None:
        """A command on the host, as Mininet's `sh`; but Open vSwitch's tools, which on
        Mininet reach the host's Open vSwitch, go to the switch they name: each switch
        runs its own (`sh ovs-vsctl get-controller s1` runs in s1)."""
        import subprocess
        switch = _ovs_switch(self.mn, args)
        if switch is not None:
            print(switch.cmd(*args), end="")
            return
        subprocess.run(" ".join(args), shell=True)

    def do_py(self, args: list) -> None:
        """Evaluates a Python expression, with the network (`net`) and its nodes by name,
        and prints what it gives (nothing for None), as Mininet's `py`."""
        try:
            result = eval(" ".join(args), globals(), self.getLocals())
        except Exception as e:
            print(e)
            return
        if result is not None:
            print(result if isinstance(result, str) else repr(result))

    def do_px(self, args: list) -> None:
        """Runs a Python statement; what it defines stays for the next `py` and `px`."""
        try:
            exec(" ".join(args), globals(), self.getLocals())
        except Exception as e:
            print(e)

    def getLocals(self) -> dict:
        self.locals.update({k: self.mn[k] for k in self.mn})
        return self.locals

    def do_noecho(self, args: list) -> None:
        if args and args[0] in self.mn:
            self.node_command(args[0], args[1:])


_OVS_TOOLS = ("ovs-vsctl", "ovs-ofctl", "ovs-appctl", "ovs-dpctl")


def _ovs_switch(net: Any, args: list) -> Any:
    """The Open vSwitch switch of `net` an Open vSwitch command names, if it is one."""
    if not args or args[0] not in _OVS_TOOLS:
        return None
    from .node import OVSSwitch
    named = [net[a] for a in args[1:] if a in net and isinstance(net[a], OVSSwitch)]
    switches = [s for s in net.switches if isinstance(s, OVSSwitch)]
    if named:
        return named[0]
    return switches[0] if len(switches) == 1 else None

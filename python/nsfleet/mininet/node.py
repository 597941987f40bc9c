"""Mininet's nodes on nsfleet. A `Host` or `Node` is an nsfleet node; a switch (any of
Mininet's switch classes) is a Linux bridge in a namespace of its own. Each node's
commands go to one shell kept in the node, as Mininet's do (`cmd`, `sendCmd`,
`waitOutput`, `monitor`), started the first time the node is asked to run something.
Controllers have nothing to do with Linux bridges; one elsewhere (`RemoteController`) is
refused."""

from __future__ import annotations

import os
import pty
import select
import subprocess
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from .. import _binary
from ._unsupported import Unsupported, once

if TYPE_CHECKING:
    from .link import Intf
    from .net import Mininet

# The prompt of every node's shell: a command's output ends where it appears.
_SENTINEL = chr(127)


class Node:
    """A node: a network namespace of the fleet, with a shell in it once started."""

    portBase = 0
    outToNode: Dict[int, "Node"] = {}
    inToNode: Dict[int, "Node"] = {}

    def __init__(self, name: str, inNamespace: bool = True, **params: Any) -> None:
        self.name = name
        self.inNamespace = inNamespace
        self.params = params
        self.intfs: Dict[int, "Intf"] = {}
        self.ports: Dict["Intf", int] = {}
        self.nameToIntf: Dict[str, "Intf"] = {}
        self.net: Optional["Mininet"] = None
        self.shell: Optional[subprocess.Popen] = None
        self._out: Any = None
        self.master: Optional[int] = None
        self.waiting = False
        self.lastCmd: Optional[str] = None
        # Commands given before the network exists (Mininet's nodes exist from their
        # construction): run, in order, once it is up.
        self.deferred: List[str] = []

    def __repr__(self) -> str:
        pid = self.shell.pid if self.shell is not None else None
        return f"<{type(self).__name__} {self.name}: {','.join(self.intfNames())} pid={pid}>"

    # The shell is started the first time it is needed: a script that never talks to a
    # node does not pay for a process in it (Mininet starts every node's at once).
    @property
    def stdout(self) -> Any:
        self.startShell()
        return self._out

    stdin = stdout

    @property
    def pid(self) -> int:
        self.startShell()
        assert self.shell is not None
        return self.shell.pid

    def __str__(self) -> str:
        return self.name

    # -- interfaces (known before the network is built) --
    def newPort(self) -> int:
        return max(self.intfs.keys(), default=self.portBase - 1) + 1

    def addIntf(self, intf: "Intf", port: Optional[int] = None) -> None:
        port = self.newPort() if port is None else port
        self.intfs[port] = intf
        self.ports[intf] = port
        self.nameToIntf[intf.name] = intf
        # The node's own address is its default (first) interface's, as Mininet sets it.
        if intf.ip is None and self.defaultIntf() is intf and self.params.get("ip"):
            intf._set(str(self.params["ip"]))

    def intfList(self) -> List["Intf"]:
        return [self.intfs[p] for p in sorted(self.intfs)]

    def intfNames(self) -> List[str]:
        return [i.name for i in self.intfList()]

    def defaultIntf(self) -> Optional["Intf"]:
        ports = sorted(self.intfs)
        return self.intfs[ports[0]] if ports else None

    def intf(self, intf: Any = None) -> Optional["Intf"]:
        if intf is None:
            return self.defaultIntf()
        if isinstance(intf, str):
            return self.nameToIntf.get(intf)
        return intf

    def connectionsTo(self, node: "Node") -> List[tuple]:
        out = []
        for intf in self.intfList():
            link = intf.link
            if link is None:
                continue
            other = link.intf2 if link.intf1 is intf else link.intf1
            if other.node is node:
                out.append((intf, other))
        return out

    def IP(self, intf: Any = None) -> Optional[str]:
        i = self.intf(intf)
        return i.IP() if i is not None else None

    def MAC(self, intf: Any = None) -> Optional[str]:
        i = self.intf(intf)
        return i.MAC() if i is not None else None

    # -- hooks Mininet calls; subclasses (LinuxRouter...) override them --
    def config(self, **params: Any) -> Dict[str, Any]:
        """Called once the network is up, with the node's parameters: its addresses and
        default route are made with the fleet; a subclass adds its own commands."""
        return {}

    def configDefault(self, **moreParams: Any) -> None:
        self.params.update(moreParams)
        self.config(**self.params)

    def terminate(self) -> None:
        """Ends the node's shell (the node itself goes with the fleet)."""
        if self.shell is not None:
            Node.outToNode.pop(self.master or -1, None)
            Node.inToNode.pop(self.master or -1, None)
            # An interactive bash ignores SIGTERM: it is asked to exit, and killed if a
            # command keeps it busy.
            try:
                self.write("\nexit\n")
                self.shell.wait(timeout=1)
            except (OSError, subprocess.TimeoutExpired):
                self.shell.kill()
                self.shell.wait()
            if self.master is not None:
                os.close(self.master)
            self.shell = self.master = self._out = None

    def stop(self, deleteIntfs: bool = False) -> None:
        self.terminate()

    # -- the shell --
    def runDeferred(self) -> None:
        """Runs what was asked of the node before the network existed, in one command."""
        if self.deferred:
            commands, self.deferred = self.deferred, []
            self.cmd("; ".join(commands))

    def _fleet(self) -> str:
        if self.net is None or self.net.fleet is None:
            raise RuntimeError(f"{self.name}: the network is not started (net.start())")
        return self.net.fleet.name

    def startShell(self) -> None:
        """The node's shell, as Mininet's: bash without rc files, its prompt the sentinel,
        on a pseudo-terminal so that programs flush their lines."""
        if self.shell is not None:
            return
        master, slave = pty.openpty()
        argv = [_binary.executable(), "exec", self._fleet(), self.name, "--", "env",
                f"PS1={_SENTINEL}", "bash", "--norc", "--noediting", "-is",
                f"mininet:{self.name}"]
        self.shell = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave,
                                      close_fds=True, start_new_session=True)
        os.close(slave)
        self.master = master
        self._out = os.fdopen(master, "r", closefd=False)
        Node.outToNode[master] = self
        Node.inToNode[master] = self
        self.waiting = True
        self.waitOutput()
        self.cmd("unset HISTFILE; stty -echo; set +m")

    def write(self, data: str) -> None:
        assert self.master is not None
        os.write(self.master, data.encode())

    def read(self, size: int = 1024, timeoutms: Optional[int] = None) -> str:
        assert self.master is not None
        # poll, not select: a network of 1,024 hosts has shells past descriptor 1,023.
        poller = select.poll()
        poller.register(self.master, select.POLLIN)
        if not poller.poll(None if timeoutms is None else timeoutms):
            return ""
        try:
            return os.read(self.master, size).decode(errors="replace")
        except OSError:
            return ""

    def sendCmd(self, *args: Any, **kwargs: Any) -> None:
        """Sends a command to the node's shell without waiting for it."""
        self.startShell()
        if self.waiting:
            raise RuntimeError(f"{self.name}: a command is still running (waitOutput())")
        cmd = " ".join(str(a) for a in args) if len(args) != 1 or not isinstance(args[0], list) \
            else " ".join(args[0])
        if cmd.rstrip().endswith("&"):
            cmd += " printf '\\001%d\\012' $! "
        self.lastCmd = cmd
        self.write(cmd + "\n")
        self.waiting = True

    def monitor(self, timeoutms: Optional[int] = None, findPid: bool = True) -> str:
        """Whatever the shell has written so far (up to `timeoutms`), without the
        sentinel; `waiting` becomes false once the command has finished."""
        data = self.read(1024, timeoutms)
        if _SENTINEL in data:
            self.waiting = False
            data = data.replace(_SENTINEL, "")
        if findPid and "\001" in data:
            head, _, rest = data.partition("\001")
            num, _, tail = rest.partition("\n")
            if num.strip().isdigit():
                self.lastPid = int(num)
            data = head + tail
        return data

    def waitOutput(self, verbose: bool = False, findPid: bool = True) -> str:
        """The output of the command sent, once it has finished."""
        out = []
        while self.waiting:
            chunk = self.monitor(findPid=findPid)
            if verbose:
                print(chunk, end="")
            out.append(chunk)
            if self.shell is not None and self.shell.poll() is not None and not chunk:
                break
        return "".join(out).replace("\r\n", "\n")

    def cmd(self, *args: Any, **kwargs: Any) -> str:
        """Runs a command in the node's shell and returns its output (Mininet's `cmd`).
        Before the network is started, the command is kept and run once it is up (its
        output is then not returned)."""
        verbose = kwargs.pop("verbose", False)
        if self.net is None or self.net.fleet is None:
            once("deferred", "commands given to nodes before start() are run once the network is up")
            self.deferred.append(" ".join(str(a) for a in args))
            return ""
        self.sendCmd(*args, **kwargs)
        return self.waitOutput(verbose)

    def cmdPrint(self, *args: Any) -> str:
        return self.cmd(*args, verbose=True)

    def popen(self, *args: Any, **kwargs: Any) -> subprocess.Popen:
        """A process in the node, outside its shell (Mininet's `popen`)."""
        argv: List[str] = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) \
            else (args[0].split() if len(args) == 1 else [str(a) for a in args])
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        kwargs.pop("mncmd", None)
        return subprocess.Popen([_binary.executable(), "exec", self._fleet(), self.name, "--",
                                 *argv], **kwargs)

    def pexec(self, *args: Any, **kwargs: Any) -> "tuple[str, str, int]":
        """Runs a process in the node and returns (out, err, exit status)."""
        kwargs.setdefault("text", True)
        p = self.popen(*args, **kwargs)
        out, err = p.communicate()
        return out, err, p.returncode

    def setIP(self, ip: str, prefixLen: int = 8, intf: Any = None, **_: Any) -> str:
        i = self.intf(intf)
        assert i is not None
        return i.setIP(ip, prefixLen)

    def setDefaultRoute(self, intf: Any = None) -> str:
        if isinstance(intf, str) and " " in intf:
            return self.cmd(f"ip route replace default {intf}")
        i = self.intf(intf)
        assert i is not None
        return self.cmd(f"ip route replace default dev {i.name}")

    def setARP(self, ip: str, mac: str) -> str:
        return self.cmd(f"arp -s {ip} {mac}")


class Host(Node):
    """A host: a node with its default interface's address."""


class CPULimitedHost(Host):
    """Refused: a CPU share per host needs cgroups per node, which nsfleet does not set."""

    def __init__(self, name: str, *args: Any, **params: Any) -> None:
        raise Unsupported("CPULimitedHost", "nodes are not placed in CPU-limited cgroups")


class Switch(Node):
    """A switch: a Linux bridge in a namespace of its own. Its ports are numbered from 1."""

    portBase = 1
    dpidLen = 16

    def __init__(self, name: str, dpid: Optional[str] = None, **params: Any) -> None:
        super().__init__(name, **params)
        self.dpid = dpid

    def start(self, controllers: List[Any]) -> None:
        pass

    def connected(self) -> bool:
        return True

    def defaultIntf(self) -> Optional["Intf"]:
        return None


class LinuxBridge(Switch):
    """Mininet's LinuxBridge: what every switch is here."""

    def __init__(self, name: str, stp: bool = False, prio: Optional[int] = None, **params: Any) -> None:
        if stp:
            raise Unsupported("LinuxBridge(stp=True)", "switches are bridges without spanning tree")
        super().__init__(name, **params)


class OVSSwitch(LinuxBridge):
    """Open vSwitch, mapped to a Linux bridge (a learning switch, as OVS with Mininet's
    default controller behaves); said once."""

    def __init__(self, name: str, **params: Any) -> None:
        once("ovs", f"{type(self).__name__} is a Linux bridge on nsfleet (a learning switch; no OpenFlow)")
        params.pop("failMode", None)
        params.pop("datapath", None)
        params.pop("protocols", None)
        params.pop("inband", None)
        super().__init__(name, **params)


OVSKernelSwitch = OVSSwitch
OVSBridge = OVSSwitch
UserSwitch = OVSSwitch
IVSSwitch = OVSSwitch
OVSLegacyKernelSwitch = OVSSwitch


class Controller:
    """Mininet's controllers drive OpenFlow switches; Linux bridges learn on their own,
    so a local controller has nothing to do here and is not started (said once)."""

    def __init__(self, name: str = "c0", *args: Any, **params: Any) -> None:
        once("controller", f"{type(self).__name__} {name}: switches are Linux bridges, which need no controller; not started")
        self.name = name
        self.params = params

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def checkListening(self) -> None:
        pass

    def IP(self) -> str:
        return "127.0.0.1"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


OVSController = Controller
NOX = Controller
Ryu = Controller


def DefaultController(name: str = "c0", **params: Any) -> Controller:
    return Controller(name, **params)


class RemoteController(Controller):
    """Refused: an OpenFlow controller elsewhere needs OpenFlow switches."""

    def __init__(self, name: str = "c0", *args: Any, **params: Any) -> None:
        raise Unsupported("RemoteController", "switches are Linux bridges and speak no OpenFlow")


class NullController(Controller):
    def __init__(self, name: str = "c0", *args: Any, **params: Any) -> None:
        self.name = name
        self.params = params

"""Mininet's nodes on nsfleet. A `Host` or `Node` is an nsfleet node; a switch is a node
of its own: Open vSwitch's classes are nsfleet switches of kind "ovs" (each with its own
Open vSwitch), `LinuxBridge` a Linux bridge. Each node's commands go to one shell kept in
the node, as Mininet's do (`cmd`, `sendCmd`, `waitOutput`, `monitor`), started the first
time the node is asked to run something. `Controller` runs Open vSwitch's test controller
on the host, as Mininet does; `RemoteController` is one the host reaches."""

from __future__ import annotations

import concurrent.futures
import ctypes
import itertools
import os
import pty
import queue
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from .. import _binary
from . import log
from ._protocols import IntfLike, NetLike
from ..errors import NsfleetError
from ._unsupported import Unsupported, once

# What of the script's environment a node's shell and processes get, as Mininet's hosts
# inherit it: where commands are found and how Python and the locale behave. Not the
# rest: a secret in the script's environment stays out of its nodes.
SHELL_ENV = frozenset({"PATH", "PYTHONPATH", "VIRTUAL_ENV", "LANG", "LANGUAGE", "TZ", "TERM"})

# The prompt of every node's shell: a command's output ends where it appears.
_SENTINEL = chr(127)


class Node:
    """A node: a network namespace of the fleet, with a shell in it once started."""

    portBase = 0
    outToNode: Dict[int, "Node"] = {}
    inToNode: Dict[int, "Node"] = {}

    def __init__(self, name: str, inNamespace: bool = True, **params: Any) -> None:
        if not inNamespace and not isinstance(self, Switch):
            raise Unsupported(f"{type(self).__name__}({name!r}, inNamespace=False)",
                              "a node outside a namespace is the host itself, which nsfleet never drives")
        self.name = name
        self.inNamespace = inNamespace
        self.params = params
        self.privateDirs = params.get("privateDirs") or []
        # Mininet's privateDirs as nsfleet's node keys (dirs, binds).
        self.fleetDirs: Dict[str, List[str]] = _private_dirs(name, self.privateDirs)
        self.intfs: Dict[int, IntfLike] = {}
        self.ports: Dict[IntfLike, int] = {}
        self.nameToIntf: Dict[str, IntfLike] = {}
        self.net: Optional[NetLike] = None
        self.shell: Optional[subprocess.Popen] = None
        self._out: Any = None
        self._master: Optional[int] = None
        self._slave: Optional[int] = None
        self.waiting = False
        self.lastCmd: Optional[str] = None
        # Commands given before the network exists (Mininet's nodes exist from their
        # construction): run, in order, once it is up.
        self.deferred: List[str] = []

    @property
    def master(self) -> Optional[int]:
        """The pseudo-terminal's master end (the shell is started for it, as Mininet's
        exists from the node's creation)."""
        if self.shell is None and self.net is not None and self.net.fleet is not None:
            self.startShell()
        return self._master

    @property
    def slave(self) -> Optional[int]:
        """The pseudo-terminal's slave end, the shell's standard streams."""
        if self.shell is None and self.net is not None and self.net.fleet is not None:
            self.startShell()
        return self._slave

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

    def addIntf(self, intf: IntfLike, port: Optional[int] = None) -> None:
        port = self.newPort() if port is None else port
        self.intfs[port] = intf
        self.ports[intf] = port
        self.nameToIntf[intf.name] = intf
        # The node's own addresses are its default (first) interface's, as Mininet sets
        # them (`mac` from autoSetMacs, `mn --mac`).
        if self.defaultIntf() is intf:
            if intf.ip is None and self.params.get("ip"):
                intf._set(str(self.params["ip"]))
            if intf.mac is None and self.params.get("mac"):
                intf.mac = str(self.params["mac"])

    def intfList(self) -> List[IntfLike]:
        return [self.intfs[p] for p in sorted(self.intfs)]

    def intfNames(self) -> List[str]:
        return [i.name for i in self.intfList()]

    def defaultIntf(self) -> Optional[IntfLike]:
        ports = sorted(self.intfs)
        return self.intfs[ports[0]] if ports else None

    def intf(self, intf: Any = None) -> Optional[IntfLike]:
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

    def fleetLimits(self) -> Dict[str, Any]:
        """The node's limits as the topology's keys (`CPULimitedHost`'s CPU share)."""
        return {}

    def cgroupGet(self, param: str, resource: str = "cpu") -> int:
        """A number of the node's cgroup (every node that runs software has one, as
        Mininet's CPULimitedHost), in cgroup v1's names (``cfs_quota_us``,
        ``usage`` of ``cpuacct``), read from v2's files where the host has v2."""
        folder, v2 = _cgroup_of(self.pid, resource)
        if not v2:
            return int((folder / f"{resource}.{param}").read_text().split()[0])
        if (resource, param) == ("cpuacct", "usage"):
            return 1000 * _keyed(folder / "cpu.stat", "usage_usec")
        if resource == "cpu" and param in ("cfs_quota_us", "cfs_period_us"):
            quota, period = (folder / "cpu.max").read_text().split()
            if param == "cfs_period_us":
                return int(period)
            return -1 if quota == "max" else int(quota)
        return int((folder / f"{resource}.{param}").read_text().split()[0])

    def cgroupSet(self, param: str, value: Any, resource: str = "cpu") -> Any:
        """Writes a setting of the node's cgroup (v1's names, as ``cgroupGet``)."""
        folder, v2 = _cgroup_of(self.pid, resource)
        if v2 and resource == "cpu" and param in ("cfs_quota_us", "cfs_period_us"):
            quota, period = (folder / "cpu.max").read_text().split()
            if param == "cfs_period_us":
                period = str(value)
            else:
                quota = "max" if int(value) < 0 else str(value)
            (folder / "cpu.max").write_text(f"{quota} {period}")
        else:
            (folder / f"{resource}.{param}").write_text(str(value))
        return value


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
            Node.outToNode.pop(self._master or -1, None)
            Node.inToNode.pop(self._master or -1, None)
            # An interactive bash ignores SIGTERM: it is asked to exit, and killed if a
            # command keeps it busy.
            try:
                self.write("\nexit\n")
                self.shell.wait(timeout=1)
            except (OSError, subprocess.TimeoutExpired):
                self.shell.kill()
                self.shell.wait()
            for fd in (self._master, self._slave):
                if fd is not None:
                    os.close(fd)
            self.shell = self._master = self._slave = self._out = None

    def delIntf(self, intf: IntfLike) -> None:
        """Forgets one of the node's interfaces (its link is gone)."""
        port = self.ports.pop(intf, None)
        if port is not None:
            self.intfs.pop(port, None)
        self.nameToIntf.pop(intf.name, None)

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

    def _in_node(self, argv: List[str], env: Optional[Dict[str, str]] = None) -> List[str]:
        """`nsfleet exec` of `argv` in the node, with what of the script's environment
        (`env`, else its own) decides how commands run there (see `SHELL_ENV`): `exec`
        gives a node's processes the node's environment only."""
        given = os.environ if env is None else env
        kept = [f"{k}={v}" for k, v in given.items()
                if k in SHELL_ENV or k.startswith("LC_")]
        return [_binary.executable(), "exec", self._fleet(), self.name, "--", "env", *kept, *argv]

    def startShell(self) -> None:
        """The node's shell, as Mininet's: bash without rc files, its prompt the sentinel,
        on a pseudo-terminal so that programs flush their lines."""
        if self.shell is not None:
            return
        master, slave = pty.openpty()
        argv = self._in_node([f"PS1={_SENTINEL}", "bash", "--norc", "--noediting", "-is",
                              f"mininet:{self.name}"])
        self.shell = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave,
                                      close_fds=True, start_new_session=True)
        # The terminal's two descriptors, both kept open as Mininet keeps them (`read`
        # therefore looks at the shell itself to see it end).
        self._slave = slave
        self._master = master
        self._out = os.fdopen(master, "r", closefd=False)
        Node.outToNode[master] = self
        Node.inToNode[master] = self
        self.waiting = True
        self.waitOutput()
        # In the script's working folder, as Mininet's shells start, where the node can
        # reach it (see `script_reach`); else at the node's root.
        self.cmd(f"unset HISTFILE; stty -echo; set +m; cd {shlex.quote(os.getcwd())} 2>/dev/null")

    def write(self, data: str) -> None:
        assert self._master is not None
        os.write(self._master, data.encode())

    def read(self, size: int = 1024, timeoutms: Optional[int] = None) -> str:
        """What the shell wrote, up to `size`; "" once `timeoutms` passed with nothing, or
        once the shell has ended (waited for without a timeout)."""
        assert self._master is not None
        # poll, not select: a network of 1,024 hosts has shells past descriptor 1,023.
        poller = select.poll()
        poller.register(self._master, select.POLLIN)
        while not poller.poll(1000 if timeoutms is None else timeoutms):
            if timeoutms is not None or self.shell is None or self.shell.poll() is not None:
                return ""
        try:
            return os.read(self._master, size).decode(errors="replace")
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
        # Mininet says what it runs, when asked to be verbose (cmdPrint).
        (log.info if verbose else log.debug)(f"*** {self.name} : {args}\n")
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
        return subprocess.Popen(self._in_node(argv, kwargs.get("env")), **kwargs)

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


#: The CFS period a fleet's ``cpu`` limit is made with (the kernel's and Docker's).
KERNEL_PERIOD_US = 100000


class CPULimitedHost(Host):
    """Mininet's CPU-limited host: its share of the machine's CPU time (``cpu``, a
    fraction of all its cores, as Mininet's) and the cores it may run on (``cores``), held
    by the node's own cgroup: the topology's ``cpu`` and ``cpuset``. ``sched='rt'`` gets
    the same share as CFS bandwidth: a confined node's processes may not be given
    real-time priority on the host. The fleet is made with the kernel's period (100 ms);
    another ``period_us`` is written with the share as the network starts (``config``)."""

    def __init__(self, name: str, sched: str = "cfs", period_us: int = KERNEL_PERIOD_US, **params: Any) -> None:
        if sched not in ("cfs", "rt"):
            raise Unsupported(f"CPULimitedHost(sched={sched!r})", "the schedulers are 'cfs' and 'rt'")
        if sched == "rt":
            once("rt", "CPULimitedHost(sched='rt'): the host's share of CPU time is held as CFS bandwidth (a confined node gets no real-time priority)")
        super().__init__(name, **params)
        self.sched = sched
        self.period_us = period_us
        self.cpu = float(params.get("cpu", -1))
        self.cores = params.get("cores")

    def fleetLimits(self) -> Dict[str, Any]:
        """The node's limits as the topology's keys."""
        out: Dict[str, Any] = {}
        if self.cpu > 0:
            # Mininet's fraction is of every core; the kernel's least quota is 1 ms.
            out["cpu"] = max(round(self.cpu * _cores(), 3), 0.01)
        if self.cores is not None:
            cores = self.cores
            out["cpuset"] = ",".join(str(c) for c in cores) if isinstance(cores, list) else str(cores)
        return out

    def config(self, cpu: float = -1, cores: Any = None, **params: Any) -> Dict[str, Any]:
        """Mininet's: the node's CPU share and cores, held since the network was made
        (``cpu`` and ``cores`` are the topology's); a different one changes its cgroup."""
        r = super().config(**params)
        if cpu != self.cpu or (cpu > 0 and self.period_us != KERNEL_PERIOD_US):
            self.setCPUFrac(cpu)
        if cores is not None and cores != self.cores:
            self.setCPUs(cores)
        return r

    def setCPUFrac(self, f: float, sched: Optional[str] = None) -> None:
        """The node's share of all the machine's cores' time; -1: no limit."""
        self.cpu = float(f)
        if self.net is None or self.net.fleet is None:
            return
        quota = -1 if f <= 0 else max(int(self.period_us * f * _cores()), 1000)
        self.cgroupSet("cfs_period_us", self.period_us)
        self.cgroupSet("cfs_quota_us", quota)
        log.info(f"(cfs {quota}/{self.period_us}us) ")

    def setCPUs(self, cores: Any, mems: int = 0) -> None:
        """The cores the node may run on (a list, or the kernel's words: "0-1")."""
        self.cores = cores
        if self.net is None or self.net.fleet is None or cores is None:
            return
        text = ",".join(str(c) for c in cores) if isinstance(cores, list) else str(cores)
        self.cgroupSet("cpus", text, resource="cpuset")

def _cores() -> int:
    """The machine's online cores, as Mininet's ``numCores``."""
    return os.cpu_count() or 1


def _keyed(path: "os.PathLike[str]", key: str) -> int:
    """The number after `key` in a flat-keyed cgroup file."""
    with open(path) as f:
        for line in f:
            k, _, v = line.partition(" ")
            if k == key:
                return int(v)
    return 0


def _cgroup_of(pid: int, controller: str) -> "tuple[Path, bool]":
    """The folder of process `pid`'s cgroup that `controller` counts, where the host
    mounts its hierarchy, and whether that is cgroup v2."""
    mounts: Dict[str, str] = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, theirs = left.split(), right.split()
            if len(fields) < 5 or fields[3] != "/" or not theirs:
                continue
            if theirs[0] == "cgroup2":
                mounts.setdefault("", fields[4])
            elif theirs[0] == "cgroup" and len(theirs) > 2:
                for c in theirs[2].split(","):
                    mounts.setdefault(c, fields[4])
    with open(f"/proc/{pid}/cgroup") as f:
        groups = [line.rstrip("\n").split(":", 2) for line in f]
    for _, names, path in groups:
        if names and controller in names.split(",") and controller in mounts:
            return Path(mounts[controller]) / path.lstrip("/"), False
    for _, names, path in groups:
        if not names and "" in mounts:
            return Path(mounts[""]) / path.lstrip("/"), True
    raise NsfleetError(f"no {controller} cgroup of process {pid} is mounted on this host")


class Switch(Node):
    """A switch: a Linux bridge in a namespace of its own. Its ports are numbered from 1."""

    portBase = 1
    dpidLen = 16

    def __init__(self, name: str, dpid: Optional[str] = None, **params: Any) -> None:
        super().__init__(name, **params)
        self.dpid = self.defaultDpid(dpid)

    def defaultDpid(self, dpid: Optional[str] = None) -> str:
        """Mininet's: the given one, else the number in the switch's name, in hex."""
        if dpid:
            dpid = dpid.replace(":", "")
        else:
            nums = re.findall(r"\d+", self.name)
            if not nums:
                # Mininet's own words, which its tests look for.
                raise Unsupported(f"switch {self.name!r} without a dpid",
                                  "Unable to derive default datapath ID - please either specify a dpid "
                                  "or use a canonical switch name such as s23.")
            dpid = hex(int(nums[0]))[2:]
        return dpid.rjust(self.dpidLen, "0")

    def entry(self, targets: Sequence[str]) -> Dict[str, Any]:
        """The switch as nsfleet's topology writes it; `targets`: where its controllers
        are (`tcp:IP:PORT`)."""
        return {"name": self.name}

    def start(self, controllers: List[Any]) -> None:
        pass

    def connected(self) -> bool:
        return True

    def defaultIntf(self) -> Optional[IntfLike]:
        return None


class LinuxBridge(Switch):
    """Mininet's LinuxBridge: a learning switch without OpenFlow."""

    def __init__(self, name: str, stp: bool = False, prio: Optional[int] = None, **params: Any) -> None:
        if stp:
            raise Unsupported("LinuxBridge(stp=True)", "switches are bridges without spanning tree")
        super().__init__(name, **params)


_DATAPATHS = {"kernel": "auto", "user": "user"}


class OVSSwitch(Switch):
    """Open vSwitch, as Mininet runs it: an nsfleet switch of kind "ovs" (a bridge of the
    network's one ovsdb-server and ovs-vswitchd), connected to the network's controllers.
    `datapath="kernel"` forwards in the kernel where its openvswitch module is, on Open
    vSwitch's userspace datapath otherwise (said by the switch's log)."""

    def __init__(self, name: str, failMode: str = "secure", datapath: str = "kernel",
                 inband: bool = False, protocols: Optional[str] = None,
                 reconnectms: int = 1000, stp: bool = False, batch: bool = False,
                 **params: Any) -> None:
        if stp:
            raise Unsupported(f"{type(self).__name__}(stp=True)", "spanning tree is not set on nsfleet's switches")
        if datapath not in _DATAPATHS:
            raise Unsupported(f"datapath={datapath!r}", "expected 'kernel' or 'user'")
        super().__init__(name, **params)
        self.failMode, self.datapath, self.protocols = failMode, datapath, protocols
        # The controllers it was started with, once the network runs.
        self.controllers: Optional[List[Controller]] = None

    def entry(self, targets: Sequence[str]) -> Dict[str, Any]:
        out: Dict[str, Any] = {"name": self.name, "kind": "ovs", "fail_mode": self.failMode,
                               "datapath": _DATAPATHS[self.datapath], "dpid": self.dpid}
        if self.protocols:
            out["protocols"] = [p.strip() for p in self.protocols.split(",")]
        if targets:
            out["controller"] = list(targets)
        numbers = {i.name: p for p, i in self.intfs.items()}
        if numbers:
            out["port_numbers"] = numbers
        return out

    def start(self, controllers: List[Any]) -> None:
        """Connects to `controllers`: made so with the network, or changed on a running
        one (the switch's Open vSwitch starts again, through `nsfleet apply`)."""
        net = self.net
        if net is None:
            raise Unsupported(f"{type(self).__name__}.start outside a Mininet network",
                              "a switch is made with its network (Mininet(...), addSwitch)")
        net.connect(self, list(controllers))

    @classmethod
    def setup(cls) -> None:
        """Mininet checks the host's Open vSwitch here; each switch here runs its own, and
        only Open vSwitch's programs are needed."""
        if shutil.which("ovs-vswitchd") is None:
            raise Unsupported(cls.__name__, "Open vSwitch is not installed: apt-get install openvswitch-switch")

    @classmethod
    def isOldOVS(cls) -> bool:
        return False

    @classmethod
    def OVSVersion(cls) -> str:
        out = subprocess.run(["ovs-vsctl", "--version"], capture_output=True, text=True).stdout
        found = re.search(r"\d+\.\d+(\.\d+)?", out)
        return found.group(0) if found else ""

    def dpctl(self, *args: Any) -> str:
        """`ovs-ofctl CMD SWITCH ARGS...`, as Mininet's dpctl."""
        return self.cmd("ovs-ofctl", args[0], self.name, *args[1:])

    def vsctl(self, *args: Any, **kwargs: Any) -> str:
        return self.cmd("ovs-vsctl", *args)

    def connected(self) -> bool:
        """Whether it forwards: standalone, or connected to one of its own controllers (the
        fleet's Open vSwitch holds every switch's: asked by this bridge's, as Mininet
        asks)."""
        if self.failMode == "standalone" or not self.controllers:
            return True
        uuids = self.cmd(f"ovs-vsctl -- get Bridge {self.name} controller").strip()
        for uuid in uuids.strip("[]").split(","):
            uuid = uuid.strip()
            if uuid and "true" in self.cmd(f"ovs-vsctl -- get Controller {uuid} is_connected"):
                return True
        return False

    def stop(self, deleteIntfs: bool = False) -> None:
        pass


OVSKernelSwitch = OVSSwitch


class OVSBridge(OVSSwitch):
    """An OVSSwitch in standalone mode, ignoring controllers (Mininet's)."""

    def __init__(self, name: str, **params: Any) -> None:
        params["failMode"] = "standalone"
        super().__init__(name, **params)

    def entry(self, targets: Sequence[str]) -> Dict[str, Any]:
        return super().entry([])

    def start(self, controllers: List[Any]) -> None:
        pass


class UserSwitch(OVSSwitch):
    """Mininet's UserSwitch (CPqD's ofsoftswitch): Open vSwitch on its userspace datapath
    here (said once)."""

    def __init__(self, name: str, dpopts: str = "", **params: Any) -> None:
        once("userswitch", "UserSwitch is Open vSwitch on its userspace datapath on nsfleet")
        params["datapath"] = "user"
        super().__init__(name, **params)


class IVSSwitch(OVSSwitch):
    """Indigo Virtual Switch: Open vSwitch here (said once)."""

    def __init__(self, name: str, **params: Any) -> None:
        once("ivs", "IVSSwitch is Open vSwitch on nsfleet")
        params.pop("verbose", None)
        super().__init__(name, **params)


OVSLegacyKernelSwitch = OVSSwitch


class Controller:
    """Mininet's Controller: Open vSwitch's test controller (a learning switch), run on
    the host as Mininet runs it, listening on `ip`:`port`. It ends with the network,
    or with this process however it ends (PR_SET_PDEATHSIG).

    ovs-testcontroller takes at most 16 switches ("max 16 switch connections"), so a
    Mininet network of more (tree1024's 33) never connects them all, on Mininet too. Here
    each further 16 switches get a process of their own, on a port of its own: each
    switch is its own learning switch to it, so that it behaves as one controller."""

    # ovs-testcontroller's limit (MAX_SWITCHES).
    SWITCHES_PER_PROCESS = 16
    # What it runs by default (None: nothing, for a controller that is always there).
    program: Optional[str] = "ovs-testcontroller"

    def __init__(self, name: str = "c0", inNamespace: bool = False,
                 command: Optional[str] = None, cargs: str = "ptcp:%d",
                 cdir: Optional[str] = None, ip: str = "127.0.0.1", port: int = 6653,
                 protocol: str = "tcp", verbose: bool = False, **params: Any) -> None:
        if inNamespace:
            raise Unsupported(f"{type(self).__name__}(inNamespace=True)",
                              "a controller runs on the host here (or is a node you start it in)")
        self.name, self.cargs = name, cargs
        program = command if command is not None else self.program
        if program is None:
            # A class that starts nothing (program None) has an __init__ of its own.
            raise TypeError(f"{type(self).__name__} names no program to run")
        self.command: str = program
        self.ip, self.port, self.protocol = ip, int(port), protocol
        self.params = params
        self.process: Optional[subprocess.Popen] = None
        # Its working folder (Mininet's cdir); the caller's when None.
        self.cdir = cdir
        # The processes for switches beyond the first 16, with their ports.
        self.more: List["tuple[int, subprocess.Popen]"] = []
        if shutil.which(self.command) is None:
            raise Unsupported(f"{type(self).__name__} ({self.command})",
                              f"{self.command} is not installed: apt-get install openvswitch-testcontroller")

    def place(self, switches: List[str]) -> Dict[str, Optional[str]]:
        """Where each of `switches` (the network's switches that have this controller)
        connects, as nsfleet's topology writes it. Each process takes 16: a switch keeps
        the one it was given while it stays, so that adding or removing another moves no
        switch (a moved switch's Open vSwitch would start again)."""
        groups: Dict[str, int] = getattr(self, "_groups", {})
        groups = {n: g for n, g in groups.items() if n in switches}
        for n in switches:
            if n not in groups:
                taken = list(groups.values())
                groups[n] = next(g for g in itertools.count()
                                 if taken.count(g) < self.SWITCHES_PER_PROCESS)
        self._groups = groups
        return {n: self.target(groups[n]) for n in switches}

    def target(self, group: int = 0) -> Optional[str]:
        """Where the switches of process `group` connect: beyond the first, the port of a
        further process, started here if this controller runs."""
        if group == 0 or self.process is None:
            return f"tcp:{self.ip}:{self.port}"
        while len(self.more) < group:
            port = _free_port(self.ip)
            self.more.append((port, self._spawn(port, f"{self.name}.{len(self.more) + 2}")))
        return f"tcp:{self.ip}:{self.more[group - 1][0]}"

    def start(self) -> None:
        if self.process is not None:
            return
        self.checkListening()
        self.process = self._spawn(self.port, self.name)

    def _spawn(self, port: int, name: str) -> subprocess.Popen:
        listen = self.cargs % port
        if listen == f"ptcp:{port}":
            listen += f":{self.ip}"
        # No control socket: its default is in the host's /var/run/openvswitch, and a
        # folder of its own would outlive a script killed with SIGKILL.
        p = _spawn_tied([self.command, "--unixctl=none", listen],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.cdir)
        _wait_listening(self.ip, port, p)
        return p

    def stop(self) -> None:
        for p in [self.process, *(p for _, p in self.more)]:
            if p is None:
                continue
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.process, self.more = None, []

    def checkListening(self) -> None:
        """Refuses a port another program already listens on, as Mininet does."""
        if _listening(self.ip, self.port):
            raise Unsupported(f"{type(self).__name__} {self.name} on port {self.port}",
                              "something already listens there: stop it, or give another port")

    def IP(self) -> str:
        return self.ip

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}: {self.ip}:{self.port}>"


OVSController = Controller
NOX = Controller
Ryu = Controller


def DefaultController(name: str = "c0", **params: Any) -> Controller:
    return Controller(name, **params)


def findController(controllers: Optional[List[Any]] = None) -> Optional[Any]:
    """The first of `controllers` (Mininet's default: its Controller) whose program is
    installed, as `mn` picks its default; None if none is."""
    for c in controllers or [Controller]:
        program = getattr(c, "program", None)
        if program is None or shutil.which(program):
            return c
    return None


class RemoteController(Controller):
    """A controller that runs elsewhere (os-ken, Faucet, ONOS, POX...), at an address
    the host reaches; nothing is started."""

    program = None

    def __init__(self, name: str = "c0", ip: str = "127.0.0.1", port: Optional[int] = None,
                 **params: Any) -> None:
        # "IP:PORT" as one, as Mininet takes it.
        if ":" in ip and port is None and ip.count(":") == 1:
            ip, given = ip.split(":")
            port = int(given)
        self.name, self.ip = name, ip
        self.port = int(port) if port is not None else 6653
        self.params = params
        self.process = None
        self.cdir = None
        self.more = []

    def target(self, group: int = 0) -> Optional[str]:
        return f"tcp:{self.ip}:{self.port}"

    def start(self) -> None:
        if not _listening(self.ip, self.port):
            log.warn(f"Unable to contact the remote controller at {self.ip}:{self.port}\n")

    def stop(self) -> None:
        pass

    def checkListening(self) -> None:
        pass


class NullController(Controller):
    """No controller: switches get none."""

    program = None

    def __init__(self, name: str = "c0", *args: Any, **params: Any) -> None:
        self.name = name
        self.params = params
        self.process = None
        self.cdir = None
        self.more = []

    def target(self, group: int = 0) -> Optional[str]:
        return None

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


def _free_port(ip: str) -> int:
    with socket.socket() as s:
        s.bind((ip, 0))
        return int(s.getsockname()[1])


def _listening(ip: str, port: int) -> bool:
    try:
        with socket.create_connection((ip, port), timeout=0.5):
            return True
    except OSError:
        return False


def _wait_listening(ip: str, port: int, process: subprocess.Popen) -> None:
    """Until the controller listens (it takes a few milliseconds), or it has exited."""
    for _ in range(200):
        if process.poll() is not None:
            raise Unsupported(f"controller on {ip}:{port}", f"it exited at once (status {process.returncode})")
        if _listening(ip, port):
            return
        time.sleep(0.025)


def _private_dirs(name: str, given: Optional[Sequence[Any]]) -> Dict[str, List[str]]:
    """Mininet's `privateDirs` as nsfleet's node keys: a folder alone is a tmpfs of the
    node's own over the host's (`dirs`); a (folder, host folder) pair mounts that host
    folder there (`binds`; the network makes the host folder as it starts, as Mininet
    makes it, see `make_bind_sources`). `%(name)s` is the node's name. Without this the
    node would write the host's own folders."""
    dirs: List[str] = []
    binds: List[str] = []
    for d in given or []:
        folder = d[0] if isinstance(d, tuple) else d
        if not os.path.isdir(folder):
            raise Unsupported(f"privateDirs {d!r}",
                              f"the host has no {d} to mount over, and nsfleet makes no folder "
                              "in the host's own (give one the host has, or a (folder, host "
                              "folder) pair)")
        if isinstance(d, tuple):
            binds.append(f"{d[1] % {'name': name}}:{d[0]}")
        else:
            dirs.append(d)
    out: Dict[str, List[str]] = {}
    if dirs:
        out["dirs"] = dirs
    if binds:
        out["binds"] = binds
    return out


def script_reach(paths: Optional[Sequence[str]] = None) -> Dict[str, List[str]]:
    """What a confined host needs to reach the script's own files, as nsfleet's node keys.

    A confined host is root in its node and an id of no user on the host: it reads the
    host's files as any other user does. Mininet's hosts run what the script's user runs
    (`h1 python -m http.server` with a virtual environment's python, `h1 ./server.py` from
    the script's folder), and those often live under a folder only its owner may enter
    (root's home is 0700, Ubuntu's homes 0750). The outermost such folder on the way to
    one of the script's places becomes a tmpfs of the node's own (`dirs`), and the entry
    on the way below the innermost one is bound there read-only (`binds`), keeping its
    owners: the node reaches what any user could, were those folders open, and nothing
    else of them. The script's places (`paths`): its working folder, its own folder, its
    Python (a virtual environment and the Python it was made from) and the folders of
    `PATH` and `PYTHONPATH`. A place that is itself such a folder stays out of reach."""
    if paths is None:
        paths = [os.getcwd(), os.path.dirname(os.path.abspath(sys.argv[0] or ".")),
                 sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
        for var in ("PATH", "PYTHONPATH"):
            paths += [p for p in os.environ.get(var, "").split(os.pathsep) if p]
    shut: Dict[str, None] = {}  # an ordered set
    entries = set()
    for path in sorted({os.path.realpath(p) for p in paths if os.path.isabs(p)}):
        on_the_way = _shut_on_the_way(path) if os.path.isdir(path) else []
        if on_the_way:
            outer, inner = on_the_way[0], on_the_way[-1]
            shut[outer] = None
            entries.add(os.path.join(inner, Path(path).relative_to(inner).parts[0]))
    # One below another would be bound inside a bind of the host's, where no mount point
    # is made: the outer one is what the node sees.
    kept = sorted(e for e in entries if not any(e.startswith(o + "/") for o in entries))
    if not kept:
        return {}
    return {"dirs": list(shut), "binds": [f"{e}:{e}:ro" for e in kept]}


def _shut_on_the_way(path: str) -> List[str]:
    """The folders on the way to `path` (itself left out) that a user other than their
    owner and group may not pass through; none when `path` itself is one (no bind of it
    would open it)."""
    shut: List[str] = []
    at = "/"
    for part in Path(path).parts[1:]:
        if not os.stat(at).st_mode & 0o001:
            shut.append(at)
        at = os.path.join(at, part)
    return [] if not os.stat(path).st_mode & 0o001 else shut


def make_bind_sources(node: "Node") -> List[str]:
    """Makes the host folders of `node`'s persistent private folders (Mininet's
    `privateDirs` pairs) as the network starts, as Mininet makes them; returns those it
    made (see `give_bind_sources`). They are the script's own folders, asked for to
    outlive the network: they stay, even when the fleet then refuses the network."""
    made = []
    for bind in node.fleetDirs.get("binds", []):
        folder = bind.split(":")[0]
        if not os.path.isdir(folder):
            os.makedirs(folder)
            made.append(folder)
    return made


def give_bind_sources(folders: Sequence[str], first_id: Optional[int]) -> None:
    """Gives the folders `make_bind_sources` made to their node's root, which is the
    fleet's first host id when its nodes are confined (a folder the host's root owns is
    not theirs to write in), as Mininet's hosts, root on the host, own what it makes."""
    if first_id is None:
        return
    for folder in folders:
        os.chown(folder, first_id, first_id)


class _Tied:
    """Starts processes tied to this one, from one thread of its own. The kernel sends
    PR_SET_PDEATHSIG's signal when the *thread* that forked the child ends, not the
    process: a controller started from a script's short-lived thread would die with that
    thread. This thread is a daemon, so it ends only with the process (a thread pool's
    worker is joined at interpreter shutdown, before the script's other threads end);
    a forked child gets a thread of its own on its first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner = 0
        self._requests: "queue.SimpleQueue[Any]" = queue.SimpleQueue()

    def spawn(self, args: List[str], **kwargs: Any) -> subprocess.Popen:
        with self._lock:
            if self._owner != os.getpid():
                self._owner, self._requests = os.getpid(), queue.SimpleQueue()
                threading.Thread(target=self._serve, args=(self._requests,),
                                 name="nsfleet-tied", daemon=True).start()
            requests = self._requests
        done: "concurrent.futures.Future[subprocess.Popen]" = concurrent.futures.Future()
        requests.put((args, kwargs, done))
        return done.result()

    @staticmethod
    def _serve(requests: "queue.SimpleQueue[Any]") -> None:
        while True:
            args, kwargs, done = requests.get()
            try:
                done.set_result(subprocess.Popen(args, preexec_fn=_die_with_parent, **kwargs))
            except BaseException as e:
                done.set_exception(e)


_TIED = _Tied()


def _spawn_tied(args: List[str], **kwargs: Any) -> subprocess.Popen:
    """subprocess.Popen(args, **kwargs), the child killed when this process ends, however
    it ends."""
    return _TIED.spawn(args, **kwargs)


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when this process ends, however it ends."""
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_PDEATHSIG = 1
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)

"""Mininet's utilities that scripts import."""

from __future__ import annotations

import subprocess
from typing import Any, Callable, Dict, List, Optional

from .topo import natural  # noqa: F401


def irange(start: int, end: int) -> range:
    """Inclusive range."""
    return range(start, end + 1)


def quietRun(cmd: Any, **kwargs: Any) -> str:
    """Runs a command on the host; its output (errors included)."""
    shell = isinstance(cmd, str)
    return subprocess.run(cmd, shell=shell, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True).stdout


def errRun(cmd: Any, **kwargs: Any) -> "tuple[str, str, int]":
    shell = isinstance(cmd, str)
    p = subprocess.run(cmd, shell=shell, capture_output=True, text=True)
    return p.stdout, p.stderr, p.returncode


def custom(cls: Any, **params: Any) -> Callable[..., Any]:
    """`cls` with default parameters (Mininet's `custom`)."""
    def customized(*args: Any, **kwargs: Any) -> Any:
        return cls(*args, **{**params, **kwargs})
    customized.__name__ = getattr(cls, "__name__", "custom")
    return customized


def dumpNodeConnections(nodes: List[Any]) -> None:
    """Prints each node's interfaces and what they connect to."""
    for node in nodes:
        ends = []
        for intf in node.intfList():
            link = intf.link
            other = link.intf2 if link.intf1 is intf else link.intf1
            ends.append(f" {intf.name}:{other.name}")
        print(node.name + "".join(ends))


def dumpNetConnections(net: Any) -> None:
    dumpNodeConnections(list(net.hosts) + list(net.switches))


def macColonHex(mac: int) -> str:
    return ":".join(f"{b:02x}" for b in mac.to_bytes(6, "big"))


def ipStr(ip: int) -> str:
    return ".".join(str((ip >> s) & 255) for s in (24, 16, 8, 0))


def ipParse(ip: str) -> int:
    a, b, c, d = (int(x) for x in ip.split("."))
    return (a << 24) | (b << 16) | (c << 8) | d


def ipAdd(i: int, prefixLen: int = 8, ipBaseNum: int = 0x0a000000) -> str:
    return ipStr(ipBaseNum + i)


def pmonitor(popens: Dict[Any, Any], timeoutms: int = 500, readline: bool = True,
             **_opts: Any) -> Any:
    """Yields (host, line) from several popen()s, as Mininet's pmonitor."""
    import select
    fds = {p.stdout.fileno(): (h, p) for h, p in popens.items()}
    while fds:
        ready = select.select(list(fds), [], [], timeoutms / 1000)[0]
        if not ready:
            yield None, ""
            continue
        for fd in ready:
            host, p = fds[fd]
            line = p.stdout.readline()
            if not line:
                del fds[fd]
                continue
            yield host, line if isinstance(line, str) else line.decode()


def numCores() -> int:
    import os
    return os.cpu_count() or 1


def decode(s: Any) -> str:
    """Bytes as text (Mininet's, for Python 2 and 3 alike)."""
    return s.decode("utf-8", "replace") if isinstance(s, bytes) else str(s)


def encode(s: Any) -> bytes:
    return s.encode("utf-8") if isinstance(s, str) else bytes(s)


def makeNumeric(s: str) -> Any:
    """`s` as an int or a float where it is one (Mininet's)."""
    for kind in (int, float):
        try:
            return kind(s)
        except ValueError:
            pass
    return s


def splitArgs(argstr: str) -> "tuple[str, List[Any], Dict[str, Any]]":
    """`name,arg,key=value...` (the `mn` command line's form) as the name, its positional
    arguments and its keyword arguments, numbers made numeric."""
    name, *params = argstr.split(",")
    args = [makeNumeric(p) for p in params if "=" not in p]
    kwargs = {k: makeNumeric(v) for k, v in (p.split("=", 1) for p in params if "=" in p)}
    return name, args, kwargs


def specialClass(cls: Any, prepend: Optional[List[Any]] = None, append: Optional[List[Any]] = None,
                 defaults: Optional[Dict[str, Any]] = None,
                 override: Optional[Dict[str, Any]] = None) -> Any:
    """A subclass of `cls` whose constructor takes these arguments besides its caller's,
    as Mininet's: functools.partial that is still a class."""
    before, after = list(prepend or []), list(append or [])
    base, forced = dict(defaults or {}), dict(override or {})

    class CustomClass(cls):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **params: Any) -> None:
            cls.__init__(self, *before, *args, *after, **{**base, **params, **forced})

    CustomClass.__name__ = f"{cls.__name__}{base}"
    return CustomClass


def customClass(classes: Dict[str, Any], argStr: str) -> Any:
    """The class `argStr` names in `classes`, with the arguments it gives
    (`ovs,protocols=OpenFlow13`), as `mn`'s options name them."""
    name, args, kwargs = splitArgs(argStr)
    cls = classes.get(name)
    if not cls:
        raise Exception(f"error: {name} is unknown - please specify one of {list(classes)}")
    if not args and not kwargs:
        return cls
    if not isinstance(cls, type):
        # A factory (DefaultController): its arguments bound as Mininet's partial would.
        return lambda *a, **k: cls(*a, *args, **{**kwargs, **k})
    return specialClass(cls, append=args, defaults=kwargs)


def buildTopo(topos: Dict[str, Any], topoStr: str) -> Any:
    """The topology `topoStr` names (`tree,depth=2,fanout=8`), made."""
    name, args, kwargs = splitArgs(topoStr)
    if name not in topos:
        raise Exception(f"Invalid topo name {name}")
    return topos[name](*args, **kwargs)


def waitListening(client: Any = None, server: Any = "127.0.0.1", port: int = 80,
                  timeout: Optional[float] = None) -> bool:
    """Waits until `server` (an address, or a node) listens on `port`, as seen from
    `client` (a node; the host when None); False if it does not within `timeout`
    seconds (None or 0: as long as it takes, as Mininet's). Mininet's uses telnet; a connection is tried
    here with bash's /dev/tcp, or from Python on the host."""
    import socket
    import time
    ip = server if isinstance(server, str) else server.IP()

    def listening() -> bool:
        if client is not None:
            # A connection that hangs (a dropped SYN) is given up after a second.
            return "Connected" in client.cmd(
                f"timeout 1 bash -c 'exec 3<>/dev/tcp/{ip}/{port}' 2>/dev/null && echo Connected")
        try:
            with socket.create_connection((ip, port), timeout=1):
                return True
        except OSError:
            return False

    waited = 0.0
    while not listening():
        if timeout and waited >= timeout:
            from .log import error
            error(f"could not connect to {ip} on port {port}\n")
            return False
        time.sleep(0.5)
        waited += 0.5
    return True


class _Pexpect:
    """pexpect whose `spawn` speaks text (utf-8), as Mininet's `util.pexpect` is."""

    @staticmethod
    def spawn(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("encoding", "utf-8")
        return _pexpect_module().spawn(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(_pexpect_module(), name)


def _pexpect_module() -> Any:
    """pexpect, imported only when a test asks for it (it ships no type stubs)."""
    import importlib
    return importlib.import_module("pexpect")


def __getattr__(name: str) -> Any:
    """`mininet.util.pexpect`, as Mininet's tests import it (pexpect is imported only
    then: nothing else here needs it)."""
    if name == "pexpect":
        return _Pexpect()
    raise AttributeError(name)

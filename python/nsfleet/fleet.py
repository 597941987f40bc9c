"""Fleets from Python: bring one up from a file or a dict, run commands in its nodes,
impair and pull its links, read its status, and bring it down with the kernel's
reclamation report. Each call is the `nsfleet` command-line tool's (see `_binary`); what
it reports comes back as dataclasses, and what it refuses as `NsfleetError` (a
`TopologyError` naming FILE:LINE for a topology).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from . import _binary, _toml
from .errors import ExpectationFailed, TopologyError, from_stderr

Topology = Union[str, "os.PathLike[str]", Mapping[str, Any]]


@dataclass(frozen=True)
class UpReport:
    """What `up` did: nodes made, how fast, the supervisor's pid, the kernel's memory."""
    name: str
    nodes: int
    nodes_per_sec: float
    phases_ms: Dict[str, float]
    kernel_mem_bytes: int
    pid: int


@dataclass(frozen=True)
class Process:
    name: str
    pid: int
    state: str


@dataclass(frozen=True)
class NodeStatus:
    name: str
    netns_inode: int
    interfaces: List[str]
    processes: List[Process]
    impairments: List[str]


@dataclass(frozen=True)
class FleetStatus:
    """`nsfleet status NAME`: the fleet, its nodes, what the kernel still holds."""
    name: str
    state: str
    pid: int
    nodes: List[NodeStatus]
    processes_running: int
    kernel_mem_bytes: int
    awaiting_reclaim: int
    run_dir: str
    # The first of the host ids its confined nodes are (a node's root; its uid N is
    # first_id + N); None when the fleet is --privileged.
    first_id: Optional[int] = None


@dataclass(frozen=True)
class DownReport:
    """`down`: nodes torn down and reclaimed by the kernel, and what still holds any."""
    name: str
    nodes: int
    reclaimed: int
    teardown_ms: float
    reclaimed_ms: Optional[float]
    held: List[Any] = field(default_factory=list)


@dataclass(frozen=True)
class Impairment:
    """An interface's netem impairment; zero is none."""
    delay_ns: int = 0
    jitter_ns: int = 0
    loss: float = 0.0
    duplicate: float = 0.0
    corrupt: float = 0.0
    reorder: float = 0.0
    rate_bps: int = 0


@dataclass(frozen=True)
class LinkEnd:
    node: str
    iface: str
    up: bool
    carrier: bool
    counters: Dict[str, int]


@dataclass(frozen=True)
class LinkState:
    """Both ends of a link (the far one, when it is a fleet node's) and its impairment."""
    end: LinkEnd
    far: Optional[LinkEnd]
    impair: Optional[Impairment]


def _process(p: Mapping[str, Any]) -> Process:
    return Process(name=str(p.get("name", "")), pid=int(p.get("pid", 0)),
                   state=str(p.get("state", "")))


def _node_status(n: Mapping[str, Any]) -> NodeStatus:
    procs = [_process(p) if isinstance(p, Mapping) else Process(str(p), 0, "") for p in n.get("processes", [])]
    return NodeStatus(name=n["name"], netns_inode=int(n.get("netns_inode", 0)),
                      interfaces=list(n.get("interfaces", [])), processes=procs,
                      impairments=[str(i) for i in n.get("impairments", [])])


def _end(e: Optional[Mapping[str, Any]]) -> Optional[LinkEnd]:
    if e is None:
        return None
    return LinkEnd(node=e["node"], iface=e["iface"], up=bool(e["up"]),
                   carrier=bool(e["carrier"]), counters=dict(e.get("counters", {})))


def _impairment(i: Optional[Mapping[str, Any]]) -> Optional[Impairment]:
    if i is None:
        return None
    known = Impairment.__dataclass_fields__
    return Impairment(**{k: v for k, v in i.items() if k in known})


class Node:
    """A node of a running fleet."""

    def __init__(self, fleet: "Fleet", name: str) -> None:
        self.fleet = fleet
        self.name = name

    def __repr__(self) -> str:
        return f"<Node {self.fleet.name}/{self.name}>"

    def _exec(self, argv: Sequence[str]) -> List[str]:
        return [_binary.executable(), "exec", self.fleet.name, self.name, "--", *argv]

    def cmd(self, command: Union[str, Sequence[str]], *args: str) -> str:
        """Runs a command in the node and returns its output (standard output and error
        together), as Mininet's `Node.cmd` does. A string is run by `sh -c`; a list (or
        several arguments) as a program and its arguments."""
        argv = _argv(command, args)
        done = subprocess.run(self._exec(argv), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        return done.stdout

    def popen(self, command: Union[str, Sequence[str]], *args: str, **kwargs: Any) -> "subprocess.Popen[Any]":
        """A `subprocess.Popen` of a command running in the node; keyword arguments are
        Popen's (stdout=PIPE, text=True...)."""
        return subprocess.Popen(self._exec(_argv(command, args)), **kwargs)


    def _act(self, action: str) -> List[Process]:
        j = _binary.run_json(["node", self.fleet.name, self.name, action])
        return [_process(p) for p in j.get("processes", [])]

    def stop(self) -> List[Process]:
        """Ends the node's processes (`nsfleet node NODE stop`); its namespace and links
        stay."""
        return self._act("stop")

    def start(self) -> List[Process]:
        """Starts the node's processes again, as `up` did."""
        return self._act("start")

    def restart(self) -> List[Process]:
        return self._act("restart")

    def pause(self) -> List[Process]:
        """Freezes every process of the node (SIGSTOP)."""
        return self._act("pause")

    def resume(self) -> List[Process]:
        return self._act("resume")


def _argv(command: Union[str, Sequence[str]], args: Sequence[str]) -> List[str]:
    if isinstance(command, str) and not args:
        return ["sh", "-c", command]
    if isinstance(command, str):
        return [command, *args]
    return [*command, *args]


class Link:
    """One end of a link, `NODE:IFACE`, and through it the cable."""

    def __init__(self, fleet: "Fleet", endpoint: str) -> None:
        self.fleet = fleet
        self.endpoint = endpoint

    def state(self) -> LinkState:
        return _link_state(_binary.run_json(["link", self.fleet.name, self.endpoint]))

    def down(self) -> LinkState:
        """Pulls the cable: this end goes down, its peer loses its carrier."""
        return _link_state(_binary.run_json(["link", self.fleet.name, self.endpoint, "down"]))

    def up(self) -> LinkState:
        """Plugs the cable back."""
        return _link_state(_binary.run_json(["link", self.fleet.name, self.endpoint, "up"]))


def _link_state(j: Mapping[str, Any]) -> LinkState:
    end = _end(j["end"])
    assert end is not None
    return LinkState(end=end, far=_end(j.get("far")), impair=_impairment(j.get("impair")))


class Fleet:
    """A running fleet. As a context manager, leaving the `with` block brings it down."""

    def __init__(self, name: str, report: Optional[UpReport] = None) -> None:
        self.name = name
        self.report = report
        self.down_report: Optional[DownReport] = None

    def __repr__(self) -> str:
        return f"<Fleet {self.name}>"

    @classmethod
    def from_file(cls, path: Union[str, "os.PathLike[str]"], name: Optional[str] = None,
                  workers: Optional[int] = None, owner: Optional[int] = None) -> "Fleet":
        """Brings up the fleet of a topology file (nsfleet's TOML or containerlab's YAML).
        With `owner` (a pid, `os.getpid()` for this process) the fleet goes down when that
        process ends, however it ends."""
        args = ["up", os.fspath(path)]
        if name is not None:
            args += ["--name", name]
        if workers is not None:
            args += ["--workers", str(workers)]
        if owner is not None:
            args += ["--owner", str(owner)]
        j = _binary.run_json(args)
        known = UpReport.__dataclass_fields__
        report = UpReport(**{k: v for k, v in j.items() if k in known})
        return cls(report.name, report)

    @classmethod
    def from_dict(cls, topology: Mapping[str, Any], name: Optional[str] = None,
                  workers: Optional[int] = None, owner: Optional[int] = None) -> "Fleet":
        """Brings up the fleet a dict describes, as a topology file would (`{"fleet":
        {"name": ...}, "node": [...], "link": [...]}`)."""
        text = _toml.dumps(topology)
        with tempfile.TemporaryDirectory(prefix="nsfleet-py-") as d:
            path = Path(d) / "topology.toml"
            path.write_text(text)
            try:
                return cls.from_file(path, name=name, workers=workers, owner=owner)
            except TopologyError as e:
                raise _in_dict(e, str(path), text) from None

    @classmethod
    def attach(cls, name: str) -> "Fleet":
        """A fleet already running (brought up elsewhere)."""
        fleet = cls(name)
        fleet.status()
        return fleet

    def __enter__(self) -> "Fleet":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.down_report is None:
            self.down()

    def status(self) -> FleetStatus:
        j = _binary.run_json(["status", self.name])
        f = j["fleets"][0]
        return FleetStatus(name=f["name"], state=f["state"], pid=int(f["pid"]),
                           nodes=[_node_status(n) for n in f.get("nodes", [])],
                           processes_running=int(f.get("processes_running", 0)),
                           kernel_mem_bytes=int(f.get("kernel_mem_bytes", 0)),
                           awaiting_reclaim=int(f.get("awaiting_reclaim", 0)),
                           run_dir=str(f.get("run_dir", "")),
                           first_id=(f.get("ids") or {}).get("first"))

    @property
    def nodes(self) -> List[Node]:
        """The fleet's nodes, in the fleet's order."""
        return [Node(self, n.name) for n in self.status().nodes]

    def node(self, name: str) -> Node:
        """The node called `name` (nsfleet refuses an unknown one when it is used)."""
        return Node(self, name)

    def link(self, endpoint: str) -> Link:
        """The link at `NODE:IFACE`."""
        return Link(self, endpoint)

    def impair(self, endpoint: str, delay: Optional[str] = None, jitter: Optional[str] = None,
               loss: Optional[str] = None, duplicate: Optional[str] = None,
               corrupt: Optional[str] = None, reorder: Optional[str] = None,
               rate: Optional[str] = None, clear: bool = False) -> Optional[Impairment]:
        """Replaces the impairment of `NODE:IFACE` (values as in topology files: "20ms",
        "1%", "10mbit"); `clear=True` removes it."""
        args = ["impair", self.name, endpoint]
        given = {"delay": delay, "jitter": jitter, "loss": loss, "duplicate": duplicate,
                 "corrupt": corrupt, "reorder": reorder, "rate": rate}
        for flag, value in given.items():
            if value is not None:
                args += [f"--{flag}", str(value)]
        if clear:
            args.append("--clear")
        return _impairment(_binary.run_json(args).get("impair"))

    def wait(self, until: str = "converged", timeout: float = 300) -> None:
        """Returns once the fleet is `until` ("started", "healthy" or "converged"), as
        `nsfleet wait` and a scenario's `wait` step; raises NsfleetError with what was
        missing at `timeout` seconds."""
        _binary.run_json(["wait", self.name, until, "--timeout", str(timeout)])

    def expect_ping(self, node: str, address: str, within: float = 10) -> float:
        """Waits until an ICMP echo from `node` (a name, or a pattern such as "r*": every
        node that matches) to `address` is answered; the seconds that took. Raises
        `ExpectationFailed` after `within` seconds. The same expectation, semantics and
        timing as a scenario's `expect = "ping NODE ADDRESS"`."""
        return self._expect(f"ping {node} {address}", within)

    def expect_no_ping(self, node: str, address: str, within: float = 10) -> float:
        """Waits until an echo from `node` to `address` goes unanswered."""
        return self._expect(f"no ping {node} {address}", within)

    def expect_route(self, node: str, prefix: str, via: Optional[str] = None,
                     within: float = 10) -> float:
        """Waits until `node`'s kernel has a route for exactly `prefix` (through `via`,
        one of its next hops, when given)."""
        text = f"route {node} {prefix}" + (f" via {via}" if via else "")
        return self._expect(text, within)

    def expect_no_route(self, node: str, prefix: str, within: float = 10) -> float:
        """Waits until `node`'s kernel has no route for `prefix`."""
        return self._expect(f"no route {node} {prefix}", within)

    def expect_exec(self, node: str, command: Union[str, Sequence[str]],
                    output: Optional[str] = None, within: float = 10) -> float:
        """Waits until `command` (a string runs under `sh -c`) exits 0 in `node`, its
        output matching the regular expression `output` when given."""
        argv = _argv(command, ())
        extra = ["--output", output] if output is not None else []
        return self._expect(f"exec {node} -- {shlex.join(argv)}", within, extra)

    def expect_loss(self, node: str, address: str, below: float, window: float = 5,
                    within: float = 30) -> float:
        """Waits until echoes from `node` to `address`, sent every 20 ms for `window`
        seconds, lose less than `below` percent."""
        return self._expect(f"loss {node} {address} < {below}%", within,
                            ["--window", str(window)])

    def _expect(self, text: str, within: float, extra: Sequence[str] = ()) -> float:
        """`nsfleet scenario expect`: the seconds until `text` held, or ExpectationFailed
        (exit status 1) or NsfleetError (2: it was refused, nothing tried)."""
        args = [_binary.executable(), "scenario", "expect", self.name, text,
                "--within", str(within), *extra, "--json"]
        done = subprocess.run(args, capture_output=True, text=True)
        if done.returncode not in (0, 1) or not done.stdout.strip():
            raise from_stderr(done.stderr, done.returncode)
        j = json.loads(done.stdout)
        if not j["ok"]:
            raise ExpectationFailed(text, j["seen"], float(j["took_s"]))
        return float(j["held_after_s"])

    def apply(self, topology: Mapping[str, Any]) -> None:
        """Changes the running fleet into what `topology` (a dict, as `from_dict` takes)
        says, only where they differ (`nsfleet apply`); all or nothing."""
        text = _toml.dumps(topology)
        with tempfile.TemporaryDirectory(prefix="nsfleet-py-") as d:
            path = Path(d) / "topology.toml"
            path.write_text(text)
            try:
                _binary.run_json(["apply", str(path), "--name", self.name])
            except TopologyError as e:
                raise _in_dict(e, str(path), text) from None

    def down(self, wait: bool = True) -> DownReport:
        """Tears the fleet down; with `wait`, returns once the kernel has reclaimed every
        namespace."""
        args = ["down", self.name] + ([] if wait else ["--no-wait"])
        j = _binary.run_json(args)
        known = DownReport.__dataclass_fields__
        self.down_report = DownReport(**{k: v for k, v in j.items() if k in known})
        return self.down_report


def _in_dict(e: TopologyError, path: str, text: str) -> TopologyError:
    """An error of the TOML written from a dict, told in terms of the dict: the line's
    text rather than a file that no longer exists."""
    lines = text.splitlines()
    shown = lines[e.line - 1] if 0 < e.line <= len(lines) else ""
    message = e.message.replace(path, "<topology dict>")
    return TopologyError(f"{message}\n  in: {shown}", "<topology dict>", e.line, e.column,
                         e.exit_status, e.others)


def up(topology: Topology, name: Optional[str] = None, workers: Optional[int] = None) -> Fleet:
    """Brings a fleet up from a topology file's path or a dict, and returns it."""
    if isinstance(topology, Mapping):
        return Fleet.from_dict(topology, name=name, workers=workers)
    return Fleet.from_file(topology, name=name, workers=workers)

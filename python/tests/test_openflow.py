"""OpenFlow controllers driving nsfleet's Open vSwitch switches through Mininet's API:
Faucet (from the package registry) as a `RemoteController` on the host, a learning
switch with its flows in `dump-flows`, and the switch left in its fail mode when Faucet
goes; Mininet's own `Controller` (Open vSwitch's test controller) as Mininet runs it."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

from nsfleet.mininet.net import Mininet
from nsfleet.mininet.node import OVSSwitch, RemoteController
from nsfleet.mininet.topo import SingleSwitchTopo

FAUCET_COOKIE = "0x5adc15c0"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _die_with_parent() -> None:
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _controller(args: List[str], env: Dict[str, str], cwd: Path, log: Path,
                port: int) -> Iterator[subprocess.Popen]:
    """Runs an OpenFlow controller until the test is done, once it listens on `port` (its
    `.port`); its `log` is said if it ends first."""
    p = subprocess.Popen(args, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent)
    try:
        deadline = time.monotonic() + 60
        while not _listening(port):
            assert p.poll() is None, log.read_text() if log.exists() else "no log"
            assert time.monotonic() < deadline, f"{args[0]} did not listen within 60 s"
            time.sleep(0.1)
        setattr(p, "port", port)
        yield p
    finally:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _installed(program: str) -> Path:
    exe = Path(sys.executable).parent / program
    if not exe.exists():
        pytest.skip(f"{program} is not installed (pip install '.[test]')")
    return exe


@pytest.fixture
def faucet(tmp_path: Path) -> Iterator[subprocess.Popen]:
    """Faucet on 127.0.0.1 at a free port, for one switch (dp_id 1) whose ports 1-3 are
    in one VLAN: a learning switch. Its port is the process's `.port`."""
    exe = _installed("faucet")
    (tmp_path / "faucet.yaml").write_text(
        "vlans:\n  lab:\n    vid: 100\n"
        "dps:\n  s1:\n    dp_id: 1\n    hardware: \"Open vSwitch\"\n    interfaces:\n"
        + "".join(f"      {p}: {{native_vlan: lab}}\n" for p in (1, 2, 3)))
    port = _free_port()
    env = dict(os.environ,
               PATH=f"{exe.parent}:{os.environ.get('PATH', '')}",
               FAUCET_CONFIG=str(tmp_path / "faucet.yaml"),
               FAUCET_LOG=str(tmp_path / "faucet.log"),
               FAUCET_EXCEPTION_LOG=str(tmp_path / "faucet-exception.log"),
               FAUCET_PROMETHEUS_ADDR="127.0.0.1",
               FAUCET_PROMETHEUS_PORT=str(_free_port()))
    yield from _controller([str(exe), f"--ryu-ofp-tcp-listen-port={port}",
                            "--ryu-ofp-listen-host=127.0.0.1"],
                           env, tmp_path, tmp_path / "faucet.log", port)


@pytest.fixture
def osken(tmp_path: Path) -> Iterator[subprocess.Popen]:
    """os-ken's manager on 127.0.0.1 at a free port, running the tests' learning switch
    (openflow_apps/learning_switch.py). Its port is the process's `.port`."""
    exe = _installed("osken-manager")
    port = _free_port()
    log = tmp_path / "osken.log"
    yield from _controller([str(exe), f"--ofp-tcp-listen-port={port}",
                            "--ofp-listen-host=127.0.0.1", f"--log-file={log}",
                            str(Path(__file__).parent / "openflow_apps" / "learning_switch.py")],
                           dict(os.environ), tmp_path, log, port)


def _under_remote_controller(port: int) -> Mininet:
    """Three hosts on one OVSSwitch (OpenFlow 1.3) under the controller on 127.0.0.1:`port`,
    started and connected."""
    net = Mininet(topo=SingleSwitchTopo(3),
                  switch=lambda name, **p: OVSSwitch(name, protocols="OpenFlow13", **p),
                  controller=lambda name, **p: RemoteController(name, ip="127.0.0.1", port=port),
                  waitConnected=True)
    net.start()
    return net


def test_faucet_drives_a_mininet_network_and_its_end_leaves_the_fail_mode(
        run_dir: Path, faucet: subprocess.Popen) -> None:
    net = _under_remote_controller(getattr(faucet, "port"))
    try:
        assert net.pingAll() == 0.0
        s1 = net["s1"]
        flows = s1.dpctl("dump-flows", "-O", "OpenFlow13")
        assert f"cookie={FAUCET_COOKIE}" in flows, flows
        faucet.terminate()
        faucet.wait(10)
        assert s1.cmd("ovs-vsctl get-fail-mode s1").strip() == "secure"
        # Secure: the flows Faucet set stay, and so do the hosts it has learned.
        assert f"cookie={FAUCET_COOKIE}" in s1.dpctl("dump-flows", "-O", "OpenFlow13")
    finally:
        net.stop()


def test_an_os_ken_learning_switch_drives_a_mininet_network_and_its_end_leaves_the_fail_mode(
        run_dir: Path, osken: subprocess.Popen) -> None:
    net = _under_remote_controller(getattr(osken, "port"))
    try:
        assert net.pingAll() == 0.0
        s1 = net["s1"]
        # The application's flows (learning_switch.py's COOKIE): its table-miss to the
        # controller, and what it learned.
        flows = s1.dpctl("dump-flows", "-O", "OpenFlow13")
        assert "cookie=0x5ce1e47" in flows and "actions=CONTROLLER:65535" in flows, flows
        assert "priority=1,in_port=" in flows and "dl_dst=" in flows, "learned: " + flows
        osken.terminate()
        osken.wait(10)
        assert s1.cmd("ovs-vsctl get-fail-mode s1").strip() == "secure"
        # Secure: what it learned stays, and the hosts still reach each other by it.
        assert "dl_dst=" in s1.dpctl("dump-flows", "-O", "OpenFlow13")
        assert net.ping([net["h1"], net["h2"]]) == 0.0
    finally:
        net.stop()


@pytest.mark.skipif(shutil.which("ovs-testcontroller") is None,
                    reason="openvswitch-testcontroller is not installed")
def test_mininets_default_controller_is_open_vswitchs_test_controller(run_dir: Path) -> None:
    net = Mininet(topo=SingleSwitchTopo(2), waitConnected=True)
    net.start()
    try:
        c0 = net.controllers[0]
        assert c0.process is not None and c0.process.poll() is None
        assert net.pingAll() == 0.0
        flows = net["s1"].dpctl("dump-flows")
        assert "actions=output:" in flows, "the test controller's flows"
        numbers = [net["s1"].cmd(f"ovs-vsctl get Interface s1-eth{i} ofport").strip() for i in (1, 2)]
        assert numbers == ["1", "2"], "Mininet's port numbers"
    finally:
        net.stop()
    assert c0.process is None, "the controller ends with the network"


@pytest.mark.skipif(shutil.which("ovs-testcontroller") is None,
                    reason="openvswitch-testcontroller is not installed")
def test_a_running_switch_moves_to_another_controller(run_dir: Path) -> None:
    from nsfleet.mininet.node import Controller
    net = Mininet(topo=SingleSwitchTopo(2), controller=None, waitConnected=True)
    c0 = net.addController("c0", controller=Controller, port=_free_port())
    c1 = net.addController("c1", controller=Controller, port=_free_port())
    net.start()
    try:
        s1 = net["s1"]
        both = sorted(s1.cmd("ovs-vsctl get-controller s1").split())
        assert both == sorted([f"tcp:127.0.0.1:{c0.port}", f"tcp:127.0.0.1:{c1.port}"])
        s1.start([c1])  # through nsfleet apply: its Open vSwitch starts again
        assert s1.cmd("ovs-vsctl get-controller s1").strip() == f"tcp:127.0.0.1:{c1.port}"
        assert net.waitConnected(timeout=30)
        assert net.pingAll() == 0.0
    finally:
        net.stop()


@pytest.mark.skipif(shutil.which("ovs-testcontroller") is None,
                    reason="openvswitch-testcontroller is not installed")
def test_a_controller_started_from_a_thread_outlives_the_thread() -> None:
    """PR_SET_PDEATHSIG follows the thread that forked: a controller a script starts
    from a short-lived thread must not die when that thread ends."""
    import threading
    from nsfleet.mininet.node import Controller
    c = Controller("c9", port=_free_port())
    starter = threading.Thread(target=c.start)
    starter.start()
    starter.join()
    try:
        time.sleep(0.5)
        assert c.process is not None and c.process.poll() is None, "alive after its thread"
        assert _listening(c.port)
    finally:
        c.stop()
    assert c.process is None


@pytest.mark.skipif(shutil.which("ovs-testcontroller") is None,
                    reason="openvswitch-testcontroller is not installed")
def test_a_switch_added_to_a_running_network_connects_to_its_controllers(run_dir: Path) -> None:
    net = Mininet(topo=SingleSwitchTopo(2), waitConnected=True)
    net.start()
    try:
        s2, h3 = net.addSwitch("s2"), net.addHost("h3")
        net.addLink(net["s1"], s2)
        net.addLink(h3, s2)
        h3.setIP("10.0.0.3/8")
        assert getattr(s2, "controllers") == net.controllers, "what connected() waits for"
        assert net.waitConnected(timeout=20)
        assert net.ping([net["h1"], h3]) == 0.0
    finally:
        net.stop()


@pytest.mark.skipif(shutil.which("ovs-testcontroller") is None,
                    reason="openvswitch-testcontroller is not installed")
def test_removing_a_switch_moves_no_other_between_test_controller_processes(run_dir: Path) -> None:
    """ovs-testcontroller takes 16 switches: the 17th goes to a second process, and stays
    there when a switch of the first goes (moved, its Open vSwitch would start again)."""
    from nsfleet.mininet.topo import LinearTopo
    net = Mininet(topo=LinearTopo(18, 1))
    net.start()
    try:
        def controller_of(name: str) -> str:
            return net[name].cmd(f"ovs-vsctl get-controller {name}").strip()
        before = {n: controller_of(n) for n in ("s17", "s18")}
        assert before["s17"] != controller_of("s1"), "the 17th switch has a process of its own"
        net.delNode(net["s2"])
        assert {n: controller_of(n) for n in ("s17", "s18")} == before
    finally:
        net.stop()

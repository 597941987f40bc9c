"""Mininet's API on nsfleet, against the real kernel: a Topo subclass built and pinged,
commands in nodes' shells, TCLink's bandwidth as an impairment, links pulled, what
nsfleet lacks refused at the script's line before anything exists, scripts run
unchanged by `nsfleet mn`, and a script's network ending with it, however it ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nsfleet import _binary
from nsfleet.mininet.link import TCLink
from nsfleet.mininet.net import Mininet
from nsfleet.mininet.node import CPULimitedHost, Host, Node, _shut_on_the_way
from nsfleet.mininet.topo import SingleSwitchTopo, Topo
from nsfleet.mininet.topolib import TreeTopo
from nsfleet.mininet.util import custom
from nsfleet.mininet._unsupported import Unsupported


class Router(Node):
    def config(self, **params: object) -> dict:
        super().config(**params)
        self.cmd("sysctl -w net.ipv4.ip_forward=1")
        return {}


class TwoSubnets(Topo):
    def build(self) -> None:  # type: ignore[override]
        r = self.addNode("r0", cls=Router, ip="10.1.0.1/24")
        s1, s2 = self.addSwitch("s1"), self.addSwitch("s2")
        self.addLink(s1, r, intfName2="r0-eth1", params2={"ip": "10.1.0.1/24"})
        self.addLink(s2, r, intfName2="r0-eth2", params2={"ip": "10.2.0.1/24"})
        h1 = self.addHost("h1", ip="10.1.0.100/24", defaultRoute="via 10.1.0.1")
        h2 = self.addHost("h2", ip="10.2.0.100/24", defaultRoute="via 10.2.0.1")
        self.addLink(h1, s1)
        self.addLink(h2, s2)


def test_a_tree_is_built_pinged_and_stopped(run_dir: Path, capsys: pytest.CaptureFixture) -> None:
    net = Mininet(topo=TreeTopo(depth=2, fanout=2), waitConnected=True)
    assert [h.name for h in net.hosts] == ["h1", "h2", "h3", "h4"]
    assert net["h3"].IP() == "10.0.0.3"
    net.start()
    try:
        assert net.pingAll() == 0.0
        out = capsys.readouterr().out
        assert "h1 -> h2 h3 h4" in out and "*** Results: 0% dropped (12/12 received)" in out
        assert "10.0.0.2" in net["h2"].cmd("ip -br addr show h2-eth0")
        net["h1"].cmd("X=kept")
        assert net["h1"].cmd("echo $X").strip() == "kept", "one shell per node, as Mininet's"
        net.configLinkStatus("h4", "s3", "down")
        assert net.ping([net["h1"], net["h4"]]) == 100.0
        net.configLinkStatus("h4", "s3", "up")
    finally:
        net.stop()
    assert net.fleet is None


def test_ovs_tso_false_is_said_in_the_fleet_s_file_when_it_has_ovs_switches() -> None:
    from nsfleet.mininet.node import OVSBridge
    from nsfleet.mininet.nodelib import LinuxBridge
    lean = Mininet(topo=SingleSwitchTopo(2), switch=OVSBridge, controller=None, ovsTso=False)
    assert lean.topology()["fleet"]["ovs_tso"] is False
    default = Mininet(topo=SingleSwitchTopo(2), switch=OVSBridge, controller=None)
    assert "ovs_tso" not in default.topology()["fleet"]
    bridges = Mininet(topo=SingleSwitchTopo(2), switch=LinuxBridge, controller=None, ovsTso=False)
    assert "ovs_tso" not in bridges.topology()["fleet"], "a fleet without OVS refuses it"


def test_a_router_between_subnets_and_a_shaped_link(run_dir: Path) -> None:
    net = Mininet(topo=TwoSubnets())
    net.start()
    try:
        assert "1 received" in net["h1"].cmd("ping -c1 -W2 10.2.0.100")
    finally:
        net.stop()
    net = Mininet(topo=SingleSwitchTopo(2), link=TCLink)
    net.addLink  # the class is used for every link of the topology
    net.start()
    try:
        assert net.fleet is not None
        state = net.fleet.link("h1:h1-eth0").state()
        assert state.impair is None  # no bw given
    finally:
        net.stop()
    net = Mininet()
    h1, h2, s1 = net.addHost("h1"), net.addHost("h2"), net.addSwitch("s1")
    net.addLink(h1, s1, cls=TCLink, bw=10)
    net.addLink(h2, s1)
    net.start()
    try:
        assert net.fleet is not None
        imp = net.fleet.link("h1:h1-eth0").state().impair
        assert imp is not None and imp.rate_bps == 10_000_000
    finally:
        net.stop()


def test_what_nsfleet_lacks_is_refused_at_the_scripts_line(run_dir: Path) -> None:
    with pytest.raises(Unsupported) as e:
        Mininet(topo=SingleSwitchTopo(2), autoPinCpus=True)
    line = sys._getframe().f_lineno - 1
    assert e.value.file == __file__ and e.value.line == line, e.value.message
    assert "autoPinCpus is not available on nsfleet" in e.value.message
    with pytest.raises(Unsupported, match="xterms"):
        Mininet(xterms=True)


def test_a_cpu_limited_host_gets_its_share_and_no_more(run_dir: Path) -> None:
    """Mininet's CPULimitedHost: `cpu` is a share of all the machine's cores, held by the
    node's cgroup; a busy loop in it gets that share, its neighbour a whole core."""
    cores = os.cpu_count() or 1
    net = Mininet(topo=SingleSwitchTopo(2), host=custom(CPULimitedHost, cpu=0.1))
    net.addHost("free", cls=Host)
    # Mininet's other period: the same share, in quotas of 50 ms.
    net.addHost("short", cls=CPULimitedHost, cpu=0.1, period_us=50000)
    net.start()
    try:
        h1 = net.get("h1")
        assert h1.cgroupGet("cfs_quota_us") == int(100000 * 0.1 * cores)
        short = net.get("short")
        assert short.cgroupGet("cfs_period_us") == 50000
        assert short.cgroupGet("cfs_quota_us") == int(50000 * 0.1 * cores)
        shares = net.runCpuLimitTest(cpu=0.1, duration=3)
        of = {h.name: shares[3 * i:3 * i + 3] for i, h in enumerate(net.hosts)}
        # 10% of the machine, each second, within the kernel's accounting of a period.
        limited = of["h1"] + of["h2"]
        assert all(s < 13 for s in limited) and max(limited) > 5, of
        # The unlimited host is not held (its one busy loop takes most of a core).
        assert max(of["free"]) > 100 / cores * 0.6, of
    finally:
        net.stop()


def test_hosts_are_confined_and_reach_the_scripts_places(
        run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A host's shell is root in its node and an id of the fleet's range on the host; it
    reaches the script's working folder and Python even below folders only root may
    enter (pytest's own temporary folders are 0700), and nothing else of those folders;
    a secret in the script's environment stays out. `privileged=True` is Mininet's host."""
    lab = tmp_path / "lab"
    lab.mkdir(mode=0o755)
    (lab / "hello.txt").write_text("from the script's folder\n")
    (tmp_path / "beside.txt").write_text("not the node's\n")
    shut = _shut_on_the_way(str(lab))
    assert shut and shut[-1] == str(tmp_path), "pytest's folders are 0700: the test needs one"
    monkeypatch.chdir(lab)
    monkeypatch.setenv("NSFLEET_TEST_SECRET", "s3cr3t")
    net = Mininet(topo=SingleSwitchTopo(1))
    net.addHost("root", privileged=True)
    net.start()
    try:
        h1 = net.get("h1")
        inside, outside, count = h1.cmd("cat /proc/self/uid_map").split()
        assert (inside, count) == ("0", "65536") and int(outside) >= 0x70000000
        assert "not permitted" in h1.cmd("mknod /tmp/h1-blk b 7 0")
        assert h1.cmd("cat hello.txt").strip() == "from the script's folder"
        assert h1.cmd(f"{sys.executable} -c 'print(6 * 7)'").strip() == "42"
        assert h1.cmd(f"ls -A {tmp_path}").split() == ["lab"]
        outer = Path(shut[0])
        assert h1.cmd(f"ls -A {outer}").split() == [lab.relative_to(outer).parts[0]]
        assert h1.cmd("echo x${NSFLEET_TEST_SECRET}x").strip() == "xx"
        assert net.get("root").cmd("cat /proc/self/uid_map").split() == ["0", "0", "4294967295"]
    finally:
        net.stop()


MN = "/usr/share/doc/mininet/examples"


def mn(script: str, tmp: Path, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([_binary.executable(), "mn", script], input=stdin, text=True,
                          capture_output=True, timeout=600)


def test_nsfleet_mn_runs_a_mininet_script_unchanged(run_dir: Path, tmp_path: Path) -> None:
    script = tmp_path / "pairs.py"
    script.write_text(
        "from mininet.net import Mininet\n"
        "from mininet.topo import SingleSwitchTopo\n"
        "from mininet.log import setLogLevel\n"
        "setLogLevel('info')\n"
        "net = Mininet(topo=SingleSwitchTopo(3))\n"
        "net.start()\n"
        "loss = net.pingAll()\n"
        "net.stop()\n"
        "raise SystemExit(0 if loss == 0 else 1)\n")
    done = mn(str(script), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "*** Results: 0% dropped (6/6 received)" in done.stdout
    bad = tmp_path / "limited.py"
    bad.write_text("from mininet.net import Mininet\n"
                   "from mininet.node import CPULimitedHost\n"
                   "net = Mininet(host=CPULimitedHost, autoPinCpus=True)\n")
    done = mn(str(bad), tmp_path)
    assert done.returncode == 1
    assert f"{bad}:3: autoPinCpus is not available on nsfleet" in done.stderr, done.stderr
    # Hosts are confined; `--privileged` makes them the host's root, as Mininet's.
    ids = tmp_path / "ids.py"
    ids.write_text("from mininet.net import Mininet\n"
                   "from mininet.topo import SingleSwitchTopo\n"
                   "net = Mininet(topo=SingleSwitchTopo(1))\n"
                   "net.start()\n"
                   "print('map', *net.get('h1').cmd('cat /proc/self/uid_map').split())\n"
                   "net.stop()\n")
    for args, host_root in (([], False), (["--privileged"], True)):
        done = subprocess.run([_binary.executable(), "mn", *args, str(ids)], text=True,
                              capture_output=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        line = next(l for l in done.stdout.splitlines() if l.startswith("map "))
        assert (line == "map 0 0 4294967295") == host_root, line
        said = "Not confined, the host's root (privileged): h1" in done.stdout + done.stderr
        assert said == host_root, done.stdout + done.stderr


@pytest.mark.skipif(not Path("/usr/bin/mn").is_file(), reason="Debian's mininet package is not installed")
def test_nsfleet_mn_without_a_script_is_mininets_own_mn_command(run_dir: Path) -> None:
    done = subprocess.run([_binary.executable(), "mn", "--topo", "linear,3", "--switch", "ovsbr",
                           "--test", "pingall"], capture_output=True, text=True, timeout=600)
    assert "*** Results: 0% dropped (6/6 received)" in done.stdout, done.stdout + done.stderr
    assert "completed in" in done.stdout
    # What nsfleet lacks is said by Mininet's own launcher, which carries on as Mininet's does.
    done = subprocess.run([_binary.executable(), "mn", "--innamespace", "--test", "none"],
                          capture_output=True, text=True, timeout=600)
    assert "MininetWithControlNet (mn --innamespace) is not available on nsfleet" in done.stdout + done.stderr


def test_nodes_and_links_come_and_go_on_a_running_network(run_dir: Path, tmp_path: Path) -> None:
    script = tmp_path / "reshape.py"
    script.write_text(
        "from mininet.net import Mininet\n"
        "from mininet.topo import SingleSwitchTopo\n"
        "from mininet.nodelib import LinuxBridge\n"
        "net = Mininet(topo=SingleSwitchTopo(2), switch=LinuxBridge, controller=None)\n"
        "net.start()\n"
        "h3 = net.addHost('h3')\n"
        "link = net.addLink(h3, net['s1'])\n"
        "h3.setIP('10.0.0.3/8')\n"
        "assert net.ping([net['h1'], h3]) == 0\n"
        "net.delLink(link)\n"
        "assert 'h3-eth0' not in h3.cmd('ip -br link')\n"
        "net.delHost(net['h2'])\n"
        "assert 'h2' not in net\n"
        "print('nodes', sorted(net.keys()))\n"
        "net.stop()\n")
    done = mn(str(script), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "nodes ['h1', 'h3', 's1']" in done.stdout


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM, signal.SIGKILL])
def test_a_scripts_network_ends_with_the_script_however_it_ends(run_dir: Path, tmp_path: Path,
                                                               sig: int) -> None:
    script = tmp_path / "waits.py"
    script.write_text(
        "import sys, time\n"
        "from mininet.net import Mininet\n"
        "from mininet.topo import SingleSwitchTopo\n"
        "net = Mininet(topo=SingleSwitchTopo(2))\n"
        "net.start()\n"
        "print('ready', net.controllers[0].process.pid, flush=True)\n"
        "time.sleep(600)\n")
    # With the signals' default actions: a suite started under nohup (SIGHUP ignored)
    # must still see what each does to the script.
    p = subprocess.Popen([_binary.executable(), "mn", str(script)], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, preexec_fn=_default_signals)
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert line.startswith("ready"), line
        controller = int(line.split()[1])
        assert _fleets() == 1
        p.send_signal(sig)
        p.wait(30)
        deadline = time.monotonic() + 20
        while _fleets() or _alive(controller):
            assert time.monotonic() < deadline, f"signal {sig}: the network outlived its script"
            time.sleep(0.1)
    finally:
        p.kill()
        p.wait()


def _default_signals() -> None:
    for s in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
        signal.signal(s, signal.SIG_DFL)


def _fleets() -> int:
    out = subprocess.run([_binary.executable(), "status", "--json"], capture_output=True,
                         text=True, check=True)
    return len([f for f in json.loads(out.stdout).get("fleets", []) if f["state"] != "dead"])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")


def test_private_dirs_are_the_nodes_own_and_the_hosts_folders_are_untouched(
        run_dir: Path, tmp_path: Path) -> None:
    """Mininet's privateDirs: a folder alone is a tmpfs of the node's own over the
    host's (/mnt here), a (folder, host folder) pair mounts a persistent host folder per
    node; a folder the host lacks is refused at the script's line."""
    from functools import partial
    from nsfleet.mininet.node import Host
    kept = str(tmp_path / "%(name)s" / "log")
    host = partial(Host, privateDirs=["/mnt", ("/var/log", kept)])
    net = Mininet(topo=SingleSwitchTopo(2), host=host)
    mnt_before = sorted(os.listdir("/mnt"))
    net.start()
    try:
        h1, h2 = net["h1"], net["h2"]
        h1.cmd("echo one > /mnt/nsfleet-private; echo kept > /var/log/nsfleet-kept")
        assert h1.cmd("cat /mnt/nsfleet-private /var/log/nsfleet-kept").split() == ["one", "kept"]
        assert "No such file" in h2.cmd("cat /mnt/nsfleet-private")
        assert "No such file" in h2.cmd("cat /var/log/nsfleet-kept")
    finally:
        net.stop()
    assert sorted(os.listdir("/mnt")) == mnt_before, "the host's /mnt untouched"
    assert not os.path.exists("/var/log/nsfleet-kept"), "the host's /var/log untouched"
    assert (tmp_path / "h1" / "log" / "nsfleet-kept").read_text() == "kept\n", "persistent"
    with pytest.raises(Unsupported, match="the host has no /nsfleet-no-such-dir"):
        Mininet(topo=SingleSwitchTopo(1),
                host=partial(Host, privateDirs=["/nsfleet-no-such-dir"]))

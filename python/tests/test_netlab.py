"""netlab (PyPI `networklab`, a test dependency) run by `nsfleet netlab`, with nsfleet
standing in for containerlab, Docker and sudo: a lab of FRR routers and a Linux host
comes up, netlab configures it, validates it, connects to it, captures on it and takes it
down, leaving nothing; a LAN's bridge is a switch of the lab's own, not the host's; and a chosen subset of netlab's own integration tests (copied
under netlab/integration, MIT, from ipspace/netlab) passes its validation as netlab's
harness runs them. docs/netlab.md lists which of them pass and why the others do not."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from nsfleet import _binary

NETLAB = shutil.which("netlab", path=os.path.dirname(sys.executable))
INTEGRATION = Path(__file__).parent / "netlab" / "integration"

pytestmark = [
    pytest.mark.skipif(NETLAB is None, reason="netlab (PyPI networklab) is not installed"),
    pytest.mark.skipif(shutil.which("vtysh") is None, reason="FRR is not installed"),
]

LAB = """
provider: clab
defaults.device: frr
module: [ ospf ]
nodes:
  r1:
  r2:
  r3:
  h1:
    device: linux
links: [ r1-r2, r2-r3, h1-r1 ]
validate:
  pfx:
    description: r1 has r3's loopback in OSPF
    wait: 60
    nodes: [ r1 ]
    plugin: ospf_prefix(nodes.r3.loopback.ipv4)
  ping:
    description: h1 reaches r3's loopback
    wait: 60
    nodes: [ h1 ]
    plugin: ping('r3')
"""


def netlab(lab: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """`nsfleet netlab ARGS` in the lab's folder, with this environment's netlab first on
    PATH and a HOME of the test's own (netlab keeps its status under ~/.netlab)."""
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["HOME"] = str(lab.parent / "home")
    return subprocess.run([_binary.executable(), "netlab", *args], cwd=lab, env=env,
                          capture_output=True, text=True, timeout=timeout)


def lab_dir(tmp_path: Path) -> Path:
    """A folder whose name netlab takes as the lab's (at most 12 characters)."""
    d = tmp_path / f"nl{uuid.uuid4().hex[:8]}"
    d.mkdir()
    return d


def left_behind(run_dir: Path, lab: str) -> list:
    names = [n for n in os.listdir("/run/netns") if n.startswith(f"clab-{lab}-")] \
        if os.path.isdir("/run/netns") else []
    stand_ins = [n for n in os.listdir(run_dir) if n.startswith(".netlab-")] \
        if run_dir.is_dir() else []
    return names + stand_ins


def test_up_validate_connect_capture_status_down_leave_nothing(run_dir: Path, tmp_path: Path) -> None:
    lab = lab_dir(tmp_path)
    (lab / "topology.yml").write_text(LAB)
    try:
        up = netlab(lab, "up")
        assert up.returncode == 0, up.stdout + up.stderr
        assert "OK: Lab devices configured" in up.stdout, up.stdout
        valid = netlab(lab, "validate")
        assert valid.returncode == 0, valid.stdout + valid.stderr
        assert "[SUCCESS] Tests passed: 2" in valid.stdout, valid.stdout
        show = netlab(lab, "connect", "r2", "--show", "ip", "ospf", "neighbor")
        assert show.stdout.count("Full/") == 2, show.stdout + show.stderr
        ping = netlab(lab, "connect", "h1", "ping", "-c1", "-W2", "r2")
        assert "1 received" in ping.stdout, ping.stdout + ping.stderr
        status = netlab(lab, "status")
        assert status.returncode == 0 and status.stdout.count("Up ") >= 4, status.stdout
        capture = netlab(lab, "capture", "r1", "eth1", "-c", "1", timeout=60)
        assert "1 packet captured" in capture.stdout + capture.stderr, capture.stdout + capture.stderr
    finally:
        down = netlab(lab, "down", "--cleanup")
    assert down.returncode == 0, down.stdout + down.stderr
    assert not (lab / "clab.yml").exists()
    assert left_behind(run_dir, lab.name) == []


def test_a_multi_access_link_is_a_switch_of_the_lab_s_own_and_not_a_bridge_on_the_host(
        run_dir: Path, tmp_path: Path) -> None:
    lab = lab_dir(tmp_path)
    (lab / "topology.yml").write_text(
        "provider: clab\ndefaults.device: frr\nnodes: [ r1, r2, r3 ]\nlinks:\n- r1:\n  r2:\n  r3:\n")
    try:
        up = netlab(lab, "up")
        assert up.returncode == 0, up.stdout + up.stderr
        clab = (lab / "clab.yml").read_text()
        bridge = f"{lab.name}_1"
        assert f"    {bridge}:\n      kind: bridge" in clab, clab
        assert not os.path.exists(f"/sys/class/net/{bridge}"), "no bridge on the host"
        # netlab asks its bridges to forward LLDP and the other link-local groups: the
        # lab's switch does.
        mask = subprocess.run([_binary.executable(), "exec", lab.name, bridge, "--", "cat",
                               "/sys/class/net/br0/bridge/group_fwd_mask"],
                              capture_output=True, text=True)
        assert mask.stdout.strip() == "0xfff8", mask.stdout + mask.stderr
        ping = netlab(lab, "connect", "r1", "ping", "-c1", "-W2", "172.16.0.3")
        assert "1 received" in ping.stdout, ping.stdout + ping.stderr
    finally:
        down = netlab(lab, "down", "--cleanup")
    assert down.returncode == 0, down.stdout + down.stderr
    assert left_behind(run_dir, lab.name) == []


def test_what_is_not_stood_in_for_is_named_and_fails(run_dir: Path, tmp_path: Path) -> None:
    for tool, args, said in [
        ("docker", ["network", "ls"], "does not answer `docker network ls`"),
        ("docker", ["exec", "-u", "frr", "clab-x-r1", "id"], "does not take option -u"),
        ("containerlab", ["save", "-t", "x.clab.yml"], "does not answer `containerlab save"),
        ("sudo", ["ip", "link", "add", "name", "br9", "type", "bridge"], "not one the lab's clab.yml declares"),
    ]:
        done = subprocess.run([_binary.executable(), "stand-in", tool, *args],
                              capture_output=True, text=True)
        assert done.returncode != 0 and said in done.stderr, (tool, args, done.stderr)
    assert not os.path.exists("/sys/class/net/br9")


def test_a_netlab_that_is_not_installed_is_named_with_how_to_install_it(run_dir: Path, tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PATH"] = "/usr/bin:/bin"
    done = subprocess.run([_binary.executable(), "netlab", "up"], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 1
    assert "netlab is not installed" in done.stderr and "pip install networklab" in done.stderr, done.stderr


# netlab's own integration tests that pass on nsfleet with Debian's FRR (docs/netlab.md's
# table lists every FRR/Linux test and why the others do not pass).
CHOSEN = [
    "bgp/01-ebgp-session.yml",
    "bgp/11-ipv6-ebgp.yml",
    "bgp/21-dual-stack-unnumbered.yml",
    "initial/01-interfaces.yml",
    "initial/05-host.yml",
    "isis/10-network.yml",
]


@pytest.mark.parametrize("test", CHOSEN)
def test_a_netlab_integration_test_passes_as_its_harness_runs_it(
        run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, test: str) -> None:
    """The steps of netlab's tests/integration/device-module-test, with
    NETLAB_DEVICE=frr and NETLAB_PROVIDER=clab."""
    lab = lab_dir(tmp_path)
    monkeypatch.setenv("NETLAB_DEVICE", "frr")
    monkeypatch.setenv("NETLAB_PROVIDER", "clab")
    try:
        for step in [["create", str(INTEGRATION / test)], ["up", "--snapshot", "--no-config"],
                     ["initial"], ["validate", "--skip-missing"]]:
            done = netlab(lab, *step)
            assert done.returncode == 0, f"{step}: {done.stdout}{done.stderr}"
    finally:
        netlab(lab, "down", "--cleanup", "--force", "--force")
    assert left_behind(run_dir, lab.name) == []


def closed_folder(path: Path) -> Path | None:
    """The outermost folder on the way to `path` that others may not enter (root's home,
    0700, where this test environment may live), if there is one."""
    for folder in reversed(path.resolve().parents):
        if folder != Path("/") and not os.stat(folder).st_mode & 0o001:
            return folder
    return None


def as_user(user: str, home: Path, lab: Path, *args: str) -> subprocess.CompletedProcess:
    """`nsfleet netlab ARGS` run by `user` in the lab's folder, with this environment's
    netlab and nsfleet. Where those are in a folder others may not enter, the command
    runs in a mount namespace of the test's own where that folder is a tmpfs they may
    enter, each of its folders bound back in with its own mode: the host's stays as it
    is."""
    closed = {f for f in (closed_folder(Path(sys.executable)), closed_folder(Path(sys.prefix)),
                          closed_folder(Path(_binary.executable()))) if f is not None}
    script = "set -e\n"
    for i, folder in enumerate(sorted(closed)):
        keep = home / f".reach{i}"
        keep.mkdir(exist_ok=True)
        script += (f'mount --bind "{folder}" "{keep}"\n'
                   f'mount -t tmpfs -o mode=0711 tmpfs "{folder}"\n'
                   f'for d in "{keep}"/.[!.]* "{keep}"/*; do [ -d "$d" ] || continue; '
                   f'mkdir "{folder}/${{d##*/}}"; mount --bind "$d" "{folder}/${{d##*/}}"; done\n')
    script += 'exec setpriv --reuid="$0" --regid="$0" --init-groups -- "$@"\n'
    env = {"PATH": os.path.dirname(sys.executable) + ":/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
           "HOME": str(home), "USER": user}
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                           script, user, _binary.executable(), "netlab", *args],
                          cwd=lab, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.skipif(os.geteuid() != 0, reason="the test makes a user, as root")
def test_a_user_runs_a_netlab_lab_without_root_and_it_leaves_nothing(tmp_path: Path) -> None:
    user = f"nsfnl{os.getpid() % 100000}"
    home = Path(f"/tmp/{user}-home")
    subprocess.run(["useradd", "-m", "-d", str(home), "-s", "/bin/sh", user], check=True)
    uid = int(subprocess.run(["id", "-u", user], capture_output=True, text=True).stdout)
    try:
        lab = home / f"nu{uuid.uuid4().hex[:8]}"
        lab.mkdir()
        (lab / "topology.yml").write_text(LAB)
        shutil.chown(lab, user, user)
        shutil.chown(lab / "topology.yml", user, user)
        up = as_user(user, home, lab, "up")
        assert up.returncode == 0, up.stdout + up.stderr
        assert "OK: Lab devices configured" in up.stdout, up.stdout
        valid = as_user(user, home, lab, "validate")
        assert "[SUCCESS] Tests passed: 2" in valid.stdout, valid.stdout + valid.stderr
        down = as_user(user, home, lab, "down", "--cleanup")
        assert down.returncode == 0, down.stdout + down.stderr
        runs = Path(f"/tmp/nsfleet-{uid}")
        assert not runs.exists() or list(runs.iterdir()) == []
        for _ in range(100):
            if subprocess.run(["pgrep", "-U", str(uid)], capture_output=True).returncode != 0:
                break
            time.sleep(0.1)
        left = subprocess.run(["pgrep", "-a", "-U", str(uid)], capture_output=True, text=True)
        assert left.stdout == "", left.stdout
    finally:
        subprocess.run(["pkill", "-9", "-U", str(uid)])
        time.sleep(0.5)
        subprocess.run(["rm", "-rf", f"/tmp/nsfleet-{uid}"])
        subprocess.run(["userdel", "-r", user], capture_output=True)
        subprocess.run(["rm", "-rf", str(home)])

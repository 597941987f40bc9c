"""Mininet's own examples (Debian's `mininet` package) run unchanged by `nsfleet mn`,
checked for what Mininet prints. Skipped, saying so, where the package is not installed.
docs/mininet.md's table of examples says which run and why the others do not."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from nsfleet import _binary

EXAMPLES = Path("/usr/share/doc/mininet/examples")

pytestmark = pytest.mark.skipif(not EXAMPLES.is_dir(),
                                reason="Debian's mininet package is not installed (its examples are the test)")


def mn(example: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([_binary.executable(), "mn", str(EXAMPLES / f"{example}.py")],
                          input=stdin, text=True, capture_output=True, timeout=900)


# treeping64 is not among them: Mininet's own test of it (test_mininet_suite.py) runs the
# same example and asks the same, every switch kind's ping at 0% loss. tree1024 is: its
# own test lets 60% of 20 pings be lost, this one asks the first ping to come back.
@pytest.mark.parametrize("example,stdin,expected", [
    ("linuxrouter", "h1 ping -c1 h3\npingall\n", ["1 received", "0% dropped (12/12 received)",
                                                  "192.168.1.0     0.0.0.0         255.255.255.0   U"]),
    ("emptynet", "pingall\n", ["0% dropped (2/2 received)"]),
    ("tree1024", "h1 ping -c1 h1024\n", ["1 received"]),
])
def test_an_example_runs_as_on_mininet(run_dir: Path, example: str, stdin: str, expected: list) -> None:
    done = mn(example, stdin)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    for e in expected:
        assert e in out, f"{e!r} not in {out}"
    assert "*** Done" in out


def test_multiping_reaches_its_subnets_and_not_the_absent_host(run_dir: Path) -> None:
    done = mn("multiping")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [l for l in done.stdout.splitlines() if "->" in l and "packets transmitted" in l]
    assert lines, done.stdout
    absent = [l for l in lines if "-> 10.0.0.200 " in l]
    present = [l for l in lines if "-> 10.0.0.200 " not in l]
    assert present and all(", 1 received" in l for l in present), present
    assert all(", 0 received" in l for l in absent), absent


def test_limit_holds_each_hosts_cpu_share_and_link_rate(run_dir: Path) -> None:
    """limit.py: CPULimitedHost's share of the machine (10%) and TCIntf's rate (10 Mbps),
    each measured by the example itself, for both of its schedulers ('rt' is held as CFS
    bandwidth, said once)."""
    done = mn("limit")
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    shares = [[float(x) for x in m.split(",")]
              for m in re.findall(r"\*\*\* Results: \[([\d., ]+)\]", out)]
    assert len(shares) == 2, out
    assert all(5 < x < 13 for r in shares for x in r), shares
    rates = re.findall(r"\*\*\* Results: \['([\d.]+) Mbits/sec', '([\d.]+) Mbits/sec'\]", out)
    assert len(rates) == 2 and all(7 < float(x) < 11 for r in rates for x in r), out
    assert "held as CFS bandwidth" in out


# Where the tests keep the Debian kernels they fetched, across tests and runs: the one
# the Rust vm tests keep (crates/nsfleet-cli/tests/vm.rs), in the machine's cache.
SHARED_KERNELS = Path(os.environ.get("HOME", "/root")) / ".cache" / "nsfleet-tests" / "kernels"


def link_kernels(src: Path, dst: Path) -> None:
    """Hard-links each complete kernel entry of `src` (a partial one's name begins with a
    dot) that `dst` lacks into `dst`, through a partial name renamed once whole; what
    cannot be linked is left to be fetched again."""
    if not src.is_dir():
        return
    for entry in src.iterdir():
        if entry.name.startswith(".") or (dst / entry.name).exists():
            continue
        dst.mkdir(parents=True, exist_ok=True)
        partial = dst / f".{entry.name}.linking"
        linked = subprocess.run(["cp", "-al", str(entry), str(partial)]).returncode == 0
        if not (linked and os.path.lexists(partial)):
            shutil.rmtree(partial, ignore_errors=True)
            continue
        try:
            partial.rename(dst / entry.name)
        except OSError:
            shutil.rmtree(partial, ignore_errors=True)


@pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None, reason="QEMU is not installed")
def test_intfoptions_shapes_loses_and_delays_in_a_guest_with_netem(run_dir: Path, tmp_path: Path) -> None:
    # This machine's kernel has no netem: the example runs in a Debian guest that has.
    # One CPU: under TCG, a static key patched (int3) while another vCPU runs that code
    # oopsed the guest once, in the middle of iperf's UDP flood.
    script = f"NSFLEET_RUN_DIR=/run/nsf {_binary.executable()} mn {EXAMPLES}/intfoptions.py < /dev/null"
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    kernels = tmp_path / "cache" / "nsfleet" / "kernels"
    link_kernels(SHARED_KERNELS, kernels)
    done = subprocess.run([_binary.executable(), "vm", "--debian", "6.12", "--cpus", "1", "--timeout", "600",
                           "--", "sh", "-c", script], text=True, capture_output=True,
                          timeout=900, env=env)
    link_kernels(kernels, SHARED_KERNELS)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    tcp = re.search(r"Results: \['([\d.]+) Mbits/sec'", out)
    assert tcp and 7 < float(tcp.group(1)) <= 10.5, out
    rtts = [float(x) for x in re.findall(r"rtt min/avg/max/mdev ([\d.]+)/", out)]
    assert rtts and min(rtts) >= 15.0, out

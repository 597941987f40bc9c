"""Mininet's own tests of its examples (Debian's mininet package ships them in
/usr/share/doc/mininet/examples/test), as the measure of compatibility: each test file
runs unchanged under `nsfleet mn` (its own `mininet` imports answered by nsfleet), and the
`python -m mininet.examples.NAME` it spawns under pexpect is answered by `nsfleet mn
NAME.py` through a `python` placed first on PATH. A file passes, or is listed in
`NOT_RUN` (and in docs/mininet.md's table) with the reason it cannot."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from nsfleet import _binary

TESTS = Path("/usr/share/doc/mininet/examples/test")
EXAMPLES = TESTS.parent

pytestmark = pytest.mark.skipif(not TESTS.is_dir(),
                                reason="Debian's mininet package is not installed (its tests are the measure)")

# The files that do not pass, and why; docs/mininet.md's table says the same.
NOT_RUN = {
    "test_baresshd": "runs sshd in a host and connects to it from the host's own namespace",
    "test_bind": "bind.py asks for a private /var/mn, which the host lacks, and nsfleet makes no folder in the host's /var (privateDirs themselves work: test_mininet.py)",
    "test_clusterSanity": "the cluster examples need SSH between machines",
    "test_controlnet": "controllers in the namespaces of a second, control network (inNamespace controllers)",
    "test_cpu": "cpu.py waits for a line that Debian 12's iperf (2.1.8) never prints for waitListening's empty connection (its stderr says `read tcp flags (peer close) failed`): it hangs on Mininet too. Its CPU limits hold: test_limit, and test_mininet.py's CPULimitedHost test",
    "test_hwintf": "moves one of the host's own interfaces into a node",
    "test_intfoptions": "needs netem, which this kernel lacks (run in a guest: test_mininet_examples)",
    "test_linearbandwidth": "needs netem for its links' bandwidth on a UserSwitch chain (run in a guest)",
    "test_mobility": "moves interfaces between switches of a running network",
    "test_nat": "a NAT to the host's own network",
    "test_natnet": "NATs to the host's own network",
    "test_scratchnet": "drives the host's own Open vSwitch from nodes outside any namespace",
    "test_simpleperf": "needs netem for its links' delay and loss, which this kernel lacks",
    "test_sshd": "runs sshd in every host and connects from the host's own namespace",
    "test_vlanhost": "needs the kernel's 8021q module (VLAN devices), which this kernel lacks",
}

SHIM = """#!/bin/sh
if [ "$1" = "-m" ]; then
  case "$2" in
    mininet.examples.*)
      name=${2#mininet.examples.}
      shift 2
      exec "$NSFLEET" mn "$EXAMPLES/$name.py" "$@" ;;
  esac
fi
exec python3 "$@"
"""


def _files() -> list:
    return sorted(p.stem for p in TESTS.glob("test_*.py")) if TESTS.is_dir() else []


def _left_in_tmp() -> set:
    """The files multipoll.py's hosts write in the host's /tmp, and leave there: those a
    test made are removed after it (a host is confined, and cannot write over a file of
    the host's root's that an earlier Mininet left)."""
    return {str(p) for p in Path("/tmp").glob("h*.out")} | {str(p) for p in Path("/tmp").glob("h*.err")}


@pytest.mark.parametrize("name", [n for n in _files() if n not in NOT_RUN])
def test_mininets_own_test_passes(run_dir: Path, tmp_path: Path, name: str) -> None:
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "python").write_text(SHIM)
    (shim / "python").chmod(0o755)
    env = dict(os.environ, PATH=f"{shim}:{os.environ['PATH']}", NSFLEET=_binary.executable(),
               EXAMPLES=str(EXAMPLES))
    left = _left_in_tmp()
    try:
        done = subprocess.run([_binary.executable(), "mn", str(TESTS / f"{name}.py"), "-v"],
                              capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    finally:
        for path in _left_in_tmp() - left:
            os.remove(path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OK" in done.stderr, done.stderr


def test_every_file_of_the_suite_is_run_or_said_why_not() -> None:
    assert set(NOT_RUN) <= set(_files()), set(NOT_RUN) - set(_files())

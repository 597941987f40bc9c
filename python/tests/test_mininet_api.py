"""Mininet's own API tests (its source tree's mininet/test/, which no package installs:
`scripts/mininet-sources` fetches the tarball of the installed mininet package from
Debian's archive into the machine's cache), as the measure of compatibility: each file
runs unchanged under `nsfleet mn` (its `mininet` imports answered by nsfleet), and the
`mn` command the walkthrough spawns is Mininet's own, run by `nsfleet mn` through an `mn`
placed first on PATH. Every test passes, or is skipped by Mininet's own test (IVS and the
reference user switch are not packaged), or is listed in `NOT_RUN` (and in docs/mininet.md)
with the reason it cannot."""

from __future__ import annotations

import ast
import os
import re
import subprocess
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from nsfleet import _binary
from test_mininet_suite import SHIM as EXAMPLES_SHIM

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = Path("/usr/share/doc/mininet/examples")


def _sources() -> Optional[Path]:
    """Mininet's source tree, where CI fetched it (None elsewhere)."""
    try:
        done = subprocess.run(["bash", str(REPO / "scripts" / "mininet-sources")],
                              capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    path = Path(done.stdout.strip()) if done.returncode == 0 else None
    return path if path is not None and (path / "mininet" / "test").is_dir() else None


SOURCES = _sources()
pytestmark = pytest.mark.skipif(SOURCES is None, reason="Mininet's source tree could not be fetched "
                                "(scripts/mininet-sources needs Debian's mininet package and its archive)")

# What does not pass, a whole file or one test (FILE.CLASS.TEST), and why; docs/mininet.md's
# table says the same.
NOT_RUN: Dict[str, str] = {
    "test_hifi": "netem for its links' delay and loss, which this kernel lacks",
    "test_walkthrough.testWalkthrough.testWireshark":
        "tshark is not installed here, and the test fails without it rather than skipping",
    "test_walkthrough.testWalkthrough.testLinkChange":
        "TCLink's delay needs netem, which this kernel lacks",
    "test_walkthrough.testWalkthrough.testOwnNamespace":
        "mn --innamespace: controllers in the namespaces of a control network",
    "test_walkthrough.testWalkthrough.testVerbosity":
        "at -v debug nsfleet's layer says about 40 lines (the topology it builds, the nodes' "
        "commands) where the test wants Mininet's 70 and more (every command it runs on the host)",
}

# Mininet's `mn` by `nsfleet mn`; `python -m mininet.examples.X` as the examples' suite has it.
SHIMS = {
    "mn": '#!/bin/sh\nexec "$NSFLEET" mn /usr/bin/mn "$@"\n',
    "python": EXAMPLES_SHIM,
}


def _files() -> list:
    return sorted(p.stem for p in (SOURCES / "mininet" / "test").glob("test_*.py")) if SOURCES else []


def _tests(path: Path) -> List[str]:
    """CLASS.TEST of each test a file defines itself (not those it inherits)."""
    tree = ast.parse(path.read_text())
    return [f"{c.name}.{f.name}" for c in tree.body if isinstance(c, ast.ClassDef)
            for f in c.body if isinstance(f, ast.FunctionDef) and f.name.startswith("test")]


def _run(tmp_path: Path, name: str) -> "subprocess.CompletedProcess[str]":
    """The file's tests under `nsfleet mn`, but those `NOT_RUN` names."""
    assert SOURCES is not None
    shims = tmp_path / "bin"
    shims.mkdir()
    for program, text in SHIMS.items():
        (shims / program).write_text(text)
        (shims / program).chmod(0o755)
    env = dict(os.environ, PATH=f"{shims}:{os.environ['PATH']}", NSFLEET=_binary.executable(),
               EXAMPLES=str(EXAMPLES))
    test = SOURCES / "mininet" / "test" / f"{name}.py"
    only: List[str] = []
    if any(k.startswith(f"{name}.") for k in NOT_RUN):
        for t in _tests(test):
            if f"{name}.{t}" not in NOT_RUN:
                only += ["-k", f"*.{t}"]
    return subprocess.run([_binary.executable(), "mn", str(test), "-v", *only], capture_output=True,
                          text=True, timeout=1800, env=env, cwd=tmp_path)


@pytest.mark.parametrize("name", [n for n in _files() if n not in NOT_RUN])
def test_mininets_own_api_test_passes(run_dir: Path, tmp_path: Path, name: str) -> None:
    done = _run(tmp_path, name)
    results = dict(re.findall(r"^\w+ \(__main__\.(\w+\.\w+)\)(?:\n[^\n]*?)? \.\.\. "
                              r"(ok|FAIL|ERROR|skipped '[^']*')$", done.stderr, re.M))
    assert results, done.stdout + done.stderr
    # Mininet's own skips: switches Debian does not package, a controller from the internet.
    failed = {t: r for t, r in results.items()
              if r != "ok" and not re.search(r"not installed|not reachable", r)}
    assert not failed, f"{failed}\n{done.stdout}\n{done.stderr}"
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_file_of_mininets_api_tests_is_run_or_said_why_not() -> None:
    assert SOURCES is not None
    named = {k.split(".")[0] for k in NOT_RUN}
    assert named <= set(_files()), named - set(_files())
    for key in (k for k in NOT_RUN if "." in k):
        file, test = key.split(".", 1)
        assert test in _tests(SOURCES / "mininet" / "test" / f"{file}.py"), key

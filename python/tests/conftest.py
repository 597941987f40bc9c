"""Fixtures of the Python tests: each test gets a run folder of its own (NSFLEET_RUN_DIR)
and unique fleet names, and whatever fleet it leaves up is brought down afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Iterator

import pytest

import nsfleet
from nsfleet import _binary


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("nsfleet needs root: these tests create network namespaces")
    d = tmp_path / "run"
    monkeypatch.setenv("NSFLEET_RUN_DIR", str(d))
    yield d
    # Whatever a failing test left up comes down, by the fleets this folder records.
    out = subprocess.run([_binary.executable(), "status", "--json"], capture_output=True,
                         text=True)
    if out.returncode == 0:
        for f in json.loads(out.stdout).get("fleets", []):
            subprocess.run([_binary.executable(), "down", f["name"]], capture_output=True)


@pytest.fixture
def name() -> str:
    """A fleet name no other test uses."""
    return f"py{uuid.uuid4().hex[:8]}"


@pytest.fixture
def pair(name: str) -> dict:
    """Two nodes on one link, as a dict."""
    return {
        "fleet": {"name": name},
        "node": [{"name": "a"}, {"name": "b"}],
        "link": [{"a": {"at": "a:eth0", "addrs": ["10.0.0.1/24"]},
                  "b": {"at": "b:eth0", "addrs": ["10.0.0.2/24"]}}],
    }


__all__ = ["nsfleet"]

"""Finding and running the `nsfleet` executable this package carries.

The wheel installs the executable next to Python's scripts (the virtual environment's
`bin/`); `NSFLEET_BIN` overrides it, and `PATH` is the last resort. Every call is one
process of the command-line tool with `--json`: the engine's behaviour and messages are
the tool's, never re-implemented here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path
from typing import Any, Optional, Sequence

from .errors import from_stderr

_found: Optional[str] = None


def executable() -> str:
    """The path of the `nsfleet` executable."""
    global _found
    if _found is not None:
        return _found
    candidates = [os.environ.get("NSFLEET_BIN"),
                  str(Path(sysconfig.get_path("scripts")) / "nsfleet"),
                  shutil.which("nsfleet")]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            _found = c
            return c
    raise FileNotFoundError(
        "the nsfleet executable is not installed with this package (pip install . from "
        "nsfleet's repository), not in NSFLEET_BIN and not on PATH")


def run(args: Sequence[str], input: Optional[str] = None) -> str:
    """Runs `nsfleet ARGS`; its standard output, or the exception of what it said."""
    done = subprocess.run([executable(), *args], input=input, capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise from_stderr(done.stderr, done.returncode)
    return done.stdout


def run_json(args: Sequence[str]) -> Any:
    """Runs `nsfleet ARGS --json` and parses what it prints."""
    return json.loads(run([*args, "--json"]))

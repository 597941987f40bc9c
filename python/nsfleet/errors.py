"""The exceptions nsfleet raises, carrying the engine's own message.

Every call runs the command-line tool with `--json`, which says each error as a JSON
object of its own on a line of stderr: `{"error": {"message", "file", "line", "column"}}`
(file null when the error is about no topology file, line and column null when it is
about no place in it). The place is read from those fields, never from the text.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional


class NsfleetError(Exception):
    """A command of nsfleet failed; `message` is what nsfleet said (without its
    `nsfleet: ` prefix) and `exit_status` its exit status."""

    def __init__(self, message: str, exit_status: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_status = exit_status


class ExpectationFailed(NsfleetError):
    """An expectation of a fleet (`Fleet.expect_ping`, ...) did not hold within its
    time: `expectation` as a scenario writes it, `seen` what was seen last, `took_s`
    how long it was tried. The fleet is as it was."""

    def __init__(self, expectation: str, seen: str, took_s: float) -> None:
        super().__init__(f"{expectation}: {seen}", 1)
        self.expectation = expectation
        self.seen = seen
        self.took_s = took_s


class TopologyError(NsfleetError):
    """An error at a place of a topology file: `file`:`line`:`column` (from 1). nsfleet
    refused the file before creating anything, or the kernel refused what the file
    asks there and the change was rolled back. `others` are the errors said with it
    (each a `TopologyError` where it has a place)."""

    def __init__(self, message: str, file: str, line: int, column: Optional[int] = None,
                 exit_status: int = 1,
                 others: Optional[List[NsfleetError]] = None) -> None:
        super().__init__(message, exit_status)
        self.file = file
        self.line = line
        self.column = column
        self.others: List[NsfleetError] = others or []

    def __str__(self) -> str:
        at = f"{self.file}:{self.line}:" + (f"{self.column}:" if self.column else "")
        return "\n".join([f"{at} {self.message}", *(str(o) for o in self.others)])


def _error_objects(stderr: str) -> List[Dict[str, Any]]:
    """The `error` objects of the lines of `stderr` that are one (notes and warnings are
    lines of text beside them)."""
    found = []
    for text in stderr.splitlines():
        try:
            obj = json.loads(text)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("error"), dict):
            found.append(obj["error"])
    return found


def _one(e: Dict[str, Any], exit_status: int) -> NsfleetError:
    """One error object as its exception: placed, or not."""
    message = str(e.get("message", ""))
    if e.get("file") is None or e.get("line") is None:
        return NsfleetError(message, exit_status)
    column = e.get("column")
    return TopologyError(message, str(e["file"]), int(e["line"]),
                         int(column) if column is not None else None, exit_status)


def from_stderr(stderr: str, exit_status: int) -> NsfleetError:
    """The exception for a failed command, from the errors it said on stderr: the first
    placed one, with every other in `others`; or, if none has a place, all in one."""
    errors = [_one(e, exit_status) for e in _error_objects(stderr)]
    if not errors:
        # A failure before nsfleet could say one (a usage error of the tool itself).
        lines = [l.removeprefix("nsfleet: ") for l in stderr.strip().splitlines() if l.strip()]
        return NsfleetError("\n".join(lines) or f"nsfleet exited with status {exit_status}",
                            exit_status)
    first = next((e for e in errors if isinstance(e, TopologyError)), None)
    if first is None:
        return NsfleetError("\n".join(e.message for e in errors), exit_status)
    first.others = [e for e in errors if e is not first]
    return first

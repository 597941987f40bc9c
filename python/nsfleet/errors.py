"""The exceptions nsfleet raises, carrying the engine's own message."""

from __future__ import annotations

import re
from typing import Optional

# `FILE:LINE:COL: message` or `FILE:LINE: message`, as nsfleet names a topology error.
_AT_LINE = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<msg>.*)$", re.S)


class NsfleetError(Exception):
    """A command of nsfleet failed; `message` is what nsfleet said (without its
    `nsfleet: ` prefix) and `exit_status` its exit status."""

    def __init__(self, message: str, exit_status: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_status = exit_status


class TopologyError(NsfleetError):
    """A topology nsfleet refused before creating anything, at `file`:`line`."""

    def __init__(self, message: str, file: str, line: int, column: Optional[int] = None,
                 exit_status: int = 1) -> None:
        super().__init__(message, exit_status)
        self.file = file
        self.line = line
        self.column = column


def from_stderr(stderr: str, exit_status: int) -> NsfleetError:
    """The exception for a failed command, from what it wrote on its standard error."""
    lines = [l.removeprefix("nsfleet: ") for l in stderr.strip().splitlines() if l.strip()]
    text = "\n".join(lines) or f"nsfleet exited with status {exit_status}"
    first = _AT_LINE.match(lines[0]) if lines else None
    if first is not None:
        col = first.group("col")
        return TopologyError(text, first.group("file"), int(first.group("line")),
                             int(col) if col else None, exit_status)
    return NsfleetError(text, exit_status)

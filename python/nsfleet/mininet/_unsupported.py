"""What nsfleet's Mininet does not have, refused at the user's line, before anything
exists; and what it maps to something else, said once."""

from __future__ import annotations

import os
import sys
import traceback

from ..errors import NsfleetError

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_said: set = set()


class Unsupported(NsfleetError):
    """A Mininet feature nsfleet does not have; `file` and `line` are the script's."""

    def __init__(self, feature: str, why: str) -> None:
        file, line = _callers_line()
        super().__init__(f"{file}:{line}: {feature} is not available on nsfleet: {why}")
        self.feature = feature
        self.file = file
        self.line = line


def _callers_line() -> "tuple[str, int]":
    """The innermost frame outside this package: the user's script."""
    for frame in reversed(traceback.extract_stack()):
        if not os.path.abspath(frame.filename).startswith(_PACKAGE):
            return frame.filename, frame.lineno or 0
    return "<unknown>", 0


def once(key: str, message: str) -> None:
    """Says `message` on standard error the first time `key` comes up."""
    if key not in _said:
        _said.add(key)
        sys.stderr.write(f"nsfleet.mininet: {message}\n")

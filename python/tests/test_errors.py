"""How a failed command's stderr becomes an exception: places from the JSON fields."""

from __future__ import annotations

import json

from nsfleet.errors import NsfleetError, TopologyError, from_stderr


def _line(message: str, file: object = None, line: object = None, column: object = None) -> str:
    return json.dumps({"error": {"message": message, "file": file, "line": line,
                                 "column": column}})


def test_the_first_placed_error_carries_the_others() -> None:
    stderr = "\n".join([
        "nsfleet: warning: a key containerlab knows and nsfleet does not apply",
        _line("node name \"a b\" ...", "lab.toml", 4, 6),
        _line("pool overlaps", "lab.toml", 9, 1),
        _line("... and 3 more errors", "lab.toml"),
    ])
    e = from_stderr(stderr, 1)
    assert isinstance(e, TopologyError)
    assert (e.file, e.line, e.column, e.message) == ("lab.toml", 4, 6, "node name \"a b\" ...")
    assert [type(o) for o in e.others] == [TopologyError, NsfleetError]
    assert str(e).splitlines()[0] == "lab.toml:4:6: node name \"a b\" ..."
    assert str(e).splitlines()[-1] == "... and 3 more errors"


def test_errors_without_a_place_are_one_nsfleet_error() -> None:
    e = from_stderr(_line("no fleet named \"x\"") + "\n", 1)
    assert type(e) is NsfleetError and e.message == "no fleet named \"x\""
    usage = from_stderr("error: unexpected argument '--bogus' found\n", 2)
    assert type(usage) is NsfleetError and usage.exit_status == 2

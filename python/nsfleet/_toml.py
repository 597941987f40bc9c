"""A topology given as a Python dict, written as the TOML nsfleet reads.

Only what topology files use: tables, arrays of tables, and inline values (strings,
numbers, booleans, arrays, inline tables). Python reads TOML (`tomllib`) but does not
write it, and a dependency for this much is not worth carrying.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def dumps(doc: Mapping[str, Any]) -> str:
    """`doc` as TOML text."""
    out: list[str] = []
    for key, value in doc.items():
        if not _is_table(value) and not _is_table_array(value):
            out.append(f"{_key(key)} = {_inline(value)}")
    for key, value in doc.items():
        if _is_table(value):
            out.append(f"\n[{_key(key)}]")
            out.extend(_body(value))
        elif _is_table_array(value):
            for item in value:
                out.append(f"\n[[{_key(key)}]]")
                out.extend(_body(item))
    return "\n".join(out).lstrip("\n") + "\n"


def _body(table: Mapping[str, Any]) -> list[str]:
    return [f"{_key(k)} = {_inline(v)}" for k, v in table.items()]


def _is_table(v: Any) -> bool:
    return isinstance(v, Mapping)


def _is_table_array(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and len(v) > 0 and all(isinstance(i, Mapping) for i in v)


def _key(k: Any) -> str:
    if not isinstance(k, str):
        raise TypeError(f"a topology key must be a string, not {k!r}")
    return k if _BARE.match(k) else json.dumps(k)


def _inline(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_inline(i) for i in v) + "]"
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{_key(k)} = {_inline(x)}" for k, x in v.items()) + " }"
    if hasattr(v, "__fspath__"):
        return json.dumps(str(v))
    raise TypeError(f"a topology value must be text, a number, a boolean, a list or a dict, not {v!r}")

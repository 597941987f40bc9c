"""Mininet's logging: `setLogLevel('info')`, `info(...)`, `output(...)`... Messages are
written as given (Mininet's callers end their own lines)."""

from __future__ import annotations

import sys
from typing import Any

LEVELS = {"debug": 10, "info": 20, "output": 25, "warning": 30, "warn": 30, "error": 40,
          "critical": 50}
_level = LEVELS["output"]


def setLogLevel(level: str = "output") -> None:
    global _level
    if level not in LEVELS:
        raise ValueError(f"unknown log level {level!r}: one of {', '.join(LEVELS)}")
    _level = LEVELS[level]


def enabled(level: str) -> bool:
    """Whether messages of `level` are shown."""
    return LEVELS[level] >= _level


def _say(level: str, *args: Any) -> None:
    if LEVELS[level] >= _level:
        sys.stdout.write(" ".join(str(a) for a in args))
        sys.stdout.flush()


def debug(*args: Any) -> None:
    _say("debug", *args)


def info(*args: Any) -> None:
    _say("info", *args)


def output(*args: Any) -> None:
    _say("output", *args)


def warn(*args: Any) -> None:
    _say("warning", *args)


warning = warn


def error(*args: Any) -> None:
    _say("error", *args)


class _Lg:
    """`mininet.log.lg`: the same functions as methods."""
    debug = staticmethod(debug)
    info = staticmethod(info)
    output = staticmethod(output)
    warn = staticmethod(warn)
    warning = staticmethod(warn)
    error = staticmethod(error)
    setLogLevel = staticmethod(setLogLevel)


lg = _Lg()

"""Mininet's cleanup: nothing to do here, since an nsfleet network leaves nothing behind
(`nsfleet clean` removes what a crashed supervisor left). Callbacks a script adds are
still run, as Mininet runs them."""

from __future__ import annotations

from typing import Callable, List

_callbacks: List[Callable[[], None]] = []


def addCleanupCallback(callback: Callable[[], None]) -> None:
    """Runs `callback` at each `cleanup()`."""
    if callback not in _callbacks:
        _callbacks.append(callback)


def cleanup() -> None:
    for callback in _callbacks:
        callback()


class Cleanup:
    @classmethod
    def cleanup(cls) -> None:
        cleanup()

    @classmethod
    def addCleanupCallback(cls, callback: Callable[[], None]) -> None:
        addCleanupCallback(callback)

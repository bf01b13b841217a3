"""Injected time: event timestamps and TTLs read a clock, never ``time`` directly."""

from __future__ import annotations

import threading
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "FakeClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """What the runtime reads time from."""

    def now(self) -> float:
        """Wall-clock seconds since the epoch (journaled in events)."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary start that never go backwards."""
        ...


class SystemClock:
    """The real clock: ``time.time()`` and ``time.monotonic()``."""

    def now(self) -> float:
        """Wall-clock seconds since the epoch."""
        return time.time()

    def monotonic(self) -> float:
        """Monotonic seconds."""
        return time.monotonic()


class FakeClock:
    """A clock for tests that moves only when told to.

    ``advance`` moves both readings and runs no callbacks: code that acts on time
    (session sweeps) is called explicitly after advancing.
    """

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        """Start the wall reading at ``start`` and the monotonic one at 0."""
        self._lock = threading.Lock()
        self._now = start
        self._monotonic = 0.0

    def now(self) -> float:
        """The current fake wall time."""
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        """The current fake monotonic time."""
        with self._lock:
            return self._monotonic

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` (which must not be negative)."""
        if seconds < 0:
            msg = f"a FakeClock only moves forward; got {seconds}"
            raise ValueError(msg)
        with self._lock:
            self._now += seconds
            self._monotonic += seconds

    def __repr__(self) -> str:
        return f"FakeClock(now={self._now!r})"

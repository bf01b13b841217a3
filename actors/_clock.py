"""Injected time: event timestamps and TTLs read a clock, never ``time`` directly."""

from __future__ import annotations

import threading
import time
from typing import Final, Protocol, runtime_checkable

__all__ = ["MAX_WAIT", "Clock", "FakeClock", "SystemClock", "bounded_wait"]

MAX_WAIT: Final = 1e9
"""The longest wait in seconds (~31 years): a thread cannot wait past ``threading.TIMEOUT_MAX``
(~9.2e9 s), and the runtime waits up to five times ``call_timeout`` for a close."""


def bounded_wait(timeout: float, default: float) -> float:
    """``timeout`` seconds, at most ``MAX_WAIT`` (``inf`` too); ``default`` when not positive (NaN too)."""
    return min(timeout, MAX_WAIT) if timeout > 0 else default


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

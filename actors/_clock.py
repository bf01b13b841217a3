"""Injected time: event timestamps and TTLs read a clock, never ``time`` directly."""

from __future__ import annotations

import math
import numbers
import reprlib
import threading
import time
from typing import Final, Protocol, runtime_checkable

from ._errors import ClockError

__all__ = ["MAX_WAIT", "CheckedClock", "Clock", "FakeClock", "SystemClock", "bounded_wait", "wall_time"]

MAX_WAIT: Final = 1e9
"""The longest wait in seconds (~31 years): a thread cannot wait past ``threading.TIMEOUT_MAX``
(~9.2e9 s), and the runtime waits up to five times ``call_timeout`` for a close."""


def bounded_wait(timeout: float, default: float) -> float:
    """``timeout`` seconds, at most ``MAX_WAIT`` (``inf`` too); ``default`` when not positive (NaN too).

    Raises:
        TypeError: ``timeout`` is not a real number (a bool or a numeric string is not one).

    """
    kind = type(timeout)
    if kind is not float and kind is not int:
        if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
            msg = f"a timeout is a number of seconds, got {kind.__name__} {reprlib.repr(timeout)}"
            raise TypeError(msg)
        timeout = float(timeout)  # a numpy number, a Fraction
    return min(timeout, MAX_WAIT) if timeout > 0 else default


@runtime_checkable
class Clock(Protocol):
    """What the runtime reads time from."""

    def now(self) -> float:
        """Wall-clock seconds since the epoch (journaled in events)."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary start that never go backwards.

        Required, but not read by the runtime today: its timeouts (a request's,
        ``call_timeout``, a wait for room in a mailbox) are real seconds whatever the clock.
        """
        ...


def wall_time(
    value: object, what: str = "the clock's now() must give finite seconds since the epoch"
) -> float:
    """``value`` as a wall time to journal: a finite float; ``what`` says what it must be.

    Raises:
        ClockError: ``value`` is not a real number (a bool is not one either), is not
            finite, or is an int past a float's range.

    """
    if type(value) is float and math.isfinite(value):
        return value
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except OverflowError:
            seconds = math.inf
        if math.isfinite(seconds):
            return seconds
    shown = f"{type(value).__name__} {reprlib.repr(value)}"
    msg = f"{what}, got {shown}"
    raise ClockError(msg)


class CheckedClock:
    """The runtime's view of a user's clock: every wall reading is checked before it is journaled.

    A reading the journal could not store, or that replay would refuse (see
    ``wall_time``), raises ``ClockError`` at the call that needed it, which then
    changes nothing.
    """

    __slots__ = ("clock",)
    clock: Clock

    def __init__(self, clock: Clock) -> None:
        """Wrap ``clock``, which must have callable ``now`` and ``monotonic``.

        Raises:
            ClockError: ``clock`` lacks them, or its first ``now()`` is not a wall time.

        """
        if isinstance(clock, CheckedClock):
            clock = clock.clock
        missing = [name for name in ("now", "monotonic") if not callable(getattr(clock, name, None))]
        if missing:
            msg = f"a clock needs now() and monotonic(); {type(clock).__name__} lacks {', '.join(missing)}"
            raise ClockError(msg)
        self.clock = clock
        self.now()

    @classmethod
    def wrap(cls, clock: Clock) -> Clock:
        """``clock`` ready for the runtime: checked, unless it is one whose readings always are.

        A ``SystemClock`` (``time.time()``) or a ``FakeClock`` (which checks what it is
        given) is used as it is, saving a call per journaled reading.

        Raises:
            ClockError: as the constructor.

        """
        if type(clock) in (SystemClock, FakeClock) or isinstance(clock, CheckedClock):
            return clock
        return cls(clock)

    def now(self) -> float:
        """The wrapped clock's wall time, checked; what its ``now()`` raises is a ``ClockError`` too."""
        try:
            value = self.clock.now()
        except Exception as exc:
            msg = f"the clock's now() failed: {exc!r}"
            raise ClockError(msg) from exc
        return wall_time(value)

    def monotonic(self) -> float:
        """The wrapped clock's monotonic reading."""
        return self.clock.monotonic()


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
    (session sweeps) is called explicitly after advancing (a runtime on a FakeClock
    starts no session ticker: ``runtime.memory.sweep()``). Timeouts stay real seconds.
    """

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        """Start the wall reading at ``start`` and the monotonic one at 0.

        Raises:
            ClockError: ``start`` is not a finite real number.

        """
        self._lock = threading.Lock()
        self._now = wall_time(start, "a FakeClock's start must be finite seconds since the epoch")
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
        """Move time forward by ``seconds`` (which must not be negative).

        Raises:
            ClockError: ``seconds`` is not a finite real number, or the time it would
                reach is past a float's range.
            ValueError: ``seconds`` is negative.

        """
        step = wall_time(seconds, "a FakeClock advances by a finite number of seconds")
        if step < 0:
            msg = f"a FakeClock only moves forward; got {seconds}"
            raise ValueError(msg)
        with self._lock:
            # an overflow to inf is refused, not stored
            now = wall_time(self._now + step, "a FakeClock cannot advance past a float's range")
            self._now = now
            self._monotonic += step

    def __repr__(self) -> str:
        return f"FakeClock(now={self._now!r})"

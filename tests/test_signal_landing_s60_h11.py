"""The signal sweeps land only where a real signal can (``tests/test_interrupt_sweep_s58_h1.py``).

Their tracer raises at a ``'line'`` event. In CPython 3.11 the ``NOP`` a ``try:`` line
compiles to, directly inside a ``with`` (or another ``try``), is covered by no handler: an
exception raised there skips the ``with``'s ``__exit__`` (a lock stays taken) or the outer
``finally``, which no real signal can do (the eval loop delivers one only where an
instruction that does something runs). The sweeps skip those landings and count them; they
still land on every plain line, and on a ``try:`` whose handler is the line's before it.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import weakref
from typing import TYPE_CHECKING, Any

from cogfabric.actors._agent import MailboxSlots
from tests import test_interrupt_sweep_s58_h1 as sweep

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import CodeType, FrameType

_lock = threading.Lock()
_done: list[int] = []


def _with_try() -> None:
    with _lock:
        _done.append(1)
        try:
            _done.append(2)
        finally:
            _done.append(3)


def _with_try_first() -> None:
    with _lock:
        try:
            _done.append(2)
        except ValueError:
            _done.append(0)


def _with_if_try() -> None:
    with _lock:
        if _done is not None:
            try:
                _done.append(2)
            finally:
                _done.append(3)


def _with_try_return() -> bool:
    with _lock:
        _done.append(1)
        try:
            if _done:
                return False
        finally:
            _done.append(3)
    return True


def _acquire_try() -> None:
    _lock.acquire()
    try:  # a real signal lands here too: as acquire() returns
        _done.append(2)
    finally:
        _lock.release()


def _try_in_try() -> None:
    _lock.acquire()
    try:
        try:
            _done.append(2)
        finally:
            _done.append(3)
    finally:
        _lock.release()


@contextlib.contextmanager
def _held() -> Iterator[None]:
    _lock.acquire()
    try:
        yield
        _done.append(4)
    finally:
        _lock.release()


def _with_a_generator() -> None:
    with _held():
        _done.append(2)


class _Lines(sweep._Landing):
    """The sweeps' landing, in this module's functions, raising the ``KeyboardInterrupt`` itself."""

    def __init__(self, n: int, codes: set[CodeType]) -> None:
        super().__init__(n)
        self.codes = codes
        self.line = ""

    def calls(self, frame: FrameType, event: str, arg: object) -> Callable[..., Any] | None:  # noqa: ARG002
        return self.lines_of if event == "call" and frame.f_code in self.codes else None

    def lines_of(self, frame: FrameType, event: str, arg: object) -> Callable[..., Any] | None:
        if event == "line" and self.lines == self.n - 1 and not self.fired:
            with open(frame.f_code.co_filename, encoding="utf-8") as source:  # noqa: PTH123
                self.line = source.read().splitlines()[frame.f_lineno - 1].strip()
        return super().lines_of(frame, event, arg)

    def land(self) -> None:
        raise KeyboardInterrupt


def _landings(function: Callable[[], object], *more: Callable[..., Any]) -> list[tuple[str, str, bool]]:
    """Each line ``function`` (and ``more``) runs, in order: (its text, landed or skipped, lock kept)."""
    codes = {getattr(f, "__wrapped__", f).__code__ for f in (function, *more)}
    seen: list[tuple[str, str, bool]] = []
    n = 1
    while True:
        landing = _Lines(n, codes)
        found = sys.gettrace()
        sys.settrace(landing.calls)
        try:
            function()
        except KeyboardInterrupt:
            assert landing.fired
        finally:
            sys.settrace(found)
        kept = _lock.locked()
        if kept:
            _lock.release()
        if not landing.fired and not landing.skipped:
            return seen
        seen.append((landing.line, "skipped" if landing.skipped else "landed", kept))
        n += 1


LANDED, SKIPPED = "landed", "skipped"


def test_a_try_directly_inside_a_with_is_skipped_and_every_plain_line_landed() -> None:
    assert _landings(_with_try) == [
        ("with _lock:", LANDED, False),
        ("_done.append(1)", LANDED, False),
        ("try:", SKIPPED, False),  # raised there, the lock stayed taken
        ("_done.append(2)", LANDED, False),
        ("_done.append(3)", LANDED, False),
        # the with's way out, before __exit__: a 3.11 signal lands after it (kept, as 3.10's could)
        ("with _lock:", LANDED, True),
    ]
    assert _landings(_with_try_first)[1] == ("try:", SKIPPED, False)


def test_a_try_in_an_if_in_a_with_is_skipped_not_the_if() -> None:
    assert [(line, how) for line, how, _ in _landings(_with_if_try)][:4] == [
        ("with _lock:", LANDED),
        ("if _done is not None:", LANDED),  # its handler is the with's
        ("try:", SKIPPED),
        ("_done.append(2)", LANDED),
    ]


def test_a_return_through_a_finally_inside_a_with_is_skipped() -> None:
    # its NOP has no handler either: raised there, neither the finally nor __exit__ runs
    assert [(line, how) for line, how, _ in _landings(_with_try_return)][2:6] == [
        ("try:", SKIPPED),
        ("if _done:", LANDED),
        ("return False", SKIPPED),
        ("_done.append(3)", LANDED),
    ]


def test_a_try_after_an_acquire_is_landed_as_a_real_signal_lands_there() -> None:
    # handled as acquire()'s return, where a real signal is delivered: the lock is kept either way
    assert _landings(_acquire_try) == [
        ("_lock.acquire()", LANDED, False),
        ("try:  # a real signal lands here too: as acquire() returns", LANDED, True),
        ("_done.append(2)", LANDED, False),
        ("_lock.release()", LANDED, True),  # before release() is called: as 3.10's could
    ]


def test_a_try_in_a_try_after_an_acquire_is_landed_both() -> None:
    assert [(line, how) for line, how, _ in _landings(_try_in_try)][:4] == [
        ("_lock.acquire()", LANDED),
        ("try:", LANDED),  # as acquire() returns
        ("try:", LANDED),  # no handler either: as the outer one, as acquire() returns
        ("_done.append(2)", LANDED),
    ]


def test_a_context_managers_generator_is_landed_at_each_line() -> None:
    landings = _landings(_with_a_generator, _held)
    assert ("try:", SKIPPED, False) not in landings  # after acquire(): landed
    assert ("_done.append(4)", LANDED, False) in landings  # after the yield: its finally runs
    assert all(how == LANDED for _, how, _ in landings)


def test_the_runtimes_try_in_a_mailbox_slots_with_is_not_landed_on() -> None:
    # MailboxSlots.acquire: `with self._lock:` / `if ...:` / `try:` ... `return False` / `finally:`
    # (raised at either, the lock would stay taken: close() then waits for it for good)
    code = MailboxSlots.acquire.__code__
    skipped = sorted({line for start, _, line in code.co_lines() if line and sweep._artificial(code, start)})
    with open(code.co_filename, encoding="utf-8") as source:  # noqa: PTH123
        lines = source.read().splitlines()
    assert [lines[n - 1].strip().split()[0] for n in skipped] == ["try:", "return"]


class _Dropped:
    pass


def test_a_landing_in_a_finalizer_the_collector_runs_is_skipped_not_one_called_directly() -> None:
    # Python drops what such a finalizer raises ("Exception ignored in"): a SIGTERM whose
    # handler exits, landed in a journal's writer-lock release run so, was lost (a slow
    # close sweep's intermittent "the Ctrl-C was lost ... _lmdb.py release")
    seen: list[bool] = []

    def finalizer() -> None:
        seen.append(sweep._collecting(sys._getframe()))

    dropped = _Dropped()
    weakref.finalize(dropped, finalizer)
    del dropped  # collected at once: its refcount is 0
    called = weakref.finalize(_kept, finalizer)
    called()
    assert seen == [True, False]
    assert not sweep._collecting(sys._getframe())


_kept = _Dropped()

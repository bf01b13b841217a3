"""A Ctrl-C at any point a real signal lands in a plain ``Journal.close()`` is finished by the next close.

``close()`` promises that a Ctrl-C stopping it leaves the journal closed to its users and
the path open in this process only until a second ``close()`` finishes it (helper h1,
session 61). It did not when the Ctrl-C landed once the environment was closed:
``_released`` was set before the writer lock was let go, so the second ``close()``
returned at once with the lock still held (until the journal was collected), and a
Ctrl-C inside ``_WriterLock.release`` (as ``_HELD.discard`` or ``os.ftruncate``
returned, or as ``contextlib.suppress`` began) lost the descriptor for good: every later
``Journal.open`` of the path in the process said ``JournalLockedError`` ("held by another
writer (process <its own pid>)").

The landings are the points a CPython 3.11+ signal is delivered at: as a function of the
store's (or one it calls) starts, as a call made from the store's code returns, after a
backward jump; the ``KeyboardInterrupt`` is Python's own handler's, from a real SIGINT.
"""

from __future__ import annotations

import dis
import functools
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric import store
from cogfabric.store import Journal
from tests.test_interrupt_hold_s58_h1 import (  # autouse: Python's own SIGINT handler, then as found
    _sigint_as_found as _sigint_as_found,  # noqa: PLC0414
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from types import CodeType, FrameType

_HERE = os.path.dirname(str(store.__file__))  # noqa: PTH120 - as co_filename spells it
_STORE = (_HERE + os.sep, os.path.realpath(_HERE) + os.sep)
_AFTER = frozenset({"CALL", "CALL_FUNCTION_EX", "JUMP_BACKWARD"})
"""The instructions a 3.11+ eval loop checks for a signal after (a call's return, a loop's jump)."""
WAIT = 10.0


def _of_store(code: CodeType) -> bool:
    return code.co_filename.startswith(_STORE)


@functools.cache
def _opnames(code: CodeType) -> dict[int, str]:
    return {i.offset: i.opname for i in dis.get_instructions(code)}


class _RealLanding:
    """A tracer that sends SIGINT at the ``n``-th point a real signal can land in the store's code."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.points = 0
        self.where = ""
        self._last: dict[int, int] = {}
        """Each traced frame's last instruction, by the frame's id."""

    def _point(self, frame: FrameType, how: str) -> None:
        self.points += 1
        if self.points == self.n:
            self.where = f"{frame.f_code.co_name}:{frame.f_lineno} ({how})"
            signal.raise_signal(signal.SIGINT)  # Python's handler: KeyboardInterrupt, raised here

    def calls(self, frame: FrameType, event: str, arg: object) -> Callable[..., Any] | None:  # noqa: ARG002
        if event != "call" or self.where:
            return None
        ours = _of_store(frame.f_code)
        if not ours and not (frame.f_back is not None and _of_store(frame.f_back.f_code)):
            return None
        self._point(frame, "as it starts")  # RESUME: of the store's, or of a function it calls
        if not ours:
            return None
        frame.f_trace_lines = False
        frame.f_trace_opcodes = True
        return self.opcodes

    def opcodes(self, frame: FrameType, event: str, arg: object) -> Callable[..., Any] | None:  # noqa: ARG002
        if event == "opcode" and not self.where:
            last = self._last.get(id(frame))
            self._last[id(frame)] = frame.f_lasti
            if last is not None and _opnames(frame.f_code).get(last) in _AFTER:
                self._point(frame, f"after {_opnames(frame.f_code)[last]}")
        return self.opcodes


def _on_a_thread(work: Callable[[], object]) -> object:
    """``work()``'s result or exception; ``TimeoutError`` if it does not end in ``WAIT`` s."""
    done: list[object] = []
    thread = threading.Thread(target=lambda: done.append(_result(work)), daemon=True)
    thread.start()
    thread.join(WAIT)
    return done[0] if done else TimeoutError("hangs")


def _result(work: Callable[[], object]) -> object:
    try:
        return work()
    except Exception as exc:  # noqa: BLE001 - reported
        return exc


def _interrupted_close(journal: Journal, n: int) -> _RealLanding:
    """Close ``journal`` with a SIGINT at the ``n``-th point (none if it has fewer); where it landed."""
    landing = _RealLanding(n)
    found = sys.gettrace()
    sys.settrace(landing.calls)
    try:
        journal.close()
    except KeyboardInterrupt:
        pass
    finally:
        sys.settrace(found)
    return landing


def _land(path: Path, n: int) -> tuple[_RealLanding, list[str]]:
    """Close a journal at ``path`` with a SIGINT at the ``n``-th point; then close and reopen it."""
    journal = Journal.open(path)
    landing = _interrupted_close(journal, n)
    problems = []
    closing = _on_a_thread(journal.close)
    if closing is not None:
        problems.append(f"a second close() gave {closing!r}")
    if not journal.closed:
        problems.append("not closed")
    opened = _on_a_thread(lambda: Journal.open(path).close())
    if opened is not None:
        problems.append(f"a reopen gave {opened!r}")
    return landing, problems


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_ctrl_c_at_each_point_of_a_plain_close_is_finished_by_the_next_close(tmp_path: Path) -> None:
    failures: dict[str, list[str]] = {}
    n = 1
    while True:
        landing, problems = _land(tmp_path / str(n), n)
        if not landing.where:
            break
        if problems:
            failures[f"N={n} {landing.where}"] = problems
        n += 1
    assert n > 10  # landed: the release's own calls, the environment's close, the final sync
    assert not failures, f"{len(failures)} of {n - 1} landings: {failures}"

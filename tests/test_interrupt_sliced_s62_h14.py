"""A Ctrl-C that lands as a request's wait for its reply begins stops it within a slice (session 62, h14).

Python runs a signal's handler between two bytecodes. One that lands after the last of
them and before the lock wait in C begins does not stop that wait: a thread woken as the
main thread lets the GIL go to wait (an agent sending SIGINT from its ``on_message``, in
``test_mutation_s61_h2.py`` and ``test_sigterm_bus_s59.py``) sends it just then, and the
request waited out its whole timeout (10 s in those tests, one run in two) before its
``KeyboardInterrupt``. ``_thread.interrupt_main()`` is such a signal: its handler is due,
and nothing stops the wait it comes in.
"""

from __future__ import annotations

import _thread
import functools
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf
from cogfabric.actors import _interrupt
from tests.test_interrupt_hold_s58_h1 import (  # autouse: Python's own SIGINT handler, then as found
    _sigint_as_found as _sigint_as_found,  # noqa: PLC0414
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from cogfabric.events import IpcMessage

WAIT = 30.0

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def test_a_ctrl_c_due_as_a_requests_reply_wait_begins_stops_it_within_a_slice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    behaving, in_reply_wait = threading.Event(), threading.Event()
    real_wait = _interrupt.wait

    def noting(blocking: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        # the reply's: the commit's wait is over before the behavior begins (each slice looks again)
        if behaving.is_set() and threading.get_ident() == _interrupt.main_ident:
            in_reply_wait.set()
        return real_wait(blocking, *args, **kwargs)

    monkeypatch.setattr(_interrupt, "wait", noting)

    class Interrupting:
        def on_message(self, _ctx: cf.AgentContext, _message: IpcMessage) -> None:
            behaving.set()
            assert in_reply_wait.wait(WAIT)
            _thread.interrupt_main()  # due at the main thread's next bytecode: it waits in C

    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), behaviors={"i": Interrupting}) as rt:
        rt.spawn("a", behavior="i")
        began = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            rt.bus.request("app", "a", "ask", 1, timeout=WAIT)
        took = time.monotonic() - began
        rt.settle(WAIT)
        (letter,) = rt.bus.dead_letters()
    assert took < WAIT / 3, took  # 30 s before: the whole timeout
    assert letter.error.endswith("(Ctrl-C while waiting for its reply)")


def test_a_sliced_wait_answers_as_one_wait_would() -> None:
    done = threading.Event()
    calls: list[float] = []

    def waiting(seconds: float) -> bool:
        calls.append(seconds)
        return done.wait(seconds)

    assert _interrupt.wait_sliced(waiting, 0.3) is False  # outside a section: one call
    assert calls == [0.3]
    calls.clear()
    with _interrupt.HELD:
        assert _interrupt.wait_sliced(waiting, 0.3) is False
        assert calls[0] == _interrupt.SLICE
        assert len(calls) == 2
        assert sum(calls) == pytest.approx(0.3, abs=0.05)
        done.set()
        assert _interrupt.wait_sliced(waiting, WAIT) is True
        lock = threading.Lock()
        assert _interrupt.wait_sliced(functools.partial(lock.acquire, True), 0.3) is True  # a lock's form
        assert _interrupt.wait_sliced(functools.partial(lock.acquire, True), 0.3) is False
    assert _interrupt._waiting is False

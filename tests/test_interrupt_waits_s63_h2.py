"""A Ctrl-C in the runtime's waits: raised within a slice, and as KeyboardInterrupt (session 63, h2).

Two gaps were left. A signal that lands as a wait in C begins (after Python's last
look for a handler to run) is handled only when that wait ends: ``settle()``'s wait,
``close()``'s and ``flush()``'s waits for actors, threads and futures were each one
wait, so such a Ctrl-C waited out their whole timeout. ``_thread.interrupt_main()``
from another thread makes one due that way: it sends no signal, so the wait in C is not
stopped. And ``threading.Condition.wait`` releases its lock a few lines before the
``try`` that takes it back (python/cpython#78667): a Ctrl-C between the two came out
of ``settle()`` or a full mailbox's wait as ``RuntimeError: release unlocked lock``. A
lock whose release makes a Ctrl-C due at the next bytecode lands it there.
"""

from __future__ import annotations

import _thread
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest
from freezegun import freeze_time

import cogfabric as cf
from cogfabric.actors import _interrupt
from cogfabric.actors._agent import InFlight, MailboxSlots
from tests.test_interrupt_hold_s58_h1 import (  # autouse: Python's own SIGINT handler, then as found
    _sigint_as_found as _sigint_as_found,  # noqa: PLC0414
)
from tests.test_settle_s55_h3 import Blocked, _config

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

WAIT = 10.0

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


class InterruptingLock:
    """A lock whose release on the main thread, once ``armed``, makes a Ctrl-C due at the next bytecode."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.armed = False

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self.lock.acquire(blocking, timeout)

    def release(self) -> None:
        self.lock.release()
        if self.armed and threading.get_ident() == _interrupt.main_ident:
            self.armed = False
            _thread.interrupt_main()

    def locked(self) -> bool:
        return self.lock.locked()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *_: object) -> None:
        self.release()


@pytest.fixture
def installed() -> Iterator[None]:
    """The runtime's SIGINT handler, as an open runtime installs it."""
    assert _interrupt.install()
    try:
        yield
    finally:
        if _interrupt.uninstall():
            _interrupt.put_back()


def test_a_ctrl_c_as_a_full_mailboxs_wait_lets_its_lock_go_comes_out_as_keyboard_interrupt(
    installed: None,  # noqa: ARG001
) -> None:
    slots = MailboxSlots(1)
    assert slots.acquire(0)
    lock = InterruptingLock()
    slots._lock = lock  # type: ignore[assignment]
    slots._room = type(slots._room)(lock)  # type: ignore[arg-type]
    lock.armed = True
    with pytest.raises(KeyboardInterrupt), _interrupt.HELD:  # as a send's (_admit's)
        slots.acquire(WAIT)  # RuntimeError: release unlocked lock, before
    assert not lock.armed
    assert not lock.locked()
    assert slots._waiters == 0
    slots.release()
    assert slots.acquire(0)  # and it works on


def test_a_ctrl_c_as_settles_wait_lets_its_lock_go_comes_out_as_keyboard_interrupt(tmp_path: Path) -> None:
    release, started = threading.Event(), threading.Event()
    try:
        with cf.Runtime.open(tmp_path / "j", config=_config()) as rt:
            rt.spawn("slow", behavior=Blocked(release, started))
            rt.bus.send("app", "slow", "k", 1)
            assert started.wait(WAIT)
            flight: InFlight = rt._in_flight
            lock = InterruptingLock()
            flight.lock = lock  # type: ignore[assignment]
            flight.zero = type(flight.zero)(lock)  # type: ignore[arg-type]
            lock.armed = True
            with pytest.raises(KeyboardInterrupt):
                rt.settle(WAIT)  # RuntimeError: release unlocked lock, before
            assert not lock.armed
            assert not lock.locked()
            assert flight.waiters == 0
            release.set()
            rt.settle(WAIT)  # and it works on
            assert rt.agent("slow").private("k") == 1
    finally:
        release.set()


def test_a_ctrl_c_due_as_settles_wait_begins_stops_it_within_a_slice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release, started, waiting = threading.Event(), threading.Event(), threading.Event()
    real_wait = _interrupt.wait

    def noting(blocking: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == _interrupt.main_ident:
            waiting.set()
        return real_wait(blocking, *args, **kwargs)

    class Interrupting:
        def on_message(self, _ctx: cf.AgentContext, _message: cf.IpcMessage) -> None:
            started.set()
            assert waiting.wait(WAIT)
            _thread.interrupt_main()  # due at the main thread's next bytecode: it waits in C
            assert release.wait(WAIT)

    try:
        with cf.Runtime.open(tmp_path / "j", behaviors={"i": Interrupting}, config=_config()) as rt:
            rt.spawn("a", behavior="i")
            rt.bus.send("app", "a", "go", 1)
            assert started.wait(WAIT)
            monkeypatch.setattr(_interrupt, "wait", noting)
            began = time.monotonic()
            with pytest.raises(KeyboardInterrupt):
                rt.settle(WAIT)
            took = time.monotonic() - began
            monkeypatch.undo()
            release.set()
            rt.settle(WAIT)
    finally:
        release.set()
    assert took < WAIT / 3, took  # the whole timeout, before


def test_a_sliced_wait_counts_its_slices_under_a_clock_that_stands_still() -> None:
    calls: list[float] = []

    def timed_out(seconds: float) -> bool:
        calls.append(seconds)
        assert len(calls) < 10, "the wait outlasted its timeout"  # before: on for ever
        return False

    with freeze_time("2024-01-01"), _interrupt.HELD:  # time.monotonic stands still
        assert _interrupt.wait_sliced(timed_out, 2.5 * _interrupt.SLICE) is False
    assert calls == pytest.approx([_interrupt.SLICE, _interrupt.SLICE, _interrupt.SLICE / 2])
    calls.clear()
    with _interrupt.HELD:
        assert _interrupt.wait_sliced(timed_out, 2 * _interrupt.SLICE) is False
        assert _interrupt.wait_sliced(timed_out, 0.0) is False  # one look
    assert calls == [_interrupt.SLICE, _interrupt.SLICE, 0.0]


def test_a_ctrl_c_due_as_close_waits_for_a_busy_agent_stops_it_within_a_slice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release, started, waiting = threading.Event(), threading.Event(), threading.Event()
    real_wait = _interrupt.wait

    def noting(blocking: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == _interrupt.main_ident:
            waiting.set()
        return real_wait(blocking, *args, **kwargs)

    class Interrupting:
        def on_message(self, _ctx: cf.AgentContext, _message: cf.IpcMessage) -> None:
            started.set()
            assert waiting.wait(WAIT)
            _thread.interrupt_main()  # due at the main thread's next bytecode: it waits in C
            assert release.wait(WAIT)

    rt = cf.Runtime.open(tmp_path / "j", behaviors={"i": Interrupting}, config=_config(call_timeout=WAIT))
    try:
        rt.spawn("a", behavior="i")
        rt.bus.send("app", "a", "go", 1)
        assert started.wait(WAIT)
        monkeypatch.setattr(_interrupt, "wait", noting)
        began = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            rt.close()  # its wait for the busy agent's stop
        took = time.monotonic() - began
        monkeypatch.undo()
    finally:
        release.set()
        rt.close()  # waits for what the interrupted one left
    assert took < WAIT / 3, took  # call_timeout, before


def test_a_ctrl_c_due_as_a_session_calls_wait_begins_stops_it_within_a_slice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release, waiting = threading.Event(), threading.Event()
    real_wait = _interrupt.wait

    def noting(blocking: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == _interrupt.main_ident:
            waiting.set()
        return real_wait(blocking, *args, **kwargs)

    rt = cf.Runtime.open(tmp_path / "j", config=_config(call_timeout=WAIT))
    try:
        real_drain = rt.memory._drain

        def stalled() -> None:  # the session actor, as the call waits for it
            if not release.is_set():
                assert waiting.wait(WAIT)
                _thread.interrupt_main()  # due at the main thread's next bytecode: it waits in C
                assert release.wait(WAIT)
            real_drain()

        monkeypatch.setattr(rt.memory, "_drain", stalled)
        monkeypatch.setattr(_interrupt, "wait", noting)
        began = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            rt.memory.create_session("u")
        took = time.monotonic() - began
        monkeypatch.setattr(_interrupt, "wait", real_wait)
        release.set()
        assert rt.memory.create_session("v")  # and it works on
    finally:
        release.set()
        rt.close()
    assert took < WAIT / 3, took  # call_timeout, before

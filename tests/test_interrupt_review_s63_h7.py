"""Review of ``_interrupt.Condition`` and ``_interrupt.Event`` (session 63, h7).

``Event`` kept ``threading.Event``'s methods, whose ``with self._cond:`` goes through
``threading.Condition.__enter__`` and ``__exit__``, Python functions: a Ctrl-C that lands
in them just after the lock is taken (or just before it is let go) left the event's lock
taken, and every later ``set`` or ``wait`` on any thread waited for good. A waiter that
``notify`` chose and that a Ctrl-C then took out of its wait took the wake-up with it,
and the next waiter slept on. Off the main thread a negative timeout was the lock's own
(-1: for ever; others: ``ValueError``), not ``threading.Condition``'s one look. The
condition's waiters were a deque of its own, which ``_at_fork_reinit`` did not clear.
And a request's wait for its reply, a plain ``threading.Event``'s, came out of a Ctrl-C
as its lock was let go as ``RuntimeError: release unlocked lock``.
"""

from __future__ import annotations

import _thread
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf
from cogfabric.actors import _bus, _interrupt
from tests.test_interrupt_hold_s58_h1 import (  # autouse: Python's own SIGINT handler, then as found
    _sigint_as_found as _sigint_as_found,  # noqa: PLC0414
)
from tests.test_interrupt_waits_s63_h2 import InterruptingLock
from tests.test_interrupt_waits_s63_h2 import installed as installed  # noqa: PLC0414
from tests.test_settle_s55_h3 import Blocked, _config

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

WAIT = 5.0

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


class InterruptingAcquire(InterruptingLock):
    """A lock whose acquire on the main thread, once ``armed``, makes a Ctrl-C due at the next bytecode."""

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        got = self.lock.acquire(blocking, timeout)
        if self.armed and threading.get_ident() == _interrupt.main_ident:
            self.armed = False
            _thread.interrupt_main()  # raised at the check after this call, the lock taken
        return got

    def release(self) -> None:
        self.lock.release()


def _in_thread(call: Callable[[], Any]) -> list[Any]:
    """``call()`` on a thread of its own: its answer or exception, once it returned (``WAIT`` s at most)."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(call())
        except Exception as exc:  # noqa: BLE001 - handed to the test
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(WAIT)
    assert not thread.is_alive(), "still waiting"
    return out


@pytest.mark.parametrize("call", ["set", "clear", "wait"])
def test_a_ctrl_c_as_an_events_lock_is_taken_leaves_it_free(
    installed: None,  # noqa: ARG001
    call: str,
) -> None:
    event = _interrupt.Event()
    lock = InterruptingAcquire()
    event._cond = _interrupt.Condition(lock)  # type: ignore[arg-type]
    lock.armed = True
    with pytest.raises(KeyboardInterrupt):
        getattr(event, call)(*([0.0] if call == "wait" else []))
    assert not lock.armed
    assert not lock.locked()  # before: taken for good, so that
    assert _in_thread(event.set) == [None]  # this waited for ever
    assert event.wait(0)


@pytest.mark.parametrize("timeout", [-1.0, -0.5, float("nan"), 0.0])
def test_a_timeout_of_zero_or_less_only_looks_off_the_main_thread(timeout: float) -> None:
    event = _interrupt.Event()
    assert _in_thread(lambda: event.wait(timeout)) == [False]  # -1: for ever, before; -0.5, NaN: ValueError
    lock = threading.Lock()
    condition = _interrupt.Condition(lock)

    def wait() -> bool:
        with lock:
            return condition.wait(timeout)

    assert _in_thread(wait) == [False]
    assert not condition._waiters


def test_an_event_set_as_its_wait_times_out_answers_its_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    event = _interrupt.Event()
    real = event._cond.wait

    def timed_out_as_set(_timeout: float | None = None) -> bool:
        event._flag = True  # set() as the wait timed out
        return real(0)

    monkeypatch.setattr(event._cond, "wait", timed_out_as_set)
    assert event.wait(WAIT) is True  # threading.Event: False, with its flag True


def test_a_waiter_a_ctrl_c_takes_out_of_its_wait_passes_its_wake_up_on(
    installed: None,  # noqa: ARG001
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lock = threading.Lock()
    condition = _interrupt.Condition(lock)
    main_waits, second_waits = threading.Event(), threading.Event()
    real_wait = _interrupt.wait

    def noting(blocking: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == _interrupt.main_ident:
            main_waits.set()
        return real_wait(blocking, *args, **kwargs)

    second: list[bool] = []

    def wait_second() -> None:
        assert main_waits.wait(WAIT)
        with lock:
            second_waits.set()  # it waits (lock let go) before the notifier can take the lock
            second.append(condition.wait(WAIT))

    def notify_first() -> None:
        assert second_waits.wait(WAIT)
        with lock:  # both wait: the main thread first
            _thread.interrupt_main()  # due as the main thread's wait ends (not a signal: it goes on)
            condition.notify()  # the main thread's wake-up

    threads = [threading.Thread(target=f, daemon=True) for f in (wait_second, notify_first)]
    for thread in threads:
        thread.start()
    monkeypatch.setattr(_interrupt, "wait", noting)
    with pytest.raises(KeyboardInterrupt), lock:
        condition.wait(WAIT)
    monkeypatch.undo()
    for thread in threads:
        thread.join(2 * WAIT)
    assert second == [True]  # before: [False], after WAIT s, a slot free meanwhile
    assert not lock.locked()
    assert not condition._waiters


def test_a_conditions_fork_reinit_forgets_its_waiters() -> None:
    lock = threading.Lock()
    condition = _interrupt.Condition(lock)
    parent_waits = threading.Event()
    out: list[bool] = []

    def parent() -> None:  # a thread a fork leaves behind
        with lock:
            parent_waits.set()
            out.append(condition.wait(WAIT))

    thread = threading.Thread(target=parent, daemon=True)
    thread.start()
    assert parent_waits.wait(WAIT)
    with lock:  # it waits
        stale = _sleepers(condition)
    assert "1)" in repr(condition)  # before: 0, its own deque
    condition._at_fork_reinit()  # type: ignore[attr-defined]
    assert "0)" in repr(condition)

    child_waits = threading.Event()

    def child() -> None:
        with lock:
            child_waits.set()
            out.append(condition.wait(WAIT))

    waiting = threading.Thread(target=child, daemon=True)
    waiting.start()
    assert child_waits.wait(WAIT)
    with lock:  # the child waits
        condition.notify()
    waiting.join(WAIT)
    assert out == [True]  # the child woke; before: the parent's forgotten waiter did
    for sleeper in stale:
        sleeper.release()
    thread.join(WAIT)


def test_a_ctrl_c_as_a_requests_reply_wait_lets_its_lock_go_comes_out_as_keyboard_interrupt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = InterruptingLock()
    real_init = _bus._Pending.__init__

    def armed(self: _bus._Pending, request: cf.IpcMessage) -> None:
        real_init(self, request)
        if request.topic == "armed":
            self.done._cond = type(self.done._cond)(lock)  # type: ignore[attr-defined]
            lock.armed = True

    release, started = threading.Event(), threading.Event()
    try:
        with cf.Runtime.open(tmp_path / "j", config=_config(call_timeout=WAIT)) as rt:
            rt.spawn("slow", behavior=Blocked(release, started))
            monkeypatch.setattr(_bus._Pending, "__init__", armed)
            with pytest.raises(KeyboardInterrupt):  # RuntimeError: release unlocked lock, before
                rt.bus.request("app", "slow", "armed", 1, timeout=WAIT)
            monkeypatch.undo()
            assert not lock.armed
            assert not lock.locked()
            release.set()
            rt.settle(WAIT)
            (letter,) = rt.bus.dead_letters()
            assert letter.error.endswith("(Ctrl-C while waiting for its reply)")
            assert rt.agent("slow").private("armed") == 1
    finally:
        release.set()


def _sleepers(condition: _interrupt.Condition) -> list[Any]:
    """Its waiters' locks (in a deque of its own at 6164ae8)."""
    return list(getattr(condition, "_sleepers", None) or condition._waiters)


def test_notify_wakes_n_waiters_the_longest_waiting_first_and_notify_all_the_rest() -> None:
    lock = threading.Lock()
    condition = _interrupt.Condition(lock)
    woke: list[int] = []
    threads: list[threading.Thread] = []

    def waiter(i: int, registered: threading.Event) -> None:
        with lock:
            registered.set()  # it waits (lock let go) before the next one takes the lock
            if condition.wait(WAIT):
                woke.append(i)

    for i in range(5):
        registered = threading.Event()
        threads.append(threading.Thread(target=waiter, args=(i, registered), daemon=True))
        threads[-1].start()
        assert registered.wait(WAIT)
        with lock:  # registered
            pass
    with lock:
        sleepers = _sleepers(condition)
        assert len(sleepers) == 5
        condition.notify()
        assert _sleepers(condition) == sleepers[1:]  # one, the first
        condition.notify(0)
        condition.notify(-1)
        assert _sleepers(condition) == sleepers[1:]
    threads[0].join(WAIT)
    assert woke == [0]
    with lock:
        condition.notify(2)
        assert _sleepers(condition) == sleepers[3:]
    threads[1].join(WAIT)
    threads[2].join(WAIT)
    assert sorted(woke) == [0, 1, 2]  # the two woken together, in either order
    with lock:
        condition.notify_all()  # both left
        assert not _sleepers(condition)
        condition.notify_all()  # none: nothing
    threads[3].join(WAIT)
    threads[4].join(WAIT)
    assert sorted(woke) == [0, 1, 2, 3, 4]
    assert not any(thread.is_alive() for thread in threads)


def test_a_wait_that_times_out_leaves_no_waiter_behind_and_wait_for_answers_its_last_look() -> None:
    lock = threading.Lock()
    condition = _interrupt.Condition(lock)
    looks = iter([False, True])
    with lock:
        assert condition.wait(0) is False
        assert condition.wait(1e-3) is False
        assert not _sleepers(condition)  # else the next notify wakes no one
        assert condition.wait_for(lambda: next(looks), 0) is True  # as threading.Condition's
        assert condition.wait_for(lambda: 0, -1) == 0


def test_a_ctrl_c_as_a_conditions_or_an_events_wait_lets_its_lock_go_comes_out_as_keyboard_interrupt(
    installed: None,  # noqa: ARG001
) -> None:
    lock = InterruptingLock()
    condition = _interrupt.Condition(lock)  # type: ignore[arg-type]
    lock.armed = True
    with pytest.raises(KeyboardInterrupt), lock:  # no section of the caller's: its own
        condition.wait(WAIT)  # RuntimeError: release unlocked lock, unheld
    assert not lock.locked()
    assert not _sleepers(condition)
    event = _interrupt.Event()
    event._cond = type(event._cond)(lock)  # type: ignore[arg-type]
    lock.armed = True
    with pytest.raises(KeyboardInterrupt):
        event.wait(WAIT)  # RuntimeError, had it threading.Event's condition
    assert not lock.locked()
    event.set()
    assert event.wait(WAIT)


def test_a_sliced_join_answers_whether_the_thread_ended() -> None:
    release = threading.Event()
    thread = threading.Thread(target=release.wait, args=(WAIT,), daemon=True)
    thread.start()
    try:
        with _interrupt.HELD:  # sliced: a thread alive after its first slice is waited for on
            assert _interrupt.join(thread, 1.5 * _interrupt.SLICE) is False
            assert thread.is_alive()
            release.set()
            assert _interrupt.join(thread, WAIT) is True
    finally:
        release.set()
        thread.join(WAIT)


def test_a_ctrl_c_due_as_a_requests_reply_wait_begins_stops_it_within_a_slice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    began, in_reply_wait = threading.Event(), threading.Event()
    real_wait = _interrupt.wait

    def noting(blocking: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        # the reply's: the commit's wait is over before the behavior begins (each slice looks again)
        if began.is_set() and threading.get_ident() == _interrupt.main_ident:
            in_reply_wait.set()
        return real_wait(blocking, *args, **kwargs)

    monkeypatch.setattr(_interrupt, "wait", noting)

    class Interrupting:
        def on_message(self, _ctx: cf.AgentContext, _message: cf.IpcMessage) -> None:
            began.set()
            assert in_reply_wait.wait(WAIT)
            _thread.interrupt_main()  # due at the main thread's next bytecode: it waits in C

    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), behaviors={"i": Interrupting}) as rt:
        rt.spawn("a", behavior="i")
        began_at = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            rt.bus.request("app", "a", "ask", 1, timeout=6 * WAIT)
        took = time.monotonic() - began_at
        rt.settle(WAIT)
        (letter,) = rt.bus.dead_letters()
    assert took < 2 * WAIT, took  # the whole timeout, unsliced
    assert letter.error.endswith("(Ctrl-C while waiting for its reply)")


def test_the_runtimes_waits_a_ctrl_c_may_stop_are_the_interrupt_safe_kinds(tmp_path: Path) -> None:
    # A plain threading.Event or Condition at any of these sites is one whose wait a Ctrl-C
    # leaves as RuntimeError (or its lock taken): each is waited for on the caller's thread.
    with cf.Runtime.open(tmp_path / "j") as rt:
        rt.spawn("a")
        writer = rt._core.writer
        assert writer is not None
        assert isinstance(writer._room, _interrupt.Condition)  # a full backlog
        assert isinstance(writer._ended, _interrupt.Event)  # close's wait for the writer
        assert isinstance(rt._close_done, _interrupt.Event)  # a second close's
        assert isinstance(rt._in_flight.zero, _interrupt.Condition)  # settle's
        assert isinstance(rt._entry("a").shared.slots._room, _interrupt.Condition)  # a full mailbox
        pending = _bus._Pending(cf.IpcMessage(at=0.0, sender="app", recipient="a", topic="t"))
        assert isinstance(pending.done, _interrupt.Event)  # a request's reply

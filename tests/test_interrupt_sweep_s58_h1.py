"""A Ctrl-C at every line of a public call: the runtime stays whole (README "From a notebook").

A tracer on the main thread counts the lines run in the runtime's own sources (actors/,
events/, store/) and raises a real SIGINT (``signal.raise_signal``) at the N-th, for
N = 1, 2, ... until the call runs through with the signal never raised. A signal, not a
``KeyboardInterrupt`` raised by the tracer: the runtime holds one that lands in a short
critical section until the section ends (``actors/_interrupt.py``), which it can only do
for a signal. After each landing: the call finished or raised ``KeyboardInterrupt``;
``settle()`` returns; every agent listed is reachable; the live state is the state a
reopen replays; ``close()`` returns, leaves no thread of the runtime running, and the
path opens again.

The full sweep is slow (``pytest -m slow``); the default suite runs every ``STRIDE``-th N.

A landing no real signal can make is skipped (and counted: ``_Sweep.skipped``). The tracer's
signal is delivered at a ``'line'`` event, so its exception is raised at the line's first
instruction, and handled by the exception-table entry covering it. A real signal is
delivered by the eval loop between two instructions that run (CPython 3.11 checks at a
call's return, a function's ``RESUME``, a backward jump), and handled as one of them is.
The two differ at a ``NOP`` the compiler leaves for a line number only, whose entry
CPython 3.11 does not always set: a ``try:`` directly inside a ``with`` (or inside another
``try``, or an ``if``) has no handler at all, so an exception raised there skips the
``with``'s ``__exit__`` (a lock stays taken) or the outer ``finally``. So a landing at a
``NOP`` whose handler is neither that of the instruction before it nor that of the one
after it (the last and first that do something) is skipped (``_artificial``): a real
signal there is raised at one of those. A plain line's first instruction does something,
and is never skipped; nor is a ``try:`` whose handler is the line's before it (after
``lock.acquire()``, say: a real signal can land there). Other landings that a 3.11 signal
cannot make (between two instructions with no check, such as a ``with`` block's last line
before its ``__exit__`` is called) are kept: Python 3.10's eval loop delivered there, and
the runtime holds them (``actors/_interrupt.py``).

A landing in a ``weakref.finalize`` callback the garbage collector runs (a journal collected
unclosed lets go of its writer lock so) is skipped too: Python drops ("Exception ignored
in") whatever a finalizer run so raises, a real signal's handler's as well, so the signal is
lost whatever the runtime does, at whatever line the collector happened to run.
"""

from __future__ import annotations

import dis
import functools
import os
import signal
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf
from cogfabric import events as _events
from cogfabric import store as _store
from cogfabric.actors import _runtime

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from types import CodeType, FrameType

WAIT = 10.0
HANG = 15.0
"""How long the checks after a landing, and close(), may take before they count as a hang."""
LEFT = 2.0
"""How long close()'s threads get to end once it returned (it joins them itself)."""
STRIDE = 23
"""The default suite's sample: every STRIDE-th landing (a prime, so no call's steps line up with it)."""

_ROOTS = tuple(
    os.path.dirname(str(module.__file__)) + os.sep  # noqa: PTH120 - as co_filename spells it
    for module in (_runtime, _events, _store)
)
_ROOTS += tuple(os.path.realpath(root) + os.sep for root in _ROOTS)


_Handler = tuple[int, int, bool] | None
"""An exception-table entry's handler: (target, stack depth, lasti), or None outside any."""


@functools.cache
def _handlers(code: CodeType) -> tuple[dict[int, _Handler], list[int]]:
    """``code``'s handler by instruction offset, and the offsets of its instructions that do something."""
    entries = vars(dis.Bytecode(code))["exception_entries"]  # not in typeshed
    handlers: dict[int, _Handler] = {}
    working = []
    for instruction in dis.get_instructions(code):
        offset = instruction.offset
        handlers[offset] = next(
            ((e.target, e.depth, e.lasti) for e in entries if e.start <= offset < e.end), None
        )
        if instruction.opname != "NOP":
            working.append(offset)
    return handlers, working


def _artificial(code: CodeType, offset: int) -> bool:
    """A landing at ``offset`` (a line's first instruction) that no real signal can make.

    A ``NOP`` whose handler is neither that of the instruction before it nor that of the one
    after it that do something (a ``try:`` in a ``with``, in CPython 3.11): see the module's
    docstring.
    """
    handlers, working = _handlers(code)
    if offset in working or offset not in handlers:
        return False
    before = [handlers[o] for o in working if o < offset][-1:]
    after = [handlers[o] for o in working if o > offset][:1]
    return handlers[offset] not in before + after


def _collecting(frame: FrameType | None) -> bool:
    """``frame`` runs in a ``weakref.finalize`` callback the garbage collector made (not a direct call)."""
    while frame is not None:
        if frame.f_code is weakref.finalize.__call__.__code__ and frame.f_locals.get("_") is not None:
            return True  # the collector passes the dead weakref; a direct call nothing
        frame = frame.f_back
    return False


class _Landing:
    """A tracer that raises SIGINT at the ``n``-th line run in the runtime's sources.

    Unless a real signal cannot land there (``_artificial``), or would be dropped by Python
    there (``_collecting``): then it raises nothing, and notes where (and why) in ``skipped``.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self.lines = 0
        self.fired = False
        self.skipped = ""
        """Where it did not land, as no real signal can (or none is raised): file, line and function."""
        self.where = ""
        """Where it landed: file, line and function."""

    def calls(self, frame: FrameType, event: str, arg: object) -> Callable[..., Any] | None:  # noqa: ARG002
        if event == "call" and frame.f_code.co_filename.startswith(_ROOTS):
            return self.lines_of
        return None

    def lines_of(self, frame: FrameType, event: str, arg: object) -> Callable[..., Any] | None:  # noqa: ARG002
        if event == "line" and not self.fired:
            self.lines += 1
            if self.lines == self.n:
                where = f"{frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}"
                if _artificial(frame.f_code, frame.f_lasti):
                    self.skipped = where
                    return self.lines_of
                if _collecting(frame):
                    self.skipped = f"{where} (in a finalizer the collector ran)"
                    return self.lines_of
                self.fired = True
                self.where = where
                self.land()
        return self.lines_of

    def land(self) -> None:
        """Send the signal: its handler runs here, on this thread."""
        signal.raise_signal(signal.SIGINT)


class _Noted:
    def on_message(self, ctx: Any, message: Any) -> str:
        ctx.set_private("got", message.payload)
        return "ok"


def _config(durability: str) -> dict[str, Any]:
    return {"journal": {"durability": durability}, "runtime": {"call_timeout": 3.0}}


def _open(path: Path, durability: str, name: str) -> cf.Runtime:
    return cf.Runtime.open(
        path, config=_config(durability), clock=cf.FakeClock(), behaviors={"noted": _Noted}, name=name
    )


def _state(rt: cf.Runtime) -> dict[str, Any]:
    """What replay must give back: the agents, in order, their lifecycles, layers and subscriptions."""
    agents = rt.agents()
    views = rt.context_views()
    return {
        "agents": agents,
        "lifecycles": {a: rt.agent(a).lifecycle for a in agents},
        "views": {a: (dict(v.task_shared), dict(v.private)) for a, v in views.items()},
        "news": rt.bus.subscribers("news"),
    }


def _threads_left(name: str) -> list[str]:
    """The threads of runtime ``name`` still running after ``LEFT`` s (for all of them)."""
    deadline = time.monotonic() + LEFT
    mine = [t for t in threading.enumerate() if f"[{name}]" in t.name]
    for thread in mine:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [t.name for t in mine if t.is_alive()]


@dataclass
class _Call:
    """One public call: ``setup`` before it (untraced), ``run`` the call itself."""

    run: Callable[[cf.Runtime], object]
    setup: Callable[[cf.Runtime], object] = lambda _: None
    closes: bool = False


def _send_one(rt: cf.Runtime) -> None:
    rt.bus.send("app", "a", "note", 0)


CALLS: dict[str, _Call] = {
    "spawn": _Call(lambda rt: rt.spawn("c", behavior="noted", task_id="t")),
    "publish_task_context": _Call(lambda rt: rt.publish_task_context("t", {"goal": 1})),
    "set_private": _Call(lambda rt: rt.agent("a").set_private("k", 2)),
    "send": _Call(lambda rt: rt.bus.send("app", "a", "note", 3)),
    "request": _Call(lambda rt: rt.bus.request("app", "a", "ask", 4, timeout=WAIT)),
    "broadcast": _Call(lambda rt: rt.bus.broadcast("app", "news", 5)),
    "flush": _Call(lambda rt: rt.flush(WAIT), setup=_send_one),
    "settle": _Call(lambda rt: rt.settle(WAIT), setup=_send_one),
    "close": _Call(lambda rt: rt.close(), closes=True),
}


@dataclass
class _Sweep:
    landings: int = 0
    failures: dict[int, list[str]] = field(default_factory=dict)
    skipped: dict[int, str] = field(default_factory=dict)
    """The lines at which no real signal can land (``_artificial``), by N: where each was."""


def _on_a_thread(work: Callable[[], object], timeout: float) -> tuple[bool, object]:
    """Run ``work`` on a helper thread: (whether it ended in time, what it returned or raised).

    Not on the main thread: a lock a landing left taken there would hang the sweep.
    """
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:  # noqa: BLE001 - the caller reports it
            outcome.append(exc)

    thread = threading.Thread(target=run, name="sweep-checker", daemon=True)
    thread.start()
    thread.join(timeout)
    return (not thread.is_alive(), outcome[0] if outcome else None)


def _after(rt: cf.Runtime, problems: list[str]) -> dict[str, Any] | None:
    """Settle, and read the live state (None if an agent listed is unreachable)."""
    try:
        rt.settle(1.0)
    except cf.SettleTimeoutError as exc:
        problems.append(f"settle() timed out: {exc}")
    unreachable = []
    for agent_id in rt.agents():
        try:
            rt.agent(agent_id)
        except cf.AgentNotFoundError:
            unreachable.append(agent_id)
    if unreachable:
        problems.append(f"agents listed but unreachable: {unreachable}")
        return None
    return _state(rt)


class _Hung(Exception):  # noqa: N818 - what the call did
    """The traced call still ran after ``HANG`` s (a lock a landing left taken, most likely)."""


def _hung(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001
    raise _Hung


def _run(call: _Call, rt: cf.Runtime, landing: _Landing, problems: list[str]) -> None:
    """Run ``call`` traced by ``landing``: it finishes, or raises KeyboardInterrupt if the signal came.

    A call that hangs is stopped by a SIGALRM after ``HANG`` s (a lock's wait is cut short
    by a signal whose handler raises).
    """
    interrupted = False
    alarm = signal.signal(signal.SIGALRM, _hung)
    signal.setitimer(signal.ITIMER_REAL, HANG)
    sys.settrace(landing.calls)
    try:
        call.run(rt)
    except KeyboardInterrupt:
        interrupted = True
    except _Hung:
        problems.append(f"the call hangs ({landing.where})")
    except Exception as exc:  # noqa: BLE001 - what broke
        problems.append(f"the call raised {exc!r}")
    finally:
        sys.settrace(None)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, alarm)
    if landing.fired and not interrupted and not problems:
        problems.append(f"the Ctrl-C was lost ({landing.where})")
    if not landing.fired and interrupted:
        problems.append("a KeyboardInterrupt with no Ctrl-C")


def _compare_replayed(live: object, path: Path, durability: str, name: str, problems: list[str]) -> None:
    """The path opens again, and replays the state ``live`` (if known)."""
    try:
        reopened = _open(path, durability, name)
    except cf.JournalLockedError:
        problems.append("the journal stays locked")
        return
    try:
        replayed = _state(reopened)
    finally:
        reopened.close()
    if live is not None and replayed != live:
        problems.append(f"live {live} != replayed {replayed}")


def _land(call: _Call, durability: str, directory: Path, n: int) -> tuple[_Landing, list[str]]:
    """Run ``call`` with a SIGINT at its ``n``-th line: (the landing, what broke)."""
    name = f"sweep-{directory.name[-12:]}-{n}"
    path = directory / str(n)
    problems: list[str] = []
    landing = _Landing(n)
    rt = _open(path, durability, name)
    try:
        a = rt.spawn("a", behavior="noted", task_id="t")
        rt.spawn("b", task_id="u")
        rt.bus.subscribe("a", "news")
        a.set_private("k", 1)
        rt.settle(WAIT)
        before = _state(rt)
        call.setup(rt)
    except BaseException:
        rt.close()
        raise
    _run(call, rt, landing, problems)
    live: object = before
    if not call.closes:
        ended, live = _on_a_thread(lambda: _after(rt, problems), HANG)
        if not ended:
            return landing, [*problems, f"settle() or a read hangs ({landing.where})"]
        if isinstance(live, BaseException):
            problems.append(f"checking raised {live!r} ({landing.where})")
            live = None
    ended, closing = _on_a_thread(rt.close, HANG)
    if not ended:
        return landing, [*problems, f"close() hangs ({landing.where})"]
    if closing is not None:
        problems.append(f"close() raised {closing!r}")
    left = _threads_left(name)
    if left:
        problems.append(f"threads left running: {left}")
    _compare_replayed(live, path, durability, name, problems)
    if problems:
        problems.append(f"(landed at {landing.where or landing.skipped or 'no line'})")
    return landing, problems


def _sweep(call: str, durability: str, directory: Path, stride: int = 1) -> _Sweep:
    result = _Sweep()
    n = 1
    while True:
        landing, problems = _land(CALLS[call], durability, directory, n)
        if landing.skipped:
            result.skipped[n] = landing.skipped
        elif not landing.fired:
            return result
        else:
            result.landings += 1
        if problems:
            result.failures[n] = problems
        n += stride


def _check(result: _Sweep) -> None:
    assert result.landings > 0
    at = sorted(set(result.skipped.values()))
    skipped = f"{len(result.skipped)} skipped, as no real signal lands (or is raised) there: {at}"
    print(f"{result.landings} landings; {skipped}")  # noqa: T201 - the sweep's report (pytest -rP)
    shown = "\n".join(f"N={n}: {'; '.join(p)}" for n, p in sorted(result.failures.items())[:10])
    assert not result.failures, (
        f"{len(result.failures)} of {result.landings} landings broke the runtime ({skipped}):\n{shown}"
    )


@pytest.mark.parametrize("durability", ["sync", "batch"])
@pytest.mark.parametrize("call", list(CALLS))
def test_a_ctrl_c_at_a_sample_of_lines_leaves_the_runtime_whole(
    call: str, durability: str, tmp_path: Path
) -> None:
    _check(_sweep(call, durability, tmp_path, STRIDE))


@pytest.mark.slow
@pytest.mark.parametrize("durability", ["sync", "batch"])
@pytest.mark.parametrize("call", list(CALLS))
def test_a_ctrl_c_at_every_line_leaves_the_runtime_whole(call: str, durability: str, tmp_path: Path) -> None:
    _check(_sweep(call, durability, tmp_path))

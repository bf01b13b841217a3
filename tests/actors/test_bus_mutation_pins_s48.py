"""The IPC bus's promises (``actors/_bus.py``) that a fourth mutation test found no test held.

Hand-made mutants of the bus, each run against the actor tests; each test here names
what README.md, a docstring or the spec promises, and fails under the mutant named in
its comment (or, for a fix, on the code before it).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import (
    ActorTimeoutError,
    AgentContext,
    Config,
    FakeClock,
    Runtime,
    RuntimeClosedError,
    RuntimeConfig,
)
from cogfabric.events import IpcDeadLettered
from cogfabric.store import Journal

from .test_close_and_flush import _Gated, _in_thread, _until
from .test_supervision import _short_call_timeout, _stall

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric.events import IpcMessage

WAIT = 10.0


class _DefersOnce:
    """Returns None for its request (the reply comes later, from elsewhere) and says it got it."""

    def __init__(self, entered: threading.Event) -> None:
        self.entered = entered

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ARG002
        self.entered.set()
        return None


def _journaled_letters(path: Path) -> list[tuple[str, str, str]]:
    with Journal.open(path, readonly=True) as journal:
        return [
            (r.event.topic, r.event.reason, r.event.error)
            for r in journal.read(stream="bus")
            if isinstance(r.event, IpcDeadLettered)
        ]


def test_a_request_close_fails_is_lettered_with_the_text_its_requester_gets(tmp_path: Path) -> None:
    # README: a dead letter's error is "the text of the error a requester gets". The
    # request close() fails (still waiting for its deferred reply) was lettered "the
    # runtime was closed" while its requester got "... before the request was answered".
    # Fix pin (fails on the code before it); also kills A14, the requester's text emptied.
    entered = threading.Event()
    rt = Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"defers": lambda: _DefersOnce(entered)})
    try:
        rt.spawn("a", behavior="defers")
        requester, outcome = _in_thread(lambda: rt.bus.request("x", "a", "q", timeout=60))
        assert entered.wait(WAIT)
        rt.close()
        requester.join(WAIT)
        assert not requester.is_alive()
    finally:
        rt.close()

    (error,) = outcome
    assert type(error) is RuntimeClosedError, repr(error)
    assert str(error) == "the runtime was closed before the request was answered"
    assert [(d.topic, d.reason, d.error) for d in rt.bus.dead_letters()] == [("q", "closed", str(error))]
    assert _journaled_letters(tmp_path / "j") == [("q", "closed", str(error))]


def test_a_send_waiting_for_room_when_close_begins_is_lettered_with_the_text_its_sender_gets(
    tmp_path: Path,
) -> None:
    # README: a dead letter's error is the text of the error "a sender would have got".
    # The sender that waited for room when close() began got "the runtime is closed",
    # its letter said "the runtime was closed". Fix pin (fails on the code before it).
    entered, gate = threading.Event(), threading.Event()
    config = Config(runtime=RuntimeConfig(call_timeout=20.0, mailbox_size=1))
    rt = Runtime.open(
        tmp_path / "j", config=config, clock=FakeClock(), behaviors={"gated": lambda: _Gated(entered, gate)}
    )
    try:
        rt.spawn("s", behavior="gated")
        rt.bus.send("u", "s", "first")
        assert entered.wait(WAIT)
        rt.bus.send("u", "s", "second")  # the mailbox is full now
        sender, outcome = _in_thread(lambda: rt.bus.send("u", "s", "waiting"))
        slots = rt._entry("s").shared.slots
        assert _until(lambda: slots._waiters == 1)  # the sender waits for room
        closer, _ = _in_thread(rt.close)
        sender.join(WAIT)
        assert not sender.is_alive()
    finally:
        gate.set()
    closer.join(30)
    assert not closer.is_alive()

    (error,) = outcome
    assert type(error) is RuntimeClosedError, repr(error)
    waiting = [(d.reason, d.error) for d in rt.bus.dead_letters() if d.topic == "waiting"]
    assert waiting == [("closed", str(error))]
    assert [(r, e) for t, r, e in _journaled_letters(tmp_path / "j") if t == "waiting"] == waiting


def test_a_broadcast_stored_after_its_caller_timed_out_goes_past_a_full_mailbox_at_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # _fan_out: on the writer's thread (wait=False) "a full mailbox takes it past its
    # size at once", as a durable publication's does: the writer must not sit out
    # call_timeout waiting for room, holding every commit behind it. Kills A20 (the
    # writer's deadline call_timeout, not 0).
    entered, held = threading.Event(), threading.Event()
    config = Config(runtime=RuntimeConfig(call_timeout=30.0, mailbox_size=1))
    rt = Runtime.open(
        tmp_path / "j", config=config, clock=FakeClock(), behaviors={"gated": lambda: _Gated(entered, held)}
    )
    try:
        rt.spawn("r", behavior="gated")
        rt.bus.subscribe("r", "news")
        rt.bus.send("u", "r", "first")
        assert entered.wait(WAIT)
        rt.bus.send("u", "r", "second")  # the mailbox is full now
        gate = _stall(rt)
        with _short_call_timeout(rt, 0.3), pytest.raises(ActorTimeoutError):
            rt.bus.broadcast("x", "news", 1)
        with caplog.at_level(logging.WARNING, logger="cogfabric.actors._runtime"):
            gate.set()  # stored now: the writer tells it to 'r', past the bound
            told = "a broadcast goes past its size"
            assert _until(lambda: any(told in r.getMessage() for r in caplog.records))
    finally:
        held.set()
        rt.close()
    assert [(d.topic, d.reason) for d in rt.bus.dead_letters()] == []


def test_a_memory_only_runtime_keeps_no_letter_for_a_behavior_cut_short_after_close_is_over() -> None:
    # cut_short: "for a memory-only runtime: once close() is over" there is nothing to
    # record a letter in, as a send after close leaves none. Kills A23 (only the
    # writer's stop checked, which a memory-only runtime never has).
    entered, gate, done = threading.Event(), threading.Event(), threading.Event()

    class HeldThenSends:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ARG002
            entered.set()
            try:
                assert gate.wait(30)
                ctx.send("b", "passed")  # refused: the runtime is closed
            finally:
                done.set()
            return None

    config = Config(runtime=RuntimeConfig(call_timeout=0.3))
    rt = Runtime.open(None, config=config, behaviors={"held": HeldThenSends})
    try:
        rt.spawn("a", behavior="held")
        rt.spawn("b")
        stopped = rt._entry("a").ref.actor_stopped
        rt.bus.send("x", "a", "go")
        assert entered.wait(WAIT)
        rt.close()  # gives up on 'a', busy in its behavior, after call_timeout
        assert rt._close_done.is_set()
    finally:
        gate.set()
    assert done.wait(WAIT)
    assert stopped.wait(WAIT)  # 'a' finished its message (cut short) and stopped
    assert rt.bus.dead_letters() == []

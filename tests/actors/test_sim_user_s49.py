"""What a simulation driving thousands of agents needs to see while it runs (helper h13, session 49).

A driver that meets backpressure learns of it only by a send that waits ``call_timeout``
and fails; ``Agent.queued`` tells an agent's backlog before that. ``dead_letters`` keeps
the latest 1,024 letters and the journal cannot be read from the runtime's own process
until ``close()``: ``dead_letter_counts`` gives a long run's total, by reason.
"""

from __future__ import annotations

import concurrent.futures
import threading
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from cogfabric.actors import (
    AgentContext,
    AgentNotFoundError,
    AgentNotRegisteredError,
    IpcHandlerError,
    MailboxFullError,
    Runtime,
    RuntimeClosedError,
)
from cogfabric.actors._bus import DEAD_LETTER_CAPACITY

from .test_supervision import Gate, _open, _reset_gate, _short_call_timeout

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric.events import IpcMessage

__all__ = ["_reset_gate"]  # the Gate's autouse reset, used here too

WAIT = 10.0


class _Defers:
    """Returns None for every request: its reply is left to ``ctx.reply``, which never comes."""

    handled: ClassVar[threading.Event] = threading.Event()

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ARG002
        _Defers.handled.set()


def test_dead_letter_counts_count_every_letter_by_reason_past_the_latest_kept() -> None:
    with _open(None) as runtime:
        runtime.spawn("a", behavior="gate")
        extra = 7
        for n in range(DEAD_LETTER_CAPACITY + extra):
            with pytest.raises(AgentNotRegisteredError):
                runtime.bus.send("driver", "nobody", "tick", n)
        with pytest.raises(IpcHandlerError):
            runtime.bus.request("driver", "a", "boom", timeout=WAIT)

        counts = runtime.bus.dead_letter_counts()
        kept = runtime.bus.dead_letters()

    assert counts == {"agent not registered": DEAD_LETTER_CAPACITY + extra, "handler error": 1}
    assert len(kept) == DEAD_LETTER_CAPACITY  # the list keeps the latest only
    assert kept[-1].reason == "handler error"
    assert runtime.bus.dead_letter_counts() == counts  # a read: it answers after close() too


def test_dead_letter_counts_count_the_requests_close_failed(tmp_path: Path) -> None:
    _Defers.handled = threading.Event()
    with _open(tmp_path / "j", behaviors={"defers": _Defers}) as runtime:
        runtime.spawn("a", behavior="defers")
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            requester = pool.submit(runtime.bus.request, "driver", "a", "q", timeout=WAIT)
            assert _Defers.handled.wait(WAIT)  # deferred: only close() ends the request now
            runtime.close()
            with pytest.raises(RuntimeClosedError):
                requester.result(WAIT)

    assert runtime.bus.dead_letter_counts() == {"closed": 1}
    assert [letter.reason for letter in runtime.bus.dead_letters()] == ["closed"]


def test_dead_letter_counts_start_from_zero_on_reopen(tmp_path: Path) -> None:
    with _open(tmp_path / "j") as runtime:
        with pytest.raises(AgentNotRegisteredError):
            runtime.bus.send("driver", "nobody", "tick")
        assert runtime.bus.dead_letter_counts() == {"agent not registered": 1}
    with _open(tmp_path / "j") as runtime:
        assert runtime.bus.dead_letter_counts() == {}


def test_an_agents_queued_is_its_backlog_up_to_the_bound_and_past_it() -> None:
    with _open(None, mailbox=2) as runtime:
        agent = runtime.spawn("a", task_id="t", behavior="gate")
        assert agent.queued == 0
        runtime.bus.send("x", "a", "block")
        assert Gate.started.wait(WAIT)
        assert agent.queued == 0  # the message its behavior holds is not counted
        runtime.bus.send("x", "a", "one")
        assert agent.queued == 1
        runtime.bus.send("x", "a", "two")
        assert agent.queued == 2  # the mailbox is full: the next send waits, then fails
        with _short_call_timeout(runtime, 0.2):  # these waits for room alone: not the flush's
            with pytest.raises(MailboxFullError):
                runtime.bus.send("x", "a", "three")
            assert agent.queued == 2
            assert runtime.publish_task_context("t", {"goal": "g1"}) == ["a"]  # goes past the bound
        assert agent.queued == 3

        Gate.release.set()
        runtime.flush()
        assert agent.queued == 0
        assert [m.topic for m in Gate.seen] == ["block", "one", "two"]

        runtime.kill("a")
        with pytest.raises(AgentNotFoundError):
            _ = agent.queued


def test_an_agents_queued_raises_once_the_runtime_is_closed() -> None:
    runtime: Runtime
    with _open(None) as runtime:
        agent = runtime.spawn("a", behavior="gate")
    with pytest.raises(RuntimeClosedError):
        _ = agent.queued

"""close() and flush() with busy agents, waiting requesters and a slow journal: nothing handed over
is lost, and nobody waits past what the runtime can still deliver."""

from __future__ import annotations

import functools
import logging
import math
import subprocess
import sys
import textwrap
import threading
from typing import TYPE_CHECKING, Any

import pykka
import pytest

from cogfabric import (
    ActorTimeoutError,
    Agent,
    AgentNotRegisteredError,
    ClockError,
    FakeClock,
    IpcHandlerError,
    JournalError,
    MailboxFullError,
    Runtime,
    RuntimeClosedError,
)
from cogfabric.actors import Behavior, Config, JournalConfig, RuntimeConfig
from cogfabric.actors._runtime import _STOP_WINDOW
from cogfabric.events import IpcDeadLettered, PrivateSet
from cogfabric.store import Journal, JournalFailedError

from .test_supervision import _short_call_timeout

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from cogfabric.actors import AgentContext
    from cogfabric.events import IpcMessage


class _Gated:
    """A behavior that holds each message until the test opens its gate (a long LLM call, say)."""

    def __init__(self, entered: threading.Event, gate: threading.Event) -> None:
        self.entered, self.gate = entered, gate

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:
        self.entered.set()
        assert self.gate.wait(30)
        ctx.set_private("handled", message.topic)
        return {"ok": True}


class _Answers:
    """A behavior that answers every request."""

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ARG002
        return {"answer": 42}


def _config(durability: str = "batch", call_timeout: float = 5.0, **journal: Any) -> Config:
    return Config(
        journal=JournalConfig(durability=durability, **journal),  # type: ignore[arg-type]
        runtime=RuntimeConfig(call_timeout=call_timeout),
    )


def _slow_disk(rt: Runtime, seconds: float) -> Journal:
    """Make each of the runtime's commits take ``seconds`` longer, as on a slow disk; its journal."""
    journal = rt._journal
    assert journal is not None
    append = journal.append

    def slow_append(events: list[Any], **kwargs: Any) -> list[int]:
        threading.Event().wait(seconds)
        return append(events, **kwargs)

    journal.append = slow_append  # type: ignore[method-assign,assignment]
    return journal


def _until(condition: Callable[[], bool]) -> bool:
    """Whether ``condition`` came true within 10 s (checked every 10 ms)."""
    checked = threading.Event()
    for _ in range(1000):
        if condition():
            return True
        checked.wait(0.01)
    return False


def _in_thread(call: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(call())
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


@pytest.mark.parametrize(
    ("call_timeout", "commit_seconds", "changes"),
    [(0.5, 0.2, 5), (0.25, 0.4, 3)],  # each took 2.4 s at (1.0, 0.4, 5) and (0.3, 0.6, 3)
    ids=["a backlog longer than call_timeout", "one commit longer than call_timeout"],
)
def test_close_in_batch_durability_commits_what_a_slow_disk_takes_longer_than_call_timeout_to_take(
    tmp_path: Path, call_timeout: float, commit_seconds: float, changes: int
) -> None:
    # Each commit holds one change and takes ``commit_seconds``, as on a slow disk. The
    # four or so commits left at close() take about 1.6 times call_timeout; in the second
    # case each single commit does too. Both are progress, not a stall: close() must
    # wait for the writer instead of closing the journal under it. (No more changes than
    # the writer's backlog holds, 4 with group_commit_max 1, beside the one it commits:
    # one more would wait for room in the agent, up to call_timeout, as long as the
    # caller waits for the agent, and on a loaded machine that was a flaky timeout.)
    # close() alone has the short call_timeout (the writer's copy too): the set-up's calls
    # keep the config's 5 s, which a late actor thread on a loaded machine does not outlast
    with Runtime.open(tmp_path / "j", config=_config(group_commit_max=1), clock=FakeClock()) as rt:
        agent = rt.spawn("a")
        _slow_disk(rt, commit_seconds)
        for i in range(changes):
            agent.set_private(f"k{i}", i)
        with _short_call_timeout(rt, call_timeout, writer_too=True):
            rt.close()
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        assert dict(rt.agent("a").context_view().private) == {f"k{i}": i for i in range(changes)}


def test_close_fails_a_request_no_agent_will_answer_at_once(tmp_path: Path) -> None:
    entered, gate = threading.Event(), threading.Event()
    behaviors = {"gated": lambda: _Gated(entered, gate)}
    rt = Runtime.open(
        tmp_path / "j", config=_config(call_timeout=0.5), clock=FakeClock(), behaviors=behaviors
    )
    try:
        rt.spawn("asker")
        rt.spawn("slow", behavior="gated")
        first, first_outcome = _in_thread(lambda: rt.bus.request("asker", "slow", "q1", timeout=600))
        assert entered.wait(10)
        second, second_outcome = _in_thread(lambda: rt.bus.request("asker", "slow", "q2", timeout=600))
        rt.close()  # the busy agent gets call_timeout, then every open request fails
        second.join(10)
        assert not second.is_alive()
        assert isinstance(second_outcome[0], RuntimeClosedError)
    finally:
        gate.set()
        rt.close()
    first.join(10)
    assert not first.is_alive()
    assert isinstance(first_outcome[0], RuntimeClosedError)  # its handler ran past the close


def test_a_requester_is_released_when_the_journal_refuses_the_dead_letter(tmp_path: Path) -> None:
    class Raises:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            msg = "the behavior failed"
            raise ValueError(msg)

    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"raises": Raises}) as rt:
        rt.spawn("asker")
        rt.spawn("r", behavior="raises")
        dead_letter = rt.bus.dead_letter

        def refused(*args: Any) -> None:
            dead_letter(*args)
            msg = "the journal refused the dead letter"
            raise JournalError(msg)

        rt.bus.dead_letter = refused  # type: ignore[method-assign,assignment]
        thread, outcome = _in_thread(lambda: rt.bus.request("asker", "r", "q", timeout=600))
        thread.join(10)
        assert not thread.is_alive()  # not the 600 s timeout
        assert isinstance(outcome[0], IpcHandlerError)
        rt.bus.dead_letter = dead_letter  # type: ignore[method-assign]


def test_flush_makes_what_was_handed_over_durable_and_names_a_busy_agent(tmp_path: Path) -> None:
    entered, gate = threading.Event(), threading.Event()
    behaviors = {"gated": lambda: _Gated(entered, gate)}
    config = _config(call_timeout=5.0, fsync=False)  # the 0.2 s are the agents', not a slow disk's
    with Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors=behaviors) as rt:
        rt.spawn("u")
        rt.spawn("slow", behavior="gated")
        rt.bus.send("u", "slow", "think")
        assert entered.wait(10)
        rt.agent("u").set_private("important", 42)
        try:
            with pytest.raises(ActorTimeoutError, match="'slow' still busy"):
                rt.flush(timeout=0.2)
            journal = rt._journal
            assert journal is not None
            stored = [r.event for r in journal.read(stream="agent/u")]
            assert any(isinstance(e, PrivateSet) and e.key == "important" for e in stored)
        finally:
            gate.set()
        rt.flush()  # the agent answered: nothing is busy now


def test_close_wakes_a_sender_waiting_for_room_with_runtime_closed(tmp_path: Path) -> None:
    entered, gate = threading.Event(), threading.Event()
    behaviors = {"gated": lambda: _Gated(entered, gate)}
    config = Config(runtime=RuntimeConfig(call_timeout=20.0, mailbox_size=1))
    rt = Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors=behaviors)
    try:
        rt.spawn("u")
        rt.spawn("s", behavior="gated")
        rt.bus.send("u", "s", "first")
        assert entered.wait(10)
        rt.bus.send("u", "s", "second")  # the mailbox is full now
        sender, outcome = _in_thread(lambda: rt.agent("s").private("handled"))
        slots = rt._entry("s").shared.slots
        assert _until(lambda: slots._waiters == 1)  # the sender waits for room
        closer, _ = _in_thread(rt.close)
        sender.join(10)  # woken by close(), not after its 20 s call_timeout
        assert not sender.is_alive()
        assert isinstance(outcome[0], RuntimeClosedError)
    finally:
        gate.set()
    closer.join(30)
    assert not closer.is_alive()


@pytest.mark.parametrize("call", ["send", "request", "broadcast"])
def test_a_message_waiting_for_room_when_close_begins_leaves_a_closed_dead_letter(
    tmp_path: Path, call: str
) -> None:
    entered, gate = threading.Event(), threading.Event()
    behaviors = {"gated": lambda: _Gated(entered, gate)}
    config = Config(runtime=RuntimeConfig(call_timeout=20.0, mailbox_size=1))
    rt = Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors=behaviors)
    try:
        rt.spawn("s", behavior="gated")
        rt.spawn("t", behavior="gated")
        rt.bus.subscribe("s", "news")
        rt.bus.subscribe("t", "news")
        rt.bus.send("u", "s", "first")
        assert entered.wait(10)
        rt.bus.send("u", "s", "second")  # the mailbox is full now
        calls = {
            "send": lambda: rt.bus.send("u", "s", "waiting", {"w": 1}),
            "request": lambda: rt.bus.request("u", "s", "waiting", {"w": 1}, timeout=60),
            "broadcast": lambda: rt.bus.broadcast("u", "news", {"w": 1}),  # s first: t is never told
        }
        sender, outcome = _in_thread(calls[call])
        slots = rt._entry("s").shared.slots
        assert _until(lambda: slots._waiters == 1)  # the sender waits for room
        closer, _ = _in_thread(rt.close)
        sender.join(30)
        assert not sender.is_alive()
        assert isinstance(outcome[0], RuntimeClosedError)
    finally:
        gate.set()
    closer.join(30)
    assert not closer.is_alive()

    with Journal.open(tmp_path / "j", readonly=True) as journal:
        letters = [r.event for r in journal.read(stream="bus") if isinstance(r.event, IpcDeadLettered)]
    waiting = [(d.recipient, d.reason, d.payload) for d in letters if d.topic in ("waiting", "news")]
    expected = (
        [("s", "closed", {"w": 1}), ("t", "closed", {"w": 1})]
        if call == "broadcast"
        else [("s", "closed", {"w": 1})]
    )
    assert waiting == expected


def test_requests_waiting_for_room_when_close_begins_leave_one_dead_letter_each(tmp_path: Path) -> None:
    # close() letters every request still pending, and each woken requester its own: one
    # letter a message, whichever comes first (a close from a behavior runs on at once)
    entered, gate = threading.Event(), threading.Event()
    opened: list[Runtime] = []

    class Closer:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            entered.set()
            assert gate.wait(30)
            opened[0].close()

    config = Config(runtime=RuntimeConfig(call_timeout=10.0, mailbox_size=1))
    rt = Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors={"c": Closer})
    opened.append(rt)
    waiting = 40
    try:
        rt.spawn("s", behavior="c")
        rt.bus.send("u", "s", "first")
        assert entered.wait(10)
        rt.bus.send("u", "s", "second")  # the mailbox is full now
        senders = [
            _in_thread(functools.partial(rt.bus.request, f"u{i}", "s", "waiting", i, timeout=60))
            for i in range(waiting)
        ]
        slots = rt._entry("s").shared.slots
        assert _until(lambda: slots._waiters == waiting)
    finally:
        gate.set()
    for sender, outcome in senders:
        sender.join(30)
        assert isinstance(outcome[0], RuntimeClosedError)
    assert rt._close_done.wait(30)

    with Journal.open(tmp_path / "j", readonly=True) as journal:
        letters = [r.event for r in journal.read(stream="bus") if isinstance(r.event, IpcDeadLettered)]
    assert sorted(d.payload for d in letters if d.topic == "waiting") == list(range(waiting))


def test_a_memory_only_runtime_keeps_no_dead_letter_for_a_send_after_close() -> None:
    rt = Runtime.open(None)
    rt.spawn("s")
    rt.close()

    with pytest.raises(RuntimeClosedError):
        rt.bus.send("u", "s", "late")

    assert rt.bus.dead_letters() == []


def test_flush_names_the_agent_whose_mailbox_stayed_full_not_the_idle_ones(tmp_path: Path) -> None:
    entered, gate = threading.Event(), threading.Event()
    behaviors = {"gated": lambda: _Gated(entered, gate)}
    config = Config(runtime=RuntimeConfig(call_timeout=5.0, mailbox_size=1))
    with Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors=behaviors) as rt:
        rt.spawn("s", behavior="gated")  # first: its full mailbox must not use up the others' time
        for i in range(6):
            rt.spawn(f"idle{i}")
        rt.bus.send("idle0", "s", "first")
        assert entered.wait(10)
        rt.bus.send("idle0", "s", "second")  # the mailbox is full now
        try:
            with pytest.raises(MailboxFullError, match="'s' stayed full") as caught:
                rt.flush(timeout=0.3)
            assert "idle" not in str(caught.value)
        finally:
            gate.set()
        rt.flush()


def test_close_commits_everything_even_when_the_clock_fails_during_it(tmp_path: Path) -> None:
    class Failing:
        broken = False

        def now(self) -> float:
            if self.broken:
                msg = "the clock broke"
                raise RuntimeError(msg)
            return 1.7e9

        def monotonic(self) -> float:
            return 0.0

    clock = Failing()
    entered, gate = threading.Event(), threading.Event()
    behaviors = {"gated": lambda: _Gated(entered, gate)}
    rt = Runtime.open(tmp_path / "j", config=_config(call_timeout=0.5), clock=clock, behaviors=behaviors)
    try:
        agent = rt.spawn("a")
        rt.spawn("s", behavior="gated")
        for i in range(40):
            agent.set_private(f"k{i}", i)
        asker, outcome = _in_thread(lambda: rt.bus.request("a", "s", "q", timeout=600))
        assert entered.wait(10)
        clock.broken = True  # the dead letter close() writes for the open request cannot be timed
        rt.close()
        asker.join(10)
        assert not asker.is_alive()
        assert isinstance(outcome[0], RuntimeClosedError)
    finally:
        gate.set()
        rt.close()
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        assert dict(rt.agent("a").context_view().private) == {f"k{i}": i for i in range(40)}


def test_a_reply_the_journal_refuses_fails_the_request_as_a_handler_error(tmp_path: Path) -> None:
    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"answers": _Answers}) as rt:
        rt.spawn("asker")
        rt.spawn("r", behavior="answers")
        journal = rt.bus._journal

        def refuse_replies(message: Any, **kwargs: Any) -> Any:
            if getattr(message, "kind", "") == "reply":
                msg = "the journal refused the reply"
                raise JournalError(msg)
            return journal(message, **kwargs)

        rt.bus._journal = refuse_replies  # type: ignore[method-assign,assignment]
        with pytest.raises(IpcHandlerError) as caught:
            rt.bus.request("asker", "r", "q", timeout=600)
        assert isinstance(caught.value.__cause__, JournalError)
        # its letter keeps the text its requester gets, not the journal error's repr
        assert [(d.reason, d.error) for d in rt.bus.dead_letters()] == [
            ("reply not journaled", str(caught.value))
        ]


def test_a_clock_failing_at_a_delivery_refuses_the_request_at_once(tmp_path: Path) -> None:
    class AgentThreadsFail:
        def now(self) -> float:
            if threading.current_thread().name.startswith("AgentActor"):
                return math.nan
            return 1.7e9

        def monotonic(self) -> float:
            return 0.0

    with Runtime.open(tmp_path / "j", clock=AgentThreadsFail(), behaviors={"answers": _Answers}) as rt:
        rt.spawn("asker")
        rt.spawn("r", behavior="answers")
        thread, outcome = _in_thread(lambda: rt.bus.request("asker", "r", "q", timeout=600))
        thread.join(10)
        assert not thread.is_alive()  # not the 600 s timeout
        assert isinstance(outcome[0], ClockError)


def test_a_requester_hears_at_once_when_the_journal_refuses_what_the_handler_changed(tmp_path: Path) -> None:
    entered, gate = threading.Event(), threading.Event()
    behaviors = {"gated": lambda: _Gated(entered, gate)}
    with Runtime.open(tmp_path / "j", config=_config(), clock=FakeClock(), behaviors=behaviors) as rt:
        rt.spawn("asker")
        rt.spawn("g", behavior="gated")
        thread, outcome = _in_thread(lambda: rt.bus.request("asker", "g", "q", timeout=600))
        assert entered.wait(10)
        writer = rt._core.writer
        assert writer is not None
        writer._failure = JournalFailedError("the journal failed (the test)")  # fail-stop from now
        gate.set()
        thread.join(10)
        assert not thread.is_alive()  # not the 600 s timeout
        assert isinstance(outcome[0], IpcHandlerError)  # as for a refused reply
        assert isinstance(outcome[0].__cause__, JournalFailedError)
        with pytest.raises(JournalError):
            rt.flush()  # the program hears it: close() need not raise it again


def test_a_clock_failing_while_a_reply_is_made_releases_the_requester(tmp_path: Path) -> None:
    broken = threading.Event()

    class BreaksAfterHandling:
        def now(self) -> float:
            return math.nan if broken.is_set() else 1.7e9

        def monotonic(self) -> float:
            return 0.0

    class Answers:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ARG002
            broken.set()  # the reply's time is read next
            return {"answer": 42}

    with Runtime.open(tmp_path / "j", clock=BreaksAfterHandling(), behaviors={"answers": Answers}) as rt:
        rt.spawn("asker")
        rt.spawn("r", behavior="answers")
        thread, outcome = _in_thread(lambda: rt.bus.request("asker", "r", "q", timeout=600))
        thread.join(10)
        assert not thread.is_alive()
        assert isinstance(outcome[0], ClockError)
        broken.clear()


def test_a_reply_that_outlives_its_request_timeout_settles_it_with_one_dead_letter(tmp_path: Path) -> None:
    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"answers": _Answers}) as rt:
        rt.spawn("asker")
        rt.spawn("r", behavior="answers")
        journal = rt.bus._journal

        def slow_then_refused(message: Any, **kwargs: Any) -> Any:
            if getattr(message, "kind", "") == "reply":
                threading.Event().wait(0.8)  # a slow commit, past the request's timeout
                msg = "the journal refused the reply"
                raise JournalError(msg)
            return journal(message, **kwargs)

        rt.bus._journal = slow_then_refused  # type: ignore[method-assign,assignment]
        with pytest.raises(IpcHandlerError):
            rt.bus.request("asker", "r", "q", timeout=0.4)
        assert [d.reason for d in rt.bus.dead_letters()] == ["reply not journaled"]


def test_an_interrupted_close_leaves_the_journal_to_the_writer_and_loses_nothing(tmp_path: Path) -> None:
    config = _config(call_timeout=5.0, group_commit_max=1)
    rt = Runtime.open(tmp_path / "j", config=config, clock=FakeClock())
    agent = rt.spawn("a")
    journal = _slow_disk(rt, 0.1)
    writer = rt._core.writer
    assert writer is not None
    for i in range(8):
        agent.set_private(f"k{i}", i)

    def interrupted(timeout: float | None = None) -> None:  # noqa: ARG001
        raise KeyboardInterrupt

    writer.stop = interrupted  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        rt.close()
    assert _until(lambda: journal.closed)  # the writer committed its backlog and closed the journal
    lock = journal._lock  # type: ignore[attr-defined]  # the LMDB journal's: close() holds it
    assert lock.acquire(timeout=30)  # closed is set as close() begins: wait for its end
    lock.release()
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as reopened:
        assert dict(reopened.agent("a").context_view().private) == {f"k{i}": i for i in range(8)}


def test_close_asks_a_window_of_agents_to_stop_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # Thousands of threads woken at once spend close() fighting over the GIL: close()
    # keeps at most _STOP_WINDOW agents asked to stop and not yet stopped.
    rt = Runtime.open(None, clock=FakeClock())
    agents = rt.spawn_many([{}] * (3 * _STOP_WINDOW + 5))
    refs = [rt._entry(agent.id).ref for agent in agents]
    asked: list[Any] = []
    most: list[int] = []
    stop = type(refs[0]).stop

    def counting_stop(ref: Any, **kwargs: Any) -> Any:
        if ref in refs:  # not the session actor, stopped after the agents
            asked.append(ref)
            most.append(sum(not one.actor_stopped.is_set() for one in asked))
        return stop(ref, **kwargs)

    monkeypatch.setattr(type(refs[0]), "stop", counting_stop)
    rt.close()

    assert len(asked) == len(refs)
    assert all(ref.actor_stopped.is_set() for ref in refs)
    assert max(most) <= _STOP_WINDOW


def test_close_does_not_wait_for_a_busy_agent_before_stopping_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    entered, gate = threading.Event(), threading.Event()
    config = _config(call_timeout=30.0)
    behaviors = {"gated": lambda: _Gated(entered, gate)}
    rt = Runtime.open(None, config=config, clock=FakeClock(), behaviors=behaviors)
    busy = rt.spawn("busy", behavior="gated")  # first: the oldest of close()'s first window
    others = [rt._entry(agent.id).ref for agent in rt.spawn_many([{}] * (3 * _STOP_WINDOW))]
    busy_ref = rt._entry(busy.id).ref
    rt.bus.send("x", "busy", "work")
    assert entered.wait(10)
    with caplog.at_level("WARNING", logger="cogfabric.actors._runtime"):
        try:
            closer, outcome = _in_thread(rt.close)
            assert all(ref.actor_stopped.wait(10) for ref in others)  # while "busy" still works
            assert not busy_ref.actor_stopped.is_set()
        finally:
            gate.set()
        closer.join(30)

    assert not closer.is_alive()
    assert outcome == [None]
    assert busy_ref.actor_stopped.is_set()
    assert "did not stop" not in caplog.text


def test_agents_busy_past_call_timeout_do_not_make_close_ask_the_idle_ones_late(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Two windows of agents busy past call_timeout, then idle ones: close() waits for
    # the busy ones a window at a time, not 50 ms each, so the idle ones are asked to
    # stop within call_timeout and only the busy ones are reported.
    entered, gate = threading.Event(), threading.Event()
    busy_count = 2 * _STOP_WINDOW
    behaviors = {"gated": lambda: _Gated(entered, gate)}
    rt = Runtime.open(None, config=_config(call_timeout=1.0), clock=FakeClock(), behaviors=behaviors)
    busy = rt.spawn_many([{"agent_id": f"busy-{i}", "behavior": "gated"} for i in range(busy_count)])
    idle = [rt._entry(agent.id).ref for agent in rt.spawn_many([{}] * 20)]
    for agent in busy:
        rt.bus.send("x", agent.id, "work")
    held = [rt._entry(agent.id) for agent in busy]  # each handles its message before a stop
    try:
        with caplog.at_level("WARNING", logger="cogfabric.actors._runtime"):
            rt.close()
        assert all(ref.actor_stopped.is_set() for ref in idle)
        assert f"{busy_count} agent actors did not stop within 1.0 s" in caplog.text
    finally:
        gate.set()
    assert all(entry.ref.actor_stopped.wait(10) for entry in held)


def test_an_interrupted_close_still_asks_every_agent_to_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    rt = Runtime.open(None, clock=FakeClock())
    refs = [rt._entry(agent.id).ref for agent in rt.spawn_many([{}] * (2 * _STOP_WINDOW))]
    stop = type(refs[0]).stop
    calls: list[Any] = []

    def interrupted_once(ref: Any, **kwargs: Any) -> Any:
        calls.append(ref)
        if len(calls) == _STOP_WINDOW + 3:
            raise KeyboardInterrupt
        return stop(ref, **kwargs)

    monkeypatch.setattr(type(refs[0]), "stop", interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        rt.close()

    assert all(ref.actor_stopped.wait(10) for ref in refs)


def _gated_disk(
    rt: Runtime, holding: Callable[[list[Any]], bool] = lambda _events: True
) -> tuple[threading.Event, threading.Event]:
    """Hold the runtime's next commit (the next ``holding`` those events) until the gate opens.

    Returns (committing, gate). A commit ``holding`` declines passes: one the agents
    still make of their own (a snapshot) must not stand for the one the test waits for.
    """
    journal = rt._journal
    assert journal is not None
    append = journal.append
    committing, gate = threading.Event(), threading.Event()

    def gated_append(events: list[Any], **kwargs: Any) -> list[int]:
        if not committing.is_set() and not holding(events):
            return append(events, **kwargs)
        committing.set()
        assert gate.wait(30)
        return append(events, **kwargs)

    journal.append = gated_append  # type: ignore[method-assign,assignment]
    return committing, gate


def _closing_begun(rt: Runtime) -> threading.Event:
    """Set once ``close()`` has closed the runtime to calls and begins to stop its agents."""
    begun = threading.Event()
    stop_agents = rt._stop_agents

    def stop(entries: Any) -> None:
        begun.set()
        stop_agents(entries)

    rt._stop_agents = stop  # type: ignore[method-assign]
    return begun


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_spawn_stored_as_close_begins_returns_its_handle_and_is_back_on_reopen(
    tmp_path: Path, durability: str
) -> None:
    rt = Runtime.open(tmp_path / "j", config=_config(durability), clock=FakeClock())
    try:
        committing, gate = _gated_disk(rt)
        begun = _closing_begun(rt)
        spawner, outcome = _in_thread(lambda: rt.spawn("late"))
        assert committing.wait(10)
        closer, _ = _in_thread(rt.close)
        assert begun.wait(10)
        gate.set()
        spawner.join(10)
        closer.join(30)
    finally:
        gate.set()
        rt.close()

    (handle,) = outcome
    assert isinstance(handle, Agent), handle
    with pytest.raises(RuntimeClosedError):
        handle.set_private("k", 1)
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as reopened:
        assert reopened.agents() == ["late"]


def test_session_calls_are_refused_from_the_moment_close_begins(tmp_path: Path) -> None:
    rt = Runtime.open(tmp_path / "j", config=_config("sync"), clock=FakeClock())
    try:
        agent = rt.spawn("a")
        committing, gate = _gated_disk(rt)
        setter, _ = _in_thread(lambda: agent.set_private("k", 1))  # close() waits for its commit
        assert committing.wait(10)
        begun = _closing_begun(rt)
        closer, _ = _in_thread(rt.close)
        assert begun.wait(10)
        assert rt.closed
        with pytest.raises(RuntimeClosedError):
            rt.memory.create_session("u1")
        gate.set()
        setter.join(10)
        closer.join(30)
    finally:
        gate.set()
        rt.close()
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as reopened:
        assert reopened.memory.sessions() == []


def test_a_runtime_left_open_holds_its_writer_lock_until_it_is_closed_at_exit(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import fcntl, os, sys
        from cogfabric import Runtime

        where = sys.argv[1]
        rt = Runtime.open(where, config={"journal": {"durability": "batch"}})
        rt.spawn("a").set_private("k", 1)

        def lock_free():
            fd = os.open(os.path.join(where, "writer.lock"), os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except OSError:
                return False
            finally:
                os.close(fd)

        close = rt.close

        def close_at_exit():
            print("lock free as the runtime closes at exit:", lock_free(), flush=True)
            close()

        rt.close = close_at_exit  # left open: closed at exit
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "j")],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=True,
    )

    assert out.stdout.strip() == "lock free as the runtime closes at exit: False"
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        assert rt.agent("a").private("k") == 1


class _Echo:
    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ARG002
        return "pong"


def test_a_request_delivered_as_close_begins_is_answered_or_refused_as_closed(tmp_path: Path) -> None:
    rt = Runtime.open(tmp_path / "j", config=_config("sync"), clock=FakeClock(), behaviors={"echo": _Echo})
    try:
        rt.spawn("b", behavior="echo")
        the_request = lambda events: any(getattr(e, "topic", None) == "q" for e in events)  # noqa: E731
        committing, gate = _gated_disk(rt, holding=the_request)
        stop_agents, writer = rt._stop_agents, rt._core.writer

        def stop(entries: Any) -> None:
            gate.set()  # the request commits once close() has taken every agent
            assert writer is not None
            writer.flush(10)
            # the requester delivers it after its commit, before or after the agent stops
            # (then the close refuses it: RuntimeClosedError, as if it still waited)
            stop_agents(entries)

        rt._stop_agents = stop  # type: ignore[method-assign]
        requester, outcome = _in_thread(lambda: rt.bus.request("x", "b", "q", timeout=10))
        assert committing.wait(10)
        rt.close()
        requester.join(15)
    finally:
        gate.set()
        rt.close()

    (answer,) = outcome
    if isinstance(answer, Exception):  # its agent stopped first: the requester hears the close
        assert isinstance(answer, RuntimeClosedError), answer
        assert [d.reason for d in rt.bus.dead_letters()] == ["closed"]
    else:
        assert answer.payload == "pong"  # type: ignore[attr-defined]
        assert rt.bus.dead_letters() == []


_RINGING = ("cogfabric/actors/_writer.py", "pykka/_ref.py", "pykka/_envelope.py")
"""Where the main thread rings the writer: its doorbell and Pykka's tell. (The locks and
queues of the standard library below them are left out: a trace raising inside
``threading``'s own Python code can leave one of its locks held, which no caller can mend.)"""


class _CtrlC:
    """A trace that raises KeyboardInterrupt at the ``at``-th line run in the ringing code, as Ctrl-C would.

    A SIGINT handler raises in the main thread between two bytecodes; a trace function
    raises at a line event: each line of the writer's doorbell and of Pykka's tell is a
    place a Ctrl-C can land. ``at=None`` only counts them.
    """

    def __init__(self, at: int | None) -> None:
        self.at = at
        self.lines = 0
        self._seen: set[tuple[int, int]] = set()

    def __call__(self, frame: Any, event: str, arg: object) -> Any:  # noqa: ARG002 - sys.settrace's
        if event == "call":
            return self if frame.f_code.co_filename.endswith(_RINGING) else None
        # A line's first run only: a ``with`` line runs again as its block ends, and an
        # exception raised there skips the ``__exit__`` (a lock stays held), which no
        # code can guard against (CPython issue 74174).
        if event == "line" and (id(frame), frame.f_lineno) not in self._seen:
            self._seen.add((id(frame), frame.f_lineno))
            self.lines += 1
            if self.lines == self.at:
                sys.settrace(None)
                raise KeyboardInterrupt
        return self


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_ctrl_c_anywhere_in_ringing_the_writer_never_leaves_it_asleep(
    tmp_path: Path, durability: str
) -> None:
    # A lost doorbell used to be for good: the writer's flag said "rung" and nothing rang
    # again, so every later change timed out and close() could not stop the writer.
    def interrupted_flush(at: int | None, where: Path) -> tuple[int, list[str]]:
        with Runtime.open(where, config=_config(durability, call_timeout=5.0)) as runtime:
            agent = runtime.spawn("a")
            agent.set_private("before", 0)
            runtime.flush()
            trace = _CtrlC(at)
            previous = sys.gettrace()  # a coverage or debugger tracer, given back after
            sys.settrace(trace)
            try:
                runtime.flush()  # the user presses Ctrl-C as this rings the writer
            except KeyboardInterrupt:
                pass
            finally:
                sys.settrace(previous)
            agent.set_private("after", 1)  # the application goes on with the same runtime
            runtime.flush(timeout=5.0)
        with Runtime.open(where) as reopened:
            return trace.lines, [k for k in ("before", "after") if reopened.agent("a").private(k) is not None]

    lines, kept = interrupted_flush(None, tmp_path / "count")
    assert kept == ["before", "after"]
    assert lines > 5  # the trace sees the ringing code

    for at in range(1, lines + 1):
        assert interrupted_flush(at, tmp_path / f"at-{at}")[1] == ["before", "after"], at


class _PassesOn:
    """Holds its first message until the gate opens; then records each message and passes it on."""

    def __init__(self, entered: threading.Event, gate: threading.Event) -> None:
        self.entered, self.gate = entered, gate

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:
        if message.topic == "hold":
            self.entered.set()
            assert self.gate.wait(30)
            return None
        ctx.set_private(message.topic, True)
        ctx.send("b", "passed", message.topic)  # refused once close() began: the runtime is closed
        return None


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_message_cut_short_by_close_leaves_a_closed_dead_letter_after_its_changes(
    tmp_path: Path, durability: str
) -> None:
    # close() lets the agents handle what is in their mailboxes, but the runtime is closed
    # to their sends: a behavior stopped by that is no failure (no AgentFailed), yet its
    # message was not handled through, which an audit must see in the journal
    entered, gate = threading.Event(), threading.Event()
    behaviors: dict[str, Callable[[], Behavior]] = {"passes": lambda: _PassesOn(entered, gate), "echo": _Echo}
    rt = Runtime.open(tmp_path / "j", config=_config(durability), clock=FakeClock(), behaviors=behaviors)
    try:
        rt.spawn("a", behavior="passes")
        rt.spawn("b", behavior="echo")
        rt.bus.send("x", "a", "hold")
        assert entered.wait(10)
        sent = [rt.bus.send("x", "a", topic) for topic in ("t1", "t2")]  # waiting in a's mailbox
        begun = _closing_begun(rt)
        closer, _ = _in_thread(rt.close)
        assert begun.wait(10)
        gate.set()
        closer.join(30)
        assert not closer.is_alive()
    finally:
        gate.set()
        rt.close()

    letters = [d for d in rt.bus.dead_letters() if d.reason == "closed"]
    # the message each refused send would have sent keeps its own letter (as any a close refuses)
    assert [(d.topic, d.recipient) for d in letters] == [
        ("passed", "b"),
        ("t1", "a"),
        ("passed", "b"),
        ("t2", "a"),
    ]
    cut_short = [d for d in letters if d.recipient == "a"]
    assert [d.message_id for d in cut_short] == [m.id for m in sent]
    assert "the runtime closed while 'a' handled it" in cut_short[0].error
    with Journal.open(tmp_path / "j", readonly=True) as journal:
        events = [r.event for r in journal.read()]
    journaled = [e for e in events if isinstance(e, IpcDeadLettered) and e.reason == "closed"]
    assert [e.message_id for e in journaled] == [d.message_id for d in letters]
    assert not any(type(e).__name__ == "AgentFailed" for e in events)
    # each message's change is journaled before its dead letter
    for message in sent:
        change = next(i for i, e in enumerate(events) if isinstance(e, PrivateSet) and e.key == message.topic)
        letter = next(
            i
            for i, e in enumerate(events)
            if getattr(e, "message_id", None) == message.id and isinstance(e, IpcDeadLettered)
        )
        assert change < letter


def test_after_close_no_agent_is_listed_anywhere(tmp_path: Path) -> None:
    rt = Runtime.open(tmp_path / "j", clock=FakeClock())
    rt.spawn("p")
    rt.spawn("c", parent="p")
    rt.bus.subscribe("c", "news")

    rt.close()

    # no agent is live once close() began: each list says so, as agents() did already
    assert (rt.agents(), rt.children("p"), rt.bus.subscribers("news")) == ([], [], [])


def _to_b(rt: Runtime, kind: str) -> Callable[[], object]:
    """A request (``kind`` "request") or a send of topic ``q`` from outside to agent ``b``."""
    if kind == "request":
        return lambda: rt.bus.request("x", "b", "q", timeout=10)
    return lambda: rt.bus.send("x", "b", "q")


class _HeldDelivery:
    """Holds each delivery a sender makes itself (after its message's commit) until ``go_on`` is set.

    ``delivering``: a delivery is held; ``delivered``: it is over. A sender from outside
    journals its message and then delivers it: close() or a kill can come in between.
    """

    def __init__(self, rt: Runtime) -> None:
        self.delivering, self.go_on, self.delivered = threading.Event(), threading.Event(), threading.Event()
        self._delivery = rt.bus._delivery
        rt.bus._delivery = self._held  # type: ignore[method-assign]

    def _held(self, message: IpcMessage, entry: Any, **kwargs: Any) -> Callable[[bool], None]:
        deliver = self._delivery(message, entry, **kwargs)

        def run(committed: bool) -> None:
            self.delivering.set()
            assert self.go_on.wait(10)
            try:
                deliver(committed)
            finally:
                self.delivered.set()

        return run


@pytest.mark.parametrize("kind", ["request", "send"])
def test_a_message_that_reaches_its_agent_after_close_stopped_it_is_refused_as_closed(
    tmp_path: Path, kind: str
) -> None:
    # A sender from outside journals its message, then delivers it itself: close() can
    # stop the recipient in between. That is the close refusing the message (as README
    # says of a request still waiting: RuntimeClosedError and a closed dead letter), not
    # an agent that is not registered.
    rt = Runtime.open(tmp_path / "j", config=_config("sync"), clock=FakeClock(), behaviors={"echo": _Echo})
    try:
        rt.spawn("b", behavior="echo")
        held, stop_agents = _HeldDelivery(rt), rt._stop_agents

        def stop(entries: Any) -> None:
            stop_agents(entries)
            held.go_on.set()
            assert held.delivered.wait(10)  # the sender has delivered before close() fails what waits

        rt._stop_agents = stop  # type: ignore[method-assign]
        sender, outcome = _in_thread(_to_b(rt, kind))
        assert held.delivering.wait(10)
        rt.close()
        sender.join(15)
    finally:
        held.go_on.set()
        rt.close()

    (result,) = outcome
    if kind == "request":
        assert isinstance(result, RuntimeClosedError), result
    assert [(d.topic, d.reason) for d in rt.bus.dead_letters()] == [("q", "closed")]


class _AnswersThenPassesOn:
    """Answers a request at once, then holds it until the gate opens, and passes it on."""

    def __init__(self, entered: threading.Event, gate: threading.Event, done: threading.Event) -> None:
        self.entered, self.gate, self.done = entered, gate, done

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:
        try:
            if message.kind == "request":
                ctx.reply(message.correlation_id, "early")
            self.entered.set()
            assert self.gate.wait(30)
            ctx.set_private("step", message.topic)
            ctx.send("b", "passed", message.topic)  # refused: the runtime is closed by now
        finally:
            self.done.set()
        return None


def test_a_request_answered_and_then_cut_short_by_close_still_leaves_its_closed_dead_letter(
    tmp_path: Path,
) -> None:
    entered, gate, done = threading.Event(), threading.Event(), threading.Event()
    behaviors: dict[str, Callable[[], Behavior]] = {
        "answers": lambda: _AnswersThenPassesOn(entered, gate, done),
        "echo": _Echo,
    }
    rt = Runtime.open(tmp_path / "j", config=_config("sync"), clock=FakeClock(), behaviors=behaviors)
    try:
        rt.spawn("a", behavior="answers")
        rt.spawn("b", behavior="echo")
        requester, outcome = _in_thread(lambda: rt.bus.request("x", "a", "q", timeout=10))
        assert entered.wait(10)
        requester.join(10)
        begun = _closing_begun(rt)
        closer, _ = _in_thread(rt.close)
        assert begun.wait(10)
        gate.set()
        closer.join(30)
    finally:
        gate.set()
        rt.close()

    (reply,) = outcome
    assert reply.payload == "early"  # type: ignore[attr-defined]
    letters = [(d.topic, d.recipient, d.reason) for d in rt.bus.dead_letters()]
    assert letters == [("passed", "b", "closed"), ("q", "a", "closed")]
    cut = rt.bus.dead_letters()[1].error  # the text a requester still waiting would get, no repr
    assert cut == "the runtime closed while 'a' handled it: the runtime is closed"
    with Journal.open(tmp_path / "j", readonly=True) as journal:
        journaled = [r.event for r in journal.read() if isinstance(r.event, IpcDeadLettered)]
    assert [(e.topic, e.reason) for e in journaled] == [("passed", "closed"), ("q", "closed")]


def test_a_message_cut_short_after_the_writer_stopped_leaves_no_dead_letter_anywhere(tmp_path: Path) -> None:
    # past call_timeout close() stops the writer without the busy agent; what the agent
    # meets after that can be journaled nowhere, so the in-memory list keeps no letter
    # the journal will not have either
    entered, gate, done = threading.Event(), threading.Event(), threading.Event()
    behaviors: dict[str, Callable[[], Behavior]] = {
        "answers": lambda: _AnswersThenPassesOn(entered, gate, done),
        "echo": _Echo,
    }
    rt = Runtime.open(tmp_path / "j", config=_config("sync"), clock=FakeClock(), behaviors=behaviors)
    try:
        rt.spawn("a", behavior="answers")
        rt.spawn("b", behavior="echo")
        rt.bus.send("x", "a", "m")
        assert entered.wait(10)
        with _short_call_timeout(rt, 0.3):  # the close alone: the set-up's commits may be slow under load
            rt.close()  # gives up on the busy agent after call_timeout
        gate.set()
        assert done.wait(10)
        pykka.ActorRegistry.stop_all(block=True, timeout=10)  # its message's handling is over
    finally:
        gate.set()
        rt.close()

    assert rt.bus.dead_letters() == []
    with Journal.open(tmp_path / "j", readonly=True) as journal:
        assert not any(isinstance(r.event, IpcDeadLettered) for r in journal.read())


class _HeldPastClose:
    """Holds a message past close()'s patience; then passes it on (refused: the runtime closes)."""

    def __init__(self, entered: threading.Event, gate: threading.Event, done: threading.Event) -> None:
        self.entered, self.gate, self.done = entered, gate, done

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:
        try:
            self.entered.set()
            assert self.gate.wait(30)
            ctx.send("b", "passed", message.topic)
        finally:
            self.done.set()
        return None


@pytest.mark.parametrize("journaled", [True, False])
def test_a_request_close_failed_already_gets_no_second_letter_when_its_behavior_is_cut_short(
    tmp_path: Path, journaled: bool
) -> None:
    # close() gives up on a busy agent after call_timeout and fails its waiting request
    # (one closed letter); the behavior, going on before the writer stops, is cut short
    # on its next call: the same request must not be lettered twice
    entered, gate, done = threading.Event(), threading.Event(), threading.Event()
    behaviors: dict[str, Callable[[], Behavior]] = {
        "held": lambda: _HeldPastClose(entered, gate, done),
        "echo": _Echo,
    }
    rt = Runtime.open(
        tmp_path / "j" if journaled else None,
        config=_config("sync"),
        clock=FakeClock(),
        behaviors=behaviors,
    )
    try:
        rt.spawn("a", behavior="held")
        rt.spawn("b", behavior="echo")
        bus_close = rt.bus._close

        def failed_then_cut_short() -> None:
            bus_close()  # the request is failed and lettered closed
            gate.set()  # the behavior goes on, as it may while the writer still stops
            assert done.wait(10)
            pykka.ActorRegistry.stop_all(block=True, timeout=10)  # its handling is over

        rt.bus._close = failed_then_cut_short  # type: ignore[method-assign]
        requester, outcome = _in_thread(lambda: rt.bus.request("x", "a", "q", timeout=20))
        assert entered.wait(10)
        with _short_call_timeout(rt, 0.3):  # the close alone: the set-up's commits may be slow under load
            rt.close()
        requester.join(10)
    finally:
        gate.set()
        rt.close()

    assert isinstance(outcome[0], RuntimeClosedError)
    letters = [(d.topic, d.reason) for d in rt.bus.dead_letters()]
    assert letters == [("q", "closed"), ("passed", "closed")]
    if journaled:
        with Journal.open(tmp_path / "j", readonly=True) as journal:
            kept = [
                (r.event.topic, r.event.reason)
                for r in journal.read()
                if isinstance(r.event, IpcDeadLettered)
            ]
        assert kept == letters


@pytest.mark.parametrize("kind", ["request", "send"])
def test_a_message_to_an_agent_killed_before_close_is_still_to_an_agent_not_registered(
    tmp_path: Path, kind: str
) -> None:
    # the sender journals the message, the agent is killed, close() begins, and only then
    # does the sender deliver it: the kill, not the close, is why it is not handled
    rt = Runtime.open(tmp_path / "j", config=_config("sync"), clock=FakeClock(), behaviors={"echo": _Echo})
    try:
        rt.spawn("b", behavior="echo")
        held = _HeldDelivery(rt)
        sender, outcome = _in_thread(_to_b(rt, kind))
        assert held.delivering.wait(10)
        rt.kill("b")
        stop_agents = rt._stop_agents

        def stop(entries: Any) -> None:
            held.go_on.set()  # close() has begun: the sender delivers now, before close fails what waits
            assert held.delivered.wait(10)
            stop_agents(entries)

        rt._stop_agents = stop  # type: ignore[method-assign]
        rt.close()
        sender.join(10)
    finally:
        held.go_on.set()
        rt.close()

    if kind == "request":
        assert isinstance(outcome[0], AgentNotRegisteredError), outcome
    assert [(d.topic, d.reason) for d in rt.bus.dead_letters()] == [("q", "agent not registered")]


def test_a_dead_letter_the_journal_refuses_is_not_kept_in_memory_either(tmp_path: Path) -> None:
    # the latest letters in memory are letters of the journal: none it never took
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        message = rt.bus.send("x", rt.spawn("a").id, "t")

        def refused(event: Any, *, durable: bool) -> None:  # noqa: ARG001
            msg = "the journal writer is stopped"
            raise RuntimeClosedError(msg)

        journal = rt.bus._journal
        rt.bus._journal = refused  # type: ignore[method-assign]
        with pytest.raises(RuntimeClosedError):
            rt.bus.dead_letter(message, "test", "")
        rt.bus._journal = journal  # type: ignore[method-assign]

        assert rt.bus.dead_letters() == []


def test_requests_failed_at_close_keep_no_letter_in_memory_that_the_journal_refused(tmp_path: Path) -> None:
    entered, gate = threading.Event(), threading.Event()
    rt = Runtime.open(
        tmp_path / "j",
        config=_config("sync"),
        clock=FakeClock(),
        behaviors={"gated": lambda: _Gated(entered, gate)},
    )
    try:
        rt.spawn("a", behavior="gated")
        requester, outcome = _in_thread(lambda: rt.bus.request("x", "a", "q", timeout=20))
        assert entered.wait(10)
        writer = rt._core.writer
        assert writer is not None
        submit = writer.submit_nowait

        def refusing(events: Any, **kwargs: Any) -> int:
            if any(isinstance(e, IpcDeadLettered) for e in events):
                msg = "the journal refused it"
                raise JournalFailedError(msg)
            return submit(events, **kwargs)

        writer.submit_nowait = refusing  # type: ignore[method-assign]
        with _short_call_timeout(rt, 0.3):  # the close alone: the set-up's commits may be slow under load
            rt.close()  # gives up on the busy agent, fails the request: its letter is refused
        requester.join(10)
    finally:
        gate.set()
        rt.close()

    assert isinstance(outcome[0], RuntimeClosedError)  # the requester hears the close all the same
    assert rt.bus.dead_letters() == []


def test_a_request_delivered_behind_a_busy_agents_queued_stop_is_refused_at_once(tmp_path: Path) -> None:
    # close() asked the busy recipient to stop; the request, journaled before, was
    # delivered after that: told behind the stop, it was dropped unseen, and its
    # requester waited for a reply that could not come until close() gave up on the
    # busy agents (call_timeout, 30 s by default: a SIGTERM'd simulation took that long).
    entered, gate = threading.Event(), threading.Event()
    behaviors = {"gated": lambda: _Gated(entered, gate)}
    rt = Runtime.open(tmp_path / "j", config=_config("sync", call_timeout=60), behaviors=behaviors)
    closer: threading.Thread | None = None
    try:
        rt.spawn("b", behavior="gated")
        rt.bus.send("x", "b", "hold")
        assert entered.wait(10)  # b is busy in its behavior
        held, ask_to_stop = _HeldDelivery(rt), rt._ask_to_stop

        def ask(entry: Any) -> Any:
            future = ask_to_stop(entry)
            held.go_on.set()  # the request is delivered once b's stop is queued
            return future

        rt._ask_to_stop = ask  # type: ignore[method-assign]
        requester, outcome = _in_thread(lambda: rt.bus.request("x", "b", "q", timeout=60))
        assert held.delivering.wait(10)
        closer, _ = _in_thread(rt.close)
        requester.join(10)  # b is still busy: only a refusal can end the request now
        assert not requester.is_alive()
    finally:
        gate.set()
        if closer is not None:
            closer.join(30)
        rt.close()

    (answer,) = outcome
    assert isinstance(answer, RuntimeClosedError), answer
    assert [(d.topic, d.reason) for d in rt.bus.dead_letters()] == [("q", "closed")]


def _assert_b_has_the_goal_and_its_changes(path: Path, config: Config, behaviors: dict[str, Any]) -> None:
    """Agent b's snapshot agrees with its events (what cogfabric verify checks), and
    reopening gives it the published goal and the changes it made after it."""
    from cogfabric._audit import check_snapshots  # noqa: PLC0415

    with Journal.open(path, readonly=True) as journal:
        checked, problem, _ = check_snapshots(journal)  # type: ignore[arg-type]
    with Runtime.open(path, config=config, behaviors=behaviors) as reopened:
        assert reopened.agent("b").task_context() == {"goal": "G"}
        assert reopened.agent("b").private("k4") == 4
    assert (checked, problem) == (1, None)


class _GatedThenChanges:
    """Holds its message until the gate opens, then changes its own state five times."""

    def __init__(self, entered: threading.Event, gate: threading.Event) -> None:
        self.entered, self.gate = entered, gate

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
        self.entered.set()
        assert self.gate.wait(30)
        for n in range(5):  # its own state: allowed during close, and snapshotted
            ctx.set_private(f"k{n}", n)


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_publication_refused_by_close_keeps_the_busy_agents_next_snapshot_short_of_it(
    tmp_path: Path, durability: str
) -> None:
    # A durable publication reached a busy agent once close() had asked it to stop: it
    # was refused, and counted as applied by an agent that never would, so the agent's
    # next snapshot claimed to cover it without its task context; reopening then gave
    # another state than replay, and verify failed the runtime's own journal.
    entered, gate, delivering = threading.Event(), threading.Event(), threading.Event()
    asked = threading.Event()
    config = _config(durability, call_timeout=30, snapshot_interval=3)
    behaviors = {"gated": lambda: _GatedThenChanges(entered, gate)}
    rt = Runtime.open(tmp_path / "j", config=config, behaviors=behaviors)
    publisher: threading.Thread | None = None
    closer: threading.Thread | None = None
    try:
        rt.spawn("b", behavior="gated", task_id="t")
        rt.bus.send("x", "b", "hold")
        assert entered.wait(10)
        ask_to_stop, deliver = rt._ask_to_stop, rt._deliver_publication

        def ask(entry: Any) -> Any:
            future = ask_to_stop(entry)
            asked.set()
            return future

        def held(*args: Any) -> None:  # committed; delivered once b's stop is queued
            delivering.set()
            assert asked.wait(10)
            deliver(*args)

        rt._ask_to_stop = ask  # type: ignore[method-assign]
        rt._deliver_publication = held  # type: ignore[method-assign,assignment]
        publisher, _ = _in_thread(lambda: rt.publish_task_context("t", {"goal": "G"}))
        assert delivering.wait(10)
        closer, _ = _in_thread(rt.close)
        publisher.join(10)
    finally:
        gate.set()  # b goes on: its own changes, and a snapshot past the publication's seq
        for thread in (publisher, closer):
            if thread is not None:
                thread.join(30)
        rt.close()

    _assert_b_has_the_goal_and_its_changes(tmp_path / "j", config, behaviors)


class _Keeps:
    """Keeps its ctx, for a test to call later from another thread."""

    def __init__(self, kept: list[AgentContext], got: threading.Event) -> None:
        self.kept, self.got = kept, got

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
        self.kept.append(ctx)
        self.got.set()


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_kept_ctx_of_an_agent_close_stopped_snapshots_short_of_a_refused_publication(
    tmp_path: Path, durability: str
) -> None:
    # A stopped actor was taken for an agent that changes nothing more, so a publication
    # refused to it counted as applied; but a kept ctx changes its agent's own state until
    # the writer stops, and its snapshot then claimed to cover the publication.
    kept: list[AgentContext] = []
    got, delivering, changed = threading.Event(), threading.Event(), threading.Event()
    config = _config(durability, call_timeout=30, snapshot_interval=3)
    behaviors = {"keeper": lambda: _Keeps(kept, got)}
    rt = Runtime.open(tmp_path / "j", config=config, behaviors=behaviors)
    publisher: threading.Thread | None = None
    try:
        rt.spawn("b", behavior="keeper", task_id="t")
        rt.bus.send("x", "b", "hi")
        assert got.wait(10)
        rt.flush()
        entry = rt._agents["b"]
        assert entry is not None
        deliver, bus_close = rt._deliver_publication, rt.bus._close

        def held(*args: Any) -> None:  # committed; delivered once close() stopped b's actor
            delivering.set()
            assert entry.ref.actor_stopped.wait(10)
            deliver(*args)  # refused
            for n in range(5):
                kept[0].set_private(f"k{n}", n)  # b's own state: a snapshot past the publication
            changed.set()

        def late_bus_close() -> None:  # the writer stops once those changes are handed over
            assert changed.wait(10)
            bus_close()

        rt._deliver_publication = held  # type: ignore[method-assign,assignment]
        rt.bus._close = late_bus_close  # type: ignore[method-assign]
        publisher, _ = _in_thread(lambda: rt.publish_task_context("t", {"goal": "G"}))
        assert delivering.wait(10)
        rt.close()
    finally:
        changed.set()
        if publisher is not None:
            publisher.join(30)
        rt.close()

    _assert_b_has_the_goal_and_its_changes(tmp_path / "j", config, behaviors)


def test_a_session_batch_run_after_close_gave_up_on_the_session_actor_reads_no_closed_journal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # close() stops the session actor within call_timeout and leaves a busy one running.
    # Its batch, taken before close() began and run once close() was over, is refused by
    # the stopped writer; its reload then read the journal close() had closed: an ERROR
    # with a traceback ("the session actor failed on a batch"), lmdb's closed object as
    # JournalUnavailableError (found by a helper's hunt at close).
    runtime = Runtime.open(tmp_path / "j", clock=FakeClock())
    memory = runtime.memory
    session = memory.create_session("u")
    real_run = memory._run
    taken = threading.Event()

    def run(ops: list[Any]) -> None:
        if any(op.name == "add" for op in ops):  # taken before close() began, run once it is over
            taken.set()
            assert runtime._close_done.wait(10)
        real_run(ops)

    memory._run = run  # type: ignore[method-assign]
    # only the add and the close have the short call_timeout (the set-up's commits may be
    # slow under load); the add has given up before close() begins, not in a race with it
    with caplog.at_level("WARNING"), _short_call_timeout(runtime, 0.3):
        caller, outcome = _in_thread(lambda: memory.add_message(session, "user", "m"))
        assert taken.wait(10)
        caller.join(10)
        runtime.close()
        assert memory._ref.actor_stopped.wait(10)
    assert [type(e) for e in outcome] == [ActorTimeoutError]  # its caller gave up on the busy actor
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as reopened:
        assert [m.content for m in reopened.memory.get_messages(session)][1:] == []

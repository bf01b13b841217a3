"""The agent actor's promises (``actors/_agent.py``) that a mutation test found no test held.

Each test holds what a docstring or README.md promises of an agent: its cognitive
state is handed out as deep copies (the checkpoint journaled too), a state call that
waited behind a kill is refused and a kill the clock refused leaves the agent alive,
lifecycle calls are checked in their mailbox order, ``ctx.subscribe`` journals only a
change, a kill is followed by no snapshot, and the agent recovers by itself from a
failure outside its behavior and from a commit it stopped waiting for. Each was found
by a mutation test of ``_agent.py`` (hand-made mutants, one at a time, against
tests/actors and tests/reliability), and seen failing under its mutant. Where a call
must be known to wait in an agent's mailbox, its ``MailboxSlots`` tell; where a commit
must outlast ``call_timeout``, the journal's append is held.
"""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import (
    ActorTimeoutError,
    AgentContext,
    AgentNotFoundError,
    AgentRetiredError,
    AgentState,
    ClockError,
    Config,
    FakeClock,
    JournalConfig,
    Runtime,
)
from cogfabric.actors._agent import AgentActor, MailboxSlots
from cogfabric.actors._core import replay_agent
from cogfabric.events import (
    AgentKilled,
    CheckpointTaken,
    CognitiveState,
    IpcMessage,
    IpcSubscribed,
    IpcUnsubscribed,
    PrivateSet,
)
from cogfabric.store import Journal

from .test_supervision import _short_call_timeout

if TYPE_CHECKING:
    from pathlib import Path


def _records(path: Path) -> list[Any]:
    with Journal.open(path, readonly=True) as journal:
        return [record.event for record in journal.read()]


def _run(outcomes: dict[str, object], name: str, call: Any) -> None:
    """Keep in ``outcomes[name]`` what ``call()`` returned, or what it raised (a thread's target)."""
    try:
        outcomes[name] = call()
    except Exception as exc:  # noqa: BLE001 - what the call raised is the outcome
        outcomes[name] = exc


class _Counting:
    """A behavior that counts its instances; it raises on 'boom', after breaking the clock."""

    instances = 0
    clock: _BreakableClock | None = None

    def __init__(self) -> None:
        type(self).instances += 1
        self.number = type(self).instances

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> object:  # noqa: ARG002
        if message.topic == "boom":
            assert self.clock is not None
            self.clock.broken = True  # what handles the failure cannot read the time
            msg = "boom"
            raise ValueError(msg)
        return self.number


class _BreakableClock(FakeClock):
    broken = False

    def now(self) -> float:
        if self.broken:
            msg = "the clock is gone"
            raise OSError(msg)
        return super().now()


def test_a_failure_whose_handling_fails_too_still_restarts_the_agent_with_a_fresh_behavior(
    tmp_path: Path,
) -> None:
    # A failure the agent meets handling a behavior's failure (the clock) still restarts it fresh (_failed).
    clock = _BreakableClock()
    _Counting.instances, _Counting.clock = 0, clock
    with Runtime.open(tmp_path / "j", clock=clock, behaviors={"c": _Counting}) as rt:
        rt.spawn("a", behavior="c")
        first = rt.bus.request("x", "a", "which", timeout=10).payload
        rt.bus.send("x", "a", "boom")
        rt.agent("a").private("k")  # the call queued behind it: the failure has been handled
        clock.broken = False
        after = rt.bus.request("x", "a", "which", timeout=10).payload

    assert first == 1
    assert after == 2


class _Watched(MailboxSlots):
    """Mailbox slots that tell when a lifecycle call took one, and when a message took one after it."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.control_in = threading.Event()
        self.call_in = threading.Event()

    def acquire_control(self, timeout: float | None = None) -> bool:
        taken = super().acquire_control(timeout)
        self.control_in.set()
        return taken

    def acquire(self, timeout: float | None = None) -> bool:
        taken = super().acquire(timeout)
        if self.control_in.is_set():
            self.call_in.set()
        return taken


class _Blocking:
    started = threading.Event()
    release = threading.Event()

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
        type(self).started.set()
        assert type(self).release.wait(10)


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_state_call_queued_behind_a_kill_is_refused_as_not_found(tmp_path: Path, durability: str) -> None:
    # A state call that waited behind a kill raises AgentNotFoundError, never returns as done (_after_death).
    _Blocking.started, _Blocking.release = threading.Event(), threading.Event()
    config = Config(journal=JournalConfig(durability=durability))  # type: ignore[arg-type]
    outcomes: dict[str, object] = {}
    run = functools.partial(_run, outcomes)

    with Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors={"b": _Blocking}) as rt:
        agent = rt.spawn("a", behavior="b")
        shared = rt._entry("a").shared
        slots = shared.slots = _Watched(shared.slots._size)  # before its first message
        rt.bus.send("x", "a", "block")
        assert _Blocking.started.wait(10)
        killer = threading.Thread(target=run, args=("kill", lambda: rt.kill("a")))
        setter = threading.Thread(target=run, args=("set", lambda: agent.set_private("k", 1)))
        try:
            killer.start()
            assert slots.control_in.wait(10)
            setter.start()
            assert slots.call_in.wait(10)
        finally:
            _Blocking.release.set()
            killer.join(10)
            setter.join(10)
        rt.flush()

    assert outcomes["kill"] is None
    assert isinstance(outcomes["set"], AgentNotFoundError), outcomes["set"]
    assert not [e for e in _records(tmp_path / "j") if isinstance(e, PrivateSet)]


class _Checkpointer:
    """Takes a checkpoint and changes the copy it was given, before its message is done."""

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> str:  # noqa: ARG002
        taken = ctx.checkpoint_cognitive()
        taken.working_memory["notes"].append("changed by the behavior")
        read = ctx.cognitive_state()
        read.working_memory["notes"].append("changed by the behavior, too")
        return "done"


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_cognitive_state_read_or_checkpointed_is_a_copy_the_reader_cannot_change(
    tmp_path: Path, durability: str
) -> None:
    # cognitive_state and checkpoint_cognitive hand out deep copies: agent and checkpoint stay as they were.
    config = Config(journal=JournalConfig(durability=durability))  # type: ignore[arg-type]
    stored = CognitiveState(working_memory={"notes": ["stored"]})
    with Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors={"c": _Checkpointer}) as rt:
        agent = rt.spawn("a", behavior="c")
        agent.set_cognitive_state(stored)
        read = agent.cognitive_state()
        read.working_memory["notes"].append("changed by the caller")
        rt.bus.request("x", "a", "checkpoint", timeout=10)
        after = agent.cognitive_state()

    checkpoints = [e.state for e in _records(tmp_path / "j") if isinstance(e, CheckpointTaken)]
    assert after.working_memory == {"notes": ["stored"]}
    assert [c.working_memory for c in checkpoints] == [{"notes": ["stored"]}]


def test_an_agent_whose_sync_commit_timed_out_takes_the_journals_word_once_it_lands_unasked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Once a sync commit it stopped waiting for lands, the agent catches up unasked (_catch_up_when_written).
    caught_up = threading.Event()
    catch_up = AgentActor._catch_up

    def watched(actor: AgentActor, **kwargs: bool) -> None:
        catch_up(actor, **kwargs)
        if not actor._stale:
            caught_up.set()

    monkeypatch.setattr(AgentActor, "_catch_up", watched)
    # The caller's wait and the agent's are both call_timeout, the caller's begun first: the
    # disk opens only once the agent's own wait has timed out too (else it lands in time)
    behind = threading.Event()
    when_written = AgentActor._catch_up_when_written

    def noted(actor: AgentActor, writer: Any) -> None:
        when_written(actor, writer)
        behind.set()

    monkeypatch.setattr(AgentActor, "_catch_up_when_written", noted)
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        agent = rt.spawn("a")
        journal = rt._journal
        assert journal is not None
        append, disk = journal.append, threading.Event()

        def stalled(*args: Any, **kwargs: Any) -> list[int]:
            assert disk.wait(10)
            return append(*args, **kwargs)

        journal.append = stalled  # type: ignore[method-assign]
        try:
            with _short_call_timeout(rt, 0.3):  # the suspend's waits alone: the spawn's may be slow
                with pytest.raises(ActorTimeoutError):
                    rt.suspend("a")
                assert behind.wait(10)
            before = agent.lifecycle
        finally:
            disk.set()
        assert caught_up.wait(10)
        after = agent.lifecycle

    assert before == AgentState.IDLE
    assert after == AgentState.SUSPENDED


class _Counted(MailboxSlots):
    """Mailbox slots that count the lifecycle calls that took theirs."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.lifecycle_calls = threading.Semaphore(0)

    def acquire_control(self, timeout: float | None = None) -> bool:
        taken = super().acquire_control(timeout)
        self.lifecycle_calls.release()
        return taken


def test_a_recover_queued_behind_a_retire_is_refused_as_retired(tmp_path: Path) -> None:
    # A recover handled after a retire in the agent's mailbox gets AgentRetiredError; the agent stays retired.
    outcomes: dict[str, object] = {}
    run = functools.partial(_run, outcomes)

    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        agent = rt.spawn("a")
        shared = rt._entry("a").shared
        slots = shared.slots = _Counted(shared.slots._size)  # before its first message
        journal = rt._journal
        assert journal is not None
        append, disk, held = journal.append, threading.Event(), threading.Event()

        def stalled(*args: Any, **kwargs: Any) -> list[int]:
            held.set()
            assert disk.wait(10)
            return append(*args, **kwargs)

        journal.append = stalled  # type: ignore[method-assign]
        threads = [
            threading.Thread(target=run, args=("set", lambda: agent.set_private("k", 1))),
            threading.Thread(target=run, args=("retire", lambda: rt.retire("a"))),
            threading.Thread(target=run, args=("recover", lambda: rt.recover("a", CognitiveState()))),
        ]
        try:
            threads[0].start()
            assert held.wait(10)  # the agent waits for its set_private's commit
            for thread in threads[1:]:
                thread.start()
                assert slots.lifecycle_calls.acquire(timeout=10)  # in its mailbox, in this order
        finally:
            disk.set()
            for thread in threads:
                thread.join(10)
        lifecycle = agent.lifecycle
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        reopened = rt.agent("a").lifecycle

    assert outcomes["set"] is None
    assert outcomes["retire"] is None
    assert isinstance(outcomes["recover"], AgentRetiredError), outcomes["recover"]
    assert lifecycle == reopened == AgentState.RETIRED


def test_a_kill_refused_for_want_of_a_time_leaves_the_agent_alive(tmp_path: Path) -> None:
    # A kill that raises before its death is journaled leaves the agent alive (op_kill: "the agent lives on").
    clock = _BreakableClock()
    with Runtime.open(tmp_path / "j", clock=clock) as rt:
        agent = rt.spawn("a")
        clock.broken = True
        with pytest.raises(ClockError):
            rt.kill("a")
        clock.broken = False
        agent.set_private("k", 1)
        alive = (rt.agents(), agent.private("k"))
        rt.kill("a")
        with pytest.raises(AgentNotFoundError):
            agent.private("k")

    assert alive == (["a"], 1)
    kills = [e for e in _records(tmp_path / "j") if isinstance(e, AgentKilled)]
    assert len(kills) == 1


class _Subscriber:
    """Subscribes its agent to the message's topic twice, and answers what each call returned."""

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> list[bool]:
        topic = message.payload
        return [ctx.subscribe(topic), ctx.subscribe(topic), ctx.unsubscribe(topic), ctx.unsubscribe(topic)]


def test_ctx_subscribe_says_false_and_journals_nothing_when_already_subscribed(tmp_path: Path) -> None:
    # ctx.subscribe (unsubscribe) says False and journals nothing when already (not) subscribed.
    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"s": _Subscriber}) as rt:
        rt.spawn("a", behavior="s")
        answers = rt.bus.request("x", "a", "subscribe", "news", timeout=10).payload

    events = _records(tmp_path / "j")
    assert answers == [True, False, True, False]
    assert len([e for e in events if isinstance(e, IpcSubscribed)]) == 1
    assert len([e for e in events if isinstance(e, IpcUnsubscribed)]) == 1


def test_a_kill_takes_no_snapshot_even_when_one_is_due(tmp_path: Path) -> None:
    # A kill journals "not even a snapshot" after it (README), though one is due: replay keeps it dead.
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        agent = rt.spawn("a")
        for i in range(3):
            agent.set_private("k", i)
    config = Config(journal=JournalConfig(snapshot_interval=1))
    with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as rt:
        rt.kill("a")
        journal = rt._journal
        assert journal is not None
        rt.flush()
        snapshot = journal.load_snapshot("agent/a")
    with Journal.open(tmp_path / "j", readonly=True) as journal:
        replayed = replay_agent(journal, "a")
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        agents = rt.agents()

    assert snapshot is None
    assert replayed is None  # dead, as its events say
    assert agents == []

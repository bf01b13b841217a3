"""A message to many agents (a broadcast, a task context publication, a flush) wakes the idle
ones a window at a time, and never waits long for busy ones (FanOut)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric import FakeClock, Runtime
from cogfabric.actors import Config, JournalConfig
from cogfabric.actors._agent import PACED, AgentActor, FanOut, MailboxSlots
from cogfabric.events import PrivateSet

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from cogfabric.actors import AgentContext, Behavior
    from cogfabric.events import IpcMessage


class _Held:
    """Counts the agents inside their behavior; each stays until the test lets one go."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.inside = self.entered = self.most_inside = 0
        self.permits = threading.Semaphore(0)

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
        with self.changed:
            self.inside += 1
            self.entered += 1
            self.most_inside = max(self.most_inside, self.inside)
            self.changed.notify_all()
        assert self.permits.acquire(timeout=30)
        with self.changed:
            self.inside -= 1
            self.changed.notify_all()

    def wait_entered(self, count: int) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.entered >= count, timeout=10)


class _Fails:
    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
        msg = "this behavior always fails"
        raise ValueError(msg)


def _window(monkeypatch: pytest.MonkeyPatch, size: int, patience: float, write_offs: int = 8) -> None:
    monkeypatch.setattr(FanOut, "WINDOW", size)
    monkeypatch.setattr(FanOut, "PATIENCE", patience)
    monkeypatch.setattr(FanOut, "WRITE_OFFS", write_offs)


def _in_thread(call: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    outcome: list[object] = []

    def run() -> None:
        outcome.append(call())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


@pytest.fixture
def held() -> _Held:
    return _Held()


@pytest.fixture
def runtime(held: _Held) -> Iterator[Runtime]:
    behaviors: dict[str, Callable[[], Behavior]] = {"held": lambda: held, "fails": _Fails}
    rt = Runtime.open(None, clock=FakeClock(), behaviors=behaviors)
    try:
        yield rt
    finally:
        held.permits.release(1000)  # nothing stays held past the test
        rt.close()


def _subscribed(rt: Runtime, count: int, behavior: str) -> list[str]:
    agents = rt.spawn_many([{"agent_id": f"a{i}", "behavior": behavior} for i in range(count)])
    for agent in agents:
        rt.bus.subscribe(agent.id, "news")
    return [agent.id for agent in agents]


def test_a_broadcast_wakes_at_most_a_window_of_idle_agents_at_once(
    monkeypatch: pytest.MonkeyPatch, runtime: Runtime, held: _Held
) -> None:
    _window(monkeypatch, 3, patience=30.0)  # never written off here: only finishing frees a place
    _subscribed(runtime, 8, "held")
    broadcaster, delivered = _in_thread(lambda: runtime.bus.broadcast("driver", "news", "go"))
    assert held.wait_entered(3)
    for count in range(4, 9):  # each agent let go makes room for the next one
        held.permits.release()
        assert held.wait_entered(count)
    held.permits.release(3)
    broadcaster.join(10)
    assert delivered == [8]
    assert held.most_inside == 3


def test_a_fan_out_to_busy_agents_writes_its_windows_off_and_reaches_all_of_them(
    monkeypatch: pytest.MonkeyPatch, runtime: Runtime, held: _Held
) -> None:
    # None of them finishes while the broadcast goes on (a long LLM call, say): each full
    # window is written off after PATIENCE, and after WRITE_OFFS of them the rest goes
    # out at once. Every agent gets the message; the broadcast does not wait for them.
    _window(monkeypatch, 2, patience=0.01, write_offs=2)
    _subscribed(runtime, 10, "held")
    broadcaster, delivered = _in_thread(lambda: runtime.bus.broadcast("driver", "news", "go"))
    broadcaster.join(10)
    assert delivered == [10]
    assert held.wait_entered(10)
    assert held.most_inside == 10


def test_a_behavior_that_raises_still_frees_its_place_in_the_window(
    monkeypatch: pytest.MonkeyPatch, runtime: Runtime
) -> None:
    _window(monkeypatch, 2, patience=30.0)  # a place never freed would hold the broadcast 30 s
    _subscribed(runtime, 6, "fails")
    broadcaster, delivered = _in_thread(lambda: runtime.bus.broadcast("driver", "news", "go"))
    broadcaster.join(10)
    assert delivered == [6]
    runtime.flush(10)
    assert [d.reason for d in runtime.bus.dead_letters()] == ["handler error"] * 6


def test_an_agent_with_mail_waiting_is_not_paced_and_written_off_windows_end_the_pacing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _window(monkeypatch, 1, patience=0.001, write_offs=2)
    fanout, message = FanOut(), ("message",)
    busy = MailboxSlots(4)
    assert busy.acquire(0)
    assert fanout.wrap(busy, message) is message  # telling it wakes nothing
    idle = MailboxSlots(4)
    first = fanout.wrap(idle, message)
    assert first[:2] == (PACED, message)
    second = fanout.wrap(idle, message)  # nobody frees the first place: written off
    third = fanout.wrap(idle, message)  # the second write-off
    assert second[2] is not first[2]
    assert third[2] is not second[2]
    assert fanout.wrap(idle, message) is message  # the rest goes out unpaced


def test_a_publication_is_paced_and_still_reaches_every_agent(
    monkeypatch: pytest.MonkeyPatch, runtime: Runtime
) -> None:
    _window(monkeypatch, 2, patience=30.0)  # a place never freed would hold the call 30 s
    agents = runtime.spawn_many([{"agent_id": f"t{i}", "task_id": "fan"} for i in range(7)])
    wrap = FanOut.wrap
    paced: list[bool] = []

    def spy(self: FanOut, slots: MailboxSlots, message: tuple[Any, ...]) -> tuple[Any, ...]:
        told = wrap(self, slots, message)
        paced.append(told[0] == PACED)
        return told

    monkeypatch.setattr(FanOut, "wrap", spy)
    publisher, reached = _in_thread(lambda: runtime.publish_task_context("fan", {"round": 1}))
    publisher.join(10)
    assert reached == [[agent.id for agent in agents]]
    assert paced == [True] * 7
    assert all(agent.task_context() == {"round": 1} for agent in agents)


def test_a_flush_asks_the_agent_with_a_message_in_hand_and_does_not_wake_the_idle_ones(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, held: _Held
) -> None:
    asked: list[str] = []
    noop = AgentActor.op_noop

    def spy_noop(self: AgentActor) -> None:
        asked.append(self._state.id)
        noop(self)

    wrapped = threading.Event()
    wrap = FanOut.wrap

    def spy_wrap(self: FanOut, slots: MailboxSlots, message: tuple[Any, ...]) -> tuple[Any, ...]:
        told = wrap(self, slots, message)
        wrapped.set()  # flush() looked at every agent before this one: the busy one is last
        return told

    monkeypatch.setattr(AgentActor, "op_noop", spy_noop)
    monkeypatch.setattr(FanOut, "wrap", spy_wrap)
    config = Config(journal=JournalConfig(durability="batch"))
    with Runtime.open(
        tmp_path / "j", config=config, clock=FakeClock(), behaviors={"held": lambda: held}
    ) as rt:
        idle = rt.spawn_many([{"agent_id": f"idle{i}"} for i in range(5)])
        rt.spawn("busy", behavior="held")
        for agent in idle:
            agent.set_private("key", agent.id)  # handed over when the call returns
        rt.bus.send("driver", "busy", "work")
        assert held.wait_entered(1)
        try:
            flusher, outcome = _in_thread(rt.flush)
            assert wrapped.wait(10)
        finally:
            held.permits.release()
        flusher.join(10)
        assert outcome == [None]
        assert asked == ["busy"]
        journal = rt._journal
        assert journal is not None
        stored = {r.event.agent for r in journal.read() if isinstance(r.event, PrivateSet)}
        assert stored == {agent.id for agent in idle}

"""A message to many agents (a broadcast, a task context publication) wakes the idle ones a
window at a time, and never waits long for busy ones (FanOut); a flush does not wake idle agents."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric import FakeClock, Runtime
from cogfabric.actors import Config, JournalConfig, MailboxFullError
from cogfabric.actors._agent import PACED, AgentActor, FanOut, Shared
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


class _Quiet:
    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:
        pass


class _Fails:
    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
        msg = "this behavior always fails"
        raise ValueError(msg)


def _window(monkeypatch: pytest.MonkeyPatch, size: int, patience: float, budget: float = 60.0) -> None:
    monkeypatch.setattr(FanOut, "WINDOW", size)
    monkeypatch.setattr(FanOut, "PATIENCE", patience)
    monkeypatch.setattr(FanOut, "BUDGET", budget)
    monkeypatch.setattr(FanOut, "BUDGET_PER_TARGET", 0.0)


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
    behaviors: dict[str, Callable[[], Behavior]] = {"held": lambda: held, "fails": _Fails, "quiet": _Quiet}
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


def test_a_fan_out_to_agents_that_stay_busy_writes_its_windows_off_and_reaches_all_of_them(
    monkeypatch: pytest.MonkeyPatch, runtime: Runtime, held: _Held
) -> None:
    # None of them finishes while the broadcast goes on (a long LLM call, say): each full
    # window is written off after PATIENCE, and past the budget the rest goes out at
    # once. Every agent gets the message; the broadcast does not wait for them.
    _window(monkeypatch, 2, patience=0.01, budget=0.03)
    _subscribed(runtime, 10, "held")
    broadcaster, delivered = _in_thread(lambda: runtime.bus.broadcast("driver", "news", "go"))
    broadcaster.join(10)
    assert delivered == [10]
    assert held.wait_entered(10)
    assert held.most_inside == 10


def test_a_message_that_fails_outside_its_behavior_still_frees_its_place_in_the_window(
    monkeypatch: pytest.MonkeyPatch, runtime: Runtime
) -> None:
    # Handling fails in the actor itself, not in the behavior (whose errors the agent
    # catches): the agent restarts from the journal, and its place is given back.
    _window(monkeypatch, 2, patience=30.0)  # a place never given back would hold the broadcast 30 s

    def broken(self: AgentActor, message: IpcMessage) -> None:  # noqa: ARG001
        msg = "handling broke outside the behavior"
        raise RuntimeError(msg)

    _subscribed(runtime, 6, "fails")
    monkeypatch.setattr(AgentActor, "_on_ipc", broken)
    broadcaster, delivered = _in_thread(lambda: runtime.bus.broadcast("driver", "news", "go"))
    broadcaster.join(10)
    assert delivered == [6]


def test_a_place_is_given_back_when_the_message_never_reaches_its_agent(
    monkeypatch: pytest.MonkeyPatch, runtime: Runtime
) -> None:
    # Killed between the fan-out's look and the delivery: the window must not shrink.
    _window(monkeypatch, 1, patience=30.0)
    agents = runtime.spawn_many([{"agent_id": f"t{i}", "task_id": "fan"} for i in range(3)])
    tell = Runtime._tell_publication

    def killed_first(self: Runtime, agent_id: str, *args: Any) -> None:
        if agent_id == "t0":
            self.kill("t0")  # its place taken, before the tell
        tell(self, agent_id, *args)

    monkeypatch.setattr(Runtime, "_tell_publication", killed_first)
    publisher, reached = _in_thread(lambda: runtime.publish_task_context("fan", {"round": 1}))
    publisher.join(10)
    assert reached == [[agent.id for agent in agents]]
    assert [agent.task_context() for agent in agents[1:]] == [{"round": 1}] * 2


def test_a_broadcast_gives_a_place_back_for_a_full_mailbox_and_for_an_agent_killed_meanwhile(
    monkeypatch: pytest.MonkeyPatch, runtime: Runtime
) -> None:
    # Each idle subscriber took a place before its mailbox turned out full (a1) or it was
    # killed before the message was told (a2): both places come back, or the next idle
    # subscriber would wait PATIENCE (30 s here) for them.
    _window(monkeypatch, 1, patience=30.0)
    _subscribed(runtime, 4, "quiet")
    admit = Runtime._admit
    killed: list[str] = []

    def admit_or_fail(self: Runtime, agent_id: str, *args: Any) -> None:
        if agent_id == "a1":
            msg = "the mailbox of 'a1' stayed full"
            raise MailboxFullError(msg)
        admit(self, agent_id, *args)
        if agent_id == "a2" and not killed:
            killed.append(agent_id)
            self.kill("a2")  # after its slot was taken, before the tell

    monkeypatch.setattr(Runtime, "_admit", admit_or_fail)
    broadcaster, delivered = _in_thread(lambda: runtime.bus.broadcast("driver", "news", "go"))
    broadcaster.join(10)
    assert delivered == [2]  # a0 and a3
    assert [(d.recipient, d.reason) for d in runtime.bus.dead_letters()] == [("a1", "mailbox full")]


def test_an_interrupted_publication_still_reaches_every_target(
    monkeypatch: pytest.MonkeyPatch, runtime: Runtime
) -> None:
    # Durable before it is delivered: a Ctrl-C while pacing must not leave the live
    # agents short of what replay gives them.
    agents = runtime.spawn_many([{"agent_id": f"t{i}", "task_id": "fan"} for i in range(5)])
    wrap = FanOut.wrap
    calls: list[str] = []

    def interrupted(self: FanOut, shared: Shared, message: tuple[Any, ...]) -> tuple[Any, ...]:
        calls.append("wrap")
        if len(calls) == 3:
            raise KeyboardInterrupt
        return wrap(self, shared, message)

    monkeypatch.setattr(FanOut, "wrap", interrupted)
    with pytest.raises(KeyboardInterrupt):
        runtime.publish_task_context("fan", {"round": 1})
    assert [agent.task_context() for agent in agents] == [{"round": 1}] * 5


def test_an_agent_with_mail_waiting_or_a_message_in_hand_is_not_paced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _window(monkeypatch, 1, patience=30.0)  # a wait would show as a 30 s hang
    fanout, message = FanOut(3), ("message",)
    waiting = Shared("IDLE", 4, has_behavior=True)
    assert waiting.slots.acquire(0)
    assert fanout.wrap(waiting, message) is message  # telling it wakes nothing
    handling = Shared("IDLE", 4, has_behavior=True)
    handling.busy = True
    assert fanout.wrap(handling, message) is message
    idle = Shared("IDLE", 4, has_behavior=True)
    paced = fanout.wrap(idle, message)
    assert paced[:2] == (PACED, message)
    FanOut.untold(paced)  # its place back: the next idle agent does not wait
    assert fanout.wrap(idle, message)[:2] == (PACED, message)


def test_a_window_nobody_frees_is_written_off_and_past_its_budget_the_fan_out_stops_pacing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _window(monkeypatch, 1, patience=0.001, budget=0.5)
    fanout, message, idle = FanOut(1000), ("message",), Shared("IDLE", 4, has_behavior=True)
    told = [fanout.wrap(idle, message) for _ in range(2)]
    assert told[1][2] is not told[0][2]  # the first place was never freed: a new window
    for _ in range(100_000):  # each written off after 1 ms: the 0.5 s run out long before
        if fanout.wrap(idle, message) is message:
            break
    else:
        pytest.fail("the fan-out kept pacing past its budget")
    assert fanout.wrap(idle, message) is message


def test_a_publication_is_paced_and_still_reaches_every_agent(
    monkeypatch: pytest.MonkeyPatch, runtime: Runtime
) -> None:
    _window(monkeypatch, 2, patience=30.0)  # a place never freed would hold the call 30 s
    agents = runtime.spawn_many([{"agent_id": f"t{i}", "task_id": "fan"} for i in range(7)])
    wrap = FanOut.wrap
    paced: list[bool] = []

    def spy(self: FanOut, shared: Shared, message: tuple[Any, ...]) -> tuple[Any, ...]:
        told = wrap(self, shared, message)
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

    admitted = threading.Event()
    admit = Runtime._admit

    def spy_admit(self: Runtime, agent_id: str, *args: Any) -> None:
        admit(self, agent_id, *args)
        admitted.set()  # flush() looked at every agent before this one: the busy one is last

    monkeypatch.setattr(AgentActor, "op_noop", spy_noop)
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
        monkeypatch.setattr(Runtime, "_admit", spy_admit)  # from here on only flush() admits
        try:
            flusher, outcome = _in_thread(rt.flush)
            assert admitted.wait(10)
        finally:
            held.permits.release()
        flusher.join(10)
        assert outcome == [None]
        assert asked == ["busy"]
        journal = rt._journal
        assert journal is not None
        stored = {r.event.agent for r in journal.read() if isinstance(r.event, PrivateSet)}
        assert stored == {agent.id for agent in idle}

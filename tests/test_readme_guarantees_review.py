"""README's "Guarantees" checked against the code: a behavior's send, persist-then-apply, batch fail-stop."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf
from cogfabric.actors import AgentState
from cogfabric.events import IpcMessage, IpcSubscribed, LifecycleChanged, PrivateSet
from tests.actors.test_supervision import _stall

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from cogfabric.actors import AgentContext
    from cogfabric.events import Event


def test_a_behaviors_send_is_committed_and_delivered_before_its_next_change(tmp_path: Path) -> None:
    # README "Durability modes": ctx.send's message goes to the writer at once, not with
    # the agent's next change; only the delivery record and ctx.llm records wait.
    received, resumed, done = threading.Event(), threading.Event(), threading.Event()

    class Sender:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            ctx.send("b", "hi", 1)
            assert resumed.wait(10)
            ctx.set_private("after", True)
            done.set()

    class Recipient:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            received.set()

    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), behaviors={"s": Sender, "r": Recipient}) as rt:
        rt.spawn("a", task_id="t", behavior="s")
        rt.spawn("b", task_id="t", behavior="r")
        rt.bus.send("x", "a", "go")
        try:
            assert received.wait(10)  # the sender is still before its next change
            assert rt._journal is not None
            events = [r.event for r in rt._journal.read()]
            assert [e.topic for e in events if isinstance(e, IpcMessage)] == ["go", "hi"]
            assert not any(isinstance(e, PrivateSet) for e in events)
        finally:
            resumed.set()
        assert done.wait(10)


@pytest.mark.parametrize(
    ("change", "kind", "unchanged"),
    [
        (
            lambda rt: rt.suspend("b"),
            LifecycleChanged,
            lambda rt: rt.agent("b").lifecycle == AgentState.IDLE,
        ),
        (lambda rt: rt.bus.subscribe("b", "top"), IpcSubscribed, lambda rt: rt.bus.subscribers("top") == []),
    ],
    ids=["suspend", "subscribe"],
)
def test_a_sync_change_is_not_visible_while_its_commit_is_stalled(
    tmp_path: Path,
    change: Callable[[cf.Runtime], object],
    kind: type,
    unchanged: Callable[[cf.Runtime], bool],
) -> None:
    # README "Durability modes": visible only once committed (persist-then-apply), also
    # to the reads that do not ask the agent (its lifecycle, the bus's topic index).
    def holds(events: Sequence[Event]) -> bool:
        return any(isinstance(e, kind) for e in events)

    entered = threading.Event()
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as rt:
        rt.spawn("b", task_id="t")
        gate = _stall(rt, holds, entered)
        outcome: list[Any] = []
        caller = threading.Thread(target=lambda: outcome.append(change(rt)))
        caller.start()
        try:
            assert entered.wait(10)
            assert unchanged(rt)
        finally:
            gate.set()
            caller.join(10)
        assert outcome == [None]
        assert not unchanged(rt)


def test_a_failed_batch_commit_drops_its_spawn_lifecycle_subscription_and_message(tmp_path: Path) -> None:
    # README "Durability modes": on a failed group commit every agent drops what the
    # journal does not hold, and the session memory does so before its next call.
    path = tmp_path / "j"
    config = {"journal": {"durability": "batch", "map_size": 140 << 10, "max_map_size": 140 << 10}}
    held = threading.Event()
    with cf.Runtime.open(path, clock=cf.FakeClock(), config=config) as rt:
        rt.spawn("a", task_id="t")
        rt.spawn("c", task_id="t")
        session = rt.memory.create_session("u")
        rt.flush()

        def first(events: Sequence[Event]) -> bool:
            return any(isinstance(e, PrivateSet) and e.key == "first" for e in events)

        gate = _stall(rt, first, held)
        rt.agent("c").set_private("first", 1)  # its commit waits: what follows queues behind it
        assert held.wait(10)
        rt.agent("a").set_private("big", "z" * 200_000)  # no commit can hold it
        rt.suspend("c")
        rt.spawn("b", task_id="t")
        rt.bus.subscribe("c", "top")
        rt.memory.add_message(session, "user", "m")
        gate.set()
        with pytest.raises(cf.JournalError):
            rt.flush(10)
        live = (rt.agents(), rt.agent("c").lifecycle, rt.bus.subscribers("top"), rt.agent("a").private("big"))
        messages = [m.content for m in rt.memory.get_messages(session)]
    assert live == (["a", "c"], AgentState.IDLE, [], None)
    assert messages == ["New session started"]
    with cf.Runtime.open(path, clock=cf.FakeClock(), config=config) as rt:
        reopened = (rt.agents(), rt.agent("c").lifecycle, rt.bus.subscribers("top"))
        assert reopened == (["a", "c"], AgentState.IDLE, [])
        assert rt.agent("c").private("first") == 1
        assert [m.content for m in rt.memory.get_messages(session)] == ["New session started"]

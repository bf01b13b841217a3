"""A behavior's own bus operations: ``ctx.delegate``, ``ctx.handoff`` and ``ctx.reply``.

A behavior's factory runs while ``Runtime.open`` recovers agents, before the runtime
exists for it to close over; so what a behavior does on the bus it does through ``ctx``,
with its agent as the sender, the handled message as the cause and its trace continued.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from cogfabric.actors import (
    AgentContext,
    Behavior,
    Config,
    FakeClock,
    IpcHandlerError,
    IpcInvalidMessageError,
    JournalConfig,
    Runtime,
)
from cogfabric.events import IpcMessage

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

WAIT = 10.0


class Worker:
    """Answers at once, except 'later': that one it answers when told 'answer'."""

    seen: ClassVar[list[IpcMessage]] = []
    pending: ClassVar[list[str]] = []
    deferred: ClassVar[threading.Event] = threading.Event()

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:
        Worker.seen.append(message)
        if message.topic == "later":
            Worker.pending.append(message.correlation_id)
            Worker.deferred.set()
            return None  # answered later, by ctx.reply
        if message.topic == "answer":
            ctx.reply(Worker.pending.pop(), {"done": message.payload})
            return "answered"
        return {"took": message.topic, "by": ctx.agent_id}


class Coordinator:
    """Passes work on from its own behavior, as told by the message it handles."""

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:
        order = message.payload
        if message.topic == "delegate":
            return ctx.delegate(order["to"], order["topic"], order.get("payload"), timeout=WAIT).payload
        if message.topic == "handoff":
            return ctx.handoff(order["to"], order["task"], order.get("snapshot"), timeout=WAIT).payload
        if message.topic == "handoff-self":
            ctx.handoff(ctx.agent_id, "t")
        if message.topic == "reply-empty":
            ctx.reply("")
        if message.topic == "unsubscribe":
            return [ctx.unsubscribe(topic) for topic in order]
        return None


BEHAVIORS: dict[str, Callable[[], Behavior]] = {"worker": Worker, "coordinator": Coordinator}


@pytest.fixture(params=["sync", "batch"])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    Worker.seen, Worker.pending, Worker.deferred = [], [], threading.Event()
    config = Config(journal=JournalConfig(durability=request.param))
    with Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors=BEHAVIORS) as rt:
        rt.spawn("boss", behavior="coordinator")
        rt.spawn("w", behavior="worker")
        yield rt


def _order(runtime: Runtime, topic: str, payload: object) -> tuple[IpcMessage, IpcMessage]:
    """Ask the coordinator to act; its reply and the message it handled (as journaled)."""
    reply = runtime.bus.request("user", "boss", topic, payload, timeout=WAIT)
    runtime.flush()
    assert runtime._journal is not None
    handled = next(
        r.event
        for r in runtime._journal.read(stream="bus")
        if isinstance(r.event, IpcMessage) and r.event.recipient == "boss" and r.event.topic == topic
    )
    return reply, handled


def test_a_behavior_delegates_as_its_agent_and_continues_the_trace(runtime: Runtime) -> None:
    reply, handled = _order(runtime, "delegate", {"to": "w", "topic": "count", "payload": 3})

    assert reply.payload == {"took": "count", "by": "w"}
    (seen,) = Worker.seen
    assert (seen.sender, seen.recipient, seen.topic, seen.payload, seen.kind) == (
        "boss",
        "w",
        "count",
        3,
        "request",
    )
    assert (seen.cause, seen.trace_id) == (handled.id, handled.trace_id)


def test_a_behavior_hands_a_task_over_in_the_originals_shape(runtime: Runtime) -> None:
    reply, handled = _order(runtime, "handoff", {"to": "w", "task": "t1", "snapshot": {"notes": [1, 2]}})

    assert reply.payload == {"took": "handoff-task", "by": "w"}
    (seen,) = Worker.seen
    assert (seen.sender, seen.topic) == ("boss", "handoff-task")
    assert seen.payload == {"task_id": "t1", "context": {"notes": [1, 2]}, "artifacts": []}
    assert (seen.cause, seen.trace_id) == (handled.id, handled.trace_id)


def test_a_behavior_answers_a_request_it_deferred_from_a_later_message(runtime: Runtime) -> None:
    replies: list[IpcMessage] = []
    waiter = threading.Thread(
        target=lambda: replies.append(runtime.bus.request("user", "w", "later", timeout=WAIT))
    )
    waiter.start()
    try:
        assert Worker.deferred.wait(WAIT)
        assert runtime.bus.request("user", "w", "answer", 7, timeout=WAIT).payload == "answered"
    finally:
        waiter.join(WAIT)

    (reply,) = replies
    assert (reply.payload, reply.sender, reply.recipient, reply.kind) == ({"done": 7}, "w", "user", "reply")
    assert reply.correlation_id == Worker.seen[0].correlation_id


def test_a_behavior_cannot_hand_a_task_to_itself_nor_reply_to_no_request(runtime: Runtime) -> None:
    for topic in ("handoff-self", "reply-empty"):
        with pytest.raises(IpcHandlerError) as info:  # the behavior's error, as its cause
            runtime.bus.request("user", "boss", topic, timeout=WAIT)
        assert isinstance(info.value.__cause__, IpcInvalidMessageError)
        assert "agentipc: invalid message" in str(info.value.__cause__)


def test_a_behavior_restored_by_a_reopen_still_reaches_the_bus(tmp_path: Path) -> None:
    Worker.seen = []
    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors=BEHAVIORS) as runtime:
        runtime.spawn("boss", behavior="coordinator")
        runtime.spawn("w", behavior="worker")

    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors=BEHAVIORS) as runtime:
        reply = runtime.bus.request("user", "boss", "delegate", {"to": "w", "topic": "again"}, timeout=WAIT)

    assert reply.payload == {"took": "again", "by": "w"}


def test_help_on_the_runtime_shows_its_bus_and_its_session_memory() -> None:
    import pydoc  # noqa: PLC0415

    text = pydoc.render_doc(Runtime, renderer=pydoc.plaintext)  # type: ignore[attr-defined]

    assert " |  bus\n |      The IPC bus" in text
    assert " |  memory\n |      Session memory" in text


def test_a_behavior_unsubscribes_as_the_bus_does_and_never_fails_for_a_topic(runtime: Runtime) -> None:
    # as runtime.bus.unsubscribe (the original's Unsubscribe returns nothing): an empty
    # topic has no subscription to remove, so generic clean-up code does not fail on it
    runtime.bus.subscribe("boss", "news")

    reply, _ = _order(runtime, "unsubscribe", ["news", "", "news", "never"])

    assert reply.payload == [True, False, False, False]
    assert runtime.bus.subscribers("news") == []

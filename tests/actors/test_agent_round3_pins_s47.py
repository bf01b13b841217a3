"""The agent actor's promises (``actors/_agent.py``) that a third mutation test found no test held.

An agent's state is snapshotted every ``snapshot_interval`` of its own events also when
its behavior's last act is a send (batch durability hands its changes over with the
message); ``recover`` installs a copy of the state it is given, as every state method
does; a handle kept after a kill does not keep the killed agent's actor (its behavior,
its state) alive; a behavior's request is journaled after its message's delivery record
and the changes it made before it. Hand-made mutants of ``_agent.py``, one at a time: each test here
failed under its mutant (described in its comment) and passes without it.
"""

from __future__ import annotations

import gc
import threading
import weakref
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import (
    AgentContext,
    Config,
    FakeClock,
    JournalConfig,
    Runtime,
)
from cogfabric.events import CognitiveState, IpcDelivered, IpcMessage, PrivateSet
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path


def _records(path: Path) -> list[Any]:
    with Journal.open(path, readonly=True) as journal:
        return [record.event for record in journal.read()]


class _ChangeThenSend:
    """Sets five private values, then sends to 'b' as its last act."""

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
        for i in range(5):
            ctx.set_private(f"k{i}", i)
        ctx.send("b", "done")


def test_a_snapshot_due_when_a_behavior_sends_is_taken_with_the_send_in_batch_durability(
    tmp_path: Path,
) -> None:
    # Mutant: emit_and_deliver took no snapshot after handing the agent's changes over
    # with its send; the message's end then had nothing to hand over, so none was taken
    # although more than snapshot_interval of the agent's own events were journaled.
    config = Config(journal=JournalConfig(durability="batch", snapshot_interval=3))
    with Runtime.open(
        tmp_path / "j", config=config, clock=FakeClock(), behaviors={"s": _ChangeThenSend}
    ) as runtime:
        runtime.spawn("a", behavior="s")
        runtime.spawn("b")
        runtime.flush(10)
        journal = runtime._journal
        assert journal is not None
        assert journal.load_snapshot("agent/a") is None  # not due yet
        runtime.bus.send("x", "a", "go")
        runtime.flush(10)
        snapshot = journal.load_snapshot("agent/a")
        private = runtime.agent("a").context_view().private

    assert private == {f"k{i}": i for i in range(5)}
    assert snapshot is not None


def test_recover_installs_a_copy_of_the_state_it_is_given(tmp_path: Path) -> None:
    # Mutant: op_recover installed the caller's CognitiveState itself, not a copy: what
    # the caller changed in it afterwards changed the agent's state, unjournaled.
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
        agent = runtime.spawn("a")
        state = CognitiveState(decision="ship it", working_memory={"notes": ["one"]})
        runtime.recover("a", state)
        state.working_memory["notes"].append("two")
        state.working_memory["late"] = True
        live = agent.cognitive_state()

    assert live.decision == "ship it"
    assert live.working_memory == {"notes": ["one"]}


def test_a_handle_kept_after_a_kill_does_not_keep_the_killed_agent_alive(tmp_path: Path) -> None:
    # Mutant: on_stop left the stopped actor's flush_outbox in the agent's Shared, which
    # the handle holds: the actor, its behavior and its state outlived the kill.
    seen: list[weakref.ref[AgentContext]] = []
    handled = threading.Event()

    class Watched:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            seen.append(weakref.ref(ctx))
            handled.set()

    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"w": Watched}) as runtime:
        handle = runtime.spawn("a", behavior="w")
        runtime.bus.send("x", "a", "hello")
        assert handled.wait(10)
        thread = runtime._entry("a").shared.thread
        assert thread is not None
        runtime.kill("a")
        thread.join(10)  # its frames hold the actor until it ends
        assert not thread.is_alive()
        gc.collect()
        alive = seen[0]() is not None
        assert handle.id == "a"  # the handle is still held

    assert not alive


class _ChangeThenAsk:
    """Sets a private value if the payload says so, then asks 'b' (and answers with b's reply)."""

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> object:
        if message.payload:
            ctx.set_private("k", 1)
        return ctx.request("b", "question", timeout=10).payload


class _Answer:
    def on_message(self, ctx: AgentContext, message: IpcMessage) -> str:  # noqa: ARG002
        return "answer"


@pytest.mark.parametrize(("durability", "change"), [("sync", False), ("batch", False), ("batch", True)])
def test_a_behaviors_request_is_journaled_after_what_it_did_for_its_message_before(
    tmp_path: Path, durability: str, *, change: bool
) -> None:
    # Mutant: ctx.request handed nothing over before the request: the handled message's
    # delivery record (and in batch durability the change made before) was journaled
    # after the request it led to, and a crash in between kept the request without them.
    config = Config(journal=JournalConfig(durability=durability))  # type: ignore[arg-type]
    with Runtime.open(
        tmp_path / "j", config=config, clock=FakeClock(), behaviors={"ask": _ChangeThenAsk, "answer": _Answer}
    ) as runtime:
        runtime.spawn("a", behavior="ask")
        runtime.spawn("b", behavior="answer")
        reply = runtime.bus.request("x", "a", "go", change, timeout=10)
        runtime.flush(10)

    assert reply.payload == "answer"
    records = _records(tmp_path / "j")
    go = next(i for i, e in enumerate(records) if isinstance(e, IpcMessage) and e.topic == "go")
    asked = next(i for i, e in enumerate(records) if isinstance(e, IpcMessage) and e.topic == "question")
    delivered = next(
        i for i, e in enumerate(records) if isinstance(e, IpcDelivered) and e.message_id == records[go].id
    )
    changed = [i for i, e in enumerate(records) if isinstance(e, PrivateSet) and e.agent == "a"]
    assert records[asked].cause == records[go].id
    assert delivered < asked
    assert len(changed) == change
    assert all(i < asked for i in changed)

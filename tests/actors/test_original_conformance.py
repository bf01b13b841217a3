"""Behaviours of the original (spec/ares-reference.md) that no other test held.

Each test but the last two was seen failing under a mutant of the code it names.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import (
    AgentCheckpointNotSupportedError,
    AgentNotSuspendedError,
    FakeClock,
    Runtime,
)
from cogfabric.actors._bus import DEAD_LETTER_CAPACITY
from cogfabric.events import AgentKilled, AgentRecovered, CognitiveState, Event, IpcMessage, LifecycleChanged
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric.actors import AgentContext


def _events(path: Path, kind: type[Event]) -> list[Any]:
    with Journal.open(path, readonly=True) as journal:
        return [r.event for r in journal.read() if isinstance(r.event, kind)]


def test_idempotent_suspend_and_retire_journal_one_change_each(tmp_path: Path) -> None:
    # spec §2.4 TestLifecycleSuspendResumeRetireKill: one spawned, one retired event
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        rt.spawn("a")
        rt.suspend("a")
        rt.suspend("a")
        rt.retire("a")
        rt.retire("a")
    changes = [(e.previous, e.state) for e in _events(tmp_path / "j", LifecycleChanged)]
    assert changes == [("IDLE", "SUSPENDED"), ("SUSPENDED", "RETIRED")]


def test_recover_journals_whether_the_state_has_a_checkpoint(tmp_path: Path) -> None:
    # spec §2.3 Recover: EventAgentRecovered {has_checkpoint: cs.Checkpoint != nil}
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        rt.spawn("a")
        rt.recover("a", CognitiveState(context="c"))
        rt.recover("a", CognitiveState(checkpoint={"step": 1}))
    assert [e.has_checkpoint for e in _events(tmp_path / "j", AgentRecovered)] == [False, True]


def test_the_death_snapshot_of_a_never_set_state_is_version_one(tmp_path: Path) -> None:
    # spec §2.3 Kill: the death snapshot upgrades version 0 to 1
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        rt.spawn("a")
        assert rt.agent("a").cognitive_state().schema_version == 0
        rt.kill("a")
    (killed,) = _events(tmp_path / "j", AgentKilled)
    assert killed.cognitive.schema_version == 1


def test_the_dead_letter_store_keeps_the_newest_1024(tmp_path: Path) -> None:
    # spec §3.2: FIFO of capacity 1024, oldest evicted first
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        for n in range(DEAD_LETTER_CAPACITY + 10):
            with pytest.raises(LookupError):
                rt.bus.send("a", "ghost", "t", n)
        letters = rt.bus.dead_letters()
    assert DEAD_LETTER_CAPACITY == 1024
    assert [d.payload for d in letters] == list(range(10, 1034))


def test_one_trace_id_covers_a_broadcasts_fan_out_and_the_sender_gets_its_own(tmp_path: Path) -> None:
    # spec §3.3 Broadcast: one trace id for the whole fan-out; a subscribed sender receives it
    seen: list[tuple[str, str]] = []
    done = threading.Semaphore(0)

    class Rec:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:
            seen.append((ctx.agent_id, message.trace_id))
            done.release()

    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"rec": Rec}) as rt:
        for agent_id in ("a", "b", "c"):
            rt.spawn(agent_id, behavior="rec")
            rt.bus.subscribe(agent_id, "news")
        assert rt.bus.broadcast("a", "news", 1, trace="t-1") == 3
        for _ in range(3):
            assert done.acquire(timeout=10)
    assert sorted(seen) == [("a", "t-1"), ("b", "t-1"), ("c", "t-1")]


def test_a_reply_carries_the_requests_trace_and_a_second_async_reply_is_dropped(tmp_path: Path) -> None:
    # spec §3.3 Request (reply stamped with TraceID) and Reply (non-blocking send: a second one dropped)
    got: list[IpcMessage] = []
    arrived = threading.Event()

    class Later:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002 - a deferred reply
            got.append(message)
            arrived.set()

    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"later": Later}) as rt:
        rt.spawn("b", behavior="later")
        out: list[IpcMessage] = []
        waiter = threading.Thread(target=lambda: out.append(rt.bus.request("a", "b", "q", timeout=10)))
        waiter.start()
        assert arrived.wait(10)
        rt.bus.reply(got[0].correlation_id, "first")
        rt.bus.reply(got[0].correlation_id, "second")  # no error, dropped
        waiter.join(10)
    (reply,) = out
    assert (reply.payload, reply.trace_id, reply.correlation_id) == (
        "first",
        got[0].trace_id,
        got[0].correlation_id,
    )


def test_the_originals_strings_of_the_remaining_sentinels(tmp_path: Path) -> None:
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        rt.spawn("a")
        with pytest.raises(AgentNotSuspendedError, match=r"^agentfabric: agent not suspended"):
            rt.resume("a")
    with (
        Runtime.open(None, clock=FakeClock()) as rt,
        pytest.raises(
            AgentCheckpointNotSupportedError,
            match=r"^agent checkpoint lookup not supported by this memory backend$",
        ),
    ):
        rt.memory.get_latest_session_for_agent("a")


def test_an_empty_private_key_is_allowed_and_a_set_task_context_of_none_is_empty(tmp_path: Path) -> None:
    # spec §2.3 SetPrivate (any key, "" too) and SetTaskContext (nil becomes {})
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        agent = rt.spawn("a", task_context={"goal": "g"})
        agent.set_private("", 1)
        agent.set_task_context(None)
        assert (agent.private(""), agent.task_context()) == (1, {})

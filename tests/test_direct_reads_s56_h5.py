"""A handle's reads of an idle agent answer on the calling thread (``AgentActor.read_now``).

Each test pins one promise a caller relies on, and fails if the direct read ignored the
condition that keeps it: mail waiting (a message, a publication, a lifecycle call), a
message in hand, another thread holding the agent's lock, an agent behind the journal, a
fail-stop journal the agent has not seen, a kill, a closing runtime.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf
from cogfabric.actors._agent import CALL, READS
from tests.test_bulk_read_s56_h2 import _actor
from tests.test_rounds_s55_h10 import WAIT, _open

if TYPE_CHECKING:
    from pathlib import Path

SHORT = 0.3
"""call_timeout where a test needs a read to be asked (it then times out, the actor held)."""


class _Setter:
    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:
        ctx.set_private("last", message.payload)


@pytest.mark.parametrize("mode", ["memory", "sync", "batch"])
def test_an_idle_agents_reads_answer_without_a_message_and_see_every_call_that_returned(
    tmp_path: Path, mode: str
) -> None:
    with _open(tmp_path, mode) as rt:
        agent = rt.spawn("a", task_id="t", task_context={"goal": "g"})
        actor = _actor(rt, "a")
        handled: list[Any] = []
        receive = actor.on_receive

        def counted(message: Any) -> Any:
            handled.append(message)
            return receive(message)

        actor.on_receive = counted
        agent.set_private("k", {"v": 1})  # read your writes: from the same thread, at once
        assert agent.private("k") == {"v": 1}
        rt.suspend("a")  # a lifecycle call that returned: its effect is there
        state = cf.CognitiveState(working_memory={"w": 1})
        rt.recover("a", state)
        assert agent.cognitive_state().working_memory == {"w": 1}
        assert rt.publish_task_context("t", {"goal": "new"}) == ["a"]
        # returned once durable, and told: asked if the publication still waits, read if applied
        assert agent.task_context() == {"goal": "new"}
        assert agent.context_view() == cf.ContextView({"goal": "new"}, {"k": {"v": 1}})
        calls = {m[1] for m in handled if m[0] == CALL}
        assert calls & READS <= {"task_context"}  # the other reads answered on this thread
        with pytest.raises(cf.InvalidTextError):
            agent.private(7)  # type: ignore[arg-type]  # refused as the actor refuses it


@pytest.mark.parametrize("kind", ["message", "publication", "lifecycle call"])
def test_mail_waiting_for_an_agent_not_busy_yet_is_handled_before_the_read(kind: str) -> None:
    config = {"runtime": {"call_timeout": SHORT}}
    with cf.Runtime.open(None, config=config) as rt:
        rt.spawn("a", behavior=_Setter(), task_id="t")
        entry = rt._entry("a")
        lock = _actor(rt, "a")._foreign_lock
        with lock:  # the actor takes the message up, then waits here before it is busy
            if kind == "message":
                rt.bus.send("app", "a", "m", 1)
            elif kind == "publication":
                rt.publish_task_context("t", {"p": 1})
            else:
                rt._admit_control("a", entry)  # as rt.recover does, without waiting for it
                entry.ref.ask((CALL, "recover", (cf.CognitiveState(decision="r"),)), block=False)
            assert not entry.shared.slots.empty
            # read_now takes the (reentrant) lock: the mail waits, so the read is asked,
            # and the actor is held here until the call times out
            with pytest.raises(cf.ActorTimeoutError):
                rt.agent("a").context_view()
            with pytest.raises(cf.ActorTimeoutError):
                rt.agent("a").cognitive_state()
        rt.settle(WAIT)
        assert rt.agent("a").private("last") == (1 if kind == "message" else None)
        assert rt.agent("a").task_context() == ({"p": 1} if kind == "publication" else {})
        assert rt.agent("a").cognitive_state().decision == ("r" if kind == "lifecycle call" else None)


@pytest.mark.parametrize("mode", ["memory", "batch"])
def test_an_agent_handling_a_message_is_read_after_it_never_in_the_middle(tmp_path: Path, mode: str) -> None:
    started, release = threading.Event(), threading.Event()

    class TwoSteps:
        def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:  # noqa: ARG002
            ctx.set_private("step", "started")
            started.set()
            assert release.wait(WAIT)
            ctx.set_private("step", "done")

    with _open(tmp_path, mode) as rt:
        rt.spawn("a", behavior=TwoSteps())
        read: dict[str, Any] = {}
        reader = threading.Thread(target=lambda: read.update(step=rt.agent("a").private("step")))
        try:
            rt.bus.send("app", "a", "go", None)
            assert started.wait(WAIT)
            assert rt._entry("a").shared.slots.empty  # taken up: only ``busy`` tells
            reader.start()
            reader.join(SHORT)
            assert reader.is_alive()  # asked: waits behind the message
        finally:
            release.set()
        reader.join(WAIT)
        assert read == {"step": "done"}


def test_a_read_waits_while_another_thread_holds_the_agents_lock(tmp_path: Path) -> None:
    # A kept ctx's change holds the lock from its apply to its commit (sync durability):
    # a read that ignored the lock could see a change not yet durable.
    with _open(tmp_path, "sync") as rt:
        rt.spawn("a")
        lock = _actor(rt, "a")._foreign_lock
        held, release = threading.Event(), threading.Event()

        def hold() -> None:
            with lock:
                held.set()
                release.wait(WAIT)

        holder = threading.Thread(target=hold)
        holder.start()
        assert held.wait(WAIT)
        read: dict[str, Any] = {}
        reader = threading.Thread(target=lambda: read.update(view=rt.agent("a").context_view()))
        try:
            reader.start()
            reader.join(SHORT)
            assert reader.is_alive()  # asked: its actor waits for the lock
        finally:
            release.set()
        reader.join(WAIT)
        holder.join(WAIT)
        assert read == {"view": cf.ContextView({}, {})}


def test_an_agent_behind_the_journal_takes_its_word_before_the_read(tmp_path: Path) -> None:
    with _open(tmp_path, "sync") as rt:
        agent = rt.spawn("a")
        agent.set_private("k", "stored")
        actor = _actor(rt, "a")
        with actor._foreign_lock:  # as after a commit it stopped waiting for (never stored)
            actor._state.private["k"] = "ran ahead"
            actor._stale = actor._shared.stale = True
        assert agent.private("k") == "stored"
        assert not actor._stale


def test_a_fail_stop_journal_the_agent_has_not_seen_is_read_as_the_journal_holds_it(tmp_path: Path) -> None:
    config = {"journal": {"durability": "batch", "map_size": 140 << 10, "max_map_size": 140 << 10}}
    rt = cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), config=config)
    writer = rt._core.writer
    assert writer is not None
    announced, go = threading.Event(), threading.Event()
    reload_all = writer.on_failstop
    assert reload_all is not None

    def held() -> None:  # the writer's thread, once the failure is set: each agent told later
        announced.set()
        go.wait(WAIT)
        reload_all()

    writer.on_failstop = held
    try:
        agent = rt.spawn("a")
        rt.flush()
        agent.set_private("big", "z" * 200_000)  # applied, handed over, refused by storage
        assert announced.wait(WAIT)
        assert writer.failure is not None
        assert rt._entry("a").shared.slots.empty  # not told yet: only the failure tells
        assert agent.private("big") is None  # the journal's word, not the batched change
    finally:
        go.set()
        with pytest.raises(cf.JournalError):
            rt.close()


def test_a_killed_agent_still_listed_is_asked_and_refuses(tmp_path: Path) -> None:
    # As while a kill's commit is undecided: the agent stays listed, and is killed.
    with _open(tmp_path, "sync") as rt:
        agent = rt.spawn("a")
        actor = _actor(rt, "a")
        with actor._foreign_lock:
            actor._killed = True
        try:
            with pytest.raises(cf.AgentNotFoundError):
                agent.context_view()
        finally:
            with actor._foreign_lock:
                actor._killed = False
        assert agent.context_view() == cf.ContextView({}, {})


def test_an_agent_of_a_runtime_stopping_its_agents_is_asked_and_refuses(tmp_path: Path) -> None:
    with _open(tmp_path, "memory") as rt:
        agent = rt.spawn("a")
        core = rt._core
        core.stopped = True  # as close() between stopping its agents and closing the journal
        try:
            with pytest.raises(cf.RuntimeClosedError):
                agent.cognitive_state()
        finally:
            core.stopped = False
        assert agent.cognitive_state() == cf.CognitiveState()


def test_from_its_own_behavior_a_read_of_its_handle_is_refused_and_another_agent_is_read(
    tmp_path: Path,
) -> None:
    outcome: dict[str, Any] = {}

    class Reader:
        rt: cf.Runtime

        def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:  # noqa: ARG002
            try:
                self.rt.agent(ctx.agent_id).private("k")
            except cf.AgentRunningError as exc:
                outcome["own"] = exc
            outcome["other"] = self.rt.agent("b").private("k")

    reader = Reader()
    with _open(tmp_path, "batch") as rt:
        reader.rt = rt
        rt.spawn("a", behavior=reader)
        rt.spawn("b").set_private("k", "b's")
        rt.bus.send("app", "a", "go", None)
        rt.settle(WAIT)
    assert isinstance(outcome["own"], cf.AgentRunningError)
    assert outcome["other"] == "b's"

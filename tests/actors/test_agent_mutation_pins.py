"""More of the agent actor's promises (``actors/_agent.py``) that a second mutation test found no test held.

What a kept ``ctx.llm`` records is journaled in the order it was made, never after its
agent's kill (also when the kill's commit timed out and was then stored, or the kill
overtook the record's hand-over), and not lost while its agent waits for the journal;
a publication the catch-up applied does not override the agent's own later change;
a reply and a broadcast are journaled after what their behavior changed before them;
RUNNING lasts exactly while the behavior handles its message; an agent that caught up
with the journal is no longer woken by ``flush()``; a spawn refused for want of threads
leaves nothing in Pykka's registry. Hand-made mutants of ``_agent.py``, one at a time,
against tests/actors: each test here failed under its mutant (described in its comment)
and passes without it.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Any

import pykka
import pytest

from cogfabric.actors import (
    ActorTimeoutError,
    AgentCapacityError,
    AgentContext,
    AgentRunningError,
    AgentState,
    Config,
    FakeClock,
    IpcHandlerError,
    JournalConfig,
    Runtime,
    RuntimeConfig,
    ScriptedProvider,
)
from cogfabric.actors._agent import AgentActor
from cogfabric.events import (
    AgentKilled,
    CognitiveState,
    IpcMessage,
    LlmOutputRecorded,
    PrivateSet,
)
from cogfabric.store import Journal

from .test_supervision import _short_call_timeout, _stall

if TYPE_CHECKING:
    from pathlib import Path


def _names(path: Path, stream: str) -> list[str]:
    with Journal.open(path, readonly=True) as journal:
        return [type(record.event).__name__ for record in journal.read(stream=stream)]


def _keeper(kept: list[AgentContext]) -> type:
    """A behavior that keeps each ctx it is given in ``kept`` (to use its client later), and answers."""

    class Keeper:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> str:  # noqa: ARG002
            kept.append(ctx)
            return "kept"

    return Keeper


class Answering:
    """A provider that answers at once."""

    def generate(self, prompt: str, **params: Any) -> str:  # noqa: ARG002
        return "paid answer"


def test_what_a_kept_llm_records_during_a_kill_that_is_then_stored_is_not_journaled_after_it(
    tmp_path: Path,
) -> None:
    # Mutant: try_catch_up moved what other threads noted into the outbox while the
    # kill was undecided, and submitted it: an LlmOutputRecorded followed the AgentKilled.
    kept: list[AgentContext] = []
    entered, release = threading.Event(), threading.Event()

    class Slow:
        def generate(self, prompt: str, **params: Any) -> str:  # noqa: ARG002
            entered.set()
            assert release.wait(10)
            return "paid answer"

    with Runtime.open(
        tmp_path / "j", clock=FakeClock(), behaviors={"k": _keeper(kept)}, llm_provider=Slow()
    ) as runtime:
        runtime.spawn("a", behavior="k")
        runtime.bus.request("x", "a", "keep", timeout=10)
        llm = kept[0].llm
        caller = threading.Thread(target=llm.generate, args=("question",))
        caller.start()
        assert entered.wait(10)  # the agent is idle; its kept client waits for the provider
        runtime.flush(10)
        gate = _stall(runtime, lambda events: any(isinstance(e, AgentKilled) for e in events))
        # only the kill has the short call_timeout: the set-up's commits may be slow on a loaded machine
        with _short_call_timeout(runtime, 0.3), pytest.raises(ActorTimeoutError):
            runtime.kill("a")
        release.set()  # the answer comes while the kill is undecided
        caller.join(10)
        gate.set()  # the kill is stored
        runtime.flush(10)
        assert runtime.agents() == []

    names = _names(tmp_path / "j", "agent/a")
    assert names[-1] == "AgentKilled"
    assert "LlmOutputRecorded" not in names


def test_what_a_kept_llm_records_while_its_agent_waits_for_the_journal_is_journaled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Mutant: try_catch_up took what other threads noted into the outbox but did not
    # submit it; the reload then emptied the outbox, and the record was lost.
    kept: list[AgentContext] = []

    with Runtime.open(
        tmp_path / "j",
        clock=FakeClock(),
        behaviors={"k": _keeper(kept)},
        llm_provider=Answering(),
    ) as runtime:
        agent = runtime.spawn("a", behavior="k")
        runtime.bus.request("x", "a", "keep", timeout=10)
        llm = kept[0].llm
        gate = _stall(runtime)
        try_catch_up = AgentActor.try_catch_up

        def watched(actor: AgentActor) -> bool:
            if try_catch_up(actor):
                return True
            if not gate.is_set():  # the agent waits for the journal, busy with the call below
                caller = threading.Thread(target=llm.generate, args=("question",))
                caller.start()
                caller.join(10)
                gate.set()
            return False

        monkeypatch.setattr(AgentActor, "try_catch_up", watched)
        with _short_call_timeout(runtime, 0.3):  # not the set-up: its commits may be slow under load
            with pytest.raises(ActorTimeoutError):
                agent.set_private("k", 1)  # its commit times out: the agent is behind the journal
            with contextlib.suppress(ActorTimeoutError):  # the agent catches up before it answers
                agent.private("k")
            # until the agent's own waits timed out: the callers' timeouts alone do not say it
            # got to its messages (its thread may be late), and with 10 s it would outwait the gate
            assert gate.wait(10)
        runtime.flush(10)
        assert agent.private("k") == 1

    names = _names(tmp_path / "j", "agent/a")
    assert names[-2:] == ["PrivateSet", "LlmOutputRecorded"]


def test_a_kept_llm_record_whose_hand_over_a_kill_overtakes_is_not_journaled_after_the_kill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A kept ctx.llm's record, made while its agent is idle, waits for room at the
    # writer; the agent is killed meanwhile. Mutant: note_from_any_thread did not look
    # again after that wait, and journaled the record after the AgentKilled.
    kept: list[AgentContext] = []

    with Runtime.open(
        tmp_path / "j", clock=FakeClock(), behaviors={"k": _keeper(kept)}, llm_provider=Answering()
    ) as runtime:
        runtime.spawn("a", behavior="k")
        runtime.bus.request("x", "a", "keep", timeout=10)
        llm = kept[0].llm
        writer = runtime._core.writer
        assert writer is not None
        waiting, killed = threading.Event(), threading.Event()
        wait_for_room = writer.wait_for_room

        def held() -> None:
            if threading.current_thread().name == "kept-llm":
                waiting.set()
                assert killed.wait(10)
            wait_for_room()

        monkeypatch.setattr(writer, "wait_for_room", held)
        caller = threading.Thread(target=llm.generate, args=("question",), name="kept-llm")
        caller.start()
        assert waiting.wait(10)  # the record was made while the agent was idle
        runtime.kill("a")
        killed.set()
        caller.join(10)
        runtime.flush(10)

    names = _names(tmp_path / "j", "agent/a")
    assert names[-1] == "AgentKilled"
    assert "LlmOutputRecorded" not in names


def test_llm_records_a_worker_thread_makes_one_after_another_are_journaled_in_that_order(
    tmp_path: Path,
) -> None:
    # Mutant: the agent took what other threads noted in reverse order (the existing
    # test runs its two workers side by side, so it cannot tell their order).
    class Sequential:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            llm = ctx.llm
            worker = threading.Thread(target=lambda: [llm.generate(p) for p in ("one", "two", "three")])
            worker.start()
            worker.join(10)

    provider = ScriptedProvider(["1", "2", "3"])
    with Runtime.open(tmp_path / "j", behaviors={"s": Sequential}, llm_provider=provider) as runtime:
        runtime.spawn("a", behavior="s")
        runtime.bus.send("x", "a", "go")
        runtime.flush(10)

    with Journal.open(tmp_path / "j", readonly=True) as journal:
        outputs = [r.event.output for r in journal.read() if isinstance(r.event, LlmOutputRecorded)]
    assert outputs == ["1", "2", "3"]


def test_an_agent_stays_running_for_other_threads_after_its_behavior_changes_its_state(
    tmp_path: Path,
) -> None:
    # README: an agent is RUNNING while its behavior handles a message, and retire and
    # recover raise AgentRunningError then. Mutant: applying the behavior's own change
    # showed the agent IDLE again, and a retire was queued behind the message.
    entered, release = threading.Event(), threading.Event()

    class Busy:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            ctx.set_private("k", 1)
            ctx.set_cognitive_state(CognitiveState(context={"step": 1}))
            entered.set()
            assert release.wait(10)

    config = Config(runtime=RuntimeConfig(call_timeout=0.5))
    with Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors={"b": Busy}) as runtime:
        agent = runtime.spawn("a", behavior="b")
        runtime.bus.send("x", "a", "go")
        assert entered.wait(10)
        try:
            lifecycle = agent.lifecycle
            with pytest.raises(AgentRunningError):
                runtime.retire("a")
            with pytest.raises(AgentRunningError):
                runtime.recover("a", CognitiveState())
        finally:
            release.set()
        assert lifecycle == AgentState.RUNNING
        runtime.flush(10)
        assert agent.lifecycle == AgentState.IDLE


def test_an_agent_that_caught_up_with_the_journal_is_not_woken_by_later_flushes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Runtime.flush does not wake an idle agent; one that stopped waiting for a commit
    # is asked until it has taken the journal's word. Mutant: the catch-up left
    # Shared.stale set, and every later flush woke the agent with a no-op.
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
        agent = runtime.spawn("a")
        gate = _stall(runtime)
        with _short_call_timeout(runtime, 0.3), pytest.raises(ActorTimeoutError):  # not the set-up's
            agent.set_private("k", 1)
        gate.set()
        runtime.flush(10)  # the agent takes the journal's word
        assert agent.private("k") == 1
        woken: list[str] = []
        noop = AgentActor.op_noop

        def counted(actor: AgentActor) -> None:
            woken.append(actor.agent_id)
            noop(actor)

        monkeypatch.setattr(AgentActor, "op_noop", counted)
        runtime.flush(10)
        runtime.flush(10)
        assert woken == []


def test_a_publication_the_catch_up_applied_does_not_override_the_own_change_journaled_after_it(
    tmp_path: Path,
) -> None:
    # A behavior's set_task_context, made after a publication to its agent was stored,
    # times out; the agent takes the journal's word (the publication, then its own
    # change) before it handles the publication's delivery, which it must then only
    # acknowledge. Mutant (seq >= publish_seq): the delivery applied the publication
    # again over the own change, whose ticket the timed-out call never recorded: the
    # live agent showed the publication while the journal, and a reopen, had its change.
    entered, release, timed_out = threading.Event(), threading.Event(), threading.Event()

    class Setter:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            entered.set()
            assert release.wait(10)
            try:
                ctx.set_task_context({"v": "own, later"})
            except ActorTimeoutError:
                timed_out.set()

    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"s": Setter}) as runtime:
        agent = runtime.spawn("a", task_id="t", task_context={"v": 0}, behavior="s")
        runtime.bus.send("x", "a", "go")
        assert entered.wait(10)
        runtime.publish_task_context("t", {"v": "published"})  # stored; delivered behind "go"
        gate = _stall(runtime)
        with _short_call_timeout(runtime, 0.3):  # the behavior's call alone: the set-up's may be slow
            release.set()
            assert timed_out.wait(10)  # the agent is behind the journal
        gate.set()
        runtime.flush(10)
        live = agent.task_context()
    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"s": Setter}) as runtime:
        reopened = runtime.agent("a").task_context()

    assert reopened == {"v": "own, later"}
    assert live == reopened


def test_a_requester_told_of_a_behaviors_failure_finds_the_agent_no_longer_running(tmp_path: Path) -> None:
    # RUNNING lasts while the behavior handles its message. Mutant: after the behavior
    # raised, the agent showed RUNNING until its restart was over, so the requester,
    # told of the failure first, had a retire refused with AgentRunningError.
    made, restarting = [], threading.Event()

    class Fails:
        def __init__(self) -> None:
            made.append(self)
            if len(made) > 1:  # the restart's fresh behavior: held until the test looked
                assert restarting.wait(10)

        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            msg = "boom"
            raise ValueError(msg)

    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"f": Fails}) as runtime:
        agent = runtime.spawn("a", behavior="f")
        try:
            with pytest.raises(IpcHandlerError):
                runtime.bus.request("x", "a", "go", timeout=10)
            lifecycle = agent.lifecycle
        finally:
            restarting.set()
        assert lifecycle == AgentState.IDLE
        runtime.retire("a")
        assert agent.lifecycle == AgentState.RETIRED


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_what_a_behavior_changed_is_journaled_before_what_it_broadcasts_after(
    tmp_path: Path, durability: str
) -> None:
    # As for ctx.send: a broadcast comes after the changes its behavior made before it,
    # in the journal too. Mutant: ctx.broadcast did not hand the waiting changes over
    # first, and in batch durability the broadcast was stored before them.
    class Announces:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            ctx.set_private("k", 1)
            ctx.broadcast("news", "done")

    config = Config(journal=JournalConfig(durability=durability))  # type: ignore[arg-type]
    with Runtime.open(
        tmp_path / "j", config=config, clock=FakeClock(), behaviors={"a": Announces}
    ) as runtime:
        runtime.spawn("a", behavior="a")
        runtime.spawn("r")
        runtime.bus.subscribe("r", "news")
        runtime.bus.send("x", "a", "go")
        runtime.flush(10)

    with Journal.open(tmp_path / "j", readonly=True) as journal:
        order = [
            type(r.event).__name__
            for r in journal.read()
            if isinstance(r.event, PrivateSet) or (isinstance(r.event, IpcMessage) and r.event.sender == "a")
        ]
    assert order == ["PrivateSet", "IpcMessage"]


def test_an_agent_whose_thread_could_not_start_is_not_left_in_pykkas_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Mutant: _start_actor_loop did not unregister the actor whose thread failed to
    # start: each spawn refused for want of threads left a dead actor in the registry.
    real = pykka.ThreadingActor._start_actor_loop

    def no_threads(actor: pykka.ThreadingActor) -> None:
        if isinstance(actor, AgentActor):
            msg = "can't start new thread"
            raise RuntimeError(msg)  # noqa: TRY004 - what Thread.start raises
        real(actor)

    with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
        runtime.spawn("keep")
        monkeypatch.setattr(pykka.ThreadingActor, "_start_actor_loop", no_threads)
        for _ in range(3):
            with pytest.raises(AgentCapacityError):
                runtime.spawn("single")
        monkeypatch.undo()
        assert len(pykka.ActorRegistry.get_by_class(AgentActor)) == 1  # "keep" alone


def test_a_reply_is_journaled_after_what_its_behavior_changed(tmp_path: Path) -> None:
    # Batch durability: a behavior's return value answers its request once what it
    # changed is handed over, so the reply is stored after the change (a requester that
    # has its answer never finds, after a crash, a journal without the change it reports).
    # Mutant: _answer did not hand the changes over first, and the reply came first.
    class Counts:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> int:  # noqa: ARG002
            ctx.set_private("count", 1)
            return 1

    config = Config(journal=JournalConfig(durability="batch"))
    with Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors={"c": Counts}) as runtime:
        runtime.spawn("a", behavior="c")
        assert runtime.bus.request("x", "a", "count", timeout=10).payload == 1
        runtime.flush(10)

    with Journal.open(tmp_path / "j", readonly=True) as journal:
        order = [
            type(r.event).__name__ if isinstance(r.event, PrivateSet) else r.event.kind
            for r in journal.read()
            if isinstance(r.event, PrivateSet) or (isinstance(r.event, IpcMessage) and r.event.sender == "a")
        ]
    assert order == ["PrivateSet", "reply"]

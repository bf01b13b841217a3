"""The runtime's promises (``actors/_runtime.py``) that a fourth round of mutation testing found no test held.

Each test names the docstring or spec passage it holds, and the mutant it kills.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import (
    ActorTimeoutError,
    AgentContext,
    AgentNotFoundError,
    AgentState,
    Config,
    FakeClock,
    MailboxFullError,
    Runtime,
    RuntimeConfig,
)
from cogfabric.actors._agent import MailboxSlots
from cogfabric.events import (
    AgentKilled,
    CognitiveState,
    CognitiveStateSchemaVersionError,
    CognitiveStateSet,
    TaskContextPublished,
)
from cogfabric.store import (
    Journal,
    JournalFailedError,
    JournalRecordVersionError,
)

from .test_close_and_flush import _gated_disk, _until

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from cogfabric.events import IpcMessage


def test_a_respawn_of_a_killed_id_the_journal_refuses_leaves_the_id_its_first_place(tmp_path: Path) -> None:
    # agents(): "an agent killed and spawned again keeps its id's first place, so the list
    # is the same before and after a reopen". Mutant: a spawn's reservation marked every
    # id as new (_reserve), so a refused respawn took a killed id out of the order, and
    # its next spawn came last live while a reopen listed it first.
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
        runtime.spawn("a")
        runtime.spawn("b")
        runtime.kill("a")
        journal = runtime._journal
        assert journal is not None
        append = journal.append
        refused: list[bool] = []

        def refuse_once(events: list[Any], **kwargs: Any) -> list[int]:
            if not refused:
                refused.append(True)
                msg = "refused (the test)"  # a refusal that stores nothing, not a failure
                raise ValueError(msg)
            return append(events, **kwargs)

        journal.append = refuse_once  # type: ignore[method-assign,assignment]
        with pytest.raises(ValueError, match="refused"):
            runtime.spawn("a")
        runtime.spawn("a")
        live = runtime.agents()
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
        assert live == runtime.agents() == ["a", "b"]


def test_a_publication_to_a_task_without_live_agents_is_journaled_all_the_same(tmp_path: Path) -> None:
    # publish_task_context: "as one journaled event", returned "once the event is durable";
    # "JournalError: the journal refused the event, or is fail-stop". Mutant: a task with
    # no live agent returned [] with nothing journaled, and without the journal's refusal.
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
        runtime.spawn("a", task_id="other")
        assert runtime.publish_task_context("t", {"goal": 1}) == []
        writer = runtime._core.writer
        assert writer is not None
        writer._failure = JournalFailedError("the journal failed (the test)")  # fail-stop from now
        with pytest.raises(JournalFailedError):
            runtime.publish_task_context("t", {"goal": 2})
        writer._failure = None
    with Journal.open(tmp_path / "j", readonly=True) as journal:
        published = [r.event for r in journal.read() if isinstance(r.event, TaskContextPublished)]
    assert [(e.task_id, e.context, e.agents) for e in published] == [("t", {"goal": 1}, ())]


def test_a_state_of_a_future_version_is_refused_without_waiting_for_a_busy_agent(tmp_path: Path) -> None:
    # recover: CognitiveStateSchemaVersionError for "a future schema version", checked by
    # the runtime before it asks the agent (after AgentRetiredError, as the original).
    # Mutant: left to the agent's actor, the refusal waited behind a suspend whose commit
    # the disk held, and the caller got ActorTimeoutError instead.
    config = Config(runtime=RuntimeConfig(call_timeout=0.5))
    with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as runtime:
        runtime.spawn("a")
        committing, gate = _gated_disk(runtime)
        suspending = threading.Thread(target=lambda: _ignore_timeout(lambda: runtime.suspend("a")))
        suspending.start()
        try:
            assert committing.wait(10)  # the agent's actor waits for the suspend's commit
            with pytest.raises(CognitiveStateSchemaVersionError):
                runtime.recover("a", CognitiveState(schema_version=2))
            with pytest.raises(TypeError, match="expected a CognitiveState"):
                runtime.recover("a", {"context": 1})  # type: ignore[arg-type]
        finally:
            gate.set()
            suspending.join(10)
        runtime.flush(10)
        assert runtime.agent("a").lifecycle == AgentState.SUSPENDED


def _ignore_timeout(call: Callable[[], object]) -> None:
    with contextlib.suppress(ActorTimeoutError):
        call()


def test_allow_unverified_waives_a_newer_record_that_recovery_does_not_read(tmp_path: Path) -> None:
    # open: JournalRecordError "a record recovery must read cannot be read ... not waived";
    # allow_unverified waives the rest of the check. Mutant: a record of a newer version in
    # a killed agent's stream, which recovery skips, was raised as JournalRecordVersionError
    # with allow_unverified too.
    path = tmp_path / "j"
    with Runtime.open(path, clock=FakeClock()) as runtime:
        runtime.spawn("z")
        runtime.spawn("a")
    with Journal.open(path) as journal:
        future = CognitiveStateSet(at=1.0, agent="z", state=CognitiveState(schema_version=99))
        journal.append([future, AgentKilled(at=2.0, agent="z")], validate=False)

    with pytest.raises(JournalRecordVersionError):
        Runtime.open(path, clock=FakeClock())
    with Runtime.open(path, clock=FakeClock(), allow_unverified=True) as runtime:
        assert runtime.agents() == ["a"]


def test_senders_waiting_for_room_when_the_agent_is_killed_hear_so_at_once(tmp_path: Path) -> None:
    # kill (_on_killed): "a sender waiting for room hears AgentNotFoundError now". Here the
    # mailbox (size 1) is full, a kill waits past its bound and two senders wait for room:
    # the kill's slot is the one that frees before the kill is journaled, so one sender at
    # least is still waiting then. Mutant: the slots not closed at the kill, no sender
    # heard of it, and both sends returned as if delivered to the dead agent.
    entered, gate = threading.Event(), threading.Event()

    class Held:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            entered.set()
            assert gate.wait(30)

    config = Config(runtime=RuntimeConfig(call_timeout=30, mailbox_size=1))
    with Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors={"h": Held}) as runtime:
        runtime.spawn("a", behavior="h")
        runtime.bus.send("x", "a", "m1")
        assert entered.wait(10)
        runtime.bus.send("x", "a", "m2")  # the mailbox is full
        slots = runtime._entry("a").shared.slots
        outcomes: list[object] = []

        def send(topic: str) -> None:
            try:
                runtime.bus.send("x", "a", topic)
                outcomes.append("sent")
            except AgentNotFoundError as exc:
                outcomes.append(exc)

        senders = [threading.Thread(target=send, args=(f"s{i}",)) for i in range(2)]
        for sender in senders:
            sender.start()
        assert _until(lambda: slots._waiters == 2)
        killing = threading.Thread(target=lambda: runtime.kill("a"))
        killing.start()
        assert _until(lambda: slots.control_pending)
        gate.set()
        killing.join(10)
        for sender in senders:
            sender.join(10)  # not call_timeout: none waits it out
        assert not any(t.is_alive() for t in (killing, *senders))
        assert any(isinstance(outcome, AgentNotFoundError) for outcome in outcomes), outcomes
        assert runtime.agents() == []


def test_lifecycle_calls_waiting_past_the_allowance_when_the_agent_is_killed_hear_so(tmp_path: Path) -> None:
    # kill: a lifecycle call gets MailboxFullError only "when the mailbox holds
    # CONTROL_EXTRA (16) lifecycle calls already ... and none is handled within
    # call_timeout"; one whose agent is killed meanwhile gets AgentNotFoundError. Here a
    # kill and 15 suspends wait behind a busy behavior, and two more suspends wait for
    # room: the kill's is the one place that frees before it is journaled, so one of them
    # at least is still waiting then. Mutant: _admit_control did not look for the killed
    # agent, and that caller got MailboxFullError.
    entered, gate = threading.Event(), threading.Event()

    class Held:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            entered.set()
            assert gate.wait(30)

    config = Config(runtime=RuntimeConfig(call_timeout=30))
    with Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors={"h": Held}) as runtime:
        runtime.spawn("a", behavior="h")
        runtime.bus.send("x", "a", "m1")
        assert entered.wait(10)
        slots = runtime._entry("a").shared.slots
        outcomes: list[object] = []

        def call(name: str) -> None:
            try:
                getattr(runtime, name)("a")
                outcomes.append("done")
            except (AgentNotFoundError, MailboxFullError) as exc:
                outcomes.append(exc)

        callers = [threading.Thread(target=call, args=("kill",))]
        callers[0].start()
        assert _until(lambda: slots._control == 1)  # the kill first in the mailbox
        for _ in range(MailboxSlots.CONTROL_EXTRA + 1):
            callers.append(threading.Thread(target=call, args=("suspend",)))
            callers[-1].start()
        assert _until(lambda: slots._control == MailboxSlots.CONTROL_EXTRA and slots._control_waiters == 2)
        gate.set()
        for caller in callers:
            caller.join(10)  # not call_timeout: none waits it out
        assert not any(caller.is_alive() for caller in callers)
        assert not any(isinstance(outcome, MailboxFullError) for outcome in outcomes), outcomes
        assert outcomes.count("done") == 1  # the kill
        assert runtime.agents() == []

"""The runtime's promises (``actors/_runtime.py``) that a mutation test found no test held.

Each test names what a docstring, README.md or the spec promises of ``Runtime``: its
spawn checks and the reservation of ids, a spawn that fails or outlasts its caller's
wait, ``flush`` and ``close()`` (a second caller's too), what ``publish_task_context``
returns, and the report of a journal that fails verification at open. Where a race
decides the outcome, the test forces the interleaving by wrapping one of the runtime's
own steps, as the other actor tests do.
"""

from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING, Any, ClassVar

import lmdb
import pykka
import pytest

from cogfabric.actors import (
    ActorTimeoutError,
    Agent,
    AgentExistsError,
    AgentNotFoundError,
    Config,
    FakeClock,
    InvalidSpawnSpecError,
    JournalConfig,
    Runtime,
    RuntimeClosedError,
    RuntimeConfig,
    _runtime,
)
from cogfabric.actors._agent import AgentActor
from cogfabric.events import AgentSpawned, CognitiveState, TaskContextPublished
from cogfabric.store import Journal, JournalFailedError, JournalIntegrityError, VerifyReport

from .test_close_and_flush import _Gated, _until
from .test_supervision import _short_call_timeout

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def test_an_id_of_exactly_249_utf8_bytes_is_spawned_and_recovered(tmp_path: Path) -> None:
    # spawn: an id "longer than 249 UTF-8 bytes" is refused (agent/<id> must fit 255): 249 fits
    longest = "é" * 124 + "x"  # 249 bytes, 125 characters
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
        runtime.spawn(longest)
        with pytest.raises(InvalidSpawnSpecError, match="250 UTF-8 bytes"):
            runtime.spawn(longest + "y")
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
        assert runtime.agents() == [longest]


def test_an_empty_id_is_assigned_one_of_its_own() -> None:
    # spawn: "An empty id is assigned one" (spec §2.3: an empty identity is auto-assigned),
    # a new one at each spawn; no agent has the empty id
    with Runtime.open(clock=FakeClock()) as runtime:
        first, second = runtime.spawn(""), runtime.spawn("")
        assert first.id
        assert second.id
        assert first.id != second.id
        assert runtime.agents() == [first.id, second.id]
        (third,) = runtime.spawn_many([{"agent_id": ""}])
        assert third.id not in ("", first.id, second.id)


@pytest.mark.parametrize("priority", [float("nan"), float("inf"), 10**400])
def test_a_priority_that_is_not_finite_is_an_invalid_spec_not_a_type_error(priority: float) -> None:
    # spawn's Raises: a priority that is no real number is a SpawnSpecTypeError (a TypeError);
    # "a priority that is not finite" is an InvalidSpawnSpecError of the right type
    with Runtime.open(clock=FakeClock()) as runtime:
        with pytest.raises(InvalidSpawnSpecError, match="finite") as caught:
            runtime.spawn("a", priority=priority)
        assert not isinstance(caught.value, TypeError)
        assert runtime.agents() == []


def _agent_actors() -> int:
    """How many agent actors of any runtime are running (each holds a thread)."""
    return len(pykka.ActorRegistry.get_by_class(AgentActor))


def _in_thread(call: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(call())
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def test_a_spawn_the_journal_refuses_leaves_no_actor_running_and_no_id_reserved(tmp_path: Path) -> None:
    # spawn: a journal's refusal raises its JournalError, and the agent is not started:
    # the actor launched before the submit is stopped again (no thread left behind), and
    # its id is free (AgentExistsError is for a live agent or a spawn under way)
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
        runtime.spawn("a")
        assert _agent_actors() == 1
        writer = runtime._core.writer
        assert writer is not None
        wait_for_room = writer.wait_for_room

        def then_failed() -> None:  # another commit fails while the spawn reserves its id
            wait_for_room()
            writer._failure = JournalFailedError("the journal failed (the test)")  # fail-stop from now

        writer.wait_for_room = then_failed  # type: ignore[method-assign]
        with pytest.raises(JournalFailedError):
            runtime.spawn("b")
        writer.wait_for_room = wait_for_room  # type: ignore[method-assign]
        assert _agent_actors() == 1
        assert runtime.agents() == ["a"]
        with pytest.raises(JournalFailedError):  # not AgentExistsError: its id was not kept reserved
            runtime.spawn("b")


def test_a_spawn_stored_as_close_begins_leaves_no_actor_running_after_close(tmp_path: Path) -> None:
    # _register: "If close() began meanwhile, close will not see this actor: it is stopped
    # here" (close: "stop every actor"), while the spawn returns its handle all the same
    path = tmp_path / "j"
    runtime = Runtime.open(path, clock=FakeClock())
    journal = runtime._journal
    assert journal is not None
    append = journal.append
    committing, gate, begun = threading.Event(), threading.Event(), threading.Event()

    def gated_append(events: list[Any], **kwargs: Any) -> list[int]:
        committing.set()
        assert gate.wait(30)
        return append(events, **kwargs)

    stop_agents = runtime._stop_agents

    def stop(entries: Any) -> None:
        begun.set()
        stop_agents(entries)

    journal.append = gated_append  # type: ignore[method-assign,assignment]
    runtime._stop_agents = stop  # type: ignore[method-assign]
    try:
        spawner, outcome = _in_thread(lambda: runtime.spawn("late"))
        assert committing.wait(10)
        closer, _ = _in_thread(runtime.close)
        assert begun.wait(10)
        gate.set()
        spawner.join(10)
        closer.join(30)
        assert not spawner.is_alive()
        assert not closer.is_alive()
    finally:
        gate.set()
        runtime.close()
    (handle,) = outcome
    assert isinstance(handle, Agent), handle
    assert _agent_actors() == 0
    with Runtime.open(path, clock=FakeClock()) as reopened:
        assert reopened.agents() == ["late"]


def test_a_spawn_whose_id_another_spawn_reserved_meanwhile_is_told_the_agent_exists(tmp_path: Path) -> None:
    # spawn: AgentExistsError when "a live agent has that id, or its spawn is under way",
    # also for a spawn that found the id free, then waited for room while another spawn
    # of it reached the journal: the id is reserved atomically, one AgentSpawned per agent
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
        writer = runtime._core.writer
        assert writer is not None
        wait_for_room = writer.wait_for_room
        raced: list[Agent] = []
        once = threading.Event()

        def racing() -> None:
            wait_for_room()
            if not once.is_set():
                once.set()
                raced.append(runtime.spawn("x"))  # the other spawn, while this one waits for room

        writer.wait_for_room = racing  # type: ignore[method-assign]
        with pytest.raises(AgentExistsError):
            runtime.spawn("x")
        writer.wait_for_room = wait_for_room  # type: ignore[method-assign]
        assert runtime.agents() == ["x"]
        assert runtime.agent("x") is raced[0]
        assert _agent_actors() == 1
    with Journal.open(tmp_path / "j", readonly=True) as journal:
        spawns = [r for r in journal.read(stream="agent/x") if isinstance(r.event, AgentSpawned)]
    assert len(spawns) == 1


def test_a_spawn_that_timed_out_and_then_failed_to_commit_is_no_agent(tmp_path: Path) -> None:
    # _finish_late / _spawned_late: once the writer answers a spawn whose caller timed
    # out, "the live runtime must follow what the journal then holds": a refused spawn
    # is not registered (its id is free again), as a reopen has no agent of it
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
        runtime.spawn("a")
        journal = runtime._journal
        assert journal is not None
        committing, gate = threading.Event(), threading.Event()

        def refused_append(*_args: Any, **_kwargs: Any) -> list[int]:
            committing.set()
            assert gate.wait(10)
            msg = "the disk failed (the test)"
            raise lmdb.Error(msg)

        journal.append = refused_append  # type: ignore[method-assign]
        # only the spawn meant to time out has the short call_timeout: "a"'s commit may be slow
        with _short_call_timeout(runtime, 0.3), pytest.raises(ActorTimeoutError):
            runtime.spawn("b")
        finishing = list(runtime._late)  # the helper that follows the spawn's outcome
        assert committing.wait(10)
        gate.set()
        assert finishing
        assert all(finished.wait(10) for finished in finishing)
        assert runtime.agents() == ["a"]
        with pytest.raises(AgentNotFoundError):
            runtime.agent("b")
        assert _agent_actors() == 1


def test_an_experience_prior_makes_a_cognitive_state_of_schema_version_1(tmp_path: Path) -> None:
    # spec §2.3 (ares-reference.md): the cognitive state is the zero value (SchemaVersion 0)
    # unless spec.ExperiencePrior != nil, then {SchemaVersion: 1, Context: prior}; live and replayed
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
        primed = runtime.spawn("primed", experience_prior={"seen": [1, 2]})
        plain = runtime.spawn("plain")
        assert primed.cognitive_state() == CognitiveState(schema_version=1, context={"seen": [1, 2]})
        assert plain.cognitive_state() == CognitiveState()
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
        assert runtime.agent("primed").cognitive_state().schema_version == 1
        assert runtime.agent("plain").cognitive_state().schema_version == 0


def test_a_lifecycle_call_that_close_overtakes_raises_runtime_closed(tmp_path: Path) -> None:
    # Runtime: once closed, "every other method raises RuntimeClosedError": also a call
    # admitted before close() stopped its agent (not AgentNotFoundError: it was not killed)
    runtime = Runtime.open(tmp_path / "j", clock=FakeClock())
    try:
        runtime.spawn("a")
        admit = runtime._admit_control

        def admit_then_close(agent_id: str, entry: Any) -> None:
            admit(agent_id, entry)
            runtime.close()  # the agent's actor is stopped before the call reaches it

        runtime._admit_control = admit_then_close  # type: ignore[method-assign]
        with pytest.raises(RuntimeClosedError):
            runtime.suspend("a")
    finally:
        runtime.close()


@pytest.mark.parametrize("timeout", [0, -1.0, math.nan])
def test_a_flush_timeout_of_zero_or_less_means_call_timeout(tmp_path: Path, timeout: float) -> None:
    # flush: "all of them together get timeout seconds (default, and for 0 or less,
    # call_timeout)": the journal too gets call_timeout to commit what was handed over
    config = Config(journal=JournalConfig(durability="batch"), runtime=RuntimeConfig(call_timeout=10.0))
    with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as runtime:
        agent = runtime.spawn("a")
        runtime.flush()
        writer = runtime._core.writer
        assert writer is not None
        flush = writer.flush
        given: list[float | None] = []

        def recorded(timeout: float | None = None) -> None:
            given.append(timeout)
            flush(timeout)

        writer.flush = recorded  # type: ignore[method-assign]
        agent.set_private("k", 1)
        runtime.flush(timeout)
        assert given == [10.0]
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
        assert runtime.agent("a").private("k") == 1


def _hand_the_writer_a_stalled_commit(runtime: Runtime, gate: threading.Event) -> None:
    """Make the journal's appends wait for ``gate`` (30 s at most), then hand the writer agent a's change.

    Its commit stalls until the gate opens: a close() then finds the writer still committing.
    """
    journal = runtime._journal
    assert journal is not None
    append = journal.append

    def stalled_append(events: list[Any], **kwargs: Any) -> list[int]:
        assert gate.wait(30)
        return append(events, **kwargs)

    journal.append = stalled_append  # type: ignore[method-assign,assignment]
    runtime.spawn("a").set_private("k", 1)  # handed over; its commit stalls until the gate opens


def test_close_raises_when_the_writer_stalls_and_the_writer_still_commits_everything(tmp_path: Path) -> None:
    # README ("Embedding the runtime"): close() waits for the writer while it makes
    # progress; "Past that it raises ActorTimeoutError, and the writer closes the journal
    # itself once its commits are done"
    config = Config(journal=JournalConfig(durability="batch"))
    runtime = Runtime.open(tmp_path / "j", config=config, clock=FakeClock())
    writer = runtime._core.writer
    assert writer is not None
    gate = threading.Event()
    try:
        _hand_the_writer_a_stalled_commit(runtime, gate)
        # close() alone has the short call_timeout (the writer's too): not the set-up's calls
        with (
            _short_call_timeout(runtime, 0.05, writer_too=True),
            pytest.raises(ActorTimeoutError, match="writer"),
        ):
            runtime.close()
        assert runtime.closed
    finally:
        gate.set()
        runtime.close()
    assert writer._ended.wait(10)  # the writer committed, then closed the journal
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as reopened:
        assert reopened.agent("a").private("k") == 1


class _CountedPoll(float):
    """A poll interval for ``_finish_late`` that counts its uses: each is one wait for the commit."""

    polls: ClassVar[list[None]] = []
    second = threading.Event()

    def __float__(self) -> float:
        self.polls.append(None)
        if len(self.polls) >= 2:  # the first wait timed out, and the helper waits again
            self.second.set()
        return float.__float__(self)


def test_a_spawn_whose_commit_outlasts_a_poll_of_its_helper_is_still_reached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # _finish_late: the helper runs done(committed) "once ack resolves", however long the
    # commit takes ("The writer resolves every acknowledgement when it commits, fails or
    # stops, so the thread ends"): a spawn committed late is reached, as a reopen has it
    monkeypatch.setattr(_runtime, "_LATE_POLL", _CountedPoll(0.01))
    _CountedPoll.polls.clear()
    _CountedPoll.second.clear()
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
        runtime.spawn("a")
        journal = runtime._journal
        assert journal is not None
        append = journal.append
        gate = threading.Event()

        def slow_append(events: list[Any], **kwargs: Any) -> list[int]:
            assert gate.wait(30)
            return append(events, **kwargs)

        journal.append = slow_append  # type: ignore[method-assign,assignment]
        try:
            # only the spawn meant to time out has the short call_timeout: "a"'s commit may be slow
            with _short_call_timeout(runtime, 0.3), pytest.raises(ActorTimeoutError):
                runtime.spawn("b")
            assert _CountedPoll.second.wait(10)  # its helper's first wait ran out
        finally:
            gate.set()
        runtime.flush()  # waits for the helper
        assert runtime.agents() == ["a", "b"]
        assert runtime.agent("b").id == "b"
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as reopened:
        assert reopened.agents() == ["a", "b"]


def test_an_empty_parent_is_no_parent_and_the_agent_a_root(tmp_path: Path) -> None:
    # spawn: "an empty ``parent`` is none (a root agent), as in the original": live, journaled
    # and replayed; no agent is a child of the empty id
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
        assert runtime.spawn("c", parent="").parent is None
        assert runtime.children("") == []
    with Journal.open(tmp_path / "j", readonly=True) as journal:
        (spawned,) = [r.event for r in journal.read(stream="agent/c")]
        assert isinstance(spawned, AgentSpawned)
        assert spawned.parent is None
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
        assert runtime.agent("c").parent is None


def test_a_second_close_returns_once_the_first_is_over(tmp_path: Path) -> None:
    # close(): "A second caller waits for the first": once it returns, the runtime is
    # closed through to its journal, which the path can be opened on again
    entered, gate = threading.Event(), threading.Event()
    behaviors = {"gated": lambda: _Gated(entered, gate)}
    runtime = Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors=behaviors)
    first: threading.Thread | None = None
    try:
        runtime.spawn("s", behavior="gated")
        runtime.bus.send("u", "s", "hold")
        assert entered.wait(10)
        # the closes alone have the short call_timeout (it was 2 s for the whole test): the
        # set-up's commits may be slow on a loaded machine
        with _short_call_timeout(runtime, 0.5):
            first, _ = _in_thread(runtime.close)  # waits call_timeout for the busy agent to stop
            assert _until(lambda: runtime.closed)
            runtime.close()  # the second caller
        with Runtime.open(tmp_path / "j", clock=FakeClock()) as again:
            assert again.agents() == ["s"]
    finally:
        gate.set()
        if first is not None:
            first.join(30)
        runtime.close()


@pytest.mark.parametrize("journaled", [True, False], ids=["journal", "memory"])
def test_a_publication_returns_the_agents_it_went_to_as_its_event_names_them(
    tmp_path: Path, journaled: bool
) -> None:
    # publish_task_context: "Returns the ids it went to": the agents its journaled event
    # names, in the event's order (no order is promised beyond that one)
    path = tmp_path / "j" if journaled else None
    with Runtime.open(path, clock=FakeClock()) as runtime:
        for agent_id in ("b", "a", "c"):
            runtime.spawn(agent_id, task_id="t")
        runtime.spawn("other", task_id="u")
        sent = runtime.publish_task_context("t", {"goal": "g"})
    assert sorted(sent) == ["a", "b", "c"]
    if path is not None:
        with Journal.open(path, readonly=True) as journal:
            (event,) = [r.event for r in journal.read() if isinstance(r.event, TaskContextPublished)]
        assert list(event.agents) == sent


def test_a_journal_whose_chain_is_broken_is_refused_with_its_verification_report(
    tmp_path: Path, break_link: Callable[[Path, int], None]
) -> None:
    # open: "JournalIntegrityError: the journal fails verification", naming the record, with
    # the report a caller can read (as ``cogfabric verify`` gives it)
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
        runtime.spawn("a")
        runtime.spawn("b")
    with Journal.open(tmp_path / "j", readonly=True) as journal:
        last = journal.last_seq
    break_link(tmp_path / "j", last)

    with pytest.raises(JournalIntegrityError, match=f"at seq {last}") as raised:
        Runtime.open(tmp_path / "j", clock=FakeClock())

    assert isinstance(raised.value.report, VerifyReport)
    assert raised.value.report.first_bad_seq == last
    assert not raised.value.report.ok

"""Mutants of this session's source changes that no test killed (session 62, helper h13).

Each test pins a line of 67f73ca, 2425dc5, 71ccff9, d2db277 or a0fe33f that could be
changed (a comparison, a level, a flag) with every other test still passing.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric import (
    AgentCheckpointNotSupportedError,
    ClockError,
    FakeClock,
    InvalidTextError,
    Runtime,
    RuntimeClosedError,
    ScriptedProvider,
)
from cogfabric.actors._agent import AgentActor
from tests.actors.test_agent_pins import _BreakableClock
from tests.actors.test_close_and_flush import _closing_begun, _in_thread
from tests.actors.test_operator_logging_s62_h7 import WAIT, _Held, _Idle
from tests.actors.test_operator_logging_s62_h10 import _Deaf

if TYPE_CHECKING:
    from pathlib import Path


def test_a_publish_whose_handling_fails_outside_the_behavior_is_logged_as_a_publish(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The record names what the agent was handling by its kind: "a publish" here, as
    # IPC messages are "a message" (a mutant naming every kind "a message" passed).
    applied = AgentActor._on_publish
    failed: list[str] = []

    def once(self: AgentActor, *args: object) -> None:
        if not failed:
            failed.append(self._state.id)
            msg = "the publish broke"
            raise RuntimeError(msg)
        applied(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(AgentActor, "_on_publish", once)
    caplog.set_level(logging.ERROR, logger="cogfabric.actors._agent")
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        agent = rt.spawn("a", task_id="t")
        assert rt.publish_task_context("t", {"k": 1}) == ["a"]
        # a call behind the publish in the mailbox: answered once it was handled (and the agent restarted)
        assert agent.context_view().task_shared == {"k": 1}  # the restart read it from the journal
    lines = [r.getMessage() for r in caplog.records if "restarting it" in r.getMessage()]
    assert lines == ["agent a: handling a publish failed; restarting it"]
    assert failed == ["a"]


def test_the_warning_of_a_clock_that_fails_as_the_model_answers_carries_the_clocks_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The record is kept at the time the call was made; the warning says why, with the
    # clock's own traceback (a mutant that dropped exc_info passed).
    clock = _BreakableClock(start=5000.0)

    def model(prompt: str) -> str:  # noqa: ARG001
        clock.broken = True
        return "paid"

    caplog.set_level(logging.WARNING, logger="cogfabric.actors._llm")
    with Runtime.open(None, clock=clock, llm_provider=ScriptedProvider(model)) as rt:
        assert rt.llm().generate("q") == "paid"
        clock.broken = False
    [warned] = [r for r in caplog.records if "the clock failed as the model answered" in r.getMessage()]
    assert warned.levelno == logging.WARNING
    assert warned.exc_info is not None
    assert isinstance(warned.exc_info[1], ClockError)


def test_a_reopen_whose_factory_makes_twenty_unfit_behaviors_names_ten_and_counts_ten(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Something unfit (it handles no message) for every agent: the first ten records are
    # errors, each naming its agent, the next ten at DEBUG, and one error names those ten,
    # with no "and 0 more" (mutants: the unfit path never quiet, quiet from the tenth, a
    # count of exactly ten more said as "and 0 more").
    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"idle": _Idle}) as rt:
        rt.spawn_many([{"agent_id": f"a{i:02}", "behavior": "idle"} for i in range(20)])
    caplog.set_level(logging.DEBUG, logger="cogfabric")

    def unfit() -> Any:
        return _Deaf()

    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"idle": unfit}) as rt:
        assert not any(rt.agent(f"a{i:02}").has_behavior for i in range(20))
    said = [r for r in caplog.records if r.name == "cogfabric.actors._core"]
    loud = [r for r in said if r.levelno >= logging.WARNING]
    assert [r.levelno for r in loud] == [logging.ERROR] * 11
    assert [r.getMessage().split(":")[0] for r in loud[:10]] == [f"agent 'a{i:02}'" for i in range(10)]
    assert [r.getMessage().split(":")[0] for r in said if r.levelno == logging.DEBUG] == [
        f"agent 'a{i:02}'" for i in range(10, 20)
    ]
    summary = loud[10].getMessage()
    assert summary.startswith(
        "behavior 'idle' made something that handles no message: 10 more agents run without it than the 10 "
    )
    assert "'a10', " in summary
    assert "'a19'; each logged at DEBUG)" in summary
    assert "more;" not in summary


def test_a_memory_only_runtime_refuses_its_latest_session_as_closed_from_the_moment_close_begins() -> None:
    # As every session call (and the journaled runtime's get_latest_session_for_agent):
    # once close() began, while it still waits for a busy agent, the call says closed,
    # not that the runtime has no journal (a mutant that read only the session
    # manager's own flag, set later in close(), passed).
    entered, gate = threading.Semaphore(0), threading.Event()
    rt = Runtime.open(
        None,
        clock=FakeClock(),
        behaviors={"held": lambda: _Held(entered, gate)},
        config={"runtime": {"call_timeout": 5.0}},
    )
    try:
        with pytest.raises(AgentCheckpointNotSupportedError):
            rt.memory.get_latest_session_for_agent("a")
        rt.spawn("a", behavior="held")
        rt.bus.send("x", "a", "work")
        assert entered.acquire(timeout=WAIT)
        begun = _closing_begun(rt)
        closer, _ = _in_thread(rt.close)
        assert begun.wait(WAIT)
        with pytest.raises(RuntimeClosedError, match="the runtime is closed"):
            rt.memory.get_latest_session_for_agent("a")
        gate.set()
        closer.join(WAIT)
        assert not closer.is_alive()
    finally:
        gate.set()
        rt.close()


def test_a_reopen_that_leaves_two_agents_without_their_behavior_logs_two_records_and_no_summary(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # No agent past the ten named: no summing-up record (a mutant logged "0 more agents").
    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"idle": _Idle}) as rt:
        rt.spawn_many([{"agent_id": f"a{i}", "behavior": "idle"} for i in range(2)])
    caplog.set_level(logging.DEBUG, logger="cogfabric.actors._core")
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        assert not rt.agent("a1").has_behavior
    said = [r.getMessage() for r in caplog.records if r.name == "cogfabric.actors._core"]
    assert [line.split(":")[0] for line in said] == ["agent 'a0'", "agent 'a1'"]
    assert [r.levelno for r in caplog.records if r.name == "cogfabric.actors._core"] == [logging.WARNING] * 2


def test_a_close_that_waits_in_vain_for_another_threads_close_names_the_runtime(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A close() on a second thread gives up after 5 * call_timeout: its warning begins
    # runtime '<name>': as every record close() logs on its caller's thread.
    rt = Runtime.open(tmp_path / "j", clock=FakeClock(), config={"runtime": {"call_timeout": 0.2}})
    begun, gate = threading.Event(), threading.Event()
    stop_agents = rt._stop_agents

    def held(entries: object) -> None:  # the first close() stays here until the second gave up
        begun.set()
        assert gate.wait(WAIT)
        stop_agents(entries)  # type: ignore[arg-type]

    rt._stop_agents = held  # type: ignore[method-assign]
    caplog.set_level(logging.WARNING, logger="cogfabric")
    first, _ = _in_thread(rt.close)
    try:
        assert begun.wait(WAIT)
        rt.close()  # the second: waits 5 * 0.2 s for the first, in vain
    finally:
        gate.set()
        first.join(WAIT)
        rt.close()
    assert "runtime 'j': close() waited for another thread's close() in vain" in caplog.text


@pytest.mark.parametrize("path", [None, "journal"], ids=["memory-only", "journal"])
def test_latest_session_for_an_agent_id_that_is_no_string_is_refused_as_such_open_or_closed(
    tmp_path: Path, path: str | None
) -> None:
    # The argument is checked first, with or without a journal: a memory-only runtime
    # refused it as having no journal while open, and as closed once closed.
    rt = Runtime.open(None if path is None else tmp_path / path)
    try:
        with pytest.raises(InvalidTextError, match="agent_id must be a string, got int"):
            rt.memory.get_latest_session_for_agent(5)  # type: ignore[arg-type]
    finally:
        rt.close()
    with pytest.raises(InvalidTextError, match="agent_id must be a string, got int"):
        rt.memory.get_latest_session_for_agent(5)  # type: ignore[arg-type]
    if path is None:
        with pytest.raises(RuntimeClosedError):
            rt.memory.get_latest_session_for_agent("a")

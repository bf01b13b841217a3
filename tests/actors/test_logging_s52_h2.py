"""What the runtime logs names what an operator needs to act on, at the right level, one line each."""

from __future__ import annotations

import contextlib
import logging
import threading
import traceback
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import (
    ActorTimeoutError,
    Agent,
    Config,
    FakeClock,
    JournalConfig,
    Runtime,
    RuntimeClosedError,
    ScriptedProvider,
)
from cogfabric.actors._memory import _Op
from cogfabric.events import IpcMessage, Message
from cogfabric.store import JournalError
from tests.actors.test_supervision import _output_records, _short_call_timeout_once_answered, _stall

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from cogfabric.actors import Snippet

FORGED = "t\nCRITICAL cogfabric all agents compromised"


class _Raises:
    def on_message(self, ctx: Any, message: IpcMessage) -> None:  # noqa: ARG002
        msg = "a bug in the behavior"
        raise ValueError(msg)


def _records(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if text in r.getMessage()]


def test_a_behaviors_failure_names_the_message_and_its_sender_on_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The id is what `cogfabric trace --id` takes; a topic is the sender's text, which
    # must not start a line of its own in the log (a forged record).
    caplog.set_level(logging.WARNING, logger="cogfabric")
    with Runtime.open(None, clock=FakeClock(), behaviors={"raises": _Raises}) as rt:
        rt.spawn("a", behavior="raises")
        rt.spawn("s")
        sent = rt.bus.send("s", "a", FORGED, 1)
    # close() let the agent handle its mailbox
    [record] = _records(caplog, "behavior of agent a raised")
    said = record.getMessage()
    assert record.levelno == logging.WARNING
    assert sent.id in said
    assert "from 's'" in said
    assert "\n" not in said
    assert repr(FORGED) in said
    assert "a bug in the behavior" in said


class _BrokenOffMain(FakeClock):
    """A clock that fails on every thread but the test's own once ``broken``: an actor's delivery."""

    broken = False

    def now(self) -> float:
        if self.broken and threading.current_thread() is not threading.main_thread():
            msg = "the clock is gone"
            raise OSError(msg)
        return super().now()


def test_a_message_a_clock_error_leaves_unhandled_is_named(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="cogfabric")
    clock = _BrokenOffMain()
    with Runtime.open(None, clock=clock, behaviors={"raises": _Raises}) as rt:
        rt.spawn("a", behavior="raises")
        rt.spawn("s")
        clock.broken = True
        sent = rt.bus.send("s", "a", FORGED, 1)
        rt.agent("a").private("k")  # answered after the message, in the agent's mailbox order
    [record] = _records(caplog, "not handled")
    said = record.getMessage()
    assert sent.id in said
    assert "\n" not in said


class _Failing:
    def retrieve(self, query: str) -> Sequence[Snippet]:  # noqa: ARG002
        msg = "the vector store is down"
        raise ConnectionError(msg)


def test_a_failing_retriever_is_a_warning_naming_it_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The prompt goes on without it, as without one that answers late (a warning too):
    # not an error, once per prompt.
    with Runtime.open(None, clock=FakeClock()) as rt:
        session = rt.memory.create_session("u")
        rt.memory.set_retrievers([_Failing()])
        with caplog.at_level(logging.DEBUG, logger="cogfabric"):
            rt.memory.build_context("q", session)
    [record] = _records(caplog, "retriever")
    assert record.levelno == logging.WARNING
    assert "_Failing" in record.getMessage()
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], ConnectionError)


def test_an_unwaited_answer_not_added_names_its_session(caplog: pytest.LogCaptureFixture) -> None:
    op = _Op("add", ("session_u_1", Message(role="assistant", content="hi")), unwaited=True)
    op.error = RuntimeClosedError("the runtime was closed before the session call ran")
    with caplog.at_level(logging.WARNING, logger="cogfabric"):
        op.finish()
    [record] = _records(caplog, "was not added")
    assert "'session_u_1'" in record.getMessage()
    later = _Op("add", ("session_u_1", Message(role="assistant", content="hi")), unwaited=True)
    later.error = ActorTimeoutError("slow")
    with caplog.at_level(logging.WARNING, logger="cogfabric"):
        later.finish()  # still on its way: not a loss
    assert len(_records(caplog, "was not added")) == 1


def _fill(agent: Agent) -> None:
    """Set private values until the journal, at its ``max_map_size``, refuses one."""
    for i in range(40):
        agent.set_private(f"k{i}", "x" * 100_000)


def test_a_journal_gone_fail_stop_in_sync_durability_is_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The callers hear it, each with its error; the log says it once, naming the journal,
    # and not again for each change refused after it.
    caplog.set_level(logging.WARNING, logger="cogfabric")
    size = 1 << 20
    config = Config(journal=JournalConfig(map_size=size, max_map_size=size))
    rt = Runtime.open(tmp_path / "j", clock=FakeClock(), config=config)
    refused = 0
    try:
        agent = rt.spawn("a")
        with pytest.raises(JournalError):
            _fill(agent)
        for _ in range(20):
            try:
                agent.set_private("z", 1)
            except JournalError:
                refused += 1
    finally:
        with contextlib.suppress(JournalError):
            rt.close()
    assert refused == 20
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    [record] = errors
    assert record.name == "cogfabric.actors._writer"
    assert "fail-stop" in record.getMessage()
    assert str(tmp_path / "j") in record.getMessage()


def test_a_timed_out_turns_answer_that_cannot_be_queued_names_its_session(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING, logger="cogfabric")
    provider = ScriptedProvider(["answer"])
    with Runtime.open(tmp_path / "j", clock=FakeClock(), llm_provider=provider) as rt:
        session = rt.memory.create_session("u")

        def closed(*args: object) -> None:  # noqa: ARG001 - _add_later's arguments
            msg = "the runtime is closed"
            raise RuntimeClosedError(msg)

        monkeypatch.setattr(rt.memory, "_add_later", closed)
        gate = _stall(rt, _output_records)
        try:
            # short once the provider answered: the turn's question keeps the runtime's own
            with _short_call_timeout_once_answered(rt, provider, 0.2), pytest.raises(ActorTimeoutError):
                rt.llm().turn(session, "question")
        finally:
            gate.set()
    [record] = _records(caplog, "was not added")
    assert repr(session) in record.getMessage()


class _CutShort:
    """Raises as a behavior's call does once close() began (``core.closing``, set here)."""

    core: Any = None

    def on_message(self, ctx: Any, message: IpcMessage) -> None:  # noqa: ARG002
        self.core.closing = True
        msg = "the runtime is closed"
        raise RuntimeClosedError(msg)


def test_a_message_the_close_cuts_short_is_named_on_one_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="cogfabric")
    with Runtime.open(None, clock=FakeClock(), behaviors={"cut": _CutShort}) as rt:
        _CutShort.core = rt._core
        rt.spawn("a", behavior="cut")
        rt.spawn("s")
        sent = rt.bus.send("s", "a", FORGED, 1)
    [record] = _records(caplog, "the runtime closed while it handled")
    said = record.getMessage()
    assert sent.id in said
    assert "\n" not in said


def test_only_an_agents_first_failure_is_logged_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    # The traceback says where the behavior's bug is; one that raises on every message
    # must not repeat it for each (session 52: before, no failure had one).
    caplog.set_level(logging.WARNING, logger="cogfabric")
    with Runtime.open(None, clock=FakeClock(), behaviors={"raises": _Raises}) as rt:
        rt.spawn("a", behavior="raises")
        rt.spawn("b", behavior="raises")
        rt.spawn("s")
        for _ in range(3):
            rt.bus.send("s", "a", "t", 1)
        rt.bus.send("s", "b", "t", 1)
    failures = {
        "a": _records(caplog, "behavior of agent a raised"),
        "b": _records(caplog, "behavior of agent b raised"),
    }
    assert [len(found) for found in failures.values()] == [3, 1]
    traced = [r.exc_info is not None for r in failures["a"]]
    assert traced == [True, False, False]
    assert failures["b"][0].exc_info is not None  # each agent's first
    kind, _, tb = failures["a"][0].exc_info or (None, None, None)
    assert kind is ValueError
    assert tb is not None
    assert "on_message" in "".join(traceback.format_tb(tb))

"""Clocks that fail or step (session 62, helper h2): what a user reads when they do."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import pytest

from cogfabric import ClockError, Journal, Runtime, ScriptedProvider
from cogfabric.events import LlmOutputRecorded

from .test_agent_pins import _BreakableClock

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric import AgentContext, IpcMessage


class _BreaksTheClock:
    """Answers 1; on 'break' it breaks the clock first, so that its reply cannot be stamped."""

    clock: _BreakableClock | None = None

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> int:  # noqa: ARG002
        if message.topic == "break":
            assert self.clock is not None
            self.clock.broken = True
        return 1


def test_a_message_whose_handling_fails_outside_the_behavior_is_logged_by_its_kind(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The reply's stamp fails after the behavior returned: the agent restarts, and the log
    # says what it was handling ("a message"), not the mailbox entry's internal number ("a 1 message").
    clock = _BreakableClock()
    _BreaksTheClock.clock = clock
    caplog.set_level(logging.ERROR, logger="cogfabric.actors._agent")
    config = {"runtime": {"call_timeout": 2.0}}
    with Runtime.open(None, clock=clock, behaviors={"b": _BreaksTheClock}, config=config) as rt:
        rt.spawn("a", behavior="b")
        with pytest.raises(ClockError):
            rt.bus.request("x", "a", "break", timeout=5)
        clock.broken = False
        assert rt.bus.request("x", "a", "again", timeout=5).payload == 1  # restarted, and answering

    lines = [r.getMessage() for r in caplog.records if "restarting it" in r.getMessage()]
    assert lines == ["agent a: handling a message failed; restarting it"]


def test_a_model_call_on_a_failing_clock_is_refused_before_the_provider_is_paid() -> None:
    # Its output could not be journaled: the provider is not called at all.
    clock = _BreakableClock()
    calls: list[str] = []

    def model(prompt: str) -> str:
        calls.append(prompt)
        return "paid"

    with Runtime.open(None, clock=clock, llm_provider=ScriptedProvider(model)) as rt:
        llm = rt.llm()
        clock.broken = True
        with pytest.raises(ClockError):
            llm.generate("q")
        clock.broken = False
        assert calls == []
        assert llm.generate("q") == "paid"


def test_a_clock_that_fails_while_the_model_answers_keeps_the_paid_answer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The output's record takes the reading made as the call began, and the caller gets the answer.
    clock = _BreakableClock(start=5000.0)

    def model(prompt: str) -> str:  # noqa: ARG001
        clock.advance(3)
        clock.broken = True  # the clock is gone by the time the answer is stamped
        return "paid"

    caplog.set_level(logging.WARNING, logger="cogfabric.actors._llm")
    with Runtime.open(tmp_path / "j", clock=clock, llm_provider=ScriptedProvider(model)) as rt:
        assert rt.llm().generate("q") == "paid"
        clock.broken = False

    with Journal.open(tmp_path / "j", readonly=True) as journal:
        records = [r.event for r in journal.read()]
    outputs = [(e.output, e.at) for e in records if isinstance(e, LlmOutputRecorded)]
    assert outputs == [("paid", 5000.0)]
    assert any("the clock failed as the model answered" in r.getMessage() for r in caplog.records)

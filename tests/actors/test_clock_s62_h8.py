"""A clock that fails while the model answers (session 62, helper h8): no paid answer lost."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric import ClockError, Journal, JournaledLLM, Runtime, ScriptedProvider
from cogfabric.events import LlmOutputRecorded

from .test_agent_pins import _BreakableClock

if TYPE_CHECKING:
    from pathlib import Path


def _outputs(path: Path) -> list[tuple[str, float, str | None]]:
    with Journal.open(path, readonly=True) as journal:
        events = [r.event for r in journal.read()]
    return [(e.output, e.at, e.session) for e in events if isinstance(e, LlmOutputRecorded)]


class _AsksItsClientToo:
    """A provider that, asked 'outer', asks its own client 'inner' first; the clock breaks after."""

    name = "nested"

    def __init__(self, clock: _BreakableClock) -> None:
        self.clock = clock
        self.client: JournaledLLM | None = None

    def generate(self, prompt: str, **params: Any) -> str:  # noqa: ARG002
        self.clock.advance(1)
        if prompt != "outer":
            return "in"
        assert self.client is not None
        inner = self.client.generate("inner")
        self.clock.advance(1)
        self.clock.broken = True
        return "out:" + inner


def test_a_call_made_within_another_keeps_the_reading_of_the_outer_call(tmp_path: Path) -> None:
    # The inner call's end cleared the outer call's reading: the outer answer, paid for,
    # was lost with a ClockError. Its record now has the time the outer call was made.
    clock = _BreakableClock(start=5000.0)
    provider = _AsksItsClientToo(clock)
    with Runtime.open(tmp_path / "j", clock=clock, llm_provider=provider) as rt:
        provider.client = rt.llm()
        assert provider.client.generate("outer") == "out:in"
        clock.broken = False

    assert _outputs(tmp_path / "j") == [("in", 5002.0, None), ("out:in", 5000.0, None)]


def test_a_turn_whose_clock_stays_down_gives_its_answer_with_the_error(tmp_path: Path) -> None:
    # The answer is journaled at the call's time, but the session cannot take it without
    # a time: the ClockError carries it, as SessionNotFoundError does for a session gone.
    clock = _BreakableClock(start=5000.0)
    calls = threading.Event()

    def model(prompt: str) -> str:  # noqa: ARG001
        calls.set()
        clock.advance(3)
        clock.broken = True
        return "paid"

    with Runtime.open(tmp_path / "j", clock=clock, llm_provider=ScriptedProvider(model)) as rt:
        session = rt.memory.create_session("u")
        with pytest.raises(ClockError) as caught:
            rt.llm().turn(session, "hello")
        clock.broken = False
        assert calls.is_set()
        assert caught.value.output == "paid"
        assert [m.role for m in rt.memory.get_messages(session)] == ["system", "user"]

    assert _outputs(tmp_path / "j") == [("paid", 5000.0, session)]


def test_a_clock_error_before_the_answer_carries_none() -> None:
    # A turn refused by a failing clock before its provider was called has no answer to give.
    clock = _BreakableClock()
    with Runtime.open(None, clock=clock, llm_provider=ScriptedProvider(["never"])) as rt:
        session = rt.memory.create_session("u")
        clock.broken = True
        with pytest.raises(ClockError) as caught:
            rt.llm().turn(session, "hello")
        clock.broken = False
        assert caught.value.output is None

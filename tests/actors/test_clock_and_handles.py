"""The runtime's clock is checked before its readings are journaled; handles stay bound to their agent."""

from __future__ import annotations

import datetime as dt
import math
from typing import TYPE_CHECKING

import pytest

from cogfabric import (
    AgentNotFoundError,
    AgentState,
    ClockError,
    FakeClock,
    Journal,
    Runtime,
    RuntimeClosedError,
    SessionNotFoundError,
)
from cogfabric.actors import Config, JournalConfig

if TYPE_CHECKING:
    from pathlib import Path

BATCH = Config(journal=JournalConfig(durability="batch"))


class _Scripted:
    """A clock whose wall readings come from a list (then the last one, repeated)."""

    def __init__(self, *readings: object) -> None:
        self.readings = list(readings)

    def now(self) -> object:
        return self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]

    def monotonic(self) -> float:
        return 0.0


class _NoMonotonic:
    def now(self) -> float:
        return 1.0


@pytest.mark.parametrize(
    "clock",
    [
        object(),
        _NoMonotonic(),
        _Scripted(dt.datetime.now(tz=dt.UTC)),
        _Scripted("1700000000"),
        _Scripted(None),
        _Scripted(True),
        _Scripted(math.nan),
        _Scripted(math.inf),
        _Scripted(10**400),
    ],
    ids=["no methods", "no monotonic", "datetime", "str", "None", "bool", "nan", "inf", "huge int"],
)
def test_a_clock_that_cannot_give_a_journal_time_is_refused_at_open(tmp_path: Path, clock: object) -> None:
    with pytest.raises(ClockError):
        Runtime.open(tmp_path / "j", clock=clock)  # type: ignore[arg-type]
    with pytest.raises(ClockError):
        Runtime.open(clock=clock)  # type: ignore[arg-type]
    Runtime.open(tmp_path / "j").close()  # the journal is not left locked


def test_an_int_reading_is_journaled_as_float_seconds(tmp_path: Path) -> None:
    with Runtime.open(tmp_path / "j", clock=_Scripted(1_700_000_000)) as rt:  # type: ignore[arg-type]
        rt.spawn("a").set_private("k", 1)
    with Journal.open(tmp_path / "j", readonly=True) as journal:
        times = [record.event.at for record in journal.read()]
    assert times
    assert all(type(at) is float and at == 1.7e9 for at in times)


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_bad_reading_later_fails_its_call_and_stores_nothing(tmp_path: Path, durability: str) -> None:
    config = Config(journal=JournalConfig(durability=durability))  # type: ignore[arg-type]
    clock = _Scripted(1.0, 2.0, 3.0, 4.0)
    with Runtime.open(tmp_path / "j", config=config, clock=clock) as rt:  # type: ignore[arg-type]
        agent = rt.spawn("a")
        session = rt.memory.create_session("u")
        clock.readings = ["later", 5.0]
        with pytest.raises(ClockError):
            agent.set_private("lost", 1)
        agent.set_private("kept", 2)
        clock.readings = [math.nan, 6.0]
        with pytest.raises(ClockError):
            rt.memory.add_message(session, "user", "lost")
        rt.memory.add_message(session, "user", "kept")  # the session actor still answers
        rt.flush()
    with Runtime.open(tmp_path / "j", clock=_Scripted(7.0)) as rt:  # type: ignore[arg-type]  # sessions live
        assert dict(rt.agent("a").context_view().private) == {"kept": 2}
        assert [m.content for m in rt.memory.get_messages(session)][-1:] == ["kept"]


def test_fake_clock_refuses_what_it_could_not_journal() -> None:
    with pytest.raises(ClockError):
        FakeClock(start="1700000000")  # type: ignore[arg-type]
    clock = FakeClock(start=1.7e308)
    with pytest.raises(ClockError):
        clock.advance(math.nan)
    with pytest.raises(ClockError):
        clock.advance(1.7e308)  # it would reach inf: refused, time unchanged
    with pytest.raises(ValueError, match="only moves forward"):
        clock.advance(-1.0)
    assert clock.now() == 1.7e308


def test_a_handle_on_a_killed_agent_does_not_reach_a_new_agent_with_its_id() -> None:
    with Runtime.open(clock=FakeClock()) as rt:
        old = rt.spawn("worker", task_id="t1")
        rt.kill("worker")
        new = rt.spawn("worker", task_id="t2")
        with pytest.raises(AgentNotFoundError):
            old.set_private("stale", 1)
        with pytest.raises(AgentNotFoundError):
            old.context_view()
        assert old != new
        assert rt.agent("worker") == new
        assert dict(new.context_view().private) == {}


def test_a_killed_agents_handle_does_not_report_a_live_lifecycle() -> None:
    with Runtime.open(clock=FakeClock()) as rt:
        handle = rt.spawn("worker")
        rt.suspend("worker")
        assert handle.lifecycle == AgentState.SUSPENDED
        rt.kill("worker")
        with pytest.raises(AgentNotFoundError):
            _ = handle.lifecycle
        renewed = rt.spawn("worker")
        with pytest.raises(AgentNotFoundError):  # the new agent's state is not the old handle's
            _ = handle.lifecycle
        assert renewed.lifecycle == AgentState.IDLE
    with pytest.raises(RuntimeClosedError):
        _ = renewed.lifecycle


def test_the_session_actor_keeps_serving_after_a_batch_the_writer_refuses(tmp_path: Path) -> None:
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        session = rt.memory.create_session("u")
        before = [m.content for m in rt.memory.get_messages(session)]
        writer = rt._core.writer  # a refusal nothing public can provoke
        assert writer is not None
        submit = writer.submit

        def refuse(*_args: object, **_kwargs: object) -> object:
            msg = "refused by the test"
            raise TypeError(msg)

        writer.submit = refuse  # type: ignore[method-assign,assignment]
        with pytest.raises(TypeError, match="refused by the test"):
            rt.memory.add_message(session, "user", "refused")
        writer.submit = submit  # type: ignore[method-assign]
        assert [m.content for m in rt.memory.get_messages(session)] == before  # not left visible
        rt.memory.add_message(session, "user", "kept")
        with pytest.raises(SessionNotFoundError):
            rt.memory.get_messages("session_nobody")
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        assert [m.content for m in rt.memory.get_messages(session)] == [*before, "kept"]


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_bad_reading_leaves_a_session_it_was_to_delete(tmp_path: Path, durability: str) -> None:
    config = Config(journal=JournalConfig(durability=durability))  # type: ignore[arg-type]
    clock = _Scripted(1.0)
    with Runtime.open(tmp_path / "j", config=config, clock=clock) as rt:  # type: ignore[arg-type]
        session = rt.memory.create_session("u")
        clock.readings = [math.nan, 2.0]
        with pytest.raises(ClockError):
            rt.memory.delete_session(session)
        assert rt.memory.size() == 1  # live state is what replay will rebuild
        rt.flush()
    with Runtime.open(tmp_path / "j", clock=_Scripted(3.0)) as rt:  # type: ignore[arg-type]
        assert rt.memory.size() == 1

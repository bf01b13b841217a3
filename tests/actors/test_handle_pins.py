"""Promises of the handle, state, clock and config modules that a mutation test found no test held.

Each test holds what a docstring or README.md promises of ``actors/_handle.py``,
``actors/_state.py``, ``actors/_clock.py`` or ``actors/_config.py``: a ``FakeClock``
starts where it says (November 2023, monotonic 0), ``advance`` moves both readings by
exactly its step and accepts 0, a negative step is a ``ValueError`` (not a
``ClockError``), ``SystemClock`` reads wall time, ``bounded_wait`` reads NaN as not
positive, a clock whose ``monotonic`` is not callable is refused at open, a ``memory``
limit's configuration error keeps its own message and a recursive value is named as
such; replay keeps an agent's spawn time and drops an unsubscribed topic's order; a
handle's ``checkpoint_cognitive`` journals a checkpoint, its ``lifecycle`` is an
``AgentState``, equal handles hash alike, and a ``ContextView`` leaves other types to
compare themselves. Each was found by a mutation test of those modules (hand-made
mutants, one at a time, against the tests that use them), and seen failing under its
mutant.
"""

from __future__ import annotations

import copy
import math
import time
from typing import TYPE_CHECKING
from unittest import mock

import pytest

from cogfabric.actors import (
    AgentState,
    ClockError,
    Config,
    ContextView,
    FakeClock,
    InvalidConfigError,
    Runtime,
    SystemClock,
    replay_agent,
)
from cogfabric.actors._clock import bounded_wait
from cogfabric.events import CheckpointTaken, CognitiveState
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path


def test_a_fake_clock_starts_in_november_2023_at_monotonic_zero() -> None:
    # A FakeClock starts at monotonic 0 and, by default, in November 2023 (FakeClock.__init__, README).
    clock = FakeClock()
    assert clock.now() == 1_700_000_000.0
    assert clock.monotonic() == 0.0
    assert FakeClock(5.0).monotonic() == 0.0


def test_advance_moves_both_readings_by_its_step_every_time() -> None:
    # advance moves both readings by its step, each time it is called (FakeClock docstring).
    clock = FakeClock(100.0)
    clock.advance(2.5)
    clock.advance(4)
    assert clock.now() == 106.5
    assert clock.monotonic() == 6.5


def test_advance_by_zero_is_allowed_and_moves_nothing() -> None:
    # advance takes any step that is not negative, so 0 too, and then moves nothing (FakeClock.advance).
    clock = FakeClock(100.0)
    clock.advance(0)
    clock.advance(0.0)
    assert (clock.now(), clock.monotonic()) == (100.0, 0.0)


def test_advance_by_a_negative_step_is_a_value_error_not_a_clock_error() -> None:
    # A negative step raises ValueError, and ClockError only one that is not finite (FakeClock.advance).
    clock = FakeClock(100.0)
    with pytest.raises(ValueError, match="only moves forward") as caught:
        clock.advance(-1.0)
    assert not isinstance(caught.value, ClockError)
    assert (clock.now(), clock.monotonic()) == (100.0, 0.0)


def test_the_system_clock_reads_wall_time_and_monotonic_time() -> None:
    # SystemClock reads the real clock, time.time() and time.monotonic() (its docstring).
    clock = SystemClock()
    before = time.time()
    now = clock.now()
    after = time.time()
    assert before <= now <= after
    first = clock.monotonic()
    assert time.monotonic() >= first >= 0.0
    assert clock.monotonic() >= first


def test_bounded_wait_reads_nan_as_not_positive() -> None:
    # bounded_wait gives the default for a timeout that is not positive, NaN too (its docstring).
    assert bounded_wait(math.nan, 7.0) == 7.0
    assert bounded_wait(-math.inf, 7.0) == 7.0
    assert bounded_wait(0, 7.0) == 7.0


class _MonotonicNotCallable:
    monotonic = 0.0

    def now(self) -> float:
        return 1_700_000_000.0


def test_a_clock_whose_monotonic_is_not_callable_is_refused_at_open(tmp_path: Path) -> None:
    # A clock needs callable now() and monotonic(), else ClockError at open (CheckedClock, README).
    with pytest.raises(ClockError, match="monotonic"):
        Runtime.open(tmp_path / "j", clock=_MonotonicNotCallable())  # type: ignore[arg-type]
    Runtime.open(tmp_path / "j").close()  # the journal is not left locked


@pytest.mark.parametrize(
    ("memory", "message"),
    [
        ({"max_history": 0}, "max_history must be positive, got 0 - at `$.memory.max_history`"),
        (
            {"clean": {"max_user_len": -1}},
            "clean.max_user_len must be positive, got -1 - at `$.memory.clean.max_user_len`",
        ),
    ],
)
def test_a_memory_limit_keeps_its_own_message(memory: dict[str, object], message: str) -> None:
    # A memory limit keeps its own message, which names the whole path once (config_error, README).
    with pytest.raises(InvalidConfigError) as caught:
        Config.of({"memory": memory})
    assert str(caught.value) == message


def test_a_recursive_value_in_the_config_is_named_as_nested_too_deeply() -> None:
    # A value no configuration file could hold is an InvalidConfigError that says why (Config.of).
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(InvalidConfigError, match="a value nested too deeply"):
        Config.of({"llm": {"extra": {"x": loop}}})


def test_replay_keeps_the_spawn_time_and_forgets_an_unsubscribed_topic_order(tmp_path: Path) -> None:
    # Replay rebuilds what the live agent had, its spawn time and only live topics' orders (apply_event).
    clock = FakeClock(1_700_000_123.5)
    with Runtime.open(tmp_path / "j", clock=clock) as rt:
        rt.spawn("a")
        rt.bus.subscribe("a", "gone")
        rt.bus.subscribe("a", "kept")
        rt.bus.unsubscribe("a", "gone")
    with Journal.open(tmp_path / "j", readonly=True) as journal:
        state = replay_agent(journal, "a", from_snapshot=False)
    assert state is not None
    assert state.spawned_at == 1_700_000_123.5
    assert state.topics == ["kept"]
    assert list(state.topic_orders) == ["kept"]


def test_a_handles_checkpoint_is_journaled_and_returns_the_state(tmp_path: Path) -> None:
    # A handle's checkpoint_cognitive journals a checkpoint and returns the state (its docstring).
    with Runtime.open(tmp_path / "j") as rt:
        agent = rt.spawn("a")
        agent.set_cognitive_state(CognitiveState(decision={"d": 1}))
        taken = agent.checkpoint_cognitive()
    assert taken.decision == {"d": 1}
    with Journal.open(tmp_path / "j", readonly=True) as journal:
        events = [record.event for record in journal.read(stream="agent/a")]
    assert [event.state for event in events if isinstance(event, CheckpointTaken)] == [taken]


def test_a_handles_lifecycle_is_an_agent_state() -> None:
    # A handle's lifecycle is an AgentState member, not a bare string (Agent.lifecycle).
    with Runtime.open() as rt:
        agent = rt.spawn("a")
        before = agent.lifecycle
        rt.suspend("a")
        after = agent.lifecycle
        assert before is AgentState.IDLE
        assert after is AgentState.SUSPENDED
        assert after.name == "SUSPENDED"


def test_a_context_view_compared_with_another_type_defers_to_it() -> None:
    # A view equals a view by value and leaves other types to compare themselves (ContextView.__eq__).
    with Runtime.open() as rt:
        view = rt.spawn("a", task_context={"goal": "g"}).context_view()
    assert view == mock.ANY
    assert view != {"goal": "g"}
    assert view == ContextView({"goal": "g"}, {})


def test_equal_handles_hash_alike() -> None:
    # Handles that reach the same agent are equal, and so hash alike: a set keeps one (Agent.__eq__).
    with Runtime.open() as rt:
        first = rt.spawn("a")
        again = copy.copy(first)
        assert first is not again
        assert first == again == rt.agent("a")
        assert hash(first) == hash(again)
        assert len({first, again, rt.agent("a")}) == 1

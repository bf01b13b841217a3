"""Operator log records that count (helper h4, s63): one thing is singular; a summary names its cause."""

from __future__ import annotations

import logging
import threading
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from cogfabric.actors import FakeClock, Runtime, RuntimeClosedError
from cogfabric.actors._agent import AgentActor
from cogfabric.events import PrivateSet
from tests.actors.test_close_and_flush import _config
from tests.actors.test_operator_logging_s62_h7 import LOST, WAIT, _Held
from tests.actors.test_operator_logging_s62_h10 import _ask, _Deaf, _Idle

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def _reopen(tmp_path: Path, agents: int, factory: Any, caplog: pytest.LogCaptureFixture) -> str:
    """Spawn ``agents`` agents, reopen with ``factory``; the summary record's text (the 11th loud one)."""
    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"idle": _Idle}) as rt:
        rt.spawn_many([{"agent_id": f"a{i:02}", "behavior": "idle"} for i in range(agents)])
    caplog.set_level(logging.DEBUG, logger="cogfabric")
    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"idle": factory}) as rt:
        assert not any(rt.agent(f"a{i:02}").has_behavior for i in range(agents))
    [summary] = [r for r in caplog.records if r.getMessage().startswith("behavior 'idle' ")]
    assert summary.levelno == logging.ERROR
    return summary.getMessage()


def test_a_reopen_whose_factory_made_something_unfit_for_every_agent_does_not_say_it_could_not_be_made(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The factory ran and returned, for each agent, something with no on_message: "could
    # not be made" sends an operator to look for an exception that was never raised.
    said = _reopen(tmp_path, 25, _Deaf, caplog)

    assert "could not be made" not in said
    assert said.startswith(
        "behavior 'idle' made something that handles no message: 15 more agents run without it than the 10 "
    )


def test_a_reopen_whose_factory_raised_for_some_agents_and_made_something_unfit_for_others_counts_each(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    made = iter([ValueError("tenant")] * 13 + [_Deaf()] * 12)

    def factory() -> Any:
        product = next(made)
        if isinstance(product, Exception):
            raise product
        return product

    said = _reopen(tmp_path, 25, factory, caplog)

    # of the 15 past the 10 named: 3 raised, 12 made something unfit
    assert said.startswith(
        "behavior 'idle' could not be made for 3 and made something that handles no message for 12: "
        "15 more agents run without it than the 10 named above"
    )


def test_a_reopen_that_leaves_one_agent_more_than_it_names_says_one_agent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def factory() -> Any:
        raise ValueError

    said = _reopen(tmp_path, 11, factory, caplog)

    assert said == (
        "behavior 'idle' could not be made: 1 more agent runs without it than the 10 named above "
        "('a10'; logged at DEBUG); its handle's has_behavior is False"
    )


def test_what_one_busy_agent_could_not_journal_at_close_is_not_counted_as_1_events(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # In sync durability a busy agent cut off by close() loses one record, its delivery.
    entered, gate = threading.Semaphore(0), threading.Event()
    rt = Runtime.open(
        tmp_path / "j",
        config=_config("sync", call_timeout=0.2),
        clock=FakeClock(),
        behaviors={"held": lambda: _Held(entered, gate)},
    )
    agent = rt.spawn("busy", behavior="held")
    held = rt._entry(agent.id).ref
    rt.bus.send("x", "busy", "work")
    assert entered.acquire(timeout=WAIT)
    caplog.set_level(logging.DEBUG, logger="cogfabric")
    try:
        rt.close()
    finally:
        gate.set()
    assert held.actor_stopped.wait(WAIT)

    [lost] = [r.getMessage() for r in caplog.records if LOST in r.getMessage()]
    assert "1 events" not in lost
    # the README's words stay whole, for an alert that matches them
    assert lost.startswith("agent busy: events it applied were not journaled (1 IpcDelivered): ")


def test_a_close_that_cannot_dead_letter_one_open_request_says_one_request(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered, gate = threading.Semaphore(0), threading.Event()
    rt = Runtime.open(
        tmp_path / "j",
        name="billing",
        config=_config("batch", call_timeout=0.2),
        clock=FakeClock(),
        behaviors={"held": lambda: _Held(entered, gate)},
    )
    asked: list[BaseException] = []
    requester = threading.Thread(target=_ask, args=(rt, asked), daemon=True)
    try:
        rt.spawn("a", behavior="held")
        requester.start()
        assert entered.acquire(timeout=WAIT)  # the request is open, its agent busy with it

        def no_letter(*_: object) -> None:
            msg = "the letter could not be made"
            raise RuntimeClosedError(msg)

        monkeypatch.setattr(rt.bus, "_letter", no_letter)
        with caplog.at_level(logging.WARNING, logger="cogfabric"):
            rt.close()
    finally:
        gate.set()
        rt.close()
        requester.join(WAIT)

    assert "runtime 'billing': close(): no dead letters for 1 request open at close: " in caplog.text


def test_what_other_threads_noted_and_close_dropped_is_counted_as_events_not_as_its_first_type(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # "agent a: 3 PrivateSet noted by other threads not journaled" counted three events
    # under the first one's type; on_stop is called on a stand-in for the stopping actor.
    stopping = SimpleNamespace(
        _shared=SimpleNamespace(),
        _foreign_lock=threading.Lock(),
        _foreign=[PrivateSet(at=0.0, agent="a", key=f"k{i}", value=i) for i in range(3)],
        _state=SimpleNamespace(id="a"),
    )

    with caplog.at_level(logging.WARNING, logger="cogfabric"):
        AgentActor.on_stop(stopping)  # type: ignore[arg-type]

    said = "agent a: 3 events, the first PrivateSet, noted by other threads not journaled: the runtime closed"
    assert caplog.messages == [f"{said} first"]

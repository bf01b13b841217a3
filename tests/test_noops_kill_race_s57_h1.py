"""The no-ops of flush, settle and a fail-stop, and kill()'s own stop, are not lost behind a kill's stop.

``Runtime._noops`` (the journal's word taken after a timed-out change, ``_await_catch_ups``;
after a fail-stop, ``_reload_all`` and ``_await_reloads``) asked each agent with Pykka's own
``ask``, which checks that the actor lives, then queues: a kill whose stop ended the actor
in between left the no-op unanswered, and flush waiting out its timeout for an agent long
gone, then raising ``ActorTimeoutError`` ("did not take the journal's word"), settle
``SettleTimeoutError``. Each is now asked under the runtime's lock while still its id's
(``_ask_current``), as session 56 did for every other ask (tests/test_ask_kill_race_s56.py).
``kill()`` no longer asks a stop of its own behind the one its actor queued as it left: it
waits for the actor's thread to end.
Found by session 57's review of the writer's paths (helper h1).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

import pykka
import pytest

import cogfabric as cf
from cogfabric.actors._agent import AgentActor
from tests.test_ask_kill_race_s56 import CALL_TIMEOUT, called_as_the_kill_ends_the_actor
from tests.test_rounds_s55_h10 import WAIT

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def _catch_ups(rt: cf.Runtime, _handle: cf.Agent) -> object:
    rt._entry("a").shared.stale = True  # as after a change whose commit it stopped waiting for
    rt._await_catch_ups(time.monotonic() + CALL_TIMEOUT)  # before: ActorTimeoutError
    return None


def _reloads(rt: cf.Runtime, _handle: cf.Agent) -> object:
    deadline = time.monotonic() + CALL_TIMEOUT
    rt._await_reloads(deadline)
    return time.monotonic() < deadline  # not waited out


def _answers(past_bound: bool) -> Callable[[cf.Runtime, cf.Agent], object]:
    def asked(rt: cf.Runtime, _handle: cf.Agent) -> object:
        return [future.get(timeout=CALL_TIMEOUT) for _, future in rt._noops(past_bound=past_bound)]

    return asked


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        pytest.param(_catch_ups, None, id="flush's wait for the catch-ups"),
        pytest.param(_reloads, True, id="flush's wait for the fail-stop reloads"),
        pytest.param(_answers(past_bound=True), [None], id="the fail-stop reload's no-ops"),
        pytest.param(_answers(past_bound=False), [None], id="the no-ops within the bound"),
    ],
)
def test_a_noop_asked_as_a_kill_ends_the_actor_is_answered_before_the_kill(
    monkeypatch: pytest.MonkeyPatch, call: Callable[[cf.Runtime, cf.Agent], object], expected: object
) -> None:
    rt, _, result = called_as_the_kill_ends_the_actor(monkeypatch, call)
    try:
        assert result == expected
        assert rt.agents() == []  # then killed
        assert rt._noops(past_bound=True) == []  # gone: not asked
        rt.settle(WAIT)
        assert rt.stats().in_flight == 0
    finally:
        rt.close()


def test_a_noop_refused_as_its_agent_is_killed_gives_its_slot_back() -> None:
    # the kill is over (entry marked) before the no-op is asked: refused, slot given back
    with cf.Runtime.open(None, config={"runtime": {"call_timeout": CALL_TIMEOUT}}) as rt:
        rt.spawn("a")
        entry = rt._entry("a")
        listed = list(rt._agents.items())
        rt.kill("a")
        rt._agents = dict(listed)  # as _noops copied the registry before the kill
        try:
            assert rt._noops(past_bound=True) == []
            assert rt._noops(past_bound=False) == []
        finally:
            rt._agents = {}
        assert entry.shared.slots.free == rt._core.mailbox_size


@pytest.mark.parametrize("call", [cf.Runtime.flush, cf.Runtime.settle], ids=["flush", "settle"])
def test_flush_does_not_time_out_on_a_stale_agent_killed_as_it_is_asked_to_catch_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: Callable[[cf.Runtime], None]
) -> None:
    # An idle agent flush does not ask to hand over, only to catch up (_await_catch_ups).
    alive = pykka.ActorRef.is_alive
    caller = threading.current_thread()
    with cf.Runtime.open(tmp_path / "j", config={"runtime": {"call_timeout": CALL_TIMEOUT}}) as rt:
        rt.spawn("a")
        rt.flush()
        entry = rt._entry("a")
        thread = entry.shared.thread
        assert thread is not None
        killer = threading.Thread(target=rt.kill, args=("a",))

        def checked_then_held(ref: pykka.ActorRef[Any]) -> bool:
            answer = alive(ref)
            if ref is entry.ref and threading.current_thread() is caller and killer.ident is None:
                killer.start()
                thread.join(1.0)  # the actor ends, unless the caller holds what its kill needs
            return answer

        entry.shared.stale = True  # as after a change whose commit it stopped waiting for
        monkeypatch.setattr(pykka.ActorRef, "is_alive", checked_then_held)
        try:
            call(rt)  # before: ActorTimeoutError ("did not take the journal's word"), or SettleTimeoutError
        finally:
            monkeypatch.undo()
            if killer.ident is not None:
                killer.join(WAIT)
        assert killer.ident is not None  # the race was run
        assert not killer.is_alive()
        assert rt.agents() == []


def test_kill_does_not_wait_in_vain_for_a_stop_queued_after_its_own_stop_ended_the_actor(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The killed actor queues its own stop as it leaves (Runtime._on_killed). kill() then
    # asked Pykka to stop it again: found alive, queued just after that first stop ended
    # it, the second stop was never answered, and kill() waited out call_timeout.
    alive = pykka.ActorRef.is_alive
    stop = AgentActor._stop
    caller = threading.current_thread()
    checked = threading.Event()
    with cf.Runtime.open(None, config={"runtime": {"call_timeout": CALL_TIMEOUT}}) as rt:
        rt.spawn("a")
        entry = rt._entry("a")
        thread = entry.shared.thread
        assert thread is not None
        asked: list[bool] = []

        def checked_then_held(ref: pykka.ActorRef[Any]) -> bool:
            answer = alive(ref)
            if ref is entry.ref and threading.current_thread() is caller:
                asked.append(answer)
                if len(asked) == 2:  # kill()'s own stop, after the kill's answer
                    checked.set()
                    thread.join(WAIT)  # the stop the actor queued ends it
            return answer

        def held_stop(actor: AgentActor) -> None:
            checked.wait(0.5)  # its own stop waits for a second one (if kill() sends one)
            stop(actor)

        monkeypatch.setattr(pykka.ActorRef, "is_alive", checked_then_held)
        monkeypatch.setattr(AgentActor, "_stop", held_stop)
        with caplog.at_level(logging.WARNING, logger="cogfabric"):
            rt.kill("a")
        monkeypatch.undo()
        assert "did not stop in time" not in caplog.text  # before: logged after call_timeout
        assert asked == [True]  # the kill's call only: no stop of its own
        assert not thread.is_alive()  # kill() returns once the actor's thread ended
        assert rt.agents() == []

"""A notebook's habits: Ctrl-C in the middle of a call, a cell run again, an object looked at.

A Ctrl-C is simulated deterministically: the wait it would interrupt raises
``KeyboardInterrupt`` itself, once the journal writer is stalled on the call's commit
(or the behavior has begun), as ``_thread.interrupt_main()`` would make it raise there.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf
from cogfabric.actors import _bus, _runtime
from cogfabric.actors._writer import Ack
from cogfabric.events import AgentSpawned, IpcMessage, TaskContextPublished
from cogfabric.store import Journal
from tests.actors.test_supervision import _stall

if TYPE_CHECKING:
    from pathlib import Path

WAIT = 10.0


def _ctrl_c_at_the_commit(monkeypatch: pytest.MonkeyPatch, entered: threading.Event) -> list[None]:
    """The calling thread's next ``Ack.wait`` raises KeyboardInterrupt once the writer is stalled."""
    me = threading.get_ident()
    fired: list[None] = []
    real_wait = Ack.wait

    def wait(self: Ack, timeout: float) -> list[int]:
        if threading.get_ident() == me and not fired:
            fired.append(None)
            assert entered.wait(WAIT), "the writer never took the commit"
            raise KeyboardInterrupt
        return real_wait(self, timeout)

    monkeypatch.setattr(Ack, "wait", wait)
    return fired


def _records(path: Path) -> list[Any]:
    with Journal.open(path, readonly=True) as journal:
        assert journal.verify().ok
        return [record.event for record in journal.read()]


class _Noted:
    def on_message(self, ctx: Any, message: Any) -> str:
        ctx.set_private("got", message.payload)
        return "ok"


def test_a_spawn_interrupted_at_its_commit_is_live_once_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As a spawn whose commit timed out: its agent is reached if the writer stores it,
    # and a spawn of the id meanwhile is refused, not journaled a second time.
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as rt:
        entered = threading.Event()
        gate = _stall(rt, entered=entered)
        fired = _ctrl_c_at_the_commit(monkeypatch, entered)
        with pytest.raises(KeyboardInterrupt):
            rt.spawn("a")
        assert fired
        with pytest.raises(cf.AgentExistsError):
            rt.spawn("a")  # the cell run again: its first spawn is under way
        gate.set()
        rt.flush(WAIT)
        assert rt.agents() == ["a"]
        rt.agent("a").set_private("k", 1)
    spawns = [e for e in _records(tmp_path / "j") if isinstance(e, AgentSpawned)]
    assert [e.agent for e in spawns] == ["a"]
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as rt:
        assert rt.agent("a").private("k") == 1


def test_a_publication_interrupted_at_its_commit_reaches_its_agents_once_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as rt:
        agent = rt.spawn("a", task_id="t")
        entered = threading.Event()
        gate = _stall(rt, entered=entered)
        _ctrl_c_at_the_commit(monkeypatch, entered)
        with pytest.raises(KeyboardInterrupt):
            rt.publish_task_context("t", {"goal": "x"})
        gate.set()
        rt.settle(WAIT)
        assert agent.task_context() == {"goal": "x"}  # as a reopen has it
    assert any(isinstance(e, TaskContextPublished) for e in _records(tmp_path / "j"))
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as rt:
        assert rt.agent("a").task_context() == {"goal": "x"}


def test_a_send_interrupted_at_its_commit_is_delivered_once_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), behaviors={"noted": _Noted}) as rt:
        agent = rt.spawn("a", behavior="noted")
        entered = threading.Event()
        gate = _stall(rt, entered=entered)
        _ctrl_c_at_the_commit(monkeypatch, entered)
        with pytest.raises(KeyboardInterrupt):
            rt.bus.send("app", "a", "note", 7)
        gate.set()
        rt.settle(WAIT)
        assert agent.private("got") == 7  # sent in the journal, so delivered, not dropped unrecorded


def test_a_request_interrupted_at_its_commit_leaves_its_dead_letter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), behaviors={"noted": _Noted}) as rt:
        rt.spawn("a", behavior="noted")
        entered = threading.Event()
        gate = _stall(rt, entered=entered)
        _ctrl_c_at_the_commit(monkeypatch, entered)
        with pytest.raises(KeyboardInterrupt):
            rt.bus.request("app", "a", "ask", 1, timeout=WAIT)
        gate.set()
        rt.settle(WAIT)
        assert [letter.reason for letter in rt.bus.dead_letters()] == ["timeout"]


class _InterruptedDone(threading.Event):
    """A request's ``done``: its first wait raises KeyboardInterrupt once the behavior has begun."""

    def __init__(self, started: threading.Event) -> None:
        super().__init__()
        self._started = started
        self._fired = False

    def wait(self, timeout: float | None = None) -> bool:
        if not self._fired:
            self._fired = True
            assert self._started.wait(WAIT), "the behavior never began"
            raise KeyboardInterrupt
        return super().wait(timeout)


def test_a_request_interrupted_while_its_behavior_runs_leaves_its_dead_letter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As a request whose timeout passed: nobody waits for the reply, and the journal says why.
    started, release = threading.Event(), threading.Event()

    class Slow:
        def on_message(self, ctx: Any, message: Any) -> str:  # noqa: ARG002
            started.set()
            assert release.wait(WAIT)
            return "late"

    class Pending(_bus._Pending):
        __slots__ = ()

        def __init__(self, request: IpcMessage) -> None:
            super().__init__(request)
            self.done = _InterruptedDone(started)

    monkeypatch.setattr(_bus, "_Pending", Pending)
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), behaviors={"slow": Slow}) as rt:
        rt.spawn("a", behavior="slow")
        try:
            with pytest.raises(KeyboardInterrupt):
                rt.bus.request("app", "a", "ask", 1, timeout=WAIT)
        finally:
            release.set()
        rt.settle(WAIT)
        letters = rt.bus.dead_letters()
        assert [letter.reason for letter in letters] == ["timeout"]
        assert "interrupted" in letters[0].error
    assert any(isinstance(e, cf.IpcDeadLettered) for e in _records(tmp_path / "j"))


def test_a_close_interrupted_by_ctrl_c_still_stops_the_session_actor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_stop_agents = _runtime.Runtime._stop_agents

    def interrupted(self: _runtime.Runtime, entries: list[Any]) -> None:
        real_stop_agents(self, entries)
        raise KeyboardInterrupt  # as a Ctrl-C that lands while close() waits for its agents

    rt = cf.Runtime.open(tmp_path / "j")  # the system clock: its session ticker runs
    rt.spawn("a").set_private("k", 1)
    session_actor, ticker = rt.memory.actor_thread, rt.memory._ticker
    assert session_actor is not None
    assert ticker is not None
    monkeypatch.setattr(_runtime.Runtime, "_stop_agents", interrupted)
    with pytest.raises(KeyboardInterrupt):
        rt.close()
    monkeypatch.undo()
    assert rt.closed
    rt.close()  # the cell run again: nothing left to do
    session_actor.join(WAIT)
    ticker.join(WAIT)
    assert not session_actor.is_alive()
    assert not ticker.is_alive()
    with cf.Runtime.open(tmp_path / "j") as reopened:  # the writer closed the journal itself
        assert reopened.agent("a").private("k") == 1


def test_a_runtime_says_what_it_is() -> None:
    rt = cf.Runtime.open(None, name="nb")
    try:
        rt.spawn("a")
        assert repr(rt) == "<Runtime 'nb' memory, 1 agent>"
    finally:
        rt.close()
    assert repr(rt) == "<Runtime 'nb' memory closed>"


def test_a_runtime_with_a_journal_names_it(tmp_path: Path) -> None:
    config = {"journal": {"durability": "batch"}}
    with cf.Runtime.open(tmp_path / "j", config=config) as rt:
        shown = repr(rt)
        assert shown.startswith("<Runtime 'j' '")
        assert shown.endswith("j' batch, 0 agents>")


def test_a_class_defined_again_is_refused_naming_the_registered_one() -> None:
    class Reviewer:
        def on_message(self, ctx: Any, message: Any) -> None:  # noqa: ARG002
            return None

    registered = Reviewer

    class Reviewer:  # type: ignore[no-redef]  # the cell run again
        def on_message(self, ctx: Any, message: Any) -> None:  # noqa: ARG002
            return None

    with cf.Runtime.open(None, behaviors={"reviewer": registered}) as rt:
        with pytest.raises(cf.InvalidSpawnSpecError, match="the class registered as 'reviewer' has its name"):
            rt.spawn("r", behavior=Reviewer)
        assert rt.spawn("r", behavior="reviewer").behavior == "reviewer"

"""Review of session 46: ``ctx.memory``'s view across restarts and respawns, and the ids a
request's failure carries on every way it fails."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

import cogfabric as cf
from cogfabric.events import IpcDeadLettered, IpcMessage, SessionMessageAdded
from cogfabric.store import Journal
from tests.actors.test_request_error_ids import _Fails, _requests
from tests.actors.test_session_cause import _config, _events, _message_id
from tests.actors.test_supervision import _short_call_timeout

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from cogfabric.actors import MemoryManager

WAIT = 10.0


class _Keeper:
    """Keeps its first ``ctx`` and ``ctx.memory`` (class-wide: a restart makes a new instance)."""

    ctx: ClassVar[cf.AgentContext | None] = None
    memory: ClassVar[MemoryManager | None] = None

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:
        match message.topic:
            case "keep":
                type(self).ctx, type(self).memory = ctx, ctx.memory
            case "fail":
                msg = "boom"
                raise RuntimeError(msg)
            case "write with the kept one":
                assert _Keeper.memory is not None
                assert ctx is _Keeper.ctx  # a restart keeps the agent's ctx
                assert ctx.memory is _Keeper.memory  # and its view
                _Keeper.memory.add_message(message.payload, "user", "kept")
            case "write with its own":
                ctx.memory.add_message(message.payload, "user", "own")
                assert _Keeper.memory is not None
                _Keeper.memory.add_message(message.payload, "user", "kept from the killed agent")
        return True


@pytest.fixture(autouse=True)
def _forget_kept() -> None:
    _Keeper.ctx = _Keeper.memory = None


def test_a_ctx_memory_kept_across_a_restart_names_the_message_the_agent_handles(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with cf.Runtime.open(path, config=_config(), behaviors={"keeper": _Keeper}) as rt:
        rt.spawn("a", behavior="keeper")
        session = rt.memory.create_session("u")
        rt.bus.request("driver", "a", "keep", None, 30)
        with pytest.raises(cf.IpcHandlerError):
            rt.bus.request("driver", "a", "fail", None, 30)  # restarted: a fresh behavior instance
        rt.bus.request("driver", "a", "write with the kept one", session, 30)

    events = _events(path)
    added = [(e.message.content, e.cause) for e in events if isinstance(e, SessionMessageAdded)]
    assert added == [("kept", _message_id(events, "write with the kept one"))]


def test_a_killed_agents_kept_ctx_memory_names_no_message_of_the_agent_that_took_its_id(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal"
    with cf.Runtime.open(path, config=_config(), behaviors={"keeper": _Keeper}) as rt:
        rt.spawn("a", behavior="keeper")
        session = rt.memory.create_session("u")
        rt.bus.request("driver", "a", "keep", None, 30)
        rt.kill("a")
        rt.spawn("a", behavior="keeper")  # a new actor, a new ctx
        rt.bus.request("driver", "a", "write with its own", session, 30)

    events = _events(path)
    added = {e.message.content: e.cause for e in events if isinstance(e, SessionMessageAdded)}
    assert added == {"own": _message_id(events, "write with its own"), "kept from the killed agent": None}


class _Gate:
    """Blocks on ``block`` until released."""

    started = threading.Event()
    release = threading.Event()

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:  # noqa: ARG002
        if message.topic == "block":
            type(self).started.set()
            assert type(self).release.wait(WAIT)
        return True


def _queued(rt: cf.Runtime, agent_id: str, count: int) -> bool:
    """Whether ``agent_id``'s mailbox holds ``count`` messages within 10 s."""
    checked = threading.Event()
    for _ in range(1000):
        if rt._entry(agent_id).ref.actor_inbox.qsize() >= count:  # type: ignore[attr-defined]
            return True
        checked.wait(0.01)
    return False


def test_a_request_its_recipients_kill_refused_names_its_stored_record_one_refused_before_none(
    tmp_path: Path,
) -> None:
    """``AgentNotRegisteredError`` for a request sent, then refused by its recipient's kill,
    names it (its record and its ``agent killed`` dead letter are stored); one refused at
    once (the recipient is gone) names none: no record holds it, only its dead letter."""
    _Gate.started.clear()
    _Gate.release.clear()
    path = tmp_path / "journal"
    with cf.Runtime.open(path, behaviors={"gate": _Gate}) as rt:
        rt.spawn("a", behavior="gate")
        rt.bus.send("driver", "a", "block")
        assert _Gate.started.wait(WAIT)
        # only the kill has the short call_timeout: the other calls' commits may be slow under load
        with _short_call_timeout(rt, 0.3), pytest.raises(cf.ActorTimeoutError):
            rt.kill("a")  # queued behind the blocked message
        outcome: list[BaseException] = []

        def ask() -> None:
            try:
                rt.bus.request("driver", "a", "sent", None, 30)
            except cf.CogfabricError as exc:
                outcome.append(exc)

        asker = threading.Thread(target=ask)
        asker.start()
        try:
            assert _queued(rt, "a", 2)  # the kill, then the request
        finally:
            _Gate.release.set()
            asker.join(WAIT)
        assert not asker.is_alive()
        with pytest.raises(cf.AgentNotRegisteredError) as at_once:
            rt.bus.request("driver", "a", "refused", None, 30)

    [killed] = outcome
    assert isinstance(killed, cf.AgentNotRegisteredError)
    request = _requests(path)["a", "sent"]
    assert (killed.message_id, killed.correlation_id) == (request.id, request.correlation_id)
    assert (at_once.value.message_id, at_once.value.correlation_id) == (None, None)
    assert ("a", "refused") not in _requests(path)
    with Journal.open(path, readonly=True) as journal:
        letters = {
            r.event.message_id: r.event.reason for r in journal.read() if isinstance(r.event, IpcDeadLettered)
        }
    assert letters[request.id] == "agent killed"


class _Delegator:
    """Delegates, requests and hands over to ``worker`` (a ``_Fails``); answers with the ids it heard."""

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> Any:  # noqa: ARG002
        heard = []
        asks: list[Callable[[], object]] = [
            lambda: ctx.request("worker", "asked", None, 30),
            lambda: ctx.delegate("worker", "delegated", None, 30),
            lambda: ctx.handoff("worker", "task", None, 30),
            lambda: ctx.request("worker", "defer", None, 0.2),
        ]
        for ask in asks:
            try:
                ask()
            except cf.IpcError as exc:
                heard.append([type(exc).__name__, exc.message_id, exc.correlation_id])
        return heard


def test_a_behaviors_failed_requests_name_each_its_own_request(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with cf.Runtime.open(path, behaviors={"fails": _Fails, "delegator": _Delegator}) as rt:
        rt.spawn("worker", behavior="fails")
        rt.spawn("boss", behavior="delegator")
        heard = rt.bus.request("driver", "boss", "go", None, 60).payload

    requests = _requests(path)
    expected = [
        [kind, requests["worker", topic].id, requests["worker", topic].correlation_id]
        for kind, topic in (
            ("IpcHandlerError", "asked"),
            ("IpcHandlerError", "delegated"),
            ("IpcHandlerError", "handoff-task"),
            ("IpcTimeoutError", "defer"),
        )
    ]
    assert heard == expected
    go = requests["boss", "go"]
    assert all(requests["worker", t].cause == go.id for t in ("asked", "delegated", "handoff-task", "defer"))
    assert isinstance(go, IpcMessage)

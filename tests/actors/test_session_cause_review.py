"""Review of session records' causes: the records a reload re-emits, another runtime's
sessions, and the audit views that show them."""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

from click.testing import CliRunner

import cogfabric as cf
from cogfabric.actors import MemoryManager
from cogfabric.cli import main
from cogfabric.events import IpcMessage, SessionMessageAdded, SessionTouched
from cogfabric.store import JournalError

from .test_session_bus_pins import WAIT, _gate_appends, _says
from .test_session_cause import TTL, _ask, _config, _events, _message_id, _Scribe

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    import pytest


def _watch_queue(monkeypatch: pytest.MonkeyPatch, name: str) -> threading.Event:
    """An event set once an operation ``name`` is queued for the session actor.

    Patched on the class: ``ctx.memory`` shares the manager's attributes, so a patch on
    the manager would run its calls as the manager's, naming no cause.
    """
    queued = threading.Event()
    queue_op = MemoryManager._queue_op

    def watched(
        self: MemoryManager, op_name: str, args: tuple[object, ...], *, unwaited: bool = False
    ) -> Any:
        op = queue_op(self, op_name, args, unwaited=unwaited)
        if op_name == name:
            queued.set()
        return op

    monkeypatch.setattr(MemoryManager, "_queue_op", watched)
    return queued


class _ReadsWhenTold:
    """Reads the session in the payload once ``go`` is set (its message is delivered first)."""

    started = threading.Event()
    go = threading.Event()

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> int:
        self.started.set()
        assert self.go.wait(WAIT), "the test never said go"
        return len(ctx.memory.get_messages(message.payload))


def test_a_behaviors_read_beside_a_refused_write_names_its_message_in_the_reloads_access_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reload after a refused batch journals the access record its read lost: still
    the read's, so it names the message the behavior handled (it named none)."""
    clock = cf.FakeClock()
    path = tmp_path / "journal"
    _ReadsWhenTold.started, _ReadsWhenTold.go = threading.Event(), threading.Event()
    with cf.Runtime.open(path, config=_config(), clock=clock, behaviors={"reader": _ReadsWhenTold}) as rt:
        rt.spawn("reader", behavior="reader")
        read, written, holder = (rt.memory.create_session("u") for _ in range(3))
        clock.advance(TTL / 2)  # a read now is journaled (>= ttl/10 since the last record)
        answers: list[Any] = []
        asker = threading.Thread(target=lambda: answers.append(_ask_reader(rt, read)))
        asker.start()
        assert _ReadsWhenTold.started.wait(WAIT)  # delivered: the writer may be held now
        gate, entered = _gate_appends(rt, _says("hold"), refuses=_says("refused"))
        queued = _watch_queue(monkeypatch, "get_messages")
        held = threading.Thread(target=rt.memory.add_message, args=(holder, "user", "hold"))
        held.start()
        try:
            assert entered.wait(WAIT)  # the session actor waits for that commit: the next two queue
            _ReadsWhenTold.go.set()
            assert queued.wait(WAIT)  # the behavior's read, first in the next batch
            refused = rt.memory._queue_op("add", (written, cf.Message(role="user", content="refused")))
        finally:
            _ReadsWhenTold.go.set()
            gate.set()
        for thread in (held, asker):
            thread.join(WAIT)
            assert not thread.is_alive()
        assert refused.done.acquire(timeout=WAIT)
        assert isinstance(refused.error, JournalError)
        assert answers == [1]  # the read answered

    events = _events(path)
    touched = [e for e in events if isinstance(e, SessionTouched) and e.session == read]
    reads = [e.id for e in events if isinstance(e, IpcMessage) and e.topic == "read"]
    assert [e.cause for e in touched] == reads


def _ask_reader(rt: cf.Runtime, session: str) -> Any:
    return rt.bus.request("driver", "reader", "read", session, 30).payload


class _Elsewhere:
    """Writes to a session of the runtime in ``other`` (another runtime's memory)."""

    other: cf.Runtime | None = None

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> bool:
        assert self.other is not None
        del ctx
        self.other.memory.add_message(message.payload, "user", "from another runtime's agent")
        return True


def test_a_session_call_on_another_runtimes_memory_names_no_cause(tmp_path: Path) -> None:
    """A behavior's call on the memory of a runtime that is not its own journals there a
    record whose cause no record of that journal holds: it names none, as that runtime's
    bus does for a send made from there."""
    other_path = tmp_path / "other"
    with cf.Runtime.open(other_path, config=_config()) as other:
        _Elsewhere.other = other
        try:
            with cf.Runtime.open(tmp_path / "own", config=_config(), behaviors={"w": _Elsewhere}) as rt:
                rt.spawn("w", behavior="w")
                session = other.memory.create_session("u")
                assert rt.bus.request("driver", "w", "go", session, 30).payload is True
        finally:
            _Elsewhere.other = None

    added = [e for e in _events(other_path) if isinstance(e, SessionMessageAdded)]
    assert [(e.message.content, e.cause) for e in added] == [("from another runtime's agent", None)]


def test_trace_json_and_verify_export_take_a_behaviors_session_records(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with cf.Runtime.open(path, config=_config(), behaviors={"scribe": _Scribe}) as rt:
        rt.spawn("scribe", behavior="scribe")
        session = _ask(rt, "create")
        _ask(rt, "write", session)
        _ask(rt, "delete", session)

    events = _events(path)
    runner = CliRunner()
    shown = runner.invoke(main, ["trace", str(path), "--id", _message_id(events, "write"), "--json"])
    assert shown.exit_code == 0, shown.output
    effects = json.loads(shown.output)["effects"]
    roles = [e["data"]["message"]["role"] for e in effects if e["type"] == "SessionMessageAdded"]
    assert roles == ["user", "assistant", "user"]

    exported = tmp_path / "export.jsonl"
    done = runner.invoke(main, ["export", str(path), "--verifiable", "--output", str(exported)])
    assert done.exit_code == 0, done.output
    checked = runner.invoke(main, ["verify-export", str(exported)])
    assert checked.exit_code == 0, checked.output


class _Asker:
    """Asks ``scribe`` to write to the session in the payload, then writes to it itself."""

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> bool:
        ctx.request("scribe", "write", message.payload, 30)
        ctx.memory.add_message(message.payload, "user", "asker")
        return True


def test_a_request_to_an_agent_using_sessions_leaves_each_its_own_messages_cause(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    behaviors: dict[str, Callable[[], cf.Behavior]] = {"scribe": _Scribe, "asker": _Asker}
    with cf.Runtime.open(path, config=_config(), behaviors=behaviors) as rt:
        rt.spawn("scribe", behavior="scribe")
        rt.spawn("asker", behavior="asker")
        session = rt.memory.create_session("u")
        assert rt.bus.request("driver", "asker", "go", session, 30).payload is True

    events = _events(path)
    go = next(e.id for e in events if isinstance(e, IpcMessage) and e.topic == "go")
    write = _message_id(events, "write")
    added = {e.message.content: e.cause for e in events if isinstance(e, SessionMessageAdded)}
    assert added == dict.fromkeys(["hi", "hello", "again"], write) | {"asker": go}

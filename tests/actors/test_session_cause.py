"""Session records name their cause: what a behavior's session calls journal names the
message it handles, so `cogfabric trace` lists them among that message's effects."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import msgspec
import pytest
from click.testing import CliRunner

import cogfabric as cf
from cogfabric.actors import Config, JournalConfig, MemoryConfig
from cogfabric.cli import main
from cogfabric.events import (
    IpcMessage,
    SessionCreated,
    SessionDeleted,
    SessionEvicted,
    SessionExpired,
    SessionMessageAdded,
    SessionTouched,
)
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric.actors import MemoryManager
    from cogfabric.events import Event

TTL = 100.0


def _config(durability: str = "sync", **memory: object) -> Config:
    return Config(
        journal=msgspec.convert({"durability": durability}, JournalConfig),
        memory=msgspec.convert({"session_ttl": TTL, **memory}, MemoryConfig),
    )


def _events(path: Path) -> list[Event]:
    with Journal.open(path, readonly=True) as journal:
        return [record.event for record in journal.read()]


def _message_id(events: list[Event], topic: str) -> str:
    return next(e.id for e in events if isinstance(e, IpcMessage) and e.topic == topic)


class _Scribe:
    """Each topic one session call (or a few) through ``ctx.memory``; a request's answer is its result."""

    kept: MemoryManager
    runtime: cf.Runtime

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:
        memory, payload = ctx.memory, message.payload
        match message.topic:
            case "create":
                return memory.create_session("u", agent_id=ctx.agent_id)
            case "write":
                memory.add_message(payload, "user", "hi")
                memory.add_structured_message(payload, cf.Message(role="assistant", content="hello"))
                return memory.add_turn_message(payload, "user", "again")
            case "read":
                return len(memory.get_messages(payload))
            case "delete":
                memory.delete_session(payload)
            case "turn":
                return ctx.llm.turn(payload, "question")
            case "in a thread":
                # worker threads the behavior waits for: a message and a turn from each
                workers = [
                    threading.Thread(target=memory.add_message, args=(payload, "user", "aside")),
                    threading.Thread(target=ctx.llm.turn, args=(payload, "asked aside")),
                ]
                for worker in workers:
                    worker.start()
                for worker in workers:
                    worker.join(30)
                    assert not worker.is_alive()
            case "keep":
                self.kept = memory
            case "runtime":
                self.runtime.memory.add_message(payload, "user", "through the runtime")
        return True  # None would defer a request's reply


def _ask(rt: cf.Runtime, topic: str, payload: object = None) -> Any:
    return rt.bus.request("driver", "scribe", topic, payload, 30).payload


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_behaviors_session_records_name_the_message_it_handles(tmp_path: Path, durability: str) -> None:
    path = tmp_path / "journal"
    with cf.Runtime.open(path, config=_config(durability), behaviors={"scribe": _Scribe}) as rt:
        rt.spawn("scribe", behavior="scribe")
        session = _ask(rt, "create")
        _ask(rt, "write", session)
        rt.memory.add_message(session, "user", "from outside")  # no behavior: no cause
        _ask(rt, "delete", session)

    events = _events(path)
    session_records = [e for e in events if e.stream == f"session/{session}"]
    created, *added, deleted = session_records
    assert isinstance(created, SessionCreated)
    assert created.cause == _message_id(events, "create")
    assert [(type(e), e.message.content, e.cause) for e in added] == [  # type: ignore[attr-defined]
        (SessionMessageAdded, "hi", _message_id(events, "write")),
        (SessionMessageAdded, "hello", _message_id(events, "write")),
        (SessionMessageAdded, "again", _message_id(events, "write")),
        (SessionMessageAdded, "from outside", None),
    ]
    assert isinstance(deleted, SessionDeleted)
    assert deleted.cause == _message_id(events, "delete")


def test_a_read_records_its_access_with_the_message_and_an_expiry_names_no_cause(tmp_path: Path) -> None:
    clock = cf.FakeClock()
    path = tmp_path / "journal"
    with cf.Runtime.open(path, config=_config(), clock=clock, behaviors={"scribe": _Scribe}) as rt:
        rt.spawn("scribe", behavior="scribe")
        session = rt.memory.create_session("u")
        clock.advance(TTL / 5)  # past ttl/10: the next read is journaled
        assert _ask(rt, "read", session) == 1
        clock.advance(TTL + 1)
        with pytest.raises(cf.IpcHandlerError):  # the read finds it expired
            _ask(rt, "read", session)

    events = _events(path)
    touched = [e for e in events if isinstance(e, SessionTouched)]
    expired = [e for e in events if isinstance(e, SessionExpired)]
    reads = [e.id for e in events if isinstance(e, IpcMessage) and e.topic == "read"]
    assert [e.cause for e in touched] == [reads[0]]
    assert len(expired) == 1
    assert expired[0].cause is None  # the clock ended it, whoever noticed


def test_an_eviction_a_behaviors_new_session_makes_names_its_message(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with cf.Runtime.open(path, config=_config(max_sessions=1), behaviors={"scribe": _Scribe}) as rt:
        rt.spawn("scribe", behavior="scribe")
        first = rt.memory.create_session("u")
        _ask(rt, "create")

    events = _events(path)
    evicted = next(e for e in events if isinstance(e, SessionEvicted))
    assert evicted.session == first
    assert evicted.cause == _message_id(events, "create")


def test_a_turns_messages_name_the_message_beside_its_llm_record(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    provider = cf.ScriptedProvider(["the answer"])
    with cf.Runtime.open(path, config=_config(), behaviors={"scribe": _Scribe}, llm_provider=provider) as rt:
        rt.spawn("scribe", behavior="scribe")
        session = rt.memory.create_session("u")
        assert _ask(rt, "turn", session) == "the answer"

    events = _events(path)
    turn = _message_id(events, "turn")
    added = [e for e in events if isinstance(e, SessionMessageAdded)]
    assert [(e.message.role, e.message.content, e.cause) for e in added] == [
        ("user", "question", turn),
        ("assistant", "the answer", turn),
    ]
    recorded = next(e for e in events if type(e).__name__ == "LlmOutputRecorded")
    assert recorded.cause == turn


def test_calls_from_worker_threads_the_behavior_waits_for_name_its_message(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    provider = cf.ScriptedProvider(["answered aside"])
    with cf.Runtime.open(path, config=_config(), behaviors={"scribe": _Scribe}, llm_provider=provider) as rt:
        rt.spawn("scribe", behavior="scribe")
        session = rt.memory.create_session("u")
        _ask(rt, "in a thread", session)

    events = _events(path)
    added = {e.message.content: e.cause for e in events if isinstance(e, SessionMessageAdded)}
    thread = _message_id(events, "in a thread")
    assert added == dict.fromkeys(["aside", "asked aside", "answered aside"], thread)


def test_a_kept_ctx_memory_called_while_its_agent_handles_nothing_names_no_cause(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    scribe = _Scribe()
    with cf.Runtime.open(path, config=_config()) as rt:
        rt.spawn("scribe", behavior=scribe)
        session = rt.memory.create_session("u")
        _ask(rt, "keep")
        scribe.kept.add_message(session, "user", "later")
        _ask(rt, "write", session)  # and the same ctx.memory names a message it handles

    events = _events(path)
    added = {e.message.content: e.cause for e in events if isinstance(e, SessionMessageAdded)}
    assert added == dict.fromkeys(["hi", "hello", "again"], _message_id(events, "write")) | {"later": None}


def test_runtime_memory_called_from_a_behavior_names_no_cause(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    scribe = _Scribe()
    with cf.Runtime.open(path, config=_config()) as rt:
        scribe.runtime = rt
        rt.spawn("scribe", behavior=scribe)
        session = rt.memory.create_session("u")
        _ask(rt, "runtime", session)

    added = [e for e in _events(path) if isinstance(e, SessionMessageAdded)]
    assert [(e.message.content, e.cause) for e in added] == [("through the runtime", None)]


class _Writer:
    """Adds ``count`` messages, each naming its agent, to the session in the payload."""

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> bool:
        for n in range(20):
            ctx.memory.add_message(message.payload, "user", f"{ctx.agent_id} {n}")
        return True


def test_calls_of_two_behaviors_in_one_batch_each_name_their_own_message(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with cf.Runtime.open(path, config=_config("batch"), behaviors={"writer": _Writer}) as rt:
        rt.spawn("a", behavior="writer")
        rt.spawn("b", behavior="writer")
        session = rt.memory.create_session("u")
        asked = [
            threading.Thread(target=rt.bus.request, args=("driver", agent, "go", session, 30))
            for agent in ("a", "b")
        ]
        for thread in asked:
            thread.start()
        for thread in asked:
            thread.join(60)
            assert not thread.is_alive()

    events = _events(path)
    go = {e.recipient: e.id for e in events if isinstance(e, IpcMessage) and e.topic == "go"}
    added = [e for e in events if isinstance(e, SessionMessageAdded)]
    assert len(added) == 40
    assert all(e.cause == go[e.message.content.split()[0]] for e in added)


def test_trace_lists_a_behaviors_session_messages_among_its_messages_effects(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with cf.Runtime.open(path, config=_config(), behaviors={"scribe": _Scribe}) as rt:
        rt.spawn("scribe", behavior="scribe")
        session = rt.memory.create_session("u")
        _ask(rt, "write", session)

    write = _message_id(_events(path), "write")
    shown = CliRunner().invoke(main, ["trace", str(path), "--id", write])

    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    led_to = lines[lines.index(next(line for line in lines if line.startswith("led to"))) + 1 :]
    added = [line.split(f"session/{session} ")[1] for line in led_to if "SessionMessageAdded" in line]
    assert added == ['role "user"', 'role "assistant"', 'role "user"']


def test_trace_escapes_a_session_messages_role(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    message = IpcMessage(at=1.0, id="m", sender="driver", recipient="scribe", topic="go")
    added = SessionMessageAdded(
        at=1.0, session="s", message=cf.Message(role="\x1b[31mred\n", content="x"), cause="m"
    )
    with Journal.open(path) as journal:
        journal.append([message, added])

    shown = CliRunner().invoke(main, ["trace", str(path), "--id", "m"])

    assert shown.exit_code == 0, shown.output
    assert 'seq 2 SessionMessageAdded session/s role "\\u001b[31mred\\n"' in shown.output.splitlines()[-1]


def test_sessions_recover_the_same_with_causes_in_their_records(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with cf.Runtime.open(path, config=_config(), behaviors={"scribe": _Scribe}) as rt:
        rt.spawn("scribe", behavior="scribe")
        session = _ask(rt, "create")
        _ask(rt, "write", session)
        before = rt.memory.get_messages(session)

    with cf.Runtime.open(path, config=_config(), behaviors={"scribe": _Scribe}) as rt:
        assert rt.memory.get_messages(session) == before
        assert rt.memory.get_latest_session_for_agent("scribe") == session

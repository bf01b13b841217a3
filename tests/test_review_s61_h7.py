"""Review of e21606f (helper h7, session 61): a turn's output record goes before its answer.

A ``ctx.llm.turn`` hands its output's record to the journal before its answer goes into
the session: a kill -9 right after that hand-over recovers the record, the agent's
changes before it and the session without the answer. A kill of the agent that lands
while the provider answers drops the record: the answer then goes into no session
either. ``SessionNotFoundError.reason`` of sessions expired at a reopen, evicted for a
smaller ``max_sessions``, and the endings a closed runtime lets go of.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest

import cogfabric as cf
from cogfabric.actors import FakeClock, Runtime, SessionNotFoundError
from cogfabric.events import IpcDelivered, LlmOutputRecorded, SessionMessageAdded

from .test_chat_sessions_s61_h4 import TTL, _config, _endings, _events

if TYPE_CHECKING:
    from pathlib import Path


class _Keeps:
    """Keeps its ``ctx`` for the test to call later, from a thread of the test's own."""

    kept: list[cf.AgentContext]

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:  # noqa: ARG002
        type(self).kept.append(ctx)
        return "kept"


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_kill_that_lands_in_a_kept_ctxs_turn_adds_no_answer_that_no_record_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durability: str
) -> None:
    # The kill drops the output's record (a warning says so); the answer went into the
    # session all the same: a conversation whose answer no record of a model call held.
    monkeypatch.setattr(_Keeps, "kept", [], raising=False)
    holder: list[Runtime] = []

    def model(_prompt: str) -> str:
        holder[0].kill("bot")  # the agent is idle: its kill is journaled now
        return "an answer after the kill"

    path = tmp_path / "j"
    with Runtime.open(
        path,
        config=_config(durability),
        clock=FakeClock(),
        behaviors={"keeps": _Keeps},
        llm_provider=cf.ScriptedProvider(model),
    ) as rt:
        holder.append(rt)
        rt.spawn("bot", behavior="keeps")
        assert rt.bus.request("web", "bot", "keep", None, timeout=5).payload == "kept"
        session = rt.memory.create_session("u1")
        with pytest.raises(cf.AgentNotFoundError):
            _Keeps.kept[0].llm.turn(session, "hello")
        assert [m.content for m in rt.memory.get_messages(session)] == ["New session started", "hello"]
    events = _events(path)
    assert not any(isinstance(e, LlmOutputRecorded) for e in events)
    assert not any(isinstance(e, SessionMessageAdded) and e.message.role == "assistant" for e in events)


_CHILD = textwrap.dedent(
    """
    import json, os, signal, sys
    import cogfabric as cf
    from cogfabric.actors import _memory

    path, durability = sys.argv[1], sys.argv[2]
    real = _memory.MemoryManager.add_structured_message

    def crash_before_the_answer(self, session_id, message):
        if message.role != "assistant":
            return real(self, session_id, message)
        rt._core.writer.flush(10)  # what was handed over is committed; the answer is not
        print(json.dumps({"session": session_id}), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    _memory.MemoryManager.add_structured_message = crash_before_the_answer

    class Chat:
        def on_message(self, ctx, message):
            session = ctx.memory.create_session("web", agent_id=ctx.agent_id)
            ctx.set_private("session", session)
            return ctx.llm.turn(session, message.payload)

    config = {"journal": {"durability": durability}}
    rt = cf.Runtime.open(
        path, config=config, behaviors={"chat": Chat}, llm_provider=cf.ScriptedProvider(["hi there"])
    )
    rt.spawn("bot", behavior="chat")
    rt.bus.request("web", "bot", "line", "hello", timeout=10)
    """
)


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_kill_nine_between_the_hand_over_and_the_answer_recovers_the_record_not_the_answer(
    tmp_path: Path, durability: str
) -> None:
    # Before e21606f the record waited in the agent's outbox until the message's end: a
    # crash here lost it (and, in batch durability, the agent's change before it).
    path = tmp_path / "j"
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), durability],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr[-3000:]
    session = json.loads(child.stdout.splitlines()[-1])["session"]
    events = _events(path)
    delivered = [e for e in events if isinstance(e, IpcDelivered) and e.recipient == "bot"]
    outputs = [e for e in events if isinstance(e, LlmOutputRecorded)]
    assert len(delivered) == len(outputs) == 1
    output = outputs[0]
    assert (output.output, output.session, output.cause) == ("hi there", session, delivered[0].message_id)
    assert events.index(delivered[0]) < events.index(outputs[0])  # the cause before its effect
    with Runtime.open(path, config=_config(durability)) as rt:
        assert rt.agent("bot").context_view().private == {"session": session}
        assert [m.content for m in rt.memory.get_messages(session)] == ["New session started", "hello"]


def test_sessions_expired_at_a_reopen_and_evicted_for_a_smaller_limit_say_so(tmp_path: Path) -> None:
    path, clock = tmp_path / "j", FakeClock()
    with Runtime.open(path, config=_config(max_sessions=4), clock=clock) as rt:
        old = [rt.memory.create_session(f"u{n}") for n in range(2)]
        clock.advance(TTL / 2)
        kept = [rt.memory.create_session(f"v{n}") for n in range(2)]
    clock.advance(TTL / 2 + 1)  # past the first two's TTL while closed
    with Runtime.open(path, config=_config(max_sessions=1), clock=clock) as rt:
        assert rt.memory.sessions() == kept  # more than max_sessions: kept until a new one
        new = rt.memory.create_session("w")
        expected = {old[0]: "expired", old[1]: "expired", kept[0]: "evicted", kept[1]: "evicted"}
        assert _endings(rt, expected) == expected
    with Runtime.open(path, config=_config(max_sessions=1), clock=clock) as rt:
        assert rt.memory.sessions() == [new]
        assert _endings(rt, expected) == expected


def test_a_closed_runtime_lets_go_of_the_endings_it_kept(tmp_path: Path) -> None:
    rt = Runtime.open(tmp_path / "j", config=_config(), clock=FakeClock())
    with rt:
        session = rt.memory.create_session("u1")
        rt.memory.delete_session(session)
        with pytest.raises(SessionNotFoundError) as caught:
            rt.memory.get_messages(session)
        assert caught.value.reason == "deleted"
        memory = rt.memory
    assert len(memory._ended) == 0  # a closed runtime kept reachable keeps no session

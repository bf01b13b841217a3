"""A multi-user chat service whose conversations are cogfabric sessions (helper h4, session 61).

Web workers add to the same and to different sessions at once, agents run turns with
``ctx.llm.turn``, sessions are evicted by last access and expire by TTL on a
``FakeClock``, and the runtime is reopened in the middle of conversations.
"""

from __future__ import annotations

import collections
import random
import threading
from typing import TYPE_CHECKING

import msgspec
import pytest

import cogfabric as cf
from cogfabric.actors import (
    Config,
    FakeClock,
    JournalConfig,
    MemoryConfig,
    Runtime,
    SessionNotFoundError,
    _memory,
)
from cogfabric.events import (
    LlmOutputRecorded,
    Message,
    SessionEvicted,
    SessionExpired,
    SessionMessageAdded,
    SessionTouched,
    ToolCall,
    ToolCallFunction,
)
from cogfabric.store import Journal

from .actors.test_supervision import _short_call_timeout

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

    from cogfabric.events import Event

TTL = 100.0


def _config(durability: str = "sync", **memory: object) -> Config:
    return Config(
        journal=msgspec.convert({"durability": durability}, JournalConfig),
        memory=msgspec.convert({"session_ttl": TTL, **memory}, MemoryConfig),
        runtime=cf.RuntimeConfig(call_timeout=5.0),
    )


def _events(path: Path) -> list[Event]:
    with Journal.open(path, readonly=True) as journal:
        return [record.event for record in journal.read()]


class _Chat:
    """One conversation per agent: each message is a user's line, answered by a turn."""

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:
        session = ctx.private("session")
        if session is None:
            session = ctx.memory.create_session("web", agent_id=ctx.agent_id)
            ctx.set_private("session", session)
        return ctx.llm.turn(session, message.payload)


class _ChatOnAWorker:
    """As ``_Chat``, with the turn run on a worker thread the behavior waits for."""

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:
        session = ctx.memory.create_session("web", agent_id=ctx.agent_id)
        answers: list[str] = []
        worker = threading.Thread(target=lambda: answers.append(ctx.llm.turn(session, message.payload)))
        worker.start()
        worker.join(5)
        return answers[0]


@pytest.mark.parametrize("durability", ["sync", "batch"])
@pytest.mark.parametrize("behavior", [_Chat, _ChatOnAWorker])
def test_an_agents_turn_journals_the_output_before_the_answer(
    tmp_path: Path, durability: str, behavior: type
) -> None:
    # ctx.llm's records wait in the agent's outbox, while the session actor journals
    # the answer at once: a crash between the two left an answer in the conversation
    # that no record of the model call held. The output's record goes first now.
    path = tmp_path / "j"
    provider = cf.ScriptedProvider(["hi there", "fine"])
    with Runtime.open(
        path,
        config=_config(durability),
        clock=FakeClock(),
        behaviors={"chat": behavior},
        llm_provider=provider,
    ) as rt:
        rt.spawn("bot", behavior="chat")
        assert rt.bus.request("web", "bot", "line", "hello", timeout=5).payload == "hi there"
        assert rt.bus.request("web", "bot", "line", "how are you", timeout=5).payload == "fine"
    events = _events(path)
    outputs = [i for i, e in enumerate(events) if isinstance(e, LlmOutputRecorded)]
    answers = [
        i
        for i, e in enumerate(events)
        if isinstance(e, SessionMessageAdded) and e.message.role == "assistant"
    ]
    assert len(outputs) == len(answers) == 2
    assert all(output < answer for output, answer in zip(outputs, answers, strict=True))


def test_web_workers_adding_at_once_keep_each_workers_order_across_a_reopen(tmp_path: Path) -> None:
    path, clock = tmp_path / "j", FakeClock()
    workers, lines = 6, 40
    with Runtime.open(path, config=_config(max_history=8), clock=clock) as rt:
        sessions = [rt.memory.create_session(f"user-{n}") for n in range(3)]
        start = threading.Barrier(workers, timeout=5)

        def work(worker: int) -> None:
            start.wait()
            for line in range(lines):
                rt.memory.add_message(sessions[line % 3], "user", f"{worker}:{line}")

        threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert not any(thread.is_alive() for thread in threads)
        live = {s: rt.memory.get_messages(s) for s in sessions}
        windows = {s: rt.memory.build_prompt_messages(s) for s in sessions}
    for session, messages in live.items():
        texts = [m.content for m in messages[1:]]
        assert len(texts) == len(set(texts))  # none twice
        assert sorted(texts) == sorted(
            f"{w}:{line}" for w in range(workers) for line in range(lines) if sessions[line % 3] == session
        )
        for worker in range(workers):  # each worker's lines in the order it added them
            mine = [int(t.split(":")[1]) for t in texts if t.startswith(f"{worker}:")]
            assert mine == sorted(mine)
    with Runtime.open(path, config=_config(max_history=8), clock=clock) as rt:
        assert {s: rt.memory.get_messages(s) for s in sessions} == live
        assert {s: rt.memory.build_prompt_messages(s) for s in sessions} == windows


def test_a_tool_loops_prompt_window_is_the_same_after_a_reopen(tmp_path: Path) -> None:
    path, clock = tmp_path / "j", FakeClock()
    call = ToolCall(id="call_1", function=ToolCallFunction(name="search", arguments='{"q": "x"}'))
    with Runtime.open(path, config=_config(max_history=5), clock=clock) as rt:
        session = rt.memory.create_session("u1")
        for turn in range(3):
            clock.advance(1)
            turn_id = f"t{turn}"
            memory = rt.memory
            memory.add_structured_message(session, Message(role="user", content="find x", turn_id=turn_id))
            memory.add_structured_message(
                session, Message(role="assistant", content="", tool_calls=[call], turn_id=turn_id)
            )
            memory.add_structured_message(
                session,
                Message(
                    role="tool_result",
                    content="Results: " + "x" * 300,
                    tool_call_id="call_1",
                    turn_id=turn_id,
                    parent_id="p",
                    artifact_refs=["a/1"],
                ),
            )
        before = rt.memory.build_prompt_messages(session)
        context = rt.memory.build_context("next", session)
    with Runtime.open(path, config=_config(max_history=5), clock=clock) as rt:
        assert rt.memory.build_prompt_messages(session) == before
        assert rt.memory.build_context("next", session) == context


def test_an_add_at_the_moment_of_expiry_is_kept_and_one_after_it_refused(tmp_path: Path) -> None:
    path, clock = tmp_path / "j", FakeClock()
    with Runtime.open(path, config=_config(), clock=clock) as rt:
        session = rt.memory.create_session("u1")
        clock.advance(TTL)  # now == last access + ttl: still live
        assert rt.memory.sweep() == 0
        rt.memory.add_message(session, "user", "just in time")
        clock.advance(TTL + 0.001)
        with pytest.raises(SessionNotFoundError) as caught:
            rt.memory.add_message(session, "user", "too late")
        assert caught.value.session_id == session
        assert rt.memory.sweep() == 0  # the add found it expired, and journaled that
    events = [e for e in _events(path) if getattr(e, "session", None) == session]
    added = [e.message.content for e in events if isinstance(e, SessionMessageAdded)]
    assert added == ["just in time"]
    assert isinstance(events[-1], SessionExpired)
    with Runtime.open(path, config=_config(), clock=clock) as rt:
        with pytest.raises(SessionNotFoundError):
            rt.memory.get_messages(session)
        assert rt.memory.sessions() == []


def test_a_read_keeps_a_conversation_from_eviction_also_after_a_reopen(tmp_path: Path) -> None:
    path, clock = tmp_path / "j", FakeClock()
    config = _config(max_sessions=3)
    with Runtime.open(path, config=config, clock=clock) as rt:
        first, second, third = (rt.memory.create_session(f"u{n}") for n in range(3))
        clock.advance(TTL / 10)  # a read this much after the last journaled access is journaled
        rt.memory.get_session(first)  # the oldest created is now the most recently used
        assert rt.memory.sessions() == [second, third, first]
    with Runtime.open(path, config=config, clock=clock) as rt:
        assert rt.memory.sessions() == [second, third, first]
        fourth = rt.memory.create_session("u3")
        assert rt.memory.sessions() == [third, first, fourth]
    evicted = [e.session for e in _events(path) if isinstance(e, SessionEvicted)]
    assert evicted == [second]


def _endings(rt: Runtime, sessions: Iterable[str]) -> dict[str, str | None]:
    """Each session's ``SessionNotFoundError.reason``, from a read and from a write."""
    found: dict[str, str | None] = {}
    for session in sessions:
        with pytest.raises(SessionNotFoundError) as read:
            rt.memory.get_messages(session)
        with pytest.raises(SessionNotFoundError) as write:
            rt.memory.add_message(session, "user", "are you there?")
        assert read.value.reason == write.value.reason
        assert str(read.value) == f"session not found: {session!r}"  # the original's text, as before
        found[session] = read.value.reason
    return found


@pytest.mark.parametrize("journaled", [True, False])
def test_a_gone_conversation_says_how_it_ended_also_after_a_reopen(tmp_path: Path, journaled: bool) -> None:
    # A chat service tells "your conversation timed out" from "no such conversation":
    # every miss used to be the same bare "session not found".
    path, clock = (tmp_path / "j" if journaled else None), FakeClock()
    config = _config(max_sessions=3)
    with Runtime.open(path, config=config, clock=clock) as rt:
        evicted, deleted, swept = (rt.memory.create_session(f"u{n}") for n in range(3))
        rt.memory.delete_session(deleted)
        clock.advance(TTL / 2)
        read = rt.memory.create_session("u3")
        kept = rt.memory.create_session("u4")  # evicts the least recently used: the first
        clock.advance(TTL / 2 + 1)
        assert rt.memory.sweep() == 1  # the third, past its TTL
        rt.memory.add_message(kept, "user", "still here")
        clock.advance(TTL / 2)
        with pytest.raises(SessionNotFoundError) as caught:
            rt.memory.get_session(read)  # past its TTL: the read itself finds it so
        assert caught.value.reason == "expired"
        expected = {
            evicted: "evicted",
            deleted: "deleted",
            swept: "expired",
            read: "expired",
            "session_nobody_0": None,
        }
        assert _endings(rt, expected) == expected
        assert rt.memory.sessions() == [kept]
    if journaled:
        with Runtime.open(path, config=config, clock=clock) as rt:
            assert _endings(rt, expected) == expected


@pytest.mark.parametrize("journaled", [True, False])
def test_the_memory_keeps_a_bounded_number_of_endings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journaled: bool
) -> None:
    # A service that runs for days ends sessions without end: the memory keeps how the
    # latest ended, and reads an older one's from its last record.
    monkeypatch.setattr(_memory, "_ENDED_KEPT", 2)
    with Runtime.open(tmp_path / "j" if journaled else None, config=_config(), clock=FakeClock()) as rt:
        sessions = [rt.memory.create_session(f"u{n}") for n in range(4)]
        for session in sessions:
            rt.memory.delete_session(session)
        assert len(rt.memory._ended) == 2
        oldest = "deleted" if journaled else None
        assert _endings(rt, sessions) == dict(
            zip(sessions, [oldest, oldest, "deleted", "deleted"], strict=True)
        )


def test_a_turn_whose_conversation_was_evicted_meanwhile_says_so(tmp_path: Path) -> None:
    holder: list[Runtime] = []

    def model(_prompt: str) -> str:
        holder[0].memory.create_session("another user")  # the last one, evicting the turn's
        return "an answer nobody keeps"

    with Runtime.open(
        tmp_path / "j",
        config=_config(max_sessions=1),
        clock=FakeClock(),
        llm_provider=cf.ScriptedProvider(model),
    ) as rt:
        holder.append(rt)
        session = rt.memory.create_session("u1")
        with pytest.raises(SessionNotFoundError) as caught:
            rt.llm().turn(session, "hello")
        assert (caught.value.reason, caught.value.output) == ("evicted", "an answer nobody keeps")


def test_an_add_that_timed_out_is_still_made_so_a_retry_adds_it_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A web worker that retries on ActorTimeoutError: the timed-out call stays queued
    # and runs in its turn (README: check before retrying a write).
    release, busy = threading.Event(), threading.Event()
    with Runtime.open(tmp_path / "j", config=_config(), clock=FakeClock()) as rt:
        session = rt.memory.create_session("u1")
        real = rt.memory._op_sweep

        def stuck_sweep() -> int:
            busy.set()
            assert release.wait(10)
            return real()

        monkeypatch.setattr(rt.memory, "_op_sweep", stuck_sweep)
        with _short_call_timeout(rt, 0.1):
            with pytest.raises(cf.ActorTimeoutError):
                rt.memory.sweep()  # the session actor is held in it
            assert busy.wait(5)
            with pytest.raises(cf.ActorTimeoutError):
                rt.memory.add_message(session, "user", "hello?")
        release.set()
        rt.memory.add_message(session, "user", "hello?")  # the retry
        contents = [m.content for m in rt.memory.get_messages(session)]
    assert contents == ["New session started", "hello?", "hello?"]


@pytest.mark.parametrize(("agent", "touches"), [("bot", 60), (None, 0)])
def test_one_agents_many_conversations_journal_nearly_every_read(
    tmp_path: Path, agent: str | None, touches: int
) -> None:
    # README ("Conversations of many users"): a read is journaled at most once per
    # ttl/10, but also whenever it makes a session its agent's latest.
    path = tmp_path / "j"
    with Runtime.open(path, config=_config(), clock=FakeClock()) as rt:
        sessions = [rt.memory.create_session(f"u{n}", agent_id=agent) for n in range(6)]
        for _ in range(10):
            for session in sessions:
                rt.memory.build_prompt_messages(session)
    assert sum(isinstance(e, SessionTouched) for e in _events(path)) == touches


class _Model:
    """What the session memory promises, with what the journal keeps of reads (every ttl/10)."""

    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.sessions: collections.OrderedDict[str, dict[str, float | int]] = collections.OrderedDict()
        self.seq = 0

    def record(self, state: dict[str, float | int]) -> None:
        self.seq += 1
        state["seq"] = self.seq

    def live(self, session: str, now: float, *, read: bool) -> dict[str, float | int] | None:
        state = self.sessions.get(session)
        if state is None:
            return None
        if now > state["accessed"] + TTL:
            del self.sessions[session]
            return None
        state["accessed"] = max(state["accessed"], now)
        self.sessions.move_to_end(session)
        if read and now - state["touched"] >= TTL / 10:
            state["touched"] = now
            self.record(state)
        return state

    def create(self, session: str, now: float) -> None:
        while len(self.sessions) >= self.max_sessions:
            self.sessions.popitem(last=False)
        self.sessions[session] = {"accessed": now, "touched": now, "messages": 1}
        self.record(self.sessions[session])

    def reopen(self, now: float) -> None:
        ordered = sorted(self.sessions.items(), key=lambda item: item[1]["seq"])
        self.sessions = collections.OrderedDict(ordered)
        for state in self.sessions.values():
            state["accessed"] = state["touched"]  # only journaled accesses survive
        for session in [s for s, state in self.sessions.items() if now > state["accessed"] + TTL]:
            del self.sessions[session]

    def listed(self, now: float) -> list[str]:
        return [s for s, state in self.sessions.items() if now <= state["accessed"] + TTL]


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12))
def test_random_conversations_with_reopens_follow_the_model(tmp_path: Path, seed: int) -> None:  # noqa: PLR0912 - one branch per call
    rnd = random.Random(seed)
    path, clock, config = tmp_path / "j", FakeClock(), _config(max_sessions=4)
    model = _Model(4)
    known: list[str] = []
    rt = Runtime.open(path, config=config, clock=clock)
    try:
        for step in range(250):
            op = rnd.choice(["create", "add", "add", "read", "read", "advance", "sweep", "reopen", "delete"])
            now = clock.now()
            if op == "create":
                session = rt.memory.create_session("u")
                model.create(session, now)
                known.append(session)
            elif op in {"add", "read"} and known:
                session = rnd.choice(known)
                try:
                    if op == "add":
                        rt.memory.add_message(session, "user", str(step))
                    else:
                        rt.memory.get_messages(session)
                except SessionNotFoundError:
                    found = False
                else:
                    found = True
                state = model.live(session, now, read=op == "read")
                if state is not None and op == "add":
                    state["messages"] += 1
                    state["touched"] = now
                    model.record(state)
                assert found == (state is not None), (seed, step, op)
            elif op == "advance":
                clock.advance(rnd.choice([1, 5, 9, 10, 11, 50, 99, 100, 101]))
            elif op == "sweep":
                expected = len(model.sessions) - len(model.listed(now))
                model.sessions = collections.OrderedDict((s, model.sessions[s]) for s in model.listed(now))
                assert rt.memory.sweep() == expected, (seed, step)
            elif op == "delete" and known:
                session = rnd.choice(known)
                rt.memory.delete_session(session)
                model.sessions.pop(session, None)
            elif op == "reopen":
                rt.close()
                rt = Runtime.open(path, config=config, clock=clock)
                model.reopen(now)
            assert rt.memory.sessions() == model.listed(clock.now()), (seed, step, op)
        for session in model.listed(clock.now()):
            assert len(rt.memory.get_messages(session)) == model.sessions[session]["messages"]
    finally:
        rt.close()

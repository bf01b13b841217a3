"""A memory-only runtime (``Runtime.open(None)``) against a journaled one (session 62, helper h9).

A simulation author prototypes without a journal, then points the same code at a path. A
seeded random sequence of calls (spawns, kills, the lifecycle rules, layers, checkpoints,
task publications, sends, requests, broadcasts, subscriptions, dead letters, sessions with
TTL expiry and LRU eviction on a ``FakeClock``, LLM calls through the prompt gate, session
turns, stats, settle, flush, bad arguments, and every call again once the runtime is closed)
runs on a runtime without a journal and on journaled ones in "sync" and "batch" durability;
each call's result, or its error's type and text (and a ``SessionNotFoundError``'s reason),
must be the same. The documented differences are all that may differ: ``last_checkpoint``
and ``get_latest_session_for_agent`` raise ``AgentCheckpointNotSupportedError`` without a
journal, and ``agents()`` forgets a killed id there (so its order is compared as a set).
The default run tries a few sequences; ``pytest -m slow`` many longer ones.

``tests/actors/test_runtime_model.py`` compares each kind of runtime with a model;
``tests/reliability/test_resource_bounds.py`` holds a memory-only churn's bookkeeping flat.
"""

from __future__ import annotations

import gc
import random
import re
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

WAIT = 10.0
IDS = ("a", "b", "c", "d", "e")
TOPICS = ("news", "alerts")
_RANDOM_ID = re.compile(r"[0-9a-f]{16,}")


class _Echo:
    """Answers a request with what it got; fails on ``boom``; calls its model on ``llm``."""

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> Any:
        if message.topic == "boom":
            msg = "boom"
            raise RuntimeError(msg)
        if message.topic == "note":
            ctx.set_private("last", message.payload)
            return None
        if message.topic == "llm":
            return ctx.llm.generate(str(message.payload))
        return {"t": message.topic, "p": message.payload, "s": message.sender}


class _Run:
    """One runtime driven by one seed; ``out`` holds what each call gave, comparable across runtimes."""

    def __init__(self, rt: cf.Runtime, clock: cf.FakeClock, seed: int) -> None:
        self.rt, self.clock, self.rnd = rt, clock, random.Random(seed)
        self.names: dict[str, str] = {}  # a session's random id -> its creation's number
        self.sessions: list[str] = []
        self.out: list[tuple[Any, ...]] = []

    def shown(self, value: object) -> str:
        text = repr(value)
        for real, name in self.names.items():
            text = text.replace(real, name)
        return _RANDOM_ID.sub("<id>", text)  # message and trace ids

    def created(self, session_id: str) -> str:
        self.names[session_id] = f"S{len(self.names)}"
        self.sessions.append(session_id)
        return session_id

    def session(self) -> str:
        if self.sessions and self.rnd.random() < 0.9:
            return self.sessions[self.rnd.randrange(len(self.sessions))]
        return "no"  # never created

    def record(self, step: object, name: str, call: Callable[[], object]) -> None:
        try:
            self.out.append((step, name, "ok", self.shown(call())))
        except Exception as exc:  # noqa: BLE001 - every error is compared, by type and text
            reason = getattr(exc, "reason", None)
            self.out.append((step, name, type(exc).__name__, self.shown(str(exc)), reason))

    def calls(self, step: int) -> dict[str, Callable[[], object]]:
        rt, rnd, memory, bus = self.rt, self.rnd, self.rt.memory, self.rt.bus
        a, b, topic = rnd.choice(IDS), rnd.choice(IDS), rnd.choice(TOPICS)

        def spawn() -> object:
            task, parent = rnd.choice(["t1", "t2", None]), rnd.choice([None, b])
            return rt.spawn(a, task_id=task, parent=parent, behavior=rnd.choice([None, "echo"])).id

        def checkpoint() -> object:
            handle = rt.agent(a)
            handle.set_cognitive_state(cf.CognitiveState(checkpoint=f"c{step}"))
            return handle.checkpoint_cognitive()

        def send() -> object:
            sent = bus.send(a, b, "note", step)
            return (sent.sender, sent.recipient, sent.topic, sent.payload, sent.at)

        def request(topic: str) -> Callable[[], object]:
            def call() -> object:
                reply = bus.request(a, b, topic, step, timeout=WAIT)
                return (reply.sender, reply.recipient, reply.topic, reply.payload)

            return call

        def view() -> object:
            handle = rt.agent(a)
            seen = handle.context_view()
            parts = (handle.parent, handle.task_id, handle.behavior, handle.has_behavior, handle.spawned_at)
            return (handle.lifecycle, *parts, seen.task_shared, seen.private, handle.cognitive_state())

        def dead_letters() -> object:
            rt.settle(WAIT)  # a refusal at delivery is recorded on the agent's thread
            return sorted((d.reason, d.sender, d.recipient, d.topic, d.error) for d in bus.dead_letters())

        def stats() -> object:
            rt.settle(WAIT)
            s = rt.stats()
            return (s.agents, s.idle, s.running, s.suspended, s.retired, s.queued, s.in_flight)

        def bad() -> object:
            unencodable = object()
            refused: list[Callable[[], object]] = [
                lambda: rt.spawn(7),  # type: ignore[arg-type]
                lambda: rt.agent(a).set_private("k", unencodable),
                lambda: bus.send(a, b, "x", unencodable),
                lambda: bus.subscribe(a, ""),
                lambda: rt.recover(a, {"decision": "x"}),  # type: ignore[arg-type]
                lambda: memory.add_message(self.session(), "nobody", "x"),
                lambda: rt.publish_task_context("t1", {"x": unencodable}),
            ]
            return rnd.choice(refused)()

        def dead_letter_counts() -> object:
            rt.settle(WAIT)
            return bus.dead_letter_counts()

        return {
            "spawn": spawn,
            "kill": lambda: rt.kill(a),
            "suspend": lambda: rt.suspend(a),
            "resume": lambda: rt.resume(a),
            "retire": lambda: rt.retire(a),
            "recover": lambda: rt.recover(a, cf.CognitiveState(decision=str(step))),
            "set_private": lambda: rt.agent(a).set_private("k", [step, {"x": (1, 2)}]),
            "private": lambda: rt.agent(a).private("k"),
            "set_task_context": lambda: rt.agent(a).set_task_context({"g": step}),
            "publish": lambda: rt.publish_task_context(rnd.choice(["t1", "t2"]), {"p": step}),
            "checkpoint": checkpoint,
            "view": view,
            "views": lambda: (sorted(rt.context_views().items()), sorted(rt.cognitive_states().items())),
            "send": send,
            "request": request("ask"),
            "boom": request("boom"),
            "model": lambda: bus.request("app", a, "llm", rnd.choice(["q", "z" * 25]), timeout=WAIT).payload,
            "broadcast": lambda: bus.broadcast(a, topic, step),
            "subscribe": lambda: bus.subscribe(a, topic),
            "unsubscribe": lambda: bus.unsubscribe(a, topic),
            "subscribers": lambda: bus.subscribers(topic),
            "agents": lambda: sorted(rt.agents()),  # documented: a killed id is forgotten without a journal
            "children": lambda: sorted(rt.children(a)),
            "create_session": lambda: self.created(
                memory.create_session(f"u{step}", agent_id=rnd.choice([None, a]))
            ),
            "add_message": lambda: memory.add_message(self.session(), "user", f"m{step}"),
            "add_turn_message": lambda: memory.add_turn_message(self.session(), "assistant", f"m{step}"),
            "messages": lambda: [(m.role, m.content) for m in memory.get_messages(self.session())],
            "window": lambda: [(m.role, m.content) for m in memory.build_prompt_messages(self.session())],
            "delete_session": lambda: memory.delete_session(self.session()),
            "sweep": memory.sweep,
            "size": memory.size,
            "sessions": lambda: sorted(self.names.get(s, s) for s in memory.sessions()),
            "latest_session": lambda: memory.get_latest_session_for_agent(a),
            "advance": lambda: self.clock.advance(rnd.choice([1.0, 30.0, 60.0])),
            "generate": lambda: rt.llm().generate(rnd.choice(["hi", "", "x" * 20, "y" * 21, "  "])),
            "generate_for": lambda: rt.llm(agent_id=a).generate("hello"),
            "turn": lambda: rt.llm().turn(self.session(), rnd.choice(["hello", "q" * 30, ""])),
            "last_checkpoint": lambda: rt.last_checkpoint(a),
            "dead_letters": dead_letters,
            "dead_letter_counts": dead_letter_counts,
            "stats": stats,
            "settle": lambda: rt.settle(WAIT),
            "flush": lambda: rt.flush(WAIT),
            "bad": bad,
        }

    def after_close(self) -> None:
        rt, bus, memory = self.rt, self.rt.bus, self.rt.memory
        for name, call in {
            "spawn": lambda: rt.spawn("z"),
            "agent": lambda: rt.agent("a"),
            "agents": rt.agents,
            "kill": lambda: rt.kill("a"),
            "recover": lambda: rt.recover("a", cf.CognitiveState()),
            "send": lambda: bus.send("a", "b", "t", 1),
            "request": lambda: bus.request("a", "b", "t", 1, timeout=WAIT),
            "broadcast": lambda: bus.broadcast("a", "news", 1),
            "subscribe": lambda: bus.subscribe("a", "news"),
            "subscribers": lambda: bus.subscribers("news"),
            "create_session": lambda: memory.create_session("u"),
            "messages": lambda: memory.get_messages("no"),
            "size": memory.size,
            "sweep": memory.sweep,
            "latest_session": lambda: memory.get_latest_session_for_agent("a"),
            "last_checkpoint": lambda: rt.last_checkpoint("a"),
            "generate": lambda: rt.llm().generate("hi"),
            "publish": lambda: rt.publish_task_context("t1", {}),
            "stats": rt.stats,
            "flush": rt.flush,
            "settle": rt.settle,
            "backup": lambda: rt.backup("unused"),
            "close": rt.close,
        }.items():
            self.record("closed", name, call)


_SETTLED_FIRST = frozenset({"resume", "retire", "recover", "bad", "view"})
"""Calls that refuse an agent whose behavior handles a message (``bad`` holds a ``recover``),
and ``view``, which reads its lifecycle: the sends before them are handled first."""


def _run(path: Path | None, durability: str, seed: int, steps: int) -> list[tuple[Any, ...]]:
    clock = cf.FakeClock()
    config = cf.Config(
        journal=cf.JournalConfig(durability=durability, fsync=False),  # type: ignore[arg-type]
        memory=cf.MemoryConfig(max_sessions=3, session_ttl=100.0),
        llm=cf.LLMConfig(max_prompt_length=20),
        runtime=cf.RuntimeConfig(call_timeout=WAIT),
    )
    provider = cf.ScriptedProvider([f"answer {i}" for i in range(7)], keep_calls=False)
    rt = cf.Runtime.open(path, config=config, clock=clock, behaviors={"echo": _Echo}, llm_provider=provider)
    run = _Run(rt, clock, seed)
    try:
        for step in range(steps):
            calls = run.calls(step)
            name = "spawn" if run.rnd.random() < 0.12 else run.rnd.choice(sorted(calls))  # kills take them
            if name in _SETTLED_FIRST:  # a send may still be handled: that race is not compared
                rt.settle(WAIT)
            run.record(step, name, calls[name])
        run.record("end", "dead_letters", run.calls(steps)["dead_letters"])
    finally:
        rt.close()
    run.after_close()
    return run.out


def _documented(memory_only: tuple[Any, ...]) -> bool:
    """The calls that read the journal refuse without one (README), but once closed: closed."""
    step, name, outcome = memory_only[:3]
    journal_read = name in {"last_checkpoint", "latest_session"}
    return step != "closed" and journal_read and outcome == "AgentCheckpointNotSupportedError"


def _compare(tmp_path: Path, seed: int, steps: int) -> None:
    memory_only = _run(None, "sync", seed, steps)
    assert len(memory_only) == steps + 1 + 23
    for durability in ("sync", "batch"):
        journaled = _run(tmp_path / f"{durability}-{seed}", durability, seed, steps)
        assert len(journaled) == len(memory_only)
        for without, with_journal in zip(memory_only, journaled, strict=True):
            if without != with_journal:
                assert _documented(without), (seed, durability, without, with_journal)
                assert with_journal[2] in {"ok", "AgentNotFoundError"}, (seed, durability, with_journal)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_memory_only_runtime_answers_every_call_as_a_journaled_one(tmp_path: Path, seed: int) -> None:
    _compare(tmp_path, seed, 200)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 140))
def test_a_memory_only_runtime_answers_every_call_as_a_journaled_one_long(tmp_path: Path, seed: int) -> None:
    _compare(tmp_path, seed, 500)


_KEPT: dict[str, cf.AgentContext] = {}


class _Keeps:
    """Keeps its ``ctx``, for a call from outside once the runtime is closed."""

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> int:  # noqa: ARG002
        _KEPT["ctx"] = ctx
        return 1


@pytest.mark.parametrize("journaled", [False, True], ids=["memory-only", "journal"])
def test_a_closed_runtime_refuses_the_journal_reads_as_closed_with_or_without_a_journal(
    tmp_path: Path, journaled: bool
) -> None:
    # Without a journal, ctx.last_checkpoint() and get_latest_session_for_agent (the
    # runtime's and a ctx's) said AgentCheckpointNotSupportedError after close(), where
    # rt.last_checkpoint, rt.backup and every call of a journaled runtime say closed.
    rt = cf.Runtime.open(tmp_path / "j" if journaled else None, clock=cf.FakeClock(), behaviors={"k": _Keeps})
    try:
        rt.spawn("a", behavior="k")
        assert rt.bus.request("app", "a", "go", None, timeout=WAIT).payload == 1
        ctx = _KEPT.pop("ctx")
        if not journaled:  # open: the documented refusal
            with pytest.raises(cf.AgentCheckpointNotSupportedError):
                ctx.last_checkpoint()
            with pytest.raises(cf.AgentCheckpointNotSupportedError):
                rt.memory.get_latest_session_for_agent("a")
    finally:
        rt.close()
    calls: dict[str, Callable[[], object]] = {
        "rt.last_checkpoint": lambda: rt.last_checkpoint("a"),
        "rt.memory.get_latest_session_for_agent": lambda: rt.memory.get_latest_session_for_agent("a"),
        "ctx.last_checkpoint": ctx.last_checkpoint,
        "ctx.memory.get_latest_session_for_agent": lambda: ctx.memory.get_latest_session_for_agent("a"),
    }
    for name, call in calls.items():
        with pytest.raises(cf.RuntimeClosedError, match="the runtime is closed") as raised:
            call()
        assert raised.type is cf.RuntimeClosedError, name


class _Changes:
    """Makes ``payload`` changes to its own layers and state, then tells ``sink``."""

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> int | None:
        if ctx.agent_id == "sink":
            return None
        for i in range(message.payload):
            ctx.set_private("k", i)
            ctx.set_cognitive_state(cf.CognitiveState(decision=str(i)))
        ctx.send("sink", "done", message.payload)
        return None if message.kind == "send" else message.payload


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_memory_only_runtime_holds_no_more_objects_after_more_changes(durability: str) -> None:
    # A guard (it held before too): without a journal nothing is kept per change, per
    # message or per publication (no event list, outbox or trace ids piling up). gc counts
    # containers only: a planted list per change fails it; the memory a probe traced
    # (tracemalloc) levelled off as the bounded caches filled.
    config = cf.Config(journal=cf.JournalConfig(durability=durability))  # type: ignore[arg-type]
    with cf.Runtime.open(None, config=config, clock=cf.FakeClock(), behaviors={"c": _Changes}) as rt:
        agent = rt.spawn("a", behavior="c", task_id="t")
        rt.spawn("sink", behavior="c")

        def round_() -> int:
            for i in range(100):
                agent.set_private("x", i)
            assert rt.bus.request("app", "a", "ask", 100, timeout=WAIT).payload == 100
            for i in range(40):
                rt.bus.send("app", "a", "tell", 3)
                rt.publish_task_context("t", {"i": i})
            rt.settle(WAIT)
            gc.collect()
            return len(gc.get_objects())

        counts = [round_() for _ in range(8)]
    assert max(counts[2:]) - min(counts[2:]) < 50, counts

"""Issue 7, item 3, past ``set_private``: arbitrary text and values into the rest of the public API.

Agent and task ids, session users, roles and contents, bus topics and payloads, published
task contexts, cognitive states and prompts, drawn from every code point (lone surrogates
included, which no UTF-8 journal can hold), astral characters and names longer than a stream
name may be. Each call gives a copy or a documented error (``CogfabricError``), in both
durabilities; afterwards the journal verifies and a reopened runtime holds the same
agents, layers, cognitive states and session messages as the live one.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cogfabric as cf
from cogfabric.actors import FakeClock, ScriptedProvider
from cogfabric.store import Journal

text = (
    st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=20)
    | st.text(max_size=5)
    | st.sampled_from(["", " ", "a b", "a/b", "\x00", "\ud800", "😀" * 70, "x" * 300, "bus", "runtime"])
)
values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | text | st.binary(max_size=16),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=10,
)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("spawn"), text, text),
        st.tuples(st.just("private"), text, values),
        st.tuples(st.just("task"), st.dictionaries(text, values, max_size=3)),
        st.tuples(st.just("cognitive"), values),
        st.tuples(st.just("session"), text),
        st.tuples(st.just("message"), text, text),
        st.tuples(st.just("send"), text, values),
        st.tuples(st.just("subscribe"), text),
        st.tuples(st.just("broadcast"), text, values),
        st.tuples(st.just("publish"), text, st.dictionaries(text, values, max_size=2)),
        st.tuples(st.just("prompt"), text),
        st.tuples(st.just("get_session"), text),
    ),
    max_size=12,
)


def _copy(value: Any) -> bytes:
    """``value`` as the journal keeps it, in bytes to compare (NaN equals itself so)."""
    return msgspec.msgpack.encode(msgspec.msgpack.decode(msgspec.msgpack.encode(value)))


State = tuple[dict[str, tuple[bytes, ...]], dict[str, list[bytes]]]


def _state(rt: cf.Runtime, sessions: list[str]) -> State:
    agents = {}
    for agent_id in sorted(rt.agents()):
        agent = rt.agent(agent_id)
        view = agent.context_view()
        layers = (dict(view.task_shared), dict(view.private), agent.cognitive_state())
        agents[agent_id] = tuple(msgspec.msgpack.encode(layer) for layer in layers)
    messages = {s: [msgspec.msgpack.encode(m) for m in rt.memory.get_messages(s)] for s in sessions}
    return agents, messages


def _apply(rt: cf.Runtime, agent: cf.Agent, sessions: list[str], operation: tuple[Any, ...]) -> None:
    kind, *args = operation
    if kind == "spawn":
        rt.spawn(args[0], task_id=args[1] or None)
    elif kind == "private":
        agent.set_private(args[0], args[1])
        assert _copy(agent.private(args[0])) == _copy(args[1])
    elif kind == "task":
        agent.set_task_context(args[0])
    elif kind == "cognitive":
        agent.set_cognitive_state(cf.CognitiveState(schema_version=1, context=args[0]))
    elif kind == "session":
        sessions.append(rt.memory.create_session(args[0], agent_id=agent.id))
    elif kind == "message" and sessions:
        rt.memory.add_message(sessions[-1], args[0], args[1])
    elif kind == "send":
        rt.bus.send(agent.id, agent.id, args[0], args[1])
    elif kind == "subscribe":
        rt.bus.subscribe(agent.id, args[0])
    elif kind == "broadcast":
        rt.bus.broadcast(agent.id, args[0], args[1])
    elif kind == "publish":
        rt.publish_task_context(args[0], args[1])
    elif kind == "prompt":
        rt.llm(ScriptedProvider(["ok"])).generate(args[0])
    elif kind == "get_session":
        rt.memory.get_session(args[0])


def _run(base: Path, ops: list[tuple[Any, ...]], durability: str) -> None:
    with tempfile.TemporaryDirectory(dir=base) as directory:
        path = Path(directory) / "j"
        sessions: list[str] = []
        config = {"journal": {"durability": durability}}
        with cf.Runtime.open(path, clock=FakeClock(), config=config) as rt:
            agent = rt.spawn("base", task_id="t")
            for operation in ops:
                with contextlib.suppress(cf.CogfabricError):  # documented; anything else fails
                    _apply(rt, agent, sessions, operation)
            rt.flush()
            live = _state(rt, sessions)
        with Journal.open(path, readonly=True) as journal:
            report = journal.verify(decode=True)
        assert report.ok, report
        with cf.Runtime.open(path, clock=FakeClock()) as rt:
            assert _state(rt, sessions) == live


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations, durability=st.sampled_from(["sync", "batch"]))
def test_arbitrary_text_and_values_across_the_api_give_a_copy_or_a_documented_error(
    tmp_path: Path, ops: list[tuple[Any, ...]], durability: str
) -> None:
    _run(tmp_path, ops, durability)


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations, durability=st.sampled_from(["sync", "batch"]))
def test_a_long_fuzz_across_the_api(tmp_path: Path, ops: list[tuple[Any, ...]], durability: str) -> None:
    _run(tmp_path, ops, durability)

"""One operation, every path to it (session 52, helper h13): the same input, the same outcome.

An agent's state is reached through its handle (``rt.agent(id)``), through ``ctx`` while
its behavior handles a message, and through a ``ctx`` kept past its message and called
from another thread; the runtime and the bus reach some of it too (``publish_task_context``,
``spawn``, ``recover``, ``last_checkpoint``, ``bus.send``...). Fed the same input, valid or
not, each path must raise the same exception with the same text, or take it with the
same effect: journaled alike (one record, or none for a refusal), read back alike, and
never an alias of the caller's object. In a memory-only runtime and in sync and batch
durability.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

MODES = ("memory", "sync", "batch")
PATHS = ("handle", "ctx", "kept")
CS = cf.CognitiveState


def _nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


class _Opaque:
    """Nothing msgspec can encode."""


class _Text(str):
    __slots__ = ()


class _Subclass(CS, frozen=True, kw_only=True):
    """A CognitiveState subclass with no fields of its own: stored as a CognitiveState."""


@dataclass(frozen=True)
class Outcome:
    """What one call did: its value (by ``repr``: NaN is not equal to itself), or its error."""

    value: str = ""
    error: type[BaseException] | None = None
    text: str = ""


def _outcome(job: Callable[[Any], object], target: object) -> Outcome:
    try:
        return Outcome(value=repr(job(target)))
    except Exception as exc:  # noqa: BLE001 - every error is an outcome to compare
        return Outcome(error=type(exc), text=str(exc))


class _Late:
    """A target looked up when the job first touches it: ``rt.agent(id)`` raises inside the job."""

    def __init__(self, find: Callable[[], object]) -> None:
        self._find = find

    def __getattr__(self, name: str) -> Any:
        return getattr(self._find(), name)


@dataclass
class _Box:
    jobs: dict[str, Callable[[Any], object]] = field(default_factory=dict)
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    kept: dict[str, Any] = field(default_factory=dict)


class _Runner:
    """Keeps its ctx, and runs with it the job it was given, on its own thread, within the message."""

    def __init__(self, box: _Box) -> None:
        self.box = box

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:  # noqa: ARG002
        self.box.kept[ctx.agent_id] = ctx
        job = self.box.jobs.pop(ctx.agent_id, None)
        if job is not None:
            self.box.outcomes[ctx.agent_id] = _outcome(job, ctx)
        return "done"


class Paths:
    """A runtime of one mode, and its three paths to an agent's state."""

    def __init__(self, rt: cf.Runtime, box: _Box, mode: str) -> None:
        self.rt, self.box, self.mode = rt, box, mode

    def spawn(self, agent_id: str) -> cf.Agent:
        agent = self.rt.spawn(agent_id, task_id="t", behavior="runner")
        assert self.rt.bus.request("ext", agent_id, "hello", timeout=10).payload == "done"  # its ctx kept
        return agent

    def run(self, path: str, agent_id: str, job: Callable[[Any], object]) -> Outcome:
        if path == "handle":
            return _outcome(job, self.rt.agent(agent_id))
        if path == "kept":  # from this thread, while the agent handles no message
            return _outcome(job, self.box.kept[agent_id])
        self.box.jobs[agent_id] = job
        assert self.rt.bus.request("ext", agent_id, "run", timeout=10).payload == "done"
        return self.box.outcomes.pop(agent_id)

    def records(self, agent_id: str) -> int:
        """How many records the agent's stream holds, once everything handed over is durable."""
        self.rt.flush()
        journal = self.rt._journal
        return 0 if journal is None else sum(1 for _ in journal.read(stream=f"agent/{agent_id}"))

    def each(self, job: Callable[[Any], object]) -> dict[str, tuple[Outcome, int]]:
        """``job`` through each path (on agent ``a-<path>``): its outcome, and the records it added."""
        results = {}
        for path in PATHS:
            agent_id = f"a-{path}"
            before = self.records(agent_id)
            outcome = self.run(path, agent_id, job)
            results[path] = (outcome, self.records(agent_id) - before)
        return results


def _open(mode: str, tmp_path: Path, box: _Box) -> cf.Runtime:
    behaviors = {"runner": lambda: _Runner(box)}
    if mode == "memory":
        return cf.Runtime.open(None, behaviors=behaviors)
    return cf.Runtime.open(tmp_path / "j", behaviors=behaviors, config={"journal": {"durability": mode}})


@pytest.fixture(params=MODES)
def paths(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Paths]:
    box = _Box()
    with _open(request.param, tmp_path, box) as rt:
        each = Paths(rt, box, request.param)
        for path in PATHS:
            each.spawn(f"a-{path}")
        yield each


def _alike(results: dict[str, tuple[Outcome, int]], what: str) -> Outcome:
    """The one outcome every path had (same error class and text, or same value), and its records."""
    first = results["handle"]
    for path, result in results.items():
        assert result == first, f"{what}: {path} {result} but the handle {first}"
    return first[0]


def _journaled(paths: Paths, results: dict[str, tuple[Outcome, int]], changes: bool) -> None:
    expected = 1 if changes and paths.mode != "memory" else 0
    assert {path: added for path, (_, added) in results.items()} == dict.fromkeys(PATHS, expected)


KEYS_REFUSED: dict[str, object] = {"int": 1, "None": None, "bytes": b"k", "surrogate": "k\ud800"}
KEYS_TAKEN: dict[str, object] = {
    "empty": "",
    "NUL": "a\x00b",
    "long": "k" * 10_000,
    "str subclass": _Text("k"),
}


@pytest.mark.parametrize("key", list(KEYS_REFUSED.values()), ids=list(KEYS_REFUSED))
def test_a_private_key_no_private_value_can_have_is_refused_alike_on_every_path(
    paths: Paths, key: object
) -> None:
    results = paths.each(lambda t: t.set_private(key, 1))
    outcome = _alike(results, f"set_private({key!r})")
    assert outcome.error is cf.InvalidTextError
    assert issubclass(outcome.error, TypeError)
    assert "private key" in outcome.text
    _journaled(paths, results, changes=False)
    read = _alike(paths.each(lambda t: t.private(key)), f"private({key!r})")
    assert (read.error, read.text) == (outcome.error, outcome.text)  # as set_private refuses it


@pytest.mark.parametrize("key", list(KEYS_TAKEN.values()), ids=list(KEYS_TAKEN))
def test_a_private_key_of_any_text_is_taken_alike_on_every_path(paths: Paths, key: object) -> None:
    results = paths.each(lambda t: t.set_private(key, [1]))
    assert _alike(results, f"set_private({key!r})") == Outcome(value="None")
    _journaled(paths, results, changes=True)
    assert _alike(paths.each(lambda t: t.private(key)), "private") == Outcome(value="[1]")
    view = _alike(paths.each(lambda t: dict(t.context_view().private)), "context_view")
    assert view == Outcome(value=repr({str(key): [1]}))


VALUES_REFUSED: dict[str, object] = {
    "opaque": _Opaque(),
    "nested too deep": _nested(600),
    "int past 64 bits": 1 << 70,
    "str key with surrogate": {"k\ud800": 1},
}
VALUES_TAKEN: dict[str, tuple[object, object]] = {  # the value given, the value read back
    "NaN": (math.nan, math.nan),
    "huge str": ("x" * (1 << 20), "x" * (1 << 20)),
    "tuple": ((1, (2,)), [1, [2]]),
    "int keys": ({1: "a"}, {1: "a"}),
    "bytes": (b"ab", b"ab"),
    "nested 500": (_nested(500), _nested(500)),
}


@pytest.mark.parametrize("value", list(VALUES_REFUSED.values()), ids=list(VALUES_REFUSED))
def test_a_value_msgspec_cannot_encode_is_refused_alike_on_every_path(paths: Paths, value: object) -> None:
    results = paths.each(lambda t: t.set_private("v", value))
    outcome = _alike(results, "set_private")
    assert outcome.error is cf.UnencodableValueError
    assert issubclass(outcome.error, TypeError)
    _journaled(paths, results, changes=False)
    assert _alike(paths.each(lambda t: t.private("v")), "private") == Outcome(value="None")


@pytest.mark.parametrize("given", list(VALUES_TAKEN.values()), ids=list(VALUES_TAKEN))
def test_an_encodable_value_is_taken_and_read_back_alike_on_every_path(
    paths: Paths, given: tuple[object, object]
) -> None:
    value, back = given
    results = paths.each(lambda t: t.set_private("v", value))
    assert _alike(results, "set_private") == Outcome(value="None")
    _journaled(paths, results, changes=True)
    assert _alike(paths.each(lambda t: t.private("v")), "private") == Outcome(value=repr(back))


TASK_CONTEXTS_REFUSED: dict[str, object] = {
    "list": [1],
    "str": "ab",
    "pairs": [("a", 1)],
    "int keys": {1: 2},
    "opaque value": {"a": _Opaque()},
    "nested too deep": {"a": _nested(600)},
}


@pytest.mark.parametrize("mapping", list(TASK_CONTEXTS_REFUSED.values()), ids=list(TASK_CONTEXTS_REFUSED))
def test_a_task_context_that_is_no_string_keyed_mapping_is_refused_alike_everywhere(
    paths: Paths, mapping: object
) -> None:
    results = paths.each(lambda t: t.set_task_context(mapping))
    outcome = _alike(results, "set_task_context")
    assert outcome.error is cf.UnencodableValueError
    _journaled(paths, results, changes=False)
    # the runtime's two other ways in: the same error, the same words
    calls: list[tuple[str, Callable[[], object]]] = [
        ("publish_task_context", lambda: paths.rt.publish_task_context("t", mapping)),  # type: ignore[arg-type]
        ("spawn", lambda: paths.rt.spawn("other", task_context=mapping)),  # type: ignore[arg-type]
    ]
    for name, call in calls:
        with pytest.raises(cf.UnencodableValueError) as raised:
            call()
        assert str(raised.value) == outcome.text, name
    assert "other" not in paths.rt.agents()
    assert _alike(paths.each(lambda t: t.task_context()), "task_context") == Outcome(value="{}")


@pytest.mark.parametrize(
    ("mapping", "back"),
    [(None, {}), ({"a": math.nan}, {"a": math.nan}), ({"": 1, "a\x00": 2}, {"": 1, "a\x00": 2})],
    ids=["None", "NaN", "empty and NUL keys"],
)
def test_a_task_context_is_taken_alike_everywhere(paths: Paths, mapping: object, back: object) -> None:
    results = paths.each(lambda t: t.set_task_context(mapping))
    assert _alike(results, "set_task_context") == Outcome(value="None")
    _journaled(paths, results, changes=True)
    assert _alike(paths.each(lambda t: t.task_context()), "task_context") == Outcome(value=repr(back))
    assert paths.rt.publish_task_context("t", mapping) == [f"a-{path}" for path in PATHS]  # type: ignore[arg-type]
    assert _alike(paths.each(lambda t: t.task_context()), "published") == Outcome(value=repr(back))


STATES_REFUSED: dict[str, tuple[object, type[BaseException]]] = {
    "future version": (CS(schema_version=99), cf.CognitiveStateSchemaVersionError),
    "str version": (CS(schema_version="1"), cf.CognitiveStateSchemaVersionError),  # type: ignore[arg-type]
    "bool version": (CS(schema_version=True), cf.CognitiveStateSchemaVersionError),
    "dict": ({"schema_version": 1}, TypeError),
    "None": (None, TypeError),
    "opaque field": (CS(decision=_Opaque()), cf.UnencodableValueError),
    "nested too deep": (CS(context=_nested(600)), cf.UnencodableValueError),
}


@pytest.mark.parametrize("given", list(STATES_REFUSED.values()), ids=list(STATES_REFUSED))
def test_a_cognitive_state_refused_is_refused_alike_everywhere(
    paths: Paths, given: tuple[object, type[BaseException]]
) -> None:
    state, error = given
    results = paths.each(lambda t: t.set_cognitive_state(state))
    outcome = _alike(results, "set_cognitive_state")
    assert outcome.error is not None
    assert issubclass(outcome.error, error)
    _journaled(paths, results, changes=False)
    with pytest.raises(error) as raised:
        paths.rt.recover("a-handle", state)  # type: ignore[arg-type]
    assert (type(raised.value), str(raised.value)) == (outcome.error, outcome.text)
    read = _alike(paths.each(lambda t: t.cognitive_state()), "cognitive_state")
    assert read == Outcome(value=repr(CS()))  # untouched: version 0, as spawned


@pytest.mark.parametrize(
    ("state", "back"),
    [
        (CS(schema_version=0, decision="d"), CS(schema_version=1, decision="d")),
        (CS(schema_version=-1), CS(schema_version=-1)),
        (_Subclass(decision="s"), CS(schema_version=1, decision="s")),
    ],
    ids=["version 0", "negative version", "subclass"],
)
def test_a_cognitive_state_taken_reads_back_alike_everywhere(paths: Paths, state: CS, back: CS) -> None:
    results = paths.each(lambda t: t.set_cognitive_state(state))
    assert _alike(results, "set_cognitive_state") == Outcome(value="None")
    _journaled(paths, results, changes=True)
    read = _alike(paths.each(lambda t: t.cognitive_state()), "cognitive_state")
    assert read == Outcome(value=repr(back))
    assert type(paths.rt.agent("a-ctx").cognitive_state()) is CS
    paths.rt.recover("a-handle", state)
    assert paths.rt.agent("a-handle").cognitive_state() == back


def _no_alias_through(paths: Paths, path: str) -> None:
    agent_id = f"a-{path}"

    def run(job: Callable[[Any], object]) -> object:
        outcome = paths.run(path, agent_id, job)
        assert outcome.error is None, outcome
        return outcome.value

    given: list[object] = [1]
    run(lambda t: t.set_private("k", given))
    given.append(2)
    run(lambda t: t.private("k").append(3))
    run(lambda t: t.context_view().private["k"].append(4))
    assert run(lambda t: t.private("k")) == "[1]", path

    mapping: dict[str, Any] = {"a": [1]}
    run(lambda t: t.set_task_context(mapping))
    mapping["a"].append(2)
    run(lambda t: t.task_context()["a"].append(3))
    run(lambda t: t.context_view().task_shared["a"].append(4))
    assert run(lambda t: t.task_context()) == "{'a': [1]}", path

    decision: list[object] = [1]
    run(lambda t: t.set_cognitive_state(CS(decision=decision)))
    decision.append(2)
    run(lambda t: t.cognitive_state().decision.append(3))
    run(lambda t: t.checkpoint_cognitive().decision.append(4))
    assert run(lambda t: t.cognitive_state().decision) == "[1]", path
    if paths.mode == "memory":
        return
    last = paths.rt.last_checkpoint(agent_id)
    assert last is not None
    last.decision.append(5)
    assert paths.rt.last_checkpoint(agent_id) == CS(schema_version=1, decision=[1])
    if path != "handle":
        run(lambda t: t.last_checkpoint().decision.append(6))
        assert run(lambda t: t.last_checkpoint().decision) == "[1]", path


@pytest.mark.parametrize("path", PATHS)
def test_no_path_hands_out_or_keeps_an_alias(paths: Paths, path: str) -> None:
    _no_alias_through(paths, path)


_STATE_OPS: dict[str, tuple[Callable[[Any], object], bool]] = {  # the call, and whether it changes the agent
    "set_private": (lambda t: t.set_private("k", 1), True),
    "private": (lambda t: t.private("k"), False),
    "set_task_context": (lambda t: t.set_task_context({"a": 1}), True),
    "task_context": (lambda t: t.task_context(), False),
    "context_view": (lambda t: t.context_view(), False),
    "set_cognitive_state": (lambda t: t.set_cognitive_state(CS(decision="x")), True),
    "cognitive_state": (lambda t: t.cognitive_state(), False),
    "checkpoint_cognitive": (lambda t: t.checkpoint_cognitive(), True),
}


@pytest.mark.parametrize("lifecycle", ["suspend", "retire"])
def test_a_suspended_or_retired_agent_takes_every_state_call_alike_on_every_path(
    paths: Paths, lifecycle: str
) -> None:
    agent = paths.rt.agent("a-handle")
    kept = paths.box.kept["a-handle"]
    getattr(paths.rt, lifecycle)("a-handle")
    for name, (job, changes) in _STATE_OPS.items():
        before = paths.records("a-handle")
        results = {"handle": _outcome(job, agent), "kept": _outcome(job, kept)}
        assert results["handle"].error is None, (name, results)
        assert results["kept"] == results["handle"], name
        added = paths.records("a-handle") - before
        assert added == (2 if changes and paths.mode != "memory" else 0), name


def test_a_killed_agent_is_refused_alike_by_its_handle_a_kept_ctx_and_the_runtime(paths: Paths) -> None:
    agent = paths.rt.agent("a-handle")
    kept = paths.box.kept["a-handle"]
    paths.rt.kill("a-handle")
    for name, (job, _) in _STATE_OPS.items():
        results = {
            "handle": _outcome(job, agent),
            "kept": _outcome(job, kept),
            "runtime": _outcome(job, _Late(lambda: paths.rt.agent("a-handle"))),
        }
        expected = Outcome(error=cf.AgentNotFoundError, text="agentfabric: agent not found: 'a-handle'")
        assert results == dict.fromkeys(results, expected), name
    # a new agent of that id is another one: the old handle and ctx do not reach it
    paths.rt.spawn("a-handle")
    for target in (agent, kept):
        assert _outcome(lambda t: t.private("k"), target).error is cf.AgentNotFoundError


def test_the_runtime_and_a_ctx_read_the_same_last_checkpoint(paths: Paths) -> None:
    def both() -> tuple[Outcome, ...]:
        return (
            _outcome(lambda _: paths.rt.last_checkpoint("a-ctx"), None),
            paths.run("ctx", "a-ctx", lambda t: t.last_checkpoint()),
            paths.run("kept", "a-ctx", lambda t: t.last_checkpoint()),
        )

    if paths.mode == "memory":
        refused = Outcome(error=cf.AgentCheckpointNotSupportedError, text=both()[0].text)
        assert both() == (refused, refused, refused)
        return
    assert both() == (Outcome(value="None"),) * 3
    for path in PATHS:
        state = CS(decision=f"by {path}")
        paths.run(path, "a-ctx", _setter(state))
        paths.run(path, "a-ctx", lambda t: t.checkpoint_cognitive())
        assert both() == (Outcome(value=repr(CS(schema_version=1, decision=state.decision))),) * 3, path


def _setter(state: CS) -> Callable[[Any], object]:
    return lambda t: t.set_cognitive_state(state)


_MESSAGE_INPUTS: dict[str, tuple[object, object, object]] = {  # to, topic, payload
    "opaque payload": ("a-handle", "t", _Opaque()),
    "payload nested too deep": ("a-handle", "t", _nested(600)),
    "NaN payload": ("a-handle", "t", math.nan),
    "unknown recipient": ("nobody", "t", 1),
    "empty recipient": ("", "t", 1),
    "recipient no str": (1, "t", 1),
    "recipient with surrogate": ("a\ud800", "t", 1),
    "empty topic": ("a-handle", "", 1),
    "topic no str": ("a-handle", 2, 1),
}


@pytest.mark.parametrize("given", list(_MESSAGE_INPUTS.values()), ids=list(_MESSAGE_INPUTS))
def test_the_bus_and_a_ctx_send_and_request_alike(paths: Paths, given: tuple[object, object, object]) -> None:
    to, topic, payload = given
    bus = paths.rt.bus

    def sent(outcome: Outcome) -> Outcome:  # bus.send returns the message, ctx.send None
        return Outcome() if outcome.error is None else outcome

    for name, by_bus, by_ctx in (
        ("send", lambda _: bus.send("a-ctx", to, topic, payload), lambda t: t.send(to, topic, payload)),  # type: ignore[arg-type]
        (
            "request",
            lambda _: bus.request("a-ctx", to, topic, payload, timeout=10).payload,  # type: ignore[arg-type]
            lambda t: t.request(to, topic, payload, timeout=10).payload,
        ),
    ):
        letters = len(bus.dead_letters())
        outcomes = {
            "bus": sent(_outcome(by_bus, None)),
            "ctx": sent(paths.run("ctx", "a-ctx", by_ctx)),
            "kept": sent(paths.run("kept", "a-ctx", by_ctx)),
        }
        assert outcomes["ctx"] == outcomes["bus"], name
        assert outcomes["kept"] == outcomes["bus"], name
        paths.rt.flush()
        refused = outcomes["bus"].error is cf.AgentNotRegisteredError
        assert len(bus.dead_letters()) - letters == (3 if refused else 0), name


def test_a_ctx_refuses_to_request_its_own_agent_even_kept_while_the_bus_asks_it(paths: Paths) -> None:
    # as ctx.request's docstring says: a kept ctx, off a message, refuses it too
    for path in ("ctx", "kept"):
        outcome = paths.run(path, "a-ctx", lambda t: t.request("a-ctx", "t", timeout=10))
        assert outcome.error is cf.IpcInvalidMessageError, path
        assert "cannot request itself" in outcome.text
    assert paths.rt.bus.request("a-ctx", "a-ctx", "t", timeout=10).payload == "done"

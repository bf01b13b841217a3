# mypy: disable-error-code="arg-type"
"""Arguments that would journal a record replay cannot decode are refused at the call.

msgspec checks a Struct's field types only when it decodes one, so an int where an event
declares a str used to be journaled, and the journal then refused to reopen. In batch
durability nothing even told the caller. Each case runs in batch durability, then the
journal must reopen with the same agents.
"""

from __future__ import annotations

import concurrent.futures
import threading
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from cogfabric import (
    CognitiveState,
    CognitiveStateSchemaVersionError,
    InvalidTextError,
    Message,
    Runtime,
    UnencodableValueError,
)
from cogfabric.actors import (
    Config,
    FakeClock,
    InvalidSpawnSpecError,
    JournalConfig,
    LLMConfig,
    PromptTooLongError,
    ProviderError,
    ScriptedProvider,
)
from cogfabric.events import MAX_VALUE_DEPTH, IpcDeadLettered, ToolCall, ToolCallFunction
from cogfabric.store import Journal

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

BATCH = Config(journal=JournalConfig(durability="batch"))


def _deep(levels: int = MAX_VALUE_DEPTH + 1) -> list[Any]:
    """A list nested ``levels`` deep."""
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


BAD_CALLS: dict[str, tuple[Callable[[Runtime], Any], type[Exception]]] = {
    "spawn task_id not a string": (lambda rt: rt.spawn("b", task_id=5), InvalidSpawnSpecError),
    "spawn parent not a string": (lambda rt: rt.spawn("b", parent=5), InvalidSpawnSpecError),
    "spawn id not a string": (lambda rt: rt.spawn(5), InvalidSpawnSpecError),
    "spawn id with NUL": (lambda rt: rt.spawn("b\0c"), InvalidSpawnSpecError),
    "spawn id past the stream limit": (lambda rt: rt.spawn("x" * 250), InvalidSpawnSpecError),
    "spawn id not Unicode": (lambda rt: rt.spawn("b\ud800"), InvalidSpawnSpecError),
    "spawn priority not a number": (lambda rt: rt.spawn("b", priority="high"), InvalidSpawnSpecError),
    "spawn capability not Unicode": (lambda rt: rt.spawn("b", capabilities=["\ud800"]), TypeError),
    "private key not Unicode": (lambda rt: rt.agent("a").set_private("\ud800", 1), TypeError),
    "publish task_id not a string": (lambda rt: rt.publish_task_context(5, {}), TypeError),
    "subscribe topic not a string": (lambda rt: rt.bus.subscribe("a", 7), TypeError),
    "send sender not a string": (lambda rt: rt.bus.send(5, "a", "t"), TypeError),
    "send topic not a string": (lambda rt: rt.bus.send("x", "a", 5), TypeError),
    "broadcast sender not a string": (lambda rt: rt.bus.broadcast(5, "t"), TypeError),
    "session user not a string": (lambda rt: rt.memory.create_session(5), TypeError),
    "session agent not a string": (lambda rt: rt.memory.create_session("u", agent_id=5), TypeError),
    "message content not a string": (
        lambda rt: rt.memory.add_message(rt.memory.create_session("u"), "user", 123),
        TypeError,
    ),
    "message role not a string": (
        lambda rt: rt.memory.add_message(rt.memory.create_session("u"), 5, "x"),
        TypeError,
    ),
    "structured message with a wrong field": (
        lambda rt: rt.memory.add_structured_message(
            rt.memory.create_session("u"), Message(role="user", content="x", artifact_refs=(1,))
        ),
        TypeError,
    ),
    "llm agent id past the stream limit": (
        lambda rt: rt.llm(ScriptedProvider(["ok"]), agent_id="x" * 250),
        ValueError,
    ),
    "send recipient not a string": (lambda rt: rt.bus.send("x", 5, "t"), TypeError),
    "spawn task_id not Unicode": (lambda rt: rt.spawn("b", task_id="t\ud800"), InvalidSpawnSpecError),
    "cognitive state version below what a journal stores": (
        lambda rt: rt.agent("a").set_cognitive_state(CognitiveState(schema_version=-(2**64), decision="go")),
        CognitiveStateSchemaVersionError,
    ),
    "recovered state version below what a journal stores": (
        lambda rt: rt.recover("a", CognitiveState(schema_version=-(2**63) - 1)),
        CognitiveStateSchemaVersionError,
    ),
    "provider output not Unicode": (
        lambda rt: rt.llm(ScriptedProvider(["\ud800"]), agent_id="a").generate("hello"),
        ProviderError,
    ),
    # Nested deeper than MAX_VALUE_DEPTH: the writer, a level deeper, or a reader on a
    # deeper stack, could fail where the caller's encoding passed (see test_deep_values).
    "private value nested too deep": (
        lambda rt: rt.agent("a").set_private("k", _deep()),
        UnencodableValueError,
    ),
    "task context nested too deep": (
        lambda rt: rt.agent("a").set_task_context({"k": _deep(MAX_VALUE_DEPTH)}),
        UnencodableValueError,
    ),
    "published context nested too deep": (
        lambda rt: rt.publish_task_context("t", {"k": _deep(MAX_VALUE_DEPTH)}),
        UnencodableValueError,
    ),
    "spawn task context nested too deep": (
        lambda rt: rt.spawn("b", task_context={"k": _deep(MAX_VALUE_DEPTH)}),
        UnencodableValueError,
    ),
    "spawn experience prior nested too deep": (
        lambda rt: rt.spawn("b", experience_prior=_deep()),
        UnencodableValueError,
    ),
    "cognitive state nested too deep": (
        lambda rt: rt.agent("a").set_cognitive_state(CognitiveState(working_memory=_deep())),
        UnencodableValueError,
    ),
    "recovered state nested too deep": (
        lambda rt: rt.recover("a", CognitiveState(checkpoint=_deep())),
        UnencodableValueError,
    ),
    "sent payload nested too deep": (lambda rt: rt.bus.send("x", "a", "t", _deep()), UnencodableValueError),
    "broadcast payload nested too deep": (
        lambda rt: rt.bus.broadcast("x", "t", _deep()),
        UnencodableValueError,
    ),
}


@pytest.mark.parametrize("case", BAD_CALLS)
def test_a_wrongly_typed_argument_is_refused_and_the_journal_still_reopens(tmp_path: Path, case: str) -> None:
    call, error = BAD_CALLS[case]
    with Runtime.open(tmp_path / "j", config=BATCH, clock=FakeClock()) as rt:
        rt.spawn("a", task_id="t")
        with pytest.raises(error):
            call(rt)
        rt.agent("a").set_private("after", 1)
        rt.flush()
        live = (rt.agents(), rt.agent("a").context_view())

    with Runtime.open(tmp_path / "j", config=BATCH, clock=FakeClock()) as rt:
        assert rt.agents() == live[0]
        reopened = rt.agent("a").context_view()
        assert dict(reopened.private) == dict(live[1].private) == {"after": 1}


def test_a_session_id_stays_within_the_stream_limit_for_any_user_id(tmp_path: Path) -> None:
    # The original takes user_id[:100]; 100 CJK characters are 300 UTF-8 bytes.
    with Runtime.open(tmp_path / "j", config=BATCH, clock=FakeClock()) as rt:
        wide = rt.memory.create_session("漢" * 100)
        nul = rt.memory.create_session("a\0b")
        rt.memory.add_message(wide, "user", "hello")
        rt.flush()

    assert wide.startswith("session_漢")
    assert len(("session/" + wide).encode()) <= 255
    assert nul.startswith("session_ab_")
    with Runtime.open(tmp_path / "j", config=BATCH, clock=FakeClock()) as rt:
        assert [m.content for m in rt.memory.get_messages(wide)][-1] == "hello"


def test_a_cognitive_state_with_a_wrong_version_type_is_refused(tmp_path: Path) -> None:
    with Runtime.open(tmp_path / "j", config=BATCH, clock=FakeClock()) as rt:
        agent = rt.spawn("a")
        with pytest.raises(TypeError):
            agent.set_cognitive_state(CognitiveState(schema_version="1"))


def test_text_that_is_not_a_str_or_not_utf8_is_refused_with_a_typed_error(tmp_path: Path) -> None:
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        agent = rt.spawn("a")
        session = rt.memory.create_session("u")
        calls: list[Callable[[], object]] = [
            lambda: agent.set_private(5, 1),
            lambda: agent.set_private("\ud800", 1),
            lambda: rt.bus.send("a", "a", 7),
            lambda: rt.memory.create_session(b"u"),
            lambda: rt.memory.add_structured_message(session, Message(role=5, content="x")),
            lambda: rt.memory.add_structured_message(session, Message(role="user", content="\ud800")),
        ]
        for call in calls:
            with pytest.raises(InvalidTextError):
                call()
        assert issubclass(InvalidTextError, TypeError)
        assert agent.context_view().private == {}


class Text(str):
    """A str subclass (as numpy.str_ is): msgspec encodes none, so the journal would refuse it."""

    __slots__ = ()

    def __len__(self) -> int:  # lies, as a prompt gate must not believe
        return 1


class Echo:
    """Answers with the payload; a message on topic 'later' it answers later (by reply)."""

    deferred: ClassVar[list[str]] = []
    arrived: ClassVar[threading.Event] = threading.Event()

    def on_message(self, ctx: Any, message: Any) -> Any:  # noqa: ARG002
        if message.topic == "boom":
            raise RuntimeError(message.topic)
        if message.topic == "later":
            Echo.deferred.append(message.correlation_id)
            Echo.arrived.set()
            return None
        return message.payload


def _state(rt: Runtime, session: str) -> tuple[object, ...]:
    """What the str-subclass test compares live and after a reopen."""
    return (
        rt.agents(),
        rt.agent("boss").context_view(),
        rt.agent("w").task_context(),
        rt.children("boss"),
        rt.bus.subscribers("news"),
        rt.memory.get_messages(session),
        rt.memory.sessions(),
    )


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_text_of_a_str_subclass_is_journaled_as_its_text_and_replays_the_same(
    tmp_path: Path, durability: str
) -> None:
    # A str subclass passed the checks; in batch durability the writer then refused its
    # events (the change lived, replay lost it), in sync one such value failed the other
    # callers' changes committed with it, and a subclass's __len__ passed the prompt gate.
    config = Config(journal=JournalConfig(durability=durability), llm=LLMConfig(max_prompt_length=200))
    path = tmp_path / "j"
    with Runtime.open(path, config=config, clock=FakeClock(), behaviors={Text("echo"): Echo}) as rt:
        boss = rt.spawn(Text("boss"), task_id=Text("t"), capabilities=[Text("plan")], behavior=Text("echo"))
        rt.spawn(Text("w"), task_id=Text("t"), parent=Text("boss"), behavior=Echo())
        boss.set_private(Text("k"), {Text("nested"): [Text("v")]})  # copied in as plain text
        rt.publish_task_context(Text("t"), {"goal": Text("g")})
        rt.bus.subscribe(Text("w"), Text("news"))
        assert rt.bus.request(Text("boss"), Text("w"), Text("q"), Text("p"), timeout=10).payload == "p"
        rt.bus.send(Text("boss"), Text("w"), Text("n"))
        rt.bus.handoff("boss", "w", Text("task-9"), timeout=10)
        session = rt.memory.create_session(Text("user"), agent_id=Text("boss"))
        rt.memory.add_message(Text(session), Text("user"), Text("hello"))
        rt.memory.add_structured_message(Text(session), Message(role=Text("assistant"), content=Text("hi")))
        call = ToolCall(
            id=Text("call-1"), function=ToolCallFunction(name=Text("search"), arguments=Text("{}"))
        )
        rt.memory.add_structured_message(session, Message(role="assistant", content="c", tool_calls=[call]))
        rt.memory.get_messages(Text(session))
        rt.memory.delete_session(Text(rt.memory.create_session("gone")))
        Echo.deferred, Echo.arrived = [], threading.Event()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            later = pool.submit(rt.bus.request, "boss", "w", "later", None, 10)
            assert Echo.arrived.wait(10)
            rt.bus.reply(Text(Echo.deferred[0]), "answered later")
            assert later.result(10).payload == "answered later"
        llm = rt.llm(ScriptedProvider(lambda _: Text("an answer")), agent_id=Text("boss"))
        with pytest.raises(PromptTooLongError):
            llm.generate(Text("x" * 201))  # counted by its code points, not its __len__
        assert llm.generate(Text("short")) == "an answer"
        assert type(llm.generate(Text("short"))) is str
        assert llm.turn(Text(session), Text("and now?")) == "an answer"
        rt.bus.subscribe("w", "boom")
        assert rt.bus.broadcast(Text("boss"), Text("boom")) == 1  # the behavior raises: a dead letter
        rt.flush()
        live = _state(rt, session)

    with Journal.open(path, readonly=True) as journal:
        assert journal.verify(decode=True).ok
        letters = [r.event for r in journal.read(stream="bus") if isinstance(r.event, IpcDeadLettered)]
        assert [(d.reason, d.topic) for d in letters] == [("handler error", "boom")]
    with Runtime.open(path, config=config, clock=FakeClock(), behaviors={"echo": Echo}) as rt:
        assert _state(rt, session) == live
        assert rt.bus.request("w", "boss", "q", 1, timeout=10).payload == 1  # its behavior came back


class Folded(str):
    """A str subclass with its own equality: the bus must look topics up by their text."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and self.casefold() == other.casefold()

    def __hash__(self) -> int:
        return hash(self.casefold())


def test_a_broadcast_finds_its_subscribers_by_the_topics_text(tmp_path: Path) -> None:
    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"echo": Echo}) as rt:
        rt.spawn("w", behavior="echo")
        rt.bus.subscribe("w", "News")

        assert rt.bus.subscribers(Folded("News")) == ["w"]
        assert rt.bus.broadcast("boss", Folded("News"), "x") == 1

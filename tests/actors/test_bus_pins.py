"""The IPC bus's promises (``actors/_bus.py``) that a second mutation test found no test held.

Found by hand-made mutants of the bus (a boundary moved, a check or a copy removed, an
argument dropped), each run against the actor tests: each test here names what a
docstring, README.md or the spec promises of ``IpcBus``, and fails under the one mutant
named in its comment, which every other test let through.
"""

from __future__ import annotations

import concurrent.futures
import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import (
    ActorTimeoutError,
    AgentContext,
    FakeClock,
    IpcHandlerError,
    IpcTimeoutError,
    Runtime,
)
from cogfabric.events import InvalidTextError, IpcMessage

if TYPE_CHECKING:
    from collections.abc import Callable

    from cogfabric.actors import Behavior

WAIT = 10.0


class _KeepsAndFails:
    """Keeps each message it handles, then raises on it."""

    def __init__(self, kept: list[IpcMessage]) -> None:
        self.kept = kept

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ARG002
        self.kept.append(message)
        msg = "this behavior always fails"
        raise ValueError(msg)


class _HeldUntil:
    """Answers each request once the gate opens."""

    def __init__(self, entered: threading.Event, gate: threading.Event) -> None:
        self.entered, self.gate = entered, gate

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ARG002
        self.entered.set()
        assert self.gate.wait(WAIT)
        return "late"


class _Defers:
    """Returns None for each request (answered later, from elsewhere) and notes its id."""

    def __init__(self, ids: list[str], deferred: threading.Event) -> None:
        self.ids, self.deferred = ids, deferred

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ARG002
        self.ids.append(message.correlation_id)
        self.deferred.set()


class _AnswersFor:
    """Answers, with ``ctx.reply``, the request whose correlation id its message carries."""

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:
        ctx.reply(message.payload, "answered elsewhere")


def test_a_dead_letter_keeps_a_payload_of_its_own_from_the_message_a_behavior_kept() -> None:
    # dead_letters: "Each holds its message's payload (a copy of its own)"; a behavior that
    # kept the message it failed on and changes it later changes no letter
    # (mutant: _letter stores message.payload itself, not _copied(message.payload))
    kept: list[IpcMessage] = []
    behaviors: dict[str, Callable[[], Behavior]] = {"keeps": lambda: _KeepsAndFails(kept)}
    with Runtime.open(clock=FakeClock(), behaviors=behaviors) as rt:
        rt.spawn("a", behavior="keeps")
        with pytest.raises(IpcHandlerError):
            rt.bus.request("user", "a", "q", {"plan": [1, 2]}, timeout=WAIT)
        (message,) = kept
        message.payload["plan"].append(3)

        (letter,) = rt.bus.dead_letters()
        assert letter.payload == {"plan": [1, 2]}


@pytest.mark.parametrize("timeout", [0, -1.0])
def test_a_request_timeout_that_is_not_positive_waits_the_default_not_at_all(timeout: float) -> None:
    # request: "A timeout <= 0 means 30 s (the original's default)": such a request still
    # waits for a reply its recipient holds back (mutant: bounded_wait(timeout, 0.01))
    entered, gate = threading.Event(), threading.Event()
    behaviors: dict[str, Callable[[], Behavior]] = {"held": lambda: _HeldUntil(entered, gate)}
    with Runtime.open(clock=FakeClock(), behaviors=behaviors) as rt:
        rt.spawn("a", behavior="held")
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            requester = pool.submit(rt.bus.request, "user", "a", "q", timeout=timeout)
            try:
                assert entered.wait(WAIT)
                # a wait of 0.01 s, not 30 s, would be over by now
                assert not concurrent.futures.wait([requester], timeout=0.3).done
            finally:
                gate.set()
            reply = requester.result(WAIT)
        assert isinstance(reply, IpcMessage)
        assert reply.payload == "late"


def test_a_deferred_request_answered_by_another_agents_behavior_is_a_reply_from_that_agent() -> None:
    # ctx.reply: "Answer a request later, from this agent": the reply's sender is the agent
    # that answered, not the request's recipient (mutant: bus.reply ignores frm)
    ids: list[str] = []
    deferred = threading.Event()
    behaviors: dict[str, Callable[[], Behavior]] = {
        "defers": lambda: _Defers(ids, deferred),
        "answers": _AnswersFor,
    }
    with Runtime.open(clock=FakeClock(), behaviors=behaviors) as rt:
        rt.spawn("a", behavior="defers")
        rt.spawn("b", behavior="answers")
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            requester = pool.submit(rt.bus.request, "user", "a", "q", timeout=WAIT)
            assert deferred.wait(WAIT)
            rt.bus.send("user", "b", "answer", ids[0])
            reply = requester.result(WAIT)

        assert isinstance(reply, IpcMessage)
        assert (reply.sender, reply.recipient, reply.payload) == ("b", "user", "answered elsewhere")


@pytest.mark.parametrize(("agent_id", "topic"), [(0, "news"), (["a"], "news"), ("a", b"news"), ("", None)])
def test_unsubscribe_refuses_an_id_or_topic_that_is_not_text(agent_id: Any, topic: Any) -> None:
    # unsubscribe never fails for what it is given, but its Raises: "InvalidTextError:
    # agent_id or topic is not a str (also a TypeError)"
    # (mutant: its require_str checks removed: an id of 0, or "" with a topic of None, then passes)
    with Runtime.open(clock=FakeClock()) as rt:
        rt.spawn("a")
        rt.bus.subscribe("a", "news")
        with pytest.raises(InvalidTextError):
            rt.bus.unsubscribe(agent_id, topic)
        assert rt.bus.subscribers("news") == ["a"]


def test_the_subscribers_list_is_the_callers_own() -> None:
    # subscribers: "The live agents subscribed to topic, in subscription order (broadcast's
    # order)": a caller that changes the list it got changes no subscription
    # (mutant: subscribers hands back the topic index's own list)
    with Runtime.open(clock=FakeClock()) as rt:
        rt.spawn("a")
        rt.spawn("b")
        rt.bus.subscribe("a", "news")
        rt.bus.subscribe("b", "news")
        listed = rt.bus.subscribers("news")
        listed.reverse()
        listed.append("ghost")

        assert rt.bus.subscribers("news") == ["a", "b"]
        rt.bus.unsubscribe("a", "news")
        assert rt.bus.subscribers("news") == ["b"]


def test_the_runtimes_timeouts_are_the_builtin_timeout_error_that_futures_raise_too() -> None:
    # README: ActorTimeoutError and IpcTimeoutError are also the built-in TimeoutError, which
    # since Python 3.11 is concurrent.futures.TimeoutError: a caller that waits on a future
    # running a runtime call must tell its own timeout from the call's by other means
    assert issubclass(ActorTimeoutError, TimeoutError)
    assert issubclass(IpcTimeoutError, TimeoutError)
    assert concurrent.futures.TimeoutError is TimeoutError

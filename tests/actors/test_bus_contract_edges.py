"""The IPC bus's contract at its edges: what a mutation test of ``actors/_bus.py`` found no test held.

Each test here failed under a small change of the bus (an error wrapped that a requester
gets as it is, a mailbox slot not given back, a record's field lost, a wait counted
from the wrong start) that every other test let through.
"""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import (
    ActorTimeoutError,
    AgentContext,
    AgentNotRegisteredError,
    Config,
    FakeClock,
    IpcHandlerError,
    IpcInvalidMessageError,
    IpcTimeoutError,
    JournalConfig,
    MailboxFullError,
    Runtime,
    RuntimeClosedError,
    RuntimeConfig,
    _bus,
)
from cogfabric.events import IpcDeadLettered, IpcDelivered, IpcMessage
from cogfabric.store import JournalError

from .test_supervision import _short_call_timeout

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from cogfabric.actors import Behavior

WAIT = 10.0


def _config(durability: str = "sync", call_timeout: float = 5.0) -> Config:
    return Config(
        journal=JournalConfig(durability=durability),  # type: ignore[arg-type]
        runtime=RuntimeConfig(call_timeout=call_timeout),
    )


def _in_thread(call: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(call())
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


class _Echo:
    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ARG002
        return "pong"


class _HeldThenSends:
    """Holds its request until the gate opens, then sends on (refused once close() began)."""

    def __init__(self, entered: threading.Event, gate: threading.Event) -> None:
        self.entered, self.gate = entered, gate

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ARG002
        self.entered.set()
        assert self.gate.wait(30)
        ctx.send("b", "passed")
        return "never"


def _refuse_topic(rt: Runtime, topic: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the runtime's journal refuse every commit holding a message of ``topic``."""
    journal = rt._journal
    assert journal is not None
    append = journal.append

    def refusing(events: list[Any], **kwargs: Any) -> list[int]:
        if any(isinstance(e, IpcMessage) and e.topic == topic for e in events):
            msg = "refused at commit"
            raise JournalError(msg)
        return append(events, **kwargs)

    monkeypatch.setattr(journal, "append", refusing)


def test_a_requester_whose_request_close_cut_short_gets_the_runtime_closed_error_itself(
    tmp_path: Path,
) -> None:
    # README: a request the close refuses fails with RuntimeClosedError, not as if the
    # recipient's behavior had failed (IpcHandlerError): the behavior did not fail, the
    # runtime closed under it
    entered, gate = threading.Event(), threading.Event()
    behaviors: dict[str, Callable[[], Behavior]] = {
        "held": lambda: _HeldThenSends(entered, gate),
        "echo": _Echo,
    }
    rt = Runtime.open(tmp_path / "j", config=_config(), clock=FakeClock(), behaviors=behaviors)
    try:
        rt.spawn("a", behavior="held")
        rt.spawn("b", behavior="echo")
        requester, outcome = _in_thread(lambda: rt.bus.request("x", "a", "q", timeout=20))
        assert entered.wait(WAIT)
        begun = threading.Event()
        stop_agents = rt._stop_agents

        def stop(entries: Any) -> None:
            begun.set()
            stop_agents(entries)

        rt._stop_agents = stop  # type: ignore[method-assign]
        closer, _ = _in_thread(rt.close)
        assert begun.wait(WAIT)
        gate.set()
        requester.join(WAIT)
        closer.join(30)
        assert not closer.is_alive()
    finally:
        gate.set()
        rt.close()

    (error,) = outcome
    assert type(error) is RuntimeClosedError, repr(error)
    assert "the runtime closed while 'a' handled it" in str(error)
    letters = [(d.topic, d.recipient, d.reason) for d in rt.bus.dead_letters()]
    assert letters == [("passed", "b", "closed"), ("q", "a", "closed")]


def test_a_behaviors_send_whose_commit_fails_gives_the_recipients_mailbox_slot_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In sync durability a behavior's send is delivered by the writer once committed; a
    # commit that fails must still give back the slot the send took in the recipient's
    # mailbox, or each such failure shrinks that mailbox for good.
    class Sender:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            ctx.send("r", "hi")

    behaviors: dict[str, Callable[[], Behavior]] = {"s": Sender, "r": _Echo}
    with Runtime.open(tmp_path / "j", config=_config(), clock=FakeClock(), behaviors=behaviors) as rt:
        rt.spawn("s", behavior="s")
        rt.spawn("r", behavior="r")
        _refuse_topic(rt, "hi", monkeypatch)
        settled = threading.Event()
        outcomes: list[bool] = []
        delivery = rt.bus._delivery

        def watched(message: IpcMessage, entry: Any, **kwargs: Any) -> Callable[[bool], None]:
            deliver = delivery(message, entry, **kwargs)

            def run(committed: bool) -> None:
                try:
                    deliver(committed)
                finally:
                    if message.topic == "hi":
                        outcomes.append(committed)
                        settled.set()

            return run

        monkeypatch.setattr(rt.bus, "_delivery", watched)
        rt.bus.send("x", "s", "go")
        assert settled.wait(WAIT)

        assert outcomes == [False]  # the commit failed: nothing was delivered
        assert rt._entry("r").shared.slots.free == rt._core.mailbox_size


def test_a_dead_letter_names_its_message_its_trace_and_its_cause(tmp_path: Path) -> None:
    # README: a dead letter holds its message's payload and trace id; its cause is the
    # message, so an audit follows a trace, or a message, to the letter that ended it
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        rt.spawn("a")
        with pytest.raises(AgentNotRegisteredError):
            rt.bus.send("a", "ghost", "hello", {"n": [1]}, cause="evt-1", trace="trace-1")
        (letter,) = rt.bus.dead_letters()
        rt.flush()
        assert rt._journal is not None
        (journaled,) = [
            r.event for r in rt._journal.read(stream="bus") if isinstance(r.event, IpcDeadLettered)
        ]

    assert journaled == letter
    assert (letter.sender, letter.recipient, letter.topic, letter.payload) == (
        "a",
        "ghost",
        "hello",
        {"n": [1]},
    )
    assert (letter.reason, letter.trace_id) == ("agent not registered", "trace-1")
    assert letter.cause == letter.message_id
    assert letter.message_id  # the message, refused before it was journaled, is named all the same


class _Monotonic:
    """Stands in for the bus's ``time``: a monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_a_broadcasts_subscribers_share_one_call_timeout_of_waiting_for_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # README: a subscriber whose mailbox stays full is dead-lettered, "all of them together
    # wait call_timeout at most for room": once the first used it all up, the next is not
    # given a call_timeout of its own
    clock = _Monotonic()
    monkeypatch.setattr(_bus, "time", clock)
    behaviors: dict[str, Callable[[], Behavior]] = {"echo": _Echo}
    config = _config(call_timeout=5.0)
    with Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors=behaviors) as rt:
        for agent in ("s1", "s2"):
            rt.spawn(agent, behavior="echo")
            rt.bus.subscribe(agent, "news")
        waits: list[tuple[str, float | None]] = []
        tell = rt._tell

        def full_first(agent_id: str, message: Any, timeout: float | None = None, fanout: Any = None) -> None:
            waits.append((agent_id, timeout))
            if agent_id == "s1":
                clock.now += 5.0  # as if it waited all of call_timeout for room
                msg = "agent 's1': mailbox full"
                raise MailboxFullError(msg)
            tell(agent_id, message, timeout, fanout)

        monkeypatch.setattr(rt, "_tell", full_first)

        assert rt.bus.broadcast("x", "news", 1) == 1
        assert waits == [("s1", 5.0), ("s2", 0.0)]
        assert [(d.recipient, d.reason) for d in rt.bus.dead_letters()] == [("s1", "mailbox full")]


class _Defers:
    """Never answers: it returns None, which defers the reply to a ``ctx.reply`` that never comes."""

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
        return None


def test_a_requests_timeout_counts_its_wait_for_room_in_the_mailbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # request(): "timeout covers the wait for room in the recipient's mailbox and for
    # the reply": what the wait for room took is not waited again for the reply
    clock = _Monotonic()
    monkeypatch.setattr(_bus, "time", clock)
    waits: list[float | None] = []

    class _Watched(_bus._Pending):
        def __init__(self, request: IpcMessage) -> None:
            super().__init__(request)
            done = self.done
            original_wait = done.wait

            def wait(timeout: float | None = None) -> bool:
                waits.append(timeout)
                return original_wait(timeout)

            done.wait = wait  # type: ignore[method-assign]

    monkeypatch.setattr(_bus, "_Pending", _Watched)
    behaviors: dict[str, Callable[[], Behavior]] = {"defers": _Defers}
    with Runtime.open(tmp_path / "j", config=_config(), clock=FakeClock(), behaviors=behaviors) as rt:
        rt.spawn("b", behavior="defers")
        admit = rt.bus._admit

        def slow_room(message: IpcMessage, timeout: float | None = None) -> Any:
            entry = admit(message, timeout)
            clock.now += 4.9  # as if the mailbox had room only after 4.9 s of the 5
            return entry

        monkeypatch.setattr(rt.bus, "_admit", slow_room)

        with pytest.raises(IpcTimeoutError, match="after 5 s"):
            rt.bus.request("x", "b", "q", timeout=5)

    assert waits[0] == pytest.approx(0.1)


def test_a_send_the_journal_refuses_gives_the_recipients_mailbox_slot_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # sync durability: the message is durable before it is delivered, and a commit that
    # fails fails the send; the slot it took in the recipient's mailbox comes back
    behaviors: dict[str, Callable[[], Behavior]] = {"echo": _Echo}
    with Runtime.open(tmp_path / "j", config=_config(), clock=FakeClock(), behaviors=behaviors) as rt:
        rt.spawn("r", behavior="echo")
        _refuse_topic(rt, "hi", monkeypatch)

        with pytest.raises(JournalError):
            rt.bus.send("x", "r", "hi")
        assert rt._entry("r").shared.slots.free == rt._core.mailbox_size


def test_a_reply_is_stamped_from_its_request_and_its_delivery_journaled(tmp_path: Path) -> None:
    # README: replies are stamped (sender, recipient, correlation and trace ids); a
    # request's correlation id is an event id and "-corr"; the reply's cause is the
    # request, and its delivery to the requester is journaled as a message's is
    behaviors: dict[str, Callable[[], Behavior]] = {"echo": _Echo}
    with Runtime.open(tmp_path / "j", config=_config(), clock=FakeClock(), behaviors=behaviors) as rt:
        rt.spawn("b", behavior="echo")
        reply = rt.bus.request("x", "b", "ping", trace="trace-1", timeout=WAIT)
        rt.flush()
        assert rt._journal is not None
        events = [r.event for r in rt._journal.read(stream="bus")]

    (request,) = [e for e in events if isinstance(e, IpcMessage) and e.kind == "request"]
    assert re.fullmatch(r"[0-9a-f]{16}-[0-9a-f]{12}-corr", request.correlation_id)
    assert (reply.sender, reply.recipient, reply.topic, reply.payload) == ("b", "x", "reply", "pong")
    assert (reply.correlation_id, reply.trace_id, reply.cause) == (
        request.correlation_id,
        "trace-1",
        request.id,
    )
    assert reply in events
    delivered = [(e.message_id, e.recipient) for e in events if isinstance(e, IpcDelivered)]
    assert delivered == [(request.id, "b"), (reply.id, "x")]


def test_a_reply_made_from_outside_comes_from_the_requests_recipient(tmp_path: Path) -> None:
    # bus.reply without frm answers for the agent the request went to: the reply is
    # from it, to the requester, as a returned value's is
    deferred = threading.Event()
    pending: list[str] = []

    class Defers:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            pending.append(message.correlation_id)
            deferred.set()

    behaviors: dict[str, Callable[[], Behavior]] = {"defers": Defers}
    with Runtime.open(tmp_path / "j", config=_config(), clock=FakeClock(), behaviors=behaviors) as rt:
        rt.spawn("b", behavior="defers")
        requester, outcome = _in_thread(lambda: rt.bus.request("x", "b", "later", timeout=WAIT))
        assert deferred.wait(WAIT)
        rt.bus.reply(pending[0], 7)
        requester.join(WAIT)

    (reply,) = outcome
    assert isinstance(reply, IpcMessage), reply
    assert (reply.sender, reply.recipient, reply.payload) == ("b", "x", 7)


def test_a_request_that_times_out_while_its_reply_is_committed_leaves_no_timeout_letter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A reply took the request, but its commit outlasts the request's timeout and then
    # call_timeout: the requester times out; the reply is journaled all the same. The
    # request did not go undelivered, and the journal must not say it did (the original:
    # exactly one dead letter per failed request, and this one was answered).
    handled, entered, release = threading.Event(), threading.Event(), threading.Event()
    corr: list[str] = []

    class Defers:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            corr.append(message.correlation_id)
            handled.set()

    with Runtime.open(config=_config(call_timeout=0.2), clock=FakeClock(), behaviors={"d": Defers}) as rt:
        rt.spawn("b", behavior="d")
        journal = rt.bus._journal

        def held(message: Any, **kw: Any) -> Any:
            if getattr(message, "kind", "") == "reply":
                entered.set()
                assert release.wait(WAIT)
            return journal(message, **kw)

        monkeypatch.setattr(rt.bus, "_journal", held)

        def answer() -> None:
            assert handled.wait(WAIT)
            rt.agent("b").private("x")  # queued behind the request: its deferral is marked by now
            rt.bus.reply(corr[0], "answer")

        replier = threading.Thread(target=answer)
        replier.start()
        try:
            # 1 s: the replier's ask of b, on the way to the reply, has call_timeout (0.2 s) anyway
            with pytest.raises(IpcTimeoutError):
                rt.bus.request("a", "b", "q", timeout=1)
            assert entered.is_set()  # the reply was taken, its journaling held
        finally:
            release.set()
            replier.join(WAIT)

        assert rt.bus.dead_letters() == []


@pytest.mark.parametrize(
    ("error", "letters"),
    [
        (JournalError("refused"), [("q", "reply not journaled")]),  # the reply is lost: one letter
        (ActorTimeoutError("commit timed out"), []),  # it may be stored yet: no letter that says otherwise
    ],
)
def test_a_reply_whose_journaling_fails_tells_the_requester_and_letters_only_a_lost_one(
    monkeypatch: pytest.MonkeyPatch, error: Exception, letters: list[tuple[str, str]]
) -> None:
    handled = threading.Event()
    corr: list[str] = []

    class Defers:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            corr.append(message.correlation_id)
            handled.set()

    with Runtime.open(config=_config(), clock=FakeClock(), behaviors={"d": Defers}) as rt:
        rt.spawn("b", behavior="d")
        journal = rt.bus._journal

        def refused(message: Any, **kw: Any) -> Any:
            if getattr(message, "kind", "") == "reply":
                raise error
            return journal(message, **kw)

        monkeypatch.setattr(rt.bus, "_journal", refused)
        requester, outcome = _in_thread(lambda: rt.bus.request("a", "b", "q", timeout=WAIT))
        assert handled.wait(WAIT)
        rt.agent("b").private("x")  # queued behind the request: its deferral is marked by now
        with pytest.raises(type(error)):
            rt.bus.reply(corr[0], "answer")
        requester.join(WAIT)

        (failed,) = outcome
        assert isinstance(failed, IpcHandlerError), failed  # at once, not at its timeout
        assert failed.__cause__ is error
        assert [(d.topic, d.reason) for d in rt.bus.dead_letters()] == letters


def test_each_subscriber_gets_the_broadcast_as_journaled_with_its_own_name_and_the_cause(
    tmp_path: Path,
) -> None:
    # one journaled message; each copy is that message (its id, sender, trace and cause),
    # addressed to its subscriber, so its delivery record and any dead letter say whose it was
    seen: list[IpcMessage] = []
    lock, done = threading.Lock(), threading.Semaphore(0)

    class Rec:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            with lock:
                seen.append(message)
            done.release()

    with Runtime.open(tmp_path / "j", config=_config(), clock=FakeClock(), behaviors={"rec": Rec}) as rt:
        for agent in ("s1", "s2"):
            rt.spawn(agent, behavior="rec")
            rt.bus.subscribe(agent, "news")
        assert rt.bus.broadcast("x", "news", {"n": 1}, cause="evt-1", trace="trace-1") == 2
        for _ in range(2):
            assert done.acquire(timeout=WAIT)
        rt.flush()
        assert rt._journal is not None
        (sent,) = [r.event for r in rt._journal.read(stream="bus") if isinstance(r.event, IpcMessage)]

    assert (sent.recipient, sent.kind, sent.cause, sent.trace_id) == ("", "broadcast", "evt-1", "trace-1")
    got = sorted((m.recipient, m.id, m.sender, m.cause, m.trace_id, m.payload) for m in seen)
    assert got == [(agent, sent.id, "x", "evt-1", "trace-1", {"n": 1}) for agent in ("s1", "s2")]


def test_unsubscribing_from_an_empty_topic_does_not_wait_for_a_busy_agent(tmp_path: Path) -> None:
    # unsubscribe never fails for what it is given: an empty topic has no subscription to
    # remove, so it need not reach the agent, and a busy one costs no call_timeout
    entered, gate = threading.Event(), threading.Event()

    class Busy:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            entered.set()
            assert gate.wait(30)

    with Runtime.open(tmp_path / "j", config=_config(), clock=FakeClock(), behaviors={"busy": Busy}) as rt:
        rt.spawn("a", behavior="busy")
        rt.bus.send("x", "a", "hold")
        try:
            assert entered.wait(WAIT)
            with _short_call_timeout(rt, 0.3):  # only it: the spawn's commit may be slow on a loaded machine
                rt.bus.unsubscribe("a", "")  # no ActorTimeoutError: nothing to ask the agent
        finally:
            gate.set()


def test_subscribe_refuses_an_empty_topic_and_an_empty_agent_id(tmp_path: Path) -> None:
    # README: subscribe needs a live agent and a topic (the original takes any topic)
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        rt.spawn("a")
        with pytest.raises(IpcInvalidMessageError, match=r"^agentipc: invalid message: empty topic$"):
            rt.bus.subscribe("a", "")
        with pytest.raises(IpcInvalidMessageError, match=r"^agentipc: agent id required$"):
            rt.bus.subscribe("", "news")
        assert rt.bus.subscribers("") == []


def test_a_request_whose_failure_is_being_lettered_as_it_times_out_gets_the_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The behavior failed and its failure took the request; its dead letter is still being
    # journaled when the request's timeout comes. The failure settles it: the requester
    # gets IpcHandlerError, and the request has one dead letter, not a timeout's too.
    requester_done = threading.Event()

    class Fails:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            msg = "boom"
            raise ValueError(msg)

    config = _config(call_timeout=3.0)
    with Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors={"fails": Fails}) as rt:
        rt.spawn("b", behavior="fails")
        dead_letter = rt.bus.dead_letter

        def slow_letter(message: IpcMessage, reason: str, error: str) -> None:
            if reason == "handler error":
                requester_done.wait(1.0)  # past the request's timeout, within call_timeout
            dead_letter(message, reason, error)

        monkeypatch.setattr(rt.bus, "dead_letter", slow_letter)

        def request() -> object:
            try:
                return rt.bus.request("x", "b", "q", timeout=0.5)
            finally:
                requester_done.set()

        requester, outcome = _in_thread(request)
        requester.join(WAIT)
        rt.flush()

        (failed,) = outcome
        assert isinstance(failed, IpcHandlerError), failed
        assert [d.reason for d in rt.bus.dead_letters()] == ["handler error"]

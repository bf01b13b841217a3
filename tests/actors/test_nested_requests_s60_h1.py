"""Requests inside requests (A's request to B, whose behavior requests C), as a negotiation
simulation makes them: chains, circles, a timeout in the middle of a chain, a deferred reply.

A timed-out request's text names what held it up when its recipient's behavior was itself
waiting for a reply (README, "A behavior may request in turn"): before, a chain that timed
out in the middle read as a bare timeout, with no word of the agent the recipient waited for.
"""

from __future__ import annotations

import itertools
import json
import threading
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from cogfabric.actors import (
    ActorTimeoutError,
    AgentContext,
    AgentState,
    Config,
    IpcHandlerError,
    IpcInvalidMessageError,
    IpcTimeoutError,
    JournalConfig,
    Runtime,
    RuntimeConfig,
)
from cogfabric.cli import main

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from cogfabric.events import IpcMessage

WAIT = 10.0
"""How long a test waits for an event it expects (a bound, never reached when it passes)."""


class Chain:
    """``go``: request the agent ``payload[me]`` names (the leaf, named by none, waits for ``release``)."""

    release = threading.Event()
    leaf_entered = threading.Event()

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:
        me = ctx.agent_id
        if message.topic == "ping":
            return {"pong": me}
        route: dict[str, Any] = message.payload
        nxt = route.get(me)
        if nxt is None:
            Chain.leaf_entered.set()
            if route.get("hold"):
                Chain.release.wait(WAIT)
            ctx.set_private("leaf", route.get("tag"))
            return {"leaf": me}
        reply = ctx.request(nxt, "go", route, timeout=route.get("t_" + me, WAIT))
        ctx.set_private("got", reply.payload)
        return {"via": me, "inner": reply.payload}


@pytest.fixture(params=["sync", "batch", "memory"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _open(mode: str, tmp_path: Path) -> Runtime:
    path = None if mode == "memory" else tmp_path / "j"
    journal = JournalConfig(durability="batch" if mode == "batch" else "sync")
    config = Config(journal=journal, runtime=RuntimeConfig(call_timeout=2.0))
    return Runtime.open(path, config=config, behaviors={"chain": Chain})


@pytest.fixture
def chain(mode: str, tmp_path: Path) -> Iterator[Runtime]:
    Chain.release = threading.Event()
    Chain.leaf_entered = threading.Event()
    rt = _open(mode, tmp_path)
    try:
        for agent in ("A", "B", "C"):
            rt.spawn(agent, behavior="chain")
        yield rt
    finally:
        Chain.release.set()  # a leaf still held lets go, and close() does not wait for it
        rt.close()


def _views(rt: Runtime) -> dict[str, Any]:
    return {a: (rt.agent(a).state, dict(rt.agent(a).context_view().private)) for a in rt.agents()}


def _request_in_thread(
    rt: Runtime, to: str, payload: object, timeout: float, topic: str = "go"
) -> tuple[threading.Thread, list[Any]]:
    """``app``'s request on a thread of its own; its outcome (reply or error) lands in the list."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(rt.bus.request("app", to, topic, payload, timeout=timeout))
        except Exception as exc:  # noqa: BLE001 - the outcome the test looks at
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_a_chain_answers_through_and_the_journal_replays_what_ran(
    chain: Runtime, mode: str, tmp_path: Path
) -> None:
    reply = chain.bus.request("app", "A", "go", {"A": "B", "B": "C", "tag": "t1"}, timeout=WAIT)

    assert reply.payload == {"via": "A", "inner": {"via": "B", "inner": {"leaf": "C"}}}
    live = _views(chain)
    assert {a: state for a, (state, _) in live.items()} == dict.fromkeys("ABC", AgentState.IDLE)
    assert chain.bus.dead_letters() == []
    chain.close()
    if mode == "memory":
        return
    with _open(mode, tmp_path) as again:
        assert _views(again) == live


def test_a_circle_is_refused_at_once_naming_it_and_leaves_nothing_running(
    chain: Runtime, mode: str, tmp_path: Path
) -> None:
    # A -> B -> C -> A: C's request closes the circle; without the refusal all three would
    # wait out their timeouts (WAIT each), and the error would say nothing of the circle.
    with pytest.raises(IpcHandlerError) as raised:
        chain.bus.request("app", "A", "go", {"A": "B", "B": "C", "C": "A"}, timeout=WAIT)

    innermost: BaseException = raised.value
    while innermost.__cause__ is not None:
        innermost = innermost.__cause__
    assert isinstance(innermost, IpcInvalidMessageError)
    assert "('C' -> 'A' -> 'B' -> 'C': each behavior waits for the next one's reply)" in str(innermost)
    # each failed behavior left its handler error: none timed out
    assert [d.reason for d in chain.bus.dead_letters()] == ["handler error"] * 3
    live = _views(chain)
    assert {a: state for a, (state, _) in live.items()} == dict.fromkeys("ABC", AgentState.IDLE)
    chain.close()
    if mode != "memory":
        with _open(mode, tmp_path) as again:
            assert _views(again) == live


def test_a_timeout_in_the_middle_of_a_chain_names_the_agent_the_recipient_waited_for(
    chain: Runtime, mode: str, tmp_path: Path
) -> None:
    # app -> B (0.5 s) while B's behavior waits for C, which is held: the requester is
    # told who held its request up. Before: "... to 'B' after 0.5 s" and no more.
    with pytest.raises(IpcTimeoutError) as raised:
        chain.bus.request("app", "B", "go", {"B": "C", "hold": True}, timeout=0.5)

    said = (
        "agentipc: request timed out: 'go' to 'B' after 0.5 s "
        "('B' was handling it, waiting for a reply from 'C')"
    )
    assert str(raised.value) == said
    assert Chain.leaf_entered.is_set()
    [letter] = chain.bus.dead_letters()
    assert (letter.reason, letter.error) == ("timeout", said)  # the journal's letter says it too

    # a request queued behind the busy behavior: not begun
    not_begun = r"\('B' had not begun it, busy with another message and waiting for a reply from 'C'\)$"
    with pytest.raises(IpcTimeoutError, match=not_begun):
        chain.bus.request("app", "B", "ping", timeout=0.05)

    Chain.release.set()
    chain.settle(WAIT)
    # B went on: its state changed, its reply to the gone requester was dropped (no record)
    assert chain.agent("B").context_view().private == {"got": {"leaf": "C"}}
    assert chain.agent("B").state == AgentState.IDLE
    chain.close()
    if mode == "memory":
        return
    message_id = raised.value.message_id
    assert message_id is not None
    result = CliRunner().invoke(main, ["trace", str(tmp_path / "j"), "--id", message_id, "--json"])
    assert result.exit_code == 0, result.output
    effects = [e["data"] for e in json.loads(result.output)["effects"]]
    messages = [(d["sender"], d["recipient"], d["kind"]) for d in effects if "kind" in d]
    assert messages == [("B", "C", "request"), ("C", "B", "reply")]  # no reply B -> app
    assert [d["error"] for d in effects if "reason" in d] == [said]


def test_a_long_chain_is_named_by_its_first_agents_and_the_one_at_its_end(tmp_path: Path) -> None:
    Chain.release = threading.Event()
    Chain.leaf_entered = threading.Event()
    agents = [f"a{i}" for i in range(8)]
    route: dict[str, Any] = dict(itertools.pairwise(agents)) | {"hold": True}
    with _open("memory", tmp_path) as rt:
        for agent in agents:
            rt.spawn(agent, behavior="chain")
        thread, outcome = _request_in_thread(rt, "a0", route, WAIT)
        try:
            assert Chain.leaf_entered.wait(WAIT)
            with pytest.raises(IpcTimeoutError) as raised:
                rt.bus.request("app", "a0", "ping", timeout=0.05)
        finally:
            Chain.release.set()
            thread.join(WAIT)
        assert str(raised.value) == (
            "agentipc: request timed out: 'ping' to 'a0' after 0.05 s ('a0' had not begun it, busy with "
            "another message and waiting for a reply from 'a1', which waits for 'a2', which waits for 'a3', "
            "which waits for 'a4', ... which waits for 'a7' (7 agents down the chain))"
        )
        [answered] = outcome  # released, the chain answered through
        assert answered.payload["via"] == "a0"


def test_a_wait_for_a_deferred_reply_is_named_as_such() -> None:
    # B defers A's request (returns None); B, free, then requests A, whose behavior waits
    # for B's reply: no circle the bus can refuse, so it times out, and says why.
    deferred = threading.Event()

    class Defers:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:
            if message.topic == "defer":
                deferred.set()
                return None
            if message.topic == "ask":  # A, till B's request below has timed out
                return ctx.request("B", "defer", timeout=1.0).payload
            if message.topic == "x":
                return "late"
            try:
                ctx.request("A", "x", timeout=0.05)
            except IpcTimeoutError as exc:
                return str(exc)
            return "answered"

    with Runtime.open(behaviors={"d": Defers}) as rt:
        rt.spawn("A", behavior="d")
        rt.spawn("B", behavior="d")
        thread, outcome = _request_in_thread(rt, "A", None, WAIT, topic="ask")
        try:
            assert deferred.wait(WAIT)
            said = rt.bus.request("app", "B", "back", timeout=WAIT).payload
        finally:
            thread.join(WAIT)

    assert said == (
        "agentipc: request timed out: 'x' to 'A' after 0.05 s ('A' had not begun it, busy with another "
        "message and waiting for a reply from 'B' (deferred: the behavior of 'B' returned None for it))"
    )
    [gave_up] = outcome  # A's request to B timed out in turn: no reply came to what B deferred
    assert isinstance(gave_up, IpcHandlerError)
    assert isinstance(gave_up.__cause__, IpcTimeoutError)


def test_a_busy_recipient_that_waits_for_no_reply_gets_no_hint(tmp_path: Path) -> None:
    # only a wait for a reply is named: a behavior busy otherwise reads as before
    Chain.release = threading.Event()
    Chain.leaf_entered = threading.Event()
    with _open("memory", tmp_path) as rt:
        rt.spawn("C", behavior="chain")
        thread, _ = _request_in_thread(rt, "C", {"hold": True}, WAIT)
        try:
            assert Chain.leaf_entered.wait(WAIT)
            with pytest.raises(IpcTimeoutError) as raised:
                rt.bus.request("app", "C", "ping", timeout=0.05)
        finally:
            Chain.release.set()
            thread.join(WAIT)
    assert str(raised.value) == "agentipc: request timed out: 'ping' to 'C' after 0.05 s"


def test_a_lifecycle_call_that_times_out_on_a_waiting_behavior_names_what_it_waits_for(
    tmp_path: Path,
) -> None:
    # suspend A while its behavior waits for B, itself held: the call times out, and says on whom
    Chain.release = threading.Event()
    Chain.leaf_entered = threading.Event()
    config = Config(runtime=RuntimeConfig(call_timeout=0.2))
    with Runtime.open(tmp_path / "j", config=config, behaviors={"chain": Chain}) as rt:
        rt.spawn("A", behavior="chain")
        rt.spawn("B", behavior="chain")
        thread, outcome = _request_in_thread(rt, "A", {"A": "B", "hold": True}, WAIT)
        try:
            assert Chain.leaf_entered.wait(WAIT)
            with pytest.raises(ActorTimeoutError) as raised:
                rt.suspend("A")
        finally:
            Chain.release.set()
            thread.join(WAIT)
        assert str(raised.value).startswith(
            "agent 'A' did not answer suspend within 0.2 s (its behavior was waiting for a reply from 'B'); "
        )
        [answered] = outcome
        assert answered.payload == {"via": "A", "inner": {"leaf": "B"}}
        rt.settle(WAIT)
        assert rt.agent("A").state == AgentState.SUSPENDED  # the suspend took effect once A was through


def test_a_failure_up_a_chain_reads_as_each_level_s_text(chain: Runtime) -> None:
    # C's behavior raises; B and A let the IpcHandlerError propagate. Before, each level
    # showed the one below by its repr, escaping its quotes again: \\\'C\\\' two levels up.
    chain.spawn("D", behavior="chain")
    route = {"A": "B", "B": "C", "C": "D", "D": "nobody"}  # D's request to "nobody" fails

    with pytest.raises(IpcHandlerError) as raised:
        chain.bus.request("app", "A", "go", route, timeout=WAIT)

    below = "agentipc: agent not registered: 'nobody'"
    levels = [f"agentipc: handler panicked: {a!r} failed on 'go': " for a in "ABCD"]
    assert str(raised.value) == "".join(levels) + below
    assert "\\" not in str(raised.value)
    # each level's __cause__ is the one below, its text the rest of the line
    error: BaseException | None = raised.value
    for i in range(4):
        assert isinstance(error, IpcHandlerError)
        assert str(error) == "".join(levels[i:]) + below
        error = error.__cause__
    assert str(error) == below
    # the dead letters keep the same words, the deepest first
    letters = [d.error for d in chain.bus.dead_letters() if d.reason == "handler error"]
    assert letters == ["".join(levels[i:]) + below for i in (3, 2, 1, 0)]

"""Mutation round on session 60's new source code (session 61, helper h2).

Each test kills a hand-made mutant that the tests before it let survive (the table of
mutants: the session's notes). Each passes on the code as it is.
"""

from __future__ import annotations

import itertools
import logging
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

import pykka
import pytest

import cogfabric as cf
from cogfabric.actors import Config, IpcTimeoutError, Runtime, RuntimeConfig, _runtime
from cogfabric.events import IpcMessage
from tests.actors.test_nested_requests_s60_h1 import Chain, _open, _request_in_thread
from tests.actors.test_supervision import _short_call_timeout, _stall
from tests.test_interrupt_hold_s58_h1 import (  # autouse: Python's own SIGINT handler, then as found
    _sigint_as_found as _sigint_as_found,  # noqa: PLC0414
)

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from cogfabric.events import Event

WAIT = 10.0
"""How long a test waits for an event it expects (a bound, never reached when it passes)."""


def test_a_chain_of_five_is_named_whole_and_its_head_was_handling_the_request(tmp_path: Path) -> None:
    # a0 -> a1 -> a2 -> a3 -> a4 (held): the five the text names at most, no "..." (``>``,
    # not ``>=``); the request a0 handles is the one its own request names as its cause
    # (the first request of the chain's, not the last's)
    Chain.release = threading.Event()
    Chain.leaf_entered = threading.Event()
    agents = [f"a{i}" for i in range(5)]
    route: dict[str, Any] = dict(itertools.pairwise(agents)) | {"hold": True}
    waits = "a reply from 'a1', which waits for 'a2', which waits for 'a3', which waits for 'a4'"
    with _open("memory", tmp_path) as rt:
        for agent in agents:
            rt.spawn(agent, behavior="chain")
        thread, outcome = _request_in_thread(rt, "a0", route, 1.5)
        try:
            assert Chain.leaf_entered.wait(WAIT)
            with pytest.raises(IpcTimeoutError) as raised:
                rt.bus.request("app", "a0", "ping", timeout=0.05)
            thread.join(WAIT)  # its own request times out (1.5 s) with the chain held
        finally:
            Chain.release.set()
            thread.join(WAIT)
        rt.settle(WAIT)
    assert str(raised.value).endswith(
        f" ('a0' had not begun it, busy with another message and waiting for {waits})"
    )
    [timed_out] = outcome
    assert isinstance(timed_out, IpcTimeoutError)
    said = "agentipc: request timed out: 'go' to 'a0' after 1.5 s"
    assert str(timed_out) == f"{said} ('a0' was handling it, waiting for {waits})"


def test_the_chain_named_ends_at_an_agent_that_deferred_even_when_that_agent_waits_now() -> None:
    # A waits for B's deferred reply; B, free, then handles another request and waits for
    # C (held): A's chain ends at B, the agent to answer it (ctx.reply), not at C
    deferred, held, release = threading.Event(), threading.Event(), threading.Event()
    pending: list[str] = []

    class Defers:
        def on_message(self, ctx: cf.AgentContext, message: IpcMessage) -> Any:
            if message.topic == "ask":  # A
                return ctx.request("B", "defer", timeout=WAIT).payload
            if message.topic == "defer":  # B: answered later, by its "go"
                pending.append(message.correlation_id)
                deferred.set()
                return None
            if message.topic == "go":  # B
                answer = ctx.request("C", "hold", timeout=WAIT).payload
                ctx.reply(pending[0], answer)
                return answer
            if message.topic == "hold":  # C
                held.set()
                assert release.wait(WAIT)
                return "late"
            return "pong"

    with Runtime.open(behaviors={"d": Defers}) as rt:
        for agent in "ABC":
            rt.spawn(agent, behavior="d")
        asking, asked = _request_in_thread(rt, "A", None, WAIT, topic="ask")
        assert deferred.wait(WAIT)  # B took A's request first: its "go" comes after
        going, gone = _request_in_thread(rt, "B", None, WAIT, topic="go")
        try:
            assert held.wait(WAIT)
            with pytest.raises(IpcTimeoutError) as raised:
                rt.bus.request("app", "A", "ping", timeout=0.05)
        finally:
            release.set()
            asking.join(WAIT)
            going.join(WAIT)
    assert str(raised.value).endswith(
        " ('A' had not begun it, busy with another message and waiting for a reply from 'B' "
        "(deferred: the behavior of 'B' returned None for it))"
    )
    assert [m.payload for m in asked + gone] == ["late", "late"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_request_a_ctrl_c_stops_leaves_a_letter_naming_ctrl_c(tmp_path: Path) -> None:
    # a plain KeyboardInterrupt is a Ctrl-C; only the command line's Terminated is a SIGTERM
    class Interrupting:
        def on_message(self, _ctx: cf.AgentContext, _message: IpcMessage) -> None:
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), behaviors={"i": Interrupting}) as rt:
        rt.spawn("a", behavior="i")
        with pytest.raises(KeyboardInterrupt):
            rt.bus.request("app", "a", "ask", 1, timeout=WAIT)
        rt.settle(WAIT)
        (letter,) = rt.bus.dead_letters()
    assert letter.reason == "timeout"
    assert letter.error.endswith("(Ctrl-C while waiting for its reply)")


def test_a_broadcast_stored_after_its_caller_timed_out_reaches_a_full_mailbox_past_its_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the writer's thread tells it (no wait for room): past the mailbox's size, as one of
    # the runtime's messages, which the agent's behavior takes (not one it ignores)
    started, release, news = threading.Event(), threading.Event(), threading.Event()
    seen: list[str] = []

    class Held:
        def on_message(self, _ctx: cf.AgentContext, message: IpcMessage) -> None:
            if message.topic == "block":
                started.set()
                assert release.wait(WAIT)
            seen.append(message.topic)
            if message.topic == "news":
                news.set()

    def the_broadcast(events: Sequence[Event]) -> bool:
        return any(isinstance(e, IpcMessage) and e.kind == "broadcast" for e in events)

    past = threading.Event()
    tell_past_bound = Runtime._tell_past_bound

    def told_past_bound(runtime: Runtime, *args: Any, **kwargs: Any) -> Any:
        try:
            return tell_past_bound(runtime, *args, **kwargs)
        finally:
            past.set()

    monkeypatch.setattr(Runtime, "_tell_past_bound", told_past_bound)

    config = Config(runtime=RuntimeConfig(mailbox_size=1, call_timeout=WAIT))
    with Runtime.open(tmp_path / "j", config=config, clock=cf.FakeClock(), behaviors={"held": Held}) as rt:
        rt.spawn("a", behavior="held")
        rt.bus.subscribe("a", "news")
        rt.bus.send("x", "a", "block")
        assert started.wait(WAIT)
        rt.bus.send("x", "a", "one")  # its mailbox is full now
        gate = _stall(rt, the_broadcast)
        with _short_call_timeout(rt, 0.1), pytest.raises(cf.ActorTimeoutError):
            rt.bus.broadcast("x", "news", 1)
        gate.set()
        assert past.wait(WAIT)  # the writer stored it, and told it with its mailbox still full
        release.set()
        assert news.wait(WAIT)
        rt.settle(WAIT)
        assert seen == ["block", "one", "news"]


def test_of_two_closes_interrupted_at_exit_the_first_interruption_is_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runtimes = [cf.Runtime.open(None, clock=cf.FakeClock(), name=f"left-{n}") for n in range(3)]
    real = cf.Runtime.close
    raised: list[BaseException] = []

    def close(runtime: cf.Runtime) -> None:
        if runtime in runtimes and len(raised) < 2:
            raised.append(KeyboardInterrupt() if not raised else SystemExit(143))
            raise raised[-1]  # a Ctrl-C at exit in one close, a SIGTERM handler's exit in the next
        real(runtime)

    monkeypatch.setattr(cf.Runtime, "close", close)
    try:
        with pytest.raises(KeyboardInterrupt) as first:
            _runtime._close_left_open()
        assert first.value is raised[0]
        assert sum(rt.closed for rt in runtimes) == 1  # the one neither interruption stopped
    finally:
        monkeypatch.undo()
        for rt in runtimes:
            rt.close()


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_runtimes_own_close_logs_no_stop_from_outside(
    tmp_path: Path, durability: str, caplog: pytest.LogCaptureFixture
) -> None:
    # the writer's stop asked by close() (its stop or stop_soon) is no host's stop_all
    config = Config(journal=cf.JournalConfig(durability=durability))  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="cogfabric"):
        with Runtime.open(tmp_path / "j", config=config) as rt:
            rt.spawn("a").set_private("k", 1)
        with Runtime.open(tmp_path / "j", config=config) as rt:
            assert rt.agent("a").private("k") == 1
    assert [r.getMessage() for r in caplog.records if "outside" in r.getMessage()] == []


def test_a_hosts_stop_all_is_logged_by_the_journal_writer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rt = Runtime.open(tmp_path / "j")
    try:
        rt.spawn("a")
        with caplog.at_level(logging.WARNING, logger="cogfabric"):
            pykka.ActorRegistry.stop_all(block=True, timeout=WAIT)
        said = [r.getMessage() for r in caplog.records if r.name == "cogfabric.actors._writer"]
        assert len(said) == 1
        assert said[0].startswith("the journal writer was stopped from outside the runtime")
    finally:
        rt.close()

"""Pins from a mutation round on session 55's code (helper h8): each test kills a mutant the suite let live.

Runtime.settle and its in-flight count (a wake on a slot given back, an actor that ended
with one message left, what its flush delivered, who holds what at its timeout, the
journal's commit timing out), SettleTimeoutError's "and N more", the writer's commit
figures, the behavior failure count, the API key scrub (a short key in the base_url
error, the ``__context__`` chain, a container past the scrub's depth, a SyntaxError's
``text``), the tail check's head length, write_beside's cut of a DEST's name in bytes,
and simulate's "continued run" line.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any

import lmdb
import pytest
from click.testing import CliRunner

import cogfabric as cf
import cogfabric.cli
from cogfabric.actors import LLMClient, OpenAICompatibleProvider, ProviderError
from cogfabric.actors._agent import InFlight, MailboxSlots
from cogfabric.cli import main
from cogfabric.store import Journal
from cogfabric.store.testing import make_events
from tests.actors.test_close_and_flush import _slow_disk, _until

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

WAIT = 5.0
KEY = "sk-live-Qw7Er4Ty1Ui8Op5As2Df9Gh6Jk3"


class _Gate:
    """Holds each message until ``release`` is set."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:
        self.started.set()
        assert self.release.wait(WAIT)
        ctx.set_private(message.topic, message.payload)


# --------------------------------------------------------------- the in-flight count


def test_a_slot_given_back_unused_wakes_a_waiter_at_zero() -> None:
    # the last message in flight never reached its mailbox (release): a settle waiting is
    # woken at once, not at its deadline
    flight = InFlight()
    slots = MailboxSlots(1, flight)
    assert slots.acquire(0)
    timer = threading.Timer(0.05, slots.release)
    timer.start()
    try:
        began = time.monotonic()
        assert flight.wait_for_zero(time.monotonic() + WAIT, lambda: False)
        assert time.monotonic() - began < 2
    finally:
        timer.join()


def test_an_actor_ending_with_one_message_left_leaves_nothing_in_flight() -> None:
    flight = InFlight()
    slots = MailboxSlots(4, flight)
    slots.take()
    assert flight.count == 1
    slots.retire()
    assert flight.count == 0


def test_settle_waits_again_for_what_its_flush_delivered() -> None:
    # a message that reached a mailbox while settle's flush ran (a send whose commit had
    # timed out, stored meanwhile; another thread's send) is waited for too
    gate = _Gate()
    with cf.Runtime.open(None, config={"runtime": {"call_timeout": 2.0}}) as rt:
        rt.spawn("slow", behavior=gate)
        flush = rt.flush
        timers: list[threading.Timer] = []

        def flush_then_deliver(timeout: float | None = None) -> None:
            flush(timeout)
            if not timers:  # the first flush only
                rt.bus.send("driver", "slow", "late", 1)
                timers.append(threading.Timer(0.2, gate.release.set))
                timers[0].start()

        rt.flush = flush_then_deliver  # type: ignore[method-assign]
        try:
            rt.settle(WAIT)
            assert rt._in_flight.count == 0
            assert rt.agent("slow").private("late") == 1
        finally:
            gate.release.set()
            for timer in timers:
                timer.join()


def test_settles_timeout_names_an_agent_whose_mail_waits_while_it_is_not_busy() -> None:
    with cf.Runtime.open(None) as rt:
        rt.spawn("idle")
        slots = rt._agents["idle"].shared.slots  # type: ignore[union-attr]
        slots.take()  # a message in its mailbox, not yet taken up
        try:
            with pytest.raises(cf.SettleTimeoutError) as caught:
                rt.settle(0.1)
            assert (caught.value.in_flight, caught.value.busy) == (1, ("idle",))
        finally:
            slots.take_up()
            slots.handled()


def test_settles_timeout_on_the_journals_commit_says_why(tmp_path: Path) -> None:
    config = {"journal": {"durability": "batch", "max_map_size": 8 << 20}}
    with cf.Runtime.open(tmp_path / "j", config=config) as rt:
        agent = rt.spawn("a")
        _slow_disk(rt, 0.6)
        agent.set_private("k", 1)  # batch durability: handed over, not yet committed
        with pytest.raises(cf.SettleTimeoutError) as caught:
            rt.settle(0.1)
        error = caught.value
        assert (error.in_flight, error.busy) == (0, ())
        assert str(error).startswith("settle: 0 messages still in flight after 0.1 s; ")
        assert str(error.__cause__) in str(error)
        assert isinstance(error.__cause__, cf.ActorTimeoutError)


def test_settle_timeout_error_counts_the_agents_past_the_first_five() -> None:
    error = cf.SettleTimeoutError(9, ("a", "b", "c", "d", "e", "f", "g"), 1.5)
    assert str(error) == (
        "settle: 9 messages still in flight after 1.5 s (held by 'a', 'b', 'c', 'd', 'e' and 2 more)"
    )


# --------------------------------------------------------------- Runtime.stats


def test_commits_count_each_commit_once_and_commit_seconds_is_zero_between(tmp_path: Path) -> None:
    with cf.Runtime.open(tmp_path / "j", config={"journal": {"max_map_size": 8 << 20}}) as rt:
        agent = rt.spawn("a")
        before = rt.stats().commits
        for value in range(3):
            agent.set_private("k", value)  # sync durability: one commit each
        after = rt.stats().commits
        assert before is not None
        assert after is not None
        assert before + 2 <= after <= before + 4  # counted as each begins and ends: halved
        assert _until(lambda: rt.stats().commit_seconds == 0.0)  # no commit under way


class _Raises:
    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:  # noqa: ARG002
        msg = "boom"
        raise RuntimeError(msg)


def test_every_behavior_failure_is_counted() -> None:
    with cf.Runtime.open(behaviors={"raises": _Raises}) as rt:
        rt.spawn("r", behavior="raises")
        for _ in range(3):
            with pytest.raises(cf.IpcHandlerError):
                rt.bus.request("app", "r", "q", timeout=WAIT)
        assert rt.stats().behavior_failures == 3


# --------------------------------------------------------------- the API key scrub


def _printed(error: BaseException) -> str:
    return "".join(traceback.format_exception(error))


class _Failing:
    name = "vendor"

    def __init__(self, make: Callable[[], Exception]) -> None:
        self.make = make

    def generate(self, prompt: str, **params: Any) -> str:  # noqa: ARG002
        raise self.make()


def test_a_short_key_leaves_a_base_url_without_a_host_whole() -> None:
    with pytest.raises(cf.InvalidConfigError) as caught:
        OpenAICompatibleProvider({"base_url": "http:///v1", "api_key": "t", "model": "m"})
    assert "base_url 'http:///v1' names no host" in str(caught.value)


def _refuse_the_key() -> None:
    msg = f"Incorrect API key provided: {KEY}"
    raise ValueError(msg)


class _FailsWhileHandling:
    name = "vendor"

    def generate(self, prompt: str, **params: Any) -> str:  # noqa: ARG002
        try:
            _refuse_the_key()
        except ValueError:
            msg = "the call failed"
            raise RuntimeError(msg)  # noqa: B904 - its __context__ holds the key, as an SDK's may
        return "never"


def test_the_key_in_a_causes_context_is_scrubbed() -> None:
    client = LLMClient(_FailsWhileHandling(), {"api_key": KEY})
    with pytest.raises(ProviderError) as caught:
        client.generate("hello")
    assert KEY not in _printed(caught.value)


def test_a_key_nested_past_the_scrubs_depth_unchains_the_cause() -> None:
    def make() -> Exception:
        nested: Any = KEY
        for _ in range(12):
            nested = [nested]
        error = RuntimeError("401")
        error.body = nested  # type: ignore[attr-defined]  # an SDK error's parsed answer
        return error

    client = LLMClient(_Failing(make), {"api_key": KEY})
    with pytest.raises(ProviderError) as caught:
        client.generate("hello")
    cause = caught.value.__cause__  # not chained: its body could not be scrubbed that deep
    assert cause is None or KEY not in repr(vars(cause))
    assert "its cause is not chained" in str(caught.value)


def test_a_syntax_errors_text_is_scrubbed() -> None:
    # a traceback prints a SyntaxError's text (the offending line) under its message
    def make() -> Exception:
        error = SyntaxError("invalid syntax", ("config.py", 1, 1, f"api_key = {KEY}\n"))
        error.args = ("invalid syntax",)
        return error

    client = LLMClient(_Failing(make), {"api_key": KEY})
    with pytest.raises(ProviderError) as caught:
        client.generate("hello")
    assert KEY not in _printed(caught.value)


# --------------------------------------------------------------- the journal's files


def _journal(path: Path, count: int = 40) -> Path:
    with Journal.open(path, max_map_size=1 << 24) as journal:
        journal.append(make_events(count))
    return path


def test_a_tail_check_refuses_a_head_longer_than_a_head(tmp_path: Path) -> None:
    path = _journal(tmp_path / "j")
    env = lmdb.open(str(path), max_dbs=8)
    try:
        heads = env.open_db(b"heads")
        with env.begin(write=True, db=heads) as txn:
            value = txn.get(b"agent/a0")
            assert value is not None
            txn.put(b"agent/a0", bytes(value) + bytes(8))  # a valid head, and 8 bytes more
    finally:
        env.close()

    with Journal.open(path) as journal:
        report = journal.verify(after=35)

    assert not report.ok
    assert report.reason == "the stream index's head of 'agent/a0' does not match its records"


def test_a_dest_named_near_the_limit_in_two_byte_characters_is_written(tmp_path: Path) -> None:
    source = _journal(tmp_path / "j")
    name = "\u00e9" * 127  # 254 bytes: the sibling's name is cut by bytes, not characters
    dest = tmp_path / name
    try:
        os.fsencode(dest)
    except UnicodeEncodeError:  # pragma: no cover - a file system encoding without é
        pytest.skip("the file system encoding cannot name it")

    result = CliRunner().invoke(main, ["backup", str(source), str(dest)])

    assert result.exit_code == 0, result.stderr
    with Journal.open(dest, readonly=True) as copy:
        assert copy.last_seq == 40
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["j", name])


def test_simulate_into_an_empty_directory_does_not_say_it_recovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "sim"
    path.mkdir()  # made beforehand, empty: a new journal, nothing to verify or recover
    monkeypatch.setattr(cogfabric.cli, "_stderr_is_terminal", lambda: True)

    result = CliRunner().invoke(main, ["simulate", "--agents", "2", "--turns", "1", "--journal", str(path)])

    assert result.exit_code == 0, result.output
    assert "recovering its agents" not in result.stderr

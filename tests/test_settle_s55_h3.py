"""``Runtime.settle``: wait until no message waits or is handled, what they lead to included."""

from __future__ import annotations

import copy
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest
from freezegun import freeze_time

import cogfabric as cf
from cogfabric.actors._agent import InFlight, MailboxSlots
from cogfabric.events import PrivateSet
from cogfabric.store import Journal

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

HOPS = 60


class Chain:
    """Passes a countdown back and forth between ``a`` and ``b``: each hop a send."""

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:
        left = message.payload
        ctx.set_private("left", left)
        if left > 0:
            ctx.send("b" if ctx.agent_id == "a" else "a", "hop", left - 1)


class Fan:
    """On ``go``, broadcasts ``tick``; each subscriber then sends ``done`` to ``sink``."""

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:
        if message.topic == "go":
            ctx.broadcast("tick", 1)
        elif message.topic == "tick":
            ctx.send("sink", "done", ctx.agent_id)


class Sink:
    def __init__(self) -> None:
        self.got: list[str] = []

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:
        self.got.append(message.payload)
        ctx.set_private("count", len(self.got))


class Blocked:
    """Waits on ``release`` (set by the test, also in a finally) for each message."""

    def __init__(self, release: threading.Event, started: threading.Event) -> None:
        self.release = release
        self.started = started

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:
        self.started.set()
        assert self.release.wait(5)
        ctx.set_private(message.topic, message.payload)


class Raises:
    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> str:
        if message.payload == "boom":
            msg = "boom"
            raise ValueError(msg)
        ctx.set_private("seen", message.payload)
        return "ok"


def _config(durability: str = "sync", call_timeout: float = 2.0) -> dict[str, Any]:
    return {
        "journal": {"durability": durability, "max_map_size": 64 << 20},
        "runtime": {"call_timeout": call_timeout},
    }


@pytest.fixture(params=["memory", "sync", "batch"])
def chain_runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[cf.Runtime]:
    path = None if request.param == "memory" else tmp_path / "journal"
    durability = "batch" if request.param == "batch" else "sync"
    with cf.Runtime.open(path, behaviors={"chain": Chain}, config=_config(durability)) as rt:
        yield rt


def test_settle_waits_for_a_chain_of_sends_to_its_end(chain_runtime: cf.Runtime) -> None:
    rt = chain_runtime
    rt.spawn("a", behavior="chain")
    rt.spawn("b", behavior="chain")
    rt.spawn("driver")
    rt.bus.send("driver", "a", "hop", HOPS)

    rt.settle(10)

    # the last hop (left 0) went to a or b by parity; every hop ran
    last = "a" if HOPS % 2 == 0 else "b"
    assert rt.agent(last).private("left") == 0
    assert rt.agent("b" if last == "a" else "a").private("left") == 1
    assert rt.bus.dead_letters() == []
    assert rt._in_flight.count == 0


def test_settle_waits_for_a_broadcast_and_the_sends_it_leads_to() -> None:
    sink = Sink()
    behaviors = {"fan": Fan}
    with cf.Runtime.open(None, behaviors=behaviors, config=_config()) as rt:
        rt.spawn("sink", behavior=sink)
        for n in range(8):
            rt.spawn(f"f{n}", behavior="fan")
            rt.bus.subscribe(f"f{n}", "tick")
        rt.bus.send("sink", "f0", "go")

        rt.settle(10)

        assert sorted(sink.got) == [f"f{n}" for n in range(8)]
        assert rt.agent("sink").private("count") == 8


def test_after_settle_everything_is_durable_in_batch_durability(tmp_path: Path) -> None:
    with cf.Runtime.open(tmp_path / "j", behaviors={"chain": Chain}, config=_config("batch")) as rt:
        rt.spawn("a", behavior="chain")
        rt.spawn("b", behavior="chain")
        rt.spawn("driver")
        rt.bus.send("driver", "a", "hop", HOPS)
        rt.settle(10)
        rt.backup(tmp_path / "copy")  # what is committed now: no flush() in between

    with Journal.open(tmp_path / "copy", readonly=True) as journal:
        lefts = [
            r.event.value
            for stream in ("agent/a", "agent/b")
            for r in journal.read(stream=stream)
            if isinstance(r.event, PrivateSet)
        ]
    assert sorted(lefts) == list(range(HOPS + 1))


def test_a_message_to_a_suspended_agent_is_dead_lettered_not_held() -> None:
    with cf.Runtime.open(None, behaviors={"chain": Chain}, config=_config()) as rt:
        rt.spawn("a", behavior="chain")
        rt.spawn("b", behavior="chain")
        rt.suspend("b")
        rt.bus.send("b", "a", "hop", 3)  # a sends to b, which is suspended

        rt.settle(5)  # returns: b's message is refused, not kept for a resume

        assert [(d.recipient, d.reason) for d in rt.bus.dead_letters()] == [("b", "agent suspended")]
        assert rt.agent("a").private("left") == 3
        assert rt.agent("b").private("left") is None


def test_a_behavior_that_raises_counts_as_done_once_its_agent_restarted() -> None:
    with cf.Runtime.open(None, behaviors={"raises": Raises}, config=_config()) as rt:
        rt.spawn("r", behavior="raises")
        rt.spawn("driver")
        rt.bus.send("driver", "r", "t", "boom")
        rt.bus.send("driver", "r", "t", "after")

        rt.settle(5)

        assert [d.reason for d in rt.bus.dead_letters()] == ["handler error"]
        assert rt.agent("r").private("seen") == "after"  # the restarted agent handled the next one


def test_a_killed_agents_mailbox_is_no_longer_in_flight() -> None:
    release, started = threading.Event(), threading.Event()
    blocked = Blocked(release, started)
    with cf.Runtime.open(None, config=_config(call_timeout=0.3)) as rt:
        rt.spawn("k", behavior=blocked)
        rt.spawn("driver")
        try:
            rt.bus.send("driver", "k", "first", 1)
            assert started.wait(5)
            with pytest.raises(cf.ActorTimeoutError):
                rt.kill("k")  # queued behind the message in hand: takes effect later
            rt.bus.send("driver", "k", "second", 2)  # behind the kill
            rt.bus.send("driver", "k", "third", 3)
        finally:
            release.set()

        rt.settle(5)

        assert "k" not in rt.agents()
        assert sorted(d.topic for d in rt.bus.dead_letters()) == ["second", "third"]
        assert {d.reason for d in rt.bus.dead_letters()} == {"agent killed"}
        assert rt._in_flight.count == 0


def test_settle_times_out_naming_what_is_in_flight() -> None:
    release, started = threading.Event(), threading.Event()
    with cf.Runtime.open(None, config=_config()) as rt:
        rt.spawn("slow", behavior=Blocked(release, started))
        rt.spawn("driver")
        try:
            rt.bus.send("driver", "slow", "one", 1)
            rt.bus.send("driver", "slow", "two", 2)
            assert started.wait(5)
            began = time.monotonic()
            with pytest.raises(cf.SettleTimeoutError) as caught:
                rt.settle(0.2)
            assert time.monotonic() - began < 1.5
        finally:
            release.set()
        error = caught.value
        assert (error.in_flight, error.busy) == (2, ("slow",))
        assert str(error) == "settle: 2 messages still in flight after 0.2 s (held by 'slow')"
        assert isinstance(error, cf.ActorTimeoutError)
        assert isinstance(error, TimeoutError)
        again = copy.deepcopy(error)  # rebuilt from its state, as a worker process's error is
        assert (type(again), again.in_flight, again.busy, str(again)) == (
            cf.SettleTimeoutError,
            2,
            ("slow",),
            str(error),
        )

        rt.settle(5)  # nothing cancelled: both messages are handled
        assert rt.agent("slow").private("two") == 2


def test_settle_from_a_behavior_is_refused() -> None:
    box: dict[str, cf.Runtime] = {}

    class CallsSettle:
        def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> str:  # noqa: ARG002
            try:
                box["rt"].settle(5)
            except cf.AgentRunningError as exc:
                return str(exc)
            return "settled"

    with cf.Runtime.open(None, config=_config()) as rt:
        box["rt"] = rt
        rt.spawn("s", behavior=CallsSettle())
        rt.spawn("driver")
        began = time.monotonic()

        reply = rt.bus.request("driver", "s", "settle", timeout=5)

        assert time.monotonic() - began < 1.5  # refused at once, not after settle's timeout
        assert reply.payload.startswith("agentfabric: agent running: 's' (its own behavior called settle()")


def test_a_request_that_times_out_ends_its_behaviors_message() -> None:
    class Defers:
        def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:  # noqa: ARG002
            return None  # never answered

    class Asks:
        def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:  # noqa: ARG002
            with pytest.raises(cf.IpcTimeoutError):
                ctx.request("d", "q", timeout=0.2)
            ctx.set_private("gave_up", True)

    with cf.Runtime.open(None, config=_config()) as rt:
        rt.spawn("d", behavior=Defers())
        rt.spawn("asker", behavior=Asks())
        rt.bus.send("d", "asker", "go")

        rt.settle(5)  # the asker's behavior runs until its request timed out

        assert rt.agent("asker").private("gave_up") is True
        assert [d.reason for d in rt.bus.dead_letters()] == ["timeout"]


def test_settle_on_a_closed_runtime_and_during_close() -> None:
    release, started = threading.Event(), threading.Event()
    outcome: list[BaseException | None] = []
    rt = cf.Runtime.open(None, config=_config(call_timeout=0.5))
    try:
        rt.spawn("slow", behavior=Blocked(release, started))
        rt.spawn("driver")
        rt.bus.send("driver", "slow", "one", 1)
        assert started.wait(5)

        def settle() -> None:
            try:
                rt.settle(10)
            except BaseException as exc:  # noqa: BLE001 - the test looks at it
                outcome.append(exc)
            else:
                outcome.append(None)

        waiter = threading.Thread(target=settle)
        waiter.start()
        began = time.monotonic()
        rt.close()  # gives the busy agent call_timeout, then goes on
        waiter.join(5)
        assert time.monotonic() - began < 3  # not settle's 10 s
        assert len(outcome) == 1
        assert isinstance(outcome[0], cf.RuntimeClosedError)
    finally:
        release.set()
        rt.close()
    with pytest.raises(cf.RuntimeClosedError):
        rt.settle()


def test_settles_timeout_is_real_time_under_freezegun_without_tick() -> None:
    release, started = threading.Event(), threading.Event()
    try:
        with cf.Runtime.open(None, behaviors={"chain": Chain}, config=_config()) as rt:
            rt.spawn("a", behavior="chain")
            rt.spawn("b", behavior="chain")
            rt.spawn("slow", behavior=Blocked(release, started))
            with freeze_time("2024-01-01"):  # time.monotonic stands still
                rt.bus.send("slow", "a", "hop", 9)
                rt.settle(5)
                assert rt.agent("b").private("left") == 0
                rt.bus.send("a", "slow", "go", 1)
                with pytest.raises(cf.SettleTimeoutError):
                    rt.settle(0.2)  # ends: the condition's wait is real time
            release.set()
            rt.settle(5)
    finally:
        release.set()


def test_settle_checks_its_timeout() -> None:
    with cf.Runtime.open(None, config=_config()) as rt, pytest.raises(TypeError):
        rt.settle("1")  # type: ignore[arg-type]


def test_settle_of_an_idle_runtime_returns_at_once(tmp_path: Path) -> None:
    with cf.Runtime.open(tmp_path / "j", config=_config()) as rt:
        rt.spawn("a")
        rt.agent("a").set_private("k", 1)  # a handle's call is a mailbox message too: done
        began = time.monotonic()
        rt.settle()
        assert time.monotonic() - began < 1.0


def test_mailbox_slots_count_messages_in_flight() -> None:
    flight = InFlight()
    slots = MailboxSlots(2, flight)
    assert slots.acquire(0)
    slots.take()
    assert slots.acquire_control(0)
    assert flight.count == 3
    slots.release()  # a slot given back unused: its message never arrived
    assert flight.count == 2
    slots.take_up()  # the agent takes a message up: still in flight while handled
    slots.release_control()
    assert flight.count == 2
    slots.handled()
    slots.handled()
    assert flight.count == 0
    slots.take()
    slots.take()
    assert flight.count == 2
    slots.retire()  # the actor ended with two messages left in its mailbox
    assert flight.count == 0
    slots.take()  # taken after its actor ended: nothing will handle it, nothing counts
    slots.release()
    assert flight.count == 0
    assert flight.wait_for_zero(time.monotonic(), lambda: False)


def test_wait_for_zero_wakes_when_the_count_reaches_zero() -> None:
    flight = InFlight()
    slots = MailboxSlots(1, flight)
    assert slots.acquire(0)
    assert not flight.wait_for_zero(time.monotonic() + 0.05, lambda: False)

    def finish() -> None:
        slots.take_up()
        slots.handled()

    done = threading.Timer(0.05, finish)
    done.start()
    try:
        began = time.monotonic()
        assert flight.wait_for_zero(time.monotonic() + 5, lambda: False)
        assert time.monotonic() - began < 2
    finally:
        done.join()

"""A review of the handle's direct reads and of ``Runtime._ask`` under the runtime's lock.

Session 56 answers a handle's read of an idle agent on the calling thread
(``AgentActor.read_now``) and asks every other call under the runtime's lock
(``_ask_current``). These tests pin what a caller relies on around them: the refusals a
behavior gets before any read, the runtime's lock taken on every call without a hang
against kills, spawns, recoveries, behaviors calling handles, a kept ``ctx`` and a
``close()`` from another thread, and a flush asked as a kill ends an agent's actor.
"""

from __future__ import annotations

import queue
import random
import threading
from typing import TYPE_CHECKING

import pytest

import cogfabric as cf
from tests.test_ask_kill_race_s56 import called_as_the_kill_ends_the_actor
from tests.test_rounds_s55_h10 import WAIT, _open

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

READ_NAMES = ("private", "task_context", "context_view", "cognitive_state")


def _read(handle: cf.Agent, name: str) -> object:
    return handle.private("k") if name == "private" else getattr(handle, name)()


# ------------------------------------------------------------- refusals before the read


def test_a_behavior_reading_its_requester_by_handle_is_refused_before_any_read(tmp_path: Path) -> None:
    """``_refuse_waiting_for_itself`` comes before ``read_now``: no read of an agent waiting on it."""
    refused: dict[str, object] = {}

    class Asker:
        def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:  # noqa: ARG002
            return ctx.request("b", "read", None, timeout=WAIT).payload

    class Reader:
        rt: cf.Runtime

        def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> str:  # noqa: ARG002
            for name in READ_NAMES:
                for target in ("a", "b"):  # its requester, which waits for it; itself
                    try:
                        refused[f"{target}.{name}"] = _read(self.rt.agent(target), name)
                    except cf.AgentRunningError as exc:
                        refused[f"{target}.{name}"] = exc
            return "read"

    reader = Reader()
    with _open(tmp_path, "batch") as rt:
        reader.rt = rt
        rt.spawn("a", behavior=Asker())
        rt.spawn("b", behavior=reader)
        assert rt.bus.request("app", "a", "go", None, timeout=WAIT).payload == "read"
        rt.settle(WAIT)
    assert sorted(refused) == sorted(f"{t}.{n}" for t in "ab" for n in READ_NAMES)
    assert all(isinstance(exc, cf.AgentRunningError) for exc in refused.values()), refused
    assert "waits for that behavior's reply" in str(refused["a.private"])
    assert "its own behavior" in str(refused["b.private"])


# ------------------------------------------------------------- a flush as a kill ends the actor


def test_a_flush_asked_as_a_kill_ends_the_actor_is_not_lost_behind_the_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """flush() asks each busy agent a no-op under the runtime's lock (``_ask_current``), as ``_ask`` does.

    Pykka's ask checks that the actor lives, then queues: a kill's stop that ended the
    actor in between left the no-op in a dead inbox, and flush() waited out its timeout,
    then raised ActorTimeoutError naming the killed agent "still busy".
    """
    rt, _, _ = called_as_the_kill_ends_the_actor(monkeypatch, lambda rt, _handle: rt.flush(2.0))
    try:  # the no-op was queued before the kill, and answered
        assert "a" not in rt.agents()
        rt.settle(WAIT)
        assert rt.stats().in_flight == 0
    finally:
        rt.close()


# ------------------------------------------------------------- a storm of handle calls

PLAIN = tuple(f"p{i}" for i in range(4))
"""Agents without a behavior: busy only with a call, so a behavior's read of one never waits long."""
CHATTY = tuple(f"c{i}" for i in range(2))
"""Agents whose behavior reads and changes the plain agents through their handles."""
THREADS = 4
OPS = 120
"""Operations of each caller thread, in each of the storm's two parts."""

ALWAYS: tuple[type[Exception], ...] = (cf.AgentNotFoundError, cf.RuntimeClosedError)
"""What any call may raise here: its agent was killed meanwhile (a send: ``AgentNotRegisteredError``,
an ``AgentNotFoundError``), or the runtime closed."""
ALSO: dict[str, tuple[type[Exception], ...]] = {
    "suspend": (cf.AgentRetiredError,),
    "resume": (cf.AgentNotSuspendedError, cf.AgentRetiredError),
    "retire": (cf.AgentRunningError,),
    "recover": (cf.AgentRunningError, cf.AgentRetiredError),
    "spawn": (cf.AgentExistsError,),
}
"""What each call may raise besides, as its docstring says (a lifecycle call, a spawn)."""
CALLS = (*READ_NAMES, *READ_NAMES, "set_private", "set_private", "send", "send", *ALSO, "kill", "publish")
"""The calls a caller thread picks from at random: reads and changes twice as often."""


class _Chatty:
    """Reads a plain agent by handle, changes another's and its own state, on each message."""

    def __init__(self, storm: _Storm) -> None:
        self.storm = storm

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:
        storm = self.storm
        storm.ctxs.append(ctx)  # kept: the storm's ctx thread changes its state meanwhile
        n = message.payload if isinstance(message.payload, int) else 0
        target = PLAIN[n % len(PLAIN)]
        try:
            handle = storm.rt.agent(target)
            _read(handle, READ_NAMES[n % len(READ_NAMES)])
            handle.set_private("from", ctx.agent_id)
        except ALWAYS:
            pass
        except Exception as exc:  # noqa: BLE001 - the test fails on it, below
            storm.unexpected.append(("behavior", exc))
        ctx.set_private("seen", n)


class _Storm:
    """Caller threads calling handles at random, a kept ctx's thread, and (at last) a closer."""

    def __init__(self, rt: cf.Runtime, seed: int) -> None:
        self.rt = rt
        self.seed = seed
        self.unexpected: list[tuple[str, BaseException]] = []
        self.ctxs: list[cf.AgentContext] = []
        self.done = 0
        self.count = threading.Lock()
        self.halfway = threading.Event()
        self.target = THREADS * OPS
        self.ticks: queue.SimpleQueue[int | None] = queue.SimpleQueue()

    def spawn(self, agent_id: str) -> None:
        if agent_id in PLAIN:
            self.rt.spawn(agent_id, task_id="t")
        else:
            self.rt.spawn(agent_id, task_id="t", behavior=_Chatty(self))

    def op(self, rng: random.Random) -> None:
        name = rng.choice(CALLS)
        try:
            self.call(name, rng.choice(PLAIN + CHATTY), rng)
        except ALWAYS + ALSO.get(name, ()):
            pass
        except Exception as exc:  # noqa: BLE001 - the test fails on it
            self.unexpected.append((name, exc))
        with self.count:
            self.done += 1
            if self.done >= self.target:
                self.halfway.set()
        self.ticks.put(self.done)

    def call(self, name: str, agent_id: str, rng: random.Random) -> None:
        rt = self.rt
        if name == "spawn":
            self.spawn(agent_id)
        elif name == "publish":
            rt.publish_task_context("t", {"n": rng.random()})
        elif name == "send":
            rt.bus.send("app", agent_id, "go", rng.randrange(1000))
        elif name in ("suspend", "resume", "retire", "kill"):
            getattr(rt, name)(agent_id)
        elif name == "recover":
            rt.recover(agent_id, cf.CognitiveState(decision=rng.random()))
        elif name == "set_private":
            rt.agent(agent_id).set_private("k", {"by": threading.current_thread().name, "n": rng.random()})
        else:
            _read(rt.agent(agent_id), name)

    def caller(self, index: int) -> None:
        rng = random.Random(self.seed * 100 + index)
        for _ in range(OPS):
            self.op(rng)

    def kept_ctx(self) -> None:
        """A change through the last ctx kept, for each call the callers made (None: the end)."""
        while (i := self.ticks.get(timeout=8 * WAIT)) is not None:
            for ctx in self.ctxs[-1:]:
                try:
                    ctx.set_private("kept", i)
                except ALWAYS:
                    pass
                except Exception as exc:  # noqa: BLE001 - the test fails on it
                    self.unexpected.append(("kept ctx", exc))

    def run(self, *, closer: Callable[[], None] | None) -> None:
        callers = [threading.Thread(target=self.caller, args=(i,), daemon=True) for i in range(THREADS)]
        kept = threading.Thread(target=self.kept_ctx, daemon=True)
        threads = [*callers, kept]
        if closer is not None:
            threads.append(threading.Thread(target=closer, daemon=True))
        for thread in threads:
            thread.start()
        for thread in callers:
            thread.join(8 * WAIT)
        self.ticks.put(None)
        for thread in threads:
            thread.join(2 * WAIT)
        hung = [thread.name for thread in threads if thread.is_alive()]
        assert not hung, f"hung: {hung}"
        assert not self.unexpected, self.unexpected


@pytest.mark.parametrize("mode", ["memory", "sync", "batch"])
@pytest.mark.parametrize("seed", [1, 2])
def test_handle_calls_against_kills_spawns_recoveries_and_a_close_neither_hang_nor_leak(
    tmp_path: Path, mode: str, seed: int
) -> None:
    rt = _open(tmp_path, mode)
    try:
        storm = _Storm(rt, seed)
        for agent_id in PLAIN + CHATTY:
            storm.spawn(agent_id)
        storm.run(closer=None)
        rt.settle(WAIT)  # every message and call over: nothing in flight, nothing waiting
        assert rt.stats().in_flight == 0
        assert all(rt.agent(a).queued == 0 for a in rt.agents())
        for agent_id in rt.agents():  # each live agent answers every read, at once (idle)
            for name in READ_NAMES:
                _read(rt.agent(agent_id), name)
        handles = [rt.agent(a) for a in rt.agents()]
        rng = random.Random(seed)
        storm.target = rng.randrange(1, THREADS * OPS)  # the second part closes after that many calls
        storm.done = 0
        storm.halfway.clear()

        def close_at_random() -> None:
            storm.halfway.wait(8 * WAIT)
            rt.close()

        storm.run(closer=close_at_random)
        assert rt.closed
        for handle in handles:
            with pytest.raises(cf.RuntimeClosedError):
                handle.private("k")
    finally:
        rt.close()

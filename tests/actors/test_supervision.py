"""Behaviors, supervision, backpressure, timeouts, and DESIGN.md's deliberate differences."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime as dt
import functools
import gc
import logging
import os
import signal
import threading
import time
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import pykka
import pytest
from freezegun import freeze_time

from cogfabric.actors import (
    ActorTimeoutError,
    Agent,
    AgentContext,
    AgentExistsError,
    AgentNotFoundError,
    AgentNotRegisteredError,
    AgentNotSuspendedError,
    AgentRunningError,
    AgentState,
    Behavior,
    Config,
    FakeClock,
    InvalidSpawnSpecError,
    IpcHandlerError,
    IpcInvalidMessageError,
    IpcNoHandlerError,
    IpcTimeoutError,
    JournalConfig,
    MailboxFullError,
    MemoryConfig,
    Runtime,
    RuntimeClosedError,
    RuntimeConfig,
    ScriptedProvider,
    UserCodeError,
    _memory,
    _runtime,
)
from cogfabric.actors import _agent as agent_module
from cogfabric.actors._agent import CALL, AgentActor, MailboxSlots, Shared
from cogfabric.actors._bus import _Handoff
from cogfabric.actors._core import Core
from cogfabric.actors._writer import Ack, JournalWriter
from cogfabric.events import (
    ROLE_ASSISTANT,
    AgentFailed,
    AgentKilled,
    AgentRecovered,
    AgentSpawned,
    CognitiveState,
    IpcDeadLettered,
    IpcDelivered,
    IpcMessage,
    LlmOutputRecorded,
    Message,
    PrivateSet,
    SessionCreated,
    SessionMessageAdded,
)
from cogfabric.store import InvalidStreamError, Journal, JournalError, JournalFullError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from pathlib import Path

    from cogfabric.events import Event


class _LateCall:
    """Agent ``d``, whose behavior leaves behind a thread that calls ``ctx.llm`` once told.

    It is told (``go``) when the agent has handed over the message's changes, its last
    ``_flush_outbox`` of the message; by default the agent then waits until the call
    has returned (``called``), so the call falls between that hand-over and the end
    of the message. ``at_last_hand_over`` replaces that step. ``run`` sends the message,
    waits until the call returned and the agent is idle, flushes and returns the
    journal's LLM outputs with their causes.
    """

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        at_last_hand_over: Callable[[_LateCall, AgentActor], None] | None = None,
    ) -> None:
        self.go, self.called, self.finished = threading.Event(), threading.Event(), threading.Event()
        self.callers: list[threading.Thread] = []
        self._at_last_hand_over = at_last_hand_over or _LateCall._let_it_call
        hand_over, receive = AgentActor._flush_outbox, AgentActor.on_receive

        def hand_over_then(actor: AgentActor) -> int:
            ticket = hand_over(actor)
            if actor.agent_id == "d" and actor.cause is None and not self.go.is_set():  # the message's last
                self._at_last_hand_over(self, actor)
            return ticket

        def receive_then_say_so(actor: AgentActor, message: Any) -> Any:
            try:
                return receive(actor, message)
            finally:
                if actor.agent_id == "d":
                    self.finished.set()

        self._patches = [("_flush_outbox", hand_over_then), ("on_receive", receive_then_say_so)]
        self._monkeypatch = monkeypatch

    def _let_it_call(self, actor: AgentActor) -> None:  # noqa: ARG002
        self.go.set()
        assert self.called.wait(10)

    def behavior(self) -> Behavior:
        late = self

        class Detached:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
                llm = ctx.llm

                def call() -> None:
                    late.go.wait(10)
                    llm.generate("late")
                    late.called.set()

                late.callers.append(threading.Thread(target=call, daemon=True))
                late.callers[-1].start()

        return Detached()

    def run(self, tmp_path: Path) -> list[tuple[str, str | None]]:
        from cogfabric.actors import ScriptedProvider  # noqa: PLC0415
        from cogfabric.events import LlmOutputRecorded  # noqa: PLC0415

        provider = ScriptedProvider(["out"])
        with Runtime.open(tmp_path / "j", behaviors={"d": self.behavior}, llm_provider=provider) as rt:
            rt.spawn("d", behavior="d")
            for name, patched in self._patches:
                self._monkeypatch.setattr(AgentActor, name, patched)
            rt.bus.send("x", "d", "a")
            assert self.called.wait(10)  # the call returned
            assert self.finished.wait(10)  # and the agent is idle; nothing more is sent to it
            rt.flush()
            journal = rt._journal
            assert journal is not None
            return [
                (r.event.output, r.event.cause)
                for r in journal.read()
                if isinstance(r.event, LlmOutputRecorded)
            ]


def _shared_pausing(
    caller: threading.Thread, checked: threading.Event, go_on: threading.Event
) -> type[Shared]:
    """A ``Shared`` whose ``busy`` holds ``caller`` just after it read it, until ``go_on``."""
    slot: Any = vars(Shared)["busy"]

    def read(shared: Shared) -> bool:
        value: bool = slot.__get__(shared, Shared)
        if threading.current_thread() is caller and not checked.is_set():
            checked.set()
            assert go_on.wait(10)
        return value

    def write(shared: Shared, value: bool) -> None:
        slot.__set__(shared, value)

    return type("PausingShared", (Shared,), {"__slots__": (), "busy": property(read, write)})


class _CtxKeeper:
    """A behavior that keeps each ``ctx`` it is handed, for a test to call later from elsewhere."""

    def __init__(self, kept: list[AgentContext]) -> None:
        self._kept = kept

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> str:  # noqa: ARG002
        self._kept.append(ctx)
        return "kept"


class _WatchedLock:
    """An agent's noted-facts lock that says when its actor found it taken or released it."""

    def __init__(self, real: Any, moved: threading.Event) -> None:
        self.real = real
        self.moved = moved
        self.owner = threading.current_thread()  # made on the actor's thread

    def acquire(self) -> bool:
        if threading.current_thread() is self.owner:
            if self.real.acquire(blocking=False):
                return True
            self.moved.set()
        return bool(self.real.acquire())

    def release(self) -> None:
        self.real.release()
        if threading.current_thread() is self.owner:
            self.moved.set()

    def __enter__(self) -> None:
        self.real.acquire()

    def __exit__(self, *exc: object) -> None:
        self.real.release()


class _Stranger:
    """A behavior whose class no test registers: answers ["stranger", payload]; raises on 'boom'."""

    def __init__(self) -> None:
        self.handled = 0

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> object:  # noqa: ARG002
        self.handled += 1
        if message.topic == "boom":
            msg = "boom"
            raise RuntimeError(msg)
        return ["stranger", message.payload]


class Gate:
    """Blocks on ``release`` while handling topic 'block'; raises on 'boom'; records the rest."""

    started: ClassVar[threading.Event] = threading.Event()
    release: ClassVar[threading.Event] = threading.Event()
    seen: ClassVar[list[IpcMessage]] = []
    instances: ClassVar[int] = 0

    def __init__(self) -> None:
        Gate.instances += 1

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:
        if message.topic == "block":
            Gate.started.set()
            assert Gate.release.wait(10)
        if message.topic == "boom":
            ctx.set_private("before-boom", 1)
            msg = "boom"
            raise ValueError(msg)
        Gate.seen.append(message)
        ctx.set_private("last", message.payload)
        return "ok"


@pytest.fixture(autouse=True)
def _reset_gate() -> None:
    Gate.started = threading.Event()
    Gate.release = threading.Event()
    Gate.seen = []
    Gate.instances = 0


def _running(runtime: Runtime, agent_id: str = "a") -> Agent:
    """Spawn an agent running ``Gate`` and hand it the message it blocks on (until ``Gate.release``)."""
    agent = runtime.spawn(agent_id, behavior="gate")
    runtime.bus.send("x", agent_id, "block")
    assert Gate.started.wait(10)
    return agent


@contextlib.contextmanager
def _appends_held(runtime: Runtime) -> Iterator[tuple[threading.Event, threading.Event]]:
    """Hold the runtime's journal appends until ``release`` (set on leaving); ``entered`` once one waits."""
    journal = runtime._journal
    assert journal is not None
    append = journal.append
    entered, release = threading.Event(), threading.Event()

    def held(*args: Any, **kwargs: Any) -> list[int]:
        entered.set()
        assert release.wait(10)
        return append(*args, **kwargs)

    journal.append = held  # type: ignore[method-assign]
    try:
        yield entered, release
    finally:
        release.set()


def _open(
    path: Path | None,
    *,
    mailbox: int = 100,
    timeout: float = 10.0,
    mode: str = "sync",
    behaviors: dict[str, Any] | None = None,
) -> Runtime:
    config = Config(
        journal=JournalConfig(durability=mode),  # type: ignore[arg-type]
        runtime=RuntimeConfig(mailbox_size=mailbox, call_timeout=timeout),
    )
    return Runtime.open(path, config=config, clock=FakeClock(), behaviors={"gate": Gate, **(behaviors or {})})


@contextlib.contextmanager
def _short_call_timeout(
    runtime: Runtime, seconds: float, *, writer_too: bool = False, writer_seconds: float | None = None
) -> Iterator[None]:
    """``call_timeout`` is ``seconds`` inside, only for the calls a test expects to time out.

    The set-up and the checks after keep the runtime's own (10 s): a synced commit that
    outlasts a short one on a loaded machine would fail them for nothing. ``writer_too``:
    the journal writer's own copy too (read by its ``stop``, close()'s wait for a stalled
    disk, and by an agent's wait for the writer to be past a commit), ``writer_seconds``
    if given: its ``stop`` gives up on a commit under way for ten times that, so a test
    whose close() must give up on a stalled disk waits that long, not ten ``seconds``.

    A call from outside the agents whose own commit the test holds at a gate times out
    however short ``seconds`` is: 0.1 there. Where an agent's own wait, or something
    that must not time out, is inside, the tests keep 0.2 to 0.5.
    """
    core = runtime._core
    writer = core.writer if writer_too else None
    kept, core.call_timeout = core.call_timeout, seconds
    if writer is not None:
        kept_writer, writer._timeout = writer._timeout, seconds if writer_seconds is None else writer_seconds
    try:
        yield
    finally:
        core.call_timeout = kept
        if writer is not None:
            writer._timeout = kept_writer


@contextlib.contextmanager
def _short_call_timeout_once_answered(runtime: Runtime, provider: Any, seconds: float) -> Iterator[None]:
    """``call_timeout`` is ``seconds`` from when ``provider`` answers on: for a turn's output record.

    The turn's user message (and what the provider does before it answers) keeps the
    runtime's own, as ``_short_call_timeout`` keeps it for the set-up: only the output
    record's commit, the one a test stalls, is meant to time out.
    """
    core = runtime._core
    kept, generate = core.call_timeout, provider.generate

    def answered(prompt: str, **params: Any) -> str:
        output: str = generate(prompt, **params)
        core.call_timeout = seconds
        return output

    provider.generate = answered
    try:
        yield
    finally:
        del provider.generate
        core.call_timeout = kept


class TestSpawnMany:
    def test_many_spawns_share_one_commit(self, tmp_path: Path) -> None:
        with _open(tmp_path / "j") as runtime:
            agents = runtime.spawn_many([{"agent_id": f"a{i}", "task_id": "t"} for i in range(50)])

            assert [a.id for a in agents] == [f"a{i}" for i in range(50)]
            assert runtime._journal is not None
            assert runtime._journal.last_seq == 50

    def test_one_bad_spec_spawns_nothing(self, tmp_path: Path) -> None:
        with _open(tmp_path / "j") as runtime:
            runtime.spawn("taken")

            with pytest.raises(InvalidSpawnSpecError, match="unknown spawn arguments"):
                runtime.spawn_many([{"agent_id": "x"}, {"agent_id": "y", "colour": "red"}])
            with pytest.raises(InvalidSpawnSpecError, match="share"):
                runtime.spawn_many([{"agent_id": "x"}, {"agent_id": "x"}])

            assert runtime.agents() == ["taken"]


class TestBehaviors:
    def test_an_instance_of_a_registered_class_or_not_is_accepted_and_an_unknown_name_refused(self) -> None:
        with _open(None) as runtime:
            runtime.spawn("a", behavior=Gate())
            runtime.spawn("b", behavior=_Stranger())

            with pytest.raises(InvalidSpawnSpecError, match="unknown behavior"):
                runtime.spawn("c", behavior="nope")
            assert runtime.agents() == ["a", "b"]

    def test_an_unregistered_instance_runs_survives_a_restart_and_is_not_reattached_on_reopen(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        # "an instance's class must be registered to be reattached": it runs, but a reopen has no factory
        stranger = _Stranger()
        with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
            runtime.spawn("s", behavior=stranger)
            assert runtime.bus.request("x", "s", "q", 1, timeout=10).payload == ["stranger", 1]
            with pytest.raises(IpcHandlerError):
                runtime.bus.request("x", "s", "boom", timeout=10)
            # restarted from the journal, it keeps the instance: there is no factory to make another
            assert runtime.bus.request("x", "s", "q", 2, timeout=10).payload == ["stranger", 2]
        assert stranger.handled == 3
        assert "_Stranger is not registered: it runs, but a reopen cannot reattach it" in caplog.text

        with Journal.open(tmp_path / "j", readonly=True) as journal:
            spawned = next(r.event for r in journal.read() if isinstance(r.event, AgentSpawned))
        assert spawned.behavior == f"{__name__}._Stranger"

        with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
            assert runtime.agents() == ["s"]
            with pytest.raises(IpcNoHandlerError, match="no behavior"):
                runtime.bus.request("x", "s", "q", 3, timeout=10)
        registered = {spawned.behavior: _Stranger}  # registered by the journaled name, it is reattached
        with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors=registered) as runtime:
            assert runtime.bus.request("x", "s", "q", 4, timeout=10).payload == ["stranger", 4]

    def test_an_instance_runs_as_given_and_a_fresh_one_after_a_reopen(self, tmp_path: Path) -> None:
        class Tagged:
            def __init__(self, tag: str = "default") -> None:
                self.tag = tag

            def on_message(self, ctx: AgentContext, message: IpcMessage) -> str:  # noqa: ARG002
                return self.tag

        behaviors: dict[str, Any] = {"tagged": Tagged}
        with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors=behaviors) as runtime:
            runtime.spawn("t", behavior=Tagged("custom"))
            runtime.spawn("u", behavior=Tagged)  # the registered class: a fresh instance
            assert runtime.bus.request("x", "t", "q", timeout=10).payload == "custom"
            assert runtime.bus.request("x", "u", "q", timeout=10).payload == "default"
        with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors=behaviors) as runtime:
            assert runtime.bus.request("x", "t", "q", timeout=10).payload == "default"

    def test_one_instance_serves_one_live_agent(self) -> None:
        gate = Gate()
        with _open(None) as runtime:
            with pytest.raises(InvalidSpawnSpecError, match="given to two agents"):
                runtime.spawn_many([{"agent_id": "a", "behavior": gate}, {"agent_id": "b", "behavior": gate}])
            runtime.spawn("a", behavior=gate)
            with pytest.raises(InvalidSpawnSpecError, match="runs agent 'a' already"):
                runtime.spawn("b", behavior=gate)
            runtime.kill("a")
            runtime.spawn("b", behavior=gate)  # free again once its agent is gone

            assert runtime.agents() == ["b"]

    def test_one_instance_is_refused_while_its_first_spawn_is_under_way(self, tmp_path: Path) -> None:
        # The first spawn waits for its commit (held here): its agent is not registered
        # yet, and a second spawn with the instance, in any runtime, must not slip through.
        gate = Gate()
        with _open(tmp_path / "j") as first, _open(None) as second:
            with _appends_held(first) as (entered, release):
                spawning = threading.Thread(target=first.spawn, args=("a",), kwargs={"behavior": gate})
                spawning.start()
                try:
                    assert entered.wait(10)
                    for runtime in (first, second):
                        with pytest.raises(InvalidSpawnSpecError, match="being spawned for another agent"):
                            runtime.spawn("b", behavior=gate)
                finally:
                    release.set()
                    spawning.join(10)
            with pytest.raises(InvalidSpawnSpecError, match="runs agent 'a' of another runtime already"):
                second.spawn("b", behavior=gate)

            assert first.agents() == ["a"]

    def test_one_instance_is_refused_while_a_closing_runtime_still_runs_it(self) -> None:
        gate = Gate()
        with _open(None) as first, _open(None) as second:
            first.spawn("a", behavior=gate)
            first.bus.send("x", "a", "block")
            assert Gate.started.wait(10)
            stopping = threading.Event()
            stop_agents = first._stop_agents

            def stop_agents_seen(entries: Any) -> None:
                stopping.set()  # close() has taken the agents out: it now waits for 'a'
                stop_agents(entries)

            first._stop_agents = stop_agents_seen  # type: ignore[method-assign]
            closing = threading.Thread(target=first.close)
            closing.start()
            try:
                assert stopping.wait(10)
                with pytest.raises(InvalidSpawnSpecError, match="runs agent 'a' of another runtime already"):
                    second.spawn("b", behavior=gate)  # its on_message is still running in 'a'
            finally:
                Gate.release.set()
                closing.join(10)
            second.spawn("b", behavior=gate)  # free once that close is over

    def test_one_instance_is_refused_while_a_closed_runtime_that_gave_up_on_it_still_runs_it(self) -> None:
        # close() waits call_timeout for a busy behavior, then returns: the behavior runs on
        gate = Gate()
        with _open(None, timeout=0.3) as first, _open(None) as second:
            first.spawn("a", behavior=gate)
            first.bus.send("x", "a", "block")
            assert Gate.started.wait(10)
            first.close()  # gives up on 'a', whose on_message waits for Gate.release
            try:
                with pytest.raises(InvalidSpawnSpecError, match="may still run agent 'a' of a closed"):
                    second.spawn("b", behavior=gate)
            finally:
                Gate.release.set()
            for _, _, stopped in list(_runtime._GIVEN_UP):
                assert stopped.wait(10)

            second.spawn("b", behavior=gate)  # free once its actor has stopped

            assert second.agents() == ["b"]

    def test_a_closed_runtime_is_not_kept_alive_by_an_agent_its_close_gave_up_on(self) -> None:
        first = _open(None, timeout=0.3)
        _running(first)  # 'a' blocks in on_message until Gate.release
        stopped = first._entry("a").ref.actor_stopped
        first.close()
        Gate.release.set()
        assert stopped.wait(10)
        gone = weakref.ref(first)
        del first
        gc.collect()

        assert gone() is None

    @pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
    def test_a_forked_child_does_not_inherit_a_spawn_under_way_in_its_parent(self, tmp_path: Path) -> None:
        # the child has no thread of its parent's: nothing there would ever release the claim
        gate = Gate()
        with _open(tmp_path / "j") as parent:
            with _appends_held(parent) as (entered, release):
                spawning = threading.Thread(target=parent.spawn, args=("a",), kwargs={"behavior": gate})
                spawning.start()
                try:
                    assert entered.wait(10)
                    pid = os.fork()
                    if pid == 0:  # the child: exit 0 only if its own runtime takes the instance
                        code = 1
                        try:
                            signal.alarm(20)  # a child that hangs dies, and the parent's wait ends
                            with _open(None) as child:
                                child.spawn("c", behavior=gate)
                                code = 0
                        finally:
                            os._exit(code)
                    _, status = os.waitpid(pid, 0)
                finally:
                    release.set()
                    spawning.join(10)

            assert os.waitstatus_to_exitcode(status) == 0
            assert parent.agents() == ["a"]

    def test_a_spawn_retried_after_it_timed_out_is_told_the_agent_exists(self, tmp_path: Path) -> None:
        gate = Gate()
        with _open(tmp_path / "j") as runtime:
            # the short call_timeout only while the appends are held: the set-up's commits may be slow
            with _appends_held(runtime) as (entered, _), _short_call_timeout(runtime, 0.3):
                with pytest.raises(ActorTimeoutError):
                    runtime.spawn("a", behavior=gate)
                assert entered.is_set()
                with pytest.raises(AgentExistsError):  # not "being spawned for another agent"
                    runtime.spawn("a", behavior=gate)
            runtime.flush()

            assert runtime.agents() == ["a"]
            with pytest.raises(AgentExistsError):  # and once it is stored, the same
                runtime.spawn("a", behavior=gate)

    def test_one_instance_serves_one_live_agent_of_any_runtime_of_the_process(self) -> None:
        gate = Gate()
        with _open(None) as first, _open(None) as second:
            first.spawn("a", behavior=gate)
            with pytest.raises(InvalidSpawnSpecError, match="runs agent 'a' of another runtime already"):
                second.spawn("b", behavior=gate)
            first.close()
            second.spawn("b", behavior=gate)  # free again once its runtime closed

            assert second.agents() == ["b"]

    def test_a_class_or_a_spec_that_cannot_be_spawned_is_refused_clearly(self) -> None:
        with _open(None) as runtime:
            with pytest.raises(InvalidSpawnSpecError, match="behavior class _Stranger is not registered"):
                runtime.spawn("a", behavior=_Stranger)
            with pytest.raises(InvalidSpawnSpecError, match="a spawn spec is a mapping"):
                runtime.spawn_many(["b"])  # type: ignore[list-item]

            assert runtime.agents() == []

    @pytest.mark.parametrize("mode", ["sync", "batch"])
    def test_a_behavior_that_calls_the_runtime_on_its_own_agent_is_refused_at_once(
        self, tmp_path: Path, mode: str
    ) -> None:
        runtimes: list[Runtime] = []
        calls: dict[str, Callable[[Runtime, str], object]] = {
            "suspend": lambda rt, me: rt.suspend(me),
            # RUNNING, yet its own resume is not AgentNotSuspendedError: it would wait for itself
            "resume": lambda rt, me: rt.resume(me),
            "kill": lambda rt, me: rt.kill(me),
            "set_private": lambda rt, me: rt.agent(me).set_private("k", 1),
            "private": lambda rt, me: rt.agent(me).private("k"),
            "subscribe": lambda rt, me: rt.bus.subscribe(me, "news"),
        }

        class SelfCaller:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> object:
                try:
                    calls[message.topic](runtimes[0], ctx.agent_id)
                except AgentRunningError as exc:
                    return str(exc)
                return "no error"

        with _open(tmp_path / "j", timeout=5, mode=mode, behaviors={"s": SelfCaller}) as rt:
            runtimes.append(rt)
            rt.spawn("me", behavior="s")
            for topic in calls:  # each waited call_timeout for itself, then timed out, before
                answer = rt.bus.request("x", "me", topic, timeout=4).payload
                assert answer.startswith("agentfabric: agent running: 'me' (its own behavior called"), topic
            assert rt.agent("me").lifecycle == AgentState.IDLE
            assert rt.bus.subscribers("news") == []

    def test_a_behavior_that_sends_its_own_agent_a_request_through_the_bus_is_refused_at_once(
        self,
    ) -> None:
        runtimes: list[Runtime] = []

        class Asker:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> object:  # noqa: ARG002
                try:
                    runtimes[0].bus.request("x", ctx.agent_id, "ping", timeout=20)
                except IpcInvalidMessageError as exc:
                    return str(exc)  # it waited out its timeout, then the agent handled it stale
                return "no error"

        with _open(None, behaviors={"asker": Asker}) as rt:
            runtimes.append(rt)
            rt.spawn("me", behavior="asker")
            answer = rt.bus.request("x", "me", "go", timeout=10).payload

        assert answer == "agentipc: invalid message: 'me' cannot be sent a request from its own behavior"

    @pytest.mark.parametrize("mode", ["sync", "batch"])
    def test_a_behavior_flushes_its_own_changes_without_waiting_for_other_agents(
        self, tmp_path: Path, mode: str
    ) -> None:
        runtimes: list[Runtime] = []
        blocked, release = threading.Event(), threading.Event()

        class Flusher:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> object:
                if message.topic == "block":
                    blocked.set()
                    assert release.wait(10)
                    return None
                ctx.set_private("mine", message.payload)
                ctx.subscribe("news")
                runtimes[0].flush()  # asked the blocked agent before, and timed out waiting for it
                journal = runtimes[0]._journal
                assert journal is not None
                stored = [r.event for r in journal.read(stream="agent/me")]
                return [type(e).__name__ for e in stored[-2:]]

        with _open(tmp_path / "j", timeout=3, mode=mode, behaviors={"f": Flusher}) as rt:
            runtimes.append(rt)
            rt.spawn("me", behavior="f")
            rt.spawn("busy", behavior="f")
            rt.bus.send("x", "busy", "block")
            assert blocked.wait(10)
            try:
                answer = rt.bus.request("x", "me", "flush", 7, timeout=10).payload
            finally:
                release.set()

            assert answer == ["PrivateSet", "IpcSubscribed"]
            assert rt.bus.subscribers("news") == ["me"]

    @pytest.mark.parametrize("where", ["behavior", "worker"])
    def test_ctx_flush_makes_the_agents_changes_durable_before_its_message_is_done(
        self, tmp_path: Path, where: str
    ) -> None:
        # In batch durability a change is handed over when the message is done: a
        # behavior that must make it durable before it answers (an exchange's fill
        # before its acknowledgement) calls ctx.flush(), with no runtime in reach.
        runtimes: list[Runtime] = []

        class Exchange:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> object:
                ctx.set_private("fill", message.payload)
                stored_before = self._stored()
                if where == "behavior":
                    ctx.flush(5)
                else:
                    worker = threading.Thread(target=ctx.flush)
                    worker.start()
                    worker.join(10)
                return [stored_before, self._stored()]

            def _stored(self) -> list[object]:
                journal = runtimes[0]._journal
                assert journal is not None
                stored = [r.event for r in journal.read(stream="agent/ex")]
                return [e.value for e in stored if isinstance(e, PrivateSet)]

        with _open(tmp_path / "j", mode="batch", behaviors={"ex": Exchange}) as rt:
            runtimes.append(rt)
            rt.spawn("ex", behavior="ex")
            answer = rt.bus.request("x", "ex", "fill", {"qty": 7}, timeout=10).payload

        assert answer == [[], [{"qty": 7}]]

    def test_ctx_flush_returns_at_once_without_a_journal_and_refuses_a_killed_agent(self) -> None:
        kept: list[AgentContext] = []
        with _open(None, behaviors={"keep": lambda: _CtxKeeper(kept)}) as rt:
            rt.spawn("k", behavior="keep")
            rt.bus.send("x", "k", "hello")
            rt.flush()
            ctx = kept[0]
            ctx.set_private("v", 1)

            ctx.flush()  # a memory-only runtime: nothing to wait for
            with pytest.raises(TypeError, match="a timeout is a number of seconds"):
                ctx.flush("1")  # type: ignore[arg-type]
            rt.kill("k")
            with pytest.raises(AgentNotFoundError):
                ctx.flush()
        with pytest.raises(RuntimeClosedError):
            ctx.flush()

    def test_ctx_flush_in_sync_durability_hands_over_the_llm_records_waiting(self, tmp_path: Path) -> None:
        # Each state change is durable on return in sync durability; a ctx.llm call's
        # record waits for the message's end like a batch change, and ctx.flush takes it.
        runtimes: list[Runtime] = []

        class Asker:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> object:  # noqa: ARG002
                ctx.llm.generate("hello")
                before = self._last()
                ctx.flush()
                return [before, self._last()]

            def _last(self) -> str:
                journal = runtimes[0]._journal
                assert journal is not None
                return [type(r.event).__name__ for r in journal.read(stream="agent/a")][-1]

        llm = ScriptedProvider(["hi"])
        with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"a": Asker}, llm_provider=llm) as rt:
            runtimes.append(rt)
            rt.spawn("a", behavior="a")
            answer = rt.bus.request("x", "a", "go", timeout=10).payload

        assert answer == ["AgentSpawned", "LlmOutputRecorded"]

    def test_an_agent_is_running_while_its_behavior_handles_a_message(self) -> None:
        with _open(None) as runtime:
            agent = _running(runtime)

            running = agent.lifecycle
            with pytest.raises(AgentRunningError):
                runtime.retire("a")
            with pytest.raises(AgentRunningError):
                runtime.recover("a", CognitiveState())
            Gate.release.set()
            runtime.flush()

            assert running == AgentState.RUNNING
            assert agent.lifecycle == AgentState.IDLE

    def test_resume_refuses_a_running_agent_at_once_as_it_is_not_suspended(self) -> None:
        # The original answers ErrAgentNotSuspended for any state but SUSPENDED; waiting
        # behind the running message gave ActorTimeoutError once it outlasted call_timeout.
        with _open(None) as runtime:
            agent = _running(runtime)
            try:
                # the resume alone waits briefly: the set-up and the flush keep the runtime's 10 s
                with _short_call_timeout(runtime, 0.2), pytest.raises(AgentNotSuspendedError):
                    runtime.resume("a")
                running = agent.lifecycle
            finally:
                Gate.release.set()
            runtime.flush()

            assert running == AgentState.RUNNING
            assert agent.lifecycle == AgentState.IDLE

    def test_a_resume_after_a_suspend_that_timed_out_follows_it_in_the_mailbox(self) -> None:
        # Refusing the resume at once (the agent is RUNNING) left the queued suspend the
        # last word: the agent ended SUSPENDED though the caller's last call was resume.
        with _open(None) as runtime:
            agent = _running(runtime)
            try:
                with _short_call_timeout(runtime, 0.2):  # not the flush: a late actor thread outlasts it
                    with pytest.raises(ActorTimeoutError):
                        runtime.suspend("a")
                    with pytest.raises(ActorTimeoutError):  # queued behind the suspend, not refused
                        runtime.resume("a")
            finally:
                Gate.release.set()
            runtime.flush()

            assert agent.lifecycle == AgentState.IDLE

    def test_a_resume_racing_the_agent_as_it_takes_a_timed_out_suspend_still_follows_it(self) -> None:
        # resume read the lifecycle (RUNNING), then whether a lifecycle call was pending:
        # if the behavior ended and the agent took the suspend between the two reads, it
        # saw neither and refused, and the suspend had the last word. The race is forced
        # here: reading whether a call is pending lets the agent take the suspend first.
        dequeued = threading.Event()

        class Preempted(MailboxSlots):
            armed = False

            def release_control(self) -> None:
                super().release_control()
                dequeued.set()  # the agent took a lifecycle call out of its mailbox

            @property
            def control_pending(self) -> bool:
                if Preempted.armed and threading.current_thread() is threading.main_thread():
                    Preempted.armed = False
                    Gate.release.set()  # the behavior ends...
                    assert dequeued.wait(10)  # ...and the agent takes the suspend
                return super().control_pending

        with _open(None) as runtime:
            agent = runtime.spawn("a", behavior="gate")
            shared = runtime._entry("a").shared
            shared.slots = Preempted(shared.slots._size)  # before its first message
            runtime.bus.send("x", "a", "block")
            assert Gate.started.wait(10)
            try:
                # the suspend alone times out: the resume is answered once the agent gets to it
                with _short_call_timeout(runtime, 0.3), pytest.raises(ActorTimeoutError):
                    runtime.suspend("a")
                Preempted.armed = True
                runtime.resume("a")
            finally:
                Gate.release.set()
            runtime.flush()

            assert agent.lifecycle == AgentState.IDLE

    def test_a_suspend_that_times_out_behind_a_running_message_still_takes_effect_and_says_so(self) -> None:
        with _open(None) as runtime:
            agent = _running(runtime)
            try:
                with (
                    _short_call_timeout(runtime, 0.2),  # not the flush and the resume after
                    pytest.raises(ActorTimeoutError, match="stays in its mailbox and takes effect"),
                ):
                    runtime.suspend("a")
            finally:
                Gate.release.set()
            runtime.flush()
            suspended = agent.lifecycle
            runtime.resume("a")

            assert suspended == AgentState.SUSPENDED
            assert agent.lifecycle == AgentState.IDLE

    def test_a_behavior_sees_its_own_layers_side_by_side_in_a_read_only_view(self) -> None:
        class Viewer:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> object:  # noqa: ARG002
                ctx.set_private("note", {"n": 1})
                view = ctx.context_view()
                with pytest.raises(TypeError):
                    view.private["note"] = 2  # type: ignore[index]
                return {"task": dict(view.task_shared), "private": dict(view.private)}

        with Runtime.open(None, clock=FakeClock(), behaviors={"viewer": Viewer}) as runtime:
            runtime.spawn("v", task_context={"goal": "g"}, behavior="viewer")

            reply = runtime.bus.request("x", "v", "look", timeout=10)

            assert reply.payload == {"task": {"goal": "g"}, "private": {"note": {"n": 1}}}
            assert runtime.agent("v").context_view() == runtime.agent("v").context_view()

    @pytest.mark.parametrize("error", [SystemExit(3), asyncio.CancelledError(), KeyboardInterrupt()])
    def test_a_behavior_raising_any_base_exception_fails_like_any_other_and_the_runtime_goes_on(
        self, tmp_path: Path, error: BaseException
    ) -> None:
        class Quitter:
            made = 0

            def __init__(self) -> None:
                Quitter.made += 1
                if Quitter.made > 1:  # the restart's factory call fails the same way
                    raise error

            def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ARG002
                raise error

        with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"quit": Quitter, "gate": Gate}) as rt:
            rt.spawn("q", behavior="quit")
            other = rt.spawn("o", behavior="gate")
            with pytest.raises(IpcHandlerError):
                rt.bus.request("x", "q", "go", timeout=10)

            assert rt.bus.request("x", "o", "hello", timeout=10).payload == "ok"  # every actor still runs
            other.set_private("k", 1)
            assert sorted(rt.agents()) == ["o", "q"]
            with pytest.raises(IpcNoHandlerError):  # restarted without a behavior: its factory failed
                rt.bus.request("x", "q", "go", timeout=10)
        with Journal.open(tmp_path / "j", readonly=True) as journal:
            failures = [r.event for r in journal.read() if isinstance(r.event, AgentFailed)]
        assert [(f.agent, f.error) for f in failures] == [("q", type(error).__name__)]

    def test_a_base_exception_from_a_values_own_code_on_an_agents_thread_fails_only_that_call(
        self, tmp_path: Path
    ) -> None:
        class Cancelling(Mapping[str, Any]):
            def __getitem__(self, key: str) -> Any:
                raise asyncio.CancelledError

            def __iter__(self) -> Iterator[str]:
                raise asyncio.CancelledError

            def __len__(self) -> int:
                return 1

        class Replier:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ARG002
                return Cancelling()  # copied for the reply outside the behavior's own call

        with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"reply": Replier}) as rt:
            a = rt.spawn("a")
            rt.spawn("r", behavior="reply")
            with pytest.raises(UserCodeError) as info:
                a.set_private("k", Cancelling())  # copied on a's actor thread
            with pytest.raises(IpcHandlerError):
                rt.bus.request("x", "r", "go", timeout=10)

            assert isinstance(info.value.__cause__, asyncio.CancelledError)
            a.set_private("k", 1)  # every actor still runs
            assert a.private("k") == 1
            assert rt.spawn("b").id == "b"
            assert rt.memory.create_session("u")

    @pytest.mark.parametrize("mode", ["sync", "batch"])
    def test_text_from_the_users_objects_that_utf8_cannot_encode_is_journaled_escaped(
        self, tmp_path: Path, mode: str
    ) -> None:
        from cogfabric.actors import ScriptedProvider  # noqa: PLC0415

        class Unprintable(Exception):  # noqa: N818
            def __str__(self) -> str:
                raise RuntimeError

        class BadRepr(Exception):  # noqa: N818
            def __repr__(self) -> str:
                return "bad repr \udc80"

        class RaisingRepr(Exception):  # noqa: N818
            def __repr__(self) -> str:
                raise AttributeError

        class Faulty:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:
                ctx.set_private("before", 1)
                if message.topic == "think":
                    return ctx.llm.generate("hello")
                if message.topic == "bad repr":
                    raise BadRepr
                if message.topic == "raising repr":
                    raise RaisingRepr
                raise Unprintable if message.topic == "unprintable" else ValueError("bad byte \udc80")

        provider = ScriptedProvider(["answer"], name="scripted \udc80", model="m \udcff")
        config = Config(journal=JournalConfig(durability=mode))  # type: ignore[arg-type]
        with Runtime.open(
            tmp_path / "j", config=config, behaviors={"f": Faulty}, llm_provider=provider
        ) as rt:
            rt.spawn("f", behavior="f")
            assert rt.bus.request("x", "f", "think", timeout=10).payload == "answer"
            for topic in ("surrogate", "unprintable", "bad repr", "raising repr"):
                with pytest.raises(IpcHandlerError):
                    rt.bus.request("x", "f", topic, timeout=10)
            rt.flush()
            live = rt.agent("f").context_view()
        with Journal.open(tmp_path / "j", readonly=True) as journal:
            events = [r.event for r in journal.read()]
        with Runtime.open(tmp_path / "j", config=config, behaviors={"f": Faulty}) as rt:
            assert rt.agent("f").context_view() == live  # replay agrees with the live agent

        (output,) = [e for e in events if isinstance(e, LlmOutputRecorded)]
        assert (output.provider, output.model) == ("scripted \\udc80", "m \\udcff")
        details = [e.detail for e in events if isinstance(e, AgentFailed)]
        assert details == ["bad byte \\udc80", "<Unprintable whose str() failed>", "", ""]
        letters = [e.error for e in events if isinstance(e, IpcDeadLettered)]  # the requesters' failures
        assert any(letter.endswith(": bad repr \\udc80") for letter in letters)  # as the requester was told

    def test_a_recipient_that_changes_a_payload_never_changes_the_senders_message(self) -> None:
        class Scribbler:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
                message.payload["list"].append("recipient-wrote")
                Gate.release.set()

        for mode in ("sync", "batch"):
            Gate.release = threading.Event()
            config = Config(journal=JournalConfig(durability=mode))
            with Runtime.open(None, config=config, behaviors={"scribble": Scribbler}) as rt:
                rt.spawn("s", behavior="scribble")

                sent = rt.bus.send("x", "s", "note", {"list": ["sender"]})
                assert Gate.release.wait(10)

                assert sent.payload == {"list": ["sender"]}, mode

    @pytest.mark.parametrize("mode", ["sync", "batch"])
    def test_a_caller_that_changes_a_sent_message_or_a_reply_never_changes_the_journal(
        self, tmp_path: Path, mode: str
    ) -> None:
        class Answerer:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ARG002
                return {"answer": ["as replied"]}

        config = Config(journal=JournalConfig(durability=mode))  # type: ignore[arg-type]
        with Runtime.open(tmp_path / "j", config=config, behaviors={"answer": Answerer}) as rt:
            rt.spawn("a", behavior="answer")
            sent = rt.bus.send("x", "a", "note", {"list": ["as sent"]})
            reply = rt.bus.request("x", "a", "ask", None, timeout=10)
            sent.payload["list"].append("changed later")  # in batch, before the writer encodes it
            reply.payload["answer"].append("changed later")
            rt.flush()
        with Journal.open(tmp_path / "j", readonly=True) as journal:
            journaled = {
                r.event.id: r.event.payload for r in journal.read() if isinstance(r.event, IpcMessage)
            }

        assert journaled[sent.id] == {"list": ["as sent"]}
        assert journaled[reply.id] == {"answer": ["as replied"]}

    def test_what_a_behavior_does_for_a_message_names_that_message_as_its_cause(self, tmp_path: Path) -> None:
        from cogfabric.actors import ScriptedProvider  # noqa: PLC0415
        from cogfabric.events import CheckpointTaken, CognitiveStateSet, LlmOutputRecorded  # noqa: PLC0415

        class Peer:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ARG002
                return "done"

        class Worker:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:
                ctx.set_private("seen", message.topic)
                ctx.set_cognitive_state(CognitiveState(context="c"))
                ctx.checkpoint_cognitive()
                ctx.llm.generate("think")
                ctx.send("peer", "note", 1)
                ctx.broadcast("news", 2)
                ctx.request("peer", "reply-me", 3, timeout=10)

        provider = ScriptedProvider(["out"])
        with Runtime.open(
            tmp_path / "j", behaviors={"worker": Worker, "peer": Peer}, llm_provider=provider
        ) as rt:
            rt.spawn("w", behavior="worker")
            rt.spawn("peer", behavior="peer")
            rt.agent("w").set_private("before", 1)  # a handle call: caused by no message
            tick = rt.bus.send("x", "w", "tick")
            rt.agent("w").private("seen")  # queued behind the tick: returns once it was handled
            rt.flush()
        with Journal.open(tmp_path / "j", readonly=True) as journal:
            events = [r.event for r in journal.read()]

        kinds = (PrivateSet, CognitiveStateSet, CheckpointTaken, LlmOutputRecorded)
        caused = [e for e in events if e.cause == tick.id]
        assert {type(e) for e in caused if isinstance(e, kinds)} == set(kinds)
        assert {(e.topic, e.kind) for e in caused if isinstance(e, IpcMessage)} == {
            ("note", "send"),
            ("news", "broadcast"),
            ("reply-me", "request"),
        }
        before = next(e for e in events if isinstance(e, PrivateSet) and e.key == "before")
        assert before.cause is None

    def test_what_a_behavior_sends_continues_the_trace_of_its_message(self, tmp_path: Path) -> None:
        # spec §3.3: a message's trace id is continued from the context, or newly minted
        class Relay:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:
                if message.topic == "start":
                    ctx.send("b", "hop", None)
                    ctx.broadcast("news", None)
                elif message.topic == "hop":
                    return ctx.request("c", "ask", None, timeout=10).payload
                return "answer"

        with Runtime.open(tmp_path / "j", behaviors={"relay": Relay}) as rt:
            for agent_id in ("a", "b", "c", "d"):
                rt.spawn(agent_id, behavior="relay")
            rt.bus.subscribe("d", "news")
            first = rt.bus.send("x", "a", "start")
            other = rt.bus.send("x", "d", "other")
            for agent_id in ("a", "b", "c", "d"):
                rt.agent(agent_id).private("z")  # behind what it was sent
            rt.agent("b").private("z")  # b waited for c's answer: handled by now
            rt.flush()
        with Journal.open(tmp_path / "j", readonly=True) as journal:
            messages = [r.event for r in journal.read() if isinstance(r.event, IpcMessage)]

        traces = {m.topic: m.trace_id for m in messages}
        assert traces["hop"] == traces["news"] == traces["ask"] == traces["reply"] == first.trace_id
        assert other.trace_id != first.trace_id  # a send from outside any behavior starts a trace

    def test_a_behavior_that_meets_another_closed_runtime_fails_like_any_other_error(self) -> None:
        # Only this runtime's close is not the behavior's failure: a RuntimeClosedError of
        # another runtime (a closed one the behavior kept) is journaled and answered as one.
        gone = Runtime.open(None)
        gone.close()

        class UsesTheOther:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ARG002
                gone.spawn("z")
                return "never"

        with Runtime.open(None, behaviors={"other": UsesTheOther}) as rt:
            rt.spawn("b", behavior="other")
            with pytest.raises(IpcHandlerError) as caught:
                rt.bus.request("x", "b", "q", timeout=10)
            sent = rt.bus.send("x", "b", "s")
            rt.agent("b").private("z")  # behind it
            dead = [(d.message_id, d.reason) for d in rt.bus.dead_letters()]

        assert isinstance(caught.value.__cause__, RuntimeClosedError)
        assert (sent.id, "handler error") in dead

    def test_a_behavior_that_requests_its_own_agent_is_refused_at_once(self) -> None:
        class Narcissus:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ARG002
                try:
                    ctx.request(ctx.agent_id, "mirror", timeout=30)
                except IpcInvalidMessageError as exc:
                    return str(exc)
                return "waited"

        with Runtime.open(None, behaviors={"n": Narcissus}) as rt:
            rt.spawn("n", behavior="n")

            answer = rt.bus.request("x", "n", "look", timeout=5).payload

        assert "cannot request itself" in answer

    def test_an_llm_client_kept_across_messages_names_the_message_at_hand(self, tmp_path: Path) -> None:
        from cogfabric.actors import ScriptedProvider  # noqa: PLC0415
        from cogfabric.events import LlmOutputRecorded  # noqa: PLC0415

        class Keeper:
            def __init__(self) -> None:
                self.llm: Any = None

            def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
                self.llm = self.llm or ctx.llm
                self.llm.generate("think")

        provider = ScriptedProvider(["one", "two"])
        with Runtime.open(tmp_path / "j", behaviors={"keep": Keeper}, llm_provider=provider) as rt:
            rt.spawn("k", behavior="keep")
            first = rt.bus.send("x", "k", "a")
            second = rt.bus.send("x", "k", "b")
            rt.agent("k").private("z")  # behind both
            rt.flush()
        with Journal.open(tmp_path / "j", readonly=True) as journal:
            causes = [r.event.cause for r in journal.read() if isinstance(r.event, LlmOutputRecorded)]

        assert causes == [first.id, second.id]

    def test_an_llm_client_called_from_another_thread_is_journaled_by_flush_with_no_cause(
        self, tmp_path: Path
    ) -> None:
        from cogfabric.actors import ScriptedProvider  # noqa: PLC0415
        from cogfabric.events import LlmOutputRecorded  # noqa: PLC0415

        class Keeper:
            llm: Any = None

            def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
                Keeper.llm = ctx.llm
                Keeper.llm.generate("now")

        provider = ScriptedProvider(["one", "two"])
        with Runtime.open(tmp_path / "j", behaviors={"keep": Keeper}, llm_provider=provider) as rt:
            rt.spawn("k", behavior="keep")
            sent = rt.bus.send("x", "k", "a")
            rt.agent("k").private("z")  # behind it: the agent is idle again
            later = threading.Thread(target=lambda: Keeper.llm.generate("later"))
            later.start()
            later.join(10)
            rt.flush()  # the agent is idle: flush does not ask it
            journal = rt._journal
            assert journal is not None
            outputs = [r.event for r in journal.read() if isinstance(r.event, LlmOutputRecorded)]

        assert [(e.output, e.cause) for e in outputs] == [("one", sent.id), ("two", None)]

    def test_llm_calls_from_worker_threads_a_behavior_waits_for_name_its_message(
        self, tmp_path: Path
    ) -> None:
        from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

        from cogfabric.actors import ScriptedProvider  # noqa: PLC0415
        from cogfabric.events import IpcDelivered, LlmOutputRecorded  # noqa: PLC0415

        class Parallel:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
                llm = ctx.llm
                with ThreadPoolExecutor(2) as pool:
                    list(pool.map(llm.generate, ["first", "second"]))
                    ctx.set_private("after", True)  # journaled after the outputs, as it came after
                    pool.submit(llm.generate, "third").result()
                    llm.generate("fourth")  # on the agent's own thread: after the worker's
                    pool.submit(llm.generate, "fifth").result()
                    ctx.send("q", "t", "sixth")  # after the outputs before it

        provider = ScriptedProvider(["1", "2", "3", "4", "5"])
        with Runtime.open(tmp_path / "j", behaviors={"par": Parallel}, llm_provider=provider) as rt:
            rt.spawn("p", behavior="par")
            rt.spawn("q")
            sent = rt.bus.send("x", "p", "a")
            rt.agent("p").private("z")  # behind it
            rt.flush()
            journal = rt._journal
            assert journal is not None
            kinds = [
                (type(r.event).__name__, getattr(r.event, "output", ""), r.event.cause)
                for r in journal.read()
                if isinstance(r.event, LlmOutputRecorded | PrivateSet)
                or (isinstance(r.event, IpcDelivered) and r.event.recipient == "p")
                or (isinstance(r.event, IpcMessage) and r.event.sender == "p")
            ]

        worker_outputs = {kinds[1][1], kinds[2][1]}  # the first two ran side by side
        assert worker_outputs == {"1", "2"}
        assert kinds[:1] + kinds[3:] == [
            ("IpcDelivered", "", None),
            ("PrivateSet", "", sent.id),
            ("LlmOutputRecorded", "3", sent.id),
            ("LlmOutputRecorded", "4", sent.id),
            ("LlmOutputRecorded", "5", sent.id),
            ("IpcMessage", "", sent.id),
        ]
        assert [k[0] for k in kinds[1:3]] == ["LlmOutputRecorded"] * 2

    def test_an_llm_output_noted_after_the_message_was_handed_over_is_not_left_behind(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # A thread the behavior does not wait for calls ctx.llm at the very end of the
        # message: after the agent handed its changes over, while it still counts as
        # busy. The output must reach the journal by flush(), which does not ask an
        # idle agent (nor does close: before the fix it was lost).
        late = _LateCall(monkeypatch)

        assert late.run(tmp_path) == [("out", None)]

    def test_an_agent_counts_as_busy_until_it_has_handed_over_what_other_threads_noted(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Runtime.flush skips an agent that is not busy and has no mail. So while the
        # agent, finishing its message, hands over a fact another thread noted, it must
        # still count as busy: else a flush in that moment returns without the fact,
        # though the call that journaled it has returned.
        late = _LateCall(monkeypatch)
        busy_while_handing_over: list[bool] = []
        hand_over_noted = AgentActor._hand_over_foreign

        def hand_over_noted_and_look(actor: AgentActor) -> None:
            busy_while_handing_over.append(actor._shared.busy)
            hand_over_noted(actor)

        monkeypatch.setattr(AgentActor, "_hand_over_foreign", hand_over_noted_and_look)

        assert late.run(tmp_path) == [("out", None)]
        assert busy_while_handing_over == [True]

    def test_an_llm_output_queued_while_its_agent_finishes_the_message_is_not_left_behind(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # The calling thread has seen the agent busy and is about to queue its fact
        # when the agent finishes the message. Checking and queuing must be one step
        # against the agent's last hand-over and its "not busy": else the fact is
        # queued after that hand-over and waits for a message that may never come.
        checked = threading.Event()  # the calling thread has read busy
        agent_went_on = threading.Event()  # the agent found the lock taken, or went through its finally

        def hold_the_caller_after_it_read_busy(late: _LateCall, actor: AgentActor) -> None:
            actor._shared.__class__ = _shared_pausing(late.callers[0], checked, agent_went_on)
            actor._foreign_lock = _WatchedLock(actor._foreign_lock, agent_went_on)  # type: ignore[assignment]
            late.go.set()
            assert checked.wait(10)  # it read busy as True (and holds the lock, if it takes one)

        late = _LateCall(monkeypatch, at_last_hand_over=hold_the_caller_after_it_read_busy)

        assert late.run(tmp_path) == [("out", None)]

    def test_an_llm_output_noted_after_its_agent_was_killed_is_not_journaled(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        # From its kill on, an agent journals nothing: a kept client's call that reached
        # its provider while the agent lived, and answers while the kill message is still
        # in hand, is dropped, and the log says so.
        from cogfabric.actors import ScriptedProvider  # noqa: PLC0415
        from cogfabric.events import AgentKilled, LlmOutputRecorded  # noqa: PLC0415

        in_provider, answer, called, left, let_go = (threading.Event() for _ in range(5))

        def slow_answer(prompt: str) -> str:  # noqa: ARG001
            in_provider.set()
            assert answer.wait(10)
            return "out"

        class Detached:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
                llm = ctx.llm

                def late() -> None:
                    llm.generate("late")
                    called.set()

                threading.Thread(target=late, daemon=True).start()

        leave = AgentActor._leave

        def leave_and_hold(actor: AgentActor) -> None:
            leave(actor)
            left.set()
            assert let_go.wait(10)

        provider = ScriptedProvider(slow_answer)
        with Runtime.open(tmp_path / "j", behaviors={"d": Detached}, llm_provider=provider) as rt:
            rt.spawn("d", behavior="d")
            rt.bus.send("x", "d", "a")
            assert in_provider.wait(10)  # the call is made while the agent lives
            rt.flush()
            monkeypatch.setattr(AgentActor, "_leave", leave_and_hold)
            killer = threading.Thread(target=rt.kill, args=("d",), daemon=True)
            killer.start()
            assert left.wait(10)  # AgentKilled is journaled; the kill message is still in hand
            answer.set()  # the output waits for the kill to be done with (the agent's lock), or comes after
            let_go.set()
            assert called.wait(10)
            killer.join(10)
            assert not killer.is_alive()
            rt.flush()
            journal = rt._journal
            assert journal is not None
            kinds = [
                type(r.event).__name__
                for r in journal.read()
                if isinstance(r.event, LlmOutputRecorded | AgentKilled)
            ]

        assert kinds == ["AgentKilled"]
        assert "noted after its kill not journaled" in caplog.text

    @pytest.mark.parametrize("durability", ["sync", "batch"])
    def test_a_client_kept_past_its_agents_kill_journals_nothing_for_it_or_a_new_agent_of_its_id(
        self, tmp_path: Path, durability: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        # A behavior keeps its ctx.llm; the agent is killed, and another agent of the
        # same id is spawned. The kept client, called afterwards from another thread
        # while no message is in hand, refuses before its gate and its provider (which
        # it reached, to journal nothing: a paid answer lost to every audit), and
        # journals neither an output nor a refusal: not under the dead agent, not under
        # the new one.
        from cogfabric.actors import ScriptedProvider  # noqa: PLC0415
        from cogfabric.events import LlmOutputRecorded, PromptRejected  # noqa: PLC0415

        kept: list[Any] = []

        class Keeper:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> str:  # noqa: ARG002
                kept.append(ctx.llm)
                return "kept"

        provider = ScriptedProvider(["before", "after"])
        config = Config(journal=JournalConfig(durability=durability))  # type: ignore[arg-type]
        with Runtime.open(
            tmp_path / "j", config=config, behaviors={"k": Keeper}, llm_provider=provider
        ) as rt:
            rt.spawn("a", behavior="k")
            rt.bus.request("x", "a", "keep", timeout=10)
            assert kept[0].generate("while alive") == "before"
            rt.kill("a")
            rt.spawn("a")  # a new agent of the same id

            out: list[object] = []

            session = rt.memory.create_session("u")

            def call_later() -> None:
                calls: list[Callable[[], object]] = [
                    lambda: kept[0].generate("after the kill"),
                    lambda: kept[0].generate("   "),
                    lambda: kept[0].turn(session, "after the kill"),
                ]
                for call in calls:
                    try:
                        call()
                    except AgentNotFoundError as exc:
                        out.append(exc.agent_id)

            caller = threading.Thread(target=call_later)
            caller.start()
            caller.join(10)
            assert not caller.is_alive()
            rt.flush()
            messages = rt.memory.get_messages(session)
            journal = rt._journal
            assert journal is not None
            llm = [
                (r.seq, type(r.event).__name__)
                for r in journal.read(stream="agent/a")
                if isinstance(r.event, LlmOutputRecorded | PromptRejected)
            ]

        assert out == ["a", "a", "a"]
        assert provider.calls == ["while alive"]
        assert [m.role for m in messages] == ["system"]  # the turn added nothing to the session
        assert [kind for _, kind in llm] == ["LlmOutputRecorded"]  # only the call made while alive
        assert "noted after its kill not journaled" not in caplog.text

    @pytest.mark.parametrize("durability", ["sync", "batch"])
    def test_a_ctx_kept_past_its_agents_kill_refuses_everything_and_journals_nothing(
        self, tmp_path: Path, durability: str
    ) -> None:
        # A behavior keeps its ctx; the agent is killed and another agent of the same id
        # is spawned. The kept ctx is the dead agent's: it must neither change the new
        # agent (a PrivateSet under agent/a that the live agent never applied, but a
        # reopen would) nor send as it.
        kept: list[AgentContext] = []
        behaviors = {"k": functools.partial(_CtxKeeper, kept)}

        config = Config(journal=JournalConfig(durability=durability))  # type: ignore[arg-type]
        state = CognitiveState(context={"c": 1})
        with Runtime.open(tmp_path / "j", config=config, behaviors=behaviors) as rt:
            rt.spawn("a", behavior="k")
            rt.spawn("b")
            rt.bus.request("x", "a", "keep", timeout=10)
            ctx = kept[0]
            rt.kill("a")
            rt.spawn("a")
            rt.flush()
            journal = rt._journal
            assert journal is not None
            before = journal.last_seq
            calls: dict[str, Callable[[], object]] = {
                "set_private": lambda: ctx.set_private("k", 2),
                "private": lambda: ctx.private("k"),
                "set_task_context": lambda: ctx.set_task_context({"t": 1}),
                "task_context": ctx.task_context,
                "context_view": ctx.context_view,
                "set_cognitive_state": lambda: ctx.set_cognitive_state(state),
                "cognitive_state": ctx.cognitive_state,
                "checkpoint_cognitive": ctx.checkpoint_cognitive,
                "send": lambda: ctx.send("b", "t", 1),
                "request": lambda: ctx.request("b", "t", 1, timeout=1),
                "delegate": lambda: ctx.delegate("b", "t", 1, timeout=1),
                "handoff": lambda: ctx.handoff("b", "task", None, timeout=1),
                "broadcast": lambda: ctx.broadcast("t", 1),
                "subscribe": lambda: ctx.subscribe("t"),
                "unsubscribe": lambda: ctx.unsubscribe("t"),
                "reply": lambda: ctx.reply("some-correlation-id", 1),
            }
            refused = []
            for name, call in calls.items():
                with pytest.raises(AgentNotFoundError):
                    call()
                refused.append(name)
            rt.flush()
            after = journal.last_seq
            live = rt.agent("a").context_view()

        assert refused == list(calls)
        assert after == before  # nothing journaled for the dead agent, nor as it
        assert dict(live.private) == {}
        with Runtime.open(tmp_path / "j", config=config, behaviors=behaviors) as rt:
            assert rt.agent("a").context_view() == live

    def test_a_ctx_kept_and_called_from_another_thread_while_its_agent_is_idle_hands_its_change_over(
        self, tmp_path: Path
    ) -> None:
        # In batch durability a change waits in the agent's outbox for its message's end;
        # made off any message, it waited for the next message (flush() does not ask an
        # idle agent), and a crash before that lost a change its caller saw applied.
        kept: list[AgentContext] = []
        got: list[object] = []

        class Keeper:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> str:
                if message.topic == "keep":
                    kept.append(ctx)
                else:
                    got.append(message.payload)
                return "ok"

        config = Config(journal=JournalConfig(durability="batch"))
        with Runtime.open(tmp_path / "j", config=config, behaviors={"k": Keeper}) as rt:
            rt.spawn("a", behavior="k")
            rt.spawn("b", behavior="k")
            rt.bus.request("x", "a", "keep", timeout=10)
            ctx = kept[0]
            ctx.set_private("k", 1)
            rt.flush()
            journal = rt._journal
            assert journal is not None
            sets = [r.event for r in journal.read(stream="agent/a") if isinstance(r.event, PrivateSet)]
            assert rt.agent("a").private("k") == 1
            ctx.send("b", "hello", {"n": 1})
            rt.flush()
            sent = [r.event for r in journal.read(stream="bus") if isinstance(r.event, IpcMessage)]
            rt.bus.request("x", "b", "sync", timeout=10)  # b has handled the hello before this

        assert [(e.key, e.value, e.cause) for e in sets] == [("k", 1, None)]
        (hello,) = [e for e in sent if e.topic == "hello"]
        assert (hello.sender, hello.recipient, hello.cause) == ("a", "b", None)
        assert got == [{"n": 1}, None]

    def test_a_kept_ctxs_change_made_as_its_agent_finishes_a_message_is_handed_over(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Batch durability. The call lands after the message's own hand-over and before
        # the agent goes idle: the agent still counts as busy, so the change waits in its
        # outbox, and an idle agent is asked for nothing (flush, close): it was lost.
        kept: list[AgentContext] = []
        behaviors = {"k": functools.partial(_CtxKeeper, kept)}

        hold, at_end, done = threading.Event(), threading.Event(), threading.Event()
        dispatch = AgentActor._dispatch

        def dispatch_then_hold(actor: AgentActor, kind: object, message: Any) -> Any:
            try:
                return dispatch(actor, kind, message)
            finally:
                if hold.is_set() and message[:2] == (CALL, "checkpoint_cognitive"):
                    hold.clear()
                    at_end.set()
                    assert done.wait(10)

        config = Config(journal=JournalConfig(durability="batch"))
        with Runtime.open(tmp_path / "j", config=config, behaviors=behaviors) as rt:
            rt.spawn("a", behavior="k")
            rt.bus.request("x", "a", "keep", timeout=10)
            monkeypatch.setattr(AgentActor, "_dispatch", dispatch_then_hold)
            hold.set()
            # a call that is a message (a read of an idle agent is answered without one)
            reader = threading.Thread(target=rt.agent("a").checkpoint_cognitive)
            reader.start()
            assert at_end.wait(10)  # the handle's call is handled and handed over; not yet idle
            writer = threading.Thread(target=kept[0].set_private, args=("k", "kept"))
            writer.start()
            writer.join(10)
            done.set()
            reader.join(10)
            rt.flush()
            journal = rt._journal
            assert journal is not None
            sets = [r.event for r in journal.read(stream="agent/a") if isinstance(r.event, PrivateSet)]

        assert [e.value for e in sets] == ["kept"]
        with Runtime.open(tmp_path / "j", config=config, behaviors=behaviors) as rt:
            assert rt.agent("a").private("k") == "kept"

    def test_a_kept_ctxs_change_during_the_catch_up_after_a_timed_out_commit_is_not_overwritten(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Sync durability. Once the writer is past a commit that timed out, the agent
        # reloads itself from the journal. A kept ctx's change committed between that
        # read and its adoption was overwritten: the live value was the one before it,
        # the journal's (and every reopen's) the kept ctx's.
        kept: list[AgentContext] = []
        changed = threading.Event()
        changers: list[threading.Thread] = []
        real_replay = agent_module.replay_agent  # type: ignore[attr-defined]

        def change() -> None:
            kept[0].set_private("k", "retry")
            changed.set()

        def replay_then_change(journal: Journal, agent_id: str) -> Any:
            state = real_replay(journal, agent_id)
            if not changers:  # the catch-up's read: the kept ctx changes the agent before it is adopted
                changers.append(threading.Thread(target=change))
                changers[0].start()
                changed.wait(0.5)  # at once where the change can slip in; it must wait for the catch-up
            return state

        with _open(tmp_path / "j", behaviors={"k": functools.partial(_CtxKeeper, kept)}) as rt:
            agent = rt.spawn("a", behavior="k")
            rt.bus.request("x", "a", "keep", timeout=10)
            gate = _stall(rt)
            entry = rt._entry("a")
            entry.shared.slots.take()
            # only the agent's wait for the commit has the short call_timeout: the set-up's may be slow
            with _short_call_timeout(rt, 0.3), pytest.raises(ActorTimeoutError):  # not the handle's
                entry.ref.ask((CALL, "set_private", ("k", "first")), block=False).get(timeout=10)
            monkeypatch.setattr(agent_module, "replay_agent", replay_then_change)
            gate.set()
            rt.flush(timeout=10)  # the writer is past it, and the agent has caught up
            assert changers
            changers[0].join(10)
            assert changed.is_set()
            live = agent.private("k")
        with _open(tmp_path / "j") as rt:
            replayed = rt.agent("a").private("k")

        assert (live, replayed) == ("retry", "retry")

    def test_a_kept_ctxs_change_waits_for_its_agents_end_of_message_hand_over(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Batch durability. The agent hands its message's changes to the writer as the
        # message ends, and that can wait (a full writer queue). It did so without its
        # lock: a kept ctx's change, applied after them, was handed over and journaled
        # before them, and a snapshot could hold a change its seq did not cover yet.
        kept: list[AgentContext] = []

        class Keeper:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> str:
                if message.topic == "keep":
                    kept.append(ctx)
                else:
                    ctx.set_private("bb", "by the behavior")
                return "ok"

        in_hand_over, release = threading.Event(), threading.Event()
        submit = JournalWriter.submit_nowait

        def held_submit(writer: JournalWriter, events: Any, **kwargs: Any) -> int:
            if any(isinstance(e, PrivateSet) and e.key == "bb" for e in events):
                in_hand_over.set()
                assert release.wait(10)
            return submit(writer, events, **kwargs)

        config = Config(journal=JournalConfig(durability="batch"))
        with Runtime.open(tmp_path / "j", config=config, behaviors={"k": Keeper}) as rt:
            rt.spawn("a", behavior="k")
            rt.bus.request("x", "a", "keep", timeout=10)
            monkeypatch.setattr(JournalWriter, "submit_nowait", held_submit)
            rt.bus.send("x", "a", "set")
            assert in_hand_over.wait(10)  # the message's end hands "bb" over, and waits
            other = threading.Thread(target=kept[0].set_task_context, args=({"by": "kept ctx"},))
            other.start()
            other.join(0.5)  # it waits for the agent's lock (it went ahead of the hand-over)
            release.set()
            other.join(10)
            rt.flush()
            journal = rt._journal
            assert journal is not None
            order = [type(r.event).__name__ for r in journal.read(stream="agent/a", after=1)]

        assert order == ["PrivateSet", "TaskContextSet"]

    @pytest.mark.parametrize("durability", ["sync", "batch"])
    def test_a_kept_ctxs_change_during_a_restart_after_a_behavior_failure_is_kept(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durability: str
    ) -> None:
        # The restart reloads the agent from the journal once the writer has what it was
        # handed. A kept ctx's change made in between went to the state the reload then
        # replaced, and was journaled after it: gone live, and from every reopen's
        # snapshot-based recovery, while the events held it.
        kept: list[AgentContext] = []

        class FailsOnBoom:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> str:
                if message.topic == "boom":
                    msg = "boom"
                    raise RuntimeError(msg)
                kept.append(ctx)
                return "kept"

        changers: list[threading.Thread] = []
        load_agent = Core.load_agent

        def load_while_a_kept_ctx_changes(core: Core, agent_id: str) -> Any:
            if not changers:
                changers.append(threading.Thread(target=kept[0].set_private, args=("k", "kept")))
                changers[0].start()
                changers[0].join(0.5)  # done at once where it slips in; it must wait for the restart
            return load_agent(core, agent_id)

        config = Config(journal=JournalConfig(durability=durability))  # type: ignore[arg-type]
        with Runtime.open(tmp_path / "j", config=config, behaviors={"f": FailsOnBoom}) as rt:
            rt.spawn("a", behavior="f")
            rt.bus.request("x", "a", "keep", timeout=10)
            monkeypatch.setattr(Core, "load_agent", load_while_a_kept_ctx_changes)
            with pytest.raises(IpcHandlerError):
                rt.bus.request("x", "a", "boom", timeout=10)  # answered before the restart
            rt.bus.request("x", "a", "after", timeout=10)  # handled once the restart is over
            assert changers
            changers[0].join(10)
            rt.flush()
            live = rt.agent("a").private("k")
        with Runtime.open(tmp_path / "j", config=config, behaviors={"f": FailsOnBoom}) as rt:
            replayed = rt.agent("a").private("k")

        assert (live, replayed) == ("kept", "kept")

    @pytest.mark.parametrize("durability", ["sync", "batch"])
    def test_changes_of_two_worker_threads_a_behavior_waits_for_replay_as_they_were_applied(
        self, tmp_path: Path, durability: str
    ) -> None:
        # In sync durability a change is journaled, waited for, then applied: two threads'
        # changes to one key could be applied in the other order than journaled, and the
        # live value differed from the one a reopen replayed.
        class TwoWorkers:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> str:  # noqa: ARG002
                def work(name: str) -> None:
                    for n in range(200):
                        ctx.set_private("k", f"{name}{n}")

                workers = [threading.Thread(target=work, args=(name,)) for name in "AB"]
                for worker in workers:
                    worker.start()
                for worker in workers:
                    worker.join(60)
                return "done"

        config = Config(journal=JournalConfig(durability=durability))  # type: ignore[arg-type]
        with Runtime.open(tmp_path / "j", config=config, behaviors={"w": TwoWorkers}) as rt:
            rt.spawn("a", behavior="w")
            assert rt.bus.request("x", "a", "go", timeout=60).payload == "done"
            live = rt.agent("a").private("k")
        with Runtime.open(tmp_path / "j", config=config, behaviors={"w": TwoWorkers}) as rt:
            replayed = rt.agent("a").private("k")

        assert live in ("A199", "B199")
        assert replayed == live

    def test_an_llm_output_noted_while_a_failure_is_handled_is_journaled_and_the_restart_keeps_it(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Another thread calls the agent's kept client while the agent handles its
        # behavior's failure (here: while the bus journals the dead letter), after the
        # agent handed over the message's changes and its AgentFailed. What the failed
        # message led to meanwhile comes after its AgentFailed, as it came, and the
        # restart loses none of it.
        from cogfabric.actors import ScriptedProvider  # noqa: PLC0415
        from cogfabric.actors._bus import IpcBus  # noqa: PLC0415

        class Failing:
            llm: Any = None

            def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
                Failing.llm = ctx.llm
                msg = "boom"
                raise RuntimeError(msg)

        failed = IpcBus.handler_failed
        outputs: list[str] = []

        def failed_while_another_thread_calls(bus: IpcBus, *args: Any, **kwargs: Any) -> None:
            failed(bus, *args, **kwargs)
            caller = threading.Thread(target=lambda: outputs.append(Failing.llm.generate("meanwhile")))
            caller.start()
            caller.join(10)
            assert not caller.is_alive()

        provider = ScriptedProvider(["out"])
        monkeypatch.setattr(IpcBus, "handler_failed", failed_while_another_thread_calls)
        with Runtime.open(tmp_path / "j", behaviors={"f": Failing}, llm_provider=provider) as rt:
            rt.spawn("f", behavior="f")
            sent = rt.bus.send("x", "f", "a")
            rt.agent("f").private("z")  # behind it: the failure and the restart are done
            rt.flush()
            journal = rt._journal
            assert journal is not None
            kinds = [
                (type(r.event).__name__, r.event.cause)
                for r in journal.read()
                if isinstance(r.event, LlmOutputRecorded | AgentFailed)
            ]

        assert outputs == ["out"]
        assert kinds == [("AgentFailed", sent.id), ("LlmOutputRecorded", sent.id)]

    def test_a_cause_that_is_not_a_string_is_refused(self) -> None:
        with Runtime.open(None) as rt:
            rt.spawn("a")
            with pytest.raises(TypeError):
                rt.bus.broadcast("x", "news", 1, cause=b"raw")  # type: ignore[arg-type]

    def test_send_returns_before_the_recipient_handles_the_message(self) -> None:
        with _open(None) as runtime:
            runtime.spawn("a", behavior="gate")

            runtime.bus.send("x", "a", "block")
            runtime.bus.send("x", "a", "after")
            handled_before_release = len(Gate.seen)
            Gate.release.set()
            runtime.flush()

            assert handled_before_release == 0
            assert [m.topic for m in Gate.seen] == ["block", "after"]

    def test_a_failing_behavior_is_journaled_and_the_agent_restarted_while_others_go_on(
        self, tmp_path: Path
    ) -> None:
        with _open(tmp_path / "j") as runtime:
            a = runtime.spawn("a", behavior="gate")
            runtime.spawn("b", behavior="gate")
            a.set_private("kept", "yes")

            runtime.bus.send("x", "a", "boom")
            runtime.bus.send("x", "b", "hello", 1)
            runtime.flush()

            assert [d.reason for d in runtime.bus.dead_letters()] == ["handler error"]
            assert Gate.instances == 3
            assert a.private("kept") == "yes"
            assert a.private("before-boom") == 1
            assert runtime.bus.request("x", "a", "q", 2, timeout=10).payload == "ok"
            assert runtime.agent("b").private("last") == 1
            assert runtime._journal is not None
            failures = [
                r.event for r in runtime._journal.read(stream="agent/a") if isinstance(r.event, AgentFailed)
            ]
        assert [(f.error, f.detail) for f in failures] == [("ValueError", "boom")]

    def test_an_unknown_behavior_on_recovery_leaves_the_agent_without_one(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        with _open(tmp_path / "j") as runtime:
            runtime.spawn("a", behavior="gate")
            runtime.spawn("b", behavior="gate")

        with (
            caplog.at_level("WARNING", logger="cogfabric"),
            Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime,
        ):
            runtime.bus.send("x", "a", "hello")
            runtime.flush()

            assert runtime.agent("a").lifecycle == AgentState.IDLE
            assert [d.reason for d in runtime.bus.dead_letters()] == ["no behavior"]
            assert (runtime.agent("a").behavior, runtime.agent("a").has_behavior) == ("gate", False)
        # one record for each agent, naming it: which of many lost its behavior
        assert sorted(r.getMessage() for r in caplog.records if "not registered" in r.getMessage()) == [
            f"agent {agent!r}: behavior 'gate' is not registered: the agent runs without one, and "
            "messages to it are dead-lettered (registered: none); to give it one, open the journal "
            "with behaviors={'gate': factory}"
            for agent in "ab"
        ]

    @pytest.mark.parametrize("error", [RuntimeError, SystemExit])
    def test_a_behavior_that_cannot_be_made_again_on_a_restart_is_logged_with_its_agent(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture, error: type[BaseException]
    ) -> None:
        # A restart after a failure makes a fresh behavior: when that fails, the record
        # names the agent, so a user of many agents can tell which one runs without it.
        made: list[Gate] = []

        def once() -> Gate:
            if made:
                msg = "no second one"
                raise error(msg)
            made.append(Gate())
            return made[-1]

        with (
            caplog.at_level("WARNING", logger="cogfabric"),
            _open(tmp_path / "j", behaviors={"once": once}) as runtime,
        ):
            runtime.spawn("a", behavior="once")
            runtime.bus.send("x", "a", "boom")
            runtime.flush()

            assert not runtime.agent("a").has_behavior
        assert [r.getMessage() for r in caplog.records if "could not be made" in r.getMessage()] == [
            "agent 'a': behavior 'once' could not be made: the agent runs without one"
        ]

    def test_a_behavior_without_on_message_on_reopen_is_logged_with_its_agent(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        class Mute:
            pass

        with _open(tmp_path / "j") as runtime:
            runtime.spawn("a", behavior="gate")
        behaviors: dict[str, Any] = {"gate": Mute}  # what the type checker would refuse, a user may pass
        with (
            caplog.at_level("WARNING", logger="cogfabric"),
            Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors=behaviors) as runtime,
        ):
            assert not runtime.agent("a").has_behavior
        said = "agent 'a': behavior 'gate' made a Mute with no on_message(ctx, message): the agent runs"
        assert [r.getMessage() for r in caplog.records if "no on_message" in r.getMessage()] == [
            f"{said} without one"
        ]

    def test_a_flush_waits_for_the_restart_has_behavior_reports(self, tmp_path: Path) -> None:
        made: list[int] = []

        class FailsThenCannotBeMade:
            def __init__(self) -> None:
                if made:
                    msg = "no second one"
                    raise RuntimeError(msg)
                made.append(1)

            def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
                raise ValueError(message.topic)

        with _open(tmp_path / "j", behaviors={"once": FailsThenCannotBeMade}) as runtime:
            handle = runtime.spawn("a", behavior="once")
            with pytest.raises(IpcHandlerError):
                runtime.bus.request("x", "a", "boom", None, timeout=5)
            runtime.flush()  # the requester heard first; the restart is done once this returns

            assert not handle.has_behavior
            runtime.bus.send("x", "a", "next")
            runtime.flush()
            assert runtime.bus.dead_letters()[-1].reason == "no behavior"

    def test_a_handle_says_which_behavior_its_agent_has(self, tmp_path: Path) -> None:
        with _open(tmp_path / "j") as runtime:
            runtime.spawn("named", behavior="gate")
            runtime.spawn("none")
            found = {a: (runtime.agent(a).behavior, runtime.agent(a).has_behavior) for a in runtime.agents()}
        assert found == {"named": ("gate", True), "none": (None, False)}
        with _open(tmp_path / "j") as runtime:  # given its factory again: reattached
            assert runtime.agent("named").has_behavior
            handle = runtime.agent("named")
            runtime.kill("named")
            with pytest.raises(AgentNotFoundError):
                _ = handle.has_behavior
            assert handle.behavior == "gate"  # a fixed attribute, as its id


def _flush_once_drained(runtime: Runtime, attempts: int = 200) -> None:
    """Flush a runtime of a tiny ``call_timeout`` whose agents are draining full mailboxes.

    ``flush`` asks each agent for room within ``call_timeout``; on a loaded machine an
    agent draining dozens of messages takes longer, so each refusal is a wait of its
    own, and the flush is asked again (``attempts`` waits of ``call_timeout`` at most).
    """
    for _ in range(attempts - 1):
        try:
            runtime.flush()
        except MailboxFullError:
            continue
        return
    runtime.flush()


class TestBackpressure:
    def test_a_full_mailbox_makes_senders_wait_then_fail(self) -> None:
        with _open(None, mailbox=2, timeout=0.2) as runtime:
            runtime.spawn("a", behavior="gate")
            runtime.bus.send("x", "a", "block")
            assert Gate.started.wait(10)
            runtime.bus.send("x", "a", "one")
            runtime.bus.send("x", "a", "two")

            with pytest.raises(MailboxFullError, match="stayed full"):
                runtime.bus.send("x", "a", "three")
            Gate.release.set()

            assert [(d.topic, d.reason) for d in runtime.bus.dead_letters()] == [("three", "mailbox full")]

    def test_a_send_or_request_refused_for_a_full_mailbox_leaves_one_dead_letter_and_no_message(
        self, tmp_path: Path
    ) -> None:
        with _open(tmp_path / "j", mailbox=1, timeout=30) as runtime:
            runtime.spawn("a", behavior="gate")
            runtime.bus.send("x", "a", "block")
            assert Gate.started.wait(10)
            runtime.bus.send("x", "a", "one")  # the mailbox is full now
            journal = runtime._journal
            assert journal is not None
            before = journal.last_seq

            # the request's own timeout bounds its wait for room, not call_timeout (30 s)
            with pytest.raises(MailboxFullError, match=r"stayed full for 0\.2 s"):
                runtime.bus.request("x", "a", "asked", timeout=0.2)
            Gate.release.set()
            runtime.flush()
            asked = [
                type(r.event).__name__
                for r in journal.read(after=before)
                if isinstance(r.event, IpcMessage | IpcDeadLettered) and r.event.topic == "asked"
            ]

            assert [(d.topic, d.reason) for d in runtime.bus.dead_letters()] == [("asked", "mailbox full")]
            assert asked == ["IpcDeadLettered"]  # the request itself never reached the journal

    def test_a_broadcast_skips_a_full_mailbox_with_a_dead_letter_and_reaches_the_rest(self) -> None:
        with _open(None, mailbox=1) as runtime:
            for agent_id in ("first", "full", "last"):
                runtime.spawn(agent_id, behavior="gate")
                runtime.bus.subscribe(agent_id, "news")
            runtime.bus.send("x", "full", "block")
            assert Gate.started.wait(10)
            runtime.bus.send("x", "full", "one")  # its mailbox is full now

            with _short_call_timeout(runtime, 0.2):  # its wait for the full mailbox alone: not the set-up's
                delivered = runtime.bus.broadcast("x", "news", 1)
            Gate.release.set()
            runtime.flush()

            assert delivered == 2
            assert [(d.recipient, d.reason) for d in runtime.bus.dead_letters()] == [("full", "mailbox full")]
            assert runtime.agent("last").private("last") == 1

    @pytest.mark.parametrize("path", [None, "j"])
    def test_a_publication_reaches_an_agent_whose_mailbox_stays_full(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture, path: str | None
    ) -> None:
        # The publication is durable before it is delivered: refusing it would leave the
        # live agent short of what its own replay gives it.
        with _open(None if path is None else tmp_path / path, mailbox=1) as runtime:
            agent = runtime.spawn("a", task_id="t", task_context={"v": 0}, behavior="gate")
            runtime.bus.send("x", "a", "block")
            assert Gate.started.wait(10)
            runtime.bus.send("x", "a", "one")  # the mailbox is full now

            # the publication's wait for room alone is short: the set-up's commits may be slow
            with (
                caplog.at_level("WARNING", logger="cogfabric.actors._runtime"),
                _short_call_timeout(runtime, 0.5),
            ):
                assert runtime.publish_task_context("t", {"v": "published"}) == ["a"]
            assert "goes past its size" in caplog.text
            Gate.release.set()

            assert agent.task_context() == {"v": "published"}
            assert [m.topic for m in Gate.seen] == ["block", "one"]
            assert runtime._entry("a").shared.slots.free == 1  # every slot given back

    def test_a_behavior_sending_to_itself_with_its_mailbox_full_fails_at_once(self) -> None:
        # only that behavior, which would wait, could make room: no call_timeout (30 s) wait
        outcome: list[str] = []
        answered = threading.Event()

        class SelfSender:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:
                if message.topic != "go":
                    return
                assert Gate.release.wait(10)
                try:
                    ctx.send(ctx.agent_id, "again", 1)
                except MailboxFullError as exc:
                    outcome.append(str(exc))
                ctx.subscribe("news")
                outcome.append(f"broadcast reached {ctx.broadcast('news', 2)}")
                answered.set()

        with _open(None, mailbox=2, timeout=30, behaviors={"self": SelfSender}) as runtime:
            runtime.spawn("a", behavior="self")
            runtime.bus.send("x", "a", "go")
            runtime.bus.send("x", "a", "one")
            runtime.bus.send("x", "a", "two")  # the mailbox is full now
            Gate.release.set()
            assert answered.wait(10)  # well within call_timeout: neither waited for room
            runtime.flush()

            assert outcome == [
                "the mailbox of 'a' is full, and only its behavior (the sender) empties it",
                "broadcast reached 0",
            ]
            assert [(d.topic, d.reason) for d in runtime.bus.dead_letters()] == [
                ("again", "mailbox full"),
                ("news", "mailbox full"),
            ]

    @pytest.mark.parametrize("operation", ["kill", "suspend"])
    def test_a_lifecycle_call_reaches_an_agent_whose_mailbox_stays_full(
        self, tmp_path: Path, operation: str
    ) -> None:
        # a kill must reach an agent whose own busy behavior keeps its mailbox full: it is
        # queued past the bound (the caller hears ActorTimeoutError while the agent is busy)
        with _open(tmp_path / "j", mailbox=1) as runtime:
            runtime.spawn("a", behavior="gate")
            runtime.bus.send("x", "a", "block")
            assert Gate.started.wait(10)
            runtime.bus.send("x", "a", "one")  # the mailbox is full now

            with _short_call_timeout(runtime, 0.3), pytest.raises(ActorTimeoutError, match="did not answer"):
                getattr(runtime, operation)("a")
            Gate.release.set()
            runtime.flush()

            assert [m.topic for m in Gate.seen] == ["block", "one"]
            if operation == "kill":
                assert runtime.agents() == []
            else:
                assert runtime.agent("a").lifecycle == AgentState.SUSPENDED
                assert runtime._entry("a").shared.slots.free == 1  # every slot given back

    def test_lifecycle_calls_that_time_out_and_are_called_again_pile_up_only_to_their_allowance(
        self, tmp_path: Path
    ) -> None:
        # a caller that hears ActorTimeoutError may call again: each call queues past the
        # bound, so past CONTROL_EXTRA of them the next one gets MailboxFullError
        with _open(tmp_path / "j", mailbox=1) as runtime:
            runtime.spawn("a", behavior="gate")
            runtime.bus.send("x", "a", "block")
            assert Gate.started.wait(10)
            runtime.bus.send("x", "a", "one")  # the mailbox is full now

            with _short_call_timeout(runtime, 0.01):  # the agent is held: each wait runs out
                for _ in range(MailboxSlots.CONTROL_EXTRA):
                    with pytest.raises(ActorTimeoutError, match="did not answer"):
                        runtime.suspend("a")
                with pytest.raises(MailboxFullError, match="held 16 lifecycle calls"):
                    runtime.suspend("a")
                with pytest.raises(MailboxFullError, match="held 16 lifecycle calls"):
                    runtime.kill("a")
            assert runtime._entry("a").shared.slots.free == -MailboxSlots.CONTROL_EXTRA
            Gate.release.set()
            runtime.flush()

            assert runtime.agent("a").lifecycle == AgentState.SUSPENDED
            assert runtime._entry("a").shared.slots.free == 1  # every slot given back
            runtime.kill("a")
            assert runtime.agents() == []

    def test_a_kill_reaches_an_agent_whose_full_mailbox_took_publications_past_the_bound(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # durable publications go past the bound too; they leave a kill its room. Unsynced
        # commits, and the short call_timeout only for each publication's wait for room
        # (not its commit) and the kill: on a loaded machine a synced spawn or publication
        # timed out waiting for its commit.
        config = Config(journal=JournalConfig(fsync=False), runtime=RuntimeConfig(mailbox_size=1))
        gate = {"gate": Gate}
        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors=gate) as runtime:
            runtime.spawn("a", task_id="t", behavior="gate")
            runtime.bus.send("x", "a", "block")
            assert Gate.started.wait(10)
            runtime.bus.send("x", "a", "one")  # the mailbox is full now
            deliver = runtime._deliver_publication

            def delivered_after_a_short_wait(*args: Any) -> None:
                # the mailbox stays full (the agent is held in its behavior): each wait for
                # room runs out, however short; 32 of them at 0.1 s took 3.2 s
                with _short_call_timeout(runtime, 0.02):
                    deliver(*args)

            monkeypatch.setattr(runtime, "_deliver_publication", delivered_after_a_short_wait)
            for step in range(2 * MailboxSlots.CONTROL_EXTRA):
                runtime.publish_task_context("t", {"step": step})  # each waits call_timeout, then goes past

            with _short_call_timeout(runtime, 0.1), pytest.raises(ActorTimeoutError, match="did not answer"):
                runtime.kill("a")
            Gate.release.set()
            _flush_once_drained(runtime)

            assert runtime.agents() == []

    def test_close_stops_busy_agents_together_within_one_call_timeout(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        runtime = _open(None, timeout=0.3)
        for agent_id in ("a", "b", "c"):
            runtime.spawn(agent_id, behavior="gate")
            runtime.bus.send("x", agent_id, "block")  # each stays in its behavior until released
        assert Gate.started.wait(10)
        try:
            with caplog.at_level("WARNING", logger="cogfabric.actors._runtime"):
                runtime.close()
        finally:
            Gate.release.set()

        # one wait for all (not call_timeout for each in turn), reported once
        assert "did not stop within 0.3 s" in caplog.text
        assert caplog.text.count("did not stop") == 1

    def test_a_behavior_that_closes_the_runtime_while_it_is_closing_loses_nothing(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        go = threading.Event()
        stopping = threading.Event()
        opened: list[Runtime] = []

        class Closer:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
                assert go.wait(10)
                ctx.set_private("k", "v")
                opened[0].close()  # returns at once: the other close() waits for this agent

        config = Config(journal=JournalConfig(durability="batch"), runtime=RuntimeConfig(call_timeout=10))
        runtime = Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors={"c": Closer})
        opened.append(runtime)
        runtime.spawn("a", behavior="c")
        runtime.bus.send("x", "a", "close it")
        stop_agents = runtime._stop_agents

        def stop_agents_and_say(entries: Any) -> None:
            stopping.set()
            stop_agents(entries)

        monkeypatch.setattr(runtime, "_stop_agents", stop_agents_and_say)
        closer = threading.Thread(target=runtime.close)
        with caplog.at_level("WARNING", logger="cogfabric.actors._runtime"):
            closer.start()
            assert stopping.wait(10)
            go.set()
            closer.join(30)

        assert not closer.is_alive()
        assert "did not stop" not in caplog.text
        with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"c": Closer}) as reopened:
            assert reopened.agent("a").private("k") == "v"

    def test_a_behavior_that_closes_its_runtime_loses_nothing(self, tmp_path: Path) -> None:
        opened: list[Runtime] = []

        class Closer:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
                ctx.set_private("k", "v")
                opened[0].close()  # returns at once; the runtime closes once this returns

        config = Config(journal=JournalConfig(durability="batch"), runtime=RuntimeConfig(call_timeout=10))
        runtime = Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors={"c": Closer})
        opened.append(runtime)
        runtime.spawn("a", behavior="c")
        runtime.bus.send("x", "a", "close it")

        assert runtime._close_done.wait(30)
        with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"c": Closer}) as reopened:
            assert reopened.agent("a").private("k") == "v"

    def test_a_request_answered_by_a_behavior_that_raised_a_not_found_error_is_an_ipc_handler_error(
        self,
    ) -> None:
        class Relay:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ARG002
                return ctx.request("nobody", "q", None, timeout=5)  # AgentNotFoundError inside

        with Runtime.open(None, clock=FakeClock(), behaviors={"relay": Relay}) as runtime:
            runtime.spawn("r", behavior="relay")
            with pytest.raises(IpcHandlerError) as info:
                runtime.bus.request("x", "r", "q", timeout=30)

        assert isinstance(info.value.__cause__, AgentNotFoundError)

    def test_a_request_that_timed_out_and_then_failed_its_handler_leaves_one_dead_letter(
        self, tmp_path: Path
    ) -> None:
        class SlowFailure:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ARG002
                Gate.started.set()
                assert Gate.release.wait(10)
                msg = "too late"
                raise ValueError(msg)

        path = tmp_path / "j"
        with Runtime.open(path, clock=FakeClock(), behaviors={"slow": SlowFailure}) as runtime:
            agent = runtime.spawn("s", behavior="slow")
            with pytest.raises(IpcTimeoutError):
                runtime.bus.request("x", "s", "q", timeout=0.05)
            assert Gate.started.wait(10)
            Gate.release.set()
            agent.private("k")  # queued behind the request: returns once the behavior failed
            runtime.flush()

            assert [d.reason for d in runtime.bus.dead_letters()] == ["timeout"]
        with Journal.open(path, readonly=True) as journal:
            events = [r.event for r in journal.read()]
        assert [e.reason for e in events if isinstance(e, IpcDeadLettered)] == ["timeout"]
        assert [e.error for e in events if isinstance(e, AgentFailed)] == ["ValueError"]

    @pytest.mark.parametrize("mode", ["sync", "batch"])
    def test_mail_left_when_close_gives_up_on_an_agent_is_dropped_quietly(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: str
    ) -> None:
        runtime = _open(tmp_path / "j", mode=mode)
        runtime.spawn("a", behavior="gate")
        entry = runtime._entry("a")
        runtime.bus.send("x", "a", "block")  # busy past close()'s wait
        assert Gate.started.wait(10)
        for n in range(20):
            runtime.bus.send("x", "a", "later", n)
        with caplog.at_level("DEBUG", logger="cogfabric"):
            with _short_call_timeout(runtime, 0.3):  # close()'s wait alone: the set-up's commits may be slow
                runtime.close()
            Gate.release.set()  # the behavior returns after close(): nothing can be journaled
            assert entry.ref.actor_stopped.wait(10)

        assert [m.topic for m in Gate.seen] == ["block"]  # the 20 later ones were dropped, not handled
        assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
        assert "did not stop within 0.3 s" in caplog.text

    def test_a_busy_agent_makes_a_handle_call_time_out(self) -> None:
        with _open(None, timeout=0.2) as runtime:
            agent = _running(runtime)

            with pytest.raises(ActorTimeoutError):
                agent.set_private("k", 1)
            Gate.release.set()


class TestDeliberateDifferences:
    def test_values_are_deep_copied_in_and_out(self) -> None:
        with _open(None) as runtime:
            agent = runtime.spawn("a")
            value: dict[str, Any] = {"list": [1]}
            agent.set_private("k", value)
            value["list"].append(2)

            out = agent.private("k")
            out["list"].append(3)

            assert agent.private("k") == {"list": [1]}

    def test_a_memory_only_runtime_needs_no_journal(self) -> None:
        with Runtime.open() as runtime:
            agent = runtime.spawn("a", task_context={"goal": "g"})
            agent.set_private("k", 1)

            assert agent.context_view().private == {"k": 1}

    def test_batch_durability_applies_at_once_and_flush_makes_it_durable(self, tmp_path: Path) -> None:
        with _open(tmp_path / "j", mode="batch") as runtime:
            agent = runtime.spawn("a")
            for i in range(100):
                agent.set_private(f"k{i}", i)
            runtime.flush()
            assert runtime._journal is not None
            stored = runtime._journal.last_seq

        assert stored == 101

    def test_a_behaviors_send_in_sync_durability_returns_at_once_and_is_delivered_once_durable(
        self, tmp_path: Path
    ) -> None:
        # ctx.send does not wait for its commit (README "Durability modes": one commit a
        # hop, not two); its recipient never sees it before it is durable, and
        # ctx.flush() is what waits
        sent, flushed, received = threading.Event(), threading.Event(), threading.Event()

        class Sender:
            def on_message(self, ctx: AgentContext, _message: IpcMessage) -> None:
                ctx.send("c", "t", "important")
                sent.set()
                ctx.flush()
                flushed.set()

        class Recipient:
            def on_message(self, _ctx: AgentContext, _message: IpcMessage) -> None:
                received.set()

        def the_send(events: Sequence[Event]) -> bool:
            return any(isinstance(e, IpcMessage) and e.payload == "important" for e in events)

        entered = threading.Event()
        with _open(tmp_path / "j", behaviors={"s": Sender, "c": Recipient}) as runtime:
            runtime.spawn("s", behavior="s")
            runtime.spawn("c", behavior="c")
            gate = _stall(runtime, the_send, entered)
            runtime.bus.send("x", "s", "go")
            assert entered.wait(10)  # its commit waits on the stalled disk
            assert sent.wait(10)  # ctx.send returned all the same
            assert not received.is_set()
            assert not flushed.is_set()
            gate.set()
            assert flushed.wait(10)
            assert received.wait(10)


def test_the_default_clock_is_wall_time(tmp_path: Path) -> None:
    moment = dt.datetime(2031, 5, 4, tzinfo=dt.UTC)
    with freeze_time(moment, tick=True), Runtime.open(tmp_path / "j") as runtime:
        runtime.spawn("a")

    with Journal.open(tmp_path / "j", readonly=True) as journal:
        (record,) = list(journal.read())
    assert isinstance(record.event, AgentSpawned)
    assert moment.timestamp() <= record.event.at < moment.timestamp() + 60


class TestJournalFailure:
    def test_a_failed_append_reaches_the_caller_and_the_agent_does_not_run_ahead(
        self, tmp_path: Path
    ) -> None:
        config = Config(journal=JournalConfig(map_size=1 << 20, max_map_size=1 << 20))
        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as runtime:
            agent = runtime.spawn("a")
            big = "x" * 100_000

            def fill() -> None:
                for i in range(100):
                    agent.set_private(f"k{i}", big)

            with pytest.raises(JournalFullError):
                fill()
            stored = [k for k in (f"k{i}" for i in range(100)) if agent.private(k) is not None]
            with pytest.raises(JournalError):
                agent.set_private("after", 1)

            assert agent.private("after") is None
        with Runtime.open(
            tmp_path / "j", clock=FakeClock(), config=Config(journal=JournalConfig(map_size=1 << 24))
        ) as runtime:
            assert [
                k for k in (f"k{i}" for i in range(100)) if runtime.agent("a").private(k) is not None
            ] == stored

    def test_a_change_whose_sync_commit_timed_out_and_then_landed_is_in_the_next_snapshot(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # The disk stalls: set_private("late") times out (outcome unknown) and the agent
        # is stale. Its next change waits until its catch-up finds the writer done (the
        # first try gives up; the disk then recovers); the commit lands. A snapshot
        # taken before the catch-up would cover the late change's seq without it, and
        # recovery would start from it: lost for good, though the journal holds it.
        from cogfabric.actors._core import replay_agent  # noqa: PLC0415

        config = Config(journal=JournalConfig(durability="sync", snapshot_interval=1))
        with Runtime.open(tmp_path / "j", config=config) as runtime:
            agent = runtime.spawn("a")
            agent.set_private("x", 0)
            journal, writer = runtime._journal, runtime._core.writer
            assert journal is not None
            assert writer is not None
            disk = threading.Event()
            append = journal.append

            def stalled_append(*args: Any, **kwargs: Any) -> list[int]:
                assert disk.wait(10)
                return append(*args, **kwargs)

            journal.append = stalled_append  # type: ignore[method-assign]
            _open_when_an_agent_finds_it_stalled(monkeypatch, disk)
            with _short_call_timeout(runtime, 0.3):  # while the disk stalls: the set-up's commits may be slow
                with pytest.raises(ActorTimeoutError):
                    agent.set_private("late", 1)
                # its caller most likely gives up (the catch-up's first try takes as long as
                # its call_timeout); the agent makes the change once it has caught up
                with contextlib.suppress(ActorTimeoutError):
                    agent.set_private("y", 2)
                assert disk.wait(10)  # the agent's catch-up found the disk stalled: it recovers
            runtime.flush(10)
            live = dict(agent.context_view().private)

        with Journal.open(tmp_path / "j", readonly=True) as journal:
            snapshot_based = replay_agent(journal, "a", from_snapshot=True)
            events_only = replay_agent(journal, "a", from_snapshot=False)
        assert snapshot_based is not None
        assert events_only is not None
        from_snapshot, from_events = snapshot_based.private, events_only.private
        with Runtime.open(tmp_path / "j") as runtime:
            reopened = dict(runtime.agent("a").context_view().private)

        assert live == from_snapshot == from_events == reopened == {"x": 0, "late": 1, "y": 2}

    def test_in_batch_durability_an_agent_that_ran_ahead_is_reloaded_from_the_journal(
        self, tmp_path: Path
    ) -> None:
        config = Config(journal=JournalConfig(durability="batch", map_size=1 << 20, max_map_size=1 << 20))
        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as runtime:
            agent = runtime.spawn("a")
            big = "x" * 100_000

            def fill() -> None:
                for i in range(100):
                    agent.set_private(f"k{i}", big)
                    if i < 3:
                        runtime.flush()  # these commit alone, whatever the writer's pace
                runtime.flush()

            with pytest.raises(JournalError):
                fill()
            live = [k for k in (f"k{i}" for i in range(100)) if agent.private(k) is not None]  # reads first
            with pytest.raises(JournalError):
                agent.set_private("after", 1)
            assert agent.private("after") is None
            assert runtime._journal is not None
            stored = {
                r.event.key
                for r in runtime._journal.read(stream="agent/a")
                if isinstance(r.event, PrivateSet)
            }
            with pytest.raises(JournalError):
                runtime.flush()  # whichever call raised it first: close() then raises nothing

        assert 0 < len(live) < 100
        assert set(live) == stored

    def test_in_batch_durability_an_agent_busy_when_the_journal_fails_drops_its_change_before_its_next_call(
        self, tmp_path: Path
    ) -> None:
        # README "Durability modes": an agent that was busy when a group commit failed
        # drops what it applied that the journal does not hold before it handles anything
        # more (a message cannot reach it: the fail-stop journal refuses the send)
        started, go_on = threading.Event(), threading.Event()

        class Worker:
            def on_message(self, ctx: AgentContext, _message: IpcMessage) -> None:
                ctx.set_private("p", "applied, never journaled")  # batch: applied at once
                started.set()
                assert go_on.wait(10)

        def the_fillers(events: Sequence[Event]) -> bool:
            return any(isinstance(e, PrivateSet) and e.key == "k" for e in events)

        with _open(tmp_path / "j", mode="batch", timeout=2.0, behaviors={"w": Worker}) as runtime:
            filler = runtime.spawn("a")
            busy = runtime.spawn("b", behavior="w")
            runtime.flush()
            runtime.bus.send("x", "b", "work")
            assert started.wait(10)
            gate = _stall_then_fail(runtime, OSError("disk gone"), the_fillers)
            filler.set_private("k", 1)
            gate.set()
            with pytest.raises((JournalError, ActorTimeoutError)):  # b is busy: it may be named
                runtime.flush(0.5)
            go_on.set()  # its message ends; its change goes to a failed writer
            assert busy.private("p") is None
            assert busy.lifecycle == AgentState.IDLE
            assert filler.private("k") is None
        with _open(tmp_path / "j") as runtime:
            assert runtime.agent("b").private("p") is None

    def test_in_batch_durability_a_read_after_the_failed_flush_shows_what_the_journal_holds(
        self, tmp_path: Path
    ) -> None:
        config = Config(journal=JournalConfig(durability="batch", map_size=1 << 20, max_map_size=1 << 20))
        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as runtime:
            agent = runtime.spawn("a")
            other = runtime.spawn("b")
            last = -1

            def fill() -> None:
                nonlocal last
                for i in range(100):
                    last = i
                    agent.set_private(f"k{i}", "x" * 100_000)  # applied at once...
                    runtime.flush()  # ...and refused by the journal here, at some i

            with pytest.raises(JournalFullError):
                fill()

            assert agent.private(f"k{last}") is None  # not the change the journal refused
            assert agent.private("k0") is not None
            assert other.private("k") is None

    def test_in_batch_durability_lifecycle_and_agents_after_the_failed_flush_show_what_the_journal_holds(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        # lifecycle and agents() read no actor: flush has every agent take the journal's
        # word before it raises, not only at the agent's next message
        config = Config(journal=JournalConfig(durability="batch", map_size=1 << 20, max_map_size=2 << 20))
        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as runtime:
            agent = runtime.spawn("a")
            other = runtime.spawn("b")
            runtime.flush()
            gate = _stall(runtime)  # the writer fails only once all three are handed over
            agent.set_private("big", "x" * (4 << 20))  # the commit that holds it fails...
            runtime.suspend("b")  # ...and these are handed over behind it
            runtime.spawn("newbie")
            assert other.lifecycle == AgentState.SUSPENDED  # applied at once (batch)
            gate.set()

            with caplog.at_level("ERROR"), pytest.raises(JournalFullError):
                runtime.flush()

            assert runtime.agent("b").lifecycle == AgentState.IDLE  # the handle reads the same state
            assert runtime.agents() == ["a", "b"]
            with pytest.raises(AgentNotFoundError):
                runtime.agent("newbie")
            assert other.private("k") is None  # its actor lives on: the reload stopped none
            # the refused spawn's reload is no actor failure (Pykka would stop the actor)
            assert "Unhandled exception" not in caplog.text

    def test_in_batch_durability_a_session_read_after_the_failed_flush_shows_what_the_journal_holds(
        self, tmp_path: Path
    ) -> None:
        config = Config(journal=JournalConfig(durability="batch", map_size=1 << 20, max_map_size=1 << 20))
        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as runtime:
            session = runtime.memory.create_session("u")
            runtime.flush()

            def fill() -> None:
                for i in range(100):
                    runtime.memory.add_message(session, "user", f"{i}:" + "x" * 100_000)  # applied at once...
                    runtime.flush()  # ...and refused by the journal here, at some i

            with pytest.raises(JournalFullError):
                fill()

            live = [m.content.split(":")[0] for m in runtime.memory.get_messages(session)[1:]]
            assert runtime._journal is not None
            stored = [
                r.event.message.content.split(":")[0]
                for r in runtime._journal.read(stream=f"session/{session}")
                if isinstance(r.event, SessionMessageAdded)
            ]
            assert 0 < len(stored) < 100
            assert live == stored

    @pytest.mark.parametrize("durability", ["sync", "batch"])
    def test_session_reads_go_on_answering_once_the_journal_is_fail_stop(
        self, tmp_path: Path, durability: str
    ) -> None:
        # A read records its access (best effort) every ttl/10, and when it switches its
        # agent's latest session. The fail-stop journal refused that record, the read
        # failed with the journal's error, and the reload that followed made the record
        # due again on every later read: the session could not be read until a reopen.
        clock = FakeClock()
        config = Config(
            journal=JournalConfig(durability=durability, map_size=1 << 20, max_map_size=1 << 20),  # type: ignore[arg-type]
            memory=MemoryConfig(session_ttl=100.0),
        )
        with Runtime.open(tmp_path / "j", config=config, clock=clock) as runtime:
            memory = runtime.memory
            first = memory.create_session("u", agent_id="bot")
            second = memory.create_session("u", agent_id="bot")
            memory.add_message(first, "user", "hello")
            runtime.flush()

            def fill() -> None:
                for _ in range(100):
                    memory.add_message(second, "user", "x" * 200_000)
                    runtime.flush()

            with pytest.raises(JournalFullError):
                fill()
            clock.advance(10)  # ttl/10: the next read of each records its access
            reads = [memory.get_messages(sid)[-1].content[:5] for sid in (first, second, first, second)]
            assert memory.build_context("q", first).endswith("q")
            assert memory.get_latest_session_for_agent("bot") == first
            with pytest.raises(JournalFullError):  # writes are still refused
                memory.add_message(first, "user", "more")
            # The accesses since are kept live: the refused write reloaded every session
            # from the journal, which has none of them, and the sessions read all along
            # expired at once.
            for _ in range(10):
                clock.advance(20)
                memory.get_messages(first)
            with pytest.raises(JournalFullError):
                memory.add_message(first, "user", "more")
            with pytest.raises(JournalFullError):
                memory.create_session("u")
            with pytest.raises(JournalFullError):
                memory.delete_session(first)
            kept = [m.content for m in memory.get_messages(first)[1:]]
            latest = memory.get_latest_session_for_agent("bot")

        assert reads == ["hello", "xxxxx", "hello", "xxxxx"]
        assert (kept, latest) == (["hello"], first)

    def test_session_reads_beside_refused_writes_answer_once_the_journal_is_fail_stop(
        self, tmp_path: Path
    ) -> None:
        # A read handled in one batch with a write the fail-stop journal refused got
        # that write's error (about one read in five, with a thread writing).
        config = Config(journal=JournalConfig(durability="batch", map_size=1 << 20, max_map_size=1 << 20))
        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as runtime:
            memory = runtime.memory
            session = memory.create_session("u")

            def fill() -> None:
                for _ in range(100):
                    memory.add_message(session, "user", "x" * 200_000)
                    runtime.flush()

            with pytest.raises(JournalFullError):
                fill()
            stop = threading.Event()
            refused: list[BaseException] = []

            def write() -> None:
                while not stop.is_set():
                    try:
                        memory.add_message(session, "user", "more")
                    except JournalFullError as exc:
                        refused.append(exc)

            writer = threading.Thread(target=write)
            writer.start()
            try:
                failed = 0
                for _ in range(500):
                    try:
                        memory.get_messages(session)
                    except JournalFullError:
                        failed += 1
            finally:
                stop.set()
                writer.join(10)

        assert refused  # the writes were refused all along
        assert failed == 0

    def test_a_session_write_made_as_another_producer_fails_the_journal_raises_and_is_undone(
        self, tmp_path: Path
    ) -> None:
        # Sync durability. The session actor decides at a batch's start whether writes are
        # refused; the journal went fail-stop (an agent's change) while it made the write,
        # and the batch's events were dropped: add_message returned, nothing was stored.
        fill = threading.Event()

        class FillingClock(FakeClock):
            def now(self) -> float:
                if fill.is_set() and threading.current_thread().name.startswith("SessionActor"):
                    fill.clear()
                    with contextlib.suppress(JournalFullError):
                        for i in range(100):
                            runtime.agent("a").set_private(f"k{i}", "x" * 200_000)
                return super().now()

        config = Config(journal=JournalConfig(map_size=1 << 20, max_map_size=1 << 20))
        with Runtime.open(tmp_path / "j", config=config, clock=FillingClock()) as runtime:
            session = runtime.memory.create_session("u")
            runtime.spawn("a")
            fill.set()
            with pytest.raises(JournalFullError):
                runtime.memory.add_message(session, "user", "important")
            assert runtime._core.writer is not None
            assert runtime._core.writer.failure is not None
            live = [m.content for m in runtime.memory.get_messages(session)]
        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as runtime:
            replayed = [m.content for m in runtime.memory.get_messages(session)]

        assert live == replayed == ["New session started"]

    def test_after_a_timed_out_session_write_that_failed_the_journal_accesses_are_kept_live(
        self, tmp_path: Path
    ) -> None:
        # The write timed out (the session actor will take the journal's word), then its
        # commit made the journal fail-stop. The first call after reloads; the next
        # reloaded again and forgot the accesses made since: a session read all along expired.
        clock = FakeClock()
        config = _full_at_a_mebibyte()
        with Runtime.open(tmp_path / "j", config=config, clock=clock) as runtime:
            memory = runtime.memory
            session, other = memory.create_session("u"), memory.create_session("u")
            for _ in range(3):
                memory.add_message(other, "user", "x" * 200_000)
            gate = _stall(runtime)
            with _short_call_timeout(runtime, 0.3), pytest.raises(ActorTimeoutError):  # not the set-up's
                memory.add_message(other, "user", "x" * 400_000)  # the map cannot hold it
            gate.set()
            with pytest.raises(JournalFullError):
                runtime.flush(timeout=10)
            clock.advance(60)
            first = len(memory.get_messages(session))
            clock.advance(60)  # past the TTL from the journal's last access, not from the read's
            second = len(memory.get_messages(session))

        assert (first, second) == (1, 1)

    def test_a_failed_session_batch_fails_its_first_write_and_what_follows_not_the_reads_before(
        self, tmp_path: Path
    ) -> None:
        # A read handled before the write whose commit the journal refused saw only what
        # the journal holds: it answers, and its access stands (the reload after the
        # failure took it back to the journal's: the session expired early). What
        # follows the write may have seen it, so it gets the batch's error, also one
        # that failed on its own for what the undone write did (a delete: "not found").
        clock = FakeClock()
        config = _full_at_a_mebibyte()
        with Runtime.open(tmp_path / "j", config=config, clock=clock) as runtime:
            memory = runtime.memory
            session, other = memory.create_session("u"), memory.create_session("u")
            big = Message(role="user", content="x" * 400_000)
            clock.advance(95)
            ops = [
                _memory._Op("get_messages", (session,)),
                _memory._Op("add", (other, big)),
                _memory._Op("add", (other, big)),
                _memory._Op("add", (other, big)),  # the three do not fit the map
                _memory._Op("delete_session", (session,)),
                _memory._Op("get_messages", (session,)),
            ]
            memory._run(ops)  # one batch, run here as the idle session actor would

            outcomes = [type(op.error).__name__ if op.error else len(op.result) for op in ops]
            clock.advance(55)  # 150: past the TTL from the creation, not from the read at 95
            after = len(memory.get_messages(session))
            live = memory.sessions()  # the other one, not read since 0 (refused writes are no use), expired

        errors = [op.error for op in ops[1:]]
        assert outcomes == [1, *["JournalFullError"] * 5]
        assert len({id(error) for error in errors}) == 5  # a copy each: one traceback per caller
        assert after == 1
        assert live == [session]

    def test_in_batch_durability_a_kill_the_journal_refuses_leaves_the_agent_live_as_on_reopen(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        config = Config(journal=JournalConfig(durability="batch"))
        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as runtime:
            runtime.spawn("victim")
            runtime.flush()
            journal = runtime._journal
            assert journal is not None
            append = journal.append

            def refuse_deaths(events: list[Any], **kwargs: Any) -> list[int]:
                if any(isinstance(e, AgentKilled) for e in events):
                    msg = "refused at commit"  # accepted when handed over, refused by the journal
                    raise InvalidStreamError(msg)
                return append(events, **kwargs)

            monkeypatch.setattr(journal, "append", refuse_deaths)
            with pytest.raises(JournalError, match="refused at commit"):
                runtime.kill("victim")  # durable first, also in batch: a stopped agent could not come back
            monkeypatch.undo()

            assert "victim" in runtime.agents()
        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as runtime:
            assert "victim" in runtime.agents()


class TestSnapshotsAndPublications:
    @pytest.mark.parametrize("mode", ["sync", "batch"])
    def test_a_publication_queued_behind_a_snapshot_is_not_lost_on_reopen(
        self, tmp_path: Path, mode: str
    ) -> None:
        config = Config(journal=JournalConfig(durability=mode, snapshot_interval=1))  # type: ignore[arg-type]
        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors={"gate": Gate}) as rt:
            agent = rt.spawn("a", task_id="t", task_context={"v": 0}, behavior="gate")
            rt.bus.send("x", "a", "block", "payload")
            assert Gate.started.wait(10)
            rt.publish_task_context("t", {"v": "published"})  # committed while the agent is busy
            Gate.release.set()  # its next change, and snapshot, come after the publication's seq
            rt.flush()
            live = agent.context_view()

        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors={"gate": Gate}) as rt:
            reopened = rt.agent("a").context_view()

        assert dict(live.task_shared) == {"v": "published"}
        assert dict(reopened.task_shared) == dict(live.task_shared)
        assert dict(reopened.private) == dict(live.private) == {"last": "payload"}

    def test_the_writer_forgets_a_publication_once_every_target_applied_it(self, tmp_path: Path) -> None:
        # Its bookkeeping (for clamping snapshots) follows the publications in flight,
        # so a long simulation that publishes every step does not grow without limit.
        with _open(tmp_path / "j", mode="batch") as runtime:
            agents = [runtime.spawn(f"a{i}", task_id="t") for i in range(3)]
            for step in range(20):
                runtime.publish_task_context("t", {"step": step})
            assert [a.task_context() for a in agents] == [{"step": 19}] * 3  # each applied all 20
            runtime.flush()

            writer = runtime._core.writer
            assert writer is not None
            assert writer._publishes == {}


class Unanswerable:
    """Answers every request with a value msgspec cannot encode."""

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:
        ctx.set_private("asked", message.topic)
        return object()


class TestLiveMatchesReplay:
    """Paths where the live runtime once parted from what its journal replays."""

    @pytest.mark.parametrize("mode", ["sync", "batch"])
    def test_a_kill_that_timed_out_still_completes_and_nothing_follows_it(
        self, tmp_path: Path, mode: str
    ) -> None:
        with _open(tmp_path / "j", mode=mode) as runtime:
            runtime.spawn("a", task_id="t", behavior="gate")
            ref = runtime._entry("a").ref
            runtime.bus.send("x", "a", "block")
            assert Gate.started.wait(10)
            with _short_call_timeout(runtime, 0.3), pytest.raises(ActorTimeoutError):  # not the set-up's
                runtime.kill("a")  # queued behind the blocked message
            runtime.bus.send("x", "a", "after")  # queued behind the kill
            assert runtime.publish_task_context("t", {"v": 1}) == ["a"]  # behind it too
            Gate.release.set()

            assert ref.actor_stopped.wait(10)
            runtime.flush()
            assert runtime.agents() == []
            writer = runtime._core.writer
            assert writer is not None
            assert writer._publishes == {}  # the dead agent will never apply it: forgotten
            assert [m.topic for m in Gate.seen] == ["block"]  # "after" never ran
            assert [(d.topic, d.reason) for d in runtime.bus.dead_letters()] == [("after", "agent killed")]
            with pytest.raises(AgentNotFoundError):
                runtime.agent("a")

        with _open(tmp_path / "j", mode=mode) as runtime:
            assert runtime.agents() == []

    def test_an_unencodable_reply_fails_the_request_and_keeps_the_agent(self, tmp_path: Path) -> None:
        config = Config(runtime=RuntimeConfig(call_timeout=10.0))
        path = tmp_path / "j"
        with Runtime.open(path, config=config, clock=FakeClock(), behaviors={"u": Unanswerable}) as runtime:
            agent = runtime.spawn("a", behavior="u")
            with pytest.raises(IpcHandlerError):
                runtime.bus.request("x", "a", "q", timeout=10)

            assert runtime.agents() == ["a"]
            assert agent.private("asked") == "q"  # the actor is alive and answers
            assert [d.reason for d in runtime.bus.dead_letters()] == ["handler error"]

        with Runtime.open(path, config=config, clock=FakeClock(), behaviors={"u": Unanswerable}) as runtime:
            assert runtime.agent("a").private("asked") == "q"

    def test_an_unexpected_error_on_a_message_restarts_the_agent_instead_of_stopping_it(
        self, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        def broken(*_: object) -> None:
            msg = "not a behavior's error"
            raise RuntimeError(msg)

        with _open(None) as runtime:
            agent = runtime.spawn("a", task_id="t")
            monkeypatch.setattr(AgentActor, "_on_publish", broken)
            runtime.publish_task_context("t", {"v": 1})

            agent.set_private("k", 1)  # handled after the failed publication: the actor lives on
            assert agent.private("k") == 1
            assert "restarting it" in caplog.text

    def test_a_subscription_whose_call_timed_out_still_reaches_the_topic_index(self, tmp_path: Path) -> None:
        with _open(tmp_path / "j") as runtime:
            agent = _running(runtime)
            with _short_call_timeout(runtime, 0.3), pytest.raises(ActorTimeoutError):  # not the set-up's
                runtime.bus.subscribe("a", "news")  # queued behind the blocked message
            Gate.release.set()
            assert agent.private("nothing") is None  # answered after the subscription ran

            assert runtime.bus.subscribers("news") == ["a"]
            runtime.bus.subscribe("a", "news")  # a retry is a no-op
            assert runtime.bus.subscribers("news") == ["a"]

        with _open(tmp_path / "j") as runtime:
            assert runtime.bus.subscribers("news") == ["a"]

    def test_a_sync_change_whose_commit_timed_out_is_taken_from_the_journal_afterwards(
        self, tmp_path: Path
    ) -> None:
        with _open(tmp_path / "j") as runtime:
            agent = runtime.spawn("a")
            gate = _stall(runtime)
            with _short_call_timeout(runtime, 0.3), pytest.raises(ActorTimeoutError):
                agent.set_private("k", 1)  # handed over; the commit is stuck behind the gate
            gate.set()
            runtime.flush()  # now it is stored

            assert agent.private("k") == 1  # as replay will say
        with _open(tmp_path / "j") as runtime:
            assert runtime.agent("a").private("k") == 1


def _full_at_a_mebibyte(**sections: Any) -> Config:
    """A config whose journal's map stops at 1 MiB (a few big messages make it fail-stop), TTL 100 s."""
    return Config(
        journal=JournalConfig(map_size=1 << 20, max_map_size=1 << 20),
        memory=MemoryConfig(session_ttl=100.0),
        **sections,
    )


class _Stalled:
    """A journal whose appends go through ``append`` (the rest is the real journal's)."""

    def __init__(self, journal: Journal, append: Any) -> None:
        self._journal = journal
        self.append = append

    def __getattr__(self, name: str) -> Any:
        return getattr(self._journal, name)


def _stall(
    runtime: Runtime,
    holds: Callable[[Sequence[Event]], bool] | None = None,
    entered: threading.Event | None = None,
) -> threading.Event:
    """Make the runtime's journal appends wait until the returned event is set.

    ``holds``: only the appends of the events it picks wait; ``entered`` is set when one does.
    """
    writer = runtime._core.writer
    assert writer is not None
    gate = threading.Event()
    journal = writer._journal
    real_append = journal.append

    def gated_append(events: Sequence[Event], *args: Any, **kwargs: Any) -> list[int]:
        if holds is None or holds(events):
            if entered is not None:
                entered.set()
            assert gate.wait(10), "the test never opened the gate"
        return real_append(events, *args, **kwargs)

    writer._journal = _Stalled(journal, gated_append)  # type: ignore[assignment]
    return gate


def _stall_then_fail(
    runtime: Runtime,
    failure: Exception,
    holds: Callable[[Sequence[Event]], bool] = bool,
    entered: threading.Event | None = None,
) -> threading.Event:
    """Make the runtime's next journal append wait until the returned event is set, then raise ``failure``.

    ``holds``: the first append of the events it picks, not the next one. The appends
    after it go through (if the writer still makes any). ``entered`` is set when it waits.
    """
    writer = runtime._core.writer
    assert writer is not None
    gate = threading.Event()
    journal = writer._journal
    real_append = journal.append
    failed: list[bool] = []

    def failing_append(events: Sequence[Event], *args: Any, **kwargs: Any) -> list[int]:
        if not failed and holds(events):
            failed.append(True)
            if entered is not None:
                entered.set()
            assert gate.wait(10), "the test never opened the gate"
            raise failure
        return real_append(events, *args, **kwargs)

    writer._journal = _Stalled(journal, failing_append)  # type: ignore[assignment]
    return gate


def _output_records(events: Sequence[Event]) -> bool:
    """For ``_stall``: an LLM output's record (a turn's)."""
    return any(isinstance(e, LlmOutputRecorded) for e in events)


def _open_when_an_agent_finds_it_stalled(monkeypatch: pytest.MonkeyPatch, gate: threading.Event) -> None:
    """Set ``gate`` (the disk recovers) once an agent's catch-up finds the writer not past its commit.

    An agent behind the journal handles nothing until the writer is past what it
    stopped waiting for; this opens the gate after its first try found it stalled.
    """
    try_catch_up = AgentActor.try_catch_up

    def watched(actor: AgentActor) -> bool:
        if try_catch_up(actor):
            return True
        gate.set()
        return False

    monkeypatch.setattr(AgentActor, "try_catch_up", watched)


def _no_late_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the helper threads that finish a timed-out call fail to start, as in a process out of threads."""
    real_start = threading.Thread.start

    def start(thread: threading.Thread) -> None:
        if thread.name.startswith("cogfabric-late-"):
            msg = "can't start new thread"
            raise RuntimeError(msg)
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start)


def _join_late(what: str) -> None:
    """Wait for the helper threads that finish a timed-out call."""
    for thread in threading.enumerate():
        if thread.name.startswith(f"cogfabric-late-{what} ["):
            thread.join(10)
            assert not thread.is_alive()


class _DeletingProvider(ScriptedProvider):
    """Answers after the turn's session was deleted (by another user of it, say)."""

    runtime: Runtime
    session: str

    def generate(self, prompt: str, **params: Any) -> str:
        self.runtime.memory.delete_session(self.session)
        return super().generate(prompt, **params)


def _held_until_stopped(
    runtime: Runtime, *, entered: threading.Event | None = None, until_stopped: bool = True
) -> threading.Event:
    """Hold the journal's appends until the writer is asked to stop; each then ends once it refuses others.

    So a commit that timed out ends while ``close()`` stops the writer, its post-commit
    action run after the writer refuses submissions from other threads. Returns the gate
    (set by the writer's ``stop``). ``entered``: set when an append waits.
    ``until_stopped=False``: an append ends at once when the gate opens.
    """
    writer = runtime._core.writer
    assert writer is not None
    gate = threading.Event()
    journal = writer._journal
    real_append, real_stop = journal.append, writer.stop

    def held(events: Any, *args: Any, **kwargs: Any) -> list[int]:
        if entered is not None:
            entered.set()
        assert gate.wait(10)
        seqs = real_append(events, *args, **kwargs)
        if until_stopped:
            with writer._room:
                assert writer._room.wait_for(lambda: writer._closed, 10)
        return seqs

    def stop(timeout: float | None = None) -> None:
        gate.set()
        real_stop(timeout)

    writer._journal = _Stalled(journal, held)  # type: ignore[assignment]
    writer.stop = stop  # type: ignore[method-assign]
    return gate


def _news_to_r(runtime: Runtime, op: str) -> object:
    """From outside an agent, a ``request``, ``send`` or ``broadcast`` on topic 'news' (to 'r')."""
    if op == "request":
        return runtime.bus.request("x", "r", "news", 1, timeout=10)
    if op == "send":
        return runtime.bus.send("x", "r", "news", 1)
    return runtime.bus.broadcast("x", "news", 1)


def _endings(path: Path, topic: str) -> tuple[list[str], list[IpcDelivered]]:
    """The dead letters' reasons and the deliveries of the one message on ``topic`` at ``path``."""
    with Journal.open(path, readonly=True) as stored:
        events = [r.event for r in stored.read()]
    (message,) = [e for e in events if isinstance(e, IpcMessage) and e.topic == topic]
    letters = [e.reason for e in events if isinstance(e, IpcDeadLettered) and e.message_id == message.id]
    delivered = [e for e in events if isinstance(e, IpcDelivered) and e.message_id == message.id]
    return letters, delivered


class TestTimedOutCallsFinishLate:
    def test_a_spawn_whose_commit_timed_out_starts_its_agent_once_stored(self, tmp_path: Path) -> None:
        # Here and below, only the call meant to time out has the short call_timeout: what
        # comes after the stall waits for its commit too, which a loaded machine may slow.
        with _open(tmp_path / "j") as runtime:
            gate = _stall(runtime)
            with _short_call_timeout(runtime, 0.1), pytest.raises(ActorTimeoutError):
                runtime.spawn("b")
            with pytest.raises(AgentExistsError):
                runtime.spawn("b")  # the id stays reserved: no second AgentSpawned
            gate.set()
            _join_late("spawn")

            assert runtime.agents() == ["b"]
            runtime.agent("b").set_private("k", 1)
        with _open(tmp_path / "j") as runtime:
            assert runtime.agents() == ["b"]
            assert runtime.agent("b").private("k") == 1

    def test_a_spawn_that_timed_out_with_no_thread_left_to_finish_it_stops_its_agents(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        with _open(tmp_path / "j") as runtime:
            gate = _stall(runtime)
            _no_late_threads(monkeypatch)
            with _short_call_timeout(runtime, 0.1), pytest.raises(ActorTimeoutError):
                runtime.spawn("b")
            monkeypatch.undo()
            gate.set()
            runtime.flush()

            assert [ref for ref in pykka.ActorRegistry.get_by_class(AgentActor) if ref.is_alive()] == []
            assert runtime.agents() == []
            with pytest.raises(AgentExistsError):
                runtime.spawn("b")  # reserved: the journal holds its spawn, taken on reopen
        with _open(tmp_path / "j") as runtime:
            assert runtime.agents() == ["b"]

    @pytest.mark.parametrize("call", ["spawn", "publication"])
    def test_a_flush_returns_once_what_calls_that_timed_out_left_is_finished(
        self, tmp_path: Path, call: str
    ) -> None:
        # A helper thread finishes a call whose caller timed out (a spawn registers its
        # agent, a publication reaches its agents) once the writer commits it; flush()
        # returned without waiting for it, so agents() or a task layer right after it
        # did not show what the journal held. Here the helper thread only goes on once
        # the flush has seen the writer commit, as a loaded machine may schedule it.
        with _open(tmp_path / "j") as runtime:
            runtime.spawn("a", task_id="t", task_context={"v": 0})
            writer = runtime._core.writer
            assert writer is not None
            committed = threading.Event()
            real_flush, real_finish_late = writer.flush, runtime._finish_late

            def flush(timeout: float | None = None) -> None:
                real_flush(timeout)
                committed.set()

            def finish_late(ack: Any, done: Callable[[bool], None], what: str) -> bool:
                def later(ok: bool) -> None:
                    assert committed.wait(10)
                    done(ok)

                return real_finish_late(ack, later, what)

            writer.flush = flush  # type: ignore[method-assign]
            runtime._finish_late = finish_late  # type: ignore[method-assign]
            calls: dict[str, Callable[[], object]] = {
                "spawn": lambda: runtime.spawn("b", task_id="t"),
                "publication": lambda: runtime.publish_task_context("t", {"v": "published"}),
            }
            gate = _stall(runtime)
            with _short_call_timeout(runtime, 0.1), pytest.raises(ActorTimeoutError):
                calls[call]()
            gate.set()
            runtime.flush()

            live = (runtime.agents(), runtime.agent("a").task_context())
        with _open(tmp_path / "j") as runtime:
            assert live == (runtime.agents(), runtime.agent("a").task_context())
        assert live == ((["a", "b"], {"v": 0}) if call == "spawn" else (["a"], {"v": "published"}))

    def test_a_flush_racing_the_start_of_a_late_helper_thread_raises_no_runtime_error(
        self, tmp_path: Path
    ) -> None:
        # flush joined the helper threads it found registered, and one registered but not
        # yet started cannot be joined: RuntimeError. The interleaving is forced: the
        # registration runs a whole flush on another thread before the helper starts.
        outcome: list[BaseException | None] = []

        with _open(tmp_path / "j") as runtime:
            runtime.spawn("a")
            gate = _stall(runtime)

            class Racing(dict[Any, Any]):
                def __setitem__(self, key: Any, value: Any) -> None:
                    super().__setitem__(key, value)
                    if not outcome:
                        gate.set()  # the writer goes on, so the flush gets past it

                        def flush() -> None:
                            try:
                                runtime.flush()
                                outcome.append(None)
                            except BaseException as exc:  # noqa: BLE001 - reported below
                                outcome.append(exc)

                        other = threading.Thread(target=flush)
                        other.start()
                        other.join(10)

            runtime._late = Racing()
            # The flush on the other thread runs inside the spawn, with its short call_timeout
            # (it may time out waiting for the helper thread that has not started: accepted).
            with _short_call_timeout(runtime, 0.3), pytest.raises(ActorTimeoutError):
                runtime.spawn("b")
            runtime.flush()

            assert len(outcome) == 1
            assert outcome[0] is None or isinstance(outcome[0], ActorTimeoutError), repr(outcome[0])
            assert runtime.agents() == ["a", "b"]

    def test_a_publication_that_timed_out_with_no_thread_left_to_finish_it_is_a_timeout_logged(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        with _open(tmp_path / "j") as runtime:
            runtime.spawn("a", task_id="t", task_context={"v": 0})
            gate = _stall(runtime)
            _no_late_threads(monkeypatch)
            with _short_call_timeout(runtime, 0.1), pytest.raises(ActorTimeoutError):
                runtime.publish_task_context("t", {"v": "published"})
            monkeypatch.undo()
            gate.set()
            runtime.flush()
        assert "no thread to finish a publication" in caplog.text
        with _open(tmp_path / "j") as runtime:  # the journal holds it: a reopen applies it
            assert runtime.agent("a").task_context() == {"v": "published"}

    def test_a_publication_whose_commit_timed_out_reaches_its_agents_once_stored(
        self, tmp_path: Path
    ) -> None:
        with _open(tmp_path / "j") as runtime:
            agent = runtime.spawn("a", task_id="t", task_context={"v": 0})
            gate = _stall(runtime)
            with _short_call_timeout(runtime, 0.1), pytest.raises(ActorTimeoutError):
                runtime.publish_task_context("t", {"v": "published"})
            gate.set()
            _join_late("publication")

            assert agent.task_context() == {"v": "published"}
            runtime.flush()
            writer = runtime._core.writer
            assert writer is not None
            assert writer._publishes == {}  # applied, so forgotten
        with _open(tmp_path / "j") as runtime:
            assert runtime.agent("a").task_context() == {"v": "published"}

    def test_a_session_message_whose_commit_timed_out_is_kept_once_stored(self, tmp_path: Path) -> None:
        with _open(tmp_path / "j") as runtime:
            session = runtime.memory.create_session("u")
            gate = _stall(runtime)
            with _short_call_timeout(runtime, 0.3), pytest.raises(ActorTimeoutError):
                runtime.memory.add_message(session, "user", "late")
            gate.set()
            runtime.flush()

            live = [m.content for m in runtime.memory.get_messages(session)]
            assert live[-1] == "late"
        with _open(tmp_path / "j") as runtime:
            assert [m.content for m in runtime.memory.get_messages(session)] == live

    def test_a_session_write_after_one_whose_commit_timed_out_is_decided_on_the_journals_word(
        self, tmp_path: Path
    ) -> None:
        # The delete's commit times out; the session actor ran the next create on the
        # state without s1 (nothing evicted), and the delete was then refused: live and
        # reopened, three sessions under max_sessions=2. It now waits for the delete.
        config = Config(memory=MemoryConfig(max_sessions=2))
        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as runtime:
            s1 = runtime.memory.create_session("u")
            s2 = runtime.memory.create_session("v")
            gate = _stall_then_fail(runtime, ValueError("refused"))
            with _short_call_timeout(runtime, 0.3):  # while the disk stalls: the set-up's commits may be slow
                with pytest.raises(ActorTimeoutError):
                    runtime.memory.delete_session(s1)
                with pytest.raises(ActorTimeoutError):  # it waits for the delete's commit first
                    runtime.memory.create_session("w")
            gate.set()
            runtime.flush(10)
            live = runtime.memory.sessions()  # behind the create
        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as runtime:
            reopened = runtime.memory.sessions()

        assert len(live) == 2
        assert s1 not in live  # evicted by the create, least recently used
        assert s2 in live
        assert live == reopened

    def test_a_reply_whose_commit_timed_out_keeps_the_agent_and_its_behavior(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        # The commit of a behavior's reply outlasting call_timeout restarted the agent,
        # as if the behavior had failed: a fresh instance from its factory (what the
        # old one held was lost), an ERROR in the log, and no AgentFailed to say why.
        made: list[_Counting] = []
        stall: list[threading.Event] = []

        class _Counting:
            def __init__(self) -> None:
                self.handled = 0
                made.append(self)

            def on_message(self, ctx: AgentContext, message: IpcMessage) -> int:  # noqa: ARG002
                self.handled += 1
                if message.payload == "stall":
                    stall.append(_stall(runtime))  # its reply's commit waits for the gate
                    # the short call_timeout only for the reply's commit: the request's own
                    # commit, before this, keeps the runtime's (a loaded machine's slow commit)
                    runtime._core.call_timeout = 0.3
                return self.handled

        with _open(tmp_path / "j", behaviors={"counting": _Counting}) as runtime:
            runtime.spawn("c", behavior="counting")
            assert runtime.bus.request("me", "c", "q", timeout=10).payload == 1
            kept = runtime._core.call_timeout
            try:
                with caplog.at_level(logging.WARNING), pytest.raises(IpcHandlerError) as told:
                    runtime.bus.request("me", "c", "q", "stall", timeout=10)
            finally:
                runtime._core.call_timeout = kept
            stall[0].set()
            runtime.flush()
            after = runtime.bus.request("me", "c", "q", timeout=10).payload

            assert isinstance(told.value.__cause__, ActorTimeoutError)
            assert (after, len(made)) == (3, 1)  # the same instance, with what it held
            assert [r.levelname for r in caplog.records if r.name.startswith("cogfabric")] == ["WARNING"]
            assert "agent c: its reply to 'me''s request 'q'" in caplog.records[-1].getMessage()
        with Journal.open(tmp_path / "j", readonly=True) as journal:
            assert not [r for r in journal.read() if isinstance(r.event, AgentFailed)]

    @pytest.mark.parametrize("call", ["send", "broadcast"])
    def test_a_message_whose_commit_timed_out_reaches_its_recipient_once_stored(
        self, tmp_path: Path, call: str
    ) -> None:
        # A send or broadcast from outside an agent whose commit outlasted call_timeout
        # was dropped, while the writer then stored it: replay showed it pending for
        # good, with neither a delivery nor a dead letter, and its recipient never had it.
        # Only the send has the short call_timeout (as the request's test below).
        with _open(tmp_path / "j") as runtime:
            runtime.spawn("r", behavior="gate")
            runtime.bus.subscribe("r", "news")
            gate = _stall(runtime)
            with _short_call_timeout(runtime, 0.1), pytest.raises(ActorTimeoutError):
                _news_to_r(runtime, call)
            gate.set()
            runtime.flush()
            runtime.bus.request("x", "r", "ping", timeout=10)  # r handled what came before

            assert [m.topic for m in Gate.seen] == ["news", "ping"]
        with Journal.open(tmp_path / "j", readonly=True) as journal:
            events = [r.event for r in journal.read()]
        (sent,) = [e for e in events if isinstance(e, IpcMessage) and e.topic == "news"]
        assert [e for e in events if isinstance(e, IpcDelivered) and e.message_id == sent.id]
        assert not [e for e in events if isinstance(e, IpcDeadLettered)]

    def test_a_request_whose_commit_timed_out_is_dead_lettered_once_stored_not_delivered(
        self, tmp_path: Path
    ) -> None:
        # Its requester gave up at its commit: once stored, it gets the dead letter of a
        # request that timed out (nobody waits for the reply), not a delivery. Only the
        # request has the short call_timeout: the flush and the ping after it wait for the
        # stalled commit too, and on a loaded machine it can take 0.3 s once the gate opens.
        with _open(tmp_path / "j") as runtime:
            runtime.spawn("r", behavior="gate")
            gate = _stall(runtime)
            with _short_call_timeout(runtime, 0.1), pytest.raises(ActorTimeoutError):
                runtime.bus.request("x", "r", "asked", timeout=10)
            gate.set()
            runtime.flush()
            runtime.bus.request("x", "r", "ping", timeout=10)

            assert [m.topic for m in Gate.seen] == ["ping"]
            assert [(d.topic, d.reason) for d in runtime.bus.dead_letters()] == [("asked", "timeout")]
        with Journal.open(tmp_path / "j", readonly=True) as journal:
            events = [r.event for r in journal.read()]
        (asked,) = [e for e in events if isinstance(e, IpcMessage) and e.topic == "asked"]
        letters = [e for e in events if isinstance(e, IpcDeadLettered) and e.message_id == asked.id]
        assert [letter.reason for letter in letters] == ["timeout"]
        assert not [e for e in events if isinstance(e, IpcDelivered) and e.message_id == asked.id]

    def test_a_request_whose_timed_out_commit_lands_as_close_stops_the_writer_is_dead_lettered(
        self, tmp_path: Path
    ) -> None:
        # Its commit ends after close() has stopped the writer taking submissions: the
        # post-commit dead letter, on the writer's own thread, was refused and dropped,
        # so the journal kept a request with neither a delivery nor a dead letter
        # (found by a wider stalled-disk model test).
        with _open(tmp_path / "j") as runtime:
            runtime.spawn("r", behavior="gate")
            _held_until_stopped(runtime)
            with _short_call_timeout(runtime, 0.1), pytest.raises(ActorTimeoutError):  # not the spawn's
                runtime.bus.request("x", "r", "asked", timeout=10)
        assert _endings(tmp_path / "j", "asked") == (["timeout"], [])
        assert Gate.seen == []

    @pytest.mark.parametrize("op", ["send", "broadcast"])
    def test_a_message_whose_timed_out_commit_lands_as_close_stops_the_writer_is_dead_lettered(
        self, tmp_path: Path, op: str
    ) -> None:
        # Finished on the writer's thread once stored, it finds its recipient stopped:
        # the "closed" dead letter of a message that reaches its agent once close() asked
        # it to stop (it was refused by the stopping writer, and the message left pending).
        with _open(tmp_path / "j") as runtime:
            runtime.spawn("r", behavior="gate")
            runtime.bus.subscribe("r", "news")
            _held_until_stopped(runtime)
            with _short_call_timeout(runtime, 0.1), pytest.raises(ActorTimeoutError):  # not the set-up's
                _news_to_r(runtime, op)
        assert _endings(tmp_path / "j", "news") == (["closed"], [])
        assert Gate.seen == []

    @pytest.mark.parametrize("op", ["request", "send", "broadcast"])
    def test_a_message_whose_timed_out_commit_lands_after_close_gave_up_on_the_writer_is_dead_lettered(
        self, tmp_path: Path, op: str
    ) -> None:
        # close() raised ActorTimeoutError (the writer stalled) and left the journal to
        # the writer, which still commits what finishing the message journals: a request
        # its "timeout" letter, a send and a broadcast (which gave up once close() was
        # over) their "closed" one.
        runtime = _open(tmp_path / "j")
        runtime.spawn("r", behavior="gate")
        runtime.bus.subscribe("r", "news")
        writer = runtime._core.writer
        assert writer is not None
        gate = _stall(runtime)
        try:
            # while the disk stalls (close()'s wait for the writer too): the set-up's commits may be
            # slow. The writer's stop gives up on the stalled commit at ten times its 0.05 s.
            with _short_call_timeout(runtime, 0.2, writer_too=True, writer_seconds=0.05):
                with pytest.raises(ActorTimeoutError):
                    _news_to_r(runtime, op)
                with pytest.raises(ActorTimeoutError, match="did not stop"):
                    runtime.close()
        finally:
            gate.set()
        assert writer._ended.wait(10)
        assert _endings(tmp_path / "j", "news") == (["timeout" if op == "request" else "closed"], [])
        assert Gate.seen == []

    @pytest.mark.parametrize("lands", ["as the writer stops", "before the writer stops"])
    def test_a_request_failed_by_close_while_its_commit_waits_gets_one_dead_letter(
        self, tmp_path: Path, lands: str
    ) -> None:
        # close() fails the request still waiting (its "closed" letter); its requester
        # then gives up at its commit, which lands later: no second, "timeout", letter.
        runtime = _open(tmp_path / "j")
        runtime.spawn("r", behavior="gate")
        writer = runtime._core.writer
        assert writer is not None
        entered, gave_up = threading.Event(), threading.Event()
        gate = _held_until_stopped(runtime, entered=entered, until_stopped=lands == "as the writer stops")
        real_stop = writer.stop

        def stop(timeout: float | None = None) -> None:
            assert gave_up.wait(10)  # the requester gave up at its commit
            gate.set()
            if lands == "before the writer stops":
                writer.flush(10)  # the request is committed, its post-commit action run
            real_stop(timeout)

        writer.stop = stop  # type: ignore[method-assign]
        # the request and close() alone have the short call_timeout: the spawn's commit may be slow
        with concurrent.futures.ThreadPoolExecutor(1) as pool, _short_call_timeout(runtime, 0.3):
            requester = pool.submit(runtime.bus.request, "x", "r", "asked", timeout=10)
            requester.add_done_callback(lambda _: gave_up.set())
            assert entered.wait(10)  # its commit waits for the disk, the requester for it
            runtime.close()
            assert isinstance(requester.exception(10), ActorTimeoutError)
        # "closed" if close() got to it while the requester waited, "timeout" if the
        # requester gave up first (a loaded machine): one letter either way
        letters, delivered = _endings(tmp_path / "j", "asked")
        assert len(letters) == 1, letters
        assert letters[0] in {"closed", "timeout"}
        assert delivered == []

    def test_a_request_whose_timed_out_commit_is_dead_lettered_before_close_fails_it_gets_one_letter(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Its requester gave up at its commit but had not yet taken it off the pending
        # requests when the commit landed ("timeout" letter) and close() began: close()
        # failed it too, with a second, "closed", letter (found by a helper's re-review).
        runtime = _open(tmp_path / "j")
        runtime.spawn("r", behavior="gate")
        writer = runtime._core.writer
        assert writer is not None
        entered, gave, proceed = threading.Event(), threading.Event(), threading.Event()
        gate = _stall(
            runtime,
            holds=lambda events: any(getattr(e, "topic", "") == "asked" for e in events),
            entered=entered,
        )
        real_give_up = _Handoff.give_up

        def give_up(handoff: _Handoff) -> bool:
            gave_up = real_give_up(handoff)
            if gave_up and threading.current_thread().name.startswith("requester"):
                gave.set()
                assert proceed.wait(10)  # preempted before request() takes it off the pending ones
            return gave_up

        monkeypatch.setattr(_Handoff, "give_up", give_up)
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="requester") as pool:
            try:
                with _short_call_timeout(runtime, 0.3):  # the request's wait alone: the spawn's may be slow
                    requester = pool.submit(runtime.bus.request, "x", "r", "asked", timeout=10)
                    assert entered.wait(10)
                    assert gave.wait(10)
                gate.set()
                writer.flush(10)  # stored, and its post-commit "timeout" letter written
                runtime.close()
            finally:
                gate.set()
                proceed.set()
            assert isinstance(requester.exception(10), ActorTimeoutError)
        assert _endings(tmp_path / "j", "asked") == (["timeout"], [])
        assert [d.reason for d in runtime.bus.dead_letters() if d.topic == "asked"] == ["timeout"]

    def test_a_request_refused_for_a_full_mailbox_as_close_begins_gets_one_letter(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Its "mailbox full" letter was written while it was still among the pending
        # requests: a close() that began before the requester took it off failed it
        # too, with a second, "closed", letter (found by a helper's re-review).
        runtime = _open(tmp_path / "j", mailbox=1, timeout=10.0)
        runtime.spawn("s", behavior="gate")
        runtime.bus.send("u", "s", "block")
        assert Gate.started.wait(10)
        runtime.bus.send("u", "s", "second")  # the mailbox is full now
        lettered, proceed = threading.Event(), threading.Event()
        real_dead_letter = runtime.bus.dead_letter

        def dead_letter(message: IpcMessage, reason: str, error: str) -> None:
            real_dead_letter(message, reason, error)
            if reason == "mailbox full" and threading.current_thread().name.startswith("requester"):
                lettered.set()
                assert proceed.wait(10)  # preempted before request() takes it off the pending ones

        monkeypatch.setattr(runtime.bus, "dead_letter", dead_letter)
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="requester") as pool:
            requester = pool.submit(runtime.bus.request, "u", "s", "waiting", timeout=0.3)
            try:
                assert lettered.wait(10)
                Gate.release.set()
                runtime.close()
            finally:
                Gate.release.set()
                proceed.set()
            assert isinstance(requester.exception(10), MailboxFullError)
        with Journal.open(tmp_path / "j", readonly=True) as stored:
            events = [r.event for r in stored.read()]
        letters = [e.reason for e in events if isinstance(e, IpcDeadLettered) and e.topic == "waiting"]
        assert letters == ["mailbox full"]

    def test_a_send_whose_timed_out_commit_is_refused_gives_its_mailbox_slot_back(
        self, tmp_path: Path
    ) -> None:
        # Not stored after all: not delivered, and the slot it held in a mailbox of one is free.
        with _open(tmp_path / "j", mailbox=1) as runtime:
            runtime.spawn("r", behavior="gate")
            writer = runtime._core.writer
            assert writer is not None
            gate = threading.Event()
            journal = writer._journal
            real_append = journal.append

            def refusing(events: Any, *args: Any, **kwargs: Any) -> list[int]:
                assert gate.wait(10)
                if any(isinstance(e, IpcMessage) and e.topic == "lost" for e in events):
                    msg = "refused at commit"  # before anything is written: not fail-stop
                    raise InvalidStreamError(msg)
                return real_append(events, *args, **kwargs)

            writer._journal = _Stalled(journal, refusing)  # type: ignore[assignment]
            with _short_call_timeout(runtime, 0.1), pytest.raises(ActorTimeoutError):  # not the spawn's
                runtime.bus.send("x", "r", "lost")
            gate.set()
            runtime.flush()
            runtime.bus.send("x", "r", "kept")  # the mailbox of one has room
            runtime.bus.request("x", "r", "ping", timeout=10)

            assert [m.topic for m in Gate.seen] == ["kept", "ping"]

    def test_a_turn_whose_output_record_timed_out_still_adds_the_answer_to_its_session(
        self, tmp_path: Path
    ) -> None:
        # The output's record outlasting call_timeout left the journaled answer out of
        # its session, live and reopened: a retried turn asked the question twice.
        provider = ScriptedProvider(["the answer"])
        with _open(tmp_path / "j") as runtime:
            session = runtime.memory.create_session("u")
            llm = runtime.llm(provider)
            gate = _stall(runtime, _output_records)
            with _short_call_timeout_once_answered(runtime, provider, 0.3), pytest.raises(ActorTimeoutError):
                llm.turn(session, "question")
            gate.set()
            runtime.flush()
            live = [(m.role, m.content) for m in runtime.memory.get_messages(session)]
        with _open(tmp_path / "j") as runtime:
            reopened = [(m.role, m.content) for m in runtime.memory.get_messages(session)]
        assert live == reopened
        assert live[-2:] == [("user", "question"), ("assistant", "the answer")]

    @pytest.mark.parametrize("first", ["send", "broadcast"])
    def test_a_timed_out_message_reaches_its_recipient_before_the_next_send_of_its_thread(
        self, tmp_path: Path, first: str
    ) -> None:
        # README: "the sends, requests and broadcasts one thread makes one after another
        # reach each recipient in that order". Another thread's commit holds the writer,
        # so this thread's timed-out 'first' and its next 'second' are committed in one
        # group; a late delivery of 'first' on a helper thread raced the caller's own
        # delivery of 'second', and lost most rounds (a helper's review). Only 'first' has
        # the short call_timeout: 'second', the flush and the ping wait for the group's commit.
        with _open(tmp_path / "j") as runtime:
            runtime.spawn("r", behavior="gate")
            runtime.spawn("y", behavior="gate")
            writer = runtime._core.writer
            assert writer is not None
            journal, real_submit = writer._journal, writer.submit
            calls: dict[str, Callable[[str], object]] = {
                "send": lambda topic: runtime.bus.send("x", "r", topic),
                "broadcast": lambda topic: runtime.bus.broadcast("x", topic),
            }
            expected: list[str] = []
            for n in range(5):
                runtime.bus.subscribe("r", f"first{n}")
                gate, inside = threading.Event(), threading.Event()

                def held(*args: Any, _gate: Any = gate, _inside: Any = inside, **kwargs: Any) -> list[int]:
                    _inside.set()
                    assert _gate.wait(10)
                    return journal.append(*args, **kwargs)

                def submit(events: Any, _gate: Any = gate, _n: int = n, **kwargs: Any) -> Any:
                    ack = real_submit(events, **kwargs)
                    if any(isinstance(e, IpcMessage) and e.topic == f"second{_n}" for e in events):
                        _gate.set()  # the disk recovers once 'second' is queued behind 'first'
                    return ack

                writer._journal = _Stalled(journal, held)  # type: ignore[assignment]
                writer.submit = submit  # type: ignore[method-assign]
                other = threading.Thread(target=_timed_out_send, args=(runtime, "y", "other"))
                other.start()
                assert inside.wait(10)  # the writer holds 'other'
                # the writer holds 'other' until 'second' is queued: the wait runs out, however short
                with _short_call_timeout(runtime, 0.1), pytest.raises(ActorTimeoutError):
                    calls[first](f"first{n}")
                runtime.bus.send("x", "r", f"second{n}")
                other.join(10)
                writer._journal = journal
                writer.submit = real_submit  # type: ignore[method-assign]
                runtime.flush()
                runtime.bus.request("x", "r", "ping", timeout=10)
                expected += [f"first{n}", f"second{n}", "ping"]

            assert [m.topic for m in Gate.seen if m.recipient == "r"] == expected

    def test_a_turn_whose_output_record_timed_out_as_close_began_raises_its_timeout(
        self, tmp_path: Path
    ) -> None:
        # The answer's session add, made after the timeout, raised RuntimeClosedError and
        # buried the ActorTimeoutError: the caller heard "closed" for a turn whose output
        # record the journal holds (a helper's review).
        runtime = _open(tmp_path / "j")
        session = runtime.memory.create_session("u")
        provider = ScriptedProvider(["the answer"])
        llm = runtime.llm(provider)
        recorded = threading.Event()
        gate = _stall(runtime, _output_records, recorded)
        raised: list[BaseException] = []

        def run_turn() -> None:
            try:
                with _short_call_timeout_once_answered(runtime, provider, 0.3):  # the record's commit alone
                    llm.turn(session, "question")
            except BaseException as exc:  # noqa: BLE001 - the test looks at it
                raised.append(exc)

        turn = threading.Thread(target=run_turn)
        turn.start()
        closer = threading.Thread(target=runtime.close)
        try:
            assert recorded.wait(10)  # the output record is with the writer
            closer.start()  # close begins while the turn waits for the record's commit
            turn.join(10)
        finally:
            gate.set()
            if closer.ident is not None:
                closer.join(10)
            runtime.close()
        with Journal.open(tmp_path / "j", readonly=True) as stored:
            outputs = [r.event for r in stored.read() if isinstance(r.event, LlmOutputRecorded)]
        assert len(outputs) == 1
        assert len(raised) == 1
        assert isinstance(raised[0], ActorTimeoutError), repr(raised[0])

    def test_a_flush_during_which_a_timed_out_send_is_stored_waits_for_its_recipient(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # The send is delivered once stored; stored while flush() ran, after flush had
        # asked the agents with mail, flush returned with the recipient still handling it
        # (RUNNING, its changes not handed over; a helper's stalled-disk model test). As
        # for a send that returned, flush now asks it too, and names it while it is busy.
        with _open(tmp_path / "j") as runtime:
            agent, gate = _block_sent_on_a_stalled_disk(runtime)
            hand_over_all = runtime._hand_over_all
            asked: list[float] = []

            def hand_over_then_open(deadline: float) -> Exception | None:
                asked.append(deadline)
                if len(asked) == 2:  # the first flush asking r, busy, is meant to time out, not its commits
                    deadline = min(deadline, time.monotonic() + 0.3)
                problem = hand_over_all(deadline)
                gate.set()  # the disk recovers just after flush asked the agents
                return problem

            monkeypatch.setattr(runtime, "_hand_over_all", hand_over_then_open)
            with pytest.raises(ActorTimeoutError, match="'r'"):
                runtime.flush()
            assert Gate.started.is_set()
            Gate.release.set()
            runtime.flush()

            assert (agent.lifecycle, agent.private("last")) == (AgentState.IDLE, "late")

    def test_a_timed_out_broadcast_stored_later_reaches_a_full_mailbox_past_its_size(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        # Finished on the writer's thread, it waits for no room: a subscriber whose mailbox
        # was full then was dead-lettered ("stayed full for 0 s", a helper's review); it
        # takes it one over its size, as a durable publication does (logged).
        with _open(tmp_path / "j", mailbox=1) as runtime:
            runtime.spawn("r", behavior="gate")
            runtime.bus.subscribe("r", "news")
            runtime.bus.send("x", "r", "block")
            assert Gate.started.wait(10)  # r is busy
            runtime.bus.send("x", "r", "queued")  # its mailbox of one is full
            writer = runtime._core.writer
            assert writer is not None
            gate = _stall(runtime)
            with _short_call_timeout(runtime, 0.1), pytest.raises(ActorTimeoutError):
                runtime.bus.broadcast("x", "news", 1)
            with caplog.at_level(logging.WARNING):
                gate.set()
                writer.flush(10)  # stored: the late fan-out ran
            Gate.release.set()
            runtime.bus.request("x", "r", "ping", timeout=10)

            assert [m.topic for m in Gate.seen] == ["block", "queued", "news", "ping"]
            assert runtime.bus.dead_letters() == []
            assert "the mailbox of 'r' is full; a broadcast goes past its size" in caplog.text

    def test_a_timed_out_request_stored_during_a_flush_does_not_make_it_ask_the_agents_again(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # A timed-out request stored later is dead-lettered and told to nobody: a flush
        # during which it is stored does not ask the agents again (a helper's re-review:
        # it did, and waited for 'g', busy with a message sent after the flush asked).
        with _open(tmp_path / "j", mailbox=1) as runtime:
            runtime.spawn("r", behavior="gate")
            runtime.spawn("g", behavior="gate")
            gate = _stall(runtime)
            with _short_call_timeout(runtime, 0.5), pytest.raises(ActorTimeoutError):
                runtime.bus.request("x", "r", "ping", timeout=10)  # its commit times out

            journal_message = runtime.bus._journal_message
            block_admitted = threading.Event()

            def watched(message: IpcMessage, late: Any, **kwargs: Any) -> None:
                if message.topic == "block":
                    block_admitted.set()  # its slot in g's mailbox is taken
                journal_message(message, late, **kwargs)

            monkeypatch.setattr(runtime.bus, "_journal_message", watched)
            sender = threading.Thread(target=runtime.bus.send, args=("x", "g", "block"), daemon=True)
            hand_over_all = runtime._hand_over_all
            rounds: list[Exception | None] = []

            def then_send_and_open(deadline: float) -> Exception | None:
                if rounds:  # a second round would wait for g, busy: as short as call_timeout was
                    deadline = min(deadline, time.monotonic() + 0.5)
                problem = hand_over_all(deadline)
                rounds.append(problem)
                if len(rounds) == 1:  # flush asked the agents (none had mail): g gets a message now
                    sender.start()
                    assert block_admitted.wait(10)
                    gate.set()  # the disk recovers: the request is stored, and dead-lettered
                return problem

            monkeypatch.setattr(runtime, "_hand_over_all", then_send_and_open)
            try:
                runtime.flush()
            finally:
                Gate.release.set()
                sender.join(10)
            assert [d.reason for d in runtime.bus.dead_letters()] == ["timeout"]
            assert len(rounds) == 1  # a request told to nobody asks nobody again

    def test_the_answer_a_timed_out_turn_could_not_add_is_logged(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        # The answer is queued to the session without a wait; one it cannot take (the session
        # deleted meanwhile) is logged, not dropped without a word (a helper's re-review).
        with _open(tmp_path / "j") as runtime:
            session = runtime.memory.create_session("u")
            provider = _DeletingProvider(["the answer"])
            provider.runtime, provider.session = runtime, session
            llm = runtime.llm(provider)
            gate = _stall(runtime, _output_records)
            with (
                _short_call_timeout_once_answered(
                    runtime, provider, 0.3
                ),  # the delete before it too has 10 s
                caplog.at_level(logging.WARNING),
                pytest.raises(ActorTimeoutError),
            ):
                llm.turn(session, "question")
            gate.set()
            runtime.flush()
            assert runtime.memory.sessions() == []  # the session actor ran the add (and failed it)
        assert "was not added" in caplog.text

    def test_a_flush_begun_while_a_timed_out_send_is_being_delivered_late_waits_for_its_recipient(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # A late message is counted once it is told: a flush that read the count between
        # the two would ask the agents before it arrived and see no change after (a helper's
        # re-review). Here the writer's tell waits until flush has asked the agents.
        with _open(tmp_path / "j") as runtime:
            agent, gate = _block_sent_on_a_stalled_disk(runtime)
            tell_current = runtime._tell_current
            delivering, asked = threading.Event(), threading.Event()

            def held_tell(agent_id: str, entry: Any, message: Any) -> None:
                if not delivering.is_set():  # the first: the writer's late delivery
                    delivering.set()
                    assert asked.wait(10)
                tell_current(agent_id, entry, message)

            monkeypatch.setattr(runtime, "_tell_current", held_tell)
            hand_over_all = runtime._hand_over_all

            rounds: list[float] = []

            def then_deliver(deadline: float) -> Exception | None:
                rounds.append(deadline)
                if len(rounds) == 2:  # the first flush asking r, busy, is meant to time out, not its commits
                    deadline = min(deadline, time.monotonic() + 0.5)
                problem = hand_over_all(deadline)
                asked.set()
                return problem

            monkeypatch.setattr(runtime, "_hand_over_all", then_deliver)
            gate.set()  # stored: the writer counts it, then delivers it (held above)
            assert delivering.wait(10)
            with pytest.raises(ActorTimeoutError, match="'r'"):  # as for a send stored during the flush
                runtime.flush()
            Gate.release.set()
            runtime.flush()
            assert (agent.lifecycle, agent.private("last")) == (AgentState.IDLE, "late")


def _block_sent_on_a_stalled_disk(runtime: Runtime) -> tuple[Agent, threading.Event]:
    """Spawn "r" (``Gate``) and send it "block" while the disk stalls: the send times out.

    It reaches "r" once stored; the gate returned opens the disk.
    """
    agent = runtime.spawn("r", behavior="gate")
    gate = _stall(runtime)
    with _short_call_timeout(runtime, 0.1), pytest.raises(ActorTimeoutError):
        runtime.bus.send("x", "r", "block", "late")
    return agent, gate


def _timed_out_send(runtime: Runtime, to: str, topic: str) -> None:
    """``runtime.bus.send`` on a thread of its own, whose commit may time out."""
    with contextlib.suppress(ActorTimeoutError):
        runtime.bus.send("x", to, topic)


def test_a_publication_to_an_agent_whose_actor_is_gone_keeps_its_snapshots_short_of_it(
    tmp_path: Path,
) -> None:
    # Not killed, the agent may still change its state (a kept ctx does, without its
    # actor) and snapshot it: counted as applied, such a snapshot would claim the
    # publication without its task context. Only a killed agent counts it applied.
    with _open(tmp_path / "j") as runtime:
        runtime.spawn("a", task_id="t")
        runtime._entry("a").ref.stop()  # the actor is gone; the runtime still lists it

        assert runtime.publish_task_context("t", {"v": 1}) == ["a"]
        runtime.flush()
        writer = runtime._core.writer
        assert writer is not None
        assert list(writer._publishes.values()) == [{"a"}]


class TestSlotsAndDeadLettersAtTheEdges:
    def test_a_request_whose_recipient_dies_before_delivery_fails_at_once_with_one_dead_letter(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        with _open(None) as runtime:
            runtime.spawn("a", behavior="gate")
            admitted = runtime._admitted

            def admitted_then_killed(agent_id: str, timeout: float | None = None) -> Any:
                entry = admitted(agent_id, timeout)
                runtime.kill(agent_id)  # lands between the slot and the delivery
                assert entry.ref.actor_stopped.wait(10)
                return entry

            monkeypatch.setattr(runtime, "_admitted", admitted_then_killed)

            # were the requester not told, this would wait the whole 30 s and time out
            with pytest.raises(AgentNotFoundError):
                runtime.bus.request("x", "a", "q", timeout=30)

            letters = [(d.topic, d.reason) for d in runtime.bus.dead_letters()]
            assert letters == [("q", "agent not registered")]

    @pytest.mark.parametrize("mode", ["sync", "batch"])
    def test_a_snapshot_that_fails_after_a_send_gives_the_slot_back_once(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
    ) -> None:
        heard = threading.Event()
        sending = threading.Event()
        seen: list[str] = []

        class Sender:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
                sending.set()
                try:
                    ctx.send("r", "hi")
                finally:
                    sending.clear()

        class Receiver:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> str:  # noqa: ARG002
                seen.append(message.topic)
                heard.set()
                return "ok"

        snapshot = AgentActor._maybe_snapshot

        def closed_while_sending(actor: AgentActor) -> None:
            if sending.is_set() and actor.agent_id == "s":  # as when close() stops the writer right then
                msg = "the journal writer is stopped"
                raise RuntimeClosedError(msg)
            snapshot(actor)

        monkeypatch.setattr(AgentActor, "_maybe_snapshot", closed_while_sending)
        behaviors: dict[str, Any] = {"s": Sender, "r": Receiver}
        config = Config(journal=JournalConfig(durability=mode))  # type: ignore[arg-type]
        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors=behaviors) as runtime:
            runtime.spawn("s", behavior="s")
            runtime.spawn("r", behavior="r")
            runtime.bus.send("x", "s", "go")  # its behavior sends "hi" to r, then snapshots
            assert heard.wait(10)
            assert runtime.bus.request("x", "r", "ping", timeout=30).payload == "ok"

            entry = runtime._entry("r")
            assert entry.ref.is_alive()
            assert entry.shared.slots.free == runtime._core.mailbox_size  # every slot back, none twice
            assert seen == ["hi", "ping"]


class TestKillAndReloadEdges:
    @pytest.mark.parametrize("mode", ["sync", "batch"])
    def test_a_kill_that_is_due_a_snapshot_does_not_revive_the_agent(self, tmp_path: Path, mode: str) -> None:
        config = Config(journal=JournalConfig(durability=mode, snapshot_interval=3))  # type: ignore[arg-type]
        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as runtime:
            agent = runtime.spawn("a")
            agent.set_private("k1", 1)
            agent.set_private("k2", 2)
            runtime.kill("a")  # its third event: a snapshot would be due
        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as runtime:
            assert runtime.agents() == []

    def test_a_kill_whose_commit_timed_out_leaves_and_nothing_follows_it(self, tmp_path: Path) -> None:
        with _open(tmp_path / "j") as runtime:  # only the kill has the short call_timeout
            agent = runtime.spawn("a")
            ref = runtime._entry("a").ref
            gate = _stall(runtime)
            with _short_call_timeout(runtime, 0.3), pytest.raises(ActorTimeoutError):
                runtime.kill("a")
            gate.set()
            assert ref.actor_stopped.wait(10)
            runtime.flush()

            assert runtime.agents() == []
            with pytest.raises(AgentNotFoundError):
                agent.set_private("after", 1)
            journal = runtime._journal
            assert journal is not None
            assert [type(r.event).__name__ for r in journal.read(stream="agent/a")] == [
                "AgentSpawned",
                "AgentKilled",
            ]

    @pytest.mark.parametrize(
        "failure", [OSError("disk gone"), ValueError("refused")], ids=["fail-stop", "refused"]
    )
    def test_a_kill_whose_timed_out_commit_is_not_stored_leaves_the_agent_alive(
        self,
        tmp_path: Path,
        failure: Exception,
        caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        # The kill's commit outlasts call_timeout, then fails: the journal goes fail-stop
        # (an error the writer does not know), or refuses it alone. The agent left at the
        # timeout, so it was gone live while the journal, and a reopen, had it alive.
        stopped_waiting = threading.Event()
        catch_up_when_written = AgentActor._catch_up_when_written

        def noted(actor: AgentActor, writer: Any) -> None:
            catch_up_when_written(actor, writer)
            stopped_waiting.set()

        monkeypatch.setattr(AgentActor, "_catch_up_when_written", noted)
        with _open(tmp_path / "j") as runtime:
            agent = runtime.spawn("a")
            agent.set_private("k", 1)
            gate = _stall_then_fail(runtime, failure)
            # while the disk stalls: the set-up's commits may be slow. Both waits run out on the
            # stalled disk, however short, and the test waits for the agent's own.
            with _short_call_timeout(runtime, 0.1):
                with pytest.raises(ActorTimeoutError):
                    runtime.kill("a")
                # The caller's wait and the agent's own wait for the commit both last call_timeout;
                # the failure comes once the agent, too, stopped waiting (else it hears it at once).
                assert stopped_waiting.wait(10)
            gate.set()
            if isinstance(failure, OSError):
                with pytest.raises(JournalError):
                    runtime.flush(10)
            else:
                with caplog.at_level(logging.WARNING, logger="cogfabric"):
                    runtime.flush(10)
                    # the agent catches up (and says why) before it answers a call at the latest
                    assert agent.private("k") == 1
                assert "the journal refused a change whose commit the agent stopped waiting" in caplog.text

            assert runtime.agents() == ["a"]
            assert agent.private("k") == 1
            if isinstance(failure, ValueError):  # the journal takes changes still: it can die now
                agent.set_private("k", 2)
                runtime.kill("a")
                assert runtime.agents() == []
        with _open(tmp_path / "j") as runtime:
            assert runtime.agents() == (["a"] if isinstance(failure, OSError) else [])
            if isinstance(failure, OSError):
                assert runtime.agent("a").private("k") == 1

    def test_a_kept_ctx_during_an_undecided_kill_waits_for_the_journals_word(self, tmp_path: Path) -> None:
        # While the kill's commit is undecided, a kept ctx.llm whose provider answers
        # meanwhile dropped its record as one noted after the kill, and a kept ctx's call
        # said the agent was gone; the kill is then refused and the agent lives on.
        runtime, ctx, out, gate = _undecided_kill_with_a_kept_llm_answer(tmp_path / "j")
        with runtime:
            with (
                _short_call_timeout(runtime, 0.3),
                pytest.raises(  # while the kill is undecided alone
                    ActorTimeoutError, match="its kill's commit is not stored yet"
                ),
            ):
                ctx.set_private("k", 1)
            gate.set()
            runtime.flush(10)

            assert runtime.agents() == ["a"]  # the kill was refused: the agent lives on
            assert out == ["paid answer"]
            ctx.set_private("k", 2)
        with Journal.open(tmp_path / "j", readonly=True) as stored:
            names = [type(r.event).__name__ for r in stored.read(stream="agent/a")]
        assert names[-2:] == ["LlmOutputRecorded", "PrivateSet"]
        assert "AgentKilled" not in names

    @pytest.mark.parametrize("refused", [True, False], ids=["refused", "stored"])
    def test_a_call_behind_an_undecided_kill_is_handled_after_the_decision(
        self, tmp_path: Path, refused: bool
    ) -> None:
        # batch durability: the spawn is stored first, so the kill's commit is the one held
        with _open(tmp_path / "j", mode="batch") as runtime:
            runtime.spawn("a")
            runtime.flush(10)
            kills = lambda events: any(isinstance(e, AgentKilled) for e in events)  # noqa: E731
            refusal = ValueError("refused")
            gate = _stall_then_fail(runtime, refusal, kills) if refused else _stall(runtime, kills)
            # the kill and the call behind it alone: the spawn after the decision keeps the 10 s
            with _short_call_timeout(runtime, 0.15):
                with pytest.raises(ActorTimeoutError):
                    runtime.kill("a")
                assert runtime.agents() == ["a"]  # listed until the journal decides
                with pytest.raises(ActorTimeoutError):
                    runtime.retire("a")  # it waits in the mailbox for the decision
            gate.set()
            runtime.flush(10)
            if refused:
                assert runtime.agent("a").lifecycle == AgentState.RETIRED
            else:
                assert runtime.agents() == []  # it left, unasked, once its kill was stored
                runtime.spawn("a").set_private("k", 2)
        with _open(tmp_path / "j") as runtime:
            if refused:
                assert runtime.agent("a").lifecycle == AgentState.RETIRED
            else:
                assert runtime.agent("a").private("k") == 2

    @pytest.mark.parametrize("failure", [ValueError("refused"), TypeError("refused")])
    def test_an_agent_whose_timed_out_commit_is_refused_goes_on_without_it(
        self, tmp_path: Path, failure: Exception
    ) -> None:
        # A refusal that is not a JournalError (one the boundary checks should have
        # caught) reached the catch-up as an error: each later message raised it.
        with _open(tmp_path / "j") as runtime:
            agent = runtime.spawn("a")
            gate = _stall_then_fail(runtime, failure)
            with _short_call_timeout(runtime, 0.3), pytest.raises(ActorTimeoutError):  # not the spawn's
                agent.set_private("k", 1)
            gate.set()
            runtime.flush(10)

            agent.set_private("j", 2)
            assert (agent.private("k"), agent.private("j")) == (None, 2)
        with _open(tmp_path / "j") as runtime:
            assert (runtime.agent("a").private("k"), runtime.agent("a").private("j")) == (None, 2)

    @pytest.mark.parametrize(
        ("first", "second", "lifecycle", "stored"),
        [
            ("retire", "recover", AgentState.RETIRED, ["AgentSpawned", "LifecycleChanged"]),
            ("suspend", "resume", AgentState.IDLE, ["AgentSpawned", "LifecycleChanged", "LifecycleChanged"]),
        ],
    )
    def test_a_lifecycle_call_after_one_whose_commit_timed_out_is_checked_against_it(
        self, tmp_path: Path, first: str, second: str, lifecycle: AgentState, stored: list[str]
    ) -> None:
        # The first call's commit outlasts call_timeout: it takes effect, later. The
        # second reached the agent after it, so it is checked against it: a recover
        # after a retire brought the retired agent back (an AgentRecovered journaled
        # after the retire), and a resume after a suspend was refused as not suspended.
        calls: dict[str, Callable[[Runtime], object]] = {
            "retire": lambda rt: rt.retire("a"),
            "recover": lambda rt: rt.recover("a", CognitiveState(context="back")),
            "suspend": lambda rt: rt.suspend("a"),
            "resume": lambda rt: rt.resume("a"),
        }
        with _open(tmp_path / "j") as runtime:
            agent = runtime.spawn("a")
            gate = _stall(runtime)
            with _short_call_timeout(runtime, 0.15):  # while the disk stalls: the spawn's commit may be slow
                with pytest.raises(ActorTimeoutError):
                    calls[first](runtime)
                with pytest.raises(ActorTimeoutError):  # the agent waits for the journal first
                    calls[second](runtime)
            gate.set()
            runtime.flush(10)

            live = agent.lifecycle
            journal = runtime._journal
            assert journal is not None
            names = [type(r.event).__name__ for r in journal.read(stream="agent/a")]
        with _open(tmp_path / "j") as runtime:
            reopened = runtime.agent("a").lifecycle
        assert live == reopened == lifecycle
        assert names == stored

    def test_a_call_waiting_behind_the_journal_when_the_runtime_closes_is_not_handled(
        self, tmp_path: Path
    ) -> None:
        # The agent waits for a retire's stalled commit with a recover in hand; close()
        # gives up on it. Handled then, against the state without the retire, the
        # recover was queued behind it while the writer still took submissions (the
        # session actor's stop can take call_timeout), and revived the agent.
        runtime = _open(tmp_path / "j")
        runtime.spawn("a")
        agent_stopped = runtime._entry("a").ref.actor_stopped
        gate = _stall(runtime)
        writer = runtime._core.writer
        assert writer is not None
        recovered = threading.Event()
        submit, memory_close = writer.submit, runtime.memory._close
        stopped_first: list[bool] = []

        def watched_submit(events: Any, *args: Any, **kwargs: Any) -> Any:
            if any(isinstance(e, AgentRecovered) for e in events):
                recovered.set()
            return submit(events, *args, **kwargs)

        def slow_memory_close() -> None:  # the session actor's stop, taking its time
            # until the agent's thread has ended: whatever it does with the recover in hand
            # (handled, it is submitted: the writer still takes submissions) is done by then.
            # (It waited 3 s for the recover's submission, in vain when all is well.)
            stopped_first.append(agent_stopped.wait(10))
            memory_close()

        writer.submit = watched_submit  # type: ignore[method-assign]
        runtime.memory._close = slow_memory_close  # type: ignore[method-assign]
        # from the stall on (close()'s wait for the writer too): the spawn's commit may be
        # slow. The writer's stop gives up on the stalled commit at ten times its 0.05 s.
        with _short_call_timeout(runtime, 0.3, writer_too=True, writer_seconds=0.05):
            with pytest.raises(ActorTimeoutError):
                runtime.retire("a")
            with pytest.raises(ActorTimeoutError):
                runtime.recover("a", CognitiveState(context="back"))  # the agent waits for the journal
            with contextlib.suppress(ActorTimeoutError):  # the writer's stop times out: the disk is stalled
                runtime.close()
        handled = recovered.is_set()
        gate.set()
        assert writer._ended.wait(10)
        with _open(tmp_path / "j") as runtime:
            lifecycle = runtime.agent("a").lifecycle
        assert stopped_first == [True]
        assert (handled, lifecycle) == (False, AgentState.RETIRED)

    def test_an_agent_behind_the_journal_waits_for_its_own_commit_not_another_agents(
        self, tmp_path: Path
    ) -> None:
        # a's change timed out and then landed; the writer then stalls on b's. a's
        # catch-up waited for everything submitted, so a read of a waited for b's commit.
        with _open(tmp_path / "j") as runtime:
            a = runtime.spawn("a")
            runtime.spawn("b")
            writer = runtime._core.writer
            assert writer is not None
            journal = writer._journal
            append = journal.append
            gates, entered = [threading.Event(), threading.Event()], [threading.Event(), threading.Event()]
            appends = [0]

            def gated_append(*args: Any, **kwargs: Any) -> list[int]:
                k = min(appends[0], 1)
                appends[0] += 1
                entered[k].set()
                assert gates[k].wait(10), "the test never opened the gate"
                return append(*args, **kwargs)

            writer._journal = _Stalled(journal, gated_append)  # type: ignore[assignment]
            entry_a, entry_b = runtime._entry("a"), runtime._entry("b")
            entry_a.shared.slots.take()
            # the short call_timeout for a's wait for its commit and for the read alone: the
            # spawns' commits may be slow on a loaded machine
            with _short_call_timeout(runtime, 0.3), pytest.raises(ActorTimeoutError):  # the agent's own wait
                entry_a.ref.ask((CALL, "set_private", ("k", 1)), block=False).get(timeout=10)
            assert entered[0].wait(10)
            entry_b.shared.slots.take()
            b_set = entry_b.ref.ask((CALL, "set_private", ("k", 2)), block=False)
            gates[0].set()  # a's commit lands
            assert entered[1].wait(10)  # the writer is stalled on b's
            try:
                with _short_call_timeout(runtime, 0.3):  # not b's commit's wait (stalled)
                    read: object = a.private("k")
            finally:
                gates[1].set()
            with contextlib.suppress(ActorTimeoutError):
                b_set.get(timeout=10)
        assert read == 1

    def test_a_kept_ctx_of_an_agent_behind_the_journal_is_refused(self, tmp_path: Path) -> None:
        # An unsubscribe's commit timed out; a kept ctx's subscribe from another thread
        # was checked against the state without it: False, nothing journaled, and the
        # agent ended unsubscribed. It waits call_timeout for the writer, then is refused.
        kept: list[AgentContext] = []
        with _open(tmp_path / "j", behaviors={"k": functools.partial(_CtxKeeper, kept)}) as rt:
            rt.spawn("a", behavior="k")
            rt.bus.subscribe("a", "news")
            rt.bus.request("x", "a", "keep", timeout=10)
            gate = _stall(rt)
            entry = rt._entry("a")
            entry.shared.slots.take()
            outcome: list[object] = []

            def subscribe() -> None:
                try:
                    outcome.append(kept[0].subscribe("news"))
                except ActorTimeoutError as exc:
                    outcome.append(exc)

            # the short call_timeout for the waits meant to time out on the stalled disk
            # alone, not for the flush and the subscribe after it
            with _short_call_timeout(rt, 0.3):
                with pytest.raises(ActorTimeoutError):  # the agent's own wait for the commit timed out
                    entry.ref.ask((CALL, "unsubscribe", ("news",)), block=False).get(timeout=10)
                thread = threading.Thread(target=subscribe)
                thread.start()
                thread.join(10)
            gate.set()
            rt.flush(10)
            live = rt.bus.subscribers("news")
            later = kept[0].subscribe("news")  # caught up: made
        assert len(outcome) == 1
        assert isinstance(outcome[0], ActorTimeoutError)
        assert "behind the journal" in str(outcome[0])
        assert (live, later) == ([], True)

    def test_a_behaviors_ctx_call_after_its_own_timed_out_one_is_refused(self, tmp_path: Path) -> None:
        # Within the message, after its unsubscribe timed out, the behavior's subscribe
        # was checked against the state without it (False, nothing journaled).
        go, done = threading.Event(), threading.Event()
        out: list[object] = []

        class Flipper:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
                assert go.wait(10)
                calls: list[Callable[[], bool]] = [
                    lambda: ctx.unsubscribe("news"),
                    lambda: ctx.subscribe("news"),
                ]
                for call in calls:
                    try:
                        out.append(call())
                    except ActorTimeoutError as exc:
                        out.append(type(exc).__name__)
                done.set()

        with _open(tmp_path / "j", behaviors={"f": Flipper}) as rt:
            rt.spawn("a", behavior="f")
            rt.bus.subscribe("a", "news")
            rt.bus.send("x", "a", "flip")
            gate = _stall(rt)
            with _short_call_timeout(rt, 0.3):  # the behavior's calls alone: the set-up's commits may be slow
                go.set()
                assert done.wait(10)
            gate.set()
            rt.flush(10)
            live = rt.bus.subscribers("news")
        assert out == ["ActorTimeoutError", "ActorTimeoutError"]
        assert live == []

    def test_a_call_waiting_behind_the_journal_gets_runtime_closed_when_the_writer_stops(
        self, tmp_path: Path
    ) -> None:
        with _open(tmp_path / "j") as runtime:
            runtime.spawn("a")
            gate = _stall(runtime)
            entry = runtime._entry("a")
            writer = runtime._core.writer
            assert writer is not None
            try:
                with _short_call_timeout(
                    runtime, 0.3
                ):  # while the disk stalls: the spawn's commit may be slow
                    entry.shared.slots.take()
                    with pytest.raises(ActorTimeoutError):
                        entry.ref.ask((CALL, "set_private", ("k", 1)), block=False).get(timeout=10)
                    entry.shared.slots.take()
                    read = entry.ref.ask((CALL, "private", ("k",)), block=False)
                    writer.stop_soon()
                    with pytest.raises(RuntimeClosedError):
                        read.get(timeout=10)
            finally:
                gate.set()

    def test_a_subscription_whose_commit_timed_out_reaches_the_index_after_the_reload(
        self, tmp_path: Path
    ) -> None:
        with _open(tmp_path / "j") as runtime:
            agent = runtime.spawn("a")
            gate = _stall(runtime)
            with _short_call_timeout(runtime, 0.3), pytest.raises(ActorTimeoutError):
                runtime.bus.subscribe("a", "news")
            gate.set()
            runtime.flush()
            assert agent.private("nothing") is None  # the agent reloads before answering

            assert runtime.bus.subscribers("news") == ["a"]

    @pytest.mark.parametrize("change", ["subscribe", "unsubscribe", "suspend"])
    def test_after_a_flush_what_the_agent_stopped_waiting_for_shows_without_another_message(
        self, tmp_path: Path, change: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Reads that do not ask the agent (its lifecycle, the bus's topic index) showed
        # the state before the timed-out change, though the journal held it, until the
        # agent handled another message: a broadcast still reached an unsubscribed agent.
        with _open(tmp_path / "j") as runtime:
            agent = runtime.spawn("a", behavior="gate")
            if change == "unsubscribe":
                runtime.bus.subscribe("a", "news")
            calls: dict[str, Callable[[], object]] = {
                "subscribe": lambda: runtime.bus.subscribe("a", "news"),
                "unsubscribe": lambda: runtime.bus.unsubscribe("a", "news"),
                "suspend": lambda: runtime.suspend("a"),
            }
            gate = _stall(runtime)
            # the short call_timeout for the change and the agent's try to catch up, both on
            # the stalled disk (which opens only once the agent's try found it stalled: each
            # wait runs out, however short), not for the flush after
            with _short_call_timeout(runtime, 0.1):
                with pytest.raises(ActorTimeoutError):
                    calls[change]()
                # once the agent too has stopped waiting (its next message finds the writer
                # still stalled, and waits for it), the writer goes on
                _open_when_an_agent_finds_it_stalled(monkeypatch, gate)
                entry = runtime._entry("a")
                entry.shared.slots.take()
                entry.ref.ask((CALL, "noop", ()), block=False).get(timeout=10)
            assert gate.is_set()
            runtime.flush()

            live = (runtime.bus.subscribers("news"), agent.lifecycle)
        with _open(tmp_path / "j") as runtime:
            replayed = (runtime.bus.subscribers("news"), runtime.agent("a").lifecycle)
        assert live == replayed
        assert (
            live
            == {
                "subscribe": (["a"], AgentState.IDLE),
                "unsubscribe": ([], AgentState.IDLE),
                "suspend": ([], AgentState.SUSPENDED),
            }[change]
        )

    def test_flush_keeps_to_its_timeout_when_an_agent_behind_the_journal_is_busy(
        self, tmp_path: Path
    ) -> None:
        # An agent whose own change timed out and that then works on in its behavior: the
        # flush waited for it once to hand over and again to catch up, twice its timeout,
        # and raised the second wait's error instead of naming the busy agent.
        stalled, timed_out, release = threading.Event(), threading.Event(), threading.Event()

        class Worker:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
                assert stalled.wait(10)
                with pytest.raises(ActorTimeoutError):
                    ctx.subscribe("news")  # the writer is stalled
                timed_out.set()
                assert release.wait(10)  # a long piece of work (an LLM call, say)

        with _open(tmp_path / "j", behaviors={"w": Worker}) as runtime:
            runtime.spawn("a", behavior="w")
            runtime.bus.send("x", "a", "work")
            gate = _stall(runtime)
            try:
                with _short_call_timeout(runtime, 0.3):  # from the stall on: the set-up's commits may be slow
                    stalled.set()
                    assert timed_out.wait(10)
                    gate.set()
                    writer = runtime._core.writer
                    assert writer is not None
                    writer.flush(10)  # the writer is past the change that timed out
                    began = time.monotonic()
                    with pytest.raises(ActorTimeoutError, match="still busy") as caught:
                        runtime.flush(timeout=1.0)
                    took = time.monotonic() - began
            finally:
                release.set()
            runtime.flush(timeout=10)

            assert took < 1.8, (took, caught.value)
            assert runtime.bus.subscribers("news") == ["a"]

    def test_a_publication_the_reload_applied_does_not_override_a_later_own_change(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        with _open(tmp_path / "j") as runtime:
            agent = runtime.spawn("a", task_id="t", task_context={"v": 0}, behavior="gate")
            ref = runtime._entry("a").ref
            runtime.bus.send("x", "a", "block")
            assert Gate.started.wait(10)
            assert runtime._entry("a").shared.slots.acquire(timeout=10)  # as the handle does
            own = ref.ask((CALL, "set_task_context", ({"v": "own, later"},)), block=False)
            runtime.publish_task_context("t", {"v": "published"})  # stored first, delivered after
            gate = _stall(runtime)
            _open_when_an_agent_finds_it_stalled(monkeypatch, gate)
            # while the disk stalls (the agent's wait for the writer too): the set-up's commits,
            # and those after the disk recovers, may be slow on a loaded machine. Four of the
            # agent's waits run out on the stalled disk before its catch-up finds it stalled,
            # however short each is: at 0.5 s the test took 2 s.
            with _short_call_timeout(runtime, 0.2, writer_too=True):
                Gate.release.set()  # the behavior's own change times out: the agent is behind
                assert gate.wait(10)  # its catch-up found the disk stalled: it recovers
            # it waits for the journal before it handles ``own``, and takes its word (the
            # publication, stored first); the publication's delivery comes after ``own``
            own.get(timeout=10)

            assert agent.task_context() == {"v": "own, later"}
        with _open(tmp_path / "j") as runtime:
            assert runtime.agent("a").task_context() == {"v": "own, later"}

    def test_a_behavior_that_cannot_be_made_refuses_the_spawn_before_anything_is_journaled(
        self, tmp_path: Path
    ) -> None:
        def broken_factory() -> Any:
            msg = "no behavior today"
            raise RuntimeError(msg)

        behaviors = {"broken": broken_factory}
        with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors=behaviors) as runtime:
            with pytest.raises(InvalidSpawnSpecError, match="could not be made"):
                runtime.spawn("b", behavior="broken")
            assert runtime._journal is not None
            assert runtime._journal.last_seq == 0
            runtime.spawn("b")  # the id is free

    def test_a_behavior_without_on_message_refuses_the_spawn_before_anything_is_journaled(
        self, tmp_path: Path
    ) -> None:
        class Mute:
            pass

        behaviors: dict[str, Any] = {"mute": Mute}  # what the type checker would refuse, a user may pass
        with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors=behaviors) as runtime:
            with pytest.raises(InvalidSpawnSpecError, match="no on_message"):
                runtime.spawn("b", behavior="mute")
            assert runtime._journal is not None
            assert runtime._journal.last_seq == 0

    def test_a_behavior_that_cannot_be_made_on_reopen_leaves_the_agent_without_one(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        def broken_factory() -> Any:
            msg = "no behavior today"
            raise RuntimeError(msg)

        with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"gate": Gate}) as runtime:
            runtime.spawn("a", behavior="gate")
            runtime.agent("a").set_private("k", 1)
        with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"gate": broken_factory}) as runtime:
            assert runtime.agent("a").private("k") == 1  # the agent is there, as in the journal
            runtime.bus.send("x", "a", "hello")
            runtime.flush()
            assert [d.reason for d in runtime.bus.dead_letters()] == ["no behavior"]
            assert "could not be made" in caplog.text
            assert not runtime.agent("a").has_behavior

    def test_a_request_that_reaches_an_agent_behind_its_kill_fails_at_once(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        with _open(tmp_path / "j") as runtime:
            runtime.spawn("a", behavior="gate")
            runtime.bus.send("x", "a", "block")
            assert Gate.started.wait(10)
            with _short_call_timeout(runtime, 0.3), pytest.raises(ActorTimeoutError):  # not the set-up's
                runtime.kill("a")  # queued behind the blocked message
            queued = threading.Event()
            bus = runtime.bus
            original = bus._delivery

            def delivery_that_says(message: IpcMessage, entry: Any, **options: Any) -> Callable[[bool], None]:
                deliver = original(message, entry, **options)

                def deliver_and_say(committed: bool) -> None:
                    deliver(committed)
                    if message.topic == "q":
                        queued.set()

                return deliver_and_say

            monkeypatch.setattr(bus, "_delivery", delivery_that_says)
            outcome: list[BaseException] = []

            def ask() -> None:
                try:
                    bus.request("x", "a", "q", timeout=30)
                except Exception as exc:  # noqa: BLE001 - the test looks at it
                    outcome.append(exc)

            asker = threading.Thread(target=ask)
            asker.start()
            assert queued.wait(10)  # the request is in the mailbox, behind the kill
            Gate.release.set()
            asker.join(10)

            assert not asker.is_alive()  # not the 30 s timeout
            assert len(outcome) == 1
            assert isinstance(outcome[0], AgentNotRegisteredError)  # as for a request sent after the kill
            assert isinstance(outcome[0], AgentNotFoundError)
            assert [(d.topic, d.reason) for d in bus.dead_letters()] == [("q", "agent killed")]


def _undecided_kill_with_a_kept_llm_answer(
    path: Path,
) -> tuple[Runtime, AgentContext, list[object], threading.Event]:
    """Agent "a" keeps its ctx; a call of the kept ``ctx.llm`` answers while a's kill is undecided.

    The kill's commit (the next after a flush) waits at the disk, then the journal
    refuses it once the returned gate opens. Returns the runtime (to close), the kept
    ctx, the call's outcome (its answer) and the gate.
    """
    kept: list[AgentContext] = []
    entered, release = threading.Event(), threading.Event()

    class Keeper:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> str:  # noqa: ARG002
            kept.append(ctx)
            return "kept"

    class Slow:
        def generate(self, prompt: str, **params: Any) -> str:  # noqa: ARG002
            entered.set()
            assert release.wait(10)
            return "paid answer"

    behaviors: dict[str, Any] = {"k": Keeper}
    runtime = Runtime.open(path, clock=FakeClock(), behaviors=behaviors, llm_provider=Slow())
    runtime.spawn("a", behavior="k")
    runtime.bus.request("x", "a", "keep", timeout=10)
    llm = kept[0].llm
    out: list[object] = []
    caller = threading.Thread(target=lambda: out.append(llm.generate("question")))
    caller.start()
    assert entered.wait(10)  # the agent is idle; its kept client waits for the provider
    runtime.flush(10)  # the kill's commit is the next one
    at_the_disk = threading.Event()
    gate = _stall_then_fail(runtime, ValueError("refused"), entered=at_the_disk)
    # the short call_timeout for the kill and the answer during it alone: the set-up's commits may be slow
    with _short_call_timeout(runtime, 0.3):
        with pytest.raises(ActorTimeoutError):
            runtime.kill("a")
        # the kill's commit waits at the disk: the caller's timeout alone does not say the
        # agent got to the kill (its thread may be late), and the answer must come after it
        assert at_the_disk.wait(10)
        release.set()  # the answer comes while the kill is undecided
        caller.join(10)
    return runtime, kept[0], out, gate


def _is_answer(event: Event) -> bool:
    """Whether ``event`` adds an assistant's message to a session (a turn's answer)."""
    return isinstance(event, SessionMessageAdded) and event.message.role == ROLE_ASSISTANT


def _on_submit(runtime: Runtime, picks: Callable[[Sequence[Event]], bool], seen: threading.Event) -> None:
    """Set ``seen`` once the writer is handed events ``picks`` picks."""
    writer = runtime._core.writer
    assert writer is not None
    real_submit = writer.submit

    def submit(events: Sequence[Event], *args: Any, **kwargs: Any) -> Any:
        ack = real_submit(events, *args, **kwargs)
        if picks(events):
            seen.set()
        return ack

    writer.submit = submit  # type: ignore[method-assign]


@contextlib.contextmanager
def _logged(logger: str, text: str) -> Iterator[threading.Event]:
    """An event set once ``logger`` logs a record whose message holds ``text`` (at any level)."""
    said = threading.Event()

    class Heard(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if text in record.getMessage():
                said.set()

    target = logging.getLogger(logger)
    handler, level = Heard(logging.DEBUG), target.level
    target.addHandler(handler)
    target.setLevel(logging.DEBUG)
    try:
        yield said
    finally:
        target.removeHandler(handler)
        target.setLevel(level)


def _create_behind_the_catch_up(runtime: Runtime) -> tuple[threading.Thread, threading.Event]:
    """Queue a ``create_session`` (on a thread, started) behind the session actor's catch-up.

    Returns the thread and an event set if the create runs (its ``SessionCreated`` handed
    to the writer).
    """
    memory = runtime.memory
    real_queue_op, queued = memory._queue_op, threading.Event()

    def queue_op(*args: Any, **kwargs: Any) -> Any:
        op = real_queue_op(*args, **kwargs)
        queued.set()
        return op

    memory._queue_op = queue_op  # type: ignore[method-assign]

    def create() -> None:
        with contextlib.suppress(ActorTimeoutError, RuntimeClosedError):
            memory.create_session("v")

    later = threading.Thread(target=create)  # queued before close(), run after it began
    later.start()
    assert queued.wait(10)
    created = threading.Event()
    _on_submit(runtime, lambda events: any(isinstance(e, SessionCreated) for e in events), created)
    return later, created


def _reload_once_the_journal_is_closed(runtime: Runtime) -> None:
    """Make the session actor's reloads wait (10 s at most) for close() to close the journal first."""
    memory, journal = runtime.memory, runtime._journal
    assert journal is not None
    real_close, real_recover, closed = journal.close, memory._recover, threading.Event()

    def close() -> None:
        real_close()
        closed.set()

    def recover() -> None:
        closed.wait(10)  # the interleaving where close() closes the journal first
        real_recover()

    journal.close = close  # type: ignore[method-assign]
    memory._recover = recover  # type: ignore[method-assign]


def _answer_as_a_catch_up_begins_in_close(runtime: Runtime, gate: threading.Event) -> threading.Event:
    """Set ``gate`` (the disk answers) as a catch-up of the session actor begins after close() began.

    Returns an event set then.
    """
    memory, began = runtime.memory, threading.Event()
    real_catch_up = memory._catch_up

    def catch_up() -> bool:
        if runtime._core.closing:
            gate.set()  # the disk answers just as close() begins
            began.set()
        return real_catch_up()

    memory._catch_up = catch_up  # type: ignore[method-assign]
    return began


class TestSessionActorBehindTheJournal:
    def test_close_while_the_session_actor_waits_for_the_journal_runs_no_batch_on_its_state(
        self, tmp_path: Path
    ) -> None:
        # The create waited behind the delete's commit; close() began meanwhile, and the
        # create then ran on the state without s1 (nothing evicted) before the writer
        # stopped: the delete refused, a reopen had three sessions under max_sessions=2.
        config = Config(memory=MemoryConfig(max_sessions=2))
        runtime = Runtime.open(tmp_path / "j", config=config, clock=FakeClock())
        s1 = runtime.memory.create_session("u")
        runtime.memory.create_session("v")
        gate = _stall_then_fail(runtime, ValueError("refused"))
        created = threading.Event()
        _on_submit(runtime, lambda events: any(isinstance(e, SessionCreated) for e in events), created)
        writer = runtime._core.writer
        assert writer is not None
        real_stop = writer.stop

        def stop(timeout: float | None = None) -> None:
            gate.set()  # the disk answers as close() stops the writer
            real_stop(timeout)

        with _short_call_timeout(runtime, 0.3):  # from the stall on: the set-up's commits may be slow
            with pytest.raises(ActorTimeoutError):
                runtime.memory.delete_session(s1)
            with pytest.raises(ActorTimeoutError):
                runtime.memory.create_session("w")  # it waits for the delete's commit
            writer.stop = stop  # type: ignore[method-assign]
            runtime.close()
        assert writer._ended.wait(10)
        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as reopened:
            sessions = reopened.memory.sessions()

        assert not created.is_set()  # the create was not run
        assert len(sessions) == 2

    def test_a_read_after_a_catch_up_that_met_a_failed_journal_is_not_forgotten(self, tmp_path: Path) -> None:
        # The disk failed while the session actor waited for its timed-out write: the
        # catch-up reloaded, and the next batch reloaded again (for the failure),
        # forgetting the access in between (its record dropped): the session expired early.
        clock = FakeClock()
        config = Config(memory=MemoryConfig(session_ttl=100))
        with Runtime.open(tmp_path / "j", config=config, clock=clock) as runtime:
            session = runtime.memory.create_session("u")
            gate = _stall_then_fail(runtime, OSError("disk gone"))
            memory = runtime.memory
            real_catch_up = memory._catch_up

            def catch_up() -> bool:
                gate.set()  # the disk fails as the session actor waits for it
                return real_catch_up()

            with _short_call_timeout(runtime, 0.3):  # from the stall on: the create's commit may be slow
                with pytest.raises(ActorTimeoutError):
                    runtime.memory.add_message(session, "user", "hi")
                memory._catch_up = catch_up  # type: ignore[method-assign]
                clock.advance(90)
                assert [m.content for m in memory.get_messages(session)] == [
                    "New session started"
                ]  # read at 90
                clock.advance(60)

                assert memory.sessions() == [session]  # live until 190

    def test_a_timed_out_turns_answer_that_goes_in_later_is_not_logged_as_lost(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        # The answer's own batch timed out behind the stalled output record, and the
        # session actor logged "was not added" for an answer then added.
        with _open(tmp_path / "j") as runtime:
            session = runtime.memory.create_session("u")
            provider = ScriptedProvider(["the answer"])
            llm = runtime.llm(provider)
            gate = _stall(runtime, _output_records)
            added = threading.Event()
            _on_submit(runtime, lambda events: any(_is_answer(e) for e in events), added)
            with caplog.at_level(logging.WARNING, logger="cogfabric"):
                # the short call_timeout from the provider's answer: the output record, the
                # answer's batch and the read behind it time out; the turn's question does not
                with _short_call_timeout_once_answered(runtime, provider, 0.3):
                    with pytest.raises(ActorTimeoutError):
                        llm.turn(session, "question")
                    assert added.wait(10)  # the answer's batch waits behind the record
                    with pytest.raises(ActorTimeoutError):
                        runtime.memory.sessions()  # behind the answer's batch, which timed out
                gate.set()
                runtime.flush(10)
                messages = [(m.role, m.content) for m in runtime.memory.get_messages(session)]

        assert messages[-1] == ("assistant", "the answer")
        assert "was not added" not in caplog.text

    def test_a_record_held_for_an_undecided_kill_that_close_drops_is_logged(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        # close() stops the agent before its kill's refusal is known to it: what a kept
        # ctx.llm recorded meanwhile went with the actor, unsaid.
        runtime, _, out, gate = _undecided_kill_with_a_kept_llm_answer(tmp_path / "j")
        writer = runtime._core.writer
        assert writer is not None
        real_stop = writer.stop

        def stop(timeout: float | None = None) -> None:
            gate.set()  # the disk answers as close() stops the writer: the kill is refused
            real_stop(timeout)

        writer.stop = stop  # type: ignore[method-assign]
        with caplog.at_level(logging.WARNING, logger="cogfabric"), _short_call_timeout(runtime, 0.3):
            runtime.close()
        with Journal.open(tmp_path / "j", readonly=True) as stored:
            names = [type(r.event).__name__ for r in stored.read(stream="agent/a")]

        assert out == ["paid answer"]
        assert "AgentKilled" not in names
        assert "LlmOutputRecorded" in names or "1 LlmOutputRecorded noted by other threads" in caplog.text

    def test_the_session_actor_goes_on_once_its_own_write_is_stored_though_the_writer_is_busy(
        self, tmp_path: Path
    ) -> None:
        # It waited for the writer to be idle (a flush), not for its own write: a commit
        # of others held behind that write kept it waiting, and every later session call
        # timed out, although the journal held the write.
        with _open(tmp_path / "j") as runtime:
            session = runtime.memory.create_session("u")
            writer = runtime._core.writer
            assert writer is not None
            journal = writer._journal
            first, spawns, at_the_disk = threading.Event(), threading.Event(), threading.Event()
            spawn_at_the_disk = threading.Event()

            def held(events: Sequence[Event], *args: Any, **kwargs: Any) -> list[int]:
                spawning = any(isinstance(e, AgentSpawned) for e in events)
                (spawn_at_the_disk if spawning else at_the_disk).set()
                assert (spawns if spawning else first).wait(10)
                return journal.append(events, *args, **kwargs)

            writer._journal = _Stalled(journal, held)  # type: ignore[assignment]
            with _short_call_timeout(runtime, 0.3), pytest.raises(ActorTimeoutError):  # not the create's
                runtime.memory.add_message(session, "user", "hi")  # its commit waits at the disk
            # The writer holds the write alone: on a loaded machine its thread may run only
            # after the spawn came, and take both into one group, held with the spawn.
            assert at_the_disk.wait(10)
            submitted = threading.Event()
            _on_submit(runtime, lambda events: any(isinstance(e, AgentSpawned) for e in events), submitted)

            def spawn() -> None:
                with contextlib.suppress(ActorTimeoutError):  # its commit waits behind the session's
                    runtime.spawn("z")

            spawner = threading.Thread(target=spawn)
            spawner.start()
            try:
                assert submitted.wait(10)  # queued behind the session's write
                first.set()  # the session's write is stored; the spawn's commit then waits
                # the writer is past the session's write (however slow its commit on a loaded
                # machine), and busy with the spawn: the reads alone have the short call_timeout
                assert spawn_at_the_disk.wait(10)

                with _short_call_timeout(runtime, 0.3):
                    assert runtime.memory.sessions() == [session]
                    assert [m.content for m in runtime.memory.get_messages(session)][-1] == "hi"
            finally:
                spawns.set()
                spawner.join(10)

    @pytest.mark.parametrize("together", [False, True], ids=["apart", "one-group"])
    def test_a_timed_out_turns_answer_the_journal_then_refuses_is_logged(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture, together: bool
    ) -> None:
        # The answer's batch timed out behind the stalled output record, then the
        # journal refused it: the session actor took the journal's word without a word.
        # "one-group": the writer takes the record and the answer into one group (as a
        # loaded machine may: its thread ran only after the answer came), which the
        # journal refuses, and the writer commits apart: the record, then the answer.
        with _open(tmp_path / "j") as runtime:
            session = runtime.memory.create_session("u")
            provider = ScriptedProvider(["the answer"])
            llm = runtime.llm(provider)
            writer = runtime._core.writer
            assert writer is not None
            journal, gate, refusal = writer._journal, threading.Event(), ValueError("refused")

            def append(events: Sequence[Event], *args: Any, **kwargs: Any) -> list[int]:
                if any(_is_answer(e) for e in events):
                    raise refusal
                if _output_records(events):
                    assert gate.wait(10)  # held, then stored
                return journal.append(events, *args, **kwargs)

            writer._journal = _Stalled(journal, append)  # type: ignore[assignment]
            added = threading.Event()
            _on_submit(runtime, lambda events: any(_is_answer(e) for e in events), added)
            if together:
                take = writer._take

                def take_with_the_answer() -> list[Any]:
                    if any(_output_records(s.events) for s in writer._queue):
                        assert added.wait(10)
                    return take()

                writer._take = take_with_the_answer  # type: ignore[method-assign]
            with (
                caplog.at_level(logging.WARNING, logger="cogfabric"),
                _logged("cogfabric.actors._memory", "goes into its session once stored") as timed_out,
            ):
                # the short call_timeout from the provider's answer: the output record, the
                # answer's batch and the read behind it time out; the turn's question does not
                with _short_call_timeout_once_answered(runtime, provider, 0.3):
                    with pytest.raises(ActorTimeoutError):
                        llm.turn(session, "question")
                    assert added.wait(10)
                    with pytest.raises(ActorTimeoutError):
                        runtime.memory.sessions()  # behind the answer's batch, which timed out
                    # the session actor's own wait for the answer timed out too (a refusal that
                    # came before would answer it: no batch it stopped waiting for)
                    assert timed_out.wait(10)
                gate.set()
                runtime.flush(10)
                messages = [(m.role, m.content) for m in runtime.memory.get_messages(session)]

        assert messages[-1] == ("user", "question")
        assert "refused a batch whose commit it stopped waiting for (with 1 timed-out" in caplog.text

    @pytest.mark.parametrize("during", [False, True], ids=["before-its-wait", "during-its-wait"])
    def test_a_catch_up_whose_commit_lands_as_close_begins_runs_no_batch_and_reads_no_closed_journal(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, during: bool
    ) -> None:
        # A batch queued before close() waited for a commit that landed as close() began:
        # it reloaded from a journal close() was closing (an ERROR, "failed on a batch")
        # and ran, after close() began. "before-its-wait": close() began as a batch's
        # catch-up was about to wait for the commit; "during-its-wait": as it waited.
        runtime = _open(tmp_path / "j")
        session = runtime.memory.create_session("u")
        gate = _stall(runtime)
        behind = (
            functools.partial(
                runtime.memory.add_message, session, "user", "hi"
            ),  # the session actor is behind it
            runtime.memory.sessions,  # waits for that commit
        )
        with _short_call_timeout(runtime, 0.3):  # these two alone: the create's commit may be slow
            for call in behind:
                with pytest.raises(ActorTimeoutError):
                    call()
        memory = runtime.memory
        # The catch-up's waits for that commit, ordered by events, not by call_timeout:
        # timed, close()'s own wait for the session actor (call_timeout) raced the wait
        # under way, and on a loaded machine dropped the batch behind it before it ran.
        waiting, close_began = threading.Event(), threading.Event()
        held: list[Ack] = []
        waited_in_close: list[Ack] = []
        real_wait = Ack.wait

        def wait(ack: Ack, timeout: float) -> list[int]:
            catching_up = memory._stale and ack is memory._behind  # a catch-up's wait
            if catching_up and runtime._core.closing:
                waited_in_close.append(ack)
            if not catching_up or held:
                return real_wait(ack, timeout)
            held.append(ack)  # the wait under way as close() begins
            waiting.set()
            try:
                assert close_began.wait(10)
            finally:
                if during:
                    gate.set()  # the disk answers just as close() begins
            return real_wait(ack, 10 if during else 0)  # it lands within this wait; or not yet

        monkeypatch.setattr(Ack, "wait", wait)
        try:
            assert waiting.wait(10)  # a catch-up waits for the commit; close() has not begun
            later, created = _create_behind_the_catch_up(runtime)  # a batch of its own, behind it
            caught_up = _answer_as_a_catch_up_begins_in_close(runtime, gate)
            real_memory_close = memory._close

            def memory_close() -> None:
                close_began.set()
                if not during:  # the batch behind begins its catch-up before close() stops the actor
                    assert caught_up.wait(10)
                real_memory_close()

            memory._close = memory_close  # type: ignore[method-assign]
            _reload_once_the_journal_is_closed(runtime)
            with caplog.at_level(logging.WARNING, logger="cogfabric"):
                runtime.close()
                later.join(10)
                assert memory._ref.actor_stopped.wait(10)
        finally:
            gate.set()
            close_began.set()
            runtime.close()

        assert not created.is_set()
        assert "failed on a batch" not in caplog.text
        assert waited_in_close == []  # a catch-up begun after close() began does not wait for the commit

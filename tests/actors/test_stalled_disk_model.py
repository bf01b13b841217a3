"""Model-based test: calls whose commit outlasts ``call_timeout`` on a stalled disk.

A hypothesis ``RuleBasedStateMachine`` drives one sync-durability runtime whose journal
writer's appends wait behind a gate while the disk is "stalled": a state-changing call
made then raises ``ActorTimeoutError`` (its outcome unknown), and README promises it is
finished once the writer stores it. Rules spawn, change private values and task layers,
publish, move lifecycles, subscribe, send / broadcast / request to a recording behavior,
and create, fill and delete sessions (also through an LLM turn), on a stalled disk or an
open one. A rule also breaks the disk under the next commit, or the one that waits
(``fail_disk``; ``fail_a_waiting_commit`` stalls the disk and makes a call first, and
the wider machine's two calls at once may "fail on commit"): that append fails in
storage and the journal goes fail-stop, as after an I/O error, until the reopen that
follows. There is no reference model: whatever each call did, once the disk is open and
``flush()`` returned (or raised for a failed journal: README, "every agent drops what it
applied that the journal does not hold"), the live state must be what a reopen of the
journal rebuilds, the recording behaviors must have handled exactly the messages the
journal says were delivered and not dead-lettered (unless the disk failed), and the
journal must not contradict itself (nothing on an agent's stream after its kill but a
new spawn, no way back from RETIRED, each lifecycle change starting where the last one
ended).

A wider machine (``WiderStalledDisk``, also in ``"batch"`` durability) adds two rules:

- ``two_at_once``: two calls (any pair of spawn, lifecycle calls, state changes, a
  publication, subscriptions, sends, broadcasts, requests, session calls, an LLM turn,
  a flush) made from two threads at once on a stalled disk; the disk opens after both
  returned, after the first returned, or as soon as the writer's commit waits on it.
  Each call returns or raises one of the documented refusals within a bound.
- ``close_stalled``: ``close()`` on a stalled disk, with up to two calls in flight; the
  disk opens as close() begins, after the first in-flight call returned, or after
  close() returned (which may then have raised ``ActorTimeoutError``: README says the
  writer closes the journal itself once its commits are done). The journal is then
  audited, where a message that was sent, not requested, and that close() dropped may
  stay with neither a delivery nor a dead letter (README, "close()"), and reopened.

The default suite runs 20 examples of the first machine and 12 of each durability of
the wider one; ``pytest -m slow`` runs each again with 120 (``*_long``), so a wide search
is one command away while the suite stays within its time on 2 cores. Environment knobs:
``STALL_EXAMPLES`` (default 20), ``STALL_STEPS`` (default 20) for the first machine,
``CONC_EXAMPLES`` (default 12), ``CONC_STEPS`` (default 20) for each durability of the
wider one, ``STALL_SLOW_EXAMPLES`` (default 120) for the slow ones, ``MODEL_TMP`` (where
journals go). A test that runs 420 s ends the whole run (pyproject's
``faulthandler_exit_on_timeout``), so with knobs raised some tenfold, pass
``-o faulthandler_timeout=0`` (or a longer one).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import shutil
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import hypothesis
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

import cogfabric as cf
from cogfabric.events import (
    AgentFailed,
    AgentKilled,
    AgentRecovered,
    AgentSpawned,
    IpcDeadLettered,
    IpcDelivered,
    IpcMessage,
    LifecycleChanged,
)
from cogfabric.store import Journal, JournalError, JournalUnavailableError

if TYPE_CHECKING:
    from collections.abc import Iterator

AGENTS = ["a", "b", "c"]
TASKS = ["t1", "t2"]
TOPICS = ["news", "alerts"]
KEYS = ["k0", "k1"]
FORWARD = dict(zip(AGENTS, AGENTS[1:] + AGENTS[:1], strict=True))
CALL_TIMEOUT = 0.2
GATE_WAIT = 30.0  # how long a stalled append waits for the test to open the gate
agent_ids = st.sampled_from(AGENTS)
small = st.integers(0, 9)

OPS = [
    "spawn",
    "kill",
    "retire",
    "recover",
    "suspend",
    "resume",
    "set_private",
    "set_task_context",
    "publish",
    "subscribe",
    "unsubscribe",
    "send",
    "broadcast",
    "request",
    "create_session",
    "add",
    "delete",
    "turn",
    "flush",
]
Op = tuple[str, str, str, int]  # (operation, agent id, topic, value)
ops = st.tuples(st.sampled_from(OPS), st.sampled_from(AGENTS), st.sampled_from(TOPICS), st.integers(0, 9))

# Refusals the runtime may give for the state a call meets (which an unknown outcome
# before it may have changed): each is documented on its call.
REFUSED = (
    cf.ActorTimeoutError,
    cf.AgentNotFoundError,  # AgentNotRegisteredError too
    cf.AgentExistsError,
    cf.AgentRetiredError,
    cf.AgentNotSuspendedError,
    cf.AgentRunningError,
    cf.SessionNotFoundError,
    cf.IpcNoHandlerError,
    cf.IpcTimeoutError,
    cf.IpcHandlerError,  # a request to a behavior whose set_private or send failed
)


STEPS: list[str] = []  # this example's notes so far: a call that hangs shows them (flaky: not replayed)


def note(text: str) -> None:
    STEPS.append(text)
    hypothesis.note(text)


class Recorder:
    """Keeps each message's payload as private "last", then records it as handled.

    What comes on "alerts" it passes on to the next agent, on "news".

    Its ``set_private`` raises ``ActorTimeoutError`` while the disk is stalled: the
    behavior failed, and the message is dead-lettered ("handler error"), not recorded.
    """

    handled: ClassVar[list[tuple[str, str]]] = []
    forgiven: ClassVar[set[tuple[str, str]]] = set()
    """Messages a disk failure left handled but not so journaled, or the other way round."""

    def on_message(self, ctx: cf.AgentContext, message: IpcMessage) -> Any:
        ctx.set_private("last", message.payload)
        if message.topic == "alerts":  # passed on: a send from inside an agent, delivered once stored
            ctx.send(FORWARD[ctx.agent_id], "news", message.payload)
        Recorder.handled.append((message.id, ctx.agent_id))
        return message.payload


class _GatedJournal:
    """The writer's journal, whose ``append`` waits for ``gate``; ``entered`` says one waits.

    ``fail_next``: the next append to pass the gate fails in storage, and the journal
    is fail-stop from then on (as the real one after an I/O error).
    """

    def __init__(self, journal: Any, gate: threading.Event, entered: threading.Event) -> None:
        self._journal, self._gate, self._entered = journal, gate, entered
        self.fail_next = False

    def append(self, *args: Any, **kwargs: Any) -> Any:
        if not self._gate.is_set():
            self._entered.set()
        assert self._gate.wait(GATE_WAIT), "the test never opened the gate"
        if self.fail_next:
            self.fail_next = False
            error = JournalUnavailableError("the disk failed (the test broke it)")
            self._journal._failed = error  # fail-stop, as the journal makes itself after an I/O error
            raise error
        return self._journal.append(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._journal, name)


class StalledDisk(RuleBasedStateMachine):
    durability: ClassVar[Literal["sync", "batch"]] = "sync"

    def __init__(self) -> None:
        super().__init__()
        STEPS.clear()
        base = Path(os.environ.get("MODEL_TMP", tempfile.gettempdir()))
        base.mkdir(parents=True, exist_ok=True)
        self.dir = tempfile.mkdtemp(prefix="cogfabric-stall-", dir=base)
        self.path = Path(self.dir) / "j"
        self.gate = threading.Event()
        self.gate.set()
        self.sessions: list[str] = []
        self.rt: cf.Runtime | None = None
        self.entered = threading.Event()  # set when an append waits at the gate
        self.writer_ended: threading.Event | None = None
        self.pending_ok: set[tuple[str, str]] = set()  # sent messages a close() dropped
        self.gated: _GatedJournal | None = None
        self.failed = False  # the disk failed: the journal is fail-stop until the next reopen
        Recorder.handled = []
        Recorder.forgiven = set()

    # -- the runtime and its disk

    def _open(self) -> cf.Runtime:
        """Open the runtime with the gate before its journal writer's appends.

        Private attributes: no public hook holds a commit, and after a close() that
        raised ``ActorTimeoutError`` nothing public says when the writer, which closes
        the journal itself, is done with it (a reopen before that would fail).
        """
        config = cf.Config(
            journal=cf.JournalConfig(durability=self.durability, fsync=False),
            runtime=cf.RuntimeConfig(call_timeout=CALL_TIMEOUT),
        )
        rt = cf.Runtime.open(self.path, config=config, clock=cf.FakeClock(), behaviors={"rec": Recorder})
        writer = rt._core.writer
        assert writer is not None
        self.gated = _GatedJournal(writer._journal, self.gate, self.entered)
        writer._journal = self.gated  # type: ignore[assignment]
        self.writer_ended = writer._ended
        self.failed = False
        return rt

    @contextlib.contextmanager
    def _patient(self) -> Iterator[cf.Runtime]:
        """The runtime, whose calls wait as long as the gate would (GATE_WAIT), inside.

        For what is no part of the model (the set-up, and the check with the disk open):
        on a loaded machine a commit or a read there outlasted CALL_TIMEOUT with the disk
        running (an ActorTimeoutError, and Hypothesis then called the test flaky).
        Private attribute: call_timeout is read at each wait, and nothing public sets it.
        """
        assert self.rt is not None
        core = self.rt._core
        core.call_timeout = GATE_WAIT
        try:
            yield self.rt
        finally:
            core.call_timeout = CALL_TIMEOUT

    @initialize(behaviors=st.lists(st.booleans(), min_size=2, max_size=2))
    def start(self, behaviors: list[bool]) -> None:
        self.rt = self._open()
        with self._patient() as rt:
            for agent_id, behavior in zip(AGENTS, behaviors, strict=False):
                rt.spawn(agent_id, task_id="t1", behavior="rec" if behavior else None)
            rt.bus.subscribe("a", "news")

    @property
    def stalled(self) -> bool:
        return not self.gate.is_set()

    def _call(self, what: str, fn: Any) -> Any:
        """Run one call: it returns, or raises one of REFUSED (its outcome is then left to the check)."""
        label = what.partition(" ")[0].partition("(")[0]
        try:
            result = fn()
        except (*REFUSED, JournalError) as exc:
            if isinstance(exc, JournalError) and not self.failed:
                raise
            note(f"{what}: {type(exc).__name__}{' (stalled)' if self.stalled else ''}")
            event(f"{label}: {type(exc).__name__}")
            return exc
        note(f"{what}: ok{' (stalled)' if self.stalled else ''}")
        event(f"{label}: ok")
        return result

    def _make(self, op: str, agent_id: str, topic: str, value: int) -> Any:
        """The call ``op`` on this runtime, made when it is called (None: nothing to call)."""
        rt = self.rt
        assert rt is not None
        sid = self._sid(value) or ""  # "": no session yet
        state = cf.CognitiveState(schema_version=1, decision=value)
        calls = {
            "spawn": lambda: rt.spawn(agent_id, task_id="t1", behavior="rec" if value % 2 else None),
            "kill": lambda: rt.kill(agent_id),
            "retire": lambda: rt.retire(agent_id),
            "recover": lambda: rt.recover(agent_id, state),
            "suspend": lambda: rt.suspend(agent_id),
            "resume": lambda: rt.resume(agent_id),
            "set_private": lambda: rt.agent(agent_id).set_private(KEYS[value % 2], value),
            "set_task_context": lambda: rt.agent(agent_id).set_task_context({"v": value}),
            "publish": lambda: rt.publish_task_context(f"t{1 + value % 2}", {"p": value}),
            "subscribe": lambda: rt.bus.subscribe(agent_id, topic),
            "unsubscribe": lambda: rt.bus.unsubscribe(agent_id, topic),
            "send": lambda: rt.bus.send("ext", agent_id, topic, value),
            "broadcast": lambda: rt.bus.broadcast("ext", topic, value),
            "request": lambda: rt.bus.request("ext", agent_id, topic, value, timeout=2 * CALL_TIMEOUT),
            "create_session": lambda: rt.memory.create_session(f"u{value % 2}", agent_id=agent_id),
            "add": lambda: rt.memory.add_message(sid, "user", f"m{value}"),
            "delete": lambda: rt.memory.delete_session(sid),
            "turn": lambda: rt.llm(cf.ScriptedProvider(lambda p: f"said {len(p)}")).turn(sid, f"q{value}"),
            "flush": rt.flush,
        }
        if op in ("add", "delete", "turn") and not sid:
            return None
        return calls[op]

    @rule()
    def stall(self) -> None:
        note("stall the disk")
        self.gate.clear()

    @rule()
    def open_disk(self) -> None:
        note("open the disk")
        self.gate.set()

    @rule()
    def fail_disk(self) -> None:
        """Break the disk under the next commit: the one waiting at it, if one does (then open it)."""
        if self.failed:
            return
        writer = self.rt._core.writer if self.rt is not None else None
        assert writer is not None
        assert self.gated is not None
        self.gated.fail_next = True  # the writer makes one commit at a time: the next to pass
        self.failed = True
        if self.stalled and writer._commit_began:
            note("the disk fails under the waiting commit")
            event("the disk failed under a waiting commit")
            self.gate.set()
        else:
            note("the disk will fail under the next commit")
            event("the disk failed later")

    @rule(what=ops)
    def fail_a_waiting_commit(self, what: Op) -> None:
        """Stall the disk, make one call (it times out in sync durability), then fail its commit."""
        if self.failed:
            return
        note(f"stall, call {what}, then the disk fails under its commit")
        self.gate.clear()
        self.entered.clear()
        fn = self._make(*what)
        if fn is not None:
            result = self._call(f"{what[0]} {what[1]} {what[2]} {what[3]} (to fail)", fn)
            if what[0] == "create_session" and isinstance(result, str):
                self.sessions.append(result)
        self.entered.wait(CALL_TIMEOUT)  # batch durability: the writer's commit may begin a little later
        self.fail_disk()

    @rule()
    def flush(self) -> None:
        assert self.rt is not None
        self._call("flush", self.rt.flush)  # while stalled: ActorTimeoutError

    @rule()
    def reopen(self) -> None:
        self._check_and_reopen()

    # -- agents

    @rule(agent_id=agent_ids, task_id=st.sampled_from(TASKS), behavior=st.booleans())
    def spawn(self, agent_id: str, task_id: str, behavior: bool) -> None:
        assert self.rt is not None
        rt = self.rt
        self._call(
            f"spawn {agent_id}",
            lambda: rt.spawn(agent_id, task_id=task_id, behavior="rec" if behavior else None),
        )

    @rule(agent_id=agent_ids, key=st.sampled_from(KEYS), value=small)
    def set_private(self, agent_id: str, key: str, value: int) -> None:
        assert self.rt is not None
        rt = self.rt
        self._call(
            f"set_private({agent_id}, {key}, {value})", lambda: rt.agent(agent_id).set_private(key, value)
        )

    @rule(agent_id=agent_ids, value=small)
    def set_task_context(self, agent_id: str, value: int) -> None:
        assert self.rt is not None
        rt = self.rt
        self._call(
            f"set_task_context({agent_id}, {value})",
            lambda: rt.agent(agent_id).set_task_context({"v": value}),
        )

    @rule(task_id=st.sampled_from(TASKS), value=small)
    def publish(self, task_id: str, value: int) -> None:
        assert self.rt is not None
        rt = self.rt
        self._call(f"publish {task_id} {value}", lambda: rt.publish_task_context(task_id, {"p": value}))

    @rule(
        op=st.sampled_from(["suspend", "resume", "retire", "kill", "recover"]),
        agent_id=agent_ids,
        value=small,
    )
    def lifecycle(self, op: str, agent_id: str, value: int) -> None:
        assert self.rt is not None
        rt = self.rt
        calls = {
            "suspend": lambda: rt.suspend(agent_id),
            "resume": lambda: rt.resume(agent_id),
            "retire": lambda: rt.retire(agent_id),
            "kill": lambda: rt.kill(agent_id),
            "recover": lambda: rt.recover(agent_id, cf.CognitiveState(schema_version=1, decision=value)),
        }
        self._call(f"{op} {agent_id}", calls[op])

    # -- the bus

    @rule(subscribe=st.booleans(), agent_id=agent_ids, topic=st.sampled_from(TOPICS))
    def subscription(self, subscribe: bool, agent_id: str, topic: str) -> None:
        assert self.rt is not None
        bus = self.rt.bus
        call = bus.subscribe if subscribe else bus.unsubscribe
        self._call(f"{call.__name__} {agent_id} {topic}", lambda: call(agent_id, topic))

    @rule(
        op=st.sampled_from(["send", "broadcast", "request"]),
        to=agent_ids,
        topic=st.sampled_from(TOPICS),
        value=small,
    )
    def message(self, op: str, to: str, topic: str, value: int) -> None:
        assert self.rt is not None
        bus = self.rt.bus
        calls = {
            "send": lambda: bus.send("ext", to, topic, value),
            "broadcast": lambda: bus.broadcast("ext", topic, value),
            "request": lambda: bus.request("ext", to, topic, value, timeout=2 * CALL_TIMEOUT),
        }
        self._call(f"{op} {to if op != 'broadcast' else ''} {topic} {value}", calls[op])

    # -- sessions

    def _sid(self, index: int) -> str | None:
        return self.sessions[index % len(self.sessions)] if self.sessions else None

    @rule(user=st.sampled_from(["u1", "u2"]), agent_id=st.none() | agent_ids)
    def create_session(self, user: str, agent_id: str | None) -> None:
        assert self.rt is not None
        memory = self.rt.memory
        sid = self._call(f"create_session {user}", lambda: memory.create_session(user, agent_id=agent_id))
        if isinstance(sid, str):
            self.sessions.append(sid)

    @rule(
        index=small,
        op=st.sampled_from(["add", "add", "delete", "turn"]),
        text=st.sampled_from(["hi", "go on"]),
    )
    def session(self, index: int, op: str, text: str) -> None:
        assert self.rt is not None
        rt, sid = self.rt, self._sid(index)
        if sid is None:
            return
        calls = {
            "add": lambda: rt.memory.add_message(sid, "user", text),
            "delete": lambda: rt.memory.delete_session(sid),
            "turn": lambda: rt.llm(cf.ScriptedProvider(lambda prompt: f"said {len(prompt)}")).turn(sid, text),
        }
        self._call(f"{op} {sid} {text}", calls[op])

    # -- the invariant

    def observe(self, rt: cf.Runtime) -> dict[str, Any]:
        """What the runtime shows (sessions by id: a reopen may order them otherwise, README).

        First each agent's mailbox is drained, twice (a message on "alerts" sends one on
        "news"): a message still being handled shows its agent RUNNING, which replay
        never does (flush() waits for durability, not for the agents' messages).
        """
        for _ in range(2):
            for agent_id in rt.agents():
                rt.agent(agent_id).private("last")  # behind what its mailbox holds
        agents = {}
        for agent_id in rt.agents():
            h = rt.agent(agent_id)
            agents[agent_id] = {
                "lifecycle": str(h.lifecycle),
                "task": h.task_context(),
                "private": {k: h.private(k) for k in [*KEYS, "last"]},
                "cognitive": h.cognitive_state(),
            }
        sessions = {sid: rt.memory.get_messages(sid) for sid in sorted(rt.memory.sessions())}
        return {
            "agents": agents,
            "listed": rt.agents(),
            "subscribers": {t: rt.bus.subscribers(t) for t in TOPICS},
            "sessions": sessions,
        }

    def _check_and_reopen(self) -> None:
        """Open the disk, flush, close: a reopen must show what was live; audit the journal."""
        assert self.rt is not None
        self.gate.set()
        with self._patient() as rt:  # the disk is open: only a loaded machine makes a call slow
            try:
                rt.flush(GATE_WAIT)
            except JournalError:
                if not self.failed:
                    raise
            live = self.observe(rt)
            self.rt, failed = None, self.failed
            rt.close()
        self.pending_ok |= check_journal(self.path, self.pending_ok, disk_failed=failed)
        self.rt = self._open()
        with self._patient() as rt:
            again = self.observe(rt)
        for part in live:
            assert again[part] == live[part], (part, live[part], again[part])
        self.sessions = sorted(live["sessions"])

    def teardown(self) -> None:
        try:
            if self.rt is not None:
                try:
                    self._check_and_reopen()
                finally:
                    self.gate.set()
                    if self.rt is not None:
                        self.rt.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


def _on_agent_stream(state: dict[str, str], failed: set[tuple[str, str]], e: Any, seq: int) -> None:
    """``check_journal``'s step for an event on an agent's stream: no contradiction with what came before."""
    agent = e.stream.removeprefix("agent/")
    assert state.get(agent) not in (None, "KILLED"), (seq, "after its kill", e)
    if isinstance(e, LifecycleChanged):
        assert e.previous == state[agent], (seq, "lifecycle from elsewhere", e, state[agent])
        assert e.previous != "RETIRED", (seq, "out of RETIRED", e)
        state[agent] = e.state
    elif isinstance(e, AgentFailed) and e.cause is not None:
        failed.add((e.cause, agent))
    elif isinstance(e, AgentKilled):
        state[agent] = "KILLED"
    elif isinstance(e, AgentRecovered):
        assert state[agent] != "RETIRED", (seq, "recovered when retired", e)
        state[agent] = "IDLE"


def check_journal(
    path: Path,
    pending_ok: set[tuple[str, str]] | frozenset[tuple[str, str]] = frozenset(),
    *,
    closed: bool = False,
    disk_failed: bool = False,
) -> set[tuple[str, str]]:
    """The journal holds no contradiction, and the recorders handled what it says they did.

    ``disk_failed``: the disk failed (fail-stop): from then on nothing more was stored, so a
    message may stay with neither a delivery nor a dead letter (returned, as for
    ``closed``), and a behavior may have handled what the journal does not say it did, or
    failed where the journal cannot say (``Recorder.forgiven`` from then on).

    A sent message may be left with neither a delivery nor a dead letter only by a
    close() (README: "a dropped message that was sent, not requested, stays in the
    journal as sent"): ``closed`` says the journal was just closed on a stalled disk;
    the pending ones are returned, to be allowed from then on (``pending_ok``).
    """
    with Journal.open(path, readonly=True) as journal:
        records = list(journal.read())
    state: dict[str, str] = {}  # agent -> lifecycle as the journal says; "KILLED" after a kill
    sent: list[IpcMessage] = []  # sends and requests to agents
    delivered: set[tuple[str, str]] = set()  # (message id, recipient): a broadcast's copies share its id
    letters: dict[tuple[str, str], list[str]] = {}
    failed: set[tuple[str, str]] = set()  # (message id, agent) a behavior failed on
    for record in records:
        e, seq = record.event, record.seq
        if isinstance(e, AgentSpawned):
            assert state.get(e.agent, "KILLED") == "KILLED", (seq, "spawn of a live agent", e.agent)
            state[e.agent] = "IDLE"
        elif e.stream.startswith("agent/"):
            _on_agent_stream(state, failed, e, seq)
        if isinstance(e, IpcMessage) and e.recipient in AGENTS and e.kind != "reply":
            sent.append(e)
        elif isinstance(e, IpcDelivered) and e.recipient in AGENTS:
            assert state.get(e.recipient) not in (None, "KILLED"), (seq, "delivered to a dead agent", e)
            delivered.add((e.message_id, e.recipient))
        elif isinstance(e, IpcDeadLettered):
            letters.setdefault((e.message_id, e.recipient), []).append(e.reason)
    pending = [
        m
        for m in sent
        if (m.id, m.recipient) not in delivered | letters.keys() and (m.id, m.recipient) not in pending_ok
    ]
    if disk_failed:
        pass  # its delivery, letter or failure came after the failure: nothing could store it
    elif closed:
        requested = [m for m in pending if m.kind == "request"]
        assert not requested, ("a request left pending by close()", requested)
    else:
        assert not pending, ("left pending", pending)
    # Handled: delivered, and neither dead-lettered (but for its requester's timeout) nor
    # failed on. A request whose requester timed out leaves only its "timeout" letter when
    # its behavior fails later: the failure is the AgentFailed naming it.
    handled = {key for key in delivered if set(letters.get(key, [])) <= {"timeout"} and key not in failed}
    assert len(Recorder.handled) == len(set(Recorder.handled)), "a message handled twice"
    got = set(Recorder.handled)
    if disk_failed:
        Recorder.forgiven |= got ^ handled
    got, handled = got - Recorder.forgiven, handled - Recorder.forgiven
    if got != handled:
        odd = {mid for mid, _ in got ^ handled}
        story = [
            f"{r.seq} {type(r.event).__name__} {r.event.stream} "
            + " ".join(str(getattr(r.event, name, "")) for name in ("recipient", "reason", "kind"))
            for r in records
            if getattr(r.event, "id", None) in odd or getattr(r.event, "message_id", None) in odd
        ]
        msg = f"handled, not so journaled: {got - handled}; journaled, not handled: {handled - got}"
        raise AssertionError(f"{msg}\nits records:\n" + "\n".join(story) + "\nsteps:\n" + "\n".join(STEPS))
    return {(m.id, m.recipient) for m in pending}


BOUND = 20.0  # how long any one call may take on a stalled disk before it counts as hung
CLOSED = (*REFUSED, cf.RuntimeClosedError)  # a call that meets close()
FIRST = concurrent.futures.FIRST_COMPLETED


def _stacks() -> str:
    """Every thread's stack, for a call that hung."""
    frames = sys._current_frames()
    names = {t.ident: t.name for t in threading.enumerate()}
    return "\n".join(
        f"--- {names.get(ident, ident)}\n{''.join(traceback.format_stack(frame)[-12:])}"
        for ident, frame in frames.items()
    )


def _when_all_done(futures: list[concurrent.futures.Future[Any]], done: threading.Event) -> None:
    """Set ``done`` once every one of ``futures`` is done."""
    left = [len(futures)]
    lock = threading.Lock()

    def one_done(_: object) -> None:
        with lock:
            left[0] -= 1
            if not left[0]:
                done.set()

    for future in futures:
        future.add_done_callback(one_done)


class WiderStalledDisk(StalledDisk):
    """The model, with two calls at once and close() on a stalled disk."""

    # -- calls made from other threads

    def _start(
        self, pool: concurrent.futures.ThreadPoolExecutor, calls: list[Any], parties: int
    ) -> tuple[threading.Barrier, list[concurrent.futures.Future[Any]]]:
        barrier = threading.Barrier(parties)

        def run(fn: Any) -> Any:
            barrier.wait(BOUND)
            return fn() if fn is not None else None

        return barrier, [pool.submit(run, fn) for fn in calls]

    def _outcomes(
        self, label: str, what: list[Op], futures: list[Any], allowed: tuple[type[BaseException], ...]
    ) -> None:
        """Each call returned or raised one of ``allowed`` within BOUND, else the test fails.

        Once the disk failed, the journal's refusal (``JournalError``) is allowed too.
        """
        if self.failed:
            allowed = (*allowed, JournalError)
        self.gate_was_open = self.gate.is_set()
        for (op, agent_id, topic, value), future in zip(what, futures, strict=True):
            # (not future.result(timeout): ActorTimeoutError is a TimeoutError too)
            if not concurrent.futures.wait([future], timeout=BOUND).done:
                stacks = _stacks()
                self.gate.set()
                msg = f"{op} {agent_id} {topic} {value}: still running after {BOUND} s (gate was "
                steps = "\n".join(STEPS)
                msg += f"{'open' if self.gate_was_open else 'closed'})\nsteps:\n{steps}\n{stacks}"
                raise AssertionError(msg)
            try:
                result = future.result(timeout=0)
            except allowed as exc:
                note(f"  {op} {agent_id} {topic} {value}: {type(exc).__name__}: {exc}")
                event(f"{label} {op}: {type(exc).__name__}")
                continue
            note(f"  {op} {agent_id} {topic} {value}: ok {result!r:.60}")
            event(f"{label} {op}: ok")
            if op == "create_session" and isinstance(result, str):
                self.sessions.append(result)

    @rule(
        first=ops,
        second=ops,
        open_when=st.sampled_from(["after both", "after one", "on commit", "fail on commit"]),
    )
    def two_at_once(self, first: Op, second: Op, open_when: str) -> None:
        if open_when == "fail on commit" and self.failed:
            open_when = "on commit"
        note(f"two at once on a stalled disk, open {open_when}: {first} {second}")
        self.gate.clear()
        self.entered.clear()
        calls = [self._make(*first), self._make(*second)]
        opener = None
        fail = open_when == "fail on commit"
        if fail:
            self.failed = True
            event("the disk failed on a two-at-once commit")
        if open_when in ("on commit", "fail on commit"):  # as soon as a commit waits for the disk

            def open_on_commit() -> None:
                self.entered.wait(BOUND)
                if fail:
                    assert self.gated is not None
                    self.gated.fail_next = True
                self.gate.set()

            opener = threading.Thread(target=open_on_commit, daemon=True)
            opener.start()
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            _, futures = self._start(pool, calls, 2)
            try:
                if open_when == "after one":
                    concurrent.futures.wait(futures, timeout=BOUND, return_when=FIRST)
                    self.gate.set()
                elif open_when == "after both":
                    concurrent.futures.wait(futures, timeout=BOUND)
                    self.gate.set()
                self._outcomes("two at once:", [first, second], futures, REFUSED)
            finally:
                self.gate.set()
                self.entered.set()
        if opener is not None:
            opener.join(BOUND)

    @rule(
        first=ops,
        second=ops,
        open_when=st.sampled_from(["after both", "after one", "on commit", "fail on commit"]),
    )
    def two_more_at_once(self, first: Op, second: Op, open_when: str) -> None:
        """The same rule again: drawn twice as often as each of the original model's."""
        self.two_at_once(first, second, open_when)

    @rule(
        inflight=st.lists(ops, max_size=2),
        close_when=st.sampled_from(["with them", "once a commit waits"]),
        open_when=st.sampled_from(["as close begins", "after one", "after close"]),
    )
    def close_stalled(self, inflight: list[Op], close_when: str, open_when: str) -> None:
        """close() on a stalled disk, started with the calls in flight or once one's commit waits."""
        assert self.rt is not None
        rt = self.rt
        note(f"close() on a stalled disk {close_when}, open {open_when}, in flight: {inflight}")
        self.gate.clear()
        self.entered.clear()
        calls = [self._make(*what) for what in inflight]
        with concurrent.futures.ThreadPoolExecutor(1 + len(calls)) as pool:
            if close_when == "with them":
                _, futures = self._start(pool, [*calls, rt.close], 1 + len(calls))
            else:  # once a commit waits for the disk, or every call is over (then the entered event too)
                _, futures = self._start(pool, calls, len(calls)) if calls else (None, [])
                if futures:
                    _when_all_done(futures, self.entered)
                    self.entered.wait(BOUND)
                futures.append(pool.submit(rt.close))
            closing = futures[-1]
            try:
                if open_when == "as close begins":
                    self.gate.set()  # races with close(), which may have begun or not
                elif open_when == "after one" and calls:
                    concurrent.futures.wait(futures, timeout=BOUND, return_when=FIRST)
                    self.gate.set()
                if not concurrent.futures.wait([closing], timeout=BOUND).done:
                    raise AssertionError(f"close() still running after {BOUND} s\n{_stacks()}")
                try:
                    closing.result(timeout=0)
                except cf.ActorTimeoutError as exc:  # README: the writer stalled; it closes the journal
                    note(f"  close(): ActorTimeoutError: {exc}")
                    event(f"close() on a stalled disk {close_when}, open {open_when}: ActorTimeoutError")
                except cf.JournalError as exc:
                    # batch durability: the disk failed under changes applied already, and
                    # no call had said so: close() says it (Runtime.close)
                    if not (self.failed and self.durability == "batch"):
                        raise
                    note(f"  close(): {type(exc).__name__}: {exc}")
                    event(f"close() on a stalled disk {close_when}, open {open_when}: the failure")
                else:
                    note("  close(): ok")
                    event(f"close() on a stalled disk {close_when}, open {open_when}: ok")
                self.gate.set()
                self._outcomes("beside close():", inflight, futures[:-1], CLOSED)
            finally:
                self.gate.set()
        self.rt = None
        assert self.writer_ended is not None
        assert self.writer_ended.wait(BOUND), "the journal writer did not end once the disk opened"
        self.pending_ok |= check_journal(self.path, self.pending_ok, closed=True, disk_failed=self.failed)
        self._reopen()

    def _reopen(self) -> None:
        """Open the runtime again (after a close), and take its sessions."""
        self.rt = self._open()
        with self._patient() as rt:
            self.sessions = list(rt.memory.sessions())


class WiderStalledDiskBatch(WiderStalledDisk):
    durability = "batch"


StalledDisk.TestCase.settings = settings(
    max_examples=int(os.environ.get("STALL_EXAMPLES", "20")),
    stateful_step_count=int(os.environ.get("STALL_STEPS", "20")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
test_stalled_disk_against_reopen = StalledDisk.TestCase

_WIDER = settings(
    max_examples=int(os.environ.get("CONC_EXAMPLES", "12")),
    stateful_step_count=int(os.environ.get("CONC_STEPS", "20")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
WiderStalledDisk.TestCase.settings = _WIDER
WiderStalledDiskBatch.TestCase.settings = _WIDER
test_two_calls_and_close_on_a_stalled_disk_sync = WiderStalledDisk.TestCase
test_two_calls_and_close_on_a_stalled_disk_batch = WiderStalledDiskBatch.TestCase


class StalledDiskLong(StalledDisk):
    """The first machine with a wide search (``pytest -m slow``)."""


class WiderStalledDiskLong(WiderStalledDisk):
    """The wider machine, sync, with a wide search (``pytest -m slow``)."""


class WiderStalledDiskBatchLong(WiderStalledDiskBatch):
    """The wider machine, batch, with a wide search (``pytest -m slow``)."""


_SLOW_EXAMPLES = int(os.environ.get("STALL_SLOW_EXAMPLES", "120"))
StalledDiskLong.TestCase.settings = settings(StalledDisk.TestCase.settings, max_examples=_SLOW_EXAMPLES)
WiderStalledDiskLong.TestCase.settings = settings(_WIDER, max_examples=_SLOW_EXAMPLES)
WiderStalledDiskBatchLong.TestCase.settings = settings(_WIDER, max_examples=_SLOW_EXAMPLES)
test_stalled_disk_against_reopen_long = pytest.mark.slow(StalledDiskLong.TestCase)
test_two_calls_and_close_on_a_stalled_disk_sync_long = pytest.mark.slow(WiderStalledDiskLong.TestCase)
test_two_calls_and_close_on_a_stalled_disk_batch_long = pytest.mark.slow(WiderStalledDiskBatchLong.TestCase)

"""Model-based test: calls whose commit outlasts ``call_timeout`` on a stalled disk.

A hypothesis ``RuleBasedStateMachine`` drives one sync-durability runtime whose journal
writer's appends wait behind a gate while the disk is "stalled": a state-changing call
made then raises ``ActorTimeoutError`` (its outcome unknown), and README promises it is
finished once the writer stores it. Rules spawn, change private values and task layers,
publish, move lifecycles, subscribe, send / broadcast / request to a recording behavior,
and create, fill and delete sessions (also through an LLM turn), on a stalled disk or
an open one. There is no reference model: whatever each call did, once the disk is open
and ``flush()`` returned, the live state must be what a reopen of the journal rebuilds,
the recording behaviors must have handled exactly the messages the journal says were
delivered and not dead-lettered, and the journal must not contradict itself (nothing on
an agent's stream after its kill but a new spawn, no way back from RETIRED, each
lifecycle change starting where the last one ended).

Environment knobs: ``STALL_EXAMPLES`` (default 30), ``STALL_STEPS`` (default 20),
``MODEL_TMP`` (where journals go).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, ClassVar

from hypothesis import HealthCheck, event, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

import cogfabric as cf
from cogfabric.events import (
    AgentKilled,
    AgentRecovered,
    AgentSpawned,
    IpcDeadLettered,
    IpcDelivered,
    IpcMessage,
    LifecycleChanged,
)
from cogfabric.store import Journal

AGENTS = ["a", "b", "c"]
TASKS = ["t1", "t2"]
TOPICS = ["news", "alerts"]
KEYS = ["k0", "k1"]
FORWARD = dict(zip(AGENTS, AGENTS[1:] + AGENTS[:1], strict=True))
CALL_TIMEOUT = 0.2
GATE_WAIT = 30.0  # how long a stalled append waits for the test to open the gate
agent_ids = st.sampled_from(AGENTS)
small = st.integers(0, 9)

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


class Recorder:
    """Keeps each message's payload as private "last", then records it as handled.

    What comes on "alerts" it passes on to the next agent, on "news".

    Its ``set_private`` raises ``ActorTimeoutError`` while the disk is stalled: the
    behavior failed, and the message is dead-lettered ("handler error"), not recorded.
    """

    handled: ClassVar[list[tuple[str, str]]] = []

    def on_message(self, ctx: cf.AgentContext, message: IpcMessage) -> Any:
        ctx.set_private("last", message.payload)
        if message.topic == "alerts":  # passed on: a send from inside an agent, delivered once stored
            ctx.send(FORWARD[ctx.agent_id], "news", message.payload)
        Recorder.handled.append((message.id, ctx.agent_id))
        return message.payload


class _GatedJournal:
    """The writer's journal, whose ``append`` waits for ``gate`` (the rest is the real one's)."""

    def __init__(self, journal: Any, gate: threading.Event) -> None:
        self._journal = journal
        self._gate = gate

    def append(self, *args: Any, **kwargs: Any) -> Any:
        assert self._gate.wait(GATE_WAIT), "the test never opened the gate"
        return self._journal.append(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._journal, name)


class StalledDisk(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        base = Path(os.environ.get("MODEL_TMP", tempfile.gettempdir()))
        base.mkdir(parents=True, exist_ok=True)
        self.dir = tempfile.mkdtemp(prefix="cogfabric-stall-", dir=base)
        self.path = Path(self.dir) / "j"
        self.gate = threading.Event()
        self.gate.set()
        self.sessions: list[str] = []
        self.rt: cf.Runtime | None = None
        Recorder.handled = []

    # -- the runtime and its disk

    def _open(self) -> cf.Runtime:
        config = cf.Config(
            journal=cf.JournalConfig(durability="sync", fsync=False),
            runtime=cf.RuntimeConfig(call_timeout=CALL_TIMEOUT),
        )
        rt = cf.Runtime.open(self.path, config=config, clock=cf.FakeClock(), behaviors={"rec": Recorder})
        writer = rt._core.writer
        assert writer is not None
        writer._journal = _GatedJournal(writer._journal, self.gate)  # type: ignore[assignment]
        return rt

    @initialize(behaviors=st.lists(st.booleans(), min_size=2, max_size=2))
    def start(self, behaviors: list[bool]) -> None:
        self.rt = self._open()
        for agent_id, behavior in zip(AGENTS, behaviors, strict=False):
            self.rt.spawn(agent_id, task_id="t1", behavior="rec" if behavior else None)
        self.rt.bus.subscribe("a", "news")

    @property
    def stalled(self) -> bool:
        return not self.gate.is_set()

    def _call(self, what: str, fn: Any) -> Any:
        """Run one call: it returns, or raises one of REFUSED (its outcome is then left to the check)."""
        label = what.partition(" ")[0].partition("(")[0]
        try:
            result = fn()
        except REFUSED as exc:
            note(f"{what}: {type(exc).__name__}{' (stalled)' if self.stalled else ''}")
            event(f"{label}: {type(exc).__name__}")
            return exc
        note(f"{what}: ok{' (stalled)' if self.stalled else ''}")
        event(f"{label}: ok")
        return result

    @rule()
    def stall(self) -> None:
        note("stall the disk")
        self.gate.clear()

    @rule()
    def open_disk(self) -> None:
        note("open the disk")
        self.gate.set()

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
        """What the runtime shows (sessions by id: a reopen may order them otherwise, README)."""
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
        self.rt.flush()
        live = self.observe(self.rt)
        rt, self.rt = self.rt, None
        rt.close()
        check_journal(self.path)
        self.rt = self._open()
        again = self.observe(self.rt)
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


def check_journal(path: Path) -> None:
    """The journal holds no contradiction, and the recorders handled what it says they did."""
    with Journal.open(path, readonly=True) as journal:
        records = list(journal.read())
    state: dict[str, str] = {}  # agent -> lifecycle as the journal says; "KILLED" after a kill
    sent: list[IpcMessage] = []  # sends and requests to agents
    delivered: set[tuple[str, str]] = set()  # (message id, recipient): a broadcast's copies share its id
    letters: dict[tuple[str, str], list[str]] = {}
    for record in records:
        e, seq = record.event, record.seq
        if isinstance(e, AgentSpawned):
            assert state.get(e.agent, "KILLED") == "KILLED", (seq, "spawn of a live agent", e.agent)
            state[e.agent] = "IDLE"
        elif e.stream.startswith("agent/"):
            agent = e.stream.removeprefix("agent/")
            assert state.get(agent) not in (None, "KILLED"), (seq, "after its kill", e)
            if isinstance(e, LifecycleChanged):
                assert e.previous == state[agent], (seq, "lifecycle from elsewhere", e, state[agent])
                assert e.previous != "RETIRED", (seq, "out of RETIRED", e)
                state[agent] = e.state
            elif isinstance(e, AgentKilled):
                state[agent] = "KILLED"
            elif isinstance(e, AgentRecovered):
                assert state[agent] != "RETIRED", (seq, "recovered when retired", e)
                state[agent] = "IDLE"
        if isinstance(e, IpcMessage) and e.recipient in AGENTS and e.kind != "reply":
            sent.append(e)
        elif isinstance(e, IpcDelivered) and e.recipient in AGENTS:
            assert state.get(e.recipient) not in (None, "KILLED"), (seq, "delivered to a dead agent", e)
            delivered.add((e.message_id, e.recipient))
        elif isinstance(e, IpcDeadLettered):
            letters.setdefault((e.message_id, e.recipient), []).append(e.reason)
    for m in sent:
        assert (m.id, m.recipient) in delivered or (m.id, m.recipient) in letters, ("left pending", m)
    handled = {key for key in delivered if set(letters.get(key, [])) <= {"timeout"}}
    assert len(Recorder.handled) == len(set(Recorder.handled)), "a message handled twice"
    got = set(Recorder.handled)
    assert got == handled, (
        "handled, not so journaled",
        got - handled,
        "journaled, not handled",
        handled - got,
    )


StalledDisk.TestCase.settings = settings(
    max_examples=int(os.environ.get("STALL_EXAMPLES", "30")),
    stateful_step_count=int(os.environ.get("STALL_STEPS", "20")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
test_stalled_disk_against_reopen = StalledDisk.TestCase

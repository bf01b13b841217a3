"""Model-based test: the public Runtime API against a pure-Python model, across reopens.

A hypothesis ``RuleBasedStateMachine`` drives one runtime on one journal directory with
random operations: spawn / spawn_many (task context, experience prior, parent, a behavior
by name, class, instance or unregistered instance), private values, task contexts (one
agent, or a publication to a task, also racing behaviors that set their own), cognitive
states, checkpoints and ``recover``, suspend / resume / retire / kill (and stale
handles), IPC send / request / delegate / handoff / broadcast / subscriptions through a
behavior that also acts through ``ctx`` (send, request, task layer, cognitive state,
checkpoint, subscriptions, a failure), bursts of concurrent changes to distinct agents,
sessions with every kind of message (plain, structured with tool calls, LLM turns
through the prompt gate), reads, deletes, sweeps, TTL expiry on a ``FakeClock`` and LRU
eviction at ``max_sessions``; and it closes and reopens the runtime on the same journal,
in "sync" and "batch" durability (switching between them), with ``verify`` "full" or
"tail", with or without a flush, the clock moving while it is closed.

After each reopen and at the end, everything observable (agents, their layers, cognitive
state, lifecycle, children, subscribers, sessions, their messages, prompt windows and
flat contexts, size, latest session per agent) is compared with the model, by value,
type and order, and with what was observable just before the close. After each close
``cogfabric verify`` and ``Journal.verify`` must say ok, and the audit replay
(``cogfabric replay``'s ``agent_view`` / ``session_view``) must rebuild every agent
(layers, cognitive state, lifecycle, IPC count), every checkpoint and session, and the
dead letters, at the journal's end and at every earlier close's head seq.

Documented differences are modelled, not ignored:

* a session read is journaled at most once per ``session_ttl / 10``, so after a reopen
  its last access is the journaled one (README, "Where cogfabric differs"), except a
  read that makes a session its agent's latest, which is journaled when it is made;
* messages to a suspended or retired agent, or one without a behavior, are dead-lettered;
  an unregistered behavior instance is not reattached by a reopen;
* ``bus.dead_letters()`` is not reloaded (so only the journal's are compared).

``MemoryOnlyModel`` runs the same operations (all but the reopens) on a runtime without
a journal, where a killed id is forgotten and ``get_latest_session_for_agent`` raises.

The journal runs with ``fsync: false`` (only a power cut could tell the difference).
The default suite runs 30 examples of each (the journaled one is still its longest test);
``pytest -m slow`` runs 300 more of each (``*_long``), so a wide search is one command away
while the suite stays within its time on 2 cores. Environment knobs: ``MODEL_EXAMPLES``
(default 30), ``MODEL_SLOW_EXAMPLES`` (default 300), ``MODEL_STEPS`` (default 50),
``MODEL_TMP`` (where journals go). A test
that runs 420 s ends the whole run (pyproject's ``faulthandler_exit_on_timeout``); the
slow ones take some minutes, so with knobs raised, pass ``-o faulthandler_timeout=0``
(or a longer one).
"""

from __future__ import annotations

import collections
import copy
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pykka
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import cogfabric as cf
from cogfabric import cli
from cogfabric._audit import agent_view, session_view  # what `cogfabric replay --json` prints
from cogfabric.actors._cleaner import CleanOptions, clean, clean_with_turns, with_ellipsis
from cogfabric.events import CheckpointTaken, IpcDeadLettered, Message, ToolCall, ToolCallFunction
from cogfabric.store import Journal

POOL = ["a0", "a1", "a2", "a3"]
TASKS = ["t1", "t2"]
TOPICS = ["news", "alerts"]
KEYS = ["k0", "k1", "k2"]
TTL = 100.0
MAX_SESSIONS = 3
MAX_HISTORY = 4
CLEAN = CleanOptions(max_user_len=12, max_assistant_len=10, max_tool_len=8, max_system_len=30)
CALL_TIMEOUT = 10.0
ROLES = ["user", "assistant", "system", "tool_call", "tool_result", "observer"]
SEED_TEXT = "New session started"


def make_config(durability: str, snapshot_interval: int) -> cf.Config:
    return cf.Config(
        journal=cf.JournalConfig(durability=durability, snapshot_interval=snapshot_interval, fsync=False),  # type: ignore[arg-type]
        runtime=cf.RuntimeConfig(call_timeout=CALL_TIMEOUT),
        memory=cf.MemoryConfig(
            max_sessions=MAX_SESSIONS, session_ttl=TTL, max_history=MAX_HISTORY, clean=CLEAN
        ),
    )


# ----------------------------------------------------------------- the behavior


class Echo:
    """Counts and keeps what it handles, then acts on its topic through ``ctx``.

    "boom" raises (after counting), "fwd" sends on, "ask" requests another agent,
    "ctx" sets the task layer, "cog" sets the cognitive state and checkpoints it,
    "sub"/"unsub" change its own subscriptions.
    """

    def on_message(self, ctx: cf.AgentContext, message: Any) -> Any:
        ctx.set_private("_n", (ctx.private("_n") or 0) + 1)
        ctx.set_private("_seen", message.payload)
        topic, payload = message.topic, message.payload
        if topic == "boom":
            msg = "boom"
            raise RuntimeError(msg)
        if topic == "fwd":
            ctx.send(payload["to"], "note", payload["p"])
        elif topic == "ask":
            reply = ctx.request(payload["to"], "hello", payload["p"], timeout=CALL_TIMEOUT)
            ctx.set_private("_reply", reply.payload)
        elif topic == "ctx":
            ctx.set_task_context(payload)
        elif topic == "cog":
            ctx.set_cognitive_state(cf.CognitiveState(schema_version=1, decision=payload))
            ctx.checkpoint_cognitive()
        elif topic == "sub":
            ctx.subscribe(payload)
        elif topic == "unsub":
            ctx.unsubscribe(payload)
        return {"echo": payload, "by": ctx.agent_id}


class Loose(Echo):
    """Echo's twin whose class is not registered: a reopen cannot reattach it."""


BEHAVIORS = {"echo": Echo}
BEHAVIOR_CHOICES = [None, "echo", "echo", "class", "instance", "loose"]


def behavior_arg(choice: str | None) -> Any:
    """What spawn is given for a choice: a name, the registered class, or an instance."""
    return {"class": Echo, "instance": Echo(), "loose": Loose()}.get(choice, choice)  # type: ignore[arg-type]


def journaled_behavior(choice: str | None) -> str | None:
    if choice is None:
        return None
    return f"{Loose.__module__}.{Loose.__qualname__}" if choice == "loose" else "echo"


# ----------------------------------------------------------------- values


def norm(value: Any) -> Any:
    """What a value reads back as: msgpack's shapes (tuples are lists)."""
    if isinstance(value, tuple | list):
        return [norm(v) for v in value]
    if isinstance(value, dict):
        return {k: norm(v) for k, v in value.items()}
    return value


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
    | st.binary(max_size=4)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=3) | st.integers(-3, 3), inner, max_size=3)
    ),
    max_leaves=6,
)
str_dicts = st.dictionaries(st.sampled_from(["goal", "deadline", "x", "é"]), values, max_size=3)
cognitive_states = st.builds(
    cf.CognitiveState,
    schema_version=st.sampled_from([-1, 0, 1]),
    context=values,
    observation=st.none() | values,
    working_memory=st.none() | values,
    decision=st.none() | values,
    tool_state=st.none(),
    checkpoint=st.none() | st.text(max_size=4),
)
contents = st.text(max_size=40) | st.sampled_from(
    ["Done. Next step follows!", "```py\nprint(1)\n``` and then more text here", "", "   ", "a" * 60]
)
tool_calls = st.lists(
    st.builds(
        ToolCall,
        id=st.sampled_from(["c1", "c2"]),
        function=st.builds(
            ToolCallFunction,
            name=st.sampled_from(["file_read", "code_runner", "http_request", "knowledge_search", "other"]),
            arguments=st.sampled_from(
                ["", "{}", '{"path": "/x"}', '{"command": "ls", "url": "u"}', "not json"]
            ),
        ),
    ),
    max_size=2,
).map(tuple)
structured_messages = st.builds(
    Message,
    role=st.sampled_from(ROLES),
    content=contents,
    time=st.sampled_from([0.0, 0.0, 5.0, -1.5]),
    turn_id=st.sampled_from(["", "", "t1", "t2"]),
    tool_call_id=st.sampled_from(["", "c1", "c2"]),
    tool_calls=tool_calls,
    event_kind=st.sampled_from(["", "note"]),
    parent_id=st.sampled_from(["", "p"]),
    artifact_refs=st.lists(st.sampled_from(["r1", "r2"]), max_size=2).map(tuple),
)


def upgraded(state: cf.CognitiveState) -> cf.CognitiveState:
    version = 1 if state.schema_version == 0 else state.schema_version
    return cf.CognitiveState(
        schema_version=version,
        context=norm(state.context),
        observation=norm(state.observation),
        working_memory=norm(state.working_memory),
        decision=norm(state.decision),
        tool_state=norm(state.tool_state),
        checkpoint=norm(state.checkpoint),
    )


def normed(state: cf.CognitiveState) -> cf.CognitiveState:
    return msgspec.structs.replace(upgraded(state), schema_version=state.schema_version)


# ----------------------------------------------------------------- the model


@dataclass
class MAgent:
    id: str
    task_id: str | None
    parent: str | None
    behavior: str | None
    """The behavior's name as journaled."""
    capabilities: tuple[str, ...]
    priority: float
    task: dict[str, Any]
    cognitive: cf.CognitiveState
    private: dict[str, Any] = field(default_factory=dict)
    lifecycle: str = "IDLE"
    topics: list[str] = field(default_factory=list)
    runs: bool = True
    """Whether it runs a behavior (an unregistered one is not reattached by a reopen)."""


@dataclass
class MSession:
    id: str
    user_id: str
    agent_id: str | None
    messages: list[Message]
    accessed: float  # live last access
    touched: float  # last access the journal holds
    jorder: int  # journal order of that access (a global counter)


class Model:
    def __init__(self, clock: cf.FakeClock) -> None:
        self.clock = clock
        self.memory_only = False
        """A runtime without a journal (``MemoryOnlyModel``)."""
        self.agents: dict[str, MAgent] = {}
        self.listed: list[str] = []
        """Agent ids in the order each was first spawned (``Runtime.agents``)."""
        self.topics: dict[str, list[str]] = {t: [] for t in TOPICS}
        self.checkpoints: dict[str, list[cf.CognitiveState]] = collections.defaultdict(list)
        self.ipc: collections.Counter[str] = collections.Counter()
        self.dead_letters = 0
        self.sessions: collections.OrderedDict[str, MSession] = collections.OrderedDict()
        self.known_sessions: list[str] = []
        self.ended: set[str] = set()
        self._j = 0
        # each agent's session used last: a read of another one is journaled
        self.agent_latest: dict[str, str] = {}

    # -- agents

    def spawn(self, spec: dict[str, Any]) -> MAgent:
        prior = spec.get("experience_prior")
        cognitive = (
            cf.CognitiveState() if prior is None else cf.CognitiveState(schema_version=1, context=norm(prior))
        )
        agent = MAgent(
            id=spec["agent_id"],
            task_id=spec.get("task_id"),
            parent=spec.get("parent"),
            behavior=journaled_behavior(spec.get("behavior")),
            capabilities=tuple(spec.get("capabilities", ())),
            priority=float(spec.get("priority", 0.0)),
            task=norm(spec.get("task_context") or {}),
            cognitive=cognitive,
        )
        agent.runs = agent.behavior is not None
        self.agents[agent.id] = agent
        self.ipc[agent.id] = 0  # replay shows an agent's IPC since its spawn, not its id's before
        if agent.id not in self.listed:
            self.listed.append(agent.id)
        return agent

    def live(self) -> list[str]:
        return [a for a in self.listed if a in self.agents]

    def kill(self, agent_id: str) -> None:
        del self.agents[agent_id]
        if self.memory_only:  # no stream keeps its place: a new spawn of it comes last
            self.listed.remove(agent_id)
        for members in self.topics.values():
            if agent_id in members:
                members.remove(agent_id)

    # -- IPC

    def deliver(self, sender: str, to: str, topic: str, payload: Any, *, request: bool) -> Any:
        """Model one send or request from ``sender`` to ``to``; returns the reply payload.

        Raises the error class the runtime should raise.
        """
        if to not in self.agents:
            self.dead_letters += 1
            if sender in self.ipc:  # replay shows it beside its sender's messages, by its dead letter
                self.ipc[sender] += 1
            raise cf.AgentNotRegisteredError(to)
        for who in {sender, to}:
            self.ipc[who] += 1
        agent = self.agents[to]
        if not agent.runs or agent.lifecycle in ("SUSPENDED", "RETIRED"):
            self.dead_letters += 1
            if request:
                raise cf.IpcNoHandlerError(to)
            return None
        failed = self.handle(agent, topic, payload)
        if failed:
            self.dead_letters += 1
            if request:
                raise cf.IpcHandlerError(to)
            return None
        if request:
            for who in {sender, to}:
                self.ipc[who] += 1
            return norm({"echo": payload, "by": to})
        return None

    def handle(self, agent: MAgent, topic: str, payload: Any) -> bool:
        """The behavior's effect; True when it raised."""
        agent.private["_n"] = (agent.private.get("_n") or 0) + 1
        agent.private["_seen"] = norm(payload)
        if topic == "boom":
            return True
        if topic == "fwd":
            try:
                self.deliver(agent.id, payload["to"], "note", payload["p"], request=False)
            except cf.AgentNotRegisteredError:
                return True
        elif topic == "ask":
            if payload["to"] == agent.id:
                return True  # IpcInvalidMessageError: it would wait for its own mailbox
            try:
                reply = self.deliver(agent.id, payload["to"], "hello", payload["p"], request=True)
            except cf.CogfabricError:
                return True
            agent.private["_reply"] = reply
        elif topic == "ctx":
            agent.task = norm(payload)
        elif topic == "cog":
            agent.cognitive = cf.CognitiveState(schema_version=1, decision=norm(payload))
            self.checkpoints[agent.id].append(agent.cognitive)
        elif topic in ("sub", "unsub"):
            self.subscribe(agent.id, payload, subscribe=topic == "sub")
        return False

    def subscribe(self, agent_id: str, topic: str, *, subscribe: bool) -> None:
        members = self.topics[topic]
        if subscribe and agent_id not in members:
            members.append(agent_id)
        elif not subscribe and agent_id in members:
            members.remove(agent_id)

    def broadcast(self, sender: str, topic: str, payload: Any) -> int:
        targets = [a for a in self.topics[topic] if self.agents[a].runs]
        for who in {sender, *targets}:
            self.ipc[who] += 1
        for agent_id in targets:
            agent = self.agents[agent_id]
            # a suspended or retired agent dead-letters it; broadcast topics never fail
            if agent.lifecycle in ("SUSPENDED", "RETIRED") or self.handle(agent, topic, payload):
                self.dead_letters += 1
        return len(targets)

    # -- sessions (mirrors the documented semantics: README "Where cogfabric differs")

    def now(self) -> float:
        return self.clock.now()

    def _journaled(self, s: MSession, at: float) -> None:
        self._j += 1
        s.touched, s.jorder = at, self._j

    def _used(self, s: MSession) -> None:
        if s.agent_id is not None:
            self.agent_latest[s.agent_id] = s.id

    def _ended(self, sid: str) -> None:
        s = self.sessions.pop(sid)
        self.ended.add(sid)
        if s.agent_id is not None and self.agent_latest.get(s.agent_id) == sid:
            del self.agent_latest[s.agent_id]

    def expired(self, s: MSession, now: float) -> bool:
        return now > s.accessed + TTL  # README: "it expires once now > last access + ttl"

    def live_session(self, sid: str, *, touch: bool) -> MSession:
        s = self.sessions.get(sid)
        now = self.now()
        if s is None:
            raise cf.SessionNotFoundError(sid)
        if self.expired(s, now):
            self._ended(sid)
            raise cf.SessionNotFoundError(sid)
        s.accessed = now
        self.sessions.move_to_end(sid)
        switched = s.agent_id is not None and self.agent_latest.get(s.agent_id) != sid
        if touch and (now - s.touched >= TTL / 10 or switched):
            self._journaled(s, now)
        self._used(s)
        return s

    def create_session(self, sid: str, user_id: str, agent_id: str | None) -> None:
        """Called with the id the runtime gave; the evictions happen first."""
        now = self.now()
        self.sessions[sid] = MSession(
            sid, user_id, agent_id, [Message(role="system", content=SEED_TEXT, time=now)], now, now, 0
        )
        self._journaled(self.sessions[sid], now)
        self._used(self.sessions[sid])
        self.known_sessions.append(sid)

    def evictions(self) -> list[str]:
        gone = []
        while len(self.sessions) >= MAX_SESSIONS:
            sid = next(iter(self.sessions))
            self._ended(sid)
            gone.append(sid)
        return gone

    def add(self, sid: str, message: Message) -> None:
        s = self.live_session(sid, touch=False)
        now = self.now()
        if message.time == 0.0:
            message = msgspec.structs.replace(message, time=now)
        s.messages.append(message)
        s.accessed = now
        self._journaled(s, now)

    def delete(self, sid: str) -> None:
        if sid in self.sessions:
            self._ended(sid)

    def sweep(self) -> int:
        now = self.now()
        gone = [sid for sid, s in self.sessions.items() if self.expired(s, now)]
        for sid in gone:
            self._ended(sid)
        return len(gone)

    def size(self) -> int:
        now = self.now()
        return sum(1 for s in self.sessions.values() if not self.expired(s, now))

    def latest(self, agent_id: str) -> str | None:
        now = self.now()
        # of sessions used at the same clock reading, the one used last is the most recent
        newest_first = reversed(self.sessions.values())
        live = [s for s in newest_first if s.agent_id == agent_id and not self.expired(s, now)]
        return max(live, key=lambda s: s.accessed).id if live else None

    def window(self, s: MSession) -> list[Message]:
        return clean_with_turns(s.messages[-MAX_HISTORY:], CLEAN)

    def context(self, text: str, s: MSession) -> str:
        history = clean(s.messages[-MAX_HISTORY:], CleanOptions())  # build_context: the defaults
        prefixes = {
            "user": "User: ",
            "assistant": "Assistant: ",
            "tool_call": "Tool call: ",
            "tool_result": "Tool result: ",
            "system": "System: ",
        }
        lines = "".join(
            f"{prefixes.get(m.role, 'Unknown: ')}{with_ellipsis(m.content, 100)}\n" for m in history
        )
        return f"Previous conversation history:\n\n{lines}\nCurrent request:\n{text}"

    def reopened(self) -> None:
        """What a reopen rebuilds: journaled accesses, in journal order; expired ones go.

        ``agents()`` lists ids in the order each was first spawned, as before the reopen
        (README), also one whose LLM records came before its spawn.
        """
        for agent in self.agents.values():
            agent.runs = agent.behavior in BEHAVIORS
        for s in self.sessions.values():
            s.accessed = s.touched
        ordered = sorted(self.sessions.values(), key=lambda s: (s.touched, s.jorder))
        self.sessions = collections.OrderedDict((s.id, s) for s in ordered)
        self.agent_latest = {}
        for s in ordered:
            self._used(s)
        self.sweep()


# ----------------------------------------------------------------- the machine

agent_ids = st.sampled_from(POOL)
senders = st.sampled_from(["ext", *POOL])


class RuntimeModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        base = Path(os.environ.get("MODEL_TMP", tempfile.gettempdir()))
        base.mkdir(parents=True, exist_ok=True)
        self.dir = tempfile.mkdtemp(prefix="cogfabric-model-", dir=base)
        self.path = Path(self.dir) / "journal"
        self.clock = cf.FakeClock()
        self.model = Model(self.clock)
        self.rt: cf.Runtime | None = None
        self.handles: dict[str, cf.Agent] = {}
        self.stale: list[cf.Agent] = []
        self.durability = "sync"
        self.snapshot_interval = 200
        self.steps = 0
        self.history: list[tuple[int, Frozen]] = []
        """(head seq, model) at every close, for time-travel replays."""

    # -- opening and closing

    def _open(self, verify: str = "full") -> None:
        note(f"open durability={self.durability} snapshot_interval={self.snapshot_interval} verify={verify}")
        self.rt = cf.Runtime.open(
            self.path,
            config=make_config(self.durability, self.snapshot_interval),
            clock=self.clock,
            behaviors=BEHAVIORS,
            verify=verify,  # type: ignore[arg-type]
        )
        self.handles = {a: self.rt.agent(a) for a in self.rt.agents()}
        self.stale = []

    @initialize(
        durability=st.sampled_from(["sync", "batch"]),
        snapshot_interval=st.sampled_from([1, 2, 3, 200]),
        population=st.lists(
            st.tuples(
                st.sampled_from([None, *TASKS]),
                st.sampled_from([None, "echo", "echo"]),
                st.none() | str_dicts,
            ),
            min_size=1,
            max_size=3,
        ),
        sessions=st.lists(st.none() | agent_ids, max_size=2),
    )
    def start(
        self, durability: str, snapshot_interval: int, population: list[Any], sessions: list[Any]
    ) -> None:
        self.durability = durability
        self.snapshot_interval = snapshot_interval
        self._open()
        for agent_id, (task_id, behavior, ctx) in zip(POOL, population, strict=False):
            self.spawn(
                agent_id=agent_id,
                task_id=task_id,
                task_context=ctx,
                prior=None,
                parent=None,
                behavior=behavior,
                capabilities=(),
                priority=0.0,
            )
        for agent_id in sessions:
            self.create_session("u1", agent_id)

    def teardown(self) -> None:
        event(f"agents ever: {len(self.model.listed)}, sessions ever: {len(self.model.known_sessions)}")
        event(f"steps: {self.steps // 10 * 10}+")
        try:
            if self.rt is not None and not self.rt.closed:
                try:
                    self.check_observable()
                    self._close_and_audit()
                finally:
                    self.rt.close()
                assert not pykka.ActorRegistry.get_all(), "close() left actors running"
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def _close_and_audit(self, *, flush: bool = True) -> None:
        assert self.rt is not None
        if flush and self.durability == "batch":
            self.rt.flush(timeout=CALL_TIMEOUT)
        self.rt.close()
        result = CliRunner().invoke(cli.main, ["verify", str(self.path)])
        assert result.exit_code == 0, result.output
        assert result.output.startswith("ok:"), result.output
        self.check_replay()

    @rule(
        durability=st.sampled_from(["sync", "batch"]),
        snapshot_interval=st.sampled_from([1, 2, 3, 200]),
        verify=st.sampled_from(["full", "tail"]),
        closed_for=st.sampled_from([0.0, 0.0, 5.0, 60.0, 95.0, 150.0]),
        read_sessions=st.booleans(),
    )
    def reopen(
        self, durability: str, snapshot_interval: int, verify: str, closed_for: float, read_sessions: bool
    ) -> None:
        # Reading a session refreshes its last access (journaled at most once per ttl/10):
        # half the time, only what reads nothing is compared, so that what the reads
        # would have refreshed shows after the reopen.
        before = self.check_observable(read_sessions=read_sessions)
        event(f"reopen ({self.durability} -> {durability})")
        fresher = sum(1 for x in self.model.sessions.values() if x.accessed > x.touched)
        event(f"reopen with {min(fresher, 2)} sessions read since their last journaled access")
        event(f"reopen with max {max(len(v) for v in self.model.topics.values())} subscribers of a topic")
        old_handles = list(self.handles.values())
        self._close_and_audit()
        for h in old_handles[:1]:  # a handle reaches its own runtime only
            with pytest.raises(cf.RuntimeClosedError):
                h.task_context()
        if closed_for:
            self.clock.advance(closed_for)
        self.durability = durability
        self.snapshot_interval = snapshot_interval
        self._open(verify)
        self.model.reopened()
        after = self.check_observable(read_sessions=read_sessions)
        # The agents' side must be exactly what it was (the sessions' side is in the model),
        # agents() too: in the order each id was first spawned, as README says.
        assert after["agents"] == before["agents"]
        assert after["subscribers"] == before["subscribers"]  # in subscription order, as live

    @rule(
        sends=st.lists(
            st.tuples(agent_ids, st.sampled_from(["hello", "boom", "ctx", "cog", "sub", "unsub"])),
            min_size=1,
            max_size=4,
        ),
        data=st.data(),
    )
    def send_and_close(self, sends: list[tuple[str, str]], data: st.DataObject) -> None:
        """Messages still in mailboxes at close are handled first (README: close "gives the
        agents call_timeout ... to handle what is in their mailboxes"), without a flush."""
        assert self.rt is not None
        subscribing: dict[str, str] = {}  # topic -> the agent this batch subscribes to it
        for to, topic in sends:
            if topic == "ctx":
                payload: Any = data.draw(str_dicts)
            elif topic in ("sub", "unsub"):
                payload = data.draw(st.sampled_from(TOPICS))
                if topic == "sub" and subscribing.setdefault(payload, to) != to:
                    # Two agents handle their mail at once: which of them subscribes first,
                    # and so comes first among the subscribers, is theirs to race for.
                    continue
            else:
                payload = data.draw(values)
            try:
                self.model.deliver("ext", to, topic, payload, request=False)
            except cf.AgentNotRegisteredError:
                with pytest.raises(cf.AgentNotRegisteredError):
                    self.rt.bus.send("ext", to, topic, payload)
            else:
                self.rt.bus.send("ext", to, topic, payload)
        self._close_and_audit(flush=False)
        self._open()
        self.model.reopened()
        self.check_observable()

    # -- observing

    def observe_live(self, *, read_sessions: bool = True) -> dict[str, Any]:
        """Everything observable, in a fixed order (session reads touch sessions)."""
        rt = self.rt
        assert rt is not None
        agents: dict[str, Any] = {"list": rt.agents()}
        for agent_id in rt.agents():
            h = rt.agent(agent_id)
            view = h.context_view()
            agents[agent_id] = {
                "lifecycle": str(h.lifecycle),
                "task_id": h.task_id,
                "parent": h.parent,
                "capabilities": tuple(h.capabilities),
                "priority": h.priority,
                "task": h.task_context(),
                "view": (dict(view.task_shared), dict(view.private)),
                "private": {k: h.private(k) for k in [*KEYS, "_n", "_seen", "_reply"]},
                "cognitive": h.cognitive_state(),
                "children": rt.children(agent_id),
            }
        sessions: dict[str, Any] = {
            "size": rt.memory.size(),
            "latest": {a: self._latest_live(a) for a in POOL},
        }
        for sid in self.model.known_sessions if read_sessions else ():
            got: dict[str, Any] = {}
            try:
                got["messages"] = rt.memory.get_messages(sid)
                got["window"] = rt.memory.build_prompt_messages(sid)
            except cf.SessionNotFoundError:
                got["missing"] = True
            got["context"] = rt.memory.build_context("now?", sid)
            sessions[sid] = got
        return {
            "agents": agents,
            "subscribers": {t: rt.bus.subscribers(t) for t in TOPICS},
            "sessions": sessions,
        }

    def observe_model(self, *, read_sessions: bool = True) -> dict[str, Any]:
        m = self.model
        agents: dict[str, Any] = {"list": m.live()}
        for agent_id in m.live():
            a = m.agents[agent_id]
            agents[agent_id] = {
                "lifecycle": a.lifecycle,
                "task_id": a.task_id,
                "parent": a.parent,
                "capabilities": a.capabilities,
                "priority": a.priority,
                "task": a.task,
                "view": (a.task, a.private),
                "private": {k: a.private.get(k) for k in [*KEYS, "_n", "_seen", "_reply"]},
                "cognitive": a.cognitive,
                "children": [c for c in m.live() if m.agents[c].parent == agent_id],
            }
        latest = {a: "unsupported" if m.memory_only else m.latest(a) for a in POOL}
        sessions: dict[str, Any] = {"size": m.size(), "latest": latest}
        for sid in m.known_sessions if read_sessions else ():
            got: dict[str, Any] = {}
            try:
                s = m.live_session(sid, touch=True)
                got["messages"] = list(s.messages)
                m.live_session(sid, touch=True)
                got["window"] = m.window(s)
            except cf.SessionNotFoundError:
                got["missing"] = True
            try:
                s = m.live_session(sid, touch=True)
                got["context"] = m.context("now?", s)
            except cf.SessionNotFoundError:
                got["context"] = "now?"
            sessions[sid] = got
        return {
            "agents": agents,
            "subscribers": {t: list(m.topics[t]) for t in TOPICS},
            "sessions": sessions,
        }

    def check_observable(self, *, read_sessions: bool = True) -> dict[str, Any]:
        live = self.observe_live(read_sessions=read_sessions)
        expected = self.observe_model(read_sessions=read_sessions)
        for part in ("agents", "subscribers", "sessions"):
            assert live[part] == expected[part], _diff(part, live[part], expected[part])
            # == takes True for 1, 1.0 for 1 and ignores dict order: the bytes do not
            assert _canon(live[part]) == _canon(expected[part]), _diff(part, live[part], expected[part])
        return live

    def check_replay(self) -> None:
        """The closed journal, audited: what `cogfabric replay` rebuilds is the model.

        Also time travel: every earlier close's head seq, replayed with ``--at``, must
        rebuild what the model held at that close.
        """
        frozen = Frozen.of(self.model)
        with Journal.open(self.path, readonly=True) as journal:
            report = journal.verify(decode=True)
            assert report.ok, report
            head = journal.last_seq
            assert report.head_seq == head, report
            self.history.append((head, frozen))
            for at, past in self.history:
                _check_replay_at(journal, past, None if at == head else at)

    @rule()
    def observe(self) -> None:
        self.check_observable()

    @invariant()
    def agents_listed(self) -> None:
        self.steps += 1
        if self.rt is not None and not self.rt.closed:
            assert self.rt.agents() == self.model.live()

    # -- agents

    def _handle(self, agent_id: str) -> cf.Agent:
        assert self.rt is not None
        h = self.handles.get(agent_id)
        if h is None:
            h = self.handles[agent_id] = self.rt.agent(agent_id)
        return h

    @rule(
        agent_id=agent_ids,
        task_id=st.sampled_from([None, *TASKS]),
        task_context=st.none() | str_dicts,
        prior=st.none() | values.filter(lambda v: v is not None),
        parent=st.none() | agent_ids,
        behavior=st.sampled_from(BEHAVIOR_CHOICES),
        capabilities=st.lists(st.sampled_from(["search", "review"]), max_size=2, unique=True).map(tuple),
        priority=st.sampled_from([0.0, 1.5, -2.0]),
    )
    def spawn(
        self,
        *,
        agent_id: str,
        task_id: str | None,
        task_context: dict[str, Any] | None,
        prior: Any,
        parent: str | None,
        behavior: str | None,
        capabilities: tuple[str, ...],
        priority: float,
    ) -> None:
        assert self.rt is not None
        spec = {
            "agent_id": agent_id,
            "task_id": task_id,
            "task_context": task_context,
            "experience_prior": prior,
            "parent": parent,
            "behavior": behavior,
            "capabilities": capabilities,
            "priority": priority,
        }
        given = {**spec, "behavior": behavior_arg(behavior)}
        if agent_id in self.model.agents:
            with pytest.raises(cf.AgentExistsError):
                self.rt.spawn(**given)
            return
        handle = self.rt.spawn(**given)
        self.model.spawn(spec)
        self.handles[agent_id] = handle

    @rule(ids=st.lists(agent_ids, min_size=1, max_size=3), task_id=st.sampled_from(TASKS), ctx=str_dicts)
    def spawn_many(self, ids: list[str], task_id: str, ctx: dict[str, Any]) -> None:
        assert self.rt is not None
        specs: list[dict[str, Any]] = [
            {"agent_id": a, "task_id": task_id, "task_context": ctx, "behavior": "echo"} for a in ids
        ]
        if len(set(ids)) != len(ids):
            with pytest.raises(cf.InvalidSpawnSpecError):
                self.rt.spawn_many(specs)
        elif any(a in self.model.agents for a in ids):
            with pytest.raises(cf.AgentExistsError):
                self.rt.spawn_many(specs)
        else:
            handles = self.rt.spawn_many(specs)
            for spec, h in zip(specs, handles, strict=True):
                self.model.spawn(spec)
                self.handles[spec["agent_id"]] = h

    @rule(agent_id=agent_ids)
    def kill(self, agent_id: str) -> None:
        assert self.rt is not None
        if agent_id not in self.model.agents:
            with pytest.raises(cf.AgentNotFoundError):
                self.rt.kill(agent_id)
            return
        old = self._handle(agent_id)
        self.rt.kill(agent_id)
        self.model.kill(agent_id)
        self.handles.pop(agent_id, None)
        self.stale.append(old)

    @precondition(lambda self: self.stale)
    @rule(data=st.data())
    def stale_handle(self, data: st.DataObject) -> None:
        h = data.draw(st.sampled_from(self.stale))
        with pytest.raises(cf.AgentNotFoundError):
            h.set_private("k0", 1)
        with pytest.raises(cf.AgentNotFoundError):
            h.task_context()

    @rule(agent_id=agent_ids, key=st.sampled_from(KEYS), value=values, via_ctx=st.booleans())
    def set_private(self, agent_id: str, key: str, value: Any, via_ctx: bool) -> None:  # noqa: ARG002
        if agent_id not in self.model.agents:
            return
        self._handle(agent_id).set_private(key, value)
        self.model.agents[agent_id].private[key] = norm(value)

    @rule(agent_id=agent_ids, bad=st.sampled_from(["object", "bigint", "key", "future", "ctxkey"]))
    def refused_change(self, agent_id: str, bad: str) -> None:
        """A value replay could not rebuild is refused at the call; nothing changes."""
        if agent_id not in self.model.agents:
            return
        h = self._handle(agent_id)
        if bad == "object":
            with pytest.raises(TypeError):
                h.set_private("k0", object())
        elif bad == "bigint":
            with pytest.raises(TypeError):
                h.set_private("k0", [2**64])
        elif bad == "key":
            with pytest.raises(TypeError):
                h.set_private(5, 1)  # type: ignore[arg-type]
        elif bad == "future":
            with pytest.raises(cf.CognitiveStateSchemaVersionError):
                h.set_cognitive_state(cf.CognitiveState(schema_version=2))
        else:
            with pytest.raises(TypeError):
                h.set_task_context({1: "x"})  # type: ignore[dict-item]

    @rule(agent_id=agent_ids, ctx=st.none() | str_dicts)
    def set_task_context(self, agent_id: str, ctx: dict[str, Any] | None) -> None:
        if agent_id not in self.model.agents:
            return
        self._handle(agent_id).set_task_context(ctx)
        self.model.agents[agent_id].task = norm(ctx or {})

    @rule(task_id=st.sampled_from(TASKS), ctx=str_dicts)
    def publish(self, task_id: str, ctx: dict[str, Any]) -> None:
        assert self.rt is not None
        went = self.rt.publish_task_context(task_id, ctx)
        targets = [a for a in self.model.live() if self.model.agents[a].task_id == task_id]
        assert sorted(went) == sorted(targets)
        for a in targets:
            self.model.agents[a].task = norm(ctx)

    @rule(task_id=st.sampled_from(TASKS), mine=str_dicts, published=str_dicts, flush_first=st.booleans())
    def race_publish(
        self, task_id: str, mine: dict[str, Any], published: dict[str, Any], flush_first: bool
    ) -> None:
        """Behaviors set their own task layer while a publication to their task goes out.

        Which one wins is a race; the live runtime must then show what replay rebuilds
        (checked at the next reopen), and each agent one of the two.
        """
        assert self.rt is not None
        m = self.model
        racers = [
            a
            for a in m.live()
            if m.agents[a].task_id == task_id and m.agents[a].runs and m.agents[a].lifecycle == "IDLE"
        ]
        for agent_id in racers:
            m.deliver("ext", agent_id, "ctx", mine, request=False)
            self.rt.bus.send("ext", agent_id, "ctx", mine)
        if flush_first:
            self.rt.flush(timeout=CALL_TIMEOUT)
        went = self.rt.publish_task_context(task_id, published)
        self.rt.flush(timeout=CALL_TIMEOUT)
        targets = [a for a in m.live() if m.agents[a].task_id == task_id]
        assert sorted(went) == sorted(targets)
        for agent_id in targets:
            if agent_id in racers and not flush_first:
                got = self._handle(agent_id).task_context()
                assert got in (norm(mine), norm(published)), got
                event("race: " + ("behavior won" if got == norm(mine) else "publication won"))
                m.agents[agent_id].task = got
            else:
                m.agents[agent_id].task = norm(published)

    @rule(
        plans=st.lists(
            st.lists(
                st.one_of(
                    st.tuples(st.just("private"), st.sampled_from(KEYS), values),
                    st.tuples(st.just("cog"), cognitive_states),
                    st.tuples(st.just("checkpoint")),
                    st.tuples(st.just("send"), st.sampled_from(["hello", "boom"]), values),
                ),
                max_size=5,
            ),
            min_size=4,
            max_size=4,
        ),
        publish=st.none() | st.tuples(st.sampled_from(TASKS), str_dicts),
    )
    def burst(self, plans: list[list[tuple[Any, ...]]], publish: tuple[str, dict[str, Any]] | None) -> None:
        """One thread per live agent, each changing its own agent, and maybe a publication
        at the same time: the changes commute, so the end state is known, and many land in
        one group commit (with snapshots) at once."""
        assert self.rt is not None
        rt, m = self.rt, self.model
        agents = m.live()
        handles = {a: self._handle(a) for a in agents}
        errors: list[BaseException] = []
        checkpoints: dict[str, list[cf.CognitiveState]] = {a: [] for a in agents}

        def guarded(work: Any, *args: Any) -> None:
            try:
                work(*args)
            except BaseException as exc:  # noqa: BLE001 - reported below, on the test's thread
                errors.append(exc)

        threads = [
            threading.Thread(target=guarded, args=(_run_plan, rt, handles[a], plan, checkpoints[a]))
            for a, plan in zip(agents, plans, strict=False)
        ]
        if publish is not None:
            threads.append(threading.Thread(target=guarded, args=(rt.publish_task_context, *publish)))
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=4 * CALL_TIMEOUT)
        assert not any(t.is_alive() for t in threads), "a burst thread hung"
        assert not errors, errors
        rt.flush(timeout=CALL_TIMEOUT)
        for agent_id, plan in zip(agents, plans, strict=False):
            _apply_plan(m, agent_id, plan, checkpoints[agent_id])
        if publish is not None:
            for agent_id in agents:
                if m.agents[agent_id].task_id == publish[0]:
                    m.agents[agent_id].task = norm(publish[1])

    @rule(agent_id=agent_ids, state=cognitive_states)
    def set_cognitive(self, agent_id: str, state: cf.CognitiveState) -> None:
        if agent_id not in self.model.agents:
            return
        self._handle(agent_id).set_cognitive_state(state)
        self.model.agents[agent_id].cognitive = upgraded(state)

    @rule(agent_id=agent_ids)
    def checkpoint(self, agent_id: str) -> None:
        if agent_id not in self.model.agents:
            return
        got = self._handle(agent_id).checkpoint_cognitive()
        want = self.model.agents[agent_id].cognitive
        assert got == want
        self.model.checkpoints[agent_id].append(normed(want))

    @rule(agent_id=agent_ids, data=st.data())
    def recover(self, agent_id: str, data: st.DataObject) -> None:
        assert self.rt is not None
        taken = [c for cs in self.model.checkpoints.values() for c in cs]
        state = data.draw(st.sampled_from(taken) if taken else cognitive_states)
        if agent_id not in self.model.agents:
            with pytest.raises(cf.AgentNotFoundError):
                self.rt.recover(agent_id, state)
            return
        agent = self.model.agents[agent_id]
        if agent.lifecycle == "RETIRED":
            with pytest.raises(cf.AgentRetiredError):
                self.rt.recover(agent_id, state)
            return
        self.rt.recover(agent_id, state)
        agent.cognitive = upgraded(state)
        agent.lifecycle = "IDLE"

    @rule(agent_id=agent_ids, op=st.sampled_from(["suspend", "resume", "retire"]))
    def lifecycle(self, agent_id: str, op: str) -> None:
        assert self.rt is not None
        call = getattr(self.rt, op)
        if agent_id not in self.model.agents:
            with pytest.raises(cf.AgentNotFoundError):
                call(agent_id)
            return
        agent = self.model.agents[agent_id]
        if op == "retire":
            call(agent_id)
            agent.lifecycle = "RETIRED"
        elif agent.lifecycle == "RETIRED":
            with pytest.raises(cf.AgentRetiredError):
                call(agent_id)
        elif op == "suspend":
            call(agent_id)
            agent.lifecycle = "SUSPENDED"
        elif agent.lifecycle != "SUSPENDED":
            with pytest.raises(cf.AgentNotSuspendedError):
                call(agent_id)
        else:
            call(agent_id)
            agent.lifecycle = "IDLE"

    # -- IPC

    @rule(
        sender=senders,
        to=agent_ids,
        topic=st.sampled_from(["hello", "hello", "boom", "fwd", "ask", "ctx", "cog", "sub", "unsub"]),
        method=st.sampled_from(["send", "request", "request", "delegate", "handoff"]),
        data=st.data(),
    )
    def ipc(self, sender: str, to: str, topic: str, method: str, data: st.DataObject) -> None:
        assert self.rt is not None
        bus = self.rt.bus
        if topic in ("fwd", "ask"):
            payload: Any = {"to": data.draw(agent_ids, label="to"), "p": data.draw(values, label="p")}
        elif topic == "ctx":
            payload = data.draw(str_dicts, label="ctx")
        elif topic in ("sub", "unsub"):
            payload = data.draw(st.sampled_from(TOPICS), label="topic")
        else:
            payload = data.draw(values, label="value")
        if method == "handoff":
            topic = "handoff-task"
            payload = {"task_id": data.draw(st.sampled_from(TASKS)), "context": payload, "artifacts": []}
        request = method != "send"
        try:
            want = self.model.deliver(sender, to, topic, payload, request=request)
        except cf.CogfabricError as exc:
            expected: type[Exception] | None = type(exc)
        else:
            expected = None

        def call() -> Any:
            if method == "send":
                return bus.send(sender, to, topic, payload)
            if method == "handoff":
                return bus.handoff(sender, to, payload["task_id"], payload["context"], timeout=CALL_TIMEOUT)
            return getattr(bus, method)(sender, to, topic, payload, timeout=CALL_TIMEOUT)

        if expected is not None:
            with pytest.raises(expected):
                call()
        elif request:
            reply = call()
            assert reply.payload == want
            assert (reply.sender, reply.recipient, reply.kind) == (to, sender, "reply")
        else:
            sent = call()
            assert norm(sent.payload) == norm(payload)
        # A send returns before it is handled: wait until it is (recover and retire refuse
        # a RUNNING agent, by design). flush waits for the messages in the mailboxes when
        # it asks, not for those their behaviors send on: the note a "fwd" sends reaches
        # its recipient after flush asked it (in sync durability the writer delivers it
        # after its commit), so a second flush waits for it (a note sends nothing on).
        self.rt.flush(timeout=CALL_TIMEOUT)
        if topic == "fwd":
            self.rt.flush(timeout=CALL_TIMEOUT)

    @rule(agent_id=agent_ids, topic=st.sampled_from(TOPICS), subscribe=st.booleans())
    def subscription(self, agent_id: str, topic: str, subscribe: bool) -> None:
        assert self.rt is not None
        call = self.rt.bus.subscribe if subscribe else self.rt.bus.unsubscribe
        if agent_id not in self.model.agents:
            if subscribe:
                with pytest.raises(cf.AgentNotRegisteredError):
                    call(agent_id, topic)
            else:
                call(agent_id, topic)  # the original's: no subscription to remove, no error
            return
        call(agent_id, topic)
        self.model.subscribe(agent_id, topic, subscribe=subscribe)

    @rule(sender=senders, topic=st.sampled_from(TOPICS), value=values)
    def broadcast(self, sender: str, topic: str, value: Any) -> None:
        assert self.rt is not None
        want = self.model.broadcast(sender, topic, value)
        assert self.rt.bus.broadcast(sender, topic, value) == want
        self.rt.flush(timeout=CALL_TIMEOUT)  # handled before the next step (see ipc)

    # -- sessions

    def _sid(self, index: int) -> str | None:
        known = self.model.known_sessions
        return known[index % len(known)] if known else None

    @rule(user=st.sampled_from(["u1", "u2", "ü"]), agent_id=st.sampled_from([None, "a0", "a1"]))
    def create_session(self, user: str, agent_id: str | None) -> None:
        assert self.rt is not None
        gone = self.model.evictions()
        sid = self.rt.memory.create_session(user, agent_id=agent_id)
        assert sid.startswith(f"session_{user}_")
        assert sid not in self.model.known_sessions
        self.model.create_session(sid, user, agent_id)
        note(f"created {sid}; evicted {gone}")

    @rule(index=st.integers(0, 9), role=st.sampled_from(ROLES), content=contents)
    def add_message(self, index: int, role: str, content: str) -> None:
        self._add(index, Message(role=role, content=content), structured=False)

    @rule(index=st.integers(0, 9), message=structured_messages)
    def add_structured_message(self, index: int, message: Message) -> None:
        self._add(index, message, structured=True)

    def _add(self, index: int, message: Message, *, structured: bool) -> None:
        assert self.rt is not None
        sid = self._sid(index)
        if sid is None:
            return
        try:
            self.model.add(sid, message)
        except cf.SessionNotFoundError:
            with pytest.raises(cf.SessionNotFoundError):
                self._add_live(sid, message, structured=structured)
            return
        self._add_live(sid, message, structured=structured)

    def _add_live(self, sid: str, message: Message, *, structured: bool) -> None:
        assert self.rt is not None
        if structured:
            self.rt.memory.add_structured_message(sid, message)
        else:
            self.rt.memory.add_message(sid, message.role, message.content)

    @rule(index=st.integers(0, 9), op=st.sampled_from(["get", "window", "context"]))
    def read_session(self, index: int, op: str) -> None:
        assert self.rt is not None
        sid = self._sid(index)
        if sid is None:
            return
        mem = self.rt.memory
        try:
            s = self.model.live_session(sid, touch=True)
        except cf.SessionNotFoundError:
            if op == "context":
                assert mem.build_context("q", sid) == "q"
            else:
                with pytest.raises(cf.SessionNotFoundError):
                    mem.get_messages(sid) if op == "get" else mem.build_prompt_messages(sid)
            return
        if op == "get":
            assert mem.get_messages(sid) == s.messages
        elif op == "window":
            assert mem.build_prompt_messages(sid) == self.model.window(s)
        else:
            assert mem.build_context("q", sid) == self.model.context("q", s)

    # Sessions are a third of the API but their time rules need longer paths: read and
    # advance get a second rule each, so that hypothesis picks them more often.
    @rule(index=st.integers(0, 9), op=st.sampled_from(["get", "window", "context"]))
    def read_session_too(self, index: int, op: str) -> None:
        self.read_session(index, op)

    @rule(seconds=st.sampled_from([1.0, 5.0, 9.0, 91.0]))
    def advance_too(self, seconds: float) -> None:
        self.advance(seconds)

    @rule(
        index=st.integers(0, 9),
        text=st.sampled_from(["hi", "what next? Tell me.", "", "   ", "x" * 30]),
        agent_id=st.none() | agent_ids,
    )
    def llm_turn(self, index: int, text: str, agent_id: str | None) -> None:
        """A whole session turn through the prompt gate, journaled on the agent's stream."""
        assert self.rt is not None
        sid = self._sid(index)
        if sid is None:
            return
        client = self.rt.llm(cf.ScriptedProvider(lambda prompt: f"said {len(prompt)}. ok"), agent_id=agent_id)
        m = self.model
        if not text.strip():
            with pytest.raises(cf.InvalidArgumentError):
                client.turn(sid, text)
            return
        session = m.sessions.get(sid)
        # a turn's messages get a fresh turn id where those the window keeps beside its
        # user message carry turn ids (memory.add_turn_message)
        kept = session.messages[max(0, len(session.messages) - MAX_HISTORY + 1) :] if session else []
        tagged = any(message.turn_id for message in kept)
        try:
            m.add(sid, Message(role="user", content=text))
        except cf.SessionNotFoundError:
            with pytest.raises(cf.SessionNotFoundError):
                client.turn(sid, text)
            return
        output = client.turn(sid, text)
        assert output.startswith("said ")
        m.live_session(sid, touch=True)  # the prompt window
        m.add(sid, Message(role="assistant", content=output))
        if tagged:  # the id is random: read it (an access, as the model's own)
            stored = self.rt.memory.get_messages(sid)[-2:]
            m.live_session(sid, touch=True)
            turn_id = stored[0].turn_id
            assert turn_id.startswith("turn-")
            assert stored[1].turn_id == turn_id
            messages = m.sessions[sid].messages
            messages[-2:] = [msgspec.structs.replace(x, turn_id=turn_id) for x in messages[-2:]]

    @rule(index=st.integers(0, 9))
    def delete_session(self, index: int) -> None:
        assert self.rt is not None
        sid = self._sid(index)
        if sid is None:
            return
        self.rt.memory.delete_session(sid)
        self.model.delete(sid)

    @rule()
    def sweep(self) -> None:
        assert self.rt is not None
        assert self.rt.memory.sweep() == self.model.sweep()

    def _latest_live(self, agent_id: str) -> str | None:
        """``get_latest_session_for_agent``; "unsupported" where it raises (no journal)."""
        assert self.rt is not None
        if not self.model.memory_only:
            return self.rt.memory.get_latest_session_for_agent(agent_id)
        with pytest.raises(cf.AgentCheckpointNotSupportedError):
            self.rt.memory.get_latest_session_for_agent(agent_id)
        return "unsupported"

    @rule(agent_id=agent_ids)
    def latest_session(self, agent_id: str) -> None:
        want = "unsupported" if self.model.memory_only else self.model.latest(agent_id)
        assert self._latest_live(agent_id) == want
        assert self.rt is not None
        assert self.rt.memory.size() == self.model.size()

    @rule(seconds=st.sampled_from([0.001, 1.0, 5.0, 9.0, 10.0, 30.0, 60.0, 91.0, 101.0]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)


@dataclass
class Frozen:
    """What the model held at one close."""

    agents: dict[str, MAgent]
    ipc: dict[str, int]
    checkpoints: dict[str, list[cf.CognitiveState]]
    sessions: dict[str, MSession]
    known_sessions: list[str]
    dead_letters: int

    @classmethod
    def of(cls, m: Model) -> Frozen:
        return cls(
            agents=copy.deepcopy(m.agents),
            ipc=dict(m.ipc),
            checkpoints={k: list(v) for k, v in m.checkpoints.items()},
            sessions=copy.deepcopy(dict(m.sessions)),
            known_sessions=list(m.known_sessions),
            dead_letters=m.dead_letters,
        )


def _check_replay_at(journal: Journal, m: Frozen, at: int | None) -> None:
    where = "the end" if at is None else f"seq {at}"
    for agent_id in POOL:
        view = agent_view(journal, agent_id, at)  # type: ignore[arg-type]
        if agent_id not in m.agents:
            assert view is None, (where, agent_id, view)
            continue
        a = m.agents[agent_id]
        assert view is not None, (where, agent_id)
        got = {k: view[k] for k in ("lifecycle", "task_id", "parent", "behavior", "task_shared", "private")}
        want = {
            "lifecycle": a.lifecycle,
            "task_id": a.task_id,
            "parent": a.parent,
            "behavior": a.behavior,
            "task_shared": a.task,
            "private": a.private,
        }
        assert got == want, _diff(f"replay of {agent_id} at {where}", got, want)
        assert _canon(got) == _canon(want), _diff(
            f"replay of {agent_id} at {where} (types, order)", got, want
        )
        assert view["cognitive"] == msgspec.to_builtins(a.cognitive), (where, agent_id)
        assert view["ipc"]["messages"] == m.ipc.get(agent_id, 0), (where, agent_id, view["ipc"])
    for agent_id in POOL:
        taken = [
            normed(r.event.state)
            for r in journal.read(stream="agent/" + agent_id, until=at)
            if isinstance(r.event, CheckpointTaken)
        ]
        assert taken == m.checkpoints.get(agent_id, []), (where, agent_id)
    for sid in m.known_sessions:
        view = session_view(journal, sid, at)  # type: ignore[arg-type]
        if sid not in m.sessions:
            assert view is None, (where, sid, view)
            continue
        assert view is not None, (where, sid)
        want_messages = msgspec.to_builtins(m.sessions[sid].messages)
        assert view["messages"] == want_messages, _diff(
            f"replay of {sid} at {where}", view["messages"], want_messages
        )
        assert view["accessed_at"] == m.sessions[sid].touched, (where, sid)
    letters = sum(1 for r in journal.read(stream="bus", until=at) if isinstance(r.event, IpcDeadLettered))
    assert letters == m.dead_letters, (where, letters, m.dead_letters)


def _run_plan(rt: cf.Runtime, h: cf.Agent, plan: list[tuple[Any, ...]], got: list[cf.CognitiveState]) -> None:
    """One burst thread: its agent's changes, in order."""
    for op in plan:
        if op[0] == "private":
            h.set_private(op[1], op[2])
        elif op[0] == "cog":
            h.set_cognitive_state(op[1])
        elif op[0] == "checkpoint":
            got.append(h.checkpoint_cognitive())
        else:
            rt.bus.send("ext", h.id, op[1], op[2])


def _apply_plan(m: Model, agent_id: str, plan: list[tuple[Any, ...]], got: list[cf.CognitiveState]) -> None:
    """What one burst thread's plan does to the model; its checkpoints are checked on the way."""
    agent = m.agents[agent_id]
    for op in plan:
        if op[0] == "private":
            agent.private[op[1]] = norm(op[2])
        elif op[0] == "cog":
            agent.cognitive = upgraded(op[1])
        elif op[0] == "checkpoint":
            m.checkpoints[agent_id].append(normed(agent.cognitive))
            assert got.pop(0) == agent.cognitive
        else:
            m.deliver("ext", agent_id, op[1], op[2], request=False)


_canon_encoder = msgspec.msgpack.Encoder()


def _canon(value: Any) -> bytes:
    """Type- and order-exact form of an observation (a ContextView's mappings as dicts)."""
    return _canon_encoder.encode(value)


def _diff(what: str, live: Any, model: Any) -> str:
    if isinstance(live, dict) and isinstance(model, dict):
        keys = sorted(set(live) | set(model), key=str)
        lines = [f"{what}: live != model"]
        lines.extend(
            f"  [{k!r}]\n    live : {live.get(k)!r}\n    model: {model.get(k)!r}"
            for k in keys
            if live.get(k) != model.get(k)
        )
        return "\n".join(lines)
    return f"{what}:\n  live : {live!r}\n  model: {model!r}"


RuntimeModel.TestCase.settings = settings(
    max_examples=int(os.environ.get("MODEL_EXAMPLES", "30")),
    stateful_step_count=int(os.environ.get("MODEL_STEPS", "50")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
test_runtime_against_model = RuntimeModel.TestCase


class MemoryOnlyModel(RuntimeModel):
    """The same operations on a runtime without a journal (``Runtime.open()``).

    Nothing to reopen or audit; what differs is modelled: a killed id is forgotten, so a
    new spawn of it comes last in ``agents()`` (README), and
    ``get_latest_session_for_agent`` raises ``AgentCheckpointNotSupportedError`` (the
    original's in-memory backend). Durability and snapshot settings change nothing here.
    """

    # not rules here: a runtime without a journal has nothing to reopen
    reopen = None  # type: ignore[assignment]
    send_and_close = None  # type: ignore[assignment]

    def _open(self, verify: str = "full") -> None:  # noqa: ARG002 - nothing to verify
        note("open without a journal")
        self.model.memory_only = True
        self.rt = cf.Runtime.open(
            config=make_config(self.durability, self.snapshot_interval), clock=self.clock, behaviors=BEHAVIORS
        )
        self.handles = {}
        self.stale = []

    def _close_and_audit(self, *, flush: bool = True) -> None:  # noqa: ARG002 - no journal
        assert self.rt is not None
        self.rt.close()


MemoryOnlyModel.TestCase.settings = RuntimeModel.TestCase.settings
test_memory_only_runtime_against_model = MemoryOnlyModel.TestCase


class RuntimeModelLong(RuntimeModel):
    """The journaled model with a wide search (``pytest -m slow``)."""


class MemoryOnlyModelLong(MemoryOnlyModel):
    """The memory-only model with a wide search (``pytest -m slow``)."""


_LONG = settings(
    RuntimeModel.TestCase.settings, max_examples=int(os.environ.get("MODEL_SLOW_EXAMPLES", "300"))
)
RuntimeModelLong.TestCase.settings = _LONG
MemoryOnlyModelLong.TestCase.settings = _LONG
test_runtime_against_model_long = pytest.mark.slow(RuntimeModelLong.TestCase)
test_memory_only_runtime_against_model_long = pytest.mark.slow(MemoryOnlyModelLong.TestCase)

"""kill -9 of a runtime in batch durability keeps what was flushed, and a consistent prefix past it.

The contract (README "Embedding the runtime", ``JournalConfig.durability``): with
``durability="batch"`` a change applies at once and its call returns once it is handed
to the journal writer; ``Runtime.flush()`` returns once everything handed over is
durable; ``kill`` and ``publish_task_context`` return once their own event is durable.
After a kill -9 at any moment, then:

- the journal verifies (``cogfabric verify``) and ``Runtime.open`` recovers it;
- everything flushed before the kill is recovered: agents (private values, task
  contexts, cognitive states, lifecycles, subscriptions) and sessions (messages);
- past the last flush, what is recovered is a prefix of what the child did: each
  agent and each session is in the state some prefix of its own changes makes (never
  a value it was not given, nor an older one than the flush left it with, nor a spawn
  or a session creation half made), and one cut of the child's calls fits them all.

The child prints each change as a JSON line *before* it makes it (so the parent knows
every change that may be in the journal), and a line after each flush (and after each
kill or publication, durable on return). The parent kills it at points chosen from
those lines: right after a flush, some changes after one, or as a given kind of call
(a spawn, a request, a send, a publication, a flush...) begins.

What this cannot prove: the page cache survives a process crash, so it says nothing
about power loss (README "Guarantees").
"""

from __future__ import annotations

import collections
import copy
import json
import os
import random
import select
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import Runtime
from cogfabric.store import Journal

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

_CHILD = textwrap.dedent(
    """
    import json, random, sys
    import cogfabric as cf

    class Setter:
        def on_message(self, ctx, message):
            ctx.set_private(message.payload["key"], message.payload["value"])
            return message.payload["value"]

    path, run, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed * 1000 + run)
    out = sys.stdout

    def say(**line):
        out.write(json.dumps(line, sort_keys=True) + "\\n")
        out.flush()

    BASE = ["a0", "a1", "a2", "a3"]
    TOPICS = ["t0", "t1", "t2"]
    KEYS = ["k0", "k1", "k2", "k3", "k4"]
    config = cf.Config(journal=cf.JournalConfig(durability="batch", snapshot_interval=16))
    with cf.Runtime.open(path, config=config, behaviors={"setter": Setter}) as rt:
        life = {a: rt.agent(a).lifecycle.value for a in rt.agents()}
        task_of = {a: rt.agent(a).task_id for a in rt.agents()}
        topics = {a: set() for a in life}
        for t in TOPICS:
            for a in rt.bus.subscribers(t):
                topics[a].add(t)
        sessions = {rt.memory.get_session(s).user_id: s for s in rt.memory.sessions()}
        sent = set()  # agents sent a message since the last flush: no lifecycle change for them
        n = 0

        def intent(op, **args):
            global n
            say(n=n, op=op, **args)
            n += 1
            return f"{run}.{n - 1}"

        def spawn(specs):
            v = intent("spawn", specs=specs)
            for s in specs:
                s["task_context"] = {"born": v}
            rt.spawn_many(specs)
            for s in specs:
                life[s["agent_id"]] = "IDLE"
                task_of[s["agent_id"]] = s["task_id"]
                topics[s["agent_id"]] = set()

        if "a0" not in life:
            spawn([
                {"agent_id": a, "task_id": "T", "capabilities": ["base"], "behavior": "setter"}
                for a in BASE
            ])
        user = f"u{run}"
        intent("session", user=user, agent="a0")
        sessions[user] = rt.memory.create_session(user, agent_id="a0")
        until_flush = rng.randint(6, 20)
        WEIGHTS = {
            "private": 20, "request": 10, "send": 10, "message": 15, "task": 5, "cog": 5,
            "sub": 6, "unsub": 3, "suspend": 3, "resume": 4, "spawn": 4, "session": 2,
            "publish": 2, "retire": 1, "kill": 2,
        }
        kinds, weights = list(WEIGHTS), list(WEIGHTS.values())
        while n < 3000:
            if until_flush == 0:
                say(flushing=n)
                rt.flush(timeout=20)
                sent.clear()
                say(flushed=n)
                until_flush = rng.randint(6, 20)
                continue
            until_flush -= 1
            kind = rng.choices(kinds, weights)[0]
            alive = sorted(life)
            idle = [a for a in alive if life[a] == "IDLE"]
            calm = [a for a in idle if a not in sent]
            spawned = [a for a in alive if a not in BASE and a not in sent]
            if kind in ("private", "task", "cog", "sub", "unsub"):
                agent = rng.choice(alive)
                if kind == "private":
                    key = rng.choice(KEYS)
                    v = intent("private", agent=agent, key=key)
                    rt.agent(agent).set_private(key, v)
                elif kind == "task":
                    v = intent("task", agent=agent)
                    rt.agent(agent).set_task_context({"step": v})
                elif kind == "cog":
                    v = intent("cog", agent=agent)
                    rt.agent(agent).set_cognitive_state(cf.CognitiveState(decision=v))
                elif kind == "sub":
                    t = rng.choice(TOPICS)
                    intent("sub", agent=agent, topic=t)
                    rt.bus.subscribe(agent, t)
                    topics[agent].add(t)
                elif topics[agent]:
                    t = rng.choice(sorted(topics[agent]))
                    intent("unsub", agent=agent, topic=t)
                    rt.bus.unsubscribe(agent, t)
                    topics[agent].discard(t)
            elif kind in ("request", "send") and idle:
                agent, key = rng.choice(idle), rng.choice(KEYS)
                v = intent(kind, agent=agent, key=key)
                if kind == "request":
                    reply = rt.bus.request("driver", agent, "set", {"key": key, "value": v}, timeout=20)
                    assert reply.payload == v, reply
                else:
                    rt.bus.send("driver", agent, "set", {"key": key, "value": v})
                    sent.add(agent)
            elif kind == "message":
                user = rng.choice(sorted(sessions))
                v = intent("message", user=user)
                rt.memory.add_message(sessions[user], rng.choice(["user", "assistant"]), v)
            elif kind == "suspend" and len(calm) > 1:
                agent = rng.choice(calm)
                intent("suspend", agent=agent)
                rt.suspend(agent)
                life[agent] = "SUSPENDED"
            elif kind == "resume" and "SUSPENDED" in life.values():
                agent = rng.choice([a for a in alive if life[a] == "SUSPENDED"])
                intent("resume", agent=agent)
                rt.resume(agent)
                life[agent] = "IDLE"
            elif kind == "spawn":
                specs = [
                    {
                        "agent_id": f"s{run}-{n}-{i}",
                        "task_id": rng.choice(["T", "U"]),
                        "parent": rng.choice(BASE),
                        "capabilities": ["made", f"c{i}"],
                        "behavior": "setter",
                    }
                    for i in range(rng.randint(1, 3))
                ]
                spawn(specs)
            elif kind == "session":
                user, agent = f"u{run}-{n}", rng.choice(alive)
                intent("session", user=user, agent=agent)
                sessions[user] = rt.memory.create_session(user, agent_id=agent)
            elif kind == "publish":
                task = rng.choice(["T", "U"])
                at = n
                v = intent("publish", task=task)
                targets = rt.publish_task_context(task, {"pub": v})
                assert sorted(targets) == sorted(a for a in alive if task_of[a] == task), targets
                say(durable=at)
            elif kind == "retire" and [a for a in spawned if life[a] == "IDLE"]:
                agent = rng.choice([a for a in spawned if life[a] == "IDLE"])
                intent("retire", agent=agent)
                rt.retire(agent)
                life[agent] = "RETIRED"
            elif kind == "kill" and spawned:
                agent = rng.choice(spawned)
                at = n
                intent("kill", agent=agent)
                rt.kill(agent)
                del life[agent], task_of[agent], topics[agent]
                say(durable=at)
        say(idle=n)
        sys.stdin.read()  # the parent kills it before it gets here; if not, it waits for that
    """
)

_SEED = ("system", "New session started")
_TOPICS = ("t0", "t1", "t2")

State = dict[str, Any] | None


@dataclass
class _Effect:
    n: int
    """The index of the child's call that made it."""
    sync: bool
    """Handed over before the call returned (a send's effect comes later, from the recipient)."""
    apply: Callable[[State], State]


@dataclass
class _Model:
    """What the journal held at the last check, and every change the child announced since."""

    base: dict[str, State] = field(default_factory=dict)
    effects: dict[str, list[_Effect]] = field(default_factory=dict)
    now: dict[str, State] = field(default_factory=dict)
    """Every announced change applied: the child's own view (whom a publication reaches)."""

    def add(self, n: int, key: str, apply: Callable[[State], State], *, sync: bool = True) -> None:
        self.effects.setdefault(key, []).append(_Effect(n, sync, apply))
        self.now[key] = apply(self.now.get(key, self.base.get(key)))

    def announce(self, line: dict[str, Any]) -> None:  # noqa: PLR0912 - one branch per kind of call
        n, op = line["n"], line["op"]
        value = f"{line['run']}.{n}"
        agent = f"agent:{line.get('agent')}"
        if op == "spawn":
            for spec in line["specs"]:
                fresh = {
                    "task_id": spec["task_id"],
                    "parent": spec.get("parent"),
                    "caps": spec["capabilities"],
                    "lifecycle": "IDLE",
                    "private": {},
                    "task": {"born": value},
                    "cog": None,
                    "topics": [],
                }
                self.add(n, f"agent:{spec['agent_id']}", _made(fresh))
        elif op in ("private", "request", "send"):
            self.add(n, agent, _changed("private", line["key"], value), sync=op != "send")
        elif op == "task":
            self.add(n, agent, _set("task", {"step": value}))
        elif op == "cog":
            self.add(n, agent, _set("cog", value))
        elif op in ("sub", "unsub"):
            self.add(n, agent, _topic(line["topic"], subscribe=op == "sub"))
        elif op in ("suspend", "resume", "retire"):
            lifecycle = {"suspend": "SUSPENDED", "resume": "IDLE", "retire": "RETIRED"}[op]
            self.add(n, agent, _set("lifecycle", lifecycle))
        elif op == "kill":
            self.add(n, agent, lambda _s: None)
        elif op == "publish":
            for key, state in sorted(self.now.items()):
                if key.startswith("agent:") and state is not None and state["task_id"] == line["task"]:
                    self.add(n, key, _set("task", {"pub": value}))
        elif op == "session":
            fresh = {"agent": line["agent"], "messages": [list(_SEED)]}
            self.add(n, f"session:{line['user']}", _made(fresh))
        elif op == "message":
            self.add(n, f"session:{line['user']}", _message(value))
        else:
            pytest.fail(f"unknown call {line}")

    def check(
        self, recovered: dict[str, State], flushed: int, durable: set[int], calls: int
    ) -> tuple[int, int]:
        """Assert the contract of what was recovered, then rebase on it; the first and last cut that fit."""
        least = max([flushed, *(d + 1 for d in durable)])
        fits: dict[str, list[tuple[int, int]]] = {}
        for key in sorted(set(self.base) | set(self.effects) | set(recovered)):
            got = recovered.get(key)
            if key not in self.base and key not in self.effects:
                raise AssertionError(f"{key} recovered, but the child never made it: {got}")
            effects = self.effects.get(key, [])
            states = [self.base.get(key)]
            for effect in effects:
                states.append(effect.apply(copy.deepcopy(states[-1])))
            prefixes = [k for k, state in enumerate(states) if state == got]
            history = [(e.n, s) for e, s in zip(effects, states[1:], strict=True)]
            assert prefixes, (
                f"{key}: recovered {got}, which no prefix of its changes makes; flushed up to call "
                f"{flushed}; its changes (call: state after) {history}, before them {states[0]}"
            )
            intervals = []
            for k in prefixes:
                kept, lost = effects[:k], effects[k:]
                if any(e.n < flushed or e.n in durable for e in lost):
                    continue  # this prefix would lose a flushed (or durable) change
                low = max([least, *(e.n + 1 for e in kept)])
                high = min([calls, *(e.n for e in lost if e.sync)])
                if low <= high:
                    intervals.append((low, high))
            assert intervals, (
                f"{key}: recovered {got}, which loses a change flushed (or durable) before the kill; "
                f"flushed up to call {flushed}, durable {sorted(durable)}; its changes "
                f"{history}, before them {states[0]}"
            )
            fits[key] = intervals
        cuts = [
            c
            for c in range(least, calls + 1)
            if all(any(lo <= c <= hi for lo, hi in v) for v in fits.values())
        ]
        assert cuts, f"no single cut of the child's calls fits every agent and session: {fits}"
        self.base = {k: v for k, v in recovered.items() if v is not None}
        self.effects = {}
        self.now = dict(self.base)
        return cuts[0], cuts[-1]


def _made(fresh: dict[str, Any]) -> Callable[[State], State]:
    def apply(_state: State) -> State:
        return copy.deepcopy(fresh)

    return apply


def _set(name: str, value: object) -> Callable[[State], State]:
    def apply(state: State) -> State:
        assert state is not None
        return {**state, name: copy.deepcopy(value)}

    return apply


def _changed(name: str, key: str, value: object) -> Callable[[State], State]:
    def apply(state: State) -> State:
        assert state is not None
        return {**state, name: {**state[name], key: value}}

    return apply


def _topic(topic: str, *, subscribe: bool) -> Callable[[State], State]:
    def apply(state: State) -> State:
        assert state is not None
        topics = set(state["topics"]) | {topic} if subscribe else set(state["topics"]) - {topic}
        return {**state, "topics": sorted(topics)}

    return apply


def _message(content: str) -> Callable[[State], State]:
    def apply(state: State) -> State:
        assert state is not None
        return {**state, "messages": [*state["messages"], ["?", content]]}

    return apply


def _recovered(path: Path) -> dict[str, State]:
    """Every live agent and session of the journal at ``path``, as the model writes them."""
    found: dict[str, State] = {}
    with Runtime.open(path) as rt:
        topics: dict[str, list[str]] = {}
        for topic in _TOPICS:
            for agent_id in rt.bus.subscribers(topic):
                topics.setdefault(agent_id, []).append(topic)
        for agent_id in rt.agents():
            handle = rt.agent(agent_id)
            view = handle.context_view()
            found[f"agent:{agent_id}"] = {
                "task_id": handle.task_id,
                "parent": handle.parent,
                "caps": list(handle.capabilities),
                "lifecycle": handle.lifecycle.value,
                "private": dict(view.private),
                "task": dict(view.task_shared),
                "cog": handle.cognitive_state().decision,
                "topics": sorted(topics.get(agent_id, [])),
            }
        for session_id in rt.memory.sessions():
            data = rt.memory.get_session(session_id)
            messages = [[m.role, m.content] for m in data.messages]
            # the model does not know the role the child drew for a message: only its content
            found[f"session:{data.user_id}"] = {
                "agent": data.agent_id,
                "messages": messages[:1] + [["?", content] for _, content in messages[1:]],
            }
    return found


@dataclass
class _Plan:
    """When to kill: after ``flushes`` flush lines, ``calls`` calls later, or as a ``kind`` of call begins."""

    flushes: int
    calls: int = 0
    kind: str | None = None

    def __str__(self) -> str:
        if self.kind is not None:
            return f"after flush {self.flushes}, at the next {self.kind}"
        return (
            f"after flush {self.flushes}, {self.calls} calls later"
            if self.calls
            else f"after flush {self.flushes}"
        )


def _plans(seed: int, runs: int) -> list[_Plan]:
    """Kill points for ``runs`` runs, by their kinds of kill point in turn.

    A quarter right after a flush, a quarter some calls after one, half as a kind of
    call begins (each kind in turn, from one the seed picks).
    """
    rng = random.Random(seed)
    kinds = ["spawn", "request", "send", "publish", "session", "kill", "message", "flush"]
    plans = []
    for run in range(runs):
        flushes = rng.randint(1, 4)
        style = run % 4
        if style == 0:
            plans.append(_Plan(flushes))
        elif style == 1:
            plans.append(_Plan(flushes, calls=rng.randint(1, 12)))
        else:
            turn = seed + run // 4 * 2 + style - 2
            plans.append(_Plan(flushes, kind=kinds[turn % len(kinds)]))
    return plans


class _Child:
    """The child's output, read line by line without blocking past a deadline."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        self.process = process
        self.fd = process.stdout.fileno()
        self.buffer = b""
        self.pending: collections.deque[bytes] = collections.deque()
        self.eof = False

    def lines(self, deadline: float) -> Iterator[dict[str, Any]]:
        """Each complete line until EOF or ``deadline`` (a line not taken stays for the next call)."""
        while True:
            while self.pending:
                yield json.loads(self.pending.popleft())
            if self.eof or (remaining := deadline - time.monotonic()) <= 0:
                return
            ready, _, _ = select.select([self.fd], [], [], remaining)
            if not ready:
                return
            chunk = os.read(self.fd, 65536)
            if not chunk:
                self.eof = True  # a line cut short by the kill is no line
            self.buffer += chunk
            *complete, self.buffer = self.buffer.split(b"\n")
            self.pending.extend(complete)


def _should_kill(plan: _Plan, line: dict[str, Any], state: dict[str, Any]) -> bool:
    if "flushed" in line:
        state["flushes"] += 1
        state["flushed_at"] = line["flushed"]
        return state["flushes"] == plan.flushes and not plan.calls and plan.kind is None
    if state["flushes"] < plan.flushes:
        return False
    if "flushing" in line:
        return plan.kind == "flush"  # as the next flush begins
    if "op" not in line:
        return False
    if plan.kind is not None:
        return bool(line["op"] == plan.kind)
    return bool(line["n"] >= state["flushed_at"] + plan.calls)


def _run_once(path: Path, run: int, seed: int, plan: _Plan, errors: Path) -> list[dict[str, Any]]:
    """Start a child, kill it -9 as ``plan`` says, and return every line it printed."""
    got: list[dict[str, Any]] = []
    with errors.open("wb") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(path), str(run), str(seed)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
        reader = _Child(child)
        try:
            progress = {"flushes": 0, "flushed_at": 0}
            deadline = time.monotonic() + 60
            killed = False
            for line in reader.lines(deadline):
                got.append(line)
                if _should_kill(plan, line, progress):
                    child.send_signal(signal.SIGKILL)
                    killed = True
                    break
            assert killed, (
                f"run {run}: the child never reached the kill point ({plan}; its exit code "
                f"{child.poll()}); its last lines {got[-3:]}; "
                f"stderr:\n{errors.read_text(encoding='utf-8')[-3000:]}"
            )
        finally:
            child.kill()
            child.wait(timeout=30)
            got.extend(reader.lines(time.monotonic() + 10))  # what it printed before it died
            assert child.stdout is not None
            assert child.stdin is not None
            child.stdout.close()
            child.stdin.close()
    assert child.returncode == -signal.SIGKILL, (child.returncode, errors.read_text(encoding="utf-8")[-3000:])
    assert reader.eof, "the child's output did not end after its kill"
    return got


def _crash_loop(tmp_path: Path, seed: int, runs: int) -> list[str]:
    path = tmp_path / "journal"
    model = _Model()
    report = []
    for run, plan in enumerate(_plans(seed, runs)):
        lines = _run_once(path, run, seed, plan, tmp_path / f"stderr-{run}.txt")
        flushed, calls, durable = 0, 0, set[int]()
        for line in lines:
            if "op" in line:
                assert line["n"] == calls, line
                model.announce({**line, "run": run})
                calls += 1
            elif "flushed" in line:
                flushed = line["flushed"]
            elif "durable" in line:
                durable.add(line["durable"])
        verify = subprocess.run(
            [sys.executable, "-m", "cogfabric", "verify", str(path)],
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=60,
            check=False,
        )
        assert verify.returncode == 0, f"run {run} ({plan}): verify failed\n{verify.stdout}{verify.stderr}"
        with Journal.open(path) as journal:
            assert journal.verify(decode=True).ok
        first, last = model.check(_recovered(path), flushed, durable, calls)
        cut = f"{first}" if first == last else f"{first}-{last}"
        report.append(
            f"run {run} ({plan}): calls 0-{calls - 1} begun, flushed before {flushed}, cut at {cut}"
        )
    return report


# One seed in the default suite; ``pytest -m slow`` runs two more (the suite's time on 2 cores).
@pytest.mark.parametrize(
    "seed", [3, pytest.param(8, marks=pytest.mark.slow), pytest.param(13, marks=pytest.mark.slow)]
)
def test_kill_nine_in_batch_durability_keeps_flushed_changes_and_a_consistent_prefix(
    tmp_path: Path, seed: int
) -> None:
    """Eight kills -9 on one journal: after each, verify, recover, and check the batch contract."""
    report = _crash_loop(tmp_path, seed=seed, runs=8)
    print("\n".join(report))  # noqa: T201 - the report


def _announced(*lines: dict[str, Any]) -> _Model:
    model = _Model()
    for n, line in enumerate(lines):
        model.announce({"n": n, "run": 0, **line})
    return model


def test_the_check_refuses_what_the_contract_forbids() -> None:
    """The model's check fails on a lost flushed change, a value never written, a half spawn, or no cut."""
    spawn: dict[str, Any] = {
        "op": "spawn",
        "specs": [{"agent_id": a, "task_id": "T", "capabilities": ["c"]} for a in ("x", "y")],
    }
    calls: list[dict[str, Any]] = [
        spawn,
        {"op": "private", "agent": "x", "key": "k"},
        {"op": "private", "agent": "y", "key": "k"},
    ]
    fresh: dict[str, Any] = {
        "task_id": "T",
        "parent": None,
        "caps": ["c"],
        "lifecycle": "IDLE",
        "private": {},
        "task": {"born": "0.0"},
        "cog": None,
        "topics": [],
    }
    x1 = {**fresh, "private": {"k": "0.1"}}
    y2 = {**fresh, "private": {"k": "0.2"}}
    # all, or a prefix of it, past a flush after the spawn
    assert _announced(*calls).check({"agent:x": x1, "agent:y": y2}, 1, set(), 3) == (3, 3)
    assert _announced(*calls).check({"agent:x": x1, "agent:y": fresh}, 1, set(), 3) == (2, 2)
    assert _announced(*calls).check({"agent:x": fresh, "agent:y": fresh}, 1, set(), 3) == (1, 1)
    refused: list[tuple[dict[str, State], int, str]] = [
        ({"agent:x": fresh, "agent:y": fresh}, 2, "loses a change flushed"),  # the flush covered call 1
        ({"agent:x": {**fresh, "private": {"k": "0.9"}}, "agent:y": y2}, 0, "no prefix"),  # never written
        ({"agent:x": x1}, 0, "no single cut"),  # x's spawn kept, y's lost: one spawn_many, half made
        ({"agent:x": fresh, "agent:y": y2}, 1, "no single cut"),  # call 2 kept, call 1 lost
        ({"agent:z": fresh, "agent:x": x1, "agent:y": y2}, 0, "never made"),
    ]
    for recovered, flushed, why in refused:
        with pytest.raises(AssertionError, match=why):
            _announced(*calls).check(recovered, flushed, set(), 3)

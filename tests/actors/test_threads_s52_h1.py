"""Many host threads call the public API while two more close the runtime under them.

The invariant an embedding host relies on: whatever call returned before ``close()``
(a state change, a spawn, a session message) is in the journal after a reopen, in
either durability (sync: it was durable when it returned; batch: close() commits
everything handed over); every caller that close() overtakes hears
``RuntimeClosedError``, nothing else; both close() calls return; no thread is left.
(Helper h1 of session 52 tortured the runtime this way, with lifecycle calls, IPC,
sweeps and flushes besides, and found it held; this is the bounded guard of it.)
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest

from cogfabric import CognitiveState, FakeClock, Runtime, RuntimeClosedError
from cogfabric.actors import Config, JournalConfig
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric.actors import AgentContext
    from cogfabric.events import IpcMessage

_WORKERS = 8
_AGENTS = ("a0", "a1", "a2", "a3")
_BEFORE_CLOSE = 10  # acknowledged calls each worker makes before the close begins
_ROUNDS = 4
_CAP = 3000  # a worker stops here if the close never overtakes it (it does, long before)


class _Keep:
    """A behavior that records what it was sent, so sends keep the agents' actors busy."""

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:
        ctx.set_private("last", message.payload)


class _Host:
    """The host's threads in one round: what each call that returned acknowledged."""

    def __init__(self, rt: Runtime, r: int) -> None:
        self.rt, self.r = rt, r
        self.sessions = [rt.memory.create_session(f"u{w}", agent_id=_AGENTS[w % 4]) for w in range(_WORKERS)]
        self.private: dict[tuple[str, str], int] = {}  # (agent, key) -> last value acknowledged
        self.spawns: list[tuple[str, str]] = []  # (child, parent)
        self.messages: dict[str, list[str]] = {s: [] for s in self.sessions}
        self.errors: list[BaseException] = []
        self.ready = threading.Barrier(_WORKERS + 1, timeout=30)

    def call(self, w: int, n: int) -> None:
        rt, agent_id = self.rt, _AGENTS[n % len(_AGENTS)]
        step = n % 6
        if step == 0:
            child = f"r{self.r}-w{w}-c{n}"
            rt.spawn(child, task_id="t", parent=agent_id)
            self.spawns.append((child, agent_id))
        elif step == 1:
            rt.memory.add_message(self.sessions[w], "user", f"m{n}")
            self.messages[self.sessions[w]].append(f"m{n}")
        elif step == 2:
            rt.agent(agent_id).set_cognitive_state(CognitiveState(decision=f"{w}-{n}"))
        elif step == 3:
            rt.bus.send(f"w{w}", agent_id, "note", n)
        else:
            rt.agent(agent_id).set_private(f"r{self.r}-w{w}", n)
            self.private[agent_id, f"r{self.r}-w{w}"] = n

    def work(self, w: int) -> None:
        n = 0
        try:
            while n < _CAP:
                n += 1
                self.call(w, n)
                if n == _BEFORE_CLOSE:
                    self.ready.wait()
        except RuntimeClosedError:
            if n <= _BEFORE_CLOSE:
                self.ready.abort()
        except BaseException as exc:  # noqa: BLE001 - every other error fails the test
            self.errors.append(exc)
            self.ready.abort()

    def check(self, back: Runtime) -> None:
        for (agent_id, key), n in self.private.items():
            got = back.agent(agent_id).private(key)
            assert got is not None, (agent_id, key, n)
            assert got >= n, (agent_id, key, n, got)  # a later call may have landed too
        live = set(back.agents())
        for child, parent in self.spawns:
            assert child in live, child
            assert back.agent(child).parent == parent
            assert child in back.children(parent)
        for session, contents in self.messages.items():
            stored = [m.content for m in back.memory.get_messages(session) if m.role == "user"]
            assert stored[: len(contents)] == contents, session


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_what_returned_before_a_racing_close_is_there_after_reopen(tmp_path: Path, durability: str) -> None:
    config = Config(journal=JournalConfig(durability=durability, snapshot_interval=5))  # type: ignore[arg-type]
    for r in range(_ROUNDS):  # each round reopens what the one before closed under its callers
        _race_a_close(tmp_path / "j", config, r)


def _race_a_close(path: Path, config: Config, r: int) -> None:
    before = set(threading.enumerate())
    rt = Runtime.open(path, config=config, clock=FakeClock(), behaviors={"keep": _Keep})
    for agent_id in _AGENTS:
        if agent_id not in rt.agents():
            rt.spawn(agent_id, task_id="t", behavior="keep")
    host = _Host(rt, r)
    workers = [threading.Thread(target=host.work, args=(w,), name=f"host-{w}") for w in range(_WORKERS)]
    for t in workers:
        t.start()
    host.ready.wait()  # every worker has had calls acknowledged, and goes on calling
    close_errors: list[BaseException] = []

    def close() -> None:
        try:
            rt.close()
        except BaseException as exc:  # noqa: BLE001 - reported below
            close_errors.append(exc)

    closers = [threading.Thread(target=close, name=f"closer-{i}") for i in range(2)]
    for t in closers:
        t.start()
    for t in closers + workers:
        t.join(timeout=60)
    assert not [t.name for t in closers + workers if t.is_alive()], "a close() or a caller hangs"
    assert close_errors == []
    assert host.errors == []
    rt.close()  # a third close, once closed, returns too
    assert [t.name for t in threading.enumerate() if t not in before and t.is_alive()] == []
    assert host.spawns, "no spawn was acknowledged before the close"

    with Journal.open(path, readonly=True) as journal:
        report = journal.verify(decode=True)
        assert report.ok, report
    with Runtime.open(path, config=config, clock=FakeClock(), behaviors={"keep": _Keep}) as back:
        host.check(back)

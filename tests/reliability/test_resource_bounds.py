"""What a long-running embedder's process holds stays bounded (from a helper's hunt of leaks).

Opening and closing a runtime many times, and spawns and kills, timed-out requests,
dead letters, sessions, publications and LLM calls in one runtime: the runtime's
internal maps are bounded by the live agents and sessions (or by documented caps:
a journal runtime keeps one ``_listed`` entry per id ever spawned, the dead letters
their capacity), and ``close()`` leaves no thread, file descriptor, registry entry or
writer lock behind. The long hunt ran 200 open/close cycles and 400 rounds; these are
shorter.
"""

from __future__ import annotations

import atexit
import gc
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import pykka
import pytest

import cogfabric as cf
from cogfabric.actors import Config, FakeClock, JournalConfig, MemoryConfig, RuntimeConfig, _runtime
from cogfabric.actors._bus import DEAD_LETTER_CAPACITY
from cogfabric.actors._llm import ScriptedProvider
from cogfabric.store import _lmdb


def _fds() -> int:
    return len(list(Path("/proc/self/fd").iterdir()))


def _process_state() -> tuple[Any, ...]:
    gc.collect()
    return (
        threading.active_count(),
        _fds(),
        len(_runtime._OPEN),
        len(_runtime._SPAWNING),
        len(_runtime._GIVEN_UP),
        len(_lmdb._HELD),
        len(pykka.ActorRegistry.get_all()),
        atexit._ncallbacks(),
    )


# fsync: false here and below: what a process holds is the same whether the disk flushes
# each commit or the OS does (only a power cut tells them apart); the flush is most of the time.
_NO_FSYNC = Config(journal=JournalConfig(fsync=False))


@pytest.mark.parametrize("journaled", [True, False])
def test_open_close_cycles_leave_nothing_behind(tmp_path: Path, journaled: bool) -> None:
    def once(i: int) -> None:
        path = tmp_path / f"j{i}" if journaled else None  # one journal, growing, keeps buffers its size
        with cf.Runtime.open(path, config=_NO_FSYNC, behaviors={"echo": _Echo}) as rt:
            agent = rt.spawn("a", behavior="echo")
            agent.set_private("k", i)
            rt.bus.request("x", "a", "t", i, timeout=5)
            session = rt.memory.create_session("u", agent_id="a")
            rt.memory.add_message(session, "user", "hi")
            rt.flush()

    once(0)  # one-time registrations (weakref.finalize's atexit hook, imports) happen here
    before = _process_state()
    tracemalloc.start()
    try:
        for i in range(1, 21):
            once(i)
        gc.collect()
        at_20 = tracemalloc.get_traced_memory()[0]
        for i in range(21, 81):
            once(i)
        gc.collect()
        at_80 = tracemalloc.get_traced_memory()[0]
        for i in range(81, 141):
            once(i)
        gc.collect()
        at_140 = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert _process_state() == before
    # CPython's attribute cache keeps a few names per cycle up to its fixed size: noise, not
    # growth. A table of the interpreter's (interned strings) that doubles once adds one
    # block of up to 2 MB to one window, depending on what ran before in the process; a
    # leak grows in both windows.
    kept = min(at_80 - at_20, at_140 - at_80)
    assert kept < 256 * 1024, f"{kept / 60:.0f} bytes kept per open/close"


class _Echo:
    def on_message(self, ctx: cf.AgentContext, message: Any) -> Any:
        if message.topic == "defer":
            return None
        ctx.subscribe("news")
        ctx.subscribe(f"own-{ctx.agent_id}")
        return message.payload


def _maps(rt: cf.Runtime) -> dict[str, int]:
    bus, memory, writer = rt._bus, rt._memory, rt._core.writer
    out = {
        "agents": len(rt._agents),
        "unlisted_if_refused": len(rt._unlisted_if_refused),
        "late": len(rt._late),
        "pending": len(bus._pending),
        "topics": len(bus._topics),
        "orders": len(bus._orders),
        "waiting": len(bus._waiting),
        "failed_at_close": len(bus._failed_at_close),
        "sessions": len(memory._sessions),
        "agents_latest": len(memory._agents_latest),
        "overdue": len(memory._overdue.runs),
        "threads": threading.active_count(),
        "fds": _fds(),
        "actors": len(pykka.ActorRegistry.get_all()),
    }
    if writer is not None:
        out |= {
            "publishes": len(writer._publishes),
            "carried": len(writer._carried),
            "queue": len(writer._queue),
        }
    return out


@pytest.mark.parametrize("mode", ["memory", "sync", "batch"])
def test_churn_in_one_runtime_is_bounded_by_what_is_live(tmp_path: Path, mode: str) -> None:
    config = Config(
        journal=JournalConfig(
            durability="batch" if mode == "batch" else "sync", snapshot_interval=3, fsync=False
        ),
        runtime=RuntimeConfig(call_timeout=2.0),
        memory=MemoryConfig(max_sessions=10),
    )
    clock = FakeClock()
    path = None if mode == "memory" else tmp_path / "j"
    provider = ScriptedProvider(lambda _prompt: "out", keep_calls=False)
    threads = threading.active_count()
    rt = cf.Runtime.open(path, config=config, clock=clock, behaviors={"echo": _Echo}, llm_provider=provider)
    try:
        rt.spawn("hub", behavior="echo", task_id="t")

        def round_(i: int) -> None:
            a = f"a{i}"  # distinct ids: what a kill keeps of each is the documented _listed entry only
            rt.spawn(a, behavior="echo", task_id="t", parent="hub")
            rt.bus.request("hub", a, "ask", i, timeout=5)
            with pytest.raises(cf.IpcTimeoutError):
                rt.bus.request("hub", a, "defer", i, timeout=0.001)
            session = rt.memory.create_session("u", agent_id=a)
            rt.llm(agent_id=a).turn(session, "hello")
            if i % 2:
                rt.memory.delete_session(session)
            clock.advance(10)
            rt.publish_task_context("t", {"i": i})
            rt.kill(a)
            rt.bus.broadcast("hub", "news", i)
            with pytest.raises(cf.AgentNotFoundError):
                rt.bus.send("hub", a, "after-kill", i)
            if i % 25 == 0:
                rt.flush()

        for i in range(40):
            round_(i)
        rt.flush()
        first = _maps(rt)
        for i in range(40, 160):
            round_(i)
        rt.flush()
        assert _maps(rt) == first
        assert len(rt.bus.dead_letters()) <= DEAD_LETTER_CAPACITY
        assert len(rt._listed) == (1 if path is None else 161)  # documented: one per id ever spawned
    finally:
        rt.close()
    gc.collect()
    assert threading.active_count() == threads
    assert pykka.ActorRegistry.get_all() == []

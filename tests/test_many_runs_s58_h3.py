"""Thousands of short runs in one process: what each leaves behind (a helper's leak hunt).

A parameter sweep opens runtime after runtime in one notebook or worker. The hunt ran
500 to 1,500 open/close cycles (journaled and memory-only), the runtimes that fail to
open (a locked path, a damaged journal, a bad config, a clock or a file-descriptor limit
that fails at each step of the open in turn), kill storms racing ``close()``, behaviors
``close()`` gave up on, in-process audits and CLI commands. None left a thread, a file
descriptor, a writer lock, a module registry entry or growing memory behind; what it
found is a closed journal that kept its writer's cache of stream heads (a runtime kept
after ``close()``, by a handle, kept it too), the first test below. The others are
cheap guards of the paths ``tests/reliability/test_resource_bounds.py`` leaves out.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
import tracemalloc
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf
from cogfabric.actors import apply_session_event, replay_agent
from cogfabric.events import PrivateSet
from cogfabric.store import Journal, _lmdb
from tests.reliability.test_resource_bounds import _process_state

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

_QUICK: dict[str, Any] = {"journal": {"fsync": False}, "runtime": {"call_timeout": 5.0}}


def _state() -> tuple[Any, ...]:
    """The process's threads, fds, registries (``_process_state``) and the journal module's own.

    Not ``_lmdb._OPEN_JOURNALS``, which holds its journals weakly: pytest's capture of the
    logged failures keeps their tracebacks, and so the journals their frames name, alive.
    """
    return (*_process_state(), len(_lmdb._ENV_OPENS))


class _Worker:
    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> Any:
        if message.topic == "fail":
            msg = "a behavior that fails: its agent is restarted"
            raise RuntimeError(msg)
        ctx.set_private("last", message.payload)
        return message.payload


def _fill(path: Path) -> None:
    """A journal with two agents, a request, a failure and a session."""
    with cf.Runtime.open(path, behaviors={"w": _Worker}, clock=cf.FakeClock(start=1.0), config=_QUICK) as rt:
        rt.spawn("a", behavior="w")
        rt.spawn("b", behavior="w", parent="a")
        rt.bus.request("app", "a", "t", 1, timeout=5)
        with pytest.raises(cf.IpcHandlerError):
            rt.bus.request("app", "b", "fail", None, timeout=5)
        session = rt.memory.create_session("u", agent_id="a")
        rt.memory.add_message(session, "user", "hello")


def test_a_closed_journal_keeps_no_cache_of_stream_heads(tmp_path: Path) -> None:
    # A writer keeps the head of each stream it appended to (up to 65,536 of them), for
    # appends. Closed, it appends nothing more, but a runtime kept after close() (by an
    # agent handle, an llm client, the bus) holds its journal: a sweep that keeps a handle
    # of each run kept ~300 bytes a stream a run, 1.2 MB for these 4,000.
    streams = 4000
    events = [PrivateSet(at=0.0, agent=f"a{i}", key="k", value=i) for i in range(streams)]
    gc.collect()
    tracemalloc.start()
    try:
        journal = Journal.open(tmp_path / "j", sync=False)
        journal.append(events)
        journal.close()
        del events
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert journal.closed  # still referenced
    assert kept < 256 * 1024, f"a closed journal kept {kept} bytes for {streams} streams"


def test_runs_that_fail_to_open_leave_nothing_behind(
    tmp_path: Path, break_link: Callable[[Path, int], None]
) -> None:
    locked, damaged, unreadable = tmp_path / "locked", tmp_path / "damaged", tmp_path / "unreadable"
    for path in (damaged, unreadable):
        _fill(path)
    break_link(damaged, 3)  # a record's chain link: verification refuses the journal
    with Journal.open(unreadable, readonly=True) as journal:
        spawned = next(r.seq for r in journal.read(stream="agent/b"))
    _make_malformed(unreadable, spawned)  # allow_unverified cannot waive a record recovery reads

    def attempts() -> None:
        with cf.Runtime.open(locked, config=_QUICK):
            with pytest.raises(cf.JournalLockedError):
                cf.Runtime.open(locked)
            with pytest.raises(cf.JournalLockedError):
                Journal.open(locked, readonly=True)
        with pytest.raises(cf.JournalIntegrityError):
            cf.Runtime.open(damaged, behaviors={"w": _Worker})
        with pytest.raises(cf.JournalRecordError):
            cf.Runtime.open(unreadable, behaviors={"w": _Worker}, allow_unverified=True, verify="tail")
        with pytest.raises(cf.InvalidConfigError):
            cf.Runtime.open(tmp_path / "bad-config", config={"runtime": {"mailbox_size": 0}})
        with pytest.raises(cf.InvalidConfigError):
            cf.Runtime.open(tmp_path / "no-model", config={"llm": {"base_url": "http://127.0.0.1:9"}})

    attempts()  # one-time registrations (weakref.finalize's atexit hook, imports) happen here
    before = _state()
    for _ in range(15):
        attempts()
    assert _state() == before
    assert not (tmp_path / "bad-config").exists()
    assert not (tmp_path / "no-model").exists()
    with cf.Runtime.open(damaged, behaviors={"w": _Worker}, allow_unverified=True) as rt:
        assert rt.agents() == ["a", "b"]  # each refusal left the path openable


def _make_malformed(path: Path, seq: int) -> None:
    """Record ``seq``'s event bytes replaced by ones msgpack refuses (0xc1 is never used)."""
    import lmdb  # noqa: PLC0415 - the plain package, as conftest's fixtures

    env = lmdb.open(str(path), max_dbs=8)
    with env.begin(write=True, db=env.open_db(b"events")) as txn:
        key = seq.to_bytes(8, "big")
        value = bytearray(txn.get(key) or b"")
        value[10:-16] = b"\xc1" * (len(value) - 26)  # after the prefix and seq, before the chain link
        txn.put(key, bytes(value))
    env.close()


class _FailingClock:
    """A clock whose ``now()`` raises from its reading ``fail_at`` on."""

    def __init__(self, fail_at: int) -> None:
        self.fail_at, self.readings, self.at = fail_at, 0, 1000.0

    def now(self) -> float:
        self.readings += 1
        if self.readings >= self.fail_at:
            raise RuntimeError(f"the clock broke at reading {self.readings}")
        self.at += 1.0
        return self.at

    def monotonic(self) -> float:
        return time.monotonic()


def test_a_clock_that_breaks_at_each_reading_in_turn_leaves_nothing_behind(tmp_path: Path) -> None:
    # Every step of an open (verification, recovery, session expiry) and of the calls after
    # it fails in turn: each runtime is closed, or its open undone, without a trace.
    base = tmp_path / "base"
    _fill(base)
    before = _state()
    outcomes = set()
    for fail_at in range(1, 14):
        path = tmp_path / f"run{fail_at}"
        path.mkdir()
        for name in ("data.mdb", "lock.mdb"):
            (path / name).write_bytes((base / name).read_bytes())
        clock = _FailingClock(fail_at)
        try:
            with cf.Runtime.open(path, behaviors={"w": _Worker}, clock=clock, config=_QUICK) as rt:
                rt.spawn("c", behavior="w")
                rt.bus.request("app", "a", "t", fail_at, timeout=5)
                rt.memory.create_session("u")
            outcomes.add("ran")
        except (cf.ClockError, cf.IpcHandlerError) as exc:
            outcomes.add(type(exc).__name__)
        assert _state() == before, f"the clock failing at reading {fail_at}"
        with cf.Runtime.open(path, behaviors={"w": _Worker}, config=_QUICK) as rt:
            assert {"a", "b"} <= set(rt.agents())
    assert outcomes == {"ClockError", "IpcHandlerError", "ran"}  # failed at open, in a call, and not at all


def test_kill_storms_that_race_close_leave_nothing_behind() -> None:
    def storm(i: int) -> None:
        rt = cf.Runtime.open(None, behaviors={"w": _Worker}, config={"runtime": {"call_timeout": 2.0}})
        ids = [f"a{k}" for k in range(24)]
        rt.spawn_many([{"agent_id": a, "behavior": "w"} for a in ids])
        for a in ids:
            rt.bus.send("app", a, "fail" if int(a[1:]) % 3 == 0 else "t", a)

        def kill(chunk: list[str]) -> None:
            for a in chunk:
                with contextlib.suppress(cf.AgentNotFoundError, cf.RuntimeClosedError):  # close() came first
                    rt.kill(a)

        killers = [threading.Thread(target=kill, args=(ids[k::4],)) for k in range(4)]
        for thread in killers:
            thread.start()
        if i % 2:
            rt.close()  # while the kills run
        for thread in killers:
            thread.join(10)
        rt.close()

    storm(0)
    before = _state()
    for i in range(1, 9):
        storm(i)
    assert _state() == before


def test_audits_from_python_between_runs_leave_nothing_behind(tmp_path: Path) -> None:
    path = tmp_path / "j"

    def run_and_audit(i: int) -> None:
        with cf.Runtime.open(path, behaviors={"w": _Worker}, config=_QUICK) as rt:
            rt.spawn(f"x{i}", behavior="w")
            rt.bus.request("app", f"x{i}", "t", i, timeout=5)
            session = rt.memory.create_session("u", agent_id=f"x{i}")
            rt.memory.add_message(session, "user", f"round {i}")
        with Journal.open(path, readonly=True) as journal:
            assert journal.verify(decode=True).ok
            assert replay_agent(journal, f"x{i}", from_snapshot=False) is not None
            state = None
            for record in journal.read(stream="session/" + session):
                state = apply_session_event(state, record.event)
            assert state is not None
            abandoned = (journal.read(), journal.read_back(f"agent/x{i}"))  # left unfinished
            for reader in abandoned:
                next(reader)
        del abandoned

    run_and_audit(0)
    before = _state()
    for i in range(1, 11):
        run_and_audit(i)
    assert _state() == before

"""Checks that kill mutants of session 53's refusals that no test reached (helper h11).

Each test names the mutant it kills: the ``Behavior`` stub matched by its qualified name
alone; an async retriever's coroutine left unclosed; the at-fork hooks of the registry of
LMDB's opens dropped; the read-only look at a short file before its padding
opened without that lock.
"""

from __future__ import annotations

import gc
import os
import select
import threading
import warnings
from typing import TYPE_CHECKING

import lmdb
import pytest

import cogfabric as cf
from cogfabric.actors._memory import _retrieve
from cogfabric.store import Journal, JournalLockedError
from cogfabric.store._lmdb import _ENV_OPENS, _ENV_OPENS_LOCK, _short_by
from tests.test_multi_runtime_s53_h5 import _close_all, _hold_first_open, _race

if TYPE_CHECKING:
    from pathlib import Path

WAIT = 10.0


class Behavior:
    """An application's own class that happens to be named as the protocol is."""

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:  # noqa: ARG002
        return "mine"


class AsyncRetriever:
    async def retrieve(self, query: str) -> list[cf.Snippet]:  # noqa: ARG002
        return []


def test_an_application_class_named_behavior_is_not_taken_for_the_protocols_stub() -> None:
    """Mutant: the stub matched by ``__qualname__`` alone ("Behavior.on_message")."""
    with cf.Runtime.open(None, behaviors={"mine": Behavior}) as rt:
        rt.spawn("by-name", behavior="mine")
        rt.spawn("instance", behavior=Behavior())
        for agent_id in ("by-name", "instance"):
            assert rt.bus.request("x", agent_id, "t", timeout=WAIT).payload == "mine"


def test_an_async_retrievers_coroutine_is_closed_where_it_is_refused() -> None:
    """Mutant: ``_retrieve`` raises without closing the coroutine.

    Through ``build_context`` the logged record's traceback keeps the coroutine alive
    past the test (its warning then only fails the session, as an unraisable one).
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(TypeError, match="retrieve is async"):
            _retrieve(AsyncRetriever(), "q")  # type: ignore[arg-type]
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]


def _free_to_another_thread() -> bool:
    """Whether a thread other than this one can take the opens' registry lock (a re-entrant one) now."""
    took: list[bool] = []

    def probe() -> None:
        took.append(_ENV_OPENS_LOCK.acquire(timeout=1.0))
        if took[0]:
            _ENV_OPENS_LOCK.release()

    prober = threading.Thread(target=probe)
    prober.start()
    prober.join(WAIT)
    return took == [True]


def _child_said(pid: int, read_end: int) -> bytes:
    """What a forked child wrote, waited for with a timeout; the child reaped."""
    ready, _, _ = select.select([read_end], [], [], WAIT)
    said = os.read(read_end, 64) if ready else b"no answer"
    os.close(read_end)
    if not ready:  # never here: the child only writes and leaves
        os.kill(pid, 9)
    os.waitpid(pid, 0)
    return said


def _fork_and_report() -> tuple[int, int]:
    """Fork a child that writes whether its registry of opens is empty and its lock free, and leaves."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, and leave without running anything of the parent's
        try:
            state = b"empty" if not _ENV_OPENS else b"kept"
            state += b" free" if _free_to_another_thread() else b" locked"
            os.write(write_end, state)
        finally:
            os._exit(0)
    os.close(write_end)
    return pid, read_end


def test_a_fork_leaves_the_opens_free_in_parent_and_child() -> None:
    """Mutants: no ``after_in_child`` hook (the child keeps the
    parent's opens and their lock), or no ``after_in_parent``."""
    with _ENV_OPENS_LOCK:  # as an open in another thread has it: a directory being opened
        _ENV_OPENS[b"/an/open/in/progress"] = (threading.Lock(), [1])
    try:
        pid, read_end = _fork_and_report()
        free_in_parent = _free_to_another_thread()
    finally:
        with _ENV_OPENS_LOCK:
            del _ENV_OPENS[b"/an/open/in/progress"]
    assert (_child_said(pid, read_end), free_in_parent) == (b"empty free", True)


def test_a_fork_waits_for_the_opens_registry() -> None:
    """Mutant: no at-fork hooks: a child forked mid-update of the registry copies it half made.

    This thread holds the registry's lock, as an open does for a moment; another one
    forks. The fork must wait for the lock (it is not made within the bound).
    """
    forked = threading.Event()
    child: list[tuple[int, int]] = []

    def fork() -> None:
        child.append(_fork_and_report())
        forked.set()

    with _ENV_OPENS_LOCK:
        forker = threading.Thread(target=fork)
        forker.start()
        made_while_held = forked.wait(0.3)  # the bound: a fork that does not wait is made at once
    forker.join(WAIT)
    assert not forker.is_alive()
    outcome = (_child_said(*child[0]), made_while_held, _free_to_another_thread())
    assert outcome == (b"empty free", False, True)


def test_a_short_file_is_looked_at_under_the_open_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mutant: ``_refuse_before_padding``'s read-only open does not take the lock.

    A writable open of a short file and a read-only open at once: the writable open's
    look at the file raced the other open, both got the journal, and closing the look
    made py-lmdb forget both, so the writable open got it too.
    """
    path = tmp_path / "journal"
    with cf.Runtime.open(path) as rt:
        for i in range(50):  # a file past its first pages (one spawn_many's is not)
            rt.spawn(f"a{i}")
    env = lmdb.open(str(path), max_dbs=8)  # as LMDB may leave it: pages allocated and freed in one txn
    with env.begin(write=True) as txn:
        scratch = env.open_db(b"snapshots", txn=txn)
        txn.put(b"big", b"x" * 500_000, db=scratch)
        txn.delete(b"big", db=scratch)
    env.close()
    assert _short_by(path, readonly=True)[1] > 0
    _hold_first_open(monkeypatch)
    opened, raised = _race([lambda: Journal.open(path), lambda: Journal.open(path, readonly=True)])
    try:
        assert len(opened) == 1, f"{len(opened)} opens of one journal in one process"
        assert [type(exc) for exc in raised] == [JournalLockedError], raised
    finally:
        _close_all(opened)

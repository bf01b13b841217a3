"""Review of two of session 60's commits (helper h8): what their changes must keep.

A snapshot still waiting for the writer gives way to a newer one of its stream
(``JournalWriter._supersede``): the writer lets go of every snapshot it has written or
dropped, and a kill -9 right after such a drop still recovers the exact state. A reopen
gives a publication's targets one copy of its context (``SharedContexts``): each target's
layer stays its own to change. A journal's ``close()`` a Ctrl-C interrupted is finished
by the next, wherever the Ctrl-C landed (d5b2106).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf
from cogfabric.actors._writer import JournalWriter
from cogfabric.store import Journal

from .actors.test_writer import WAIT
from .test_big_values_s60_h6 import HeldJournal, change, starts_seen
from .test_interrupt_hold_s58_h1 import (  # autouse: Python's own SIGINT handler, then as found
    _sigint_as_found as _sigint_as_found,  # noqa: PLC0414
)

if TYPE_CHECKING:
    from pathlib import Path


def test_the_writer_lets_go_of_the_snapshots_it_wrote_and_of_those_it_dropped(tmp_path: Path) -> None:
    # Only a snapshot still in the queue may give way to a newer one: the writer's note of
    # it goes as the queue is taken, or it would keep a copy of each stream's last state
    # (megabytes an agent) for as long as the runtime runs, and a newer snapshot would
    # reach one the writer is committing.
    journal = Journal.open(tmp_path / "j")
    held = HeldJournal(journal)
    writer = JournalWriter(held, group_commit_max=1000, call_timeout=WAIT, backlog_max=1000)  # type: ignore[arg-type]
    dropped = bytes(bytearray(b"dropped"))  # objects of their own: their references are counted
    written = bytes(bytearray(b"written"))
    base = sys.getrefcount(dropped), sys.getrefcount(written)
    try:
        writer.submit_nowait([change("z", 0)])
        assert held.entered.wait(WAIT)  # the writer is in z0's append: what follows waits
        writer.submit_nowait([change("a", 0)])
        writer.submit_snapshot("agent/a", dropped)
        writer.submit_nowait([change("a", 1)])
        writer.submit_snapshot("agent/a", written)
        held.gate.set()
        writer.flush(WAIT)
        writer.flush(WAIT)  # a snapshot of the group's own events goes with the next commit
        writer.flush(WAIT)  # which has returned (its frame held the snapshot) once this returns
        held.snapshots.clear()
        saved = journal.load_snapshot("agent/a")
        assert saved is not None
        assert saved.data == b"written"
        assert (sys.getrefcount(dropped), sys.getrefcount(written)) == base
    finally:
        held.gate.set()
        writer.stop(WAIT)
        journal.close()


_CHILD = textwrap.dedent(
    """
    import json, os, signal, sys, threading
    import cogfabric as cf
    from cogfabric.actors import _writer

    gate, entered, drops = threading.Event(), threading.Event(), []
    gate.set()
    commit, supersede = _writer.JournalWriter._commit_group, _writer.JournalWriter._supersede

    def held_commit(self, taken):
        if not gate.is_set():
            entered.set()
            gate.wait(30)
        commit(self, taken)

    def counted(self, submission, stream):
        drops.append(stream in self._queued_snapshots)
        supersede(self, submission, stream)

    _writer.JournalWriter._commit_group = held_commit
    _writer.JournalWriter._supersede = counted
    config = cf.Config(journal=cf.JournalConfig(durability="batch", snapshot_interval=2))
    rt = cf.Runtime.open(sys.argv[1], config=config)
    agent = rt.spawn("a", task_id="t")
    rt.flush()
    entered.clear()
    gate.clear()
    agent.set_private("k", -1)
    assert entered.wait(30)  # the writer holds k=-1's commit: the snapshots below wait for it
    for i in range(12):
        agent.set_private(f"k{i % 5}", i)
    gate.set()
    rt.flush()
    print(json.dumps({"private": dict(agent.context_view().private), "drops": sum(drops)}), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_a_kill_nine_right_after_snapshots_gave_way_recovers_the_exact_state(tmp_path: Path) -> None:
    # Batch durability, a writer busy with one commit while the agent changes: each
    # snapshot gives way to the next, and the last, of the group's own events, is saved
    # with the next commit, which the kill may come before. Either way recovery reaches
    # the flushed state exactly: from that last snapshot, or from an older one (none of
    # the dropped ones) and the events after it.
    path = tmp_path / "j"
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr[-3000:]
    told = json.loads(child.stdout.splitlines()[-1])
    assert told["drops"] >= 5, told  # snapshots did give way
    with cf.Runtime.open(path) as rt:
        assert dict(rt.agent("a").context_view().private) == told["private"]
        assert dict(rt.agent("a").context_view().private) == {"k": -1, **{f"k{i % 5}": i for i in range(12)}}


def test_after_a_reopen_each_target_of_a_publication_changes_its_own_task_layer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Recovered from their snapshots, the targets share one object (test_big_values_s60_h6):
    # a task layer is replaced, never changed in place, and every read is a copy.
    path = tmp_path / "j"
    config = {"journal": {"snapshot_interval": 1}}
    with cf.Runtime.open(path, config=config) as rt:
        rt.spawn_many([{"agent_id": f"a{i}", "task_id": "t"} for i in range(3)])
        rt.publish_task_context("t", {"rows": [{"id": 1}], "n": 1.0})
        for i in range(3):
            rt.agent(f"a{i}").set_private("seen", True)

    started = starts_seen(monkeypatch)
    with cf.Runtime.open(path, config=config) as rt:
        assert started["a0"].task_context is started["a1"].task_context is started["a2"].task_context
        read = rt.agent("a0").task_context()
        read["rows"][0]["id"] = 99  # a copy: the shared layer stays
        read["n"] = 2.0
        rt.agent("a0").context_view().task_shared["rows"].append({"id": 7})
        rt.agent("a1").set_task_context({"rows": [], "n": 0})
        for i in (0, 2):
            assert rt.agent(f"a{i}").task_context() == {"rows": [{"id": 1}], "n": 1.0}
        assert rt.agent("a1").task_context() == {"rows": [], "n": 0}
        rt.agent("a2").set_private("again", True)  # a snapshot of the shared layer again
    with cf.Runtime.open(path, config=config) as rt:
        assert [rt.agent(f"a{i}").task_context()["rows"] for i in range(3)] == [[{"id": 1}], [], [{"id": 1}]]
    with Journal.open(path, readonly=True) as journal:
        assert journal.verify(decode=True).ok


class _CtrlCAsItCloses:
    """An LMDB environment whose ``close`` gets a real SIGINT once it has closed (raised as it returns)."""

    def __init__(self, env: Any) -> None:
        self._env = env
        self.closes = 0

    def close(self) -> None:
        self._env.close()
        self.closes += 1
        if self.closes == 1:
            signal.raise_signal(signal.SIGINT)  # Python's handler runs here: KeyboardInterrupt

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("readonly", [False, True])
def test_a_ctrl_c_as_the_environment_closes_is_finished_by_the_next_close(
    tmp_path: Path, readonly: bool
) -> None:
    # The environment is closed, the journal not yet marked released: the next close()
    # syncs a closed environment (LMDB's error, passed over) and marks it, once.
    path = tmp_path / "j"
    Journal.open(path).close()
    journal: Any = Journal.open(path, readonly=readonly)
    journal._env = env = _CtrlCAsItCloses(journal._env)
    with pytest.raises(KeyboardInterrupt):
        journal.close()
    assert journal.closed
    journal.close()
    journal.close()
    assert env.closes == 2  # the second close() finished it; the third found it done
    Journal.open(path).close()

"""Review of the agent churn commit (helper h10, session 60).

``agents()``, ``children()`` and ``context_views()`` now sort the live agents by the
rank ``_listed`` gives each id, rather than walk every id ever spawned, once the ids
ever spawned outnumber the live ones four to one. A model of the old walk (every id in
first-spawn order, a killed id kept with a journal and forgotten without one, an id
whose first spawn the journal refused taken out again) is compared with ``agents()``
over random spawns, batch spawns, kills, refused spawns and reopens.

An id spawned again (its stream holds earlier lives) takes a snapshot with its first
change of its own: pinned here for a brand-new id whose first spawn was refused (it is
no id spawned again), a killed id whose new spawn was refused and then retried, and a
SIGKILL right after such a snapshot in batch durability.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import cogfabric as cf
from cogfabric.actors._core import snapshot_problem
from cogfabric.events import AgentSpawned
from cogfabric.store import InvalidStreamError

_IDS = [f"w{i}" for i in range(24)]


class _Refusing:
    """Wraps a journal's ``append``: refuses a commit that holds a spawn while ``on``."""

    def __init__(self, journal: Any) -> None:
        self.append = journal.append
        self.on = False
        journal.append = self

    def __call__(self, events: list[Any], **kwargs: Any) -> Any:
        if self.on and any(isinstance(e, AgentSpawned) for e in events):
            msg = "refused at commit"
            raise InvalidStreamError(msg)
        return self.append(events, **kwargs)


class ListingModel(RuleBasedStateMachine):
    """``agents()`` and ``children()`` against the old walk of every id ever listed."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="cogfabric-listing-")
        self.path: Path | None = None
        self.rt: cf.Runtime | None = None
        self.refusing: _Refusing | None = None
        self.listed: list[str] = []
        """The old ``_listed``: every id in first-spawn order (without a journal, the live ones)."""
        self.live: dict[str, str | None] = {}
        """Each live agent's parent."""

    def _open(self) -> None:
        self.rt = cf.Runtime.open(self.path, clock=cf.FakeClock())
        journal = self.rt._journal
        self.refusing = _Refusing(journal) if journal is not None else None

    @initialize(journaled=st.booleans(), population=st.integers(0, 12))
    def start(self, journaled: bool, population: int) -> None:
        self.path = Path(self.dir) / "j" if journaled else None
        note(f"journaled={journaled}")
        self._open()
        if population:
            ids = _IDS[:population]
            assert self.rt is not None
            self.rt.spawn_many([{"agent_id": a} for a in ids])
            self._spawned(ids, None)

    def teardown(self) -> None:
        try:
            if self.rt is not None:
                self.rt.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def _spawned(self, ids: list[str], parent: str | None) -> None:
        for agent_id in ids:
            if agent_id not in self.listed:
                self.listed.append(agent_id)
            self.live[agent_id] = parent

    @rule(ids=st.lists(st.sampled_from(_IDS), min_size=1, max_size=6, unique=True), data=st.data())
    def spawn(self, ids: list[str], data: st.DataObject) -> None:
        assert self.rt is not None
        ids = [a for a in ids if a not in self.live]
        if not ids:
            return
        parent = data.draw(st.sampled_from([None, *self.live]), label="parent")
        self.rt.spawn_many([{"agent_id": a, "parent": parent} for a in ids])
        self._spawned(ids, parent)

    @precondition(lambda self: self.refusing is not None)
    @rule(agent_id=st.sampled_from(_IDS))
    def refused_spawn(self, agent_id: str) -> None:
        assert self.rt is not None
        assert self.refusing is not None
        if agent_id in self.live:
            return
        self.refusing.on = True
        try:
            with pytest.raises(InvalidStreamError):
                self.rt.spawn(agent_id)
        finally:
            self.refusing.on = False

    @rule(data=st.data())
    def kill(self, data: st.DataObject) -> None:
        assert self.rt is not None
        if not self.live:
            return
        agent_id = data.draw(st.sampled_from(sorted(self.live)), label="killed")
        self.rt.kill(agent_id)
        del self.live[agent_id]
        if self.path is None:  # no stream keeps a killed id's place
            self.listed.remove(agent_id)

    @rule(data=st.data())
    def cull(self, data: st.DataObject) -> None:
        """Kill all but a few: the ids ever spawned soon outnumber the live ones four to one."""
        assert self.rt is not None
        keep = data.draw(st.sets(st.sampled_from(_IDS), max_size=2), label="kept")
        for agent_id in [a for a in self.live if a not in keep]:
            self.rt.kill(agent_id)
            del self.live[agent_id]
            if self.path is None:
                self.listed.remove(agent_id)

    @rule(count=st.integers(2, 3), data=st.data())
    def respawn_out_of_order(self, count: int, data: st.DataObject) -> None:
        """Spawn ids killed before again, last listed first: each takes its first place back."""
        assert self.rt is not None
        killed = [a for a in self.listed if a not in self.live]
        if not killed:
            return
        ids = list(reversed(killed[:count]))
        parent = data.draw(st.sampled_from([None, *self.live]), label="parent")
        for agent_id in ids:
            self.rt.spawn(agent_id, parent=parent)
        self._spawned(ids, parent)

    @precondition(lambda self: self.path is not None)
    @rule()
    def reopen(self) -> None:
        assert self.rt is not None
        self.rt.close()
        self.rt = None
        self._open()

    @invariant()
    def same_order(self) -> None:
        rt = self.rt
        if rt is None:
            return
        expected = [a for a in self.listed if a in self.live]
        assert rt.agents() == expected
        assert list(rt._listed) == self.listed
        for parent in {None, *self.live}:
            if parent is not None:
                assert rt.children(parent) == [a for a in expected if self.live[a] == parent]


_QUICK = settings(
    max_examples=30,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
ListingModel.TestCase.settings = _QUICK
test_agents_order_is_the_old_walks = ListingModel.TestCase


class _WideListingModel(ListingModel):
    pass


_WideListingModel.TestCase.settings = settings(_QUICK, max_examples=300, stateful_step_count=60)
test_agents_order_is_the_old_walks_wide = pytest.mark.slow(_WideListingModel.TestCase)


def _spawns(journal: Any, stream: str) -> list[int]:
    return [r.seq for r in journal.read(stream=stream) if isinstance(r.event, AgentSpawned)]


def test_an_id_whose_first_spawn_was_refused_is_no_id_spawned_again(tmp_path: Path) -> None:
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as rt:
        refusing = _Refusing(rt._journal)
        refusing.on = True
        with pytest.raises(InvalidStreamError):
            rt.spawn("x")
        refusing.on = False
        assert "x" not in rt._listed
        rt.spawn("x").set_private("k", 1)
        rt.settle(timeout=10)
        journal = rt._journal
        assert journal is not None
        assert journal.load_snapshot("agent/x") is None  # a first life waits for snapshot_interval


def test_a_killed_ids_refused_then_retried_spawn_snapshots_its_new_life(tmp_path: Path) -> None:
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as rt:
        rt.spawn("w").set_private("life", 0)
        rt.kill("w")
        refusing = _Refusing(rt._journal)
        refusing.on = True
        with pytest.raises(InvalidStreamError):
            rt.spawn("w")
        refusing.on = False
        journal = rt._journal
        assert journal is not None
        assert journal.load_snapshot("agent/w") is None  # the refused life took none
        rt.spawn("w").set_private("life", 1)
        rt.settle(timeout=10)
        snapshot = journal.load_snapshot("agent/w")
        assert snapshot is not None
        assert snapshot.seq > max(_spawns(journal, "agent/w"))
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), verify="full") as rt:
        assert rt.agent("w").private("life") == 1
        assert rt._journal is not None
        assert snapshot_problem(rt._journal, "w") is None


_CHILD = """
import os, signal, sys
import cogfabric as cf
rt = cf.Runtime.open(sys.argv[1], clock=cf.FakeClock(), config={"journal": {"durability": "batch"}})
for life in range(3):
    w = rt.spawn("w")
    w.set_private("life", life)
    w.set_private("twice", life * 2)
    if life < 2:
        rt.kill("w")
rt.flush()
rt.spawn("other")  # the writer saves a snapshot with the commit after its event's
rt.flush()
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_sigkill_right_after_a_new_lifes_snapshot_recovers_that_life(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path / "j")],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
        env=env,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), verify="full") as rt:
        journal = rt._journal
        assert journal is not None
        snapshot = journal.load_snapshot("agent/w")
        assert snapshot is not None
        assert snapshot.seq > max(_spawns(journal, "agent/w"))
        assert rt.agent("w").context_view().private == {"life": 2, "twice": 4}
        assert snapshot_problem(journal, "w") is None

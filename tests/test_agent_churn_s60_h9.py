"""A long-lived runtime whose agents come and go (a helper's churn hunt, session 60).

A service spawns a few agents per job, and kills them once the job is done: over the
journal's life many thousands of ids, of which a few dozen live at a time. The runtime
keeps every id ever spawned (for ``agents()`` order, as a reopen has it), and
``agents()``, ``children()`` and ``context_views()`` walked all of them on every call,
under the runtime's lock: their cost grew with the agents killed long ago. They now
cost what the live agents do. A service that pools its ids instead (a killed worker's
id spawned again) had each reopen replay every life of every pooled id: a life takes
far fewer events than ``snapshot_interval``, so none took a snapshot; now each life
takes one with its first change of its own. The rest pins what such a service relies
on: a killed agent leaves nothing behind in the process, its id can be spawned again (a
retired one cannot: it is still live), and a reopen brings back the live agents only.
"""

from __future__ import annotations

import gc
import signal
import subprocess
import sys
import threading
from typing import TYPE_CHECKING, Any

import pykka
import pytest

import cogfabric as cf

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


class _Echo:
    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:
        ctx.set_private("last", message.payload)
        return {"by": ctx.agent_id}


class _Walked(dict[str, int]):
    """A dict that counts the walks over its keys."""

    walks = 0

    def __iter__(self) -> Iterator[str]:
        type(self).walks += 1
        return super().__iter__()


def _job(rt: cf.Runtime, job: int) -> list[str]:
    """One job's agents: spawned, talking, checkpointed, with a session; then killed."""
    ids = [f"job{job}-{i}" for i in range(3)]
    rt.spawn_many([{"agent_id": a, "task_id": f"t{job}", "behavior": "echo", "parent": ids[0]} for a in ids])
    for a in ids:
        rt.bus.subscribe(a, f"topic-{job}")
    rt.bus.broadcast("app", f"topic-{job}", {"job": job})
    assert rt.bus.request("app", ids[1], "go", {"job": job}, timeout=10).payload == {"by": ids[1]}
    lead = rt.agent(ids[0])
    lead.set_private("k", job)
    lead.checkpoint_cognitive()
    session = rt.memory.create_session("u", agent_id=ids[0])
    rt.memory.add_message(session, "user", "hi")
    rt.settle(timeout=10)
    return ids


def test_listing_the_live_agents_walks_no_id_killed_before(tmp_path: Path) -> None:
    clock = cf.FakeClock()
    with cf.Runtime.open(tmp_path / "j", clock=clock, behaviors={"echo": _Echo}) as rt:
        rt.spawn("keep-1")
        dead = [f"gone-{i}" for i in range(60)]
        rt.spawn_many([{"agent_id": a, "parent": "keep-1"} for a in dead])
        rt.spawn("keep-2", parent="keep-1")
        for a in dead:
            rt.kill(a)
        rt.spawn("gone-7", parent="keep-1")  # a killed id spawned again keeps its first place
        expected = ["keep-1", "gone-7", "keep-2"]
        rt._listed = _Walked(rt._listed)
        _Walked.walks = 0
        assert rt.agents() == expected
        assert rt.children("keep-1") == ["gone-7", "keep-2"]
        assert list(rt.context_views()) == expected
        assert list(rt.cognitive_states()) == expected
        assert _Walked.walks == 0  # before: one walk of all 63 ids per call
    with cf.Runtime.open(tmp_path / "j", clock=clock, behaviors={"echo": _Echo}) as rt:
        assert len(rt._listed) == 62
        rt._listed = _Walked(rt._listed)
        _Walked.walks = 0
        assert rt.agents() == expected
        assert rt.children("keep-1") == ["gone-7", "keep-2"]
        rt.spawn("gone-3")  # killed before the reopen: its place is its first spawn's
        rt.spawn("new")
        assert rt.agents() == ["keep-1", "gone-3", "gone-7", "keep-2", "new"]
        assert _Walked.walks == 0


def test_a_runtime_whose_agents_all_live_lists_them_in_spawn_order(tmp_path: Path) -> None:
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as rt:
        ids = [f"a{i}" for i in range(20)]
        rt.spawn_many([{"agent_id": a} for a in reversed(ids)])
        rt.kill("a5")
        rt.spawn("a5")  # back in its first place
        assert rt.agents() == list(reversed(ids))
    with cf.Runtime.open(None, clock=cf.FakeClock()) as rt:
        for a in ("b", "a", "c"):
            rt.spawn(a)
        rt.kill("a")
        rt.spawn("a")  # memory only: a killed id is forgotten, and comes last
        assert rt.agents() == ["b", "c", "a"]


def _left(rt: cf.Runtime) -> dict[str, Any]:
    bus = rt.bus
    return {
        "agents": dict(rt._agents),
        "topics": dict(bus._topics),
        "orders": dict(bus._orders),
        "waiting": dict(bus._waiting),
        "pending": dict(bus._pending),
        "latest sessions": dict(rt.memory._agents_latest),
    }


def test_jobs_of_agents_spawned_and_killed_leave_nothing_behind(tmp_path: Path) -> None:
    clock = cf.FakeClock()
    threads = threading.active_count()
    actors = len(pykka.ActorRegistry.get_all())
    with cf.Runtime.open(
        tmp_path / "j", clock=clock, behaviors={"echo": _Echo}, config={"memory": {"session_ttl": 30}}
    ) as rt:
        threads = threading.active_count()
        actors = len(pykka.ActorRegistry.get_all())
        for job in range(12):
            for a in _job(rt, job):
                rt.kill(a)
            clock.advance(10)
            rt.memory.sweep()
        clock.advance(60)
        rt.memory.sweep()
        gc.collect()
        assert _left(rt) == {
            "agents": {},
            "topics": {},
            "orders": {},
            "waiting": {},
            "pending": {},
            "latest sessions": {},
        }
        assert threading.active_count() == threads
        assert len(pykka.ActorRegistry.get_all()) == actors
        assert len(rt._killed) <= 3
        assert rt.stats().agents == 0
        assert len(rt._listed) == 36
        # an id of a killed agent is free again; a retired one's is not: it still lives
        rt.spawn("job3-1", behavior="echo")
        rt.retire("job3-1")
        with pytest.raises(cf.AgentExistsError):
            rt.spawn("job3-1")
        assert threading.active_count() == threads + 1  # a retired agent keeps its thread
        assert rt.last_checkpoint("job3-0") is not None  # a killed agent's checkpoint outlives it


_CHILD = """
import os, signal, sys
import cogfabric as cf
path, job, live = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
rt = cf.Runtime.open(path, clock=cf.FakeClock(), config={"journal": {"durability": "batch"}})
assert rt.agents() == live, rt.agents()
for j in range(job, job + 170):
    ids = [f"job{j}-{i}" for i in range(3)]
    rt.spawn_many([{"agent_id": a} for a in ids])
    rt.agent(ids[0]).checkpoint_cognitive()
    live += ids
    while len(live) > 30:
        rt.kill(live.pop(0))
rt.flush()
print(",".join(live), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.slow
def test_thousands_of_agents_over_reopens_and_a_sigkill(tmp_path: Path) -> None:
    """About 3,000 agents over six runs (one ended by SIGKILL), 30 live at a time."""
    clock = cf.FakeClock()
    path = tmp_path / "j"
    live: list[str] = []
    job = 0
    for run in range(6):
        if run == 3:
            child = subprocess.run(
                [sys.executable, "-c", _CHILD, str(path), str(job), ",".join(live)],
                capture_output=True,
                text=True,
                encoding="utf-8",
                timeout=300,
                check=False,
            )
            assert child.returncode == -signal.SIGKILL, child.stderr
            live = child.stdout.strip().split(",")
            job += 170
            continue
        with cf.Runtime.open(
            path, clock=clock, behaviors={"echo": _Echo}, config={"journal": {"durability": "batch"}}
        ) as rt:
            assert rt.agents() == live
            for _ in range(170):
                ids = [f"job{job}-{i}" for i in range(3)]
                rt.spawn_many([{"agent_id": a, "behavior": "echo"} for a in ids])
                rt.bus.send("app", ids[1], "go", {"job": job})
                rt.agent(ids[0]).checkpoint_cognitive()
                live += ids
                while len(live) > 30:
                    rt.kill(live.pop(0))
                job += 1
            assert rt.agents() == live
            assert len(rt._agents) == 30
    with cf.Runtime.open(path, clock=clock, behaviors={"echo": _Echo}, verify="tail") as rt:
        assert rt.agents() == live
        assert len(rt._listed) == 3 * job
        rt.spawn("job0-0")  # the first id of all, killed long ago: first again
        assert rt.agents() == ["job0-0", *live]


def test_an_id_spawned_again_is_recovered_from_its_last_life_not_its_first(tmp_path: Path) -> None:
    # A pool of worker ids: each job kills a worker and spawns its id again. Each life
    # took a few events, far fewer than snapshot_interval, so no snapshot was ever taken,
    # and every reopen replayed every life of every pooled id (a tail check from the
    # first of them too). Now a life's first own change takes one.
    clock = cf.FakeClock()
    path = tmp_path / "j"
    with cf.Runtime.open(path, clock=clock, behaviors={"echo": _Echo}) as rt:
        for life in range(8):
            worker = rt.spawn("w", behavior="echo", task_id=f"t{life}")
            worker.set_private("life", life)
            assert rt.bus.request("app", "w", "go", {"life": life}, timeout=10).payload == {"by": "w"}
            if life < 7:
                rt.kill("w")
        rt.spawn("quiet")
        rt.kill("quiet")
        rt.spawn("quiet")  # a life with no change of its own yet: no snapshot, nothing else to replay
        journal = rt._journal
        assert journal is not None
        last_spawn = max(
            r.seq for r in journal.read(stream="agent/w") if isinstance(r.event, cf.events.AgentSpawned)
        )
    with cf.Runtime.open(path, clock=clock, behaviors={"echo": _Echo}) as rt:
        journal = rt._journal
        assert journal is not None
        snapshot = journal.load_snapshot("agent/w")
        assert snapshot is not None  # before: None, replayed from the first life's spawn
        assert snapshot.seq > last_spawn
        assert rt.agent("w").context_view() == cf.ContextView(
            task_shared={}, private={"life": 7, "last": {"life": 7}}
        )
        assert rt.agent("w").task_id == "t7"
        assert rt.agents() == ["w", "quiet"]

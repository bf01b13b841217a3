"""A process that can start no more threads: a spawn or an open fails typed, leaving nothing half done.

Each agent runs on its own thread; on Linux a process runs out of them at a few tens of
thousands (vm.max_map_count). Running out is simulated here: the Nth agent thread fails
to start as ``threading`` fails then.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import pykka
import pytest

from cogfabric import AgentCapacityError, AgentExistsError
from cogfabric.actors import Config, JournalConfig, Runtime
from cogfabric.actors._agent import AgentActor
from cogfabric.events import AgentSpawned
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path


def _agent_threads_fail_after(monkeypatch: pytest.MonkeyPatch, allowed: int) -> None:
    real = pykka.ThreadingActor._start_actor_loop
    started = itertools.count()

    def limited(actor: pykka.ThreadingActor) -> None:
        if isinstance(actor, AgentActor) and next(started) >= allowed:
            msg = "can't start new thread"
            raise RuntimeError(msg)
        real(actor)

    monkeypatch.setattr(pykka.ThreadingActor, "_start_actor_loop", limited)


def _agent_actors() -> list[pykka.ActorRef[AgentActor]]:
    return [ref for ref in pykka.ActorRegistry.get_by_class(AgentActor) if ref.is_alive()]


def _spawned(journal: Journal) -> list[str]:
    return [r.event.agent for r in journal.read() if isinstance(r.event, AgentSpawned)]


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_spawn_the_process_has_no_threads_for_journals_and_starts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durability: str
) -> None:
    config = Config(journal=JournalConfig(durability=durability))  # type: ignore[arg-type]
    with Runtime.open(tmp_path / "j", config=config) as runtime:
        runtime.spawn("keep")
        _agent_threads_fail_after(monkeypatch, 2)

        with pytest.raises(AgentCapacityError, match="cannot start a thread for agent 'n2'") as caught:
            runtime.spawn_many([{"agent_id": f"n{k}"} for k in range(4)])
        with pytest.raises(AgentCapacityError):
            runtime.spawn("single")
        with pytest.raises(AgentExistsError):
            runtime.spawn("keep")  # refused before any thread is asked for
        runtime.flush()

        assert isinstance(caught.value, RuntimeError)
        assert caught.value.agent_id == "n2"
        assert runtime.agents() == ["keep"]
        assert len(_agent_actors()) == 1  # the two started for the spawn were stopped again
        assert runtime._journal is not None
        assert _spawned(runtime._journal) == ["keep"]

        monkeypatch.undo()
        runtime.spawn_many([{"agent_id": f"n{k}"} for k in range(4)])
        runtime.spawn("single").set_private("k", "v")
        assert runtime.agents() == ["keep", "n0", "n1", "n2", "n3", "single"]
    with Journal.open(tmp_path / "j", readonly=True) as journal:
        assert _spawned(journal) == ["keep", "n0", "n1", "n2", "n3", "single"]
    assert _agent_actors() == []


def test_an_open_that_cannot_start_every_agent_fails_typed_and_leaves_the_journal_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "j"
    with Runtime.open(path) as runtime:
        runtime.spawn_many([{"agent_id": f"a{k}"} for k in range(5)])
    before = (path / "data.mdb").read_bytes()
    _agent_threads_fail_after(monkeypatch, 3)

    with pytest.raises(AgentCapacityError, match="cannot start a thread for agent 'a3'"):
        Runtime.open(path)

    assert _agent_actors() == []
    assert (path / "data.mdb").read_bytes() == before
    monkeypatch.undo()
    with Runtime.open(path) as runtime:
        assert runtime.agents() == [f"a{k}" for k in range(5)]

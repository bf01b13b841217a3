"""Snapshot decoding at its edge: what a mutation test found no test held."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cogfabric import AgentState, Config, JournalConfig, Runtime
from cogfabric.actors._state import decode_snapshot, encode_snapshot
from cogfabric.store import Journal, Snapshot

if TYPE_CHECKING:
    from pathlib import Path


def test_a_snapshot_stored_as_running_is_recovered_idle(tmp_path: Path) -> None:
    # decode_snapshot's docstring: "A lifecycle of RUNNING (which no writer stores ...)
    # is read as IDLE, as apply_event reads it": else the recovered agent refuses every
    # lifecycle call as running, for good
    path = tmp_path / "j"
    with Runtime.open(path, config=Config(journal=JournalConfig(snapshot_interval=2))) as rt:
        agent = rt.spawn("a", task_id="t")
        for i in range(4):
            agent.set_private("k", i)
    with Journal.open(path) as journal:
        stored = journal.load_snapshot("agent/a")
        assert stored is not None
        state = decode_snapshot(stored.data)
        state.lifecycle = AgentState.RUNNING
        journal.save_snapshot(Snapshot(stored.stream, stored.seq, encode_snapshot(state)))
        assert decode_snapshot(journal.load_snapshot("agent/a").data).lifecycle == AgentState.IDLE  # type: ignore[union-attr]

    with Runtime.open(path, verify="tail") as rt:
        assert rt.agent("a").lifecycle == AgentState.IDLE
        rt.suspend("a")  # not refused as running
        assert rt.agent("a").lifecycle == AgentState.SUSPENDED

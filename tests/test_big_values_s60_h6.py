"""Agents that carry big values: a task context, private value or session message of megabytes.

What a simulation whose agents hold fetched pages, tables of many rows or long tool
outputs meets: the journal writer keeps only an agent's latest snapshot while earlier
ones still wait for it (batch durability takes one every ``snapshot_interval`` changes,
each a copy of the whole state), a reopen gives the targets of one publication one copy
of its context, as the live runtime does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf
from cogfabric.actors import _runtime
from cogfabric.actors._writer import JournalWriter
from cogfabric.store import Journal, Snapshot

from .actors.test_writer import WAIT, GatedJournal

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

    from cogfabric.actors._state import AgentSnapshot
    from cogfabric.events import Event


class HeldJournal(GatedJournal):
    """A journal whose first append waits for the gate; it notes the snapshots of each append."""

    def __init__(self, journal: Journal) -> None:
        super().__init__(journal)
        self.snapshots: list[list[Snapshot]] = []

    def append(self, events: Sequence[Event], **kwargs: Any) -> list[int]:
        self.snapshots.append(list(kwargs.get("snapshots", ())))
        return super().append(events, **kwargs)


@pytest.fixture
def held(tmp_path: Path) -> Iterator[HeldJournal]:
    with Journal.open(tmp_path / "j") as journal:
        yield HeldJournal(journal)


def change(agent: str, i: int) -> cf.events.PrivateSet:
    return cf.events.PrivateSet(at=1.0, agent=agent, key=f"k{i}", value=i)


def starts_seen(monkeypatch: pytest.MonkeyPatch) -> dict[str, AgentSnapshot]:
    """Each agent's state as ``Runtime._start`` is given it from now on (recovery's), by id."""
    started: dict[str, AgentSnapshot] = {}
    start = _runtime.Runtime._start

    def spy(self: _runtime.Runtime, state: AgentSnapshot, behavior: Any) -> Any:
        started[state.id] = state
        return start(self, state, behavior)

    monkeypatch.setattr(_runtime.Runtime, "_start", spy)
    return started


def test_a_snapshot_still_waiting_for_the_writer_gives_way_to_a_newer_one_of_its_stream(
    held: HeldJournal,
) -> None:
    # Batch durability: an agent that changes faster than the writer commits queues a copy
    # of its whole state every snapshot_interval changes. Only the newest of a stream is
    # saved (it covers every event the older did); the others' bytes are let go at once,
    # not held in the queue and written over each other in one transaction.
    writer = JournalWriter(held, group_commit_max=1000, call_timeout=WAIT, backlog_max=1000)  # type: ignore[arg-type]
    try:
        writer.submit_nowait([change("z", 0)])
        assert held.entered.wait(WAIT)  # the writer is in z0's append: what follows waits
        for i in range(5):
            writer.submit_nowait([change("a", i)])
            writer.submit_snapshot("agent/a", b"state %d" % i)
            writer.submit_nowait([change("b", i)])
        writer.submit_snapshot("agent/b", b"b")
        held.gate.set()
        writer.flush(WAIT)
        writer.flush(WAIT)  # a snapshot of the group's own events goes with the next commit
    finally:
        held.gate.set()
        writer.stop(WAIT)

    saved = [s for snapshots in held.snapshots for s in snapshots]
    assert sorted((s.stream, s.data) for s in saved) == [("agent/a", b"state 4"), ("agent/b", b"b")]
    assert held.load_snapshot("agent/a") == Snapshot("agent/a", 10, b"state 4")  # a4 is seq 10
    assert held.load_snapshot("agent/b") == Snapshot("agent/b", 11, b"b")


def test_a_reopen_gives_the_targets_of_a_publication_one_copy_of_its_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Live, the targets of a publication share its context (one object, never changed in
    # place). Each snapshot holds its agent's copy, so a reopen from snapshots made one
    # copy a target: 200 targets of a context of megabytes, 200 times the memory.
    path = tmp_path / "j"
    config = {"journal": {"snapshot_interval": 1}}
    rows = [{"id": i, "name": f"row-{i}", "tags": ["a", "b"]} for i in range(200)]
    with cf.Runtime.open(path, config=config) as rt:
        rt.spawn_many([{"agent_id": f"a{i}", "task_id": "t"} for i in range(4)])
        rt.publish_task_context("t", {"rows": rows, "n": 1.0})
        for i in range(4):
            rt.agent(f"a{i}").set_private("seen", True)  # each takes a snapshot holding the context
        rt.agent("a3").set_task_context({"rows": rows, "n": 1})  # equal (1 == 1.0), not the same
        rt.agent("a3").set_private("again", True)
    with Journal.open(path, readonly=True) as journal:
        assert all(journal.load_snapshot(f"agent/a{i}") is not None for i in range(4))

    started = starts_seen(monkeypatch)
    with cf.Runtime.open(path, config=config) as rt:
        contexts = [started[f"a{i}"].task_context for i in range(3)]
        assert contexts[0] is contexts[1] is contexts[2]
        assert started["a3"].task_context is not contexts[0]  # its own layer, kept as it is
        assert type(rt.agent("a3").task_context()["n"]) is int
        assert rt.agent("a0").task_context() == {"rows": rows, "n": 1.0}

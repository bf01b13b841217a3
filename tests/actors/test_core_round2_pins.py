"""Pins of ``actors/_core.py`` from a second mutation test (after ``test_core_pins.py``).

Each test holds a behaviour that a hand-made mutant of ``_core.py`` changed while
every other test still passed; the comment on each names what its docstring or
README.md promises. The first two journals are written by hand, event by event, so
each seq is known.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from cogfabric.actors import (
    Config,
    FakeClock,
    JournalConfig,
    Runtime,
    replay_agent,
    snapshot_problem,
)
from cogfabric.actors._core import snapshot_flaw
from cogfabric.actors._state import encode_snapshot
from cogfabric.events import AgentSpawned, PrivateSet, TaskContextPublished
from cogfabric.store import Journal, JournalIntegrityError, Snapshot

from .test_runtime import _tamper

if TYPE_CHECKING:
    from pathlib import Path


def test_a_forged_snapshot_clamped_before_a_publication_disagrees_when_its_agent_wrote_the_last_record(
    tmp_path: Path,
) -> None:
    # snapshot_problem "Rebuilds the agent as of now from its snapshot plus what follows,
    # and from its events alone, and compares the two", as of the last seq: a snapshot
    # the writer clamped before a publication (_clamped_before) is passed over only by a
    # replay to a seq before its stream's last record. Here that record is the journal's
    # last, so recovery starts from the snapshot, and the check must compare it too.
    with Journal.open(tmp_path / "j") as journal:
        journal.append([AgentSpawned(at=1.0, agent="a", task_id="t")])
        journal.append([PrivateSet(at=2.0, agent="a", key="k", value=1)])  # seq 2
        journal.append([TaskContextPublished(at=3.0, task_id="t", context={"goal": "g"}, agents=("a",))])
        journal.append([PrivateSet(at=4.0, agent="a", key="j", value=2)])  # seq 4, a's last and the last
        state = replay_agent(journal, "a", from_snapshot=False)
        assert state is not None
        state.private["k"] = "FORGED"
        journal.save_snapshot(Snapshot("agent/a", 2, encode_snapshot(state)))  # clamped before seq 3

        problem = snapshot_problem(journal, "a")
        recovered = replay_agent(journal, "a")

    assert recovered is not None
    assert recovered.private == {"k": "FORGED", "j": 2}  # what recovery would start from
    assert problem == "its snapshot at seq 2 does not hold the state its events make"


def test_a_snapshot_naming_a_publication_to_another_agent_is_flawed_and_passed_over(tmp_path: Path) -> None:
    # snapshot_flaw: a snapshot "naming a publication to the agent at a seq that holds
    # none" cannot be started from; a seq that publishes to another agent holds none
    # to this one, so verify names it and replay rebuilds the agent from its events
    with Journal.open(tmp_path / "j") as journal:
        journal.append(
            [AgentSpawned(at=1.0, agent="a", task_id="t"), AgentSpawned(at=1.0, agent="b", task_id="u")]
        )
        journal.append([PrivateSet(at=2.0, agent="a", key="k", value=1)])  # seq 3, a's last
        journal.append([TaskContextPublished(at=3.0, task_id="u", context={"goal": "b's"}, agents=("b",))])
        state = replay_agent(journal, "a", from_snapshot=False)
        assert state is not None
        assert state.publish_seq == 0
        state.private["k"] = "FORGED"
        state.task_context = {"goal": "b's"}
        state.publish_seq = 4  # b's publication
        journal.save_snapshot(Snapshot("agent/a", 3, encode_snapshot(state)))  # its hash matches
        snapshot = journal.load_snapshot("agent/a")
        assert snapshot is not None

        flaw = snapshot_flaw(journal, snapshot)
        problem = snapshot_problem(journal, "a")
        recovered = replay_agent(journal, "a")

    expected = (
        "its snapshot at seq 3 names a task context published to it at seq 4, "
        "and the journal holds none there (its last seq is 4)"
    )
    assert flaw == problem == expected
    assert recovered is not None
    assert (recovered.private, recovered.task_context, recovered.publish_seq) == ({"k": 1}, {}, 0)


def test_a_tail_reopen_reads_no_publication_before_the_first_record_it_replays(tmp_path: Path) -> None:
    # Runtime.open: verify="tail" checks "every record recovery replays: from the
    # earliest of the live agents' latest snapshots"; recovery reads the runtime stream
    # once from there (``publications(journal, after=...)``, "``after < seq <= until``"),
    # so a publication the snapshots cover, damaged so that it no longer decodes, stops
    # a full check and not a tail reopen (a read from seq 0 met it and failed the open)
    config = Config(journal=JournalConfig(snapshot_interval=5))
    with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as runtime:
        a = runtime.spawn("a", task_id="t")
        runtime.publish_task_context("t", {"note": "abcdef"})  # seq 2, covered by a's snapshot
        runtime.publish_task_context("t", {"round": 1})
        for i in range(12):
            a.set_private(f"k{i}", i)
    with Journal.open(tmp_path / "j", readonly=True) as journal:
        snapshot = journal.load_snapshot("agent/a")
    assert snapshot is not None
    assert snapshot.seq > 3
    assert _tamper(tmp_path / "j", b"events", b"abcdef", b"abcd\xff\xfe") == 1  # no UTF-8

    with pytest.raises(JournalIntegrityError):
        Runtime.open(tmp_path / "j", config=config, clock=FakeClock())  # full
    with Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), verify="tail") as runtime:
        assert runtime.agents() == ["a"]
        assert (runtime.agent("a").task_context(), runtime.agent("a").private("k11")) == ({"round": 1}, 11)

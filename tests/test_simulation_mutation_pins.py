"""`cogfabric simulate`'s promises that a hand-made mutation test of _simulation.py found no test held.

Each test pins one thing README.md or a docstring of the module says: a refused evidence
dump in one round in twenty of each researcher, a checkpoint in its first round then
every fifth, one agent in five a reviewer, the figures of a continued run being its own,
the reviews a reviewer notes in its session, the journal's own reviewers asked on a
continued run, at most two ticks a researcher in flight, and a journal of researchers
alone refused untouched, and the size of the journal it reports.
"""

from __future__ import annotations

import collections
import json
from typing import TYPE_CHECKING, Any

from click.testing import CliRunner

import cogfabric._simulation
from cogfabric import Runtime
from cogfabric._simulation import Researcher, _Tally, run_simulation
from cogfabric.cli import main
from cogfabric.events import CheckpointTaken, IpcMessage, PrivateSet, PromptRejected, SessionMessageAdded
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def _records(path: Path, *, after: int = 0) -> list[Any]:
    with Journal.open(path, readonly=True) as journal:
        return [record.event for record in journal.read(after=after)]


def test_each_researcher_is_refused_one_round_in_twenty_and_checkpoints_in_round_one_then_every_fifth(
    tmp_path: Path,
) -> None:
    # README: "one round in twenty of each researcher also tries a raw evidence dump, which
    # the gate refuses", "checkpoints (in a researcher's first round, then every fifth)"
    report = run_simulation(tmp_path / "j", agents=6, turns=100)  # 5 researchers, 20 rounds each

    refused: collections.Counter[str] = collections.Counter()
    checkpointed: dict[str, list[int]] = {}
    round_of: dict[str, int] = {}
    for event in _records(tmp_path / "j"):
        if isinstance(event, PrivateSet) and event.key == "rounds":
            round_of[event.agent] = event.value
        elif isinstance(event, PromptRejected):
            refused[str(event.agent)] += 1
        elif isinstance(event, CheckpointTaken):
            checkpointed.setdefault(event.agent, []).append(round_of[event.agent])
    researchers = [f"researcher-{i:03d}" for i in range(5)]

    assert refused == dict.fromkeys(researchers, 1)
    assert checkpointed == {a: [1, 6, 11, 16] for a in researchers}
    assert (report.refusals, report.checkpoints, report.failures) == (5, 20, 0)


def test_one_agent_in_five_reviews(tmp_path: Path) -> None:
    # the module: REVIEWER_SHARE, "one agent in five reviews" (README: 50 agents, 40 researchers)
    for agents, reviewers in ((4, 1), (9, 1), (10, 2)):
        run_simulation(tmp_path / str(agents), agents=agents, turns=2)
        with Journal.open(tmp_path / str(agents), readonly=True) as journal:
            ids = [stream.removeprefix("agent/") for stream in journal.streams("agent/")]

        assert len(ids) == agents
        assert sum(a.startswith("reviewer-") for a in ids) == reviewers, (agents, ids)


def test_a_continued_run_reports_the_refusals_and_checkpoints_it_made(tmp_path: Path) -> None:
    # README: "The summary's refusals and failures are counted from the journal": this run's
    path = tmp_path / "j"
    run_simulation(path, agents=6, turns=100)
    with Journal.open(path, readonly=True) as journal:
        before = journal.last_seq

    report = run_simulation(path, turns=10)  # rounds 21 and 22

    kinds = collections.Counter(type(event).__name__ for event in _records(path, after=before))
    assert report.resumed
    assert (report.refusals, report.checkpoints) == (kinds["PromptRejected"], kinds["CheckpointTaken"])
    assert (report.refusals, report.checkpoints) == (2, 5)


def test_a_continued_run_asks_the_journals_own_reviewers(tmp_path: Path) -> None:
    # README: "Running it again continues ... with the journal's agents (--agents applies to
    # a new journal only)": 50 agents asked for would have reviewers it never spawned
    path = tmp_path / "j"
    run_simulation(path, agents=6, turns=5)
    with Journal.open(path, readonly=True) as journal:
        before = journal.last_seq

    report = run_simulation(path, agents=50, turns=60)

    asked = {
        event.recipient
        for event in _records(path, after=before)
        if isinstance(event, IpcMessage) and event.topic == "review"
    }
    assert report.reviews > 0
    assert asked == {"reviewer-000"}
    assert (report.failures, report.dead_letters) == (0, 0)


def test_a_reviewer_notes_each_review_in_its_own_session(tmp_path: Path) -> None:
    # the module: "Reviewers only answer, each review an LLM call noted in the reviewer's own session"
    report = run_simulation(tmp_path / "j", agents=6, turns=40)

    events = _records(tmp_path / "j")
    sessions = {event.value for event in events if isinstance(event, PrivateSet) and event.key == "session"}
    reviewer_session = next(
        event.value
        for event in events
        if isinstance(event, PrivateSet) and event.key == "session" and event.agent == "reviewer-000"
    )
    noted = [
        event.message.role
        for event in events
        if isinstance(event, SessionMessageAdded) and event.session == reviewer_session
    ]
    assert len(sessions) == 6
    assert report.reviews > 0
    assert noted == ["user", "assistant"] * report.reviews


def test_the_driver_keeps_at_most_two_ticks_a_researcher_in_flight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # run_simulation's docstring: the driver keeps at most two ticks a researcher in
    # flight, counted as the driver does (ticks sent less turns it saw done)
    waited = [0]

    class Counted(cogfabric._simulation._Tally):
        def __init__(self) -> None:
            super().__init__()
            done = self.done

            class Done:
                def acquire(self, timeout: float | None = None) -> bool:
                    waited[0] += 1
                    return done.acquire(timeout=timeout)

                def release(self) -> None:
                    done.release()

            self.done = Done()  # type: ignore[assignment]

    in_flight: list[int] = []
    monkeypatch.setattr(cogfabric._simulation, "_Tally", Counted)

    run_simulation(
        tmp_path / "j", agents=4, turns=30, progress=lambda n, _: in_flight.append(n + 1 - waited[0])
    )

    assert max(in_flight) == 2 * 3  # 3 researchers
    assert waited[0] == 30


def test_a_journal_of_researchers_alone_is_refused_untouched(tmp_path: Path) -> None:
    # _refuse_a_foreign_journal: the simulation's journal has researchers and reviewers
    # ("and it has both"); README: a journal it did not write "is refused, untouched"
    path = tmp_path / "j"
    behaviors: dict[str, Any] = {"researcher": lambda: Researcher(_Tally(), 0, [])}
    with Runtime.open(path, behaviors=behaviors) as rt:
        rt.spawn("researcher-000", task_id="research", behavior="researcher")
    with Journal.open(path, readonly=True) as journal:
        before = journal.last_seq

    result = CliRunner().invoke(main, ["simulate", "--journal", str(path), "--turns", "1"])

    assert result.exit_code == 2, result.output
    assert (
        f"{before:,} record{'' if before == 1 else 's'} but not its researchers and reviewers"
        in result.output
    )
    with Journal.open(path, readonly=True) as journal:
        assert journal.last_seq == before


def test_the_reports_journal_size_is_what_inspect_says_is_on_disk(tmp_path: Path) -> None:
    # README: simulate's "journal J: N events, 2.1 MB" and inspect's "on disk 2.1 MB" of the same journal
    report = run_simulation(tmp_path / "j", agents=3, turns=3)

    result = CliRunner().invoke(main, ["inspect", str(tmp_path / "j"), "--json"])

    assert result.exit_code == 0, result.output
    assert report.journal_bytes == json.loads(result.output)["bytes_on_disk"] > 0

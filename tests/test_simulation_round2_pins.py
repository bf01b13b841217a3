"""`cogfabric simulate`'s promises that a second hand-made mutation test of _simulation.py found no test held.

Each test pins one thing README.md or a docstring of the module says: a new journal's
run counts its set-up among its events, the rate is this run's, a continued run takes
up the round-robin where the last one left it (no round taken twice, none skipped),
the journal errors run_simulation raises as they are or with their cause, a journal of
another task or without its reviewers refused untouched, an error opening the journal
shown as one line, the seed named as the journal's model, a researcher asking for a
review only sometimes, a reviewer counting the reviews it answered, a turn that never
finishes stopping the run, and a continued run not noting again the sessions it keeps.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

import cogfabric._simulation
from cogfabric import Runtime
from cogfabric._errors import CogfabricError
from cogfabric._simulation import Researcher, Reviewer, SimulationStoppedError, _Tally, run_simulation
from cogfabric.cli import main
from cogfabric.events import IpcMessage, LlmOutputRecorded, PrivateSet
from cogfabric.store import Journal, JournalFailedError, JournalFullError, JournalUnavailableError
from tests.test_simulation_edges import _assert_one_line_error

if TYPE_CHECKING:
    from pathlib import Path


def _events(path: Path) -> list[Any]:
    with Journal.open(path, readonly=True) as journal:
        return [record.event for record in journal.read()]


def _last_seq(path: Path) -> int:
    with Journal.open(path, readonly=True) as journal:
        return journal.last_seq


def _rounds(path: Path) -> dict[str, list[int]]:
    """Each researcher's rounds, in the order it took them."""
    rounds: dict[str, list[int]] = {}
    for event in _events(path):
        if isinstance(event, PrivateSet) and event.key == "rounds":
            rounds.setdefault(event.agent, []).append(event.value)
    return rounds


def test_a_new_journals_run_counts_its_set_up_among_its_events(tmp_path: Path) -> None:
    # README: "ran 200 turns of 50 agents: 5,468 events ..." and "journal J: 5,468 events":
    # on a new journal the run's events are all the journal holds, its set-up included
    report = run_simulation(tmp_path / "j", agents=3, turns=2)

    assert report.events == report.total_events == _last_seq(tmp_path / "j")


def test_the_rate_is_this_runs_events_over_its_seconds(tmp_path: Path) -> None:
    # README: "N events in S s (R events/s)": the events of this run, not the journal's
    path = tmp_path / "j"
    run_simulation(path, agents=3, turns=4)

    report = run_simulation(path, turns=2)

    assert 0 < report.events < report.total_events
    assert report.seconds > 0
    assert report.events_per_second == pytest.approx(report.events / report.seconds)


def test_a_continued_run_takes_no_round_twice(tmp_path: Path) -> None:
    # "Running it again continues from the recovered state": after a run whose turns end
    # in the middle of a round, no researcher takes a round it took already
    path = tmp_path / "j"
    run_simulation(path, agents=6, turns=7)  # 5 researchers: two of them in round 2

    run_simulation(path, turns=8)

    rounds = _rounds(path)
    assert len(rounds) == 5
    for agent, taken in rounds.items():
        assert taken == sorted(set(taken)), (agent, taken)


def test_a_continued_run_takes_up_the_round_robin_where_the_last_run_left_it(tmp_path: Path) -> None:
    # run_simulation: "turns ... spread round-robin over them"; README: "Running it again
    # continues from the recovered state". A continued run began again at researcher-000:
    # five runs of one turn were five turns of researcher-000, and 7 turns then 8 gave
    # researcher-000 four rounds and researcher-003 two (it never took round 2).
    for _ in range(5):
        run_simulation(tmp_path / "ones", agents=6, turns=1)
    run_simulation(tmp_path / "split", agents=6, turns=7)
    run_simulation(tmp_path / "split", turns=8)
    run_simulation(tmp_path / "whole", agents=6, turns=15)

    took = [e.agent for e in _events(tmp_path / "ones") if isinstance(e, PrivateSet) and e.key == "rounds"]
    assert took == [f"researcher-{i:03d}" for i in range(5)]  # in turn, each its round 1
    assert _rounds(tmp_path / "ones") == {f"researcher-{i:03d}": [1] for i in range(5)}
    assert _rounds(tmp_path / "split") == _rounds(tmp_path / "whole")
    assert _rounds(tmp_path / "whole") == {f"researcher-{i:03d}": [1, 2, 3] for i in range(5)}


@pytest.mark.parametrize("error", [JournalFullError, JournalFailedError])
def test_a_full_or_failed_journal_is_raised_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: type[Exception]
) -> None:
    # run_simulation's docstring: "JournalFullError, JournalFailedError: ... during the run (as they are)"
    raised = error("the journal (the test)")

    def fail(*args: Any, **kwargs: Any) -> None:  # noqa: ARG001
        raise raised

    monkeypatch.setattr(cogfabric._simulation, "_drive", fail)

    with pytest.raises(error) as caught:
        run_simulation(tmp_path / "j", agents=2, turns=1)

    assert caught.value is raised


def test_any_other_journal_error_during_a_run_stops_it_with_that_error_as_its_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SimulationStoppedError's docstring: the journal failed while the simulation ran, and
    # "``__cause__`` is its error"
    raised = JournalUnavailableError("j: mdb_txn_commit:\nNo space left on device")

    def fail(*args: Any, **kwargs: Any) -> None:  # noqa: ARG001
        raise raised

    monkeypatch.setattr(cogfabric._simulation, "_drive", fail)

    with pytest.raises(SimulationStoppedError) as caught:
        run_simulation(tmp_path / "j", agents=2, turns=1)

    assert caught.value.__cause__ is raised
    assert str(caught.value) == "j: mdb_txn_commit: No space left on device"


def _behaviors() -> dict[str, Any]:
    return {"researcher": lambda: Researcher(_Tally(), 0, ["reviewer-000"]), "reviewer": Reviewer}


def test_a_journal_of_its_ids_but_another_task_is_refused_untouched(tmp_path: Path) -> None:
    # README: "a journal the simulation did not write is refused, untouched": ids alone
    # do not make one the simulation's, its agents work on its task
    path = tmp_path / "j"
    with Runtime.open(path, behaviors=_behaviors()) as rt:
        rt.spawn("reviewer-000", task_id="other", behavior="reviewer")
        rt.spawn("researcher-000", task_id="other", behavior="researcher")
    before = _last_seq(path)

    result = CliRunner().invoke(main, ["simulate", "--journal", str(path), "--turns", "2"])

    assert result.exit_code == 2, result.output
    assert "agents it did not spawn (reviewer-000, researcher-000)" in result.output
    assert _last_seq(path) == before


def test_a_simulations_journal_left_without_reviewers_is_refused_untouched(tmp_path: Path) -> None:
    # _refuse_a_foreign_journal: the simulation's journal has researchers and reviewers
    # ("and it has both"): once its only reviewer is killed, no researcher could be reviewed
    path = tmp_path / "j"
    run_simulation(path, agents=6, turns=5)
    with Runtime.open(path, behaviors=_behaviors()) as rt:
        rt.kill("reviewer-000")
    before = _last_seq(path)

    result = CliRunner().invoke(main, ["simulate", "--journal", str(path), "--turns", "2"])

    assert result.exit_code == 2, result.output
    assert "not written by the simulation: no researchers and reviewers of its own" in result.output
    assert _last_seq(path) == before


class _MultiLineError(CogfabricError):
    """An error the command knows no type of, whose text spans lines."""


def test_an_error_opening_the_journal_whose_text_spans_lines_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SimulationError's docstring: the command shows it "as one line"
    def fail(*args: Any, **kwargs: Any) -> Runtime:  # noqa: ARG001
        msg = "the journal could not be opened:\n  for a reason\ton two lines"
        raise _MultiLineError(msg)

    monkeypatch.setattr(Runtime, "open", fail)
    path = tmp_path / "j"

    result = CliRunner().invoke(main, ["simulate", "--journal", str(path), "--turns", "1"])

    _assert_one_line_error(result, naming=f"cannot open the journal {path}: ")
    assert "opened: for a reason on two lines" in result.output


def test_the_journal_names_the_seed_as_the_model_that_answered(tmp_path: Path) -> None:
    # the journal keeps each answer with its provider and model, so an audit tells which
    # seed's scripted model wrote it (--seed: "Seed of the scripted model")
    run_simulation(tmp_path / "j", agents=3, turns=3, seed=7)

    answered = {(e.provider, e.model) for e in _events(tmp_path / "j") if isinstance(e, LlmOutputRecorded)}

    assert answered == {("scripted", "seed-7")}


def test_a_researcher_asks_for_a_review_in_some_rounds_not_all(tmp_path: Path) -> None:
    # Researcher: "sometimes a review or a finding": whether it asks is drawn again each round
    run_simulation(tmp_path / "j", agents=6, turns=100)  # 5 researchers, 20 rounds each

    asked = collections.Counter(
        e.sender for e in _events(tmp_path / "j") if isinstance(e, IpcMessage) and e.topic == "review"
    )

    assert sorted(asked) == [f"researcher-{i:03d}" for i in range(5)]
    assert all(0 < n < 20 for n in asked.values()), asked


def test_a_reviewer_counts_the_reviews_it_answered(tmp_path: Path) -> None:
    # README's trace shows a review setting the reviewer's private "reviewed": how many it answered
    report = run_simulation(tmp_path / "j", agents=11, turns=45)  # 2 reviewers

    events = _events(tmp_path / "j")
    asked = collections.Counter(
        e.recipient for e in events if isinstance(e, IpcMessage) and e.topic == "review"
    )
    counted = {e.agent: e.value for e in events if isinstance(e, PrivateSet) and e.key == "reviewed"}

    assert sum(asked.values()) == report.reviews
    assert len(asked) == 2
    assert counted == dict(asked)


def test_a_turn_that_never_finishes_stops_the_run_with_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # README: a run "that cannot go on (a mailbox that stays full, ...)" says so and exits 1,
    # rather than reporting turns that were never taken
    class Stalled(_Tally):
        def __init__(self) -> None:
            super().__init__()

            class Never:
                def acquire(self, timeout: float | None = None) -> bool:  # noqa: ARG002
                    return False  # as if 120 s passed with no turn done

                def release(self) -> None:
                    pass

            self.done = Never()  # type: ignore[assignment]

    monkeypatch.setattr(cogfabric._simulation, "_Tally", Stalled)

    result = CliRunner().invoke(
        main, ["simulate", "--journal", str(tmp_path / "j"), "--agents", "2", "--turns", "1"]
    )

    _assert_one_line_error(result, naming="the simulation stalled: a turn did not finish within 120 s")
    assert result.exit_code == 1


def test_a_continued_run_notes_no_session_again_that_its_agents_keep(tmp_path: Path) -> None:
    # README: a continued run first finishes "a set-up that a run stopped after its spawns
    # left undone": a set-up done is not journaled again
    path = tmp_path / "j"
    run_simulation(path, agents=6, turns=5)
    before = _last_seq(path)

    run_simulation(path, turns=5)

    with Journal.open(path, readonly=True) as journal:
        noted = [r.event for r in journal.read(after=before) if isinstance(r.event, PrivateSet)]
    assert [e.agent for e in noted if e.key == "session"] == []

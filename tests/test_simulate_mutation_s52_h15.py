"""Survivors of helper h15's mutation round on simulate's reproduction warnings (session 52).

A journal switched to another seed and then run whole on it names that seed, not "none";
a session replaced twice in one run counts each time it lost messages; the session an agent
is given at start (one a run made and was stopped before noting) is what the run's first
new session replaces; one replaced session warns, and the warning's ``--after`` lists the
run's own ``SessionCreated``.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from cogfabric._simulation import SimulationReport, _ensure_sessions, _replaced, run_simulation
from cogfabric.actors import Runtime
from cogfabric.cli import _reproduction_warnings, main
from cogfabric.store import LmdbJournal
from tests.test_simulate_reproduction_s52_h10 import _end_every_session


def test_a_journal_run_whole_on_another_seed_names_that_seed_to_continue_it(tmp_path: Path) -> None:
    path = tmp_path / "j"
    run_simulation(path, agents=3, turns=4, seed=7)
    run_simulation(path, turns=4, seed=0)  # every researcher's last answer is seed 0's now

    report = run_simulation(path, turns=1, seed=7)

    # only each researcher's newest answer counts: seed 7's older ones are no mix
    assert (report.journal_seed, report.journal_mixed) == (0, False)


def test_each_replacement_of_a_session_that_held_messages_counts(tmp_path: Path) -> None:
    with LmdbJournal.open(tmp_path / "j") as journal:  # sessions of earlier runs: none held messages
        replaced = _replaced(
            journal,
            {"a": None, "b": "old-b"},
            {"a": ["a1", "a2", "a3"], "b": ["b1", "b2"]},
            messaged={"a1", "a2", "b1"},
        )

    assert replaced == 3  # a2 replaced a1, a3 replaced a2, b2 replaced b1 (b1 replaced old-b: empty)


def test_the_latest_session_an_agent_is_given_is_what_its_next_one_replaces(tmp_path: Path) -> None:
    path = tmp_path / "j"
    run_simulation(path, agents=3, turns=0)
    with Runtime.open(path) as rt:
        agent = "researcher-001"
        noted = rt.agent(agent).private("session")
        rt.memory.delete_session(noted)
        made = rt.memory.create_session(agent, agent_id=agent)  # a run stopped before noting it

        had = _ensure_sessions(rt, [agent])

        assert had == {agent: made}
        assert rt.agent(agent).private("session") == made


def test_one_replaced_session_warns_and_names_the_runs_own_session_records(tmp_path: Path) -> None:
    path = tmp_path / "j"
    run_simulation(path, agents=3, turns=1)  # one researcher took a turn; the reviewer had none
    _end_every_session(path)
    with LmdbJournal.open(path, readonly=True) as journal:
        before = journal.last_seq

    result = CliRunner().invoke(main, ["simulate", "--journal", str(path), "--turns", "1"])

    assert result.exit_code == 0, result.output
    assert "warning: 1 session" in result.output  # "1 sessions": the grammar is not the point
    assert f"cogfabric export {path} --type SessionCreated --after {before})" in result.output


def test_one_replaced_session_is_said_in_the_singular() -> None:
    report = SimulationReport(
        agents=2, turns=1, events=10, total_events=30, seconds=1.0, sessions=2, refusals=0, failures=0,
        reviews=0, broadcasts=0, checkpoints=0, journal_bytes=0, path=Path("j"), resumed=True,
        sessions_replaced=1,
    )  # fmt: skip

    [said] = _reproduction_warnings(report, 0, "j")

    assert said.startswith("warning: 1 session ended (")
    assert said.endswith("--type SessionCreated --after 20)")

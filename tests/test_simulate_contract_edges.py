"""`cogfabric simulate` at its edges: what a mutation test found no test held."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from click.testing import CliRunner

import cogfabric.config
from cogfabric import Runtime
from cogfabric._simulation import run_simulation
from cogfabric.actors import replay_agent
from cogfabric.cli import main
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def test_a_continued_run_reports_its_own_events_and_takes_up_the_rounds(tmp_path: Path) -> None:
    # the summary's "N events in S s (R events/s)" is this run's, as README's
    # "--turns 20 continued it": not the journal's total
    # "Running it again continues from the recovered state": rounds go on
    # the report is made once every turn of the run is done
    path = tmp_path / "j"
    first = run_simulation(path, agents=6, turns=10, seed=1)
    with Journal.open(path, readonly=True) as journal:
        assert first.total_events == journal.last_seq
    second = run_simulation(path, agents=6, turns=10, seed=1)

    with Journal.open(path, readonly=True) as journal:
        assert second.total_events == journal.last_seq
        state = replay_agent(journal, "researcher-000")
    assert second.resumed
    assert second.events == second.total_events - first.total_events
    assert state is not None
    assert state.private["rounds"] == 4  # 10 turns over 5 researchers, twice


def test_the_failure_hint_exports_from_where_this_run_began(tmp_path: Path) -> None:
    # "AgentFailed in the journal: cogfabric export J --type AgentFailed --after SEQ" names
    # the seq before the run
    path = tmp_path / "j"
    assert (
        CliRunner()
        .invoke(main, ["simulate", "--journal", str(path), "--agents", "6", "--turns", "5"])
        .exit_code
        == 0
    )
    with Journal.open(path, readonly=True) as journal:
        before = journal.last_seq
    config = tmp_path / "c.yaml"
    config.write_text("llm:\n  max_prompt_length: 50\n", encoding="utf-8")

    result = CliRunner().invoke(
        main, ["simulate", "--journal", str(path), "--turns", "5", "--config", str(config)]
    )

    assert result.exit_code == 1, result.output
    hint = rf"cogfabric export \S+ --type AgentFailed --after {before}\)"
    assert re.search(hint, result.output), result.output


def test_simulate_refuses_a_journal_of_sessions_alone_untouched(tmp_path: Path) -> None:
    # "a journal the simulation did not write is refused, untouched"
    path = tmp_path / "sessions"
    with Runtime.open(path) as rt:
        rt.memory.create_session("u1")
    with Journal.open(path, readonly=True) as journal:
        before = journal.last_seq

    result = CliRunner().invoke(main, ["simulate", "--journal", str(path), "--turns", "3"])

    assert result.exit_code == 2, result.output
    assert "not written by the simulation" in result.output
    with Journal.open(path, readonly=True) as journal:
        assert journal.last_seq == before


def test_a_config_that_cannot_be_read_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # exit 2 is a usage error; 1 is a problem in a journal (or a run that could not go on)
    config = tmp_path / "c.yaml"
    config.write_text("journal: {}\n", encoding="utf-8")

    def unreadable(path: Path) -> object:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(cogfabric.config, "load_config", unreadable)
    result = CliRunner().invoke(main, ["simulate", "--journal", str(tmp_path / "j"), "--config", str(config)])

    assert result.exit_code == 2, result.output
    assert "cannot read --config" in result.output


def test_a_continued_run_keeps_each_agents_session(tmp_path: Path) -> None:
    # "Running it again continues from the recovered state": a live session is taken up,
    # not replaced (and the old one evicted) at every start
    path = tmp_path / "j"
    run_simulation(path, agents=6, turns=5, seed=1)
    with Journal.open(path, readonly=True) as journal:
        before = {a: replay_agent(journal, a).private["session"] for a in ("researcher-000", "reviewer-000")}  # type: ignore[union-attr]

    run_simulation(path, agents=6, turns=5, seed=1)

    with Journal.open(path, readonly=True) as journal:
        after = {a: replay_agent(journal, a).private["session"] for a in before}  # type: ignore[union-attr]
        assert not any(type(r.event).__name__ == "SessionEvicted" for r in journal.read())
    assert after == before


def test_a_run_stopped_between_creating_a_session_and_noting_it_takes_that_session_up(
    tmp_path: Path,
) -> None:
    # "one session per agent": a run killed in its set-up, after create_session and
    # before the agent's private "session" was set, left a session of the agent that
    # the next run adopts rather than creating a second
    path = tmp_path / "j"
    run_simulation(path, agents=6, turns=5, seed=1)
    with Runtime.open(path) as runtime:
        agent = runtime.agent("researcher-000")
        runtime.memory.delete_session(agent.private("session"))
        orphan = runtime.memory.create_session("researcher-000", agent_id="researcher-000")
        agent.set_private("session", None)

    ran = run_simulation(path, agents=6, turns=5, seed=1)

    with Journal.open(path, readonly=True) as journal:
        state = replay_agent(journal, "researcher-000")
    assert state is not None
    assert state.private["session"] == orphan
    assert ran.sessions == 6

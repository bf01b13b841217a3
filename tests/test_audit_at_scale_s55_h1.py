"""The audit commands on a journal of many agents (session 55, helper h1).

A simulation of 5,000 agents writes 10,002 streams: `inspect` printed a line for each
(10,010 lines, 478 KB) after its summary, and every audit command read such a journal
(3 million records) for 15 to 100 seconds without a word, on a terminal too.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

import cogfabric.cli
from cogfabric.cli import main
from cogfabric.events import AgentSpawned
from cogfabric.store import Journal
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from pathlib import Path


def _journal(tmp_path: Path, agents: int = 5) -> Path:
    path = tmp_path / "journal"
    with Journal.open(path) as journal:
        journal.append([AgentSpawned(at=0.0, agent=f"a{i}") for i in range(agents)])
        journal.append(make_events(20, agents=agents))
    return path


def test_inspect_no_streams_keeps_the_summary_and_leaves_out_a_line_a_stream(tmp_path: Path) -> None:
    path = _journal(tmp_path)

    whole = CliRunner().invoke(main, ["inspect", str(path)])
    short = CliRunner().invoke(main, ["inspect", str(path), "--no-streams"])

    assert whole.exit_code == short.exit_code == 0, short.output
    assert [line for line in whole.stdout.splitlines() if line.endswith("agent/a0")]
    assert short.stdout.splitlines() == whole.stdout.splitlines()[:8]
    assert short.stdout.splitlines()[-1] == "streams   agent 25"
    assert "in 5 streams" in short.stdout


def test_inspect_json_no_streams_gives_streams_null_and_keeps_their_count(tmp_path: Path) -> None:
    path = _journal(tmp_path)

    whole = json.loads(CliRunner().invoke(main, ["inspect", str(path), "--json"]).stdout)
    result = CliRunner().invoke(main, ["inspect", str(path), "--json", "--no-streams"])

    assert result.exit_code == 0, result.output
    short = json.loads(result.stdout)
    assert short["streams"] is None
    assert list(short) == list(whole)  # no field left out: null, as README's JSON table has it
    del short["streams"], whole["streams"]
    assert short == whole


@pytest.mark.parametrize(
    ("command", "step"),
    [
        (["verify"], "checking the hash chain of 25 records, each decoded..."),
        (["inspect"], "counting 25 records by type and stream..."),
        (["export"], "checking the hash chain of 25 records..."),
        (["replay"], "checking the hash chain of 25 records..."),
        (["trace", "--seq", "3"], "checking the hash chain of 25 records..."),
    ],
)
def test_an_audit_says_what_it_is_reading_on_a_terminal_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str], step: str
) -> None:
    path = _journal(tmp_path)
    name, *rest = command
    quiet = CliRunner().invoke(main, [name, str(path), *rest])
    monkeypatch.setattr(cogfabric.cli, "_stderr_is_terminal", lambda: True)

    shown = CliRunner().invoke(main, [name, str(path), *rest])

    assert quiet.exit_code == shown.exit_code == 0, shown.output
    assert quiet.stderr == ""  # a file or a pipe gets no step lines
    assert shown.stdout == quiet.stdout  # stdout untouched: they go to stderr
    assert f"  opening {path}: reading every page first...\n" in shown.stderr
    assert f"  {step}\n" in shown.stderr


def test_backup_says_what_it_copies_and_checks_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _journal(tmp_path)
    dest = tmp_path / "copy"
    monkeypatch.setattr(cogfabric.cli, "_stderr_is_terminal", lambda: True)

    result = CliRunner().invoke(main, ["backup", str(path), str(dest)])

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ok: backed up 25 records")
    assert f"  copying 25 records to {dest}...\n" in result.stderr
    assert "  checking the hash chain of the copy's 25 records...\n" in result.stderr


def test_a_continued_simulate_says_it_recovers_before_its_first_turn_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "sim"
    args = ["simulate", "--agents", "2", "--turns", "1", "--journal", str(path)]
    monkeypatch.setattr(cogfabric.cli, "_stderr_is_terminal", lambda: True)

    first = CliRunner().invoke(main, args)
    again = CliRunner().invoke(main, args)
    monkeypatch.setattr(cogfabric.cli, "_stderr_is_terminal", lambda: False)
    quiet = CliRunner().invoke(main, args)

    assert first.exit_code == again.exit_code == quiet.exit_code == 0, again.output
    line = f"  opening {path}: verifying its hash chain and recovering its agents...\n"
    assert line not in first.stderr  # a new journal: nothing to recover
    assert line in again.stderr
    assert line not in quiet.stderr  # a file or a pipe gets no step lines

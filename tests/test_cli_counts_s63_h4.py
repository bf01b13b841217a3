"""What the commands print of one thing (helper h4, s63): "1 record", never "1 records"."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import lmdb
from click.testing import CliRunner

import cogfabric._simulation
from cogfabric import Config, JournalConfig, Runtime, cli
from cogfabric.cli import main
from cogfabric.events import PrivateSet
from cogfabric.store import Journal
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def _journal(tmp_path: Path, records: int = 1) -> Path:
    path = tmp_path / "journal"
    with Journal.open(path) as journal:
        journal.append(make_events(records))
    return path


def _plural_one(text: str) -> list[str]:
    """The "1 <noun>s" of ``text`` (and "seqs N to N")."""
    nouns = ("records", "events", "turns", "agents", "messages", "snapshots", "streams", "times", "cores")
    found = [f"1 {noun}" for noun in nouns if f" 1 {noun}" in f" {text}" or f"(1 {noun}" in text]
    return found + [w for w in ("seqs 1 to 1", "seqs 5 to 5") if w in text]


def test_verify_of_a_journal_of_one_record_says_one_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "_stderr_is_terminal", lambda: True)  # the steps' lines too

    result = CliRunner().invoke(main, ["verify", str(_journal(tmp_path))])

    assert result.exit_code == 0, result.output
    assert result.stdout == "ok: 1 record verified, head at seq 1; 0 snapshots agree with their events\n"
    assert "checking the hash chain of 1 record, each decoded..." in result.stderr
    assert _plural_one(result.output) == []


def test_verify_with_one_snapshot_says_it_agrees_with_its_events(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with Runtime.open(path, config=Config(journal=JournalConfig(snapshot_interval=5))) as rt:
        busy = rt.spawn("busy", task_id="t")
        for i in range(12):
            busy.set_private("step", i)

    result = CliRunner().invoke(main, ["verify", str(path)])

    assert result.exit_code == 0, result.output
    assert result.stdout.endswith("; 1 snapshot agrees with its events\n")


def test_a_failed_verify_counts_one_record_checked_before_the_bad_one(tmp_path: Path) -> None:
    path = _journal(tmp_path, 3)
    env = lmdb.open(str(path), max_dbs=8)
    with env.begin(write=True, db=env.open_db(b"events")) as txn:
        value = bytearray(txn.get((2).to_bytes(8, "big")) or b"")
        value[-1] ^= 0x20
        txn.put((2).to_bytes(8, "big"), bytes(value))
    env.close()

    result = CliRunner().invoke(main, ["verify", str(path)])

    assert result.exit_code == 1
    assert "(1 record checked before it)" in result.output
    assert _plural_one(result.output) == []


def test_inspect_of_a_journal_of_one_record_says_one_record_in_one_stream(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["inspect", str(_journal(tmp_path))])

    assert result.exit_code == 0, result.output
    assert "records   1 in 1 stream\n" in result.stdout


def test_backup_of_a_journal_of_one_record_says_one_record(tmp_path: Path) -> None:
    dest = tmp_path / "backup"

    result = CliRunner().invoke(main, ["backup", str(_journal(tmp_path)), str(dest)])

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"ok: backed up 1 record to {dest}, ")
    assert result.stdout.endswith("; 1 record verified, head at seq 1\n")


def test_salvage_of_seq_1_says_one_seq_and_one_record(tmp_path: Path) -> None:
    dest = tmp_path / "salvaged"

    result = CliRunner().invoke(main, ["salvage", str(_journal(tmp_path, 3)), str(dest), "--until", "1"])

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ok: salvaged seq 1 of ")
    assert "; 1 record verified; left out seqs 2 to 3 (--until)" in result.stdout


def test_verify_export_of_one_record_says_one_record_and_its_seq(tmp_path: Path) -> None:
    path, export = _journal(tmp_path, 5), tmp_path / "export.jsonl"
    exported = CliRunner().invoke(
        main, ["export", str(path), "--verifiable", "--after", "4", "--output", str(export)]
    )
    assert exported.exit_code == 0, exported.output
    first = json.loads(export.read_text(encoding="utf-8").splitlines()[0])

    result = CliRunner().invoke(
        main, ["verify-export", str(export), "--anchor", f"{first['seq']}:{first['chain']}"]
    )

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ok: 1 record verified, seq 5, the first chained on prev ")
    assert _plural_one(result.output) == []


def test_simulate_of_one_turn_says_one_turn(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["simulate", "--agents", "2", "--turns", "1", "--journal", str(tmp_path / "j")]
    )

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ran 1 turn of 2 agents: ")


def test_simulate_counts_one_failure_and_one_dead_letter_in_the_singular(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def one_of_each(path: Path, **_: Any) -> cogfabric._simulation.SimulationReport:
        return cogfabric._simulation.SimulationReport(
            agents=2,
            turns=1,
            events=1,
            total_events=1,
            seconds=0.5,
            sessions=1,
            refusals=0,
            failures=1,
            reviews=0,
            broadcasts=0,
            checkpoints=0,
            journal_bytes=1,
            path=path,
            resumed=False,
            dead_letters=1,
            dead_letter_reasons={"handler error": 1},
        )

    monkeypatch.setattr(cogfabric._simulation, "run_simulation", one_of_each)

    result = CliRunner().invoke(
        main, ["simulate", "--agents", "2", "--turns", "1", "--journal", str(tmp_path / "j")]
    )

    assert result.exit_code == 1, result.output
    assert "ran 1 turn of 2 agents: 1 event in 0.50 s" in result.stdout
    assert "journal " in result.stdout
    assert ": 1 event, " in result.stdout
    assert "warning: 1 message was not delivered (1 handler error)" in result.stderr
    assert "error: agents raised 1 time and were restarted" in result.stderr
    assert _plural_one(result.output) == []


def test_simulate_on_a_journal_of_one_record_of_its_own_kind_says_one_record(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append([PrivateSet(at=1.0, agent="researcher-000", key="k", value=1)])

    result = CliRunner().invoke(main, ["simulate", "--turns", "1", "--journal", str(path)])

    assert result.exit_code == 2, result.output
    assert ": 1 record but not its researchers and reviewers;" in result.stderr


def test_the_bench_table_of_a_one_core_machine_says_one_core(capsys: pytest.CaptureFixture[str]) -> None:
    cli._print_bench_table([], {"cores": 1, "python": "3.12.0", "git_commit": None}, 3)

    assert capsys.readouterr().out.startswith("cogfabric bench: median of 3 (1 core, Python 3.12.0, ")

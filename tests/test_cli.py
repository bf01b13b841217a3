from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import lmdb
from click.testing import CliRunner

from cogfabric.cli import main
from cogfabric.store import Journal
from cogfabric.store.testing import make_events


def _journal(tmp_path: Path) -> Path:
    path = tmp_path / "journal"
    with Journal.open(path) as journal:
        journal.append(make_events(10))
    return path


def test_verify_exits_zero_on_a_clean_journal(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["verify", str(_journal(tmp_path))])

    assert result.exit_code == 0
    assert "ok: 10 records verified" in result.output


def test_verify_exits_one_naming_the_seq_of_a_changed_byte(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    env = lmdb.open(str(path), max_dbs=8)
    events = env.open_db(b"events")
    with env.begin(write=True, db=events) as txn:
        value = bytearray(txn.get((4).to_bytes(8, "big")) or b"")
        value[-1] ^= 0x20
        txn.put((4).to_bytes(8, "big"), bytes(value))
    env.close()

    result = CliRunner().invoke(main, ["verify", str(path)])

    assert result.exit_code == 1
    assert "seq 4" in result.output


def test_verify_exits_two_for_a_path_that_is_not_a_journal(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["verify", str(tmp_path / "nothing")])

    assert result.exit_code == 2
    assert "no journal" in result.output


def test_the_installed_console_script_and_python_dash_m_run(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    script = shutil.which("cogfabric", path=str(Path(sys.executable).parent))
    assert script is not None

    by_script = subprocess.run(
        [script, "verify", str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    by_module = subprocess.run(
        [sys.executable, "-m", "cogfabric", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert by_script.returncode == 0, by_script.stderr
    assert by_module.returncode == 0
    assert "cogfabric" in by_module.stdout


def test_each_commands_help_keeps_its_example_on_lines_of_its_own() -> None:
    for command in ("simulate", "verify", "replay", "export", "inspect", "bench"):
        result = CliRunner().invoke(main, [command, "--help"], terminal_width=100)

        assert result.exit_code == 0, command
        assert "\\b" not in result.output, command
        example = result.output.split("Example", 1)[1].splitlines()
        assert example[1].strip().startswith(f"cogfabric {command} "), (command, example[:2])


def test_continuing_a_journal_says_when_agents_asked_for_differ_from_its_own(tmp_path: Path) -> None:
    path = str(tmp_path / "journal")
    runner = CliRunner()
    first = runner.invoke(main, ["simulate", "--agents", "3", "--turns", "2", "--journal", path])

    same = runner.invoke(main, ["simulate", "--turns", "1", "--journal", path])
    other = runner.invoke(main, ["simulate", "--agents", "5", "--turns", "1", "--journal", path])

    assert (first.exit_code, same.exit_code, other.exit_code) == (0, 0, 0), other.output
    assert "note:" not in same.output  # the default count, not asked for
    assert "note: --agents 5 is for a new journal; this one has 3" in other.stderr
    assert "continued 1 turns of 3 agents" in other.output


def test_replay_of_an_agent_that_never_was_says_so_plainly(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["replay", str(_journal(tmp_path)), "--agent", "nobody"])

    assert result.exit_code == 2
    assert "error: agent 'nobody' does not exist in the journal" in result.output

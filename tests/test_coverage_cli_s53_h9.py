"""The commands' documented outcomes that no test reached (coverage audit, s53 h9).

Each test names the line of ``src/cogfabric/cli.py`` it holds and the mutant it kills.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import click
import lmdb
import pytest
from click.testing import CliRunner, Result

import cogfabric as cf
from cogfabric.cli import EXIT_OK, EXIT_PROBLEM, EXIT_USAGE, main
from cogfabric.store import LmdbJournal
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    path = tmp_path / "j"
    with LmdbJournal.open(path, sync=False) as journal:
        journal.append(make_events(3))
    return path


def test_verify_of_a_journal_whose_chain_head_is_missing_fails_naming_no_seq(stored: Path) -> None:
    # verify's report has no first_bad_seq when the head itself is gone: the line says
    # FAILED, why, and how many records were checked. Kills: the "bad is None" branch
    # dropped ("FAILED at seq None" with a TypeError on the comparison).
    env = lmdb.open(str(stored), max_dbs=8)
    with env.begin(write=True) as txn:
        txn.delete(b"head", db=env.open_db(b"meta", txn=txn))
    env.close()
    result = CliRunner().invoke(main, ["verify", str(stored)])
    assert result.exit_code == EXIT_PROBLEM, result.output
    assert result.output == "FAILED: the chain head is missing (3 records checked)\n"


def test_a_malformed_anchor_is_a_usage_error_naming_the_option(tmp_path: Path) -> None:
    # Kills: the ValueError of parse_anchor not turned into click's BadParameter (a
    # traceback and exit 1, not exit 2 and the option named).
    export = tmp_path / "x.jsonl"
    export.write_text("", encoding="utf-8")
    result = CliRunner().invoke(main, ["verify-export", str(export), "--anchor", "zz"])
    assert result.exit_code == EXIT_USAGE, result.output
    assert "Invalid value for '--anchor': an anchor is SEQ:CHAIN" in result.output
    assert "not 'zz'" in result.output


def test_export_into_a_directory_that_holds_no_journal_says_there_is_none(tmp_path: Path) -> None:
    # An audit writes nothing in a journal's directory; a directory with no journal in
    # it is refused as no journal, as it would be without --output. Kills: _writes_into
    # going on without a data.mdb there ("is in the journal's directory" instead).
    folder = tmp_path / "folder"
    folder.mkdir()
    result = CliRunner().invoke(main, ["export", str(folder), "--output", str(folder / "all.jsonl")])
    assert result.exit_code == EXIT_USAGE, result.output
    assert result.output == f"error: no journal at {folder}\n"
    assert list(folder.iterdir()) == []


def test_inspect_of_an_empty_journal_shows_no_time_as_a_dash(tmp_path: Path) -> None:
    # Kills: _when(None) formatting None as a time (a TypeError, exit 1).
    LmdbJournal.open(tmp_path / "j").close()
    result = CliRunner().invoke(main, ["inspect", str(tmp_path / "j")])
    assert result.exit_code == EXIT_OK, result.output
    assert "\ntime      - .. -\n" in result.output


def test_trace_shows_the_state_of_a_lifecycle_change(tmp_path: Path) -> None:
    # Kills: the LifecycleChanged branch of _trace_line dropped (the line said nothing
    # of the state the agent entered).
    path = tmp_path / "j"
    with cf.Runtime.open(path, clock=cf.FakeClock()) as rt:
        rt.spawn("a")
        rt.suspend("a")
    result = CliRunner().invoke(main, ["trace", str(path), "--seq", "2"])
    assert result.exit_code == EXIT_OK, result.output
    assert '  seq 2 LifecycleChanged agent/a "SUSPENDED"\n' in result.output


def test_a_command_run_from_another_thread_than_the_main_one_runs(stored: Path) -> None:
    # A program may call main() from a worker thread, where no signal handler can be
    # set. Kills: the main-thread check of the SIGTERM guard dropped (signal.signal's
    # ValueError: the command failed).
    results: list[Result] = []
    worker = threading.Thread(
        target=lambda: results.append(CliRunner().invoke(main, ["verify", str(stored)]))
    )
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert results[0].exit_code == EXIT_OK, results[0].output
    assert results[0].output.startswith("ok: 3 records verified")


def test_main_without_standalone_mode_raises_a_usage_error_for_its_caller(tmp_path: Path) -> None:
    # click's contract: standalone_mode=False hands exceptions to the caller. Kills: that
    # branch of main dropped (a SystemExit(2) and the message on stderr instead).
    export = tmp_path / "x.jsonl"
    export.write_text("", encoding="utf-8")
    with pytest.raises(click.BadParameter, match="an anchor is SEQ:CHAIN"):
        main.main(["verify-export", str(export), "--anchor", "zz"], standalone_mode=False)


@pytest.mark.parametrize("command", ["inspect", "verify", "export"])
def test_an_audit_with_copy_of_no_journal_says_there_is_none_and_creates_nothing(
    tmp_path: Path, command: str
) -> None:
    # Kills: open_for_audit's "no journal there" branch of --copy dropped (the copy of
    # a data file that is not there failed with another error).
    result = CliRunner().invoke(main, [command, "--copy", str(tmp_path / "none")])
    assert result.exit_code == EXIT_USAGE, result.output
    assert result.output == f"error: no journal at {tmp_path / 'none'}\n"
    assert list(tmp_path.iterdir()) == []

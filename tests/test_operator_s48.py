"""An operator's walk through the command line (session 48, helper h5).

What an operator running simulations on a shared box meets at 3 a.m.: the journal's own
warnings must reach stderr (the command line configured no logging, so a data file found
emptied was started anew in silence), a journal stopped at ``max_map_size`` must say how
to go on (run again as it was, it stops again at once), and ``--help`` must list the exit
statuses a script branches on.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from typing import TYPE_CHECKING

from click.testing import CliRunner

from cogfabric.cli import main
from cogfabric.store import Journal
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def _simulate(path: Path, *extra: str) -> list[str]:
    return ["simulate", "--agents", "2", "--turns", "1", "--journal", str(path), *extra]


def test_simulate_says_on_stderr_that_it_started_anew_in_an_emptied_data_file(tmp_path: Path) -> None:
    # README: an emptied data file opened for writing "becomes a new, empty journal, with a
    # warning in the log"; the command line showed no log, so simulate said only "ran ..."
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(3))
    os.truncate(path / "data.mdb", 0)

    result = CliRunner().invoke(main, _simulate(path))

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ran 1 turn of 2 agents")
    assert "warning: " not in result.stdout  # stdout keeps the report alone
    assert f"warning: {path}: its data file is empty; a new journal is started in it" in result.stderr


def test_an_audit_that_cannot_fork_says_so_on_stderr(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(3))

    def no_fork() -> int:
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)  # the audit's child, which reads the pages first
    monkeypatch.setattr(threading, "active_count", lambda: 1)

    result = CliRunner().invoke(main, ["verify", str(path), "--json"])

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("{")  # the verdict alone on stdout
    assert "warning: cannot fork to read" in result.stderr
    assert "auditing without that check" in result.stderr


def test_the_warnings_handler_is_gone_after_the_command(tmp_path: Path) -> None:
    # a guard, not a pin of the fix: a program that runs main keeps its own logging as it was
    watched = [logging.getLogger(name) for name in ("cogfabric.store", "cogfabric._audit")]
    before = [list(logger.handlers) for logger in watched]

    CliRunner().invoke(main, ["verify", str(tmp_path / "none")])

    assert [list(logger.handlers) for logger in watched] == before


def test_a_simulation_stopped_at_max_map_size_says_to_raise_it(tmp_path: Path) -> None:
    config = tmp_path / "small.yaml"
    config.write_text("journal:\n  max_map_size: 16384\n", encoding="utf-8")

    result = CliRunner().invoke(main, _simulate(tmp_path / "j", "--config", str(config)))

    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: the simulation stopped: ")
    assert f"raise journal.max_map_size in {config}" in lines[0]
    assert result.stdout == ""


def test_help_lists_the_exit_statuses() -> None:
    result = CliRunner().invoke(main, ["--help"], terminal_width=100)

    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "Exit status, every command:" in text
    for status in ("0 done", "1 a problem in the journal", "2 a usage error", "130 Ctrl-C; 143 SIGTERM"):
        assert status in text

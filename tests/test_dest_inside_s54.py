"""A backup or salvage into the journal's own directory is refused (helper h14, session 54).

``backup J J/inner`` and ``salvage J J/saved`` succeeded: a journal then held another
inside its directory, and README's swap (``mv J J.bad && mv J.salvaged J``) failed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from cogfabric.cli import main
from cogfabric.store import Journal, JournalUnavailableError
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    path = tmp_path / "j"
    with Journal.open(path) as opened:
        opened.append(make_events(5))
    return path


@pytest.mark.parametrize("command", ["backup", "salvage"])
@pytest.mark.parametrize("inside", ["inner", "a/b", "./x/../inner"])
def test_a_destination_inside_the_journal_is_refused(journal: Path, command: str, inside: str) -> None:
    before = sorted(p.name for p in journal.iterdir())

    result = CliRunner().invoke(main, [command, str(journal), str(journal / inside)])

    assert (result.exit_code, result.stdout) == (2, ""), result.output
    assert "is inside the journal's directory" in result.stderr
    assert sorted(p.name for p in journal.iterdir()) == before  # nothing made in it


def test_journal_backup_refuses_its_own_directory_through_a_link(journal: Path, tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to(journal)
    refused = pytest.raises(JournalUnavailableError, match="inside the journal's directory")
    with Journal.open(journal, readonly=True) as opened, refused:
        opened.backup(tmp_path / "link" / "copy")


def test_a_destination_beside_the_journal_is_taken(journal: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["backup", str(journal), str(tmp_path / "j-copy")])

    assert result.exit_code == 0, result.output

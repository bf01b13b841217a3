"""README, "Auditing a journal": statements a review checked against the code."""

from __future__ import annotations

import stat
from typing import TYPE_CHECKING

from click.testing import CliRunner

from cogfabric.cli import main

from .test_cli_contract_edges import _journal

if TYPE_CHECKING:
    from pathlib import Path


def test_an_export_to_a_plain_file_it_replaces_ends_owner_only(tmp_path: Path) -> None:
    # README: a file export creates, or a plain file it replaces, "is owner-only (0600)"
    path = _journal(tmp_path, 5)
    target = tmp_path / "out.jsonl"
    target.write_text("old\n", encoding="utf-8")
    target.chmod(0o644)

    result = CliRunner().invoke(main, ["export", str(path), "-o", str(target)])

    assert result.exit_code == 0, result.output
    assert len(target.read_text(encoding="utf-8").splitlines()) == 5
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_an_export_through_a_link_to_an_existing_file_keeps_that_files_mode(tmp_path: Path) -> None:
    # README: "one it writes in place (a link to a file that exists, a pipe; a file in a
    # directory it cannot write) keeps its mode": the export is written through the link,
    # as a shell's redirection would, and the file is not made owner-only
    path = _journal(tmp_path, 5)
    target = tmp_path / "shared.jsonl"
    target.write_text("old\n", encoding="utf-8")
    target.chmod(0o644)
    link = tmp_path / "latest.jsonl"
    link.symlink_to(target)

    result = CliRunner().invoke(main, ["export", str(path), "-o", str(link)])

    assert result.exit_code == 0, result.output
    assert link.is_symlink()
    assert len(target.read_text(encoding="utf-8").splitlines()) == 5
    assert stat.S_IMODE(target.stat().st_mode) == 0o644

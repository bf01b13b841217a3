"""verify --json names a snapshot's seq only when it is a seq of the journal (helper h7, session 51).

A snapshot that disagrees with its events gives ``first_bad_seq`` = the seq it covers, as
one whose hash fails does; but a forged snapshot may claim any seq. For a hash that
fails, a seq past the last record (or 0) is reported as null: it names no record. A
rehashed snapshot claiming such a seq gave it as ``first_bad_seq`` (past ``head_seq``),
and the export a script would run on it was refused.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from cogfabric.cli import main
from cogfabric.store import Journal
from tests.test_cli_audit_edges import _agents_with_snapshots, _rehashed_snapshot

if TYPE_CHECKING:
    from pathlib import Path


def _verdict_of_a2_claiming(tmp_path: Path, claimed: int) -> tuple[int, dict[str, Any]]:
    """``verify --json``'s exit code and verdict once a2's snapshot claims seq ``claimed`` (rehashed)."""
    path = tmp_path / "journal"
    _agents_with_snapshots(path, "sync")
    with Journal.open(path, readonly=True) as journal:
        snapshot = journal.load_snapshot("agent/a2")
    assert snapshot is not None
    _rehashed_snapshot(path, "agent/a2", claimed, snapshot.data)
    result = CliRunner().invoke(main, ["verify", str(path), "--json"])
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.parametrize("claimed", [0, 10**6])
def test_a_forged_snapshot_of_no_seq_of_the_journal_has_no_first_bad_seq(
    tmp_path: Path, claimed: int
) -> None:
    code, verdict = _verdict_of_a2_claiming(tmp_path, claimed)

    assert code == 1, verdict
    assert verdict["reason"].startswith(f"agent 'a2': its snapshot covers seq {claimed}")
    assert (verdict["ok"], verdict["first_bad_seq"]) == (False, None)


@pytest.mark.parametrize(
    ("claimed", "where"), [(0, "before the first seq, 1"), (10**6, "past its stream's last record, seq ")]
)
def test_the_reason_says_which_side_of_the_records_a_forged_seq_lies(
    tmp_path: Path, claimed: int, where: str
) -> None:
    _, verdict = _verdict_of_a2_claiming(tmp_path, claimed)

    assert verdict["reason"].startswith(f"agent 'a2': its snapshot covers seq {claimed}, {where}")

"""verify --json names a disagreeing snapshot at the journal's last seq (helper h9, session 51).

A mutant of ``check_snapshots`` that took ``seq < until`` for ``seq <= until`` survived:
a snapshot covering the last record (the commonest place for the latest one) that
disagrees with its events then had ``first_bad_seq`` null.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import msgspec
from click.testing import CliRunner

from cogfabric import Config, FakeClock, JournalConfig, Runtime
from cogfabric.cli import main
from cogfabric.store import Journal
from tests.test_cli_audit_edges import _rehashed_snapshot

if TYPE_CHECKING:
    from pathlib import Path


def test_a_forged_snapshot_of_the_last_record_is_named_by_its_seq(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with Runtime.open(
        path, config=Config(journal=JournalConfig(snapshot_interval=3)), clock=FakeClock()
    ) as rt:
        agent = rt.spawn("a1")
        agent.set_private("k", 0)
        agent.set_private("k", 1)
    with Journal.open(path, readonly=True) as journal:
        snapshot = journal.load_snapshot("agent/a1")
        last = journal.last_seq
    assert snapshot is not None
    assert snapshot.seq == last  # the snapshot covers the last record of the journal
    state = msgspec.msgpack.decode(snapshot.data)
    state["private"]["k"] = "FORGED"
    _rehashed_snapshot(path, "agent/a1", snapshot.seq, msgspec.msgpack.encode(state))

    result = CliRunner().invoke(main, ["verify", str(path), "--json"])

    assert result.exit_code == 1, result.output
    verdict = json.loads(result.stdout)
    assert (verdict["ok"], verdict["head_seq"], verdict["first_bad_seq"]) == (False, last, last)
    assert verdict["reason"].startswith(f"agent 'a1': its snapshot at seq {last} does not hold the state")

"""``cogfabric simulate`` on a journal that fails verification says the run did not start.

It said "the simulation stopped", as of a run that failed half-way, though the journal
was refused when it was opened, before any turn (helper h2's auditor persona, session 51).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lmdb
from click.testing import CliRunner

from cogfabric.cli import main

if TYPE_CHECKING:
    from pathlib import Path


def test_a_journal_refused_at_open_did_not_start_the_simulation(tmp_path: Path) -> None:
    path = tmp_path / "j"
    first = CliRunner().invoke(main, ["simulate", "--journal", str(path), "--agents", "4", "--turns", "3"])
    assert first.exit_code == 0, first.output
    env = lmdb.open(str(path), max_dbs=10)
    try:
        with env.begin(write=True, db=env.open_db(b"events")) as txn:
            key, value = next(iter(txn.cursor()))
            changed = bytearray(value)
            changed[20] ^= 1  # a bit of the first record's event
            txn.put(key, bytes(changed))
    finally:
        env.close()

    again = CliRunner().invoke(main, ["simulate", "--journal", str(path), "--agents", "4", "--turns", "3"])

    assert again.exit_code == 1, again.output
    assert again.stderr.startswith(
        "error: the simulation did not start: the journal failed verification at seq 1"
    )
    assert again.stdout == ""

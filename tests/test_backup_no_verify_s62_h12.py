from __future__ import annotations

from typing import TYPE_CHECKING

from click.testing import CliRunner

from cogfabric.cli import main
from cogfabric.store import LmdbJournal
from tests.test_backup_s53_h10 import _journal

if TYPE_CHECKING:
    from pathlib import Path


def test_a_backup_with_no_verify_says_it_was_not_verified_and_holds_every_record(tmp_path: Path) -> None:
    source = _journal(tmp_path / "j", count=30)
    dest = tmp_path / "b"

    result = CliRunner().invoke(main, ["backup", str(source), str(dest), "--no-verify"])

    assert result.exit_code == 0, result.output
    size = (dest / "data.mdb").stat().st_size
    said = f"ok: backed up 30 records to {dest}, {size:,} bytes (not verified: --no-verify)\n"
    assert result.stdout == said
    with LmdbJournal.open(dest) as copy:
        assert copy.last_seq == 30
        assert len(list(copy.read())) == 30

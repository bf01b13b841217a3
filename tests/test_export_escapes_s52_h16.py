"""An export made before the JSON escapes, holding a raw character a terminal acts on, no longer verifies.

README ("Handing over an export"): such an export "is refused now as 'not written as export
writes its record'": the line is checked byte for byte against what export writes today,
which escapes the character (session 52, helper h16).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from click.testing import CliRunner

from cogfabric.cli import main
from cogfabric.events import PrivateSet
from cogfabric.store import LmdbJournal

if TYPE_CHECKING:
    from pathlib import Path


def test_an_older_export_with_a_raw_bidi_override_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with LmdbJournal.open(path) as journal:
        journal.append([PrivateSet(at=1.0, agent="a", key="k", value="ok\u202eevil")])
    runner = CliRunner()
    exported = runner.invoke(main, ["export", str(path), "--verifiable"])
    assert exported.exit_code == 0, exported.output
    assert b"\\u202e" in exported.stdout_bytes
    older = exported.stdout_bytes.replace(b"\\u202e", "\u202e".encode())  # as export wrote it before

    assert runner.invoke(main, ["verify-export", "-"], input=exported.stdout_bytes).exit_code == 0
    checked = runner.invoke(main, ["verify-export", "-"], input=older)

    assert checked.exit_code == 1
    assert "line 1: it is not written as export writes its record" in checked.output

"""simulate's summary names its journal with what a terminal acts on escaped (session 52, helper h16).

The summary goes to stdout: click drops ESC sequences only when stdout is not a terminal,
so a journal directory named with one moved the cursor on a terminal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from click.testing import CliRunner

from cogfabric.cli import main

if TYPE_CHECKING:
    from pathlib import Path


def test_the_summary_escapes_the_journal_path(tmp_path: Path) -> None:
    path = tmp_path / "sim\x1b[31mred\rx"

    result = CliRunner().invoke(
        main, ["simulate", "--agents", "2", "--turns", "2", "--journal", str(path)], color=True
    )

    assert result.exit_code == 0, result.output
    [line] = [line for line in result.stdout.splitlines() if line.startswith("  journal ")]
    assert "\x1b" not in line
    assert "\r" not in line
    assert "sim\\x1b[31mred\\rx" in line

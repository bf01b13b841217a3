"""The replay table is as wide as ``COLUMNS`` says (a terminal's width), else 120 columns.

It was 120 columns always: cut short on a narrower terminal, and no wider on a wide one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

import cogfabric as cf
from cogfabric.cli import main

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as rt:
        agent = rt.spawn("researcher-with-a-long-name-001", task_id="a-task-with-a-long-name-too")
        agent.set_private("notes", {"text": "x" * 300})
    return tmp_path / "j"


def _widest(journal: Path, env: dict[str, str]) -> int:
    result = CliRunner(env=env).invoke(
        main, ["replay", str(journal), "--agent", "researcher-with-a-long-name-001"]
    )
    assert result.exit_code == 0, result.output
    return max(len(line) for line in result.output.splitlines())


def test_output_that_is_no_terminal_is_120_columns_wide(journal: Path) -> None:
    assert _widest(journal, {}) == 120


@pytest.mark.parametrize("columns", [70, 200])
def test_columns_sets_the_width(journal: Path, columns: int) -> None:
    assert _widest(journal, {"COLUMNS": str(columns)}) == columns

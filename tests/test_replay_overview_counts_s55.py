"""``replay JOURNAL`` heads its agents' table with how many are in each lifecycle.

On a journal of thousands of agents the table runs to thousands of rows: the count per
lifecycle above it says at once whether any agent is suspended or retired.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from click.testing import CliRunner

from cogfabric import FakeClock, Runtime
from cogfabric.cli import main

if TYPE_CHECKING:
    from pathlib import Path


def test_the_agents_line_counts_each_lifecycle_most_first(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Runtime.open(path, clock=FakeClock()) as runtime:
        for i in range(6):
            runtime.spawn(f"a{i}")
        runtime.suspend("a1")
        runtime.suspend("a2")
        runtime.retire("a3")
        runtime.kill("a4")  # no longer exists: not counted

    result = CliRunner().invoke(main, ["replay", str(path)])

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "5 agents at seq 10 (IDLE 2, SUSPENDED 2, RETIRED 1)"


def test_no_agents_no_counts(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Runtime.open(path, clock=FakeClock()) as runtime:
        runtime.memory.create_session("s1", agent_id="x")

    result = CliRunner().invoke(main, ["replay", str(path)])

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0].startswith("0 agents at seq ")
    assert "(" not in result.stdout.splitlines()[0]

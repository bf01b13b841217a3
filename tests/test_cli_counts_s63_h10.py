"""Counts of none, one, two and thousands in the commands' words (helper h10's review of h4, s63)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from cogfabric import cli
from cogfabric.cli import _many, main
from tests.test_cli_counts_s63_h4 import _journal

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize(
    ("count", "grouped", "said"),
    [
        (0, False, "0 records"),
        (1, False, "1 record"),
        (1, True, "1 record"),
        (2, False, "2 records"),
        (1000, False, "1000 records"),  # "ok: 5468 records verified", as README shows it
        (1000, True, "1,000 records"),
        (1_234_567, True, "1,234,567 records"),
    ],
)
def test_many_says_a_count_plural_unless_one_grouped_when_asked(count: int, grouped: bool, said: str) -> None:
    assert _many(count, "record", grouped=grouped) == said


def test_verify_of_thousands_groups_the_step_line_and_not_the_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "_stderr_is_terminal", lambda: True)  # the steps' lines too

    result = CliRunner().invoke(main, ["verify", str(_journal(tmp_path, 1000))])

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ok: 1000 records verified, head at seq 1000; ")
    assert "checking the hash chain of 1,000 records, each decoded..." in result.stderr

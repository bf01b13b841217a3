"""README's seed advice, held to what `simulate` does (session 52, helper h16).

README: a run continuing a journal with another ``--seed`` warns "and which seed continues
the journal, unless its researchers' last answers name more than one seed already". The
check reads each researcher's last answer only: an earlier run that changed the seed of
every researcher left one seed there, and that one is named (README said no seed was
named once any earlier run had changed it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from click.testing import CliRunner

from cogfabric.cli import main

if TYPE_CHECKING:
    from pathlib import Path


def test_an_earlier_change_of_every_researchers_seed_leaves_the_newest_seed_named(tmp_path: Path) -> None:
    path = tmp_path / "j"

    def simulate(*options: str) -> str:
        result = CliRunner().invoke(main, ["simulate", "--journal", str(path), "--agents", "3", *options])
        assert result.exit_code == 0, result.output
        return result.output

    simulate("--turns", "4", "--seed", "7")  # two researchers, one reviewer
    changed = simulate("--turns", "2", "--seed", "0")  # each researcher's last answer is seed 0's
    back = simulate("--turns", "1", "--seed", "7")

    assert "(--seed 7 continues with the journal's)" in changed
    assert "last answered with --seed 0, this run's with --seed 7" in back
    assert "(--seed 0 continues with the journal's)" in back
    assert "named more than one seed already" not in back

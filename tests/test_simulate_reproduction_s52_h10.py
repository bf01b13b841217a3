"""`cogfabric simulate`'s reproduction warnings: no false one, the right count and advice (s52, helper h10).

README: a run "in which sessions that held messages ended and were replaced" warns (the
turns after lose the earlier messages); a session that held none loses nothing, so a
journal set up (its sessions made, no turn taken) and continued after they ended gives
its seed's states. A journal continued with another ``--seed`` names the seed that
continues it, unless an earlier run changed it already: no seed does then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from click.testing import CliRunner

from cogfabric._simulation import run_simulation
from cogfabric.actors import Runtime
from cogfabric.cli import main
from cogfabric.events import SessionMessageAdded
from cogfabric.store import LmdbJournal
from tests.test_simulate_determinism_s52_h5 import _states

if TYPE_CHECKING:
    from pathlib import Path


def _end_every_session(path: Path) -> None:
    with Runtime.open(path) as rt:  # as a TTL passed between the runs would
        for session in rt.memory.sessions():
            rt.memory.delete_session(session)


def test_sessions_that_held_no_message_end_and_are_replaced_without_a_warning(tmp_path: Path) -> None:
    split = tmp_path / "split"
    run_simulation(split, agents=6, turns=0, seed=3)  # set up, sessions made, stopped before a turn
    _end_every_session(split)

    result = CliRunner().invoke(main, ["simulate", "--journal", str(split), "--turns", "9", "--seed", "3"])
    run_simulation(tmp_path / "whole", agents=6, turns=9, seed=3)

    assert result.exit_code == 0, result.output
    assert "warning" not in result.output
    assert _states(tmp_path / "whole") == _states(split)  # the seed's states: nothing was lost


def test_only_the_sessions_that_held_messages_are_counted_as_replaced(tmp_path: Path) -> None:
    path = tmp_path / "j"
    run_simulation(path, agents=20, turns=3, seed=1)  # 16 researchers, 3 of them took a turn
    with LmdbJournal.open(path, readonly=True) as journal:
        held = {r.event.session for r in journal.read() if isinstance(r.event, SessionMessageAdded)}
    _end_every_session(path)

    report = run_simulation(path, turns=1, seed=1)

    assert 3 <= len(held) < 20  # the researchers that took a turn, a reviewer or two
    assert report.sessions_replaced == len(held)


def test_a_journal_whose_seed_was_changed_already_names_no_seed_to_continue_it(tmp_path: Path) -> None:
    path = tmp_path / "j"

    def simulate(*options: str) -> str:
        result = CliRunner().invoke(main, ["simulate", "--journal", str(path), "--agents", "3", *options])
        assert result.exit_code == 0, result.output
        return result.output

    simulate("--turns", "4", "--seed", "7")
    changed = simulate("--turns", "1", "--seed", "0")  # one researcher's last answer is seed 0's
    back = simulate("--turns", "1", "--seed", "7")  # as the first warning advised

    assert "(--seed 7 continues with the journal's)" in changed
    assert "last answered with --seed 0, this run's with --seed 7" in back
    assert "continues with the journal's" not in back  # --seed 0 would not: the other is seed 7's
    assert "named more than one seed already, so none continues it as one run" in back

"""`cogfabric simulate` reproduces a seed, and says when a run cannot (session 52, helper h5).

README: "a scripted model, deterministic for a seed", and a run whose messages went
undelivered "warns that the agents' states may differ from another run of the seed".
Two more things made a run differ from another of its seed without a word: a session
that ended (its wall-clock TTL passed, between two runs of a journal say) and was
replaced, whose agent's later turns lost the earlier messages from their windows; and a
journal continued with another ``--seed`` (the default 0, a forgotten option), whose
states then follow neither seed.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from click.testing import CliRunner

from cogfabric._audit import agent_view, session_view
from cogfabric._simulation import run_simulation
from cogfabric.actors import Runtime
from cogfabric.cli import main
from cogfabric.store import LmdbJournal

if TYPE_CHECKING:
    from pathlib import Path

    from click.testing import Result

_SESSION_ID = re.compile(r"session_([a-z]+-[0-9]+)_[0-9a-f]{16}")


def _states(path: Path) -> dict[str, Any]:
    """Every agent as replay rebuilds it at the end, and its session's messages, but for ids and times.

    A reviewer's session lists its reviews in the order they came (README): its
    exchanges are compared as a sorted list.
    """
    states: dict[str, Any] = {}
    with LmdbJournal.open(path, readonly=True) as journal:
        for stream in journal.streams("agent/"):
            agent = stream.removeprefix("agent/")
            view = agent_view(journal, agent, None)
            assert view is not None
            session = session_view(journal, view["private"]["session"], None)
            assert session is not None
            messages = [(m["role"], m["content"]) for m in session["messages"]]
            if agent.startswith("reviewer-"):  # its seed message, then each review and its answer
                reviews = sorted(zip(messages[1::2], messages[2::2], strict=True))
                messages = [messages[0], *(m for review in reviews for m in review)]
            latest = view["checkpoints"]["latest"]
            states[agent] = {
                "task": view["task_shared"],
                "private": {k: _SESSION_ID.sub(r"\1", str(v)) for k, v in view["private"].items()},
                "cognitive": view["cognitive"],
                "checkpoints": (view["checkpoints"]["taken"], latest and latest["state"]),
                "messages": messages,
            }
    return states


def test_a_run_split_in_two_in_batch_durability_leaves_every_agent_as_one_run_does(tmp_path: Path) -> None:
    whole = run_simulation(tmp_path / "whole", agents=6, turns=33, seed=3)
    run_simulation(tmp_path / "split", agents=6, turns=14, seed=3, durability="batch")
    rest = run_simulation(tmp_path / "split", agents=6, turns=19, seed=3, durability="batch")

    a, b = _states(tmp_path / "whole"), _states(tmp_path / "split")

    assert (whole.dead_letters, rest.dead_letters) == (0, 0)
    assert (whole.sessions_replaced, rest.sessions_replaced) == (0, 0)
    assert rest.journal_seed == 3
    assert len(a) == 6
    assert any("last_review" in state["private"] for state in a.values())
    assert a == b


def _simulate(path: Path, *options: str) -> Result:
    return CliRunner().invoke(main, ["simulate", "--journal", str(path), "--agents", "3", *options])


def test_continuing_a_journal_with_another_seed_warns(tmp_path: Path) -> None:
    path = tmp_path / "j"
    assert _simulate(path, "--turns", "4", "--seed", "7").exit_code == 0

    other = _simulate(path, "--turns", "4")  # --seed forgotten: 0
    again = _simulate(path, "--turns", "4")  # the journal's last answers are seed 0's now
    same = run_simulation(path, turns=4, seed=0)

    assert other.exit_code == 0, other.output
    assert "warning: this journal's model last answered with --seed 7, this run's with --seed 0" in (
        other.output
    )
    assert "--seed 7 continues with the journal's" in other.output
    assert again.exit_code == 0, again.output
    assert "warning" not in again.output
    assert same.journal_seed == 0


def test_a_continued_run_whose_sessions_ended_warns_that_its_seed_may_not_reproduce(tmp_path: Path) -> None:
    path = tmp_path / "j"
    first = run_simulation(path, agents=3, turns=4)
    with Runtime.open(path) as rt:  # as a TTL passed between the runs would
        for session in rt.memory.sessions():
            rt.memory.delete_session(session)

    result = _simulate(path, "--turns", "4")
    after = run_simulation(path, turns=4)

    assert first.sessions_replaced == 0  # a new journal's first sessions replace none
    assert first.reviews == 0  # the reviewer's session held no message: it lost none (helper h10)
    assert result.exit_code == 0, result.output
    ended = "warning: 2 sessions ended (their TTL passed, or they were evicted or deleted) and were replaced"
    assert ended in result.output
    assert f"cogfabric export {path} --type SessionCreated --after " in result.output
    assert after.sessions_replaced == 0

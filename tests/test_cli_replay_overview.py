"""`cogfabric replay JOURNAL` with neither --agent nor --session: every agent and session at a seq."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from click.testing import CliRunner

from cogfabric import FakeClock, Runtime
from cogfabric.cli import main

if TYPE_CHECKING:
    from pathlib import Path


def _journal(tmp_path: Path) -> tuple[Path, int]:
    """Agents a, b (a's child) and c, b killed last; two sessions of a's, one deleted.

    Returns the journal and the seq before the kill.
    """
    path = tmp_path / "j"
    with Runtime.open(path, clock=FakeClock()) as rt:
        rt.spawn("a", task_id="t")
        rt.spawn("b", parent="a")
        rt.spawn("c")
        rt.agent("a").set_private("x", 1)
        rt.agent("a").set_private("y", 2)
        rt.suspend("c")
        kept = rt.memory.create_session("u", agent_id="a")
        gone = rt.memory.create_session("u", agent_id="a")
        rt.memory.add_message(kept, "user", "hi")
        rt.memory.delete_session(gone)
        rt.flush()
        assert rt._journal is not None
        before_kill = rt._journal.last_seq
        rt.kill("b")
    return path, before_kill


def _overview(path: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["replay", str(path), "--json", *args])
    assert result.exit_code == 0, result.output
    overview: dict[str, Any] = json.loads(result.output)
    return overview


def test_replay_with_no_agent_or_session_lists_every_one_alive_at_the_seq(tmp_path: Path) -> None:
    path, before_kill = _journal(tmp_path)

    end = _overview(path)
    before = _overview(path, "--at", str(before_kill))

    assert [
        (a["agent"], a["lifecycle"], a["parent"], a["task_id"], a["private_values"]) for a in end["agents"]
    ] == [
        ("a", "IDLE", None, "t", 2),
        ("c", "SUSPENDED", None, None, 0),
    ]
    assert [a["agent"] for a in before["agents"]] == ["a", "b", "c"]  # b before its kill
    assert before["at"] == before_kill
    assert [(s["agent_id"], s["user_id"], s["messages"]) for s in end["sessions"]] == [
        ("a", "u", 2)
    ]  # the deleted one gone
    # a row agrees with the whole view of that agent
    whole = _overview(path, "--agent", "a")
    assert (whole["lifecycle"], len(whole["private"])) == (end["agents"][0]["lifecycle"], 2)


def test_replay_with_no_agent_or_session_prints_two_tables(tmp_path: Path) -> None:
    path, _ = _journal(tmp_path)

    result = CliRunner().invoke(main, ["replay", str(path)])

    assert result.exit_code == 0, result.output
    assert "2 agents at seq" in result.output
    assert "1 session at seq" in result.output
    assert '"SUSPENDED"' in result.output
    assert '"a"' in result.output  # ids quoted as in the other columns (a's child b names it so)


def test_the_overview_cuts_a_long_value_as_the_agent_view_does(tmp_path: Path) -> None:
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        rt.spawn("a", task_id="t" * 100_000)

    result = CliRunner().invoke(main, ["replay", str(tmp_path / "j")])

    assert result.exit_code == 0, result.output
    assert "(100,002 characters; --json shows it whole)" in result.output
    assert len(result.output) < 20_000


def test_the_overview_says_when_there_is_nothing_on_two_lines(tmp_path: Path) -> None:
    with Runtime.open(tmp_path / "j", clock=FakeClock()):
        pass

    result = CliRunner().invoke(main, ["replay", str(tmp_path / "j")])

    assert result.output.splitlines() == ["0 agents at seq 0", "0 sessions at seq 0"]


def test_replay_of_an_empty_journal_lists_nothing(tmp_path: Path) -> None:
    with Runtime.open(tmp_path / "j", clock=FakeClock()):
        pass

    result = CliRunner().invoke(main, ["replay", str(tmp_path / "j"), "--json"])

    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {"at": 0, "agents": [], "sessions": []}

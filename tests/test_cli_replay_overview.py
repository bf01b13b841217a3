"""`cogfabric replay JOURNAL` with neither --agent nor --session: every agent and session at a seq."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import msgspec
from click.testing import CliRunner

from cogfabric import FakeClock, Runtime
from cogfabric.cli import main
from cogfabric.store import LmdbJournal

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

    from cogfabric import AgentContext
    from cogfabric.events import IpcMessage
    from cogfabric.store import VerifyReport


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


class _Quiet:
    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
        return None


def test_a_row_shows_the_agent_or_session_as_it_was_at_the_seq(tmp_path: Path) -> None:
    # An auditor reads each field of a row as of --at: a parent, a behavior, private values
    # of a suspended agent, a session's messages and last access, an empty session too.
    path, clock = tmp_path / "j", FakeClock()
    start = clock.now()
    with Runtime.open(path, clock=clock, behaviors={"quiet": _Quiet}) as rt:
        rt.spawn("a", behavior="quiet")
        rt.spawn("b", parent="a", task_id="t").set_private("k", 1)
        rt.suspend("b")
        talked = rt.memory.create_session("u", agent_id="b")
        silent = rt.memory.create_session("v")
        clock.advance(5)
        rt.memory.add_message(talked, "user", "hi")
        accessed = rt.memory.get_session(talked).accessed_at
        rt.flush()
        assert rt._journal is not None
        at = rt._journal.last_seq
        clock.advance(5)
        rt.memory.add_message(talked, "user", "later")  # after --at: none of it is shown
        rt.resume("b")
        rt.agent("b").set_private("k2", 2)

    overview = _overview(path, "--at", str(at))

    assert overview["agents"] == [
        {
            "agent": "a",
            "lifecycle": "IDLE",
            "task_id": None,
            "parent": None,
            "behavior": "quiet",
            "private_values": 0,
        },
        {
            "agent": "b",
            "lifecycle": "SUSPENDED",
            "task_id": "t",
            "parent": "a",
            "behavior": None,
            "private_values": 1,
        },
    ]
    assert sorted(overview["sessions"], key=lambda s: s["messages"]) == [  # a seed message each
        {"session": silent, "agent_id": None, "user_id": "v", "messages": 1, "accessed_at": start},
        {"session": talked, "agent_id": "b", "user_id": "u", "messages": 2, "accessed_at": accessed},
    ]


def test_the_overview_table_escapes_what_a_terminal_would_act_on_and_shows_no_markup(tmp_path: Path) -> None:
    # A journal's text comes from its agents: an ESC in an id could erase a line of the
    # audit, a bidi override reorder it, and "[red]" in a value read as rich markup.
    path = tmp_path / "j"
    with Runtime.open(path, clock=FakeClock()) as rt:
        rt.spawn("zz\x1b[2K", task_id="t\u202e")
        rt.memory.create_session("[red]u[/red]", agent_id="zz\x1b[2K")
        rt.flush()
        assert rt._journal is not None
        last = rt._journal.last_seq

    result = CliRunner().invoke(main, ["replay", str(path)], color=True)  # color: click strips no ESC

    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output
    assert "\u202e" not in result.output
    assert '"zz\\u001b[2K"' in result.output
    assert '"t\\u202e"' in result.output
    assert '"[red]u[/red]"' in result.output
    assert f"1 agent at seq {last}" in result.output


def test_the_overview_stops_at_the_seq_it_verified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Records a running simulation appends after the check are not shown unverified: here
    # the check ended before the kill, as if the kill was appended after it.
    path, before_kill = _journal(tmp_path)
    verify = LmdbJournal.verify

    def verified_up_to_before_the_kill(journal: LmdbJournal, *args: Any, **kwargs: Any) -> VerifyReport:
        return msgspec.structs.replace(verify(journal, *args, **kwargs), head_seq=before_kill)

    monkeypatch.setattr(LmdbJournal, "verify", verified_up_to_before_the_kill)
    overview = _overview(path)

    assert overview["at"] == before_kill
    assert [a["agent"] for a in overview["agents"]] == ["a", "b", "c"]


def test_a_long_value_is_escaped_only_as_far_as_it_is_shown() -> None:
    # Escaping a whole value of megabytes to print 2,000 characters of it built a string per
    # character once one character needed escaping (a U+202E, a zero-width joiner).
    import tracemalloc  # noqa: PLC0415

    from cogfabric.cli import _cell  # noqa: PLC0415

    text = json.dumps("\u202e" * 2_000_000, ensure_ascii=False)
    tracing = tracemalloc.is_tracing()  # under python -X tracemalloc: measured from here, left on
    tracemalloc.start()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    try:
        shown = _cell(text)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        if not tracing:
            tracemalloc.stop()

    assert shown.startswith('"\\u202e\\u202e')
    assert shown.endswith("... (2,000,002 characters; --json shows it whole)")
    assert peak < 10 * 2**20  # escaping all of it: millions of strings

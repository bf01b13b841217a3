"""`cogfabric replay`'s tables at the edges mutation testing found unpinned.

The session table: a message count of one, text JSON leaves as it is (escaped for the
terminal all the same), a text of exactly 200 JSON characters, a clock at or before the
epoch, one row a field, a time's seconds as --json shows them, a field of exactly 2,000
JSON characters. The agent table: a status of exactly 200 characters, journal text in a
message's kind and status escaped, a hand-written kind cut at 200 characters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

import cogfabric as cf
from cogfabric.cli import main
from cogfabric.events import AgentSpawned, IpcDeadLettered, IpcMessage
from cogfabric.store import Journal
from tests.test_cli_replay_session_lines import _messages_lines, _session

if TYPE_CHECKING:
    from pathlib import Path


def _replay(path: Path, *args: str) -> str:
    shown = CliRunner().invoke(main, ["replay", str(path), *args], color=True)  # color: click strips no ESC
    assert shown.exit_code == 0, shown.output
    return shown.output


def _flat(output: str) -> str:
    """A table's text without its white space and cell borders: a folded cell reads whole."""
    return "".join(c for c in output if not c.isspace() and c != "│")


def _field_rows(output: str) -> list[tuple[str, str]]:
    """The table's rows that name a field: (field, the first line of its value)."""
    rows = [line.split("│") for line in output.splitlines() if line.startswith("│")]
    return [(row[1].strip(), row[2].strip()) for row in rows if row[1].strip()]


def test_a_new_sessions_one_message_is_counted_in_the_singular(tmp_path: Path) -> None:
    session = _session(tmp_path / "j")

    assert _messages_lines(tmp_path / "j", session) == ["1 message:", '1. "system": "New session started"']


def test_text_json_leaves_as_it_is_is_still_escaped_for_the_terminal(tmp_path: Path) -> None:
    # JSON escapes only what is below U+0020: a bidi override, DEL, a C1 control (NEL)
    # and a line separator stay raw in a JSON string, and must not reach the terminal
    session = _session(tmp_path / "j", cf.Message(role="user\u202e", content="a\u202eb\x7fc\x85d\u2028e"))

    output = _replay(tmp_path / "j", "--session", session)

    assert not any(c in output for c in "\u202e\x7f\x85\u2028")
    # written as JSON escapes them (session 52: encode_json escapes them itself)
    assert r'2. "user\u202e": "a\u202eb\u007fc\u0085d\u2028e"' in output


def test_a_text_of_exactly_200_json_characters_is_shown_whole(tmp_path: Path) -> None:
    session = _session(
        tmp_path / "j",
        cf.Message(role="user", content="y" * 197 + "Z"),  # its JSON text: 200 characters
        cf.Message(role="user", content="w" * 198 + "Z"),  # 201
    )

    folded = "".join(_messages_lines(tmp_path / "j", session)[2:]).replace(" ", "")

    assert folded == '2."user":"' + "y" * 197 + 'Z"' + '3."user":"' + "w" * 198 + "Z...(201characters)"


@pytest.mark.parametrize(
    ("start", "shown"),
    [(0.0, "0.0 (1970-01-01T00:00:00.000+00:00)"), (-1.5, "-1.5 (1969-12-31T23:59:58.500+00:00)")],
    ids=["epoch", "before-it"],
)
def test_a_clock_at_or_before_the_epoch_shows_its_utc_date(tmp_path: Path, start: float, shown: str) -> None:
    path = tmp_path / "j"
    with cf.Runtime.open(path, clock=cf.FakeClock(start)) as rt:
        session = rt.memory.create_session("u")

    rows = dict(_field_rows(_replay(path, "--session", session)))

    assert rows["created_at"] == shown
    assert rows["accessed_at"] == shown


def test_each_field_of_a_session_is_one_row_and_its_seq_is_in_the_title(tmp_path: Path) -> None:
    session = _session(tmp_path / "j", cf.Message(role="user", content="hi"))

    output = _replay(tmp_path / "j", "--session", session)

    assert output.splitlines()[0].strip() == f"session {session} at seq 2"
    assert [field for field, _ in _field_rows(output)] == [
        "user_id",
        "agent_id",
        "created_at",
        "accessed_at",
        "messages",
    ]


def test_a_times_seconds_are_shown_as_json_shows_them_beside_what_no_date_can_hold(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with cf.Runtime.open(path, clock=cf.FakeClock(1e16)) as rt:  # past the year 9999
        session = rt.memory.create_session("u")

    rows = dict(_field_rows(_replay(path, "--session", session)))
    as_json = _replay(path, "--session", session, "--json")

    assert '"created_at": 1e16,' in as_json
    assert rows["created_at"] == "1e16 (1e+16)"  # the seconds as --json shows them, then Python's


@pytest.mark.parametrize(("users", "cut"), [(1998, False), (1999, True)], ids=["2000", "2001"])
def test_a_field_of_exactly_2000_json_characters_is_shown_whole(
    tmp_path: Path, users: int, cut: bool
) -> None:
    path = tmp_path / "j"
    with cf.Runtime.open(path) as rt:
        session = rt.memory.create_session("u" * users)  # its JSON text: 2 characters more

    user_id = _flat(_replay(path, "--session", session)).split("user_id", 1)[1].split("agent_id", 1)[0]

    assert user_id == (
        f'"{"u" * 1999}... (2,001 characters; --json shows it whole)' if cut else f'"{"u" * 1998}"'
    ).replace(" ", "")


def _dead_letter(path: Path, reason: str, kind: str = "send") -> Path:
    """A journal where x sent a a message of ``kind`` that was dead-lettered for ``reason``."""
    sent = IpcMessage(at=1.0, sender="x", recipient="a", topic="t", kind=kind)
    with Journal.open(path) as journal:
        journal.append([AgentSpawned(at=0.0, agent=agent) for agent in "xa"])
        journal.append([sent])
        journal.append(
            [IpcDeadLettered(at=2.0, message_id=sent.id, sender="x", recipient="a", topic="t", reason=reason)]
        )
    return path


def test_a_status_of_exactly_200_characters_is_shown_whole_and_a_longer_one_cut_at_200(
    tmp_path: Path,
) -> None:
    # "dead-lettered: " is 15 characters: a reason of 185 makes a status of 200
    whole = _flat(_replay(_dead_letter(tmp_path / "whole", "r" * 184 + "Z"), "--agent", "x"))
    cut = _flat(_replay(_dead_letter(tmp_path / "cut", "r" * 185 + "Z"), "--agent", "x"))

    # the IPC row ends there: the next one is its failures' (none)
    assert f'"x"->"a""t":dead-lettered:{"r" * 184}Zfailuresnone└' in whole
    assert f'"x"->"a""t":dead-lettered:{"r" * 185}...failuresnone└' in cut


def test_journal_text_in_a_messages_kind_and_status_is_escaped_in_the_agent_table(tmp_path: Path) -> None:
    # a kind and a reason are any text an append gives them, and are not JSON strings
    path = _dead_letter(tmp_path / "j", "no\x1b[2J\nseq 9 forged", kind="send\x1b[1A\u202e")

    output = _replay(path, "--agent", "x")

    assert not any(c in output for c in "\x1b\u202e")
    assert not any(line.strip("│ ").startswith("seq 9 forged") for line in output.splitlines())
    assert r'seq 3 send\x1b[1A\u202e "x" -> "a" "t": dead-lettered: no\x1b[2J\nseq 9 forged' in output


def test_a_hand_written_kind_is_cut_in_the_agent_table_as_trace_cuts_it(tmp_path: Path) -> None:
    # the runtime writes send, request, reply or broadcast; a journal written by hand may
    # hold any text there: a megabyte of it must not make a megabyte of table
    path = tmp_path / "kj"
    with Journal.open(path) as journal:
        journal.append([AgentSpawned(at=0.0, agent=a) for a in "xa"])
        journal.append([IpcMessage(at=1.0, sender="x", recipient="a", topic="t", kind="k" * 100_000)])

    shown = CliRunner().invoke(main, ["replay", str(path), "--agent", "x"])

    assert shown.exit_code == 0, shown.output
    assert len(shown.output) < 5_000
    assert "k" * 200 + "..." in shown.output.replace("│", "").replace("\n", "").replace(" ", "")

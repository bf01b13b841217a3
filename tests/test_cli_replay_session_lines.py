"""`cogfabric replay --session`: a session's messages a line each, not one JSON blob."""

from __future__ import annotations

from typing import TYPE_CHECKING

from click.testing import CliRunner

import cogfabric as cf
from cogfabric.cli import main

if TYPE_CHECKING:
    from pathlib import Path


def _session(path: Path, *messages: cf.Message) -> str:
    with cf.Runtime.open(path) as rt:
        session = rt.memory.create_session("u")
        for message in messages:
            rt.memory.add_structured_message(session, message)
    return session


def _messages_lines(path: Path, session: str) -> list[str]:
    """The table's lines from the messages row on, each cell's text without the borders."""
    shown = CliRunner().invoke(main, ["replay", str(path), "--session", session])
    assert shown.exit_code == 0, shown.output
    rows = [line.strip("│ ").split("│") for line in shown.output.splitlines() if line.startswith("│")]
    start = next(i for i, row in enumerate(rows) if row[0].strip() == "messages")
    return [row[-1].strip() for row in rows[start:]]


def test_each_message_is_a_line_with_what_it_holds_beside_its_text(tmp_path: Path) -> None:
    call = cf.ToolCall(id="call_1", function=cf.ToolCallFunction(name="search", arguments="{}"))
    session = _session(
        tmp_path / "j",
        cf.Message(role="user", content="find X", turn_id="turn-1"),
        cf.Message(role="assistant", content="", turn_id="turn-1", tool_calls=[call]),
        cf.Message(
            role="tool_result", content="[]", tool_call_id="call_1", event_kind="tool", parent_id="p1"
        ),
        cf.Message(role="assistant", content="none", artifact_refs=["a", "b"]),
    )

    assert _messages_lines(tmp_path / "j", session) == [
        "5 messages:",
        '1. "system": "New session started"',
        '2. "user": "find X" turn "turn-1"',
        '3. "assistant": "" turn "turn-1" (1 tool call)',
        '4. "tool_result": "[]" tool call id "call_1" event "tool" parent "p1"',
        '5. "assistant": "none" (2 artifacts)',
    ]


def test_only_the_latest_50_are_listed_numbered_in_the_session(tmp_path: Path) -> None:
    session = _session(tmp_path / "j", *(cf.Message(role="user", content=f"m{n}") for n in range(2, 62)))

    lines = _messages_lines(tmp_path / "j", session)

    assert lines[0] == "61 messages, the latest 50:"
    assert lines[1] == '12. "user": "m12"'
    assert lines[-1] == '61. "user": "m61"'
    assert len(lines) == 51


def test_text_is_escaped_and_cut_as_json_strings(tmp_path: Path) -> None:
    session = _session(
        tmp_path / "j",
        cf.Message(role="user", content="two\nlines \x1b[31mred"),
        cf.Message(role="assistant", content="x" * 500),
    )

    lines = _messages_lines(tmp_path / "j", session)

    assert lines[2] == r'2. "user": "two\nlines \u001b[31mred"'
    folded = "".join(lines[3:]).replace(" ", "")  # the table folds a long line at its spaces
    assert folded == '3."assistant":"' + "x" * 199 + "...(502characters)"  # 200 of its JSON text's 502


def test_a_sessions_times_show_their_utc_date_beside_the_seconds(tmp_path: Path) -> None:
    path = tmp_path / "j"
    clock = cf.FakeClock(1_700_000_000.0)
    with cf.Runtime.open(path, clock=clock) as rt:
        session = rt.memory.create_session("u")
        clock.advance(61.5)
        rt.memory.add_message(session, "user", "hi")

    shown = CliRunner().invoke(main, ["replay", str(path), "--session", session])

    assert shown.exit_code == 0, shown.output
    assert "│ created_at  │ 1700000000.0 (2023-11-14T22:13:20.000+00:00)" in shown.output
    assert "│ accessed_at │ 1700000061.5 (2023-11-14T22:14:21.500+00:00)" in shown.output

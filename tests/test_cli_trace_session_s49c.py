"""``trace``'s session on a model call's line, for every kind that names one (session 49, review).

``test_cli_trace_session_s49`` runs a turn: it shows an output's and a refusal's
session, but no provider failure's, and no line of another kind. Here each of the
three kinds is journaled by hand, with a session and without, beside a session
record (whose stream names its session already): the line names the session
whenever the record does, as ``--json`` holds it, an empty name too.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from cogfabric.events import LlmCallFailed, LlmOutputRecorded, Message, PromptRejected, SessionMessageAdded
from tests.test_cli_trace import _journal, _message
from tests.test_cli_trace_pins import _text

if TYPE_CHECKING:
    from pathlib import Path

_CALL: dict[str, Any] = {
    "at": 1.0,
    "cause": "m",
    "agent": "a",
    "provider": "p",
    "model": "x",
    "prompt_hash": "h",
}


def test_each_model_call_kind_names_its_session_and_none_without_one(tmp_path: Path) -> None:
    path = _journal(
        tmp_path / "j",
        [
            _message("m", "driver", "a", "tick"),
            LlmCallFailed(id="f1", error="down", session="s1", **_CALL),
            LlmCallFailed(id="f2", error="down", **_CALL),
            PromptRejected(at=1.0, id="r1", cause="m", agent="a", length=9, limit=4, session="s1"),
            PromptRejected(at=1.0, id="r2", cause="m", agent="a", length=9, limit=4),
            LlmOutputRecorded(id="o1", output="yes", session='s"\n2', **_CALL),
            SessionMessageAdded(
                at=1.0, id="u", cause="m", session="s1", message=Message(role="user", content="hi")
            ),
        ],
    )

    assert _text(path, "--seq", "1")[-6:] == [
        '  seq 2 LlmCallFailed agent/a error "down" session "s1"',
        '  seq 3 LlmCallFailed agent/a error "down"',
        '  seq 4 PromptRejected agent/a "too_long" length 9 limit 4 session "s1"',
        '  seq 5 PromptRejected agent/a "too_long" length 9 limit 4',
        '  seq 6 LlmOutputRecorded agent/a output "yes" session "s\\"\\n2"',  # escaped: no line faked
        '  seq 7 SessionMessageAdded session/s1 role "user"',  # its stream names the session
    ]


def test_an_empty_session_name_is_shown_as_json_holds_it(tmp_path: Path) -> None:
    # Only a journal appended by hand holds one (no session has an empty id): the line
    # says what the record says, as --json does, rather than hide that it names one.
    path = _journal(tmp_path / "j", [LlmOutputRecorded(id="o", output="yes", session="", **_CALL)])

    assert json.loads("\n".join(_text(path, "--seq", "1", "--json")))["record"]["data"]["session"] == ""
    assert _text(path, "--seq", "1")[-2] == '  seq 1 LlmOutputRecorded agent/a output "yes" session ""'

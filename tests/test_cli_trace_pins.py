"""`cogfabric trace` pins: each test kills a mutant of the trace code that the other tests let live."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import lmdb
from click.testing import CliRunner

import cogfabric.cli
from cogfabric._audit import find_trace, open_for_audit, trace_view
from cogfabric.cli import main
from cogfabric.events import IpcDeadLettered
from tests.test_cli_trace import _effects, _journal, _message, _private, _trace

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def _text(path: Path, *args: str) -> list[str]:
    result = CliRunner().invoke(main, ["trace", str(path), *args])
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def _dead(event_id: str, message_id: str, cause: str | None, reason: str = "r") -> IpcDeadLettered:
    return IpcDeadLettered(
        at=1.0,
        id=event_id,
        cause=cause,
        message_id=message_id,
        sender="x",
        recipient="a",
        topic="t",
        reason=reason,
    )


# kills: _parent_id takes a dead letter's message_id before its cause
def test_a_dead_letter_follows_from_its_cause_before_the_message_it_names(tmp_path: Path) -> None:
    path = _journal(
        tmp_path / "j", [_message("m", "x", "a", "t"), _message("c", "x", "a", "u"), _dead("d", "m", "c")]
    )

    assert _effects(_trace(path, 1)) == []
    assert _effects(_trace(path, 2)) == [(3, 2, 1)]
    assert [c["data"]["id"] for c in _trace(path, 3)["causes"]] == ["c"]


# kills: find_trace drops `seq <= until` (a record past until is traced)
def test_a_record_past_until_is_not_traced(tmp_path: Path) -> None:
    path = _journal(tmp_path / "j", [_message("m", "x", "a", "t"), _private("p", "a", "k", "m")])

    with open_for_audit(path, copy=False, key=None) as journal:
        view = trace_view(journal, 2, until=1)
        found = find_trace(journal, 2, until=1)

    assert view == {"seq": 2, "until": 1, "record": None, "causes": [], "effects": []}
    assert found is None


# kills: _causes drops `seq <= until` (a cause past until is shown as a record)
def test_a_cause_past_until_ends_the_walk_unnamed_by_a_record(tmp_path: Path) -> None:
    path = _journal(
        tmp_path / "j",
        [_private("p", "a", "k", "m"), _private("q", "a", "k", None), _message("m", "x", "a", "t")],
    )

    with open_for_audit(path, copy=False, key=None) as journal:
        view = trace_view(journal, 1, until=2)

    assert view["causes"] == [{"id": "m", "seq": None}]


# kills: _causes drops `found.event.id != parent` (an id index entry naming another record)
def test_a_cause_the_id_index_points_at_another_record_is_not_that_record(tmp_path: Path) -> None:
    path = _journal(tmp_path / "j", [_message("m", "x", "a", "t"), _private("p", "a", "k", "gone")])
    env = lmdb.open(str(path), max_dbs=8)
    with env.begin(write=True, db=env.open_db(b"ids")) as txn:
        txn.put(b"gone", (1).to_bytes(8, "big"))  # a damaged index: "gone" is no record's id
    env.close()

    lines = _text(path, "--seq", "2", "--no-verify")

    assert lines[:2] == ["caused by, the root first:", '  id "gone": no record up to seq 2 holds it']


def _out_of_order(tmp_path: Path) -> Path:
    # seq 1: g (from c), seq 2: the root, seq 3: c (from the root), seq 4: h (from c):
    # c and h are found in the first pass, g (read before c was found) in the second
    return _journal(
        tmp_path / "j",
        [
            _private("g", "a", "kg", "c"),
            _message("root", "x", "a", "t"),
            _private("c", "a", "kc", "root"),
            _private("h", "a", "kh", "c"),
        ],
    )


# kills: _effects returns the effects in the order found, not in seq order
def test_effects_found_in_a_later_pass_come_in_seq_order_in_the_trace_and_its_text(tmp_path: Path) -> None:
    path = _out_of_order(tmp_path)

    with open_for_audit(path, copy=False, key=None) as journal:
        found = find_trace(journal, 2, until=journal.last_seq)
    lines = _text(path, "--seq", "2")

    assert found is not None
    assert list(found.effects.items()) == [(1, (3, 2)), (3, (2, 1)), (4, (3, 2))]
    assert lines[-3:] == [
        '  seq 3 PrivateSet agent/a key "kc"',
        '    seq 1 PrivateSet agent/a key "kg"',
        '    seq 4 PrivateSet agent/a key "kh"',
    ]


# kills: _print_trace pushes an effect's own effects unreversed (siblings below level 1 backwards)
def test_siblings_below_the_first_level_are_shown_in_seq_order(tmp_path: Path) -> None:
    path = _journal(
        tmp_path / "j",
        [
            _message("root", "x", "a", "t"),
            _private("c", "a", "kc", "root"),
            _private("g1", "a", "k1", "c"),
            _private("g2", "a", "k2", "c"),
        ],
    )

    assert _text(path, "--seq", "1")[-3:] == [
        '  seq 2 PrivateSet agent/a key "kc"',
        '    seq 3 PrivateSet agent/a key "k1"',
        '    seq 4 PrivateSet agent/a key "k2"',
    ]


# kills: _print_trace drops the loop line (a looping cause was shown as a record: a KeyError)
def test_causes_that_loop_are_named_in_text(tmp_path: Path) -> None:
    path = _journal(tmp_path / "j", [_private("a", "x", "k", "b"), _private("b", "x", "k", "a")])

    lines = _text(path, "--seq", "2")

    assert lines[:3] == [
        "caused by, the root first:",
        '  id "b": seq 2 again (the causes loop)',
        '  seq 1 PrivateSet agent/x key "k"',
    ]


# kills: _print_trace shows a cause no record holds unquoted and unescaped
def test_a_cause_outside_the_journal_is_quoted_and_escaped_in_text(tmp_path: Path) -> None:
    path = _journal(tmp_path / "j", [_private("p", "a", "k", "out\x1b[2J\nseq 9 forged")])

    result = CliRunner().invoke(main, ["trace", str(path), "--seq", "1"])

    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output
    shown = '  id "out\\u001b[2J\\nseq 9 forged": no record up to seq 1 holds it'
    assert result.output.splitlines()[1] == shown


# kills: _shown_name no longer cuts a long name
def test_a_long_topic_is_cut_in_text(tmp_path: Path) -> None:
    path = _journal(tmp_path / "j", [_message("m", "x", "a", "t" * 100_000)])

    lines = _text(path, "--seq", "1")

    assert lines[2] == f'  seq 1 IpcMessage bus send "x" -> "a" "{"t" * 199}... (100,002 characters)'


# kills: _trace_line shows a broadcast's empty recipient as "" rather than *
def test_a_broadcast_is_shown_to_everyone(tmp_path: Path) -> None:
    path = _journal(tmp_path / "j", [_message("m", "x", "", "news", kind="broadcast")])

    assert _text(path, "--seq", "1")[2] == '  seq 1 IpcMessage bus broadcast "x" -> * "news"'


# kills: _trace_line drops a dead letter's reason
def test_a_dead_letters_reason_is_shown_quoted(tmp_path: Path) -> None:
    path = _journal(tmp_path / "j", [_message("m", "x", "a", "t"), _dead("d", "m", None, "no\nsuch")])

    assert _text(path, "--seq", "1")[-1] == '  seq 2 IpcDeadLettered bus to "a" "no\\nsuch"'


# kills: trace --id no longer refuses an id appended after the check (an AssertionError)
def test_an_id_appended_after_the_check_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _journal(tmp_path / "j", [_message("m", "x", "a", "t"), _private("p", "a", "k", "m")])
    check = cogfabric.cli._check

    def verified_one_less(opened: Any, *, skip: bool) -> int:
        return check(opened, skip=skip) - 1  # as if record 2 was appended after verify() ran

    monkeypatch.setattr(cogfabric.cli, "_check", verified_one_less)

    result = CliRunner().invoke(main, ["trace", str(path), "--id", "p"])

    assert result.exit_code == 2, result.output
    assert "no record up to seq 1 holds the event id 'p'" in result.output

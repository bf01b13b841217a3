"""A journal holding an event type a newer cogfabric added, read by ``cogfabric inspect``.

Session 58, helper h2:

- ``inspect --skip-newer`` summarised a journal holding records of a version newer than
  this code, yet stopped at a record of a type this code does not know (a type a newer
  cogfabric added: the likeliest upgrade), as ``inspect`` without it does. It now counts
  those too, by type tag and stream from their framing, and names them with their first
  and last seqs: ``unknown`` in ``--json`` (``newer`` as it was), a line ``unknown`` in
  the table. Without ``--skip-newer`` the error names the flag, as for a newer version.
- ``inspect``'s ``types`` named a type by its event class, ``export`` and the error
  object by its type tag: a type declared with ``tag=`` was counted under two names.
  ``types`` now names each by its tag, as the README's ``{type: records}`` and
  ``export``'s ``type`` do.

What the other commands do with such a record is unchanged (a typed error naming the
type, exit 1); the last test checks they name the record ``inspect`` counts.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric._audit import inspect_journal
from cogfabric.events import EVENT_TYPES, AgentEvent, EventCodec, PrivateSet
from cogfabric.store import Journal, JournalRecordTypeError, LmdbJournal
from cogfabric.store._errors import unknown_type_advice
from cogfabric.store.testing import make_events
from tests.actors.test_runtime import _PrivateSetV2
from tests.test_cli_json_s56_h4 import _error, _run, _with_a_newer_record
from tests.test_cli_json_s56_h4 import journal as journal  # noqa: PLC0414 - the fixture, used by name

if TYPE_CHECKING:
    from pathlib import Path


class _Budget(AgentEvent, frozen=True, kw_only=True, tag="BudgetSet"):
    """An event type a newer cogfabric added; its class is not named as its tag."""

    limit: int = 0


class _Quota(AgentEvent, frozen=True, kw_only=True, tag="QuotaSet"):
    """Another one."""

    quota: int = 0


class _Escaping(AgentEvent, frozen=True, kw_only=True, tag="Evil\x1b[2J\u202e"):
    """A type whose tag a terminal would act on."""


#: What a newer cogfabric reads with: the built-in types and the ones it added.
_NEWER_CODEC = EventCodec([*EVENT_TYPES, _Budget, _Quota, _Escaping])


def _with(path: Path, *events: AgentEvent) -> Path:
    """``path`` with ``events`` appended, as a newer cogfabric writes them (the chain stays valid)."""
    with LmdbJournal.open(path, codec=_NEWER_CODEC) as opened:
        opened.append(list(events))
    return path


def _as_the_newer_cogfabric_sees_it(path: Path) -> dict[str, Any]:
    with LmdbJournal.open(path, codec=_NEWER_CODEC, readonly=True) as opened:
        return inspect_journal(opened, path)


def _inspect_json(path: Path) -> tuple[dict[str, Any], str]:
    code, stdout, stderr = _run(["inspect", str(path), "--skip-newer", "--json"])
    assert code == 0, stderr
    summary: dict[str, Any] = json.loads(stdout)
    return summary, stderr


def test_skip_newer_counts_a_record_of_an_unknown_type_and_names_it(journal: Path) -> None:
    _with(journal, _Budget(at=9.0, agent="a", limit=3))  # seq 7
    newer = _as_the_newer_cogfabric_sees_it(journal)

    summary, stderr = _inspect_json(journal)

    for key in ("records", "head_seq", "head_chain", "types", "stream_count", "stream_kinds", "streams"):
        assert summary[key] == newer[key], key  # as the cogfabric that wrote it counts them
    assert summary["types"] == {"PrivateSet": 6, "BudgetSet": 1}
    assert summary["unknown"] == [{"type": "BudgetSet", "records": 1, "first_seq": 7, "last_seq": 7}]
    assert summary["newer"] == []
    assert summary["last_time"] == 5.0  # the unknown record's time is not read
    assert stderr == (
        "note: 1 record of a type this cogfabric does not know counted, not read (unknown): "
        "the times are of the others\n"
    )


def test_skip_newer_reads_past_unknown_records_in_a_row_and_between_others(journal: Path) -> None:
    _with(journal, _Budget(at=9.0, agent="a"))  # seq 7
    with Journal.open(journal, max_map_size=1 << 22) as opened:
        opened.append(make_events(3, start=6))  # seqs 8 to 10
    _with(journal, _Budget(at=10.0, agent="b"), _Quota(at=11.0, agent="b"), _Budget(at=12.0, agent="c"))
    newer = _as_the_newer_cogfabric_sees_it(journal)

    summary, _ = _inspect_json(journal)

    assert (summary["records"], summary["head_seq"], summary["head_chain"]) == (13, 13, newer["head_chain"])
    assert (summary["types"], summary["streams"]) == (newer["types"], newer["streams"])
    assert summary["unknown"] == [
        {"type": "BudgetSet", "records": 3, "first_seq": 7, "last_seq": 13},
        {"type": "QuotaSet", "records": 1, "first_seq": 12, "last_seq": 12},
    ]
    assert summary["last_time"] == 8.0


def test_skip_newer_lists_newer_versions_and_unknown_types_apart(journal: Path) -> None:
    _with_a_newer_record(journal)  # PrivateSet v2, seq 7
    _with(journal, _Budget(at=9.0, agent="a"), _Budget(at=9.5, agent="a"))  # seqs 8 and 9

    summary, stderr = _inspect_json(journal)

    assert list(summary)[-2:] == ["newer", "unknown"]  # the keys before as they were
    assert summary["newer"] == [
        {"type": "PrivateSet", "stored": 2, "known": 1, "records": 1, "first_seq": 7, "last_seq": 7}
    ]
    assert summary["unknown"] == [{"type": "BudgetSet", "records": 2, "first_seq": 8, "last_seq": 9}]
    assert (summary["records"], summary["types"]) == (9, {"PrivateSet": 7, "BudgetSet": 2})
    assert stderr.startswith(
        "note: 1 record newer than this cogfabric and 2 of a type it does not know counted, "
        "not read (newer, unknown)"
    )


def test_skip_newer_names_them_in_its_table(journal: Path) -> None:
    _with(journal, _Budget(at=9.0, agent="a"), _Budget(at=9.5, agent="a"))

    code, stdout, _ = _run(["inspect", str(journal), "--skip-newer"])

    assert code == 0
    assert "types     PrivateSet 6, BudgetSet 2\n" in stdout
    assert "unknown   BudgetSet 2 (first seq 7, last 8)\n" in stdout
    assert "newer     " not in stdout


def test_skip_newer_escapes_an_unknown_tag_a_terminal_would_act_on(journal: Path) -> None:
    _with(journal, _Escaping(at=9.0, agent="a"))

    code, stdout, _ = _run(["inspect", str(journal), "--skip-newer"])

    assert code == 0
    assert "\x1b" not in stdout
    assert "\u202e" not in stdout
    assert "types     PrivateSet 6, Evil\\x1b[2J\\u202e 1\n" in stdout
    assert "unknown   Evil\\x1b[2J\\u202e 1 (seq 7)\n" in stdout


@pytest.mark.parametrize("as_json", [False, True])
def test_without_skip_newer_an_unknown_type_stops_it_naming_the_flag(journal: Path, as_json: bool) -> None:
    _with(journal, _Budget(at=9.0, agent="a"))

    code, stdout, stderr = _run(["inspect", str(journal), *(["--json"] * as_json)])

    assert (code, stdout) == (1, "")
    advice = unknown_type_advice()
    message = (
        f"record at seq 7: unknown event type 'BudgetSet': {advice} (--skip-newer summarises the journal)"
    )
    assert stderr.startswith(f"error: {message}\n")
    if as_json:
        assert _error(stderr) == {
            "kind": "JournalRecordTypeError",
            "exit": 1,
            "message": message,
            "seq": 7,
            "type_name": "BudgetSet",
            "stored": None,
            "known": None,
        }


def test_inspect_journal_skip_newer_counts_an_unknown_type_else_raises_it(journal: Path) -> None:
    _with(journal, _Budget(at=9.0, agent="a"))

    with LmdbJournal.open(journal, readonly=True) as opened:
        with pytest.raises(JournalRecordTypeError) as raised:
            inspect_journal(opened, journal)
        summary = inspect_journal(opened, journal, skip_newer=True)

    assert (raised.value.seq, raised.value.type_name) == (7, "BudgetSet")
    assert summary["unknown"] == [{"type": "BudgetSet", "records": 1, "first_seq": 7, "last_seq": 7}]


def test_types_name_a_type_by_its_tag_as_export_does(journal: Path) -> None:
    _with(journal, _Budget(at=9.0, agent="a"))
    types = [_PrivateSetV2 if t is PrivateSet else t for t in EVENT_TYPES]
    newer_version = EventCodec([*types, _Budget], {("PrivateSet", 1): lambda raw: raw})

    summary = _as_the_newer_cogfabric_sees_it(journal)  # reads _Budget, tagged BudgetSet
    with LmdbJournal.open(journal, codec=newer_version, readonly=True) as opened:
        upcast = inspect_journal(opened, journal)  # reads each PrivateSet as _PrivateSetV2

    assert summary["types"] == upcast["types"] == {"PrivateSet": 6, "BudgetSet": 1}


def test_skip_newer_counts_the_record_the_other_commands_stop_at(journal: Path) -> None:
    _with(journal, _Budget(at=9.0, agent="a"))

    summary, _ = _inspect_json(journal)
    verified = _run(["verify", str(journal), "--json"])
    exported = _run(["export", str(journal), "--json-errors"])
    replayed = _run(["replay", str(journal), "--json"])
    traced = _run(["trace", str(journal), "--seq", "1", "--json"])

    assert summary["unknown"][0]["first_seq"] == 7
    assert verified[0] == 1
    assert json.loads(verified[1])["first_bad_seq"] == 7
    assert "unknown event type 'BudgetSet'" in json.loads(verified[1])["reason"]
    assert len(exported[1].splitlines()) == 6  # the lines before it
    for code, _, stderr in (exported, replayed, traced):
        assert code == 1
        assert _error(stderr)["kind"] == "JournalRecordTypeError"
        assert (_error(stderr)["seq"], _error(stderr)["type_name"]) == (7, "BudgetSet")

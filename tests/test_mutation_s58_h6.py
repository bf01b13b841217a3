"""Mutation round on session 58's inspect, salvage, verify and store changes (helper h6).

Each test kills a hand-made mutant the day's tests let live (named in its comment):

- salvage's offers of ``--until N-1`` for a record a newer cogfabric wrote, or a broken
  one before a damaged page, at seq 1: there is no seq 0 to salvage up to;
- ``inspect --skip-newer`` suggests ``--skip-newer`` for no record it raises even so
  (a newer record whose framing cannot be read);
- ``newer_record`` takes for a newer cogfabric's neither an older version no upcaster
  reads nor a record that does not decode for another reason: salvage leaves either
  out, as damage, as before;
- ``JournalRecordTypeError``'s ``reason`` is the codec's error alone (its docstring).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import msgspec
import pytest

from cogfabric.events import EVENT_TYPES, AgentEvent, EventCodec, PrivateSet
from cogfabric.store import Journal, JournalRecordTypeError, LmdbJournal
from cogfabric.store.testing import make_events
from tests.actors.test_runtime import _PrivateSetV2
from tests.conftest import _break_link
from tests.test_cli_json_s56_h4 import _run, _with_a_newer_record
from tests.test_cli_json_s56_h4 import journal as journal  # noqa: PLC0414 - the fixture, used by name
from tests.test_inspect_unknown_types_s58_h2 import _NEWER_CODEC, _Budget, _inspect_json, _with
from tests.test_mutation_s57_h10 import _framed_as
from tests.test_newer_records_s58_h4 import _NEWER, _UNKNOWN_ADVICE, _own
from tests.test_review_s58_h5 import _with_an_old_record
from tests.test_salvage_s54_h12 import _PAGE_SEQS, _link, _nothing_under

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

_NEWER_VERSION = EventCodec([_PrivateSetV2 if t is PrivateSet else t for t in EVENT_TYPES])


def _first_newer(path: Path, kind: str) -> str:
    """A journal whose seq 1 a newer cogfabric wrote (then seqs 2 to 4); how this one names seq 1."""
    if kind == "version":
        with LmdbJournal.open(path, codec=_NEWER_VERSION, max_map_size=1 << 22) as opened:
            opened.append([_PrivateSetV2(at=0.5, agent="a", key="k", value=1)])
    else:
        with LmdbJournal.open(path, codec=_NEWER_CODEC, max_map_size=1 << 22) as opened:
            opened.append([_Budget(at=0.5, agent="a", limit=3)])
    with Journal.open(path, max_map_size=1 << 22) as opened:
        opened.append(make_events(3, start=1))
    with LmdbJournal.open(path, readonly=True) as opened:
        report = opened.verify(decode=True)
    assert (report.first_bad_seq, report.head_seq) == (1, 4)
    return report.reason.removeprefix("the record does not decode: ")


@pytest.mark.parametrize("kind", ["version", "type"])
def test_salvage_of_a_newer_record_at_seq_1_offers_no_until_0(tmp_path: Path, kind: str) -> None:
    # mutant: `--until {seq - 1}` offered `if seq >= 1` (not_damage)
    path = tmp_path / "j"
    _first_newer(path, kind)
    dest = tmp_path / "saved"

    code, stdout, stderr = _run(["salvage", str(path), str(dest)])

    assert (code, stdout) == (1, "")
    assert stderr.startswith(f"error: cannot salvage {path} into {dest}: record at seq 1: ")
    assert stderr.endswith(
        f"; {path} need not be damaged: salvage it with the cogfabric that wrote it{_own(kind)}; "
        f"nothing was written to {dest}\n"
    )
    assert "--until" not in stderr
    _nothing_under(dest)


@pytest.mark.parametrize("kind", ["version", "type"])
def test_salvage_until_1_of_a_newer_record_at_seq_1_offers_no_until_0(tmp_path: Path, kind: str) -> None:
    # mutant: `, or give --until {bad - 1} or less` `if bad >= 1` (_end)
    path = tmp_path / "j"
    _first_newer(path, kind)
    dest = tmp_path / "saved"

    code, _, stderr = _run(["salvage", str(path), str(dest), "--until", "1"])

    assert code == 2
    assert stderr.startswith(f"error: --until 1 reaches seq 1 of {path}, which this cogfabric cannot read: ")
    assert stderr.endswith(f"; salvage {path} with the cogfabric that wrote it{_own(kind)}\n")
    assert "--until 0" not in stderr
    _nothing_under(dest)


def test_salvage_of_a_broken_first_record_before_a_damaged_page_offers_no_until_0(
    tmp_path: Path, damage_page: Callable[[Path, bytes], None]
) -> None:
    # mutant: `give --until {seq - 1}` offered `if seq >= 1` (broken)
    path = tmp_path / "j"
    with LmdbJournal.open(path, codec=_NEWER_CODEC, max_map_size=1 << 26) as opened:
        opened.append([_Budget(at=0.5, agent="a")])  # seq 1, of a type this cogfabric does not know
    with Journal.open(path, max_map_size=1 << 26) as opened:
        opened.append(make_events(299, start=1))  # one batch: each record's link on one page only
    _break_link(path, 1)
    damage_page(path, _link(path, 250))
    dest = tmp_path / "saved"

    code, stdout, stderr = _run(["salvage", str(path), str(dest), "--json"])

    assert code == 1
    warning, _ = stderr.splitlines()
    found = _PAGE_SEQS.search(warning)
    assert found is not None, warning
    assert int(found[1]) > 1
    verdict = json.loads(stdout)
    assert (verdict["ok"], verdict["first_bad_seq"]) == (False, 1)
    assert verdict["reason"] == (
        f"cannot salvage {path} into {dest}: seq 1 does not match its hash chain link, so {path} is damaged "
        f"there too; nothing was written to {dest}"
    )
    _nothing_under(dest)


@pytest.mark.parametrize("kind", ["version", "type"])
def test_skip_newer_suggests_no_skip_newer_for_a_newer_record_it_raises(
    journal: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    # mutant: inspect's `and not skip_newer` dropped: a newer record whose framing is
    # malformed is raised with --skip-newer given, and was told to give it
    if kind == "version":
        _with_a_newer_record(journal)
    else:
        _with(journal, _Budget(at=9.0, agent="a"))
    _framed_as(None, monkeypatch)

    code, stdout, stderr = _run(["inspect", str(journal), "--skip-newer"])

    assert (code, stdout) == (1, "")
    assert stderr.startswith("error: record at seq 7: ")
    assert "--skip-newer" not in stderr


def test_salvage_leaves_out_an_older_version_no_upcaster_reads_as_before(journal: Path) -> None:
    # mutant: newer_record returns any version's or type's error, an older version's too
    _with_an_old_record(journal)
    dest = journal.parent / "saved"

    code, stdout, stderr = _run(["salvage", str(journal), str(dest)])

    assert (code, stderr) == (0, "")
    assert stdout.startswith(f"ok: salvaged seqs 1 to 6 of {journal} into {dest}, chain 6:")
    assert stdout.endswith(
        f"left out seq 7: {journal} fails verification at seq 7: the record does not decode: event type "
        "'PrivateSet' is at version 0, not upgradable to the known version 1: no upcaster from version 0\n"
    )


class _PrivateSetMistyped(AgentEvent, frozen=True, kw_only=True, tag="PrivateSet"):
    """``PrivateSet`` at this cogfabric's version with its key of the wrong type: it does not decode."""

    key: int
    value: object = None
    v: Annotated[int, msgspec.Meta(ge=1, le=1)] = 1


def _mistyped(path: Path) -> None:
    """``path`` with a ``PrivateSet`` appended at this version that does not decode, its link intact."""
    mistyped = EventCodec([_PrivateSetMistyped if t is PrivateSet else t for t in EVENT_TYPES])
    with LmdbJournal.open(path, codec=mistyped) as opened:
        opened.append([_PrivateSetMistyped(at=9.0, agent="a", key=7)])


def test_salvage_leaves_out_an_intact_record_that_does_not_decode_as_before(journal: Path) -> None:
    # mutant: newer_record's `except JournalError: return None` dropped, so another
    # decoding error than a newer cogfabric's escapes it and salvage refuses the journal
    _mistyped(journal)
    dest = journal.parent / "saved"

    code, stdout, stderr = _run(["salvage", str(journal), str(dest), "--json"])

    assert (code, stderr) == (0, "")
    verdict = json.loads(stdout)
    assert (verdict["ok"], verdict["until"], verdict["first_bad_seq"], verdict["left_out"]) == (True, 6, 7, 1)
    assert verdict["reason"].startswith("the record does not decode: ")
    assert "cogfabric that wrote" not in verdict["reason"]


def test_an_unknown_types_error_says_what_writes_it_and_keeps_the_codecs_reason(journal: Path) -> None:
    # mutant: `reason` set to the message, advice and all (its docstring: the codec's error alone)
    _with(journal, _Budget(at=9.0, agent="a"))

    with LmdbJournal.open(journal, readonly=True) as opened, pytest.raises(JournalRecordTypeError) as raised:
        list(opened.read())

    assert raised.value.reason == "unknown event type 'BudgetSet'"
    assert str(raised.value) == f"record at seq 7: unknown event type 'BudgetSet': {_UNKNOWN_ADVICE}"


def test_verify_says_what_writes_a_record_only_of_an_unknown_types(journal: Path, tmp_path: Path) -> None:
    # mutant: verify's reason adds unknown_type_advice for any EventError, not an unknown type's alone
    _mistyped(journal)
    newer = tmp_path / "newer"
    with Journal.open(newer, max_map_size=1 << 22) as opened:
        opened.append(make_events(6))
    _with_a_newer_record(newer)  # seq 7

    with LmdbJournal.open(journal, readonly=True) as opened:
        mistyped = opened.verify(decode=True)
    with LmdbJournal.open(newer, readonly=True) as opened:
        newer_version = opened.verify(decode=True)

    assert mistyped.reason.startswith("the record does not decode: ")
    assert "cogfabric" not in mistyped.reason
    assert newer_version.reason == "the record does not decode: " + _NEWER.removeprefix("record at seq 7: ")


def test_a_broken_record_that_does_not_decode_before_a_damaged_page_is_refused_by_its_error(
    tmp_path: Path, damage_page: Callable[[Path, bytes], None]
) -> None:
    # mutant: before_page's `written_by_newer(exc) and` dropped: a record that does not
    # decode for another reason is the caller's to refuse, naming its own error
    path = tmp_path / "j"
    with Journal.open(path, max_map_size=1 << 26) as opened:
        opened.append(make_events(4))
    _mistyped(path)  # seq 5
    with Journal.open(path, max_map_size=1 << 26) as opened:
        opened.append(make_events(295, start=5))  # one batch: each record's link on one page only
    _break_link(path, 5)
    damage_page(path, _link(path, 250))
    dest = tmp_path / "saved"

    code, stdout, _ = _run(["salvage", str(path), str(dest), "--json"])

    assert code == 1
    verdict = json.loads(stdout)
    assert (verdict["ok"], verdict["first_bad_seq"]) == (False, 5)
    assert verdict["reason"].startswith("record at seq 5: ")
    assert "hash chain link" not in verdict["reason"]
    _nothing_under(dest)


@pytest.mark.parametrize("budget_first", [False, True])
def test_types_tied_keep_the_order_each_first_came(tmp_path: Path, budget_first: bool) -> None:
    # mutant: inspect_journal's types gathered from its counts in another order (a tie's order)
    path = tmp_path / "j"
    budgets = [_Budget(at=0.5, agent="a"), _Budget(at=0.6, agent="a")]
    if budget_first:
        _with(path, *budgets)
    with Journal.open(path, max_map_size=1 << 22) as opened:
        opened.append(make_events(2))
    if not budget_first:
        _with(path, *budgets)

    summary, _ = _inspect_json(path)

    order = [("BudgetSet", 2), ("PrivateSet", 2)] if budget_first else [("PrivateSet", 2), ("BudgetSet", 2)]
    assert list(summary["types"].items()) == order

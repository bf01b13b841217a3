"""``salvage``, ``verify`` and ``backup`` of a journal a newer cogfabric wrote to (session 58, helper h4).

A record this cogfabric cannot decode because a newer one wrote it (a newer version of
its event, ``JournalRecordVersionError``, or a type it does not know,
``JournalRecordTypeError``) is no damage: its chain link verifies.

- ``salvage`` took it for damage: it exited 0 with a copy that left it (and every later
  record) out, so an older cogfabric "salvaged" a healthy journal by dropping what the
  newer one wrote. It now refuses (exit 1; with ``--json`` a verdict, ``ok`` false),
  naming the record, its type and versions and what writes it, with nothing written:
  salvage with the cogfabric that wrote it, or ``--until`` the seq before it. A record
  that fails its chain link is damage as before, whatever its type tag reads as.
- ``verify``'s reason for a record of an unknown type said only "unknown event type
  'BudgetSet'", where a newer version's says what writes it: it now says so too.
- ``backup`` copies such a journal whole and exits 1 with verify's verdict (the copy
  kept), as its docs say; its verdict now names what writes the record too.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from cogfabric import __version__
from cogfabric.store import Journal, LmdbJournal
from cogfabric.store.testing import make_events
from tests.test_cli_json_s56_h4 import _run, _with_a_newer_record
from tests.test_cli_json_s56_h4 import journal as journal  # noqa: PLC0414 - the fixture, used by name
from tests.test_inspect_unknown_types_s58_h2 import _NEWER_CODEC, _Budget, _with
from tests.test_salvage_s54_h12 import _PAGE_SEQS, _digest, _link, _nothing_under

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

#: What verify says of a record of a type this cogfabric does not know, after its type.
_UNKNOWN_ADVICE = (
    f"a newer cogfabric than this one ({__version__}), or code with event types of its own, "
    "writes such records; read them with it, or upgrade this one"
)
_UNKNOWN = f"record at seq 7: unknown event type 'BudgetSet': {_UNKNOWN_ADVICE}"
_NEWER = (
    "record at seq 7: event type 'PrivateSet' is at version 2, newer than the known version 1: "
    f"a newer cogfabric than this one ({__version__}) writes such records; read them with it, "
    "or upgrade this one"
)


def _own(kind: str) -> str:
    """What salvage adds for an unknown type's record: a journal of your own types is salvaged in Python."""
    return " (a journal of event types of your own: in Python, with their codec)" if kind == "type" else ""


def _newer_one(path: Path, kind: str) -> str:
    """Append seq 7 to ``path`` as a newer cogfabric writes it; how this one names it."""
    if kind == "version":
        _with_a_newer_record(path)
        return _NEWER
    _with(path, _Budget(at=9.0, agent="a", limit=3))
    return _UNKNOWN


@pytest.mark.parametrize("kind", ["version", "type"])
def test_salvage_refuses_a_record_a_newer_cogfabric_wrote_rather_than_leave_it_out(
    journal: Path, kind: str
) -> None:
    named = _newer_one(journal, kind)
    before = _digest(journal)
    dest = journal.parent / "saved"

    code, stdout, stderr = _run(["salvage", str(journal), str(dest)])

    assert (code, stdout) == (1, "")
    assert stderr == (
        f"error: cannot salvage {journal} into {dest}: {named}; {journal} need not be damaged: "
        f"salvage it with the cogfabric that wrote it{_own(kind)}, or give --until 6 to salvage the records "
        f"before it alone; nothing was written to {dest}\n"
    )
    _nothing_under(dest)
    assert _digest(journal) == before


@pytest.mark.parametrize("kind", ["version", "type"])
def test_salvage_json_gives_a_failed_verdict_and_leaves_an_empty_dest_empty(journal: Path, kind: str) -> None:
    named = _newer_one(journal, kind)
    dest = journal.parent / "saved"
    dest.mkdir()

    code, stdout, stderr = _run(["salvage", str(journal), str(dest), "--json"])

    assert code == 1
    verdict = json.loads(stdout)
    assert verdict == {
        "ok": False,
        "until": None,
        "head_seq": 7,
        "chain": None,
        "first_bad_seq": 7,
        "left_out": 7,
        "reason": verdict["reason"],
    }
    assert verdict["reason"].startswith(f"cannot salvage {journal} into {dest}: {named}; ")
    assert stderr == f"error: {verdict['reason']}\n"  # a verdict, so no error object
    assert list(dest.iterdir()) == []
    assert not list(dest.parent.glob(".saved.salvage-*"))


def test_salvage_until_the_seq_before_it_copies_the_records_before_it(journal: Path) -> None:
    _newer_one(journal, "type")
    dest = journal.parent / "saved"

    code, stdout, stderr = _run(["salvage", str(journal), str(dest), "--until", "6"])

    assert (code, stderr) == (0, "")
    assert stdout == (
        f"ok: salvaged seqs 1 to 6 of {journal} into {dest}, chain 6:{_link(journal, 6).hex()}; "
        f"6 records verified; left out seq 7: {journal} fails verification at seq 7: the record does "
        f"not decode: unknown event type 'BudgetSet': {_UNKNOWN_ADVICE}\n"
    )


@pytest.mark.parametrize("kind", ["version", "type"])
def test_salvage_until_past_it_names_it_as_a_newer_cogfabrics(journal: Path, kind: str) -> None:
    named = _newer_one(journal, kind)
    dest = journal.parent / "saved"

    code, _, stderr = _run(["salvage", str(journal), str(dest), "--until", "7"])

    assert code == 2
    assert stderr == (
        f"error: --until 7 reaches seq 7 of {journal}, which this cogfabric cannot read: {named}; "
        f"salvage {journal} with the cogfabric that wrote it{_own(kind)}, or give --until 6 or less\n"
    )
    _nothing_under(dest)


def test_salvage_refuses_one_met_before_a_damaged_page(
    tmp_path: Path, damage_page: Callable[[Path, bytes], None]
) -> None:
    path = tmp_path / "j"
    with Journal.open(path, max_map_size=1 << 26) as opened:
        opened.append(make_events(4))
    with LmdbJournal.open(path, codec=_NEWER_CODEC) as opened:
        opened.append([_Budget(at=9.0, agent="a")])  # seq 5
    with Journal.open(path, max_map_size=1 << 26) as opened:
        opened.append(make_events(295, start=5))  # one batch: each record's link on one page only
    damage_page(path, _link(path, 250))
    dest = tmp_path / "saved"

    code, stdout, stderr = _run(["salvage", str(path), str(dest), "--json"])

    assert code == 1
    warning, error = stderr.splitlines()
    found = _PAGE_SEQS.search(warning)
    assert found is not None, warning
    assert int(found[1]) > 5  # the page is after the newer record
    verdict = json.loads(stdout)
    assert (verdict["ok"], verdict["first_bad_seq"], verdict["until"]) == (False, 5, None)
    assert verdict["reason"] == (
        f"cannot salvage {path} into {dest}: record at seq 5: unknown event type 'BudgetSet': "
        f"{_UNKNOWN_ADVICE}; salvage {path} with the cogfabric that wrote that record{_own('type')}, "
        "or give --until 4 "
        f"to salvage the records before it alone; nothing was written to {dest}"
    )
    assert error == f"error: {verdict['reason']}"
    _nothing_under(dest)


def test_a_record_of_an_unknown_type_that_fails_its_chain_is_damage_still(
    journal: Path, break_link: Callable[[Path, int], None]
) -> None:
    from cogfabric._audit import newer_record, written_by_newer  # noqa: PLC0415 - new in this change

    _newer_one(journal, "type")
    with LmdbJournal.open(journal, readonly=True) as opened:
        report = opened.verify(decode=True)
        healthy = newer_record(opened, report)
    break_link(journal, 7)
    with LmdbJournal.open(journal, readonly=True) as opened:
        broken = newer_record(opened, opened.verify(decode=True))
    dest = journal.parent / "saved"

    code, stdout, _ = _run(["salvage", str(journal), str(dest)])

    assert healthy is not None
    assert (healthy.seq, healthy.type_name, written_by_newer(healthy)) == (7, "BudgetSet", True)
    assert broken is None  # its type tag reads as unknown, but its chain link fails: damage
    assert code == 0
    assert stdout.endswith(
        f"left out seq 7: {journal} fails verification at seq 7: the record does not match its hash "
        "chain link\n"
    )


@pytest.mark.parametrize("as_json", [False, True])
def test_verify_says_what_writes_a_record_of_an_unknown_type(journal: Path, as_json: bool) -> None:
    _newer_one(journal, "type")
    reason = f"the record does not decode: unknown event type 'BudgetSet': {_UNKNOWN_ADVICE}"

    code, stdout, stderr = _run(["verify", str(journal), *(["--json"] * as_json)])

    assert (code, stderr) == (1, "")
    if as_json:
        assert json.loads(stdout) == {
            "ok": False,
            "checked": 6,
            "head_seq": 7,
            "first_bad_seq": 7,
            "reason": reason,
            "snapshots": None,
        }
    else:
        assert stdout == f"FAILED at seq 7: {reason} (6 records checked before it)\n"
    with Journal.open(journal, readonly=True) as opened:
        assert opened.verify(decode=True).reason == reason


def test_backup_copies_it_whole_and_fails_with_verifys_verdict_keeping_the_copy(journal: Path) -> None:
    _newer_one(journal, "type")
    dest = journal.parent / "copy"

    code, stdout, _ = _run(["backup", str(journal), str(dest), "--json"])

    assert code == 1
    verdict = json.loads(stdout)
    assert (verdict["ok"], verdict["head_seq"], verdict["verified"]) == (False, 7, True)
    assert (verdict["checked"], verdict["first_bad_seq"]) == (6, 7)
    assert verdict["reason"].endswith(_UNKNOWN_ADVICE)
    with LmdbJournal.open(dest, codec=_NEWER_CODEC, readonly=True) as copied:  # as the newer one reads it
        assert copied.verify(decode=True).ok
        assert [type(r.event) for r in copied.read(after=6)] == [_Budget]

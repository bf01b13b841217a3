"""``cogfabric salvage``: README's salvage script as a command (helper h12, session 54).

It copies a journal's records before its first bad one (a record that fails its chain,
the first seq a damaged page may hold) into a new journal, chained as they were, checks
each batch's link against the stored one, verifies the copy and renames it into place:
a failure leaves nothing under DEST, and the source is never written.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import TYPE_CHECKING, Any

import lmdb
import pytest
from click.testing import CliRunner

from cogfabric import Runtime
from cogfabric.cli import main
from cogfabric.events import IpcSubscribed
from cogfabric.store import Journal, JournalDamagedError
from cogfabric.store.testing import make_events
from tests.reliability.test_corruption_corpus import _rechain, _with_event

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

_PAGE_SEQS = re.compile(r"the page holds the records from seq (\d+) to seq (\d+) at most")


def _journal(path: Path, count: int = 300, *, key: bytes | None = None) -> Path:
    with Journal.open(path, key=key, max_map_size=1 << 26) as journal:
        journal.append(make_events(count))  # one batch: each record's link is on one page only
    return path


def _link(path: Path, seq: int, key: bytes | None = None) -> bytes:
    with Journal.open(path, readonly=True, check_pages=False, key=key) as journal:
        return next(journal.read(after=seq - 1, until=seq)).chain


def _digest(path: Path) -> str:
    return hashlib.sha256((path / "data.mdb").read_bytes()).hexdigest()


def _salvage(*args: object) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["salvage", *map(str, args)])
    return result.exit_code, result.stdout, result.stderr


def _verified(path: Path, key: bytes | None = None) -> tuple[int, bytes]:
    """The salvaged journal's head and its link, once it verifies (decoded), as Runtime.open needs."""
    with Journal.open(path, readonly=True, key=key) as journal:
        report = journal.verify(decode=True)
        assert report.ok, report
        return report.head_seq, next(journal.read(after=report.head_seq - 1)).chain


def _nothing_under(dest: Path) -> None:
    assert not dest.exists()
    assert not list(dest.parent.glob(f".{dest.name}.salvage-*"))  # the sibling is removed too


def test_a_record_that_fails_its_chain_salvages_the_ones_before_it(
    tmp_path: Path, break_link: Callable[[Path, int], None]
) -> None:
    path = _journal(tmp_path / "j")
    break_link(path, 200)
    before = _digest(path)

    code, out, err = _salvage(path, tmp_path / "saved")

    assert (code, err) == (0, ""), err
    link = _link(path, 199)
    assert out == (
        f"ok: salvaged seqs 1 to 199 of {path} into {tmp_path / 'saved'}, chain 199:{link.hex()}; "
        f"199 records verified; left out seqs 200 to 300: {path} fails verification at seq 200: "
        "the record does not match its hash chain link\n"
    )
    assert _verified(tmp_path / "saved") == (199, link)
    assert _digest(path) == before  # read, never written
    with Runtime.open(tmp_path / "saved") as runtime:  # the service runs on it
        runtime.spawn("after-incident")


def test_json_names_what_was_left_behind(tmp_path: Path, break_link: Callable[[Path, int], None]) -> None:
    path = _journal(tmp_path / "j")
    break_link(path, 200)

    code, out, _ = _salvage(path, tmp_path / "saved", "--json", "--until", "150")

    assert code == 0
    assert json.loads(out) == {
        "ok": True,
        "until": 150,
        "head_seq": 300,
        "chain": _link(path, 150).hex(),
        "first_bad_seq": 200,
        "left_out": 150,
        "reason": "the record does not match its hash chain link",
    }


def test_a_damaged_page_salvages_the_records_before_the_first_it_may_hold(
    tmp_path: Path, damage_page: Callable[[Path, bytes], None]
) -> None:
    path = _journal(tmp_path / "j")
    damage_page(path, _link(path, 150))
    before = _digest(path)
    with pytest.raises(JournalDamagedError) as info:
        Journal.open(path, readonly=True)
    found = _PAGE_SEQS.search(str(info.value))
    assert found is not None, str(info.value)
    first = int(found[1])
    assert info.value.first_seq == first
    assert 1 < first <= 150

    code, out, err = _salvage(path, tmp_path / "saved", "--json")

    assert code == 0, err
    assert json.loads(out) == {
        "ok": True,
        "until": first - 1,
        "head_seq": None,  # not read: the last records may be past the damaged page
        "chain": _link(path, first - 1).hex(),
        "first_bad_seq": first,
        "left_out": None,
        "reason": str(info.value),
    }
    assert err == f"warning: {info.value}\n"
    assert _verified(tmp_path / "saved") == (first - 1, _link(path, first - 1))
    assert _digest(path) == before
    with Runtime.open(tmp_path / "saved") as runtime:
        runtime.spawn("after-incident")

    code, _, err = _salvage(path, tmp_path / "past", "--until", first)
    assert code == 2
    assert f"--until {first} reaches seq {first}, the damaged page's first record" in err
    _nothing_under(tmp_path / "past")


def test_a_journal_that_verifies_clean_is_copied_whole_or_up_to_until(tmp_path: Path) -> None:
    path = _journal(tmp_path / "j")
    link = _link(path, 300)

    code, out, _ = _salvage(path, tmp_path / "whole")
    assert code == 0
    assert out.endswith(
        f"chain 300:{link.hex()}; 300 records verified; {path} verifies clean: every record was copied\n"
    )
    assert _verified(tmp_path / "whole") == (300, link)

    code, out, _ = _salvage(path, tmp_path / "part", "--until", "100", "--json")
    assert code == 0
    verdict = json.loads(out)
    assert (verdict["until"], verdict["left_out"], verdict["first_bad_seq"], verdict["reason"]) == (
        100,
        200,
        None,
        "",
    )
    code, out, _ = _salvage(path, tmp_path / "part2", "--until", "100")
    assert "; left out seqs 101 to 300 (--until)" in out

    code, _, err = _salvage(path, tmp_path / "past", "--until", "301")
    assert code == 2
    assert "--until 301 is past" in err
    _nothing_under(tmp_path / "past")


def test_a_keyed_journal_is_salvaged_with_its_key_and_refused_without_it(
    tmp_path: Path, break_link: Callable[[Path, int], None]
) -> None:
    path = _journal(tmp_path / "j", 50, key=b"right")
    break_link(path, 30)
    (tmp_path / "key").write_bytes(b"right")

    for key in (["--key", "wrong"], []):
        code, out, err = _salvage(path, tmp_path / "refused", "--json", *key)
        assert (code, out) == (2, ""), err
        _nothing_under(tmp_path / "refused")

    code, _, err = _salvage(path, tmp_path / "saved", "--key-file", tmp_path / "key")

    assert code == 0, err
    assert _verified(tmp_path / "saved", key=b"right") == (29, _link(path, 29, key=b"right"))
    with pytest.raises(Exception, match="key"):
        Journal.open(tmp_path / "saved", readonly=True)


def test_dest_that_exists_is_refused_and_an_empty_directory_taken(tmp_path: Path) -> None:
    path = _journal(tmp_path / "j", 20)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep").write_text("mine", encoding="utf-8")
    (tmp_path / "empty").mkdir()

    code, out, err = _salvage(path, tmp_path / "full", "--json")
    assert (code, out) == (2, "")
    # with --json, the error object follows its line (tests/test_cli_json_s56_h4.py)
    first = err.splitlines()[0]
    assert first == f"error: cannot salvage into {tmp_path / 'full'}: it exists and is not empty"
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["keep"]

    assert _salvage(path, tmp_path / "empty")[0] == 0
    assert _verified(tmp_path / "empty")[0] == 20


def test_until_at_or_past_the_first_bad_record_is_refused(
    tmp_path: Path, break_link: Callable[[Path, int], None]
) -> None:
    path = _journal(tmp_path / "j", 50)
    break_link(path, 30)

    code, out, err = _salvage(path, tmp_path / "saved", "--until", "40", "--json")

    assert (code, out) == (2, "")
    assert err.splitlines()[0] == (  # the error object follows it (tests/test_cli_json_s56_h4.py)
        f"error: --until 40 reaches seq 30, the first bad record of {path}: a salvage copies only the "
        "records before it; give --until 29 or less, or leave it out"
    )
    _nothing_under(tmp_path / "saved")


def _upcast_at(path: Path, seq: int) -> None:
    """Store record ``seq`` (an IpcSubscribed) at version 1, re-chained as a version-1 writer chained it."""
    env = lmdb.open(str(path), max_dbs=8)
    try:
        events, meta = env.open_db(b"events"), env.open_db(b"meta")
        with env.begin(write=True) as txn:

            def older(event: dict[str, Any]) -> None:
                event.pop("order", None)
                event["v"] = 1

            body = _with_event(bytes(txn.get(seq.to_bytes(8, "big"), db=events) or b""), older)
            _rechain(txn, events, meta, seq, body)
    finally:
        env.close()


def test_a_record_copied_upcast_stops_the_salvage_half_way_and_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Journal.open(path, max_map_size=1 << 26) as journal:
        journal.append(make_events(1049))  # the first batch of 1,000 is copied and checked
        journal.append([IpcSubscribed(at=1.0, agent="a0", topic="news")])
        journal.append(make_events(50, start=1050))
    _upcast_at(path, 1050)
    with Journal.open(path, readonly=True) as journal:
        assert journal.verify(decode=True).ok  # a version-1 record reads, upcast
    before = _digest(path)

    code, out, err = _salvage(path, tmp_path / "saved", "--json")

    assert code == 1
    reason = (
        f"cannot salvage {path} into {tmp_path / 'saved'}: seq 1050's copy does not match it: it is "
        "stored at version 1 of IpcSubscribed and is copied upcast, at version 2: its bytes differ, so "
        "its chain link and every later one would; nothing was written to "
        f"{tmp_path / 'saved'} (seqs 1 to 1049 match: --until 1049 salvages them)"
    )
    assert json.loads(out) == {
        "ok": False,
        "until": None,
        "head_seq": 1100,
        "chain": None,
        "first_bad_seq": 1050,
        "left_out": 1100,
        "reason": reason,
    }
    assert err == f"error: {reason}\n"
    _nothing_under(tmp_path / "saved")
    assert _digest(path) == before

    assert _salvage(path, tmp_path / "saved", "--until", "1049")[0] == 0
    assert _verified(tmp_path / "saved") == (1049, _link(path, 1049))


def test_a_journal_bad_from_its_first_record_has_nothing_to_salvage(
    tmp_path: Path, break_link: Callable[[Path, int], None]
) -> None:
    path = _journal(tmp_path / "j", 5)
    break_link(path, 1)

    code, out, err = _salvage(path, tmp_path / "saved")

    assert (code, out) == (1, "")
    assert err == f"error: {path} fails at seq 1: no record precedes it to salvage\n"
    _nothing_under(tmp_path / "saved")


def test_a_failure_no_record_is_to_blame_for_asks_for_until(tmp_path: Path) -> None:
    path = _journal(tmp_path / "j", 20)
    env = lmdb.open(str(path), max_dbs=8)
    with env.begin(write=True, db=env.open_db(b"meta")) as txn:
        txn.delete(b"head")  # verify: no one record to blame
    env.close()

    code, _, err = _salvage(path, tmp_path / "saved")
    assert code == 2
    assert err.startswith(f"error: cannot tell where {path}'s good records end: ")
    assert err.endswith("(its records check out up to seq 20); give the last seq to copy with --until\n")
    _nothing_under(tmp_path / "saved")

    assert _salvage(path, tmp_path / "saved", "--until", "20")[0] == 0
    assert _verified(tmp_path / "saved") == (20, _link(path, 20))


def test_help_says_snapshots_are_not_copied() -> None:
    result = CliRunner().invoke(main, ["salvage", "--help"])

    assert result.exit_code == 0
    assert "Snapshots are not copied" in " ".join(result.output.split())


def test_records_cut_off_the_end_leave_every_record_held_to_salvage(tmp_path: Path) -> None:
    path = _journal(tmp_path / "j", 30)
    env = lmdb.open(str(path), max_dbs=8)
    with env.begin(write=True, db=env.open_db(b"events")) as txn:
        txn.delete((30).to_bytes(8, "big"))  # the chain head names seq 30: verify fails "at seq 30"
    env.close()

    code, out, _ = _salvage(path, tmp_path / "saved")

    assert code == 0
    assert (
        f"29 records verified; every record it holds was copied, but {path} fails verification at seq 30"
        in out
    )
    assert _verified(tmp_path / "saved") == (29, _link(path, 29))

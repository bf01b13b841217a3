"""A tail check holds the first record it sees of each stream to a link before the tail.

Helper h4, session 54: in ``verify(after=N)`` the first record of a stream accepted any
link below its own seq, so a re-chained record whose link pointed inside the tail (at
another stream's record, its own stream having no record there) passed. A stream's
previous record is before the tail exactly when the tail holds none of its records.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import lmdb
import pytest

from cogfabric.store import Journal
from cogfabric.store._record import CHAIN_LEN, LINK_AT, head_value, link_of
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from pathlib import Path


def _key(n: int) -> bytes:
    return n.to_bytes(8, "big")


def _relink(path: Path, seq: int, link: int) -> None:
    """Give record ``seq`` the stream link ``link`` and re-chain it and every later record,
    head included, as a forger of an unkeyed journal could."""
    env = lmdb.open(str(path), max_dbs=8)
    try:
        events, meta = env.open_db(b"events"), env.open_db(b"meta")
        with env.begin(write=True) as txn:
            prev = (txn.get(_key(seq - 1), db=events) or b"")[-CHAIN_LEN:]
            value = txn.get(_key(seq), db=events) or b""
            body = value[:LINK_AT] + _key(link)
            while True:
                prev = hashlib.blake2b(prev + body, digest_size=CHAIN_LEN).digest()
                txn.put(_key(seq), body + prev, db=events)
                following = txn.get(_key(seq + 1), db=events)
                if following is None:
                    break
                seq += 1
                body = bytes(following)[:-CHAIN_LEN]
            txn.put(b"head", head_value(_key(seq), prev, b""), db=meta)
    finally:
        env.close()


def _links(path: Path) -> dict[int, tuple[str, int]]:
    with Journal.open(path, readonly=True) as journal:
        env: Any = journal._env  # type: ignore[attr-defined]
        db = env.open_db(b"events", create=False)
        with env.begin(db=db) as txn:
            links = {int.from_bytes(k, "big"): link_of(bytes(v)) for k, v in txn.cursor()}
        return {r.seq: (r.stream, links[r.seq]) for r in journal.read()}


@pytest.mark.parametrize("link", [5, 6])
def test_a_tail_record_linked_inside_the_tail_to_another_stream_fails_the_tail_check(
    tmp_path: Path, link: int
) -> None:
    path = tmp_path / "journal"
    with Journal.open(path) as journal:
        journal.append(make_events(7, agents=3))  # a0: 1, 4, 7; a1: 2, 5; a2: 3, 6
    assert _links(path)[7] == ("agent/a0", 4)
    with Journal.open(path) as journal:
        assert journal.verify(after=4).ok

    _relink(path, 7, link)  # a0's record 7 now follows a1's 5 (or a2's 6), inside the tail

    with Journal.open(path, readonly=True) as journal:
        report = journal.verify(after=4)
        full = journal.verify()
    assert (report.ok, report.first_bad_seq, report.checked) == (False, 7, 2), report
    assert f"points to seq {link}" in report.reason
    assert (full.ok, full.first_bad_seq) == (False, 7)  # the full check said so already


def test_a_tail_record_linked_before_the_tail_still_passes(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with Journal.open(path) as journal:
        journal.append(make_events(7, agents=3))
        report = journal.verify(after=5)  # a0's 7 links to 4, before the tail; a2's 6 to 3

    assert (report.ok, report.checked) == (True, 2), report

"""Verification of an LMDB journal: the hash chain, the head, the indexes, the snapshots.

A module of ``LmdbJournal``'s own: it reads the journal's private state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from cogfabric.events import EventError

from ._journal import VerifyReport

if TYPE_CHECKING:
    from ._lmdb import LmdbJournal

__all__ = ["verify_journal"]

_CHAIN: Final = 16
# The record layout of store/_lmdb.py (kept here too: _lmdb imports this module).
_SEQ_LEN: Final = 8
_HEAD_LEN: Final = 24
_SNAPSHOT_HEADER: Final = 24
_MASK64: Final = (1 << 64) - 1
_ZERO_CHAIN: Final = bytes(16)
_META_HEAD: Final = b"head"


def _seq_key(seq: int) -> bytes:
    return seq.to_bytes(8, "big")


def verify_journal(journal: LmdbJournal, after: int, *, decode: bool) -> VerifyReport:
    """See ``LmdbJournal.verify``."""
    return _verify(journal, after, decode=decode)


def _verify(journal: LmdbJournal, after: int, *, decode: bool) -> VerifyReport:
    # The head and the last record are read in one snapshot, and only records up to
    # it are checked: a writer appending meanwhile cannot make a clean journal fail.
    with journal._lock:
        head, stored_last = journal._txn_call(lambda: _head_and_last(journal))
    state = _VerifyState(prev=_ZERO_CHAIN, expected=after + 1)
    if after:
        start = _read_chunk_raw_one(journal, after)
        if start is None:
            return VerifyReport(False, 0, after, f"record {after} to verify from is missing")
        state.prev = start[:16]
    while state.expected <= stored_last:
        chunk = [(seq, value) for seq, value in journal._read_pairs(state.expected - 1) if seq <= stored_last]
        if not chunk:
            break
        bad = _verify_chunk(journal, chunk, state, decode=decode)
        if bad is not None:
            return bad
    last = state.expected - 1
    if last < stored_last:
        return VerifyReport(False, state.checked, last + 1, f"record {last + 1} is missing", stored_last)
    problem = _head_problem(head, last, state.prev)
    if problem is not None:
        return VerifyReport(False, state.checked, problem[0], problem[1], last)
    if after == 0:
        problem = _verify_indexes(journal, state, last)
        if problem is not None:
            return VerifyReport(False, state.checked, problem[0], problem[1], last)
    return VerifyReport(True, state.checked, None, "", last)


def _head_and_last(journal: LmdbJournal) -> tuple[bytes | None, int]:
    with journal._env.begin() as txn:
        head = txn.get(_META_HEAD, db=journal._db_meta)
        cursor = txn.cursor(db=journal._db_events)
        last = int.from_bytes(cursor.key(), "big") if cursor.last() else 0
        return (None if head is None else bytes(head)), last


def _read_chunk_raw_one(journal: LmdbJournal, seq: int) -> bytes | None:
    with journal._lock:
        return journal._txn_call(lambda: journal._get(journal._db_events, _seq_key(seq)))


def _verify_chunk(
    journal: LmdbJournal, chunk: list[tuple[int, bytes]], state: _VerifyState, *, decode: bool
) -> VerifyReport | None:
    hasher = journal._hasher
    prev = state.prev
    expected = state.expected
    index_sum = state.index_sum
    ids_sum = state.ids_sum
    codec_decode = journal._codec.decode
    for seq, value in chunk:
        if seq != expected:
            return VerifyReport(False, state.checked, expected, f"record {expected} is missing", seq)
        chain, body = value[:16], value[16:]
        h = hasher.copy()
        h.update(prev)
        h.update(body)
        if h.digest() != chain:
            return VerifyReport(
                False, state.checked, seq, "the record does not match its hash chain link", seq
            )
        try:
            stream_end = 1 + body[0]
            id_end = stream_end + 1 + body[stream_end]
            stream_raw = body[1:stream_end]
            id_raw = body[stream_end + 1 : id_end]
        except IndexError:
            return VerifyReport(False, state.checked, seq, "the record header is malformed", seq)
        key = seq.to_bytes(8, "big")
        index_sum += hash(stream_raw + b"\0" + key)
        ids_sum += hash(id_raw + key)
        if decode:
            try:
                codec_decode(memoryview(body)[id_end:])
            except EventError as exc:
                return VerifyReport(False, state.checked, seq, f"the record does not decode: {exc}", seq)
        prev = chain
        expected += 1
        state.checked += 1
    state.prev = prev
    state.expected = expected
    state.index_sum = index_sum
    state.ids_sum = ids_sum
    return None


def _verify_indexes(journal: LmdbJournal, state: _VerifyState, last: int) -> tuple[int | None, str] | None:
    with journal._lock:
        index_count, index_sum, ids_count, ids_sum = journal._txn_call(lambda: _index_digests(journal, last))
    if index_count != state.checked or (index_sum & _MASK64) != (state.index_sum & _MASK64):
        return _locate_index_problem(journal), "the stream index does not match the records"
    if ids_count != state.checked or (ids_sum & _MASK64) != (state.ids_sum & _MASK64):
        return None, "the event id index does not match the records"
    with journal._lock:
        snapshots = journal._txn_call(lambda: _all_snapshots(journal))
    for stream_raw, value in snapshots:
        seq_raw, data = value[16:24], value[24:]
        if len(value) < _SNAPSHOT_HEADER or value[:16] != journal._snapshot_hash(stream_raw, seq_raw, data):
            seq = int.from_bytes(seq_raw, "big") if len(seq_raw) == _SEQ_LEN else None
            return seq, f"the snapshot of {stream_raw.decode(errors='replace')!r} does not match its hash"
    return None


def _index_digests(journal: LmdbJournal, last: int) -> tuple[int, int, int, int]:
    """Counts and order-free digests of both indexes, over records up to ``last``."""
    index_count = index_sum = ids_count = ids_sum = 0
    limit = _seq_key(last)
    with journal._env.begin() as txn:
        for key in txn.cursor(db=journal._db_streams).iternext(keys=True, values=False):
            if key[-8:] <= limit:
                index_count += 1
                index_sum += hash(key)
        for key, value in txn.cursor(db=journal._db_ids).iternext():
            if value <= limit:
                ids_count += 1
                ids_sum += hash(key + value)
    return index_count, index_sum, ids_count, ids_sum


def _all_snapshots(journal: LmdbJournal) -> list[tuple[bytes, bytes]]:
    with journal._env.begin(db=journal._db_snapshots) as txn:
        return [(bytes(k), bytes(v)) for k, v in txn.cursor().iternext()]


def _locate_index_problem(journal: LmdbJournal) -> int | None:
    """The lowest seq whose stream index entry is missing or wrong (slow; only on failure)."""
    bad: int | None = None
    with journal._lock, journal._env.begin() as txn:
        events = txn.cursor(db=journal._db_events)
        streams_db = journal._db_streams
        for key, value in events.iternext():
            stream_end = 1 + value[16]
            if txn.get(value[17 : 16 + stream_end] + b"\0" + key, db=streams_db) is None:
                bad = int.from_bytes(key, "big")
                break
        for key in txn.cursor(db=streams_db).iternext(keys=True, values=False):
            seq_raw = key[-8:]
            record = txn.get(seq_raw, db=journal._db_events)
            stream_raw = key[:-9]
            if record is None or record[17 : 17 + record[16]] != stream_raw:
                seq = int.from_bytes(seq_raw, "big")
                bad = seq if bad is None else min(bad, seq)
                break
    return bad


def _head_problem(head: bytes | None, last: int, chain: bytes) -> tuple[int | None, str] | None:
    """What is wrong with the stored chain head, given the last record and its chain link."""
    if head is None or len(head) != _HEAD_LEN:
        return None, "the chain head is missing"
    head_seq, head_chain = int.from_bytes(head[:8], "big"), head[8:]
    if head_seq > last:
        return (
            last + 1,
            f"the chain head is at seq {head_seq} but records end at {last}: records were removed",
        )
    if head_seq < last:
        return head_seq + 1, f"the chain head was rolled back to seq {head_seq} while records go on to {last}"
    if head_chain != chain:
        return last, f"the chain head does not match record {last}"
    return None


class _VerifyState:
    __slots__ = ("checked", "expected", "ids_sum", "index_sum", "prev")

    def __init__(self, prev: bytes, expected: int) -> None:
        self.prev = prev
        self.expected = expected
        self.checked = 0
        self.index_sum = 0
        self.ids_sum = 0

"""Verification of an LMDB journal: the hash chain, the head, the indexes, the snapshots.

The stream links inside the records are covered by the chain; the ``anchors`` and
``ids`` databases are compared with what the records imply by order-free digests (an
anchor is a key alone: one holding a value is damage), and every stream's entry in
``heads`` with its last record, count and first record.

A module of ``LmdbJournal``'s own: it reads the journal's private state.
"""

from __future__ import annotations

import contextlib
import os
import struct
from typing import TYPE_CHECKING, Final, NamedTuple

import msgspec

from cogfabric.events import MAX_VALUE_DEPTH, EventError, UnknownEventTypeError
from cogfabric.events._codec import nests_too_deeply

from ._errors import unknown_type_advice
from ._journal import UNDECODABLE, VerifyReport
from ._record import (
    CHAIN_LEN,
    HEAD_LEN,
    event_id,
    head_value,
    is_name,
    last_seq_of,
    link_of,
    of_stream,
    parts,
    stream_part,
    summary,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    import lmdb

    from cogfabric.events import Event

    from ._journal import Record
    from ._lmdb import LmdbJournal

__all__ = ["unnamed_stream", "verify_journal"]

_CHAIN: Final = CHAIN_LEN
# The database layout of store/_lmdb.py (kept here too: _lmdb imports this module); the
# record layout is store/_record.py's.
_SEQ_LEN: Final = 8
_SNAPSHOT_HEADER: Final = 24
_MASK64: Final = (1 << 64) - 1
_ZERO_CHAIN: Final = bytes(16)
_META_HEAD: Final = b"head"
_HEAD_LEN: Final = 24  # a stream's head: last seq | count | first seq (store/_lmdb.py's _STREAM_HEAD_LEN)
_STREAM_HEAD: Final = struct.Struct(">3Q")  # the same, packed from the ints a scan of the records keeps
_ANCHOR_EVERY: Final = 64  # as store/_lmdb.py


def _seq_key(seq: int) -> bytes:
    return seq.to_bytes(8, "big")


def verify_journal(journal: LmdbJournal, after: int, *, decode: bool) -> VerifyReport:
    """See ``LmdbJournal.verify``."""
    return _verify(journal, after, decode=decode)


def _verify(journal: LmdbJournal, after: int, *, decode: bool) -> VerifyReport:
    # The head and the last record are read in one snapshot, and only records up to
    # it are checked: a writer appending meanwhile cannot make a clean journal fail.
    # The record a tail check starts after is read in that snapshot too.
    with journal._lock:
        head, stored_last, start = journal._txn_call(lambda: _head_and_last(journal, after))
    state = _VerifyState(prev=_ZERO_CHAIN, expected=after + 1, complete=after == 0)
    if after:
        if start is None:
            where = "missing" if after <= stored_last else f"past the last record, {stored_last}"
            return VerifyReport(False, 0, after, f"record {after} to verify from is {where}", stored_last)
        state.prev = start[-_CHAIN:]
    bad = _verify_records(journal, state, stored_last, decode=decode)
    if bad is not None:
        return bad
    last = state.expected - 1
    if last < stored_last:
        return VerifyReport(False, state.checked, last + 1, f"record {last + 1} is missing", stored_last)
    problem = _head_problem(head, last, state.prev, journal._key)
    if problem is not None:
        return VerifyReport(False, state.checked, problem[0], problem[1], last)
    if after == 0:
        problem = _stray_first_key(journal) or _verify_indexes(journal, state, last)
    else:
        problem = (
            _stream_name_problem(state.streams)
            or _tail_heads_problem(journal, state, last)
            or _other_heads_problem(journal, last)
        )
    if problem is not None:
        return VerifyReport(False, state.checked, problem[0], problem[1], last)
    return VerifyReport(True, state.checked, None, "", last)


def _verify_records(
    journal: LmdbJournal, state: _VerifyState, stored_last: int, *, decode: bool
) -> VerifyReport | None:
    """Check the records from ``state.expected`` up to ``stored_last``, a chunk at a time."""
    while state.expected <= stored_last:
        chunk = journal._read_pairs(state.expected - 1)
        if not chunk:
            break
        before = state.expected
        bad = _verify_chunk(journal, chunk, state, stored_last, decode=decode)
        if bad is not None:
            return msgspec.structs.replace(bad, head_seq=stored_last)
        if state.expected - before < len(chunk):
            break  # it stopped at a seq past the last record read with the head
    return None


def _key_problem(key: bytes, expected: int, last: int, checked: int) -> VerifyReport | None:
    """Why the records' database holds ``key`` where record ``expected`` belongs.

    None when ``key`` is a seq past ``last``: the records from ``expected`` on are
    missing (the caller names the first), or were appended since the head was read.
    """
    if len(key) != _SEQ_LEN:
        # Readers stop at it: the records past it are out of their reach.
        why = (
            f"the records' database holds a key that is no seq, {bytes(key).hex()}, after record "
            f"{expected - 1}: it was changed"
        )
        return VerifyReport(False, checked, expected, why)
    if int.from_bytes(key, "big") > last:
        return None
    return VerifyReport(False, checked, expected, f"record {expected} is missing")


def _stream_name_problem(streams: dict[bytes, list[int]]) -> tuple[int | None, str] | None:
    """A stream name must be one the journal writes: UTF-8, 1 to 255 bytes, no NUL (once per stream)."""
    for stream_raw in streams:  # its first seq is read for a message only
        try:
            stream_raw.decode()
        except UnicodeDecodeError:
            return streams[stream_raw][2], f"the record's stream name {stream_raw!r} is not UTF-8"
        if not is_name(stream_raw):
            return streams[stream_raw][2], f"the record's stream name {stream_raw!r} is one no writer makes"
    return None


def _tail_heads_problem(
    journal: LmdbJournal, state: _VerifyState, last: int
) -> tuple[int | None, str] | None:
    """In a tail check, each stream the tail holds records of must have its head at the last.

    A stream is read by walking down from its head, so a head set back would hide the
    records after it from a reader (recovery) that trusts the tail check. The first
    record the tail holds of a stream must link to a record of that stream (a link to
    another stream's record stops the walk with an error), or, linking to none, be the
    stream's first record as its head says (else the walk would stop there, silently
    leaving out the records before it), and then its head counts the stream's records in
    the tail exactly (the writer puts the stream's anchors by that count). A head past
    ``last`` (a record appended since the scan) must name a record of its stream, as in a
    full check: a reader and an append refuse one that names none. Three lookups per
    stream in the tail at most. Every head's fit with its records and anchors, the other
    streams' too, and the sum of the counts, ``_other_heads_problem`` checks.
    """
    streams = state.streams
    with journal._lock:
        found = journal._txn_call(lambda: _heads_of(journal, streams, state.tail_links, last))
    problems: list[tuple[int, str]] = []
    for (stream_raw, known), (value, linked, ahead) in zip(streams.items(), found, strict=True):
        name = stream_raw.decode(errors="replace")
        head_last = None if value is None else int.from_bytes(value[:8], "big")
        back = state.tail_links.get(stream_raw, 0)
        if head_last is None:
            problems.append((known[0], f"stream {name!r} is missing from the stream index"))
        elif len(value or b"") != _HEAD_LEN or (head_last != known[0] and head_last <= last):
            problems.append((known[0], f"the stream index's head of {name!r} does not match its records"))
        elif head_last > last and ahead != stream_raw:  # past last: appended since the scan, if it is there
            problems.append((known[0], f"the stream index's head of {name!r} names no record of it"))
        elif back and linked != stream_raw:
            why = f"the record's stream link points to seq {back}, not to a record of its stream"
            problems.append((known[2], why))
        elif not back and value is not None and value[16:] != _seq_key(known[2]):
            why = f"the record links to no earlier record, but the stream index has {name!r} start before it"
            problems.append((known[2], why))
        elif not back and head_last <= last and int.from_bytes((value or b"")[8:16], "big") != known[1]:
            # the whole stream is in the tail: its count is known, not only bounded
            problems.append((known[0], f"the stream index's head of {name!r} does not match its records"))
    return min(problems, default=None)


def _other_heads_problem(journal: LmdbJournal, last: int) -> tuple[int | None, str] | None:
    """In a tail check, every stream's head must fit its records, that of a stream the tail holds none of too.

    Such a stream is still read from its head (an ended session, a killed agent, the bus),
    and appended to from it: a head set back would hide the records after it, and the
    next append would link past them, so the journal failed a full check there for good.
    Each head must name a record of its stream; its first seq a record of its stream that
    links to none; the stream may have no anchor past its head, and one (at its 64th
    record) exactly when it counts 64 records or more; and the records its count puts
    after its last anchor (or from its first record) must fit at distinct seqs up to its
    head. The counts of all the heads must add up to the journal's records: a head
    removed, or set back with its count, leaves them short. One pass over the heads, four
    lookups each at most, in one snapshot; only on a failure are the records read
    (``_located_heads_problem``, ``_locate_anchor_problem``), to name what a full check names.

    Not found: a head set back to a record still after its stream's last anchor with its
    count kept, where the records after that anchor are spread out enough that the count
    still fits (only a walk of up to 63 of them would tell), nor counts moved between the
    heads of streams that start before the tail where each still fits (one lowered,
    another raised by as much: a stream that starts in the tail has its count checked
    exactly, ``_tail_heads_problem``). A full check finds both.
    """
    with journal._lock:
        found = journal._txn_call(lambda: _other_heads(journal))
    if found is None:
        return None
    with journal._lock:
        located = journal._txn_call(lambda: _located_heads_problem(journal, last))
    if located is None:
        anchor = _locate_anchor_problem(journal, last)  # an anchor past a head that fits
        located = anchor if anchor[0] is not None else None
    if located is not None:
        return located
    seq, why = found
    return (seq if seq is not None and 0 < seq <= last else None), why


def _other_heads(journal: LmdbJournal) -> tuple[int | None, str] | None:
    """The first problem of a head, or of the heads' counts (see above).

    A few lookups for every stream: with many streams it is most of a tail check's
    time (``bench/audit.py --only tail``).
    """
    with journal._env.begin(db=journal._db_events) as txn:
        events = txn.cursor()
        now = last_seq_of(events.key(), journal.path) if events.last() else 0
        anchors = txn.cursor(db=journal._db_anchors)
        record_of = txn.get  # the records' database is the transaction's own
        total = 0
        for key, value in txn.cursor(db=journal._db_heads).iternext():
            total += int.from_bytes(value[8:16], "big")
            problem = _other_head_problem(record_of, anchors, key, value)
            if problem is not None:
                return problem
    if total != now:
        counted = "1 record" if total == 1 else f"{total} records"
        return None, f"the stream index's heads count {counted}, but the journal holds {now}"
    return None


def _other_head_problem(
    record_of: Callable[[bytes], bytes | None], anchors: lmdb.Cursor[bytes], stream_raw: bytes, value: bytes
) -> tuple[int | None, str] | None:
    """What is wrong with a stream's head (None: nothing seen).

    Run once a stream: the stream's name is decoded for a message only.
    """
    last_raw = value[:8]
    if not is_name(stream_raw):
        return _head_said(stream_raw, last_raw, "the stream index names stream {!r}, which has no records")
    part = stream_part(stream_raw)
    record = record_of(last_raw) if len(last_raw) == _SEQ_LEN else None
    if record is None or not of_stream(record, part):
        return _head_said(stream_raw, last_raw, "the stream index's head of {!r} names no record of it")
    if _head_fits(record_of, anchors, stream_raw, value, part=part):
        return None
    return _head_said(stream_raw, last_raw, "the stream index's head of {!r} does not match its records")


def _head_said(stream_raw: bytes, last_raw: bytes, why: str) -> tuple[int, str]:
    """A head's problem: its last seq, and ``why`` with the stream's name."""
    return int.from_bytes(last_raw, "big"), why.format(stream_raw.decode(errors="replace"))


def _head_fits(
    record_of: Callable[[bytes], bytes | None],
    anchors: lmdb.Cursor[bytes],
    stream_raw: bytes,
    value: bytes,
    *,
    part: bytes,
) -> bool:
    """Whether a head's first seq, count and anchors fit its last seq (a record of its stream)."""
    last_raw, first_raw = value[:8], value[16:]
    head_last = int.from_bytes(last_raw, "big")
    count = int.from_bytes(value[8:16], "big")
    if len(value) != _HEAD_LEN or not 0 < count <= head_last or first_raw > last_raw:
        return False
    first = record_of(first_raw)
    if first is None or not of_stream(first, part) or link_of(first):
        return False
    prefix = stream_raw + b"\0"
    if anchors.set_range(prefix + last_raw + b"\0"):
        if _is_anchor_of(anchors.key(), prefix):
            return False  # an anchor past its head: set back past it
        below = anchors.prev()
    else:
        below = anchors.last()
    key = anchors.key() if below else b""
    anchor = int.from_bytes(key[-8:], "big") if _is_anchor_of(key, prefix) else 0
    if (count >= _ANCHOR_EVERY) != bool(anchor):
        return False  # an anchor at its 64th record, and one only then
    # the records its count puts after that anchor (or after its first) take distinct seqs up to its head
    after = count % _ANCHOR_EVERY if anchor else count - 1
    base = anchor or int.from_bytes(first_raw, "big")
    return head_last - base >= after and (head_last == base) == (not after)


def _is_anchor_of(key: bytes, prefix: bytes) -> bool:
    return key.startswith(prefix) and len(key) == len(prefix) + _SEQ_LEN


def _located_heads_problem(journal: LmdbJournal, last: int) -> tuple[int | None, str] | None:
    """What a full check says of the heads (slow: reads every record up to ``last``; on a failure only).

    None if it finds nothing wrong with them (an anchor, say, was what did not fit).
    """
    streams: dict[bytes, list[int]] = {}
    limit = _seq_key(last)
    with journal._env.begin() as txn:
        expected = 1
        for key, value in txn.cursor(db=journal._db_events).iternext():
            if key > limit:
                break
            if key != _seq_key(expected):
                return expected, f"record {expected} is missing"
            stream_raw = _stream_of(value)
            if stream_raw is None:
                return expected, "the record's framing is malformed"
            known = streams.get(stream_raw)
            if known is None:
                streams[stream_raw] = [expected, 1, expected]
            else:
                known[0], known[1] = expected, known[1] + 1
            expected += 1
        events = txn.cursor(db=journal._db_events)
        now = events.key() if events.last() else _seq_key(0)
        return _heads_problem(txn, journal, streams, last, now)


def _heads_of(
    journal: LmdbJournal, streams: dict[bytes, list[int]], links: dict[bytes, int], last: int
) -> list[tuple[bytes | None, bytes | None, bytes | None]]:
    """Each stream's head, and the streams of the records two seqs name (None: no record, or no seq).

    The seq its first record in the tail links to (if any), and its head's, past ``last``.
    """
    found: list[tuple[bytes | None, bytes | None, bytes | None]] = []
    limit = _seq_key(last)
    with journal._env.begin() as txn:
        for name in streams:
            stored = txn.get(name, db=journal._db_heads)
            value = None if stored is None else bytes(stored)
            back = links.get(name, 0)
            linked = _stream_of(txn.get(_seq_key(back), db=journal._db_events)) if back else None
            past = value is not None and value[:8] > limit
            ahead = _stream_of(txn.get(value[:8], db=journal._db_events)) if value and past else None
            found.append((value, linked, ahead))
    return found


def _stray_first_key(journal: LmdbJournal) -> tuple[None, str] | None:
    """Why the records database's first key is no seq (None when it is one, or there is none).

    A reader starts at seq 1 and would never see a key sorted before it; nor would the
    scan of the records.
    """

    def first_key() -> bytes | None:
        with journal._env.begin(db=journal._db_events) as txn:
            cursor = txn.cursor()
            return bytes(cursor.key()) if cursor.first() else None

    with journal._lock:
        first = journal._txn_call(first_key)
    if first is None or (len(first) == _SEQ_LEN and int.from_bytes(first, "big")):
        return None
    return (
        None,
        f"the records' database holds a key before seq 1 that is no seq, {first.hex()}: it was changed",
    )


def _head_and_last(journal: LmdbJournal, after: int) -> tuple[bytes | None, int, bytes | None]:
    """The chain head, the last record's seq and record ``after`` (if any), in one snapshot."""
    with journal._env.begin() as txn:
        head = txn.get(_META_HEAD, db=journal._db_meta)
        cursor = txn.cursor(db=journal._db_events)
        last = last_seq_of(cursor.key(), journal.path) if cursor.last() else 0
        start = txn.get(_seq_key(after), db=journal._db_events) if after else None
        return (None if head is None else bytes(head)), last, (None if start is None else bytes(start))


def _verify_chunk(
    journal: LmdbJournal, chunk: list[tuple[bytes, bytes]], state: _VerifyState, last: int, *, decode: bool
) -> VerifyReport | None:
    hasher = journal._hasher
    prev = state.prev
    expected = state.expected
    anchors_sum = state.anchors_sum
    anchors_count = state.anchors_count
    ids_sum = state.ids_sum
    salt = state.salt
    streams = state.streams
    codec_decode = journal._codec.decode
    record_decode = journal._record_decoder  # one msgspec call for a current record
    # A tail check's first seq (expected and checked advance together): the first record
    # it sees of a stream links to one before it, as the tail holds none of that stream's.
    tail_start = state.expected - state.checked
    for key, value in chunk:
        seq = expected
        if seq > last or key != seq.to_bytes(8, "big"):
            # past the last record read with the head (appended since), a gap, or a stray key
            stop = None if seq > last else _key_problem(key, seq, last, state.checked)
            if stop is None:
                break
            return stop
        chain = value[-_CHAIN:]
        h = hasher.copy()
        h.update(prev)
        h.update(value[:-_CHAIN])
        if len(value) <= _CHAIN or h.digest() != chain:
            return VerifyReport(
                False, state.checked, seq, "the record does not match its hash chain link", seq
            )
        record = summary(value)
        if record is None or record[0] != seq:
            why = "the record's framing is malformed"
            if record is not None:
                why = f"the record holds seq {record[0]}, not the seq it is stored at"
            return VerifyReport(False, state.checked, seq, why, seq)
        _, id_raw, stream_raw, back = record
        known = streams.get(stream_raw)
        if known is None:
            known = streams[stream_raw] = [0, 0, seq]
            # in a full check, a stream's first record links to none
            expected_back = 0 if state.complete else _first_link(state, stream_raw, back, tail_start)
        else:
            expected_back = known[0]
        if back != expected_back or back >= seq:
            why = f"the record's stream link points to seq {back}, not to its stream's previous record"
            return VerifyReport(False, state.checked, seq, why, seq)
        known[0] = seq
        count = known[1] = known[1] + 1
        if not count % _ANCHOR_EVERY:
            anchors_sum += hash(salt + stream_raw + b"\0" + key)
            anchors_count += 1
        ids_sum += hash(salt + id_raw + key)
        if decode and (problem := _event_problem(record_decode, codec_decode, value, stream_raw)):
            return VerifyReport(False, state.checked, seq, problem, seq)
        prev = chain
        expected += 1
        state.checked += 1
    state.prev = prev
    state.expected = expected
    state.anchors_sum = anchors_sum
    state.anchors_count = anchors_count
    state.ids_sum = ids_sum
    return None


def _first_link(state: _VerifyState, stream_raw: bytes, back: int, tail_start: int) -> int:
    """The link the first record a tail check sees of a stream must have (in a full check: none, 0).

    A tail check starts mid-stream: any link from before the tail, which is kept for
    ``_tail_heads_problem`` (it must name a record of this stream, or none where the
    stream starts); one inside the tail is refused (-1, no link's).
    """
    if back >= tail_start:
        return -1
    if back:
        state.tail_links[stream_raw] = back
    return back


def _event_problem(
    record_decode: Callable[[bytes], Record] | None,
    codec_decode: Callable[[bytes], Event],
    value: bytes,
    stream_raw: bytes,
) -> str | None:
    """Why a record's event cannot be replayed as the record is filed, or None.

    One msgspec call decodes a current record; else the codec's checked decode
    upcasts an older version, or names the problem. An event of another stream than
    the one its record is filed under would be given to that other stream by replay.
    """
    event: Event | None = None
    if record_decode is not None:
        with contextlib.suppress(msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            event = record_decode(value).event
    if event is None:
        taken = parts(value)
        try:
            event = codec_decode(b"" if taken is None else taken.event)
        except EventError as exc:  # an unknown type: what writes it, as a newer version's error says
            why = f"{exc}: {unknown_type_advice()}" if isinstance(exc, UnknownEventTypeError) else str(exc)
            return f"{UNDECODABLE}: {why}"
    # how deep a reader can decode depends on its stack; the record's array is one more level
    if len(value) > MAX_VALUE_DEPTH and nests_too_deeply(value, around=1):
        return f"{UNDECODABLE}: it nests lists and maps deeper than {MAX_VALUE_DEPTH} levels"
    try:
        stream = event.stream
        filed = stream.encode() == stream_raw
    except Exception as exc:  # noqa: BLE001 - an event type's stream is its own code: named
        return unnamed_stream(event, exc)
    if not filed:
        try:
            name = stream_raw.decode()
        except UnicodeDecodeError:
            return None  # the check of its stream names that, more precisely
        return f"the record is filed under stream {name!r}, but its event is of {stream!r}"
    return None


def unnamed_stream(event: Event, exc: Exception) -> str:
    """Why a record is refused whose event's type raised computing its stream."""
    return f"its event's stream cannot be named: {type(event).__name__}.stream raised {exc!r}"


def _verify_indexes(journal: LmdbJournal, state: _VerifyState, last: int) -> tuple[int | None, str] | None:
    """Check the anchors, ids, stream heads and snapshots against what the scan of the records saw.

    Each index is read with a cursor and checked as it goes: beside what the scan keeps
    for each stream, memory does not grow with the journal (a snapshot is read one at a
    time, whatever the agents' states weigh). Only on a failure, naming the first wrong
    anchor (``_locate_anchor_problem``) holds the anchors' keys, one per 64 records of a stream.
    """
    with journal._lock:
        digests = journal._txn_call(lambda: _index_digests(journal, last, state.streams, state.salt))
    if isinstance(digests, _Problem):
        return digests
    anchors_count, anchors_sum, ids_count, ids_sum, heads_problem = digests
    if anchors_count != state.anchors_count or (anchors_sum & _MASK64) != (state.anchors_sum & _MASK64):
        return _locate_anchor_problem(journal, last)
    if ids_count != state.checked or (ids_sum & _MASK64) != (state.ids_sum & _MASK64):
        return _locate_id_problem(journal, last), "the event id index does not match the records"
    problem = _stream_name_problem(state.streams) or heads_problem
    if problem is not None:
        return problem
    with journal._lock:
        return journal._txn_call(lambda: _snapshots_problem(journal, last))


def _snapshots_problem(journal: LmdbJournal, last: int) -> tuple[int | None, str] | None:
    """The first snapshot that does not match its hash, read one at a time."""
    with journal._env.begin(db=journal._db_snapshots) as txn:
        for stream_raw, value in txn.cursor().iternext():
            seq_raw, data = value[16:24], value[24:]
            if len(value) < _SNAPSHOT_HEADER or value[:16] != journal._snapshot_hash(
                bytes(stream_raw), bytes(seq_raw), bytes(data)
            ):
                seq: int | None = int.from_bytes(seq_raw, "big") if len(seq_raw) == _SEQ_LEN else None
                if seq is not None and not 0 < seq <= last:
                    seq = None  # a changed seq names no record of this journal
                name = bytes(stream_raw).decode(errors="replace")
                return seq, f"the snapshot of {name!r} does not match its hash"
    return None


class _HeadsCheck:
    """Every stream's head must name its last record, count and first record; none may be extra or missing.

    Fed the heads database's entries one by one (``see``, or ``see_moved`` for a head an
    append moved past the records checked); ``problem`` then names the first problem
    met, or a stream the index lacks. A stream's name is decoded for a message only.
    """

    def __init__(self, streams: dict[bytes, list[int]]) -> None:
        self.streams = streams
        self.matched = 0
        self.found: tuple[int | None, str] | None = None

    def see(self, stream_raw: bytes, value: bytes) -> None:
        """A head at most the last record checked: it must be ``_STREAM_HEAD`` of what the scan saw."""
        if self.found is not None:
            return
        expected = self.streams.get(stream_raw)
        if expected is None:
            name = stream_raw.decode(errors="replace")
            head_last = int.from_bytes(value[:8], "big")
            self.found = head_last or None, f"the stream index names stream {name!r}, which has no records"
        elif value != _STREAM_HEAD.pack(*expected):  # its length too
            name = stream_raw.decode(errors="replace")
            self.found = expected[0], f"the stream index's head of {name!r} does not match its records"
        else:
            self.matched += 1

    def see_moved(self, stream_raw: bytes) -> None:
        """A head past the last record checked, naming a record of its stream: moved by an append since."""
        self.matched += stream_raw in self.streams

    def problem(self, txn: lmdb.Transaction[bytes], db: lmdb._Database) -> tuple[int | None, str] | None:
        if self.found is not None or self.matched == len(self.streams):
            return self.found
        # a name no writer makes may be no key LMDB takes: the name check reports it first
        unlisted = (
            known[0]
            for stream, known in self.streams.items()
            if is_name(stream) and txn.get(stream, db=db) is None
        )
        return min(unlisted, default=None), "a stream is missing from the stream index"


_Digests = tuple[int, int, int, int, tuple[int | None, str] | None]


class _Problem(NamedTuple):
    seq: int | None
    why: str


def _index_digests(
    journal: LmdbJournal, last: int, streams: dict[bytes, list[int]], salt: bytes
) -> _Digests | _Problem:
    """Counts and order-free digests of the anchors and ids up to ``last``, and the heads' problem.

    A digest is a sum of ``hash(salt + entry)`` (``_VerifyState.salt``), as the scan of
    the records sums what each entry should be.

    Entries past ``last`` belong to appends made since the check began: each must name
    a record that exists now, and a head or anchor a record of its own stream, or the
    entry is reported as a ``_Problem`` that names no seq (the report's seqs stay within
    the records checked, ``head_seq``, whatever another process appends meanwhile).
    """
    anchors_count = anchors_sum = ids_count = ids_sum = 0
    limit = _seq_key(last)
    with journal._env.begin() as txn:
        events = txn.cursor(db=journal._db_events)
        now = events.key() if events.last() else _seq_key(0)
        for key, value in txn.cursor(db=journal._db_anchors).iternext():
            if key[-8:] <= limit:
                anchors_count += 1
                # an anchor is a key alone: one holding a value sums as no true one does
                anchors_sum += hash(salt + key) if not value else hash(salt + key + b"\0" + value)
            elif value:
                return _Problem(None, _VALUED_ANCHOR)
            elif not _names_record_of(txn, journal, key[-8:], key[:-9], now):
                return _Problem(None, "the stream index names a record that is not there")
        for key, value in txn.cursor(db=journal._db_ids).iternext():
            if len(value) != _SEQ_LEN:
                # No seq, so the index does not match (-1 is no count of records); counted,
                # the entry could stand in for a true one: an id and its seq re-cut as a
                # key of both and an empty value hash alike. _locate_id_problem then names
                # the record whose id has no entry.
                ids_count = -1
                break
            if value <= limit:
                ids_count += 1
                ids_sum += hash(salt + key + value)
            elif value > now:
                seq = int.from_bytes(value, "big")
                return _Problem(None, f"the event id index names seq {seq}, past the last record")
        heads_problem = _heads_problem(txn, journal, streams, last, now)
        if isinstance(heads_problem, _Problem):  # a head past ``last`` naming no record
            return heads_problem
    return anchors_count, anchors_sum, ids_count, ids_sum, heads_problem


def _heads_problem(
    txn: lmdb.Transaction[bytes], journal: LmdbJournal, streams: dict[bytes, list[int]], last: int, now: bytes
) -> tuple[int | None, str] | None:
    """The stream index's heads against what a scan of the records up to ``last`` saw (``streams``).

    A head past ``last`` (an append since the scan) must name a record of its stream
    that exists ``now`` (the last key): else a ``_Problem`` naming no seq, reported
    before the other indexes' problems; the heads' other problems come as a plain tuple.
    """
    limit = _seq_key(last)
    heads = _HeadsCheck(streams)
    for key, value in txn.cursor(db=journal._db_heads).iternext():
        if value[:8] <= limit:
            heads.see(key, value)
        elif _names_record_of(txn, journal, value[:8], key, now):
            heads.see_moved(key)
        else:
            why = f"the stream index's head of {key.decode(errors='replace')!r} names no record of it"
            return _Problem(None, why)
    return heads.problem(txn, journal._db_heads)


def _names_record_of(
    txn: lmdb.Transaction[bytes], journal: LmdbJournal, key: bytes, stream: bytes, now: bytes
) -> bool:
    """Whether seq ``key`` (at most ``now``) holds a record of ``stream``."""
    if len(key) != _SEQ_LEN or key > now:
        return False
    return _stream_of(txn.get(key, db=journal._db_events)) == stream


_VALUED_ANCHOR: Final = "the stream index holds an anchor with a value (anchors are empty)"


def _locate_anchor_problem(journal: LmdbJournal, last: int) -> tuple[int | None, str]:
    """The lowest seq whose anchor is missing, extra, wrong or holds a value, and why (slow: on failure)."""
    with journal._lock:  # a close() meanwhile: JournalClosedError, not a storage failure
        expected, stored, valued = journal._txn_call(lambda: _anchor_sets(journal, _seq_key(last)))
    wrong = expected ^ stored
    first = min((int.from_bytes(key[-8:], "big") for key in wrong), default=None)
    first_valued = min((int.from_bytes(key[-8:], "big") for key in valued), default=None)
    if first_valued is not None and (first is None or first_valued <= first):
        return first_valued, _VALUED_ANCHOR
    return first, "the stream index does not match the records"


def _anchor_sets(journal: LmdbJournal, limit: bytes) -> tuple[set[bytes], set[bytes], set[bytes]]:
    """The anchors the records up to ``limit`` call for, the empty ones stored, those with a value."""
    expected: set[bytes] = set()
    counts: dict[bytes, int] = {}
    stored: set[bytes] = set()
    valued: set[bytes] = set()
    with journal._env.begin() as txn:
        for key, value in txn.cursor(db=journal._db_events).iternext():
            if key > limit:
                break
            stream_raw = bytes(_stream_of(value) or b"")
            count = counts[stream_raw] = counts.get(stream_raw, 0) + 1
            if not count % _ANCHOR_EVERY:
                expected.add(stream_raw + b"\0" + bytes(key))
        for key, value in txn.cursor(db=journal._db_anchors).iternext():
            if key[-8:] <= limit:
                (valued if value else stored).add(bytes(key))
    return expected, stored, valued


def _stream_of(record: bytes | None) -> bytes | None:
    """The stream in a stored record's trailer; None if there is no record or it is malformed."""
    taken = None if record is None else parts(bytes(record))
    return None if taken is None else taken.stream


def _id_of(record: bytes | None) -> bytes | None:
    """The event id in a stored record's event; None if there is no record or it is malformed."""
    taken = None if record is None else parts(bytes(record))
    return None if taken is None else event_id(taken.event)


def _locate_id_problem(journal: LmdbJournal, last: int) -> int | None:
    """The lowest seq whose id entry is missing or wrong (slow, bounded memory; only on failure)."""
    with journal._lock:  # a close() meanwhile: JournalClosedError, not a storage failure
        return journal._txn_call(lambda: _first_bad_id(journal, _seq_key(last)))


def _first_bad_id(journal: LmdbJournal, limit: bytes) -> int | None:
    bad: int | None = None
    with journal._env.begin() as txn:
        ids_db = journal._db_ids
        for key, value in txn.cursor(db=journal._db_events).iternext():
            if key > limit:
                break
            id_raw = _id_of(value)
            if not id_raw or txn.get(id_raw, db=ids_db) != key:  # LMDB refuses an empty key
                bad = int.from_bytes(key, "big")
                break
        for id_raw, seq_raw in txn.cursor(db=ids_db).iternext():
            if len(seq_raw) != _SEQ_LEN:
                continue  # no seq: its id's record, if any, was named above; a stray one names none
            if seq_raw <= limit and _id_of(txn.get(seq_raw, db=journal._db_events)) != id_raw:
                seq = int.from_bytes(seq_raw, "big")
                bad = seq if bad is None else min(bad, seq)
    return bad


def _head_problem(head: bytes | None, last: int, chain: bytes, key: bytes) -> tuple[int | None, str] | None:
    """What is wrong with the stored chain head, given the last record, its chain link, the key."""
    if head is None or len(head) != HEAD_LEN:
        return None, "the chain head is missing"
    head_seq, head_chain = int.from_bytes(head[:8], "big"), head[8 : 8 + CHAIN_LEN]
    if head_seq > last:
        return (
            last + 1,
            f"the chain head is at seq {head_seq} but records end at {last}: records were removed",
        )
    if head_seq < last:
        return head_seq + 1, f"the chain head was rolled back to seq {head_seq} while records go on to {last}"
    if head_chain != chain:
        return last, f"the chain head does not match record {last}"
    if head_value(head[:8], head_chain, key) != head:
        # Keyed: a head pointed at the last record left after records were cut off the
        # end, by someone without the key, fails here (with no key, anyone can make one).
        return last, f"the chain head's tag does not match it: the head at seq {last} was set without the key"
    return None


class _VerifyState:
    __slots__ = (
        "anchors_count",
        "anchors_sum",
        "checked",
        "complete",
        "expected",
        "ids_sum",
        "prev",
        "salt",
        "streams",
        "tail_links",
    )

    def __init__(self, prev: bytes, expected: int, *, complete: bool) -> None:
        self.prev = prev
        self.expected = expected
        self.complete = complete
        """Whether the check starts at the first record (so it sees every stream whole)."""
        self.checked = 0
        self.anchors_sum = 0
        self.anchors_count = 0
        self.ids_sum = 0
        self.salt = os.urandom(16)
        """Prefixed to every index entry the digests hash: Python's ``hash`` of bytes is
        SipHash keyed by the process's seed, which ``PYTHONHASHSEED`` fixes (0: a known
        key), and with a known key entries forged to sum to the true digest could be
        computed; with a fresh random prefix for each check they cannot be made in advance."""
        self.streams: dict[bytes, list[int]] = {}
        """stream -> [last seq, count, first seq] of the records checked so far."""
        self.tail_links: dict[bytes, int] = {}
        """In a tail check, stream -> the link of its first record there, when not 0."""

"""The LMDB journal's record layout (since format 3), in one place for the writer, readers and verify.

A record is one msgpack array of three elements, so that replay decodes it straight
into a ``Record`` in one msgspec call, with no slicing in Python::

    0x93 | 0xcf seq(8) | event (msgpack) | 0xc5 len(2) | trailer

    trailer = stream | len(stream)(1) | link(8) | chain(16)

``link`` is the seq of the stream's previous record (0 for its first) and
``chain = BLAKE2b-128(previous record's chain | every byte of this record before its
chain)``, keyed when the journal has a key. The trailer is read from its end, so a
stream walk finds a link at a fixed place. Everything in front of the link is the same
for every record of a stream, so the writer joins five pieces per record.

The event id is not repeated in the trailer (the event holds it): verify reads it from
the event with a decoder that skips every other field.
"""

from __future__ import annotations

import hashlib
from typing import Final, NamedTuple

import msgspec

from ._errors import JournalIntegrityError

__all__ = [
    "CHAIN_LEN",
    "HEAD_LEN",
    "LINK_AT",
    "MAX_NAME",
    "MIN_TRAILER_AT",
    "PREFIX",
    "TRAILER_FIXED",
    "TRAILER_HEADERS",
    "RecordParts",
    "event_id",
    "head_value",
    "is_name",
    "last_seq_of",
    "link_of",
    "of_stream",
    "parts",
    "stream_part",
    "summary",
]

CHAIN_LEN: Final = 16
HEAD_LEN: Final = 8 + 2 * CHAIN_LEN
"""The chain head (the ``head`` key of the meta database): last seq, its chain link, tag."""
PREFIX: Final = b"\x93\xcf"  # a 3-element array, then the seq as a uint64
_EVENT_AT: Final = 10  # after the prefix and the 8-byte seq
LINK_AT: Final = -CHAIN_LEN - 8
"""Where a record's stream link starts, counted from its end."""
TRAILER_FIXED: Final = 1 + 8 + CHAIN_LEN
"""The trailer's bytes beside the stream's name: len(stream) | link | chain."""
MIN_TRAILER_AT: Final = 10 + 1 + 3
"""The least offset of a trailer: the prefix and the seq, an event of one byte, the bin16 header."""
TRAILER_HEADERS: Final = tuple(b"\xc5" + (n + TRAILER_FIXED).to_bytes(2, "big") for n in range(256))
"""The trailer's bin16 header of a record, for each length of its stream's name."""


MAX_NAME: Final = 255
"""The most UTF-8 bytes of a stream's name or an event's id (a trailer holds its length in a byte)."""


def is_name(raw: bytes) -> bool:
    """Whether ``raw`` is a stream name the journal writes: 1 to ``MAX_NAME`` bytes, no NUL.

    (Whether it is UTF-8 the callers check, as each needs the text or says why it is not.)
    """
    return 0 < len(raw) <= MAX_NAME and b"\0" not in raw


def stream_part(stream_raw: bytes) -> bytes:
    """What every record of ``stream_raw`` holds between its event and its link.

    The trailer's bin16 header, the stream's name and its length: the writer's
    per-stream constant, and what a stream walk compares.
    """
    return b"%s%s%c" % (TRAILER_HEADERS[len(stream_raw)], stream_raw, len(stream_raw))


def of_stream(record: bytes | memoryview, part: bytes) -> bool:
    """Whether ``record`` is framed as a record of the stream whose ``stream_part`` is ``part``."""
    return record[:2] == PREFIX and record[LINK_AT - len(part) : LINK_AT] == part


def link_of(record: bytes | memoryview) -> int:
    """The stream link of a record (the seq of its stream's previous record)."""
    return int.from_bytes(record[LINK_AT:-CHAIN_LEN], "big")


class RecordParts(NamedTuple):
    """A record taken apart (for verify and the slow read path)."""

    seq: int
    event: bytes
    trailer: bytes
    link: int
    stream: bytes


def _trailer_at(record: bytes) -> int | None:
    """Where a record's trailer starts; None when its framing is malformed.

    The framing: the array's head, a length that holds a trailer, and the trailer's
    bin16 header, which must give the length the stream's name implies.
    """
    if len(record) < MIN_TRAILER_AT + TRAILER_FIXED + 1 or record[:2] != PREFIX:
        return None
    stream_len = record[LINK_AT - 1]
    trailer_at = len(record) - TRAILER_FIXED - stream_len
    if trailer_at < MIN_TRAILER_AT or record[trailer_at - 3 : trailer_at] != TRAILER_HEADERS[stream_len]:
        return None
    return trailer_at


def parts(record: bytes) -> RecordParts | None:
    """Take a stored record apart; None when its framing is malformed."""
    trailer_at = _trailer_at(record)
    if trailer_at is None:
        return None
    return RecordParts(
        seq=int.from_bytes(record[2:_EVENT_AT], "big"),
        event=record[_EVENT_AT : trailer_at - 3],
        trailer=record[trailer_at:],
        link=link_of(record),
        stream=record[trailer_at : LINK_AT - 1],
    )


class _EventId(msgspec.Struct, gc=False):
    id: str


class _SeqAndId(msgspec.Struct, array_like=True, gc=False):
    """A record's seq and its event's id; the event's other fields and the trailer are skipped."""

    seq: int
    event: _EventId


_id_decoder: Final = msgspec.msgpack.Decoder(_EventId)

_seq_and_id: Final = msgspec.msgpack.Decoder(_SeqAndId)


def summary(record: bytes) -> tuple[int, bytes, bytes, int] | None:
    """A record's seq, event id, stream and link, for verify; None when its framing is malformed.

    Cheaper than ``parts``: one msgspec call that skips the event's other fields, and
    a few slices. It checks the framing ``parts`` checks and that the event has an id.
    Whether the event decodes is ``verify(decode=True)``'s check.
    """
    trailer_at = _trailer_at(record)
    if trailer_at is None:
        return None
    try:
        head = _seq_and_id.decode(record)
        id_raw = head.event.id.encode()
    except (msgspec.DecodeError, RecursionError, UnicodeEncodeError):
        return None
    return head.seq, id_raw, record[trailer_at : LINK_AT - 1], link_of(record)


def event_id(event: bytes) -> bytes | None:
    """The id inside an encoded event, every other field skipped; None if it has none."""
    try:
        return _id_decoder.decode(event).id.encode()
    except (msgspec.DecodeError, RecursionError, UnicodeEncodeError):
        return None


def head_value(seq_raw: bytes, chain: bytes, key: bytes) -> bytes:
    """The chain head for the record ``seq_raw`` whose chain link is ``chain``.

    ``seq | chain | tag``, the tag a BLAKE2b-128 of the first two keyed with the
    journal's key: the chain link of a record is in the record, so without the tag
    anyone could cut records off the end and point the head at the last one left. With
    a key, only its holder can (or whoever kept an older head).
    """
    tag = hashlib.blake2b(b"cogfabric head" + seq_raw + chain, digest_size=CHAIN_LEN, key=key).digest()
    return seq_raw + chain + tag


def last_seq_of(key: bytes, where: object) -> int:
    """The seq of the records database's last key, which must be a seq's 8 bytes.

    A shorter key sorts after every seq: taken for the last record, it would hide the
    records past it from every reader and from ``verify``'s scan.

    Raises:
        JournalIntegrityError: the key is no seq (it was put there by hand).

    """
    if len(key) != 8:  # noqa: PLR2004 - a seq key is 8 big-endian bytes
        msg = f"{where}: its last record's key, {bytes(key).hex()}, is no seq: it was changed"
        raise JournalIntegrityError(msg)
    return int.from_bytes(key, "big")

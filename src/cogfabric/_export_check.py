"""Check a verifiable export (``cogfabric export --verifiable``) without its journal.

Each line of such an export holds, beside the fields people read, the record's bytes
as stored (``record``, base64) and the chain link of the record before it (``prev``,
hex). A line checks out when:

- its record, chained to ``prev``, gives the record's own link (BLAKE2b-128, keyed
  with the journal's key when it has one), which is the line's ``chain``;
- the line is byte for byte what export writes for that record (its readable fields
  cannot be changed apart from the bytes the chain covers, nor a key repeated that
  another JSON reader would take otherwise);
- it follows the line before it: the next seq, with ``prev`` that line's ``chain``
  (seq 1 links to 16 zero bytes).

What that proves is consistency, not origin: anyone can compute an unkeyed chain, so
a whole export made up from nothing checks out. Compare its last link (or any) with
an anchor of the journal's head kept elsewhere (``--anchor``), or give the key of a
keyed journal, which a forger does not hold. An anchor backs the lines up to its seq
only: anyone can chain made-up records onto a link they know, so the lines past the
last anchor (all of them, when it is the first line's ``prev``) are backed by nothing
but a key (``ExportReport.anchored_to``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import TYPE_CHECKING, Any, Final

import msgspec

from cogfabric._audit import encode_json, export_line
from cogfabric.events import EventError, decode
from cogfabric.store import Record
from cogfabric.store._lmdb import _normalise_key
from cogfabric.store._record import CHAIN_LEN, parts

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = ["ExportReport", "parse_anchor", "verify_export"]

_ZERO: Final = bytes(CHAIN_LEN)
_canonical: Final = msgspec.json.Encoder(order="sorted")
_VERIFIABLE_FIELDS: Final = ("seq", "chain", "prev", "record")


class ExportReport(msgspec.Struct, frozen=True):
    """The outcome of ``verify_export``."""

    ok: bool
    lines: int
    """How many lines checked out (before the bad one, when not ``ok``)."""
    first_seq: int | None = None
    """The seq of the first line (None for an empty export)."""
    last_seq: int | None = None
    """The seq of the last line that checked out."""
    prev: str | None = None
    """The first line's ``prev``: the link it chains on (zeros when it is seq 1)."""
    last_chain: str | None = None
    """The chain link of the last line that checked out, hex: compare it with an anchor."""
    anchors: int = 0
    """How many ``anchors`` matched."""
    anchored_to: int | None = None
    """The highest seq a matched anchor pins: an anchor backs the lines up to it, not
    those past it (anyone can chain records onto a link). None when none matched."""
    bad_line: int | None = None
    """The line (from 1) found bad, or None (when ``ok``, or when an anchor is missing)."""
    reason: str = ""
    """Why the export is not ok; empty when it is."""


def parse_anchor(text: str) -> tuple[int, bytes]:
    """``SEQ:CHAIN`` (a seq and its chain link, hex, as ``inspect --json`` shows a head).

    Raises:
        ValueError: it is not of that form.

    """
    seq_text, sep, chain_text = text.partition(":")
    try:
        seq = int(seq_text)
        chain = bytes.fromhex(chain_text)
    except ValueError:
        seq, chain = -1, b""
    if not sep or seq < 0 or len(chain) != CHAIN_LEN:
        msg = f"an anchor is SEQ:CHAIN, a seq and its {CHAIN_LEN}-byte chain link in hex, not {text!r}"
        raise ValueError(msg)
    return seq, chain


class _Checker:
    """The state of one check: where the lines got to, and what was anchored."""

    def __init__(self, key: bytes | str | None, anchors: Mapping[int, bytes] | None) -> None:
        self.hasher = hashlib.blake2b(digest_size=CHAIN_LEN, key=_normalise_key(key))
        self.wanted = dict(anchors or {})
        self.matched = 0
        self.anchored_to: int | None = None
        self.count = 0
        self.first_seq: int | None = None
        self.first_prev: bytes = b""
        self.last_seq: int | None = None
        self.last_chain = b""

    def take(self, line: bytes | str) -> str | None:
        """Check the next line and take it; or why it is bad."""
        checked = _checked_line(line, self.hasher)
        if isinstance(checked, str):
            return checked
        seq, prev, chain = checked
        if self.last_seq is None:
            if seq < 1:
                return f"its seq {seq} is no journal's: a journal's seqs start at 1"
            if seq == 1 and prev != _ZERO:
                return f"its prev must be {CHAIN_LEN} zero bytes: seq 1 links to no record"
            problem = self._anchor(seq - 1, prev, "its prev")
            self.first_seq, self.first_prev = seq, prev
        elif seq != self.last_seq + 1:
            problem = (
                f"its seq {seq} does not follow seq {self.last_seq}: an export holds consecutive records"
            )
        elif prev != self.last_chain:
            problem = f"its prev is not the chain link of seq {self.last_seq}, the line before it"
        else:
            problem = None
        problem = problem or self._anchor(seq, chain, "its chain")
        if problem is None:
            self.last_seq, self.last_chain = seq, chain
            self.count += 1
        return problem

    def _anchor(self, seq: int, chain: bytes, what: str) -> str | None:
        anchored = self.wanted.get(seq)
        if anchored is None:
            return None
        if anchored != chain:
            return f"{what} is not the anchor of seq {seq}: {chain.hex()}, anchored {anchored.hex()}"
        self.matched += 1
        self.anchored_to = seq if self.anchored_to is None else max(self.anchored_to, seq)
        return None

    def report(self, bad_line: int | None = None, reason: str = "") -> ExportReport:
        if not reason:
            held = (
                range(-1) if self.first_seq is None else range(self.first_seq - 1, (self.last_seq or 0) + 1)
            )
            missing = sorted(seq for seq in self.wanted if seq not in held)
            if missing:
                first, last = self.first_seq, self.last_seq
                where = f"seq {last}" if first == last else f"seqs {first} to {last}"
                where = "no records" if last is None else where
                reason = f"anchor seq {missing[0]} is not in the export, which holds {where}"
        some = self.last_seq is not None
        return ExportReport(
            ok=not reason,
            lines=self.count,
            first_seq=self.first_seq,
            last_seq=self.last_seq,
            prev=self.first_prev.hex() if self.first_seq is not None else None,
            last_chain=self.last_chain.hex() if some else None,
            anchors=self.matched,
            anchored_to=self.anchored_to,
            bad_line=bad_line,
            reason=reason,
        )


def verify_export(
    lines: Iterable[bytes | str],
    *,
    key: bytes | str | None = None,
    anchors: Mapping[int, bytes] | None = None,
) -> ExportReport:
    """Check the lines of a verifiable export, streamed (one line in memory at a time).

    ``key``: the chain key the journal was written with (bytes, or text as UTF-8).
    ``anchors``: seq to chain link; each must be the ``chain`` of the line of that seq,
    or the first line's ``prev`` (for the seq before it). Blank last lines are allowed
    (a file ends with a newline).

    Raises:
        TypeError, ValueError: ``key`` is no chain key (as ``Journal.open``'s).

    """
    checker = _Checker(key, anchors)
    blank: int | None = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            blank = number if blank is None else blank
            continue
        if blank is not None:
            return checker.report(blank, f"line {blank}: it is blank, and lines follow it")
        problem = checker.take(line)
        if problem is not None:
            after = "" if checker.last_seq is None else f" (after seq {checker.last_seq})"
            return checker.report(number, f"line {number}{after}: {problem}")
    return checker.report()


def _checked_line(line: bytes | str, hasher: Any) -> tuple[int, bytes, bytes] | str:  # noqa: ANN401 - a blake2b
    """One line's seq, prev and chain link, once its record and fields check out; or why not."""
    raw = (line.encode() if isinstance(line, str) else bytes(line)).removesuffix(b"\n").removesuffix(b"\r")
    parsed = _parsed(raw)
    if isinstance(parsed, str):
        return parsed
    fields, stored, prev = parsed
    h = hasher.copy()
    h.update(prev)
    h.update(stored[:-CHAIN_LEN])
    if len(stored) <= CHAIN_LEN or h.digest() != stored[-CHAIN_LEN:]:
        return "its record does not match its hash-chain link (it was changed, or the chain key is wrong)"
    made = _line_of(stored, prev)
    if isinstance(made, str):
        return made
    if raw != made:  # byte for byte: no repeated key that another JSON reader takes otherwise
        return _differing(fields, msgspec.json.decode(made))
    return int(fields["seq"]), prev, stored[-CHAIN_LEN:]


def _parsed(line: bytes) -> tuple[dict[str, Any], bytes, bytes] | str:
    """A line's fields, its record's bytes and its prev; or why it is no line of a verifiable export."""
    try:
        fields = msgspec.json.decode(line)
    except (msgspec.DecodeError, RecursionError) as exc:  # RecursionError: nested too deeply
        return f"it is not JSON ({exc})"
    absent = [name for name in _VERIFIABLE_FIELDS if not isinstance(fields, dict) or name not in fields]
    if absent:
        return (
            f"it has no {absent[0]!r}: it is no line of a verifiable export (cogfabric export --verifiable)"
        )
    try:
        stored = base64.b64decode(fields["record"], validate=True)
        prev = bytes.fromhex(fields["prev"])
    except (binascii.Error, ValueError, TypeError) as exc:
        return f"its record or prev is not base64 or hex text ({exc})"
    if len(prev) != CHAIN_LEN:
        return f"its prev is not a {CHAIN_LEN}-byte chain link"
    return fields, stored, prev


def _line_of(stored: bytes, prev: bytes) -> bytes | str:
    """The line export writes for ``stored`` after ``prev`` (without its newline); or why there is none."""
    taken = parts(stored)
    if taken is None:
        return "its record's framing is malformed"
    try:
        event = decode(taken.event)
    except EventError as exc:
        return f"its record does not decode: {exc}"
    if taken.stream != event.stream.encode():
        return "its record's stream is not its event's"
    made = export_line(Record(taken.seq, event, taken.trailer))
    made["prev"] = prev.hex()
    made["record"] = stored
    return encode_json(made)


def _differing(fields: dict[str, Any], expected: dict[str, Any]) -> str:
    """Which field of a line is not what its record holds (the first by name)."""
    for name in sorted(fields.keys() | expected.keys()):
        if name not in expected:
            return f"it has a field {name!r} that an export does not write"
        if name not in fields or _canonical.encode(fields[name]) != _canonical.encode(expected[name]):
            if name in fields and _same_numbers(fields[name], expected[name]):
                return (
                    f"its {name!r} holds its record's values with a number written otherwise (as 0 "
                    "for 0.0: was the line re-encoded, by jq say? hand the export over byte for byte)"
                )
            return f"its {name!r} is not what its record holds"
    return "it is not written as export writes its record (spacing, key order, escapes or a repeated key)"


def _same_numbers(line: object, record: object) -> bool:
    """Whether two JSON values are equal once an int and a float of one value count as one.

    A bool is no number here: ``true`` for ``1`` is another value, not another spelling.
    """
    if isinstance(line, bool) or isinstance(record, bool):
        return type(line) is type(record) and line == record
    if isinstance(line, int | float) and isinstance(record, int | float):
        return line == record
    if isinstance(line, list) and isinstance(record, list):
        return len(line) == len(record) and all(map(_same_numbers, line, record))
    if isinstance(line, dict) and isinstance(record, dict):
        return line.keys() == record.keys() and all(_same_numbers(line[k], record[k]) for k in line)
    return type(line) is type(record) and line == record

"""A corpus of damaged journals: each is named by seq, never a crash nor a silent acceptance."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import lmdb
import msgspec
import pytest

from cogfabric.actors import FakeClock, Runtime
from cogfabric.store import (
    FORMAT_VERSION,
    Journal,
    JournalFormatError,
    JournalIntegrityError,
    JournalRecordError,
)
from cogfabric.store._record import head_value

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

SEQ = 9


def _key(n: int) -> bytes:
    return n.to_bytes(8, "big")


def _rechain(txn: Any, events: Any, meta: Any, n: int, body: bytes) -> None:
    """Store ``body`` at ``n`` and re-chain everything after it, head included, as a
    forger of an unkeyed journal could: only decoding can tell then."""
    prev = bytes(txn.get(_key(n - 1), db=events))[-16:]
    seq = n
    while True:
        prev = hashlib.blake2b(prev + body, digest_size=16).digest()
        txn.put(_key(seq), body + prev, db=events)
        following = txn.get(_key(seq + 1), db=events)
        if following is None:
            break
        seq += 1
        body = bytes(following)[:-16]
    txn.put(b"head", head_value(_key(seq), prev, b""), db=meta)


def _with_event(value: bytes, change: Callable[[dict[str, Any]], None]) -> bytes:
    """The record ``value`` (format 3: ``[seq, event, trailer]``, chain last) with its event
    changed by ``change``, without its chain link."""
    _seq, event, trailer = msgspec.msgpack.decode(value)
    change(event)
    return value[:10] + msgspec.msgpack.encode(event) + value[len(value) - len(trailer) - 3 : -16]


def truncated(txn: Any, events: Any, _meta: Any) -> None:
    txn.put(_key(SEQ), bytes(txn.get(_key(SEQ), db=events))[:20], db=events)


def flipped_bit(txn: Any, events: Any, _meta: Any) -> None:
    value = bytearray(txn.get(_key(SEQ), db=events))
    value[value.index(b"x" * 40) + 20] ^= 0x10  # inside a string: the record still decodes
    txn.put(_key(SEQ), bytes(value), db=events)


def garbage(txn: Any, events: Any, _meta: Any) -> None:
    txn.put(_key(SEQ), b"\xff" * 64, db=events)


def unknown_tag(txn: Any, events: Any, meta: Any) -> None:
    value = bytes(txn.get(_key(SEQ), db=events))
    _rechain(txn, events, meta, SEQ, _with_event(value, lambda raw: raw.update(type="Teleported")))


def newer_schema(txn: Any, events: Any, meta: Any) -> None:
    value = bytes(txn.get(_key(SEQ), db=events))
    _rechain(txn, events, meta, SEQ, _with_event(value, lambda raw: raw.update(v=99)))


def another_agents_event(txn: Any, events: Any, meta: Any) -> None:
    value = bytes(txn.get(_key(SEQ), db=events))
    _rechain(txn, events, meta, SEQ, _with_event(value, lambda raw: raw.update(agent="b")))


def rolled_back_head(txn: Any, events: Any, meta: Any) -> None:
    last = bytes(txn.get(_key(SEQ - 1), db=events))
    txn.put(b"head", head_value(_key(SEQ - 1), last[-16:], b""), db=meta)


CORPUS: dict[str, Callable[[Any, Any, Any], None]] = {
    "truncated value": truncated,
    "flipped bit": flipped_bit,
    "garbage bytes": garbage,
    "unknown tag (re-chained)": unknown_tag,
    "newer schema version (re-chained)": newer_schema,
    "rolled-back chain head": rolled_back_head,
    "another agent's event filed under this one (re-chained)": another_agents_event,
}


@pytest.fixture
def journal_path(tmp_path: Path) -> Path:
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        agent = rt.spawn("a")
        for i in range(15):
            agent.set_private(f"k{i}", {"i": i, "text": "x" * 40})
    return tmp_path / "j"


@pytest.mark.parametrize("damage", CORPUS.values(), ids=CORPUS.keys())
def test_each_damage_is_named_by_seq_and_refused_by_the_runtime(
    journal_path: Path, damage: Callable[[Any, Any, Any], None]
) -> None:
    env = lmdb.open(str(journal_path), max_dbs=8)
    with env.begin(write=True) as txn:
        damage(txn, env.open_db(b"events", txn=txn), env.open_db(b"meta", txn=txn))
    env.close()

    with Journal.open(journal_path, readonly=True) as journal:
        report = journal.verify(decode=True)
    with pytest.raises(JournalIntegrityError, match=f"seq {SEQ}"):
        Runtime.open(journal_path, clock=FakeClock())

    assert not report.ok
    assert report.first_bad_seq == SEQ, report
    assert report.reason


def test_a_journal_of_a_newer_format_is_refused_by_the_runtime(journal_path: Path) -> None:
    env = lmdb.open(str(journal_path), max_dbs=8)
    with env.begin(write=True, db=env.open_db(b"meta")) as txn:
        txn.put(b"format", (FORMAT_VERSION + 1).to_bytes(4, "big"))
    env.close()

    with pytest.raises(JournalFormatError, match="newer"):
        Runtime.open(journal_path, clock=FakeClock())


def test_allow_unverified_opens_a_journal_with_a_flipped_bit(journal_path: Path) -> None:
    env = lmdb.open(str(journal_path), max_dbs=8)
    with env.begin(write=True) as txn:
        flipped_bit(txn, env.open_db(b"events", txn=txn), None)
    env.close()

    with Runtime.open(journal_path, clock=FakeClock(), allow_unverified=True) as rt:
        assert "a" in rt.agents()


@pytest.mark.parametrize(
    ("damage", "why"),
    [(truncated, "the record is malformed"), (garbage, "the record is malformed")],
    ids=["truncated", "garbage"],
)
def test_allow_unverified_still_refuses_a_record_recovery_cannot_read(
    journal_path: Path, damage: Callable[[Any, Any, Any], None], why: str
) -> None:
    env = lmdb.open(str(journal_path), max_dbs=8)
    with env.begin(write=True) as txn:
        damage(txn, env.open_db(b"events", txn=txn), None)
    env.close()

    with pytest.raises(JournalRecordError, match=f"seq {SEQ}: {why}"):
        Runtime.open(journal_path, clock=FakeClock(), allow_unverified=True)


@pytest.mark.parametrize("change", [{"type": "Teleported"}, {"v": 99}], ids=["unknown tag", "newer version"])
def test_a_forged_record_in_a_stream_recovery_does_not_read_is_refused_too(
    tmp_path: Path, change: dict[str, Any]
) -> None:
    path = tmp_path / "j"
    with Runtime.open(path, clock=FakeClock()) as rt:
        rt.spawn("a")
        rt.spawn("b")
        rt.bus.send("a", "b", "hello", {"text": "x" * 40})
        rt.flush()
        journal = rt._journal
        assert journal is not None
        message = next(r.seq for r in journal.read(stream="bus"))  # no agent's recovery reads it
    env = lmdb.open(str(path), max_dbs=8)
    with env.begin(write=True) as txn:
        events, meta = env.open_db(b"events", txn=txn), env.open_db(b"meta", txn=txn)
        value = bytes(txn.get(_key(message), db=events) or b"")
        _rechain(txn, events, meta, message, _with_event(value, lambda raw: raw.update(change)))
    env.close()

    named = f"seq {message}: (unknown event type|event type .* newer)"  # the record's typed error
    with pytest.raises(JournalIntegrityError, match=named):
        Runtime.open(path, clock=FakeClock())


@pytest.mark.parametrize("name", [b"agent/q\x00r", b"agent/" + b"q" * 300], ids=["NUL", "too long"])
@pytest.mark.parametrize(
    "options", [{"verify": "tail"}, {"allow_unverified": True}], ids=["tail", "unverified"]
)
def test_a_stream_name_no_writer_makes_in_the_index_is_an_integrity_error(
    journal_path: Path, name: bytes, options: dict[str, Any]
) -> None:
    env = lmdb.open(str(journal_path), max_dbs=8)
    with env.begin(write=True) as txn:
        heads = env.open_db(b"heads", txn=txn)
        txn.put(name, bytes(txn.get(b"agent/a", db=heads) or b""), db=heads)
    env.close()

    with pytest.raises(JournalIntegrityError, match="the stream index holds a name no stream can have"):
        Runtime.open(journal_path, clock=FakeClock(), **options)

"""The LMDB journal's record layout (format 3, store/_record.py) on hostile bytes.

Verify and the checked read path take a stored value apart with ``parts`` and
``summary``; whatever the bytes, they answer None for a malformed record and never
raise, so verify reports a damaged record instead of crashing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogfabric.events import PrivateSet
from cogfabric.store import Journal, Record
from cogfabric.store._record import parts, summary
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from pathlib import Path


def _stored(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    import lmdb  # noqa: PLC0415

    path = tmp_path_factory.mktemp("layout") / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(6))
    env = lmdb.open(str(path), max_dbs=8, readonly=True)
    try:
        with env.begin(db=env.open_db(b"events", create=False)) as txn:
            return [bytes(value) for value in txn.cursor().iternext(keys=False, values=True)]
    finally:
        env.close()


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    return _stored(tmp_path_factory)


def test_a_stored_record_is_taken_apart(stored: list[bytes]) -> None:
    record = parts(stored[3])
    seq, id_raw, stream, link = summary(stored[3]) or (0, b"", b"", 0)

    assert record is not None
    assert (record.seq, record.stream, record.link) == (seq, stream, link) == (4, b"agent/a0", 1)
    assert msgspec.msgpack.decode(record.event)["id"].encode() == id_raw
    assert stored[3].endswith(record.trailer)


@pytest.mark.parametrize(
    "value",
    [
        b"",
        b"\x93",
        b"\x92\x02\x81\xa2id\xb0" + b"a" * 16,  # valid msgpack, shorter than any trailer
        b"\x93\xcf" + bytes(8) + b"\x81\xa2id\xa1x" + b"\xc5\x00\x1a" + b"\xff" + bytes(24),
        b"\xff" * 64,
    ],
)
def test_a_malformed_value_is_none_not_an_error(value: bytes) -> None:
    assert parts(value) is None
    assert summary(value) is None


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_any_damage_to_a_record_is_none_or_a_record(stored: list[bytes], data: st.DataObject) -> None:
    value = bytearray(data.draw(st.sampled_from(stored)))
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["flip", "cut", "set"]))
        if not value:
            break
        at = data.draw(st.integers(-len(value), len(value) - 1))
        if kind == "flip":
            value[at] ^= data.draw(st.integers(1, 255))
        elif kind == "set":
            value[at] = data.draw(st.integers(0, 255))
        else:
            del value[at:]
    parts(bytes(value))
    summary(bytes(value))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80))
def test_arbitrary_bytes_are_none_or_a_record_never_an_error(value: bytes) -> None:
    parts(value)
    summary(value)


def test_records_read_are_plain_records_equal_across_opens(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append([PrivateSet(at=1.0, agent="a", key="k", value=[1, 2])])
        first = list(journal.read())
    with Journal.open(path, readonly=True) as journal:
        again = list(journal.read())

    record = first[0]
    assert type(record) is Record
    assert first == again
    assert record == Record(record.seq, record.event, record.raw)
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(record), type=Record) == record

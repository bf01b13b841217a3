"""The journal's chain head, pinned to its on-disk bytes (mutation round of store/_record.py, s49).

Every other store test writes a journal and reads it back with the same code, so a
change of how ``head_value`` tags the head (its domain prefix left out, say) passed
them all, yet every journal written before it would then refuse appends and fail
``verify`` (its stored head "disagrees" with its records): the head is on disk, and
format 5 fixes its bytes. The expected head is built here with
``hashlib``, not with ``head_value``.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import lmdb
import pytest

from cogfabric.store import Journal
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from pathlib import Path


def _seq(n: int) -> bytes:
    return n.to_bytes(8, "big")


@pytest.mark.parametrize("key", [b"", b"secret"], ids=["unkeyed", "keyed"])
def test_the_chain_head_on_disk_is_seq_chain_and_a_domain_separated_tag(tmp_path: Path, key: bytes) -> None:
    # head = seq | chain | BLAKE2b-128(b"cogfabric head" | seq | chain), keyed with the
    # journal's key. Kills: the tag computed without its domain prefix
    path = tmp_path / "j"
    with Journal.open(path, key=key or None) as journal:
        journal.append(make_events(3))

    env = lmdb.open(str(path), max_dbs=8, readonly=True, lock=False)
    try:
        events, meta = env.open_db(b"events", create=False), env.open_db(b"meta", create=False)
        with env.begin() as txn:
            head, last = txn.get(b"head", db=meta), txn.get(_seq(3), db=events)
    finally:
        env.close()

    assert head is not None
    assert last is not None
    chain = bytes(last)[-16:]
    tag = hashlib.blake2b(b"cogfabric head" + _seq(3) + chain, digest_size=16, key=key).digest()
    assert bytes(head) == _seq(3) + chain + tag
    with Journal.open(path, key=key or None, readonly=True) as journal:
        assert journal.verify().ok

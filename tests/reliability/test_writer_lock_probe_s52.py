"""The writer's question "do only readers hold writer.lock?" is read from /proc/locks, taking no lock.

Taking a shared lock for a moment to see (helper h9's first version) would refuse another
writer opening the journal in that moment, told that a reader on a read-only mount holds
it (helper h11's review).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from cogfabric.store._lmdb import _only_readers_hold

pytestmark = pytest.mark.skipif(not Path("/proc/locks").exists(), reason="reads Linux's /proc/locks")


def _held(path: Path, how: int) -> int:
    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, how | fcntl.LOCK_NB)
    return fd


@pytest.fixture
def lock(tmp_path: Path) -> Path:
    made = tmp_path / "writer.lock"
    made.write_bytes(b"")
    return made


def test_no_holder_is_no_reader(lock: Path) -> None:
    assert not _only_readers_hold(lock.parent)


def test_a_shared_holder_is_a_reader(lock: Path) -> None:
    reader = _held(lock, fcntl.LOCK_SH)
    try:
        assert _only_readers_hold(lock.parent)
    finally:
        os.close(reader)


def test_an_exclusive_holder_is_a_writer(lock: Path) -> None:
    writer = _held(lock, fcntl.LOCK_EX)
    try:
        assert not _only_readers_hold(lock.parent)
    finally:
        os.close(writer)


def test_the_probe_takes_no_lock(lock: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[int] = []
    monkeypatch.setattr(fcntl, "flock", lambda _fd, how: taken.append(how))  # the module _lmdb uses

    _only_readers_hold(lock.parent)

    assert taken == []

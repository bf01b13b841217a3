"""The writer's periodic sweep of killed readers' slots, to the second (helper h18, session 51).

Mutation pins for the sweep ``test_stale_readers_s51`` tests: an append sweeps once
``_READER_CHECK_EVERY`` seconds have passed since the last sweep (exactly that many is
enough), then waits that long again rather than sweep at every append, and a reader
table that cannot be checked fails no append (it is logged).
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import lmdb

from cogfabric.events import PrivateSet
from cogfabric.store import LmdbJournal, _lmdb

from .test_stale_readers_s51 import _holds, _killed_reader

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

_EVERY = _lmdb._READER_CHECK_EVERY


def _event(value: int) -> PrivateSet:
    return PrivateSet(at=0.0, agent="a", key="k", value=value)


def _clock(monkeypatch: pytest.MonkeyPatch, start: float) -> SimpleNamespace:
    clock = SimpleNamespace(now=start)
    monkeypatch.setattr(_lmdb, "time", SimpleNamespace(monotonic=lambda: clock.now))
    return clock


def test_a_sweep_comes_once_the_interval_has_passed_to_the_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = _clock(monkeypatch, 1000.0)
    with LmdbJournal.open(tmp_path / "j", sync=False) as journal:
        journal.append([_event(0)])
        pid = _killed_reader(tmp_path / "j")
        clock.now = 1000.0 + _EVERY - 0.5
        journal.append([_event(1)])
        assert _holds(journal, pid)
        clock.now = 1000.0 + _EVERY  # exactly the interval since open's sweep
        journal.append([_event(2)])
        assert not _holds(journal, pid)
        assert journal.last_seq == 3


def test_after_a_sweep_the_next_waits_a_whole_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = _clock(monkeypatch, 1000.0)
    sweeps: list[float] = []
    clear = LmdbJournal._clear_stale_readers

    def counted(journal: LmdbJournal) -> int:
        sweeps.append(clock.now)
        return clear(journal)

    with LmdbJournal.open(tmp_path / "j", sync=False) as journal:
        monkeypatch.setattr(LmdbJournal, "_clear_stale_readers", counted)
        for now in (1000.0, 1000.0 + _EVERY, 1000.0 + _EVERY, 1000.0 + 2 * _EVERY - 1, 1000.0 + 2 * _EVERY):
            clock.now = now
            journal.append([_event(int(now))])
        assert sweeps == [1000.0 + _EVERY, 1000.0 + 2 * _EVERY]


class _Unreadable:
    """An environment whose reader table cannot be checked (all else as the real one)."""

    def __init__(self, env: Any) -> None:
        self._real = env

    def reader_check(self) -> int:
        msg = "mdb_reader_check: simulated failure"
        raise lmdb.Error(msg)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_a_reader_table_that_cannot_be_checked_fails_no_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = _clock(monkeypatch, 1000.0)
    with LmdbJournal.open(tmp_path / "j", sync=False) as journal:
        journal.append([_event(0)])
        real = journal._env
        journal._env = _Unreadable(real)  # type: ignore[assignment]
        try:
            clock.now = 1000.0 + _EVERY
            with caplog.at_level(logging.WARNING, logger=_lmdb.log.name):
                journal.append([_event(1)])
        finally:
            journal._env = real
        assert journal.last_seq == 2
        assert journal.verify().ok
    assert any("reader table could not be checked" in r.getMessage() for r in caplog.records)

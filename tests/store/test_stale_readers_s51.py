"""A writer frees the reader slots of killed processes while it runs, not only at open.

PITFALLS.md §1.5: a reader SIGKILLed inside a read transaction keeps its slot in LMDB's
reader table until ``reader_check()``, and the slot keeps the pages of its snapshot
from reuse, so the file grows. The journal cleared such slots only when it opened; a
runtime open for days kept every slot a killed audit left (helper h16's DESIGN audit,
session 51). Now an append clears them every ``_READER_CHECK_EVERY`` seconds, and a
full map before it grows.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import TYPE_CHECKING, Any

from cogfabric.events import PrivateSet
from cogfabric.store import LmdbJournal, _lmdb

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

_READER = """
import sys, lmdb
env = lmdb.open(sys.argv[1], readonly=True, max_dbs=10)
txn = env.begin()
print("reading", flush=True)
sys.stdin.read()  # held until killed
"""


def _killed_reader(path: Path) -> int:
    """The pid of a process killed while it held a read transaction on ``path``."""
    child = subprocess.Popen(
        [sys.executable, "-c", _READER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "reading\n"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
        for stream in (child.stdin, child.stdout):
            if stream is not None:
                stream.close()
    return child.pid


def _holds(journal: LmdbJournal, pid: int) -> bool:
    rows = journal._env.readers().splitlines()[1:]
    return any(row.split()[0] == str(pid) for row in rows if row.strip())


def test_an_append_after_the_interval_frees_a_killed_readers_slot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LmdbJournal.open(tmp_path / "j", sync=False) as journal:
        journal.append([PrivateSet(at=0.0, agent="a", key="k", value=0)])
        pid = _killed_reader(tmp_path / "j")
        assert _holds(journal, pid)
        journal.append([PrivateSet(at=0.0, agent="a", key="k", value=1)])
        assert _holds(journal, pid)  # within the interval: left for now

        clock: Any = _lmdb.time  # type: ignore[attr-defined]
        later = clock.monotonic() + _lmdb._READER_CHECK_EVERY
        monkeypatch.setattr(clock, "monotonic", lambda: later)
        journal.append([PrivateSet(at=0.0, agent="a", key="k", value=2)])

        assert not _holds(journal, pid)
        assert journal.verify().ok
        assert journal.last_seq == 3

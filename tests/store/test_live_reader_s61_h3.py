"""A dashboard in another process that keeps a journal open read-only for hours (session 61, h3).

It polls ``read(after=last_seq)`` on one long-lived ``Journal.open(path, readonly=True)``
while a writer appends, and audits run beside it; dashboards and audits get killed
(kill -9) and started again. A reader killed inside a read transaction leaves its slot in
LMDB's reader table (PITFALLS.md §1.5) for as long as any process has the journal open:
only ``reader_check`` frees it, which a writer did at its open and every minute of
appends, and no reader ever did. Once such slots fill the table (254), every read
transaction in every process failed with LMDB's ``MDB_READERS_FULL`` and its advice to
pass ``max_readers=``, which no cogfabric user can: the dashboard's polls, every audit
command, and even a writer's open (LMDB's own open reads before anyone can check the
table). Now a read-only journal frees them at its open (before its page walk, as a
writer's open does now), at a read every minute, and whenever the table is full; an open
a full table still refuses names the reader table and what frees it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.events import PrivateSet
from cogfabric.store import Journal, JournalUnavailableError, LmdbJournal, _lmdb
from tests.store.test_stale_readers_s51 import _holds, _killed_reader

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

_HOLDER = """
import sys, lmdb
env = lmdb.open(sys.argv[1], readonly=True, max_dbs=10)
txns = []
while True:  # every slot the table has left
    try:
        txns.append(env.begin())
    except lmdb.ReadersFullError:
        break
print(len(txns), flush=True)
sys.stdin.read()  # held until killed, or stdin closed
"""


def _child(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )


def _done(child: subprocess.Popen[str]) -> None:
    try:
        child.wait(timeout=30)
    finally:
        for stream in (child.stdin, child.stdout):
            if stream is not None:
                stream.close()


def _fill_reader_table(path: Path, *, kill: bool) -> subprocess.Popen[str]:
    """A child holding every free slot of ``path``'s reader table; killed (kill -9) if ``kill``."""
    child = _child(_HOLDER, str(path))
    assert child.stdout is not None
    held = int(child.stdout.readline())
    assert held > 0
    if kill:
        os.kill(child.pid, signal.SIGKILL)
        _done(child)
    return child


def _written(path: Path, records: int = 5) -> None:
    with Journal.open(path, sync=False) as journal:
        journal.append([PrivateSet(at=float(n), agent="a", key="k", value=n) for n in range(records)])


@pytest.fixture
def dashboard(tmp_path: Path) -> Iterator[LmdbJournal]:
    """A journal of 5 records, and a read-only open of it held as a dashboard holds one."""
    _written(tmp_path / "j")
    with LmdbJournal.open(tmp_path / "j", readonly=True) as journal:
        yield journal


def test_a_dashboard_reads_on_once_killed_readers_filled_the_reader_table(dashboard: LmdbJournal) -> None:
    _fill_reader_table(dashboard.path, kill=True)

    assert [record.seq for record in dashboard.read(after=2)] == [3, 4, 5]
    assert dashboard.verify().ok
    # and so does a new reader, an audit started by cron: the slots are free again
    audit = subprocess.run(
        [sys.executable, "-m", "cogfabric", "inspect", "--json", "--no-streams", str(dashboard.path)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )
    assert audit.returncode == 0, audit.stderr


def test_a_read_only_open_frees_the_slots_of_killed_readers(dashboard: LmdbJournal) -> None:
    pid = _killed_reader(dashboard.path)
    assert _holds(dashboard, pid)  # the dashboard keeps the journal open: LMDB keeps the slot

    audit = _child(
        "import sys\nfrom cogfabric.store import Journal\nJournal.open(sys.argv[1], readonly=True)\n",
        str(dashboard.path),
    )
    _done(audit)
    assert audit.returncode == 0

    assert not _holds(dashboard, pid)


def test_a_long_lived_reader_frees_them_every_interval(
    dashboard: LmdbJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid = _killed_reader(dashboard.path)
    assert dashboard.last_seq == 5
    assert _holds(dashboard, pid)  # within the interval: left for now

    clock: Any = _lmdb.time  # type: ignore[attr-defined]
    later = clock.monotonic() + _lmdb._READER_CHECK_EVERY
    monkeypatch.setattr(clock, "monotonic", lambda: later)
    assert [record.seq for record in dashboard.read(after=4)] == [5]

    assert not _holds(dashboard, pid)


def test_a_full_table_refuses_a_new_open_until_the_dashboards_next_poll_frees_it(
    dashboard: LmdbJournal,
) -> None:
    _fill_reader_table(dashboard.path, kill=True)
    # The dashboard, idle, keeps the journal open, so the slots stay; LMDB's own open reads
    # before anyone can free them: a new process's open is refused until a reader frees them.
    refused = subprocess.run(
        [sys.executable, "-m", "cogfabric", "verify", "--json", str(dashboard.path)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )
    assert refused.returncode == 2
    assert "reader table (254) is taken" in refused.stderr
    assert "max_readers" not in refused.stderr

    assert dashboard.last_seq == 5  # the dashboard's next poll frees them
    writer = _child(
        textwrap.dedent("""
            import sys
            from cogfabric.events import PrivateSet
            from cogfabric.store import Journal
            with Journal.open(sys.argv[1]) as journal:
                print(journal.append([PrivateSet(at=9.0, agent="a", key="k", value=9)]), flush=True)
        """),
        str(dashboard.path),
    )
    assert writer.stdout is not None
    out = writer.stdout.read()
    _done(writer)
    assert (writer.returncode, out) == (0, "[6]\n")
    assert [record.seq for record in dashboard.read(after=4)] == [5, 6]


def test_a_table_full_of_live_readers_is_named_as_such(dashboard: LmdbJournal) -> None:
    holder = _fill_reader_table(dashboard.path, kill=False)
    try:
        with pytest.raises(JournalUnavailableError) as caught:
            list(dashboard.read())
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        _done(holder)
    message = str(caught.value)
    assert "reader table (254) is taken" in message
    assert "killed" in message
    assert "max_readers" not in message  # LMDB's advice: no cogfabric user can follow it
    assert [record.seq for record in dashboard.read(after=4)] == [5]  # the reads ended: on again


_GROWING_WRITER = """
import sys
from cogfabric.events import PrivateSet
from cogfabric.store import Journal
path, rounds, batch, reopen_every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
journal = Journal.open(path, map_size=64 * 1024, sync=False)
pad = "x" * 300
for n in range(rounds):
    seq = journal.last_seq
    journal.append([
        PrivateSet(at=float(seq + i), agent=f"a{(seq + i) % 7}", key="k", value={"n": seq + i, "pad": pad})
        for i in range(batch)
    ])
    if n % reopen_every == reopen_every - 1:  # the writer restarts: a new environment
        journal.close()
        journal = Journal.open(path, map_size=64 * 1024, sync=False)
journal.close()
print("done", flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("map_size", [None, 64 * 1024])
def test_a_live_reader_follows_a_writer_that_grows_its_map_and_restarts(
    tmp_path: Path, map_size: int | None
) -> None:
    """Every record once, in order, whole batches only, while the map grows past the reader's.

    Passes on the code before this session too: it guards what a dashboard relies on.
    """
    path = tmp_path / "j"
    batch, rounds = 10, 1500
    with Journal.open(path, map_size=64 * 1024, sync=False) as journal:
        journal.append([PrivateSet(at=0.0, agent="a0", key="k", value={"n": 0, "pad": ""})])
    writer = _child(_GROWING_WRITER, str(path), str(rounds), str(batch), "100")
    try:
        with LmdbJournal.open(path, readonly=True, map_size=map_size) as dashboard:
            started = dashboard.map_size
            last = 0
            polls = 0
            want = 1 + batch * rounds
            while last < want and polls < 1_000_000:
                polls += 1
                for record in dashboard.read(after=last):
                    assert record.seq == last + 1
                    value: Any = record.event.value  # type: ignore[attr-defined]
                    assert value["n"] == record.seq - 1
                    last = record.seq
                assert (last - 1) % batch == 0  # never half a batch
                if polls % 50 == 0:
                    assert dashboard.verify().ok
                    seqs = [r.seq for r in dashboard.read(stream="agent/a3", after=max(0, last - 70))]
                    assert seqs == sorted(set(seqs))
                if writer.poll() is not None and last == dashboard.last_seq:
                    break
            assert last == want
            if map_size is not None:
                assert dashboard.map_size > started  # it adopted the writer's grown map
        assert writer.wait(timeout=60) == 0
    finally:
        if writer.poll() is None:
            writer.kill()
        _done(writer)

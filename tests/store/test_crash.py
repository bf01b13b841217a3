"""kill -9 at random moments never loses an acknowledged append nor tears a record.

What this cannot prove: a process crash keeps the kernel's page cache, so it does not
tell ``sync=True`` from ``sync=False``; power loss needs a fault-injecting file
system (PITFALLS.md §1.2, §1.3).
"""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import textwrap
import time
from typing import TYPE_CHECKING

import pytest

from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path

_CHILD = textwrap.dedent(
    """
    import random, sys
    from cogfabric.events import PrivateSet
    from cogfabric.store import Journal
    path, run = sys.argv[1], int(sys.argv[2])
    rng = random.Random(run)
    with Journal.open(path, map_size=1 << 20) as journal:
        n = 0
        while True:
            batch = [
                PrivateSet(
                    at=float(n + i),
                    agent=f"a{(n + i) % 7}",
                    key=f"r{run}-{n + i}",
                    value="x" * rng.randrange(300),
                )
                for i in range(rng.randrange(1, 40))
            ]
            seqs = journal.append(batch)
            sys.stdout.write("".join(f"{s} r{run}-{n + i}\\n" for i, s in enumerate(seqs)))
            sys.stdout.flush()
            n += len(batch)
    """
)


def _read_lines_until(child: subprocess.Popen[bytes], deadline: float, acked: dict[int, str]) -> None:
    """Collect the child's acknowledgements until ``deadline`` (monotonic) or its exit."""
    assert child.stdout is not None
    fd = child.stdout.fileno()
    buffer = b""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            seq, key = line.decode().split()
            acked[int(seq)] = key


def _kill_loop(path: Path, *, kills_wanted: int) -> tuple[int, int]:
    """Kill a child appending to ``path`` ``kills_wanted`` times; after each, verify and compare.

    Returns the kills and the appends acknowledged before them.
    """
    rng = random.Random(20261129)
    acked: dict[int, str] = {}
    kills = 0

    while kills < kills_wanted:
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(path), str(kills)], stdout=subprocess.PIPE
        )
        try:
            before = len(acked)
            # Wait for the first acknowledgement, then let it run a random while.
            first_deadline = time.monotonic() + 60
            while len(acked) == before and time.monotonic() < first_deadline:
                _read_lines_until(child, min(first_deadline, time.monotonic() + 0.5), acked)
            assert len(acked) > before, "the child acknowledged nothing"
            _read_lines_until(child, time.monotonic() + rng.uniform(0.01, 0.4), acked)
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
        assert child.returncode == -signal.SIGKILL
        # Lines written before the kill are still in the pipe: they were acknowledged too.
        _read_lines_until(child, time.monotonic() + 5, acked)
        assert child.stdout is not None
        child.stdout.close()
        kills += 1

        with Journal.open(path) as journal:
            report = journal.verify(decode=True)
            assert report.ok, report
            assert journal.last_seq >= max(acked)
            stored = {r.seq: r.event.key for r in journal.read()}  # type: ignore[attr-defined]
        missing = {seq: key for seq, key in acked.items() if stored.get(seq) != key}
        assert missing == {}, f"acknowledged but lost after kill {kills}: {list(missing.items())[:5]}"
    return kills, len(acked)


def test_sigkill_at_random_moments_loses_no_acknowledged_append(tmp_path: Path) -> None:
    # Issue 2 asks for at least 20 kills bounded to about 30 s: twenty in the default
    # suite; forty under -m slow.
    kills, acked = _kill_loop(tmp_path / "journal", kills_wanted=20)
    assert kills == 20
    assert acked > 50


@pytest.mark.slow
def test_forty_sigkills_lose_no_acknowledged_append(tmp_path: Path) -> None:
    kills, acked = _kill_loop(tmp_path / "journal", kills_wanted=40)
    assert kills == 40
    assert acked > 200

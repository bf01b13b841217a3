"""Benchmark what runnable Python threads cost py-lmdb's ``putmulti``, which drops the GIL per item.

py-lmdb wraps each ``mdb_cursor_put`` of ``Cursor.putmulti`` (as of every single put and
cursor step) in ``Py_BEGIN_ALLOW_THREADS``/``Py_END_ALLOW_THREADS``: after every item the
calling thread must take the GIL back. Alone, that costs little. Beside threads that are
ready to run Python (a runtime's agents, say), another thread may take the GIL at each
put, and the caller waits for it to come back. The journal writer of a batch ring is such
a caller, with two puts (record and id index) per event.

What it measures, in interleaved rounds (``--repeat``; the table shows the median), for
each number of busy threads in ``--busy`` (pure-Python loops that never block):

* ``putmulti`` of ``--items`` 300-byte values (8-byte big-endian keys, ``append=True``) in
  one write transaction of a ``sync=False`` environment; the commit is not timed;
* as a control, a pure-Python loop of fixed work on the same thread: it shares the GIL
  with the busy threads too, but holds it until the interpreter's switch interval asks.

Each figure is shown with its slowdown against the same measurement with no busy thread.

Run it from the repository root::

    .venv/bin/python bench/lmdb_gil.py                   # 5 rounds
    .venv/bin/python bench/lmdb_gil.py --repeat 9 --json results.json

Figures are noisy on shared machines; the slowdowns measured in one run hold better than
the absolute times.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Self

import lmdb
from _common import columns, directory, json_file, positive, source_revision, write_json

if TYPE_CHECKING:
    from collections.abc import Sequence

VALUE: Final = b"v" * 300
CONTROL_LOOP: Final = 200_000
"""Iterations of the control's pure-Python loop (a few milliseconds alone)."""
MAP_SIZE: Final = 1 << 30


@dataclass(frozen=True)
class Settings:
    """What to run: sizes, repeats, where the temporary directory goes."""

    items: int
    busy: tuple[int, ...]
    repeat: int
    tmp_parent: str | None


def _busy_counts(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(sorted({int(n) for n in text.split(",") if n.strip()}))
    except ValueError:
        counts = ()
    if not counts or counts[0] < 0:
        msg = f"a comma-separated list of thread counts >= 0, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return counts if counts[0] == 0 else (0, *counts)


def parse_args(argv: Sequence[str] | None = None) -> tuple[Settings, Path | None]:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    p.add_argument("--items", type=positive, default=4000, help="items per putmulti (4,000)")
    p.add_argument("--busy", type=_busy_counts, default=(0, 1, 2, 4), help="busy thread counts (0,1,2,4)")
    p.add_argument("--repeat", type=positive, default=5, help="rounds (5)")
    p.add_argument("--quick", action="store_true", help="400 items, 2 rounds")
    p.add_argument("--json", type=json_file, default=None, help="write every sample to this file")
    p.add_argument("--dir", type=directory, default=None, help="parent of the temporary directory")
    a = p.parse_args(argv)
    items, repeat = (400, 2) if a.quick else (a.items, a.repeat)
    return Settings(items, a.busy, repeat, a.dir), a.json


class BusyThreads:
    """``count`` threads that run a pure-Python loop until stopped: always ready for the GIL."""

    def __init__(self, count: int) -> None:
        self._stop = threading.Event()
        self._started = threading.Barrier(count + 1) if count else None
        self._threads = [threading.Thread(target=self._spin, daemon=True) for _ in range(count)]

    def _spin(self) -> None:
        assert self._started is not None
        self._started.wait(timeout=30)
        stopped = self._stop.is_set
        n = 0
        while not stopped():
            n += 1

    def __enter__(self) -> Self:
        for thread in self._threads:
            thread.start()
        if self._started is not None:
            self._started.wait(timeout=30)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)


@dataclass
class Sample:
    """One round at one busy count: seconds of the putmulti and of the control loop."""

    busy: int
    putmulti: float
    control: float


def one_round(env: lmdb.Environment, db: Any, first_key: int, items: int, busy: int) -> Sample:  # noqa: ANN401 - lmdb's _Database
    pairs = [((first_key + i).to_bytes(8, "big"), VALUE) for i in range(items)]
    gc.collect()
    with BusyThreads(busy):
        with env.begin(write=True, db=db) as txn:
            cursor = txn.cursor()
            start = time.perf_counter()
            cursor.putmulti(pairs, append=True)
            putmulti = time.perf_counter() - start
        start = time.perf_counter()
        n = 0
        for i in range(CONTROL_LOOP):
            n += i
        control = time.perf_counter() - start
    return Sample(busy, putmulti, control)


@dataclass
class Row:
    """The medians at one busy count and their slowdowns against no busy thread."""

    busy: int
    putmulti_ms: float
    putmulti_slowdown: float
    control_ms: float
    control_slowdown: float
    putmulti_runs_ms: list[float] = field(default_factory=list)
    control_runs_ms: list[float] = field(default_factory=list)


def run(settings: Settings) -> list[Row]:
    samples: dict[int, list[Sample]] = {b: [] for b in settings.busy}
    with tempfile.TemporaryDirectory(prefix="cogfabric-lmdb-gil-", dir=settings.tmp_parent) as tmp:
        env = lmdb.open(str(Path(tmp) / "env"), map_size=MAP_SIZE, sync=False, max_dbs=2)
        try:
            db = env.open_db(b"values")
            key = 1
            for round_no in range(settings.repeat):
                for busy in settings.busy:  # interleaved: a slow spell hits every count alike
                    sample = one_round(env, db, key, settings.items, busy)
                    key += settings.items
                    samples[busy].append(sample)
                    print(
                        f"  round {round_no + 1}/{settings.repeat}, {busy} busy: putmulti "
                        f"{sample.putmulti * 1e3:.1f} ms, control {sample.control * 1e3:.1f} ms",
                        file=sys.stderr,
                        flush=True,
                    )
        finally:
            env.close()
    base_put = statistics.median(s.putmulti for s in samples[0])
    base_control = statistics.median(s.control for s in samples[0])
    rows = []
    for busy in settings.busy:
        put = statistics.median(s.putmulti for s in samples[busy])
        control = statistics.median(s.control for s in samples[busy])
        rows.append(
            Row(
                busy,
                put * 1e3,
                put / base_put,
                control * 1e3,
                control / base_control,
                [s.putmulti * 1e3 for s in samples[busy]],
                [s.control * 1e3 for s in samples[busy]],
            )
        )
    return rows


def format_table(rows: list[Row], items: int) -> str:
    headers = ("workload", "busy threads", "median (ms)", "slowdown", "runs (ms)")
    lines: list[tuple[str, ...]] = []
    for what, ms, slowdown, runs in (
        (f"putmulti of {items:,} items", "putmulti_ms", "putmulti_slowdown", "putmulti_runs_ms"),
        ("control: pure-Python loop", "control_ms", "control_slowdown", "control_runs_ms"),
    ):
        lines.extend(
            (
                what,
                str(r.busy),
                f"{getattr(r, ms):,.1f}",
                f"{getattr(r, slowdown):,.1f}x",
                " ".join(f"{x:,.1f}" for x in getattr(r, runs)),
            )
            for r in rows
        )
    return columns(headers, lines, right={1, 2, 3})


def environment() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "lmdb": importlib.metadata.version("lmdb"),
        "cpus": os.cpu_count(),
        "switch_interval": sys.getswitchinterval(),
        "commit": source_revision(),
        "platform": platform.platform(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    settings, json_path = parse_args(argv)
    env_info = environment()
    rows = run(settings)
    print()
    print(
        f"py-lmdb putmulti beside busy Python threads at {env_info['commit']}: median of "
        f"{settings.repeat} (Python {env_info['python']}, lmdb {env_info['lmdb']}, {env_info['cpus']} CPUs, "
        f"switch interval {env_info['switch_interval'] * 1e3:g} ms)"
    )
    print()
    print(format_table(rows, settings.items))
    if json_path is not None:
        write_json(
            json_path,
            {"environment": env_info, "settings": asdict(settings), "results": [asdict(r) for r in rows]},
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark cogfabric's journal against peer event stores on the same workload, in one run.

The workload: append ~250-byte domain events for ~100 aggregates (agents), durable on
disk, then read everything back. Each measurement runs on a fresh temporary directory,
timed with ``time.perf_counter``, repeated ``--repeat`` times in interleaved rounds; the
table shows the median.

* cogfabric: ``Journal.open(path, sync=True)``; ``append`` of ``PrivateSet`` events
  (``agent=f"a{i % 100}"``, ``value="x" * 150``) in batches of 1000, 100 and 1, each batch
  one synced LMDB commit; replay is ``journal.read()`` touching ``record.event`` (every
  record decoded into its typed event).
* eventsourcing (``eventsourcing.application.Application`` with
  ``PERSISTENCE_MODULE=eventsourcing.sqlite`` and ``SQLITE_DBNAME=<file>``): 100
  ``Aggregate`` instances (created and saved before the clock starts), each event one
  decorated command method call (``set_private(key, value)``).

  - one event per ``app.save(aggregate)``;
  - one aggregate triggering 100 events, then ``app.save(aggregate)``;
  - 100 aggregates triggering one event each, then one ``app.save(*aggregates)``;
  - replay: a new ``Application`` on the same file, paging
    ``app.recorder.select_notifications(start, limit=1000)`` and decoding each with
    ``app.mapper.to_domain_event``;
  - ``app.repository.get(id)`` of every aggregate (counted in events replayed).

  The library opens its SQLite connections in autocommit mode and switches the file
  to ``journal_mode=WAL``; it does not set ``synchronous``, so the compiled-in default
  applies (reported below; FULL = 2 fsyncs the WAL on every commit). Each ``save`` is
  one transaction, so one fsync per call.
* LangGraph (``langgraph.checkpoint.sqlite.SqliteSaver`` on ``sqlite3.connect(file,
  check_same_thread=False)``, as ``from_conn_string`` does): one ``put`` per state
  change, 100 threads (one per agent), each checkpoint's ``channel_values`` a small dict
  (agent, key and a 150-character value; the serialized checkpoint is reported). The
  saver sets ``journal_mode=WAL`` and commits after every call: one fsync per ``put``.
  Reads: ``get_tuple`` of every stored checkpoint by its id (one SELECT for the
  checkpoint and one for its pending writes, then deserialization). The checkpoints
  for the read are written before the clock starts with ``PRAGMA synchronous=OFF``.

Beside them, in the same rounds, the limit of this stack (bench/journal_append.py's raw
references on the same events): raw LMDB ``putmulti`` with msgspec encoding in the loop,
1000 per synced write transaction, and a raw scan with msgspec typed decode.

Three ratio columns, each a rate over the peer's (so > 1 means faster than the peer):

* ``cogfabric/peer``: cogfabric at the peer's own batching (the reference named on the row);
* ``batched/peer`` (peer writes): cogfabric's durable batched append, 1000 events per
  synced commit, what group commit does when many agents change state at once;
* ``limit/peer``: raw LMDB with msgspec at the same settings (1000 events per synced
  commit for writes; a scan with one typed decode per record for reads), which is what
  cogfabric's journal would reach with no cost of its own. For reads it is close to a
  hard limit (the scan and the decode are the work); for writes, larger commits raise it.

A peer that is not installed is reported as skipped.

Run it from the repository root::

    .venv/bin/python bench/peers.py              # full size
    .venv/bin/python bench/peers.py --quick      # small counts, under a minute
    .venv/bin/python bench/peers.py --repeat 5 --json peers.json

``--dir`` chooses where the temporary directories go: it must be a real disk (not
tmpfs) for synced commits to mean anything. Figures are noisy on shared machines;
ratios measured in one run hold better than absolute rates.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec
from _common import columns, directory, json_file, source_revision, warn_if_tmpfs, write_json
from journal_append import Clocked, raw_append_encoding, raw_scan

from cogfabric._bench import cpu_model, filesystem_of
from cogfabric.events import Event, PrivateSet
from cogfabric.store import Journal

_EXTRA: Final = "the bench extra installs it: pip install -e '.[bench]'"

try:
    from eventsourcing.application import Application
    from eventsourcing.domain import Aggregate, event

    EVENTSOURCING_ERROR = ""
except ImportError as exc:  # pragma: no cover - depends on the environment
    EVENTSOURCING_ERROR = f"eventsourcing not importable ({exc}); {_EXTRA}"

try:
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.base.id import uuid6
    from langgraph.checkpoint.sqlite import SqliteSaver

    LANGGRAPH_ERROR = ""
except ImportError as exc:  # pragma: no cover - depends on the environment
    LANGGRAPH_ERROR = f"langgraph.checkpoint.sqlite not importable ({exc}); {_EXTRA}"

VALUE: Final = "x" * 150
READ_PAGE: Final = 1000
FILL_BATCH: Final = 1000
COGFABRIC: Final = "cogfabric"
EVENTSOURCING: Final = "eventsourcing"
LANGGRAPH: Final = "langgraph"

RAW_LMDB: Final = "raw LMDB"
CF_BATCH_1: Final = "cogfabric Journal.append, batch 1"
CF_BATCH_100: Final = "cogfabric Journal.append, batch 100"
CF_BATCH_1000: Final = "cogfabric Journal.append, batch 1000"
CF_REPLAY: Final = "cogfabric Journal.read replay (decode)"
RAW_APPEND: Final = "raw LMDB putmulti + msgspec encoding, 1000/txn"
RAW_REPLAY: Final = "raw LMDB scan + msgspec typed decode"

ONE_SYNC = "bound by one fsync per call"


# ---------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class Config:
    """What to run: counts, repeats and where the temporary directories go."""

    single_events: int
    batched_events: int
    read_checkpoints: int
    agents: int
    repeat: int
    tmp_parent: str | None


def parse_args(argv: Sequence[str] | None = None) -> tuple[Config, Path | None]:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n", 1)[0],
        epilog=(
            "The peers' packages (eventsourcing, langgraph-checkpoint-sqlite) come with the "
            "bench extra: pip install -e '.[bench]'. A peer that is not installed is reported "
            "as skipped, and cogfabric is measured alone."
        ),
    )
    parser.add_argument(
        "--single-events", type=int, default=None, help="events (or puts) for one-per-commit runs (2,000)"
    )
    parser.add_argument(
        "--events", type=int, default=None, help="events for batched appends and replays (100,000)"
    )
    parser.add_argument(
        "--read-checkpoints", type=int, default=None, help="LangGraph checkpoints read back (20,000)"
    )
    parser.add_argument("--agents", type=int, default=100, help="agents (aggregates, threads)")
    parser.add_argument("--repeat", type=int, default=None, help="runs per measurement; median shown (3)")
    parser.add_argument("--quick", action="store_true", help="small counts and one run: a smoke test")
    parser.add_argument(
        "--dir", type=directory, default=None, help="parent of the temporary directories (a real disk)"
    )
    parser.add_argument(
        "--json", type=json_file, default=None, metavar="FILE", help="also write the results here"
    )
    args = parser.parse_args(argv)
    quick = bool(args.quick)
    single = args.single_events if args.single_events is not None else (200 if quick else 2_000)
    batched = args.events if args.events is not None else (10_000 if quick else 100_000)
    reads = args.read_checkpoints if args.read_checkpoints is not None else (2_000 if quick else 20_000)
    repeat = args.repeat if args.repeat is not None else (1 if quick else 3)
    if min(single, batched, reads, args.agents, repeat) < 1:
        parser.error("counts, --agents and --repeat must be positive")
    if batched % 100:
        parser.error("--events must be a multiple of 100")
    config = Config(
        single_events=single,
        batched_events=batched,
        read_checkpoints=reads,
        agents=args.agents,
        repeat=repeat,
        tmp_parent=args.dir,
    )
    return config, args.json


# ---------------------------------------------------------------------- measurements


@dataclass
class Sample:
    """One run: seconds and items done."""

    seconds: float
    done: int


Timed = Callable[[Path], Sample]
"""A measurement: given a fresh temporary directory, return one Sample."""


def _clock(fn: Callable[[], int]) -> Sample:
    gc.collect()
    os.sync()  # the previous measurement's dirty pages are not this one's to write
    start = time.perf_counter()
    done = fn()
    return Sample(time.perf_counter() - start, done)


def make_events(count: int, agents: int) -> list[Event]:
    start = 1.7e9
    return [
        PrivateSet(at=start + i * 1e-3, agent=f"a{i % agents}", key=f"k{i % 16:02d}", value=VALUE)
        for i in range(count)
    ]


def cf_append(events: Sequence[Event], batch: int) -> Timed:
    batches = [events[i : i + batch] for i in range(0, len(events), batch)]

    def run(path: Path) -> Sample:
        with Journal.open(path / "journal", sync=True) as journal:

            def body() -> int:
                for chunk in batches:
                    journal.append(chunk)
                return len(events)

            return _clock(body)

    return run


def limit(timed: Callable[[Path], Clocked]) -> Timed:
    """A raw-LMDB reference of bench/journal_append.py, as a peers measurement."""

    def run(path: Path) -> Sample:
        clocked = timed(path)
        return Sample(clocked.seconds, clocked.done)

    return run


def cf_replay(events: Sequence[Event]) -> Timed:
    def run(path: Path) -> Sample:
        with Journal.open(path / "journal", sync=True) as journal:
            for start in range(0, len(events), FILL_BATCH):
                journal.append(events[start : start + FILL_BATCH])
        with Journal.open(path / "journal", sync=True) as journal:

            def body() -> int:
                count = 0
                for record in journal.read():
                    _ = record.event
                    count += 1
                return count

            return _clock(body)

    return run


# ---------------------------------------------------------------------- eventsourcing


if not EVENTSOURCING_ERROR:

    class Agent(Aggregate):
        """An agent with a private key-value layer, one event per set."""

        def __init__(self, name: str) -> None:
            self.name = name
            self.private: dict[str, str] = {}

        @event("PrivateSet")
        def set_private(self, key: str, value: str) -> None:
            self.private[key] = value


def _es_app(path: Path) -> Application[Any]:
    env = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(path / "es.sqlite")}
    return Application(env=env)


def _es_agents(app: Application[Any], agents: int) -> list[Any]:
    out = [Agent(f"a{i}") for i in range(agents)]
    app.save(*out)
    return out


def es_save(count: int, agents: int, mode: str) -> Timed:
    """``mode``: "one" (1 event/save), "aggregate" (100 events of one aggregate/save), "many"."""

    def run(path: Path) -> Sample:
        app = _es_app(path)
        try:
            aggs = _es_agents(app, agents)

            def one() -> int:
                for i in range(count):
                    agg = aggs[i % agents]
                    agg.set_private(f"k{i % 16:02d}", VALUE)
                    app.save(agg)
                return count

            def aggregate() -> int:
                i = 0
                for j in range(count // 100):
                    agg = aggs[j % agents]
                    for _ in range(100):
                        agg.set_private(f"k{i % 16:02d}", VALUE)
                        i += 1
                    app.save(agg)
                return i

            def many() -> int:
                i = 0
                for _ in range(count // agents):
                    for agg in aggs:
                        agg.set_private(f"k{i % 16:02d}", VALUE)
                        i += 1
                    app.save(*aggs)
                return i

            return _clock({"one": one, "aggregate": aggregate, "many": many}[mode])
        finally:
            app.close()

    return run


def _es_fill(path: Path, count: int, agents: int) -> list[Any]:
    app = _es_app(path)
    try:
        aggs = _es_agents(app, agents)
        per_save = max(1, FILL_BATCH // agents)
        i = 0
        while i < count:
            for _ in range(per_save):
                for agg in aggs:
                    agg.set_private(f"k{i % 16:02d}", VALUE)
                    i += 1
            app.save(*aggs)
        return [agg.id for agg in aggs]
    finally:
        app.close()


def es_replay(count: int, agents: int) -> Timed:
    def run(path: Path) -> Sample:
        _es_fill(path, count, agents)
        app = _es_app(path)
        try:

            def body() -> int:
                done = 0
                start = 1
                to_domain = app.mapper.to_domain_event
                while True:
                    page = app.recorder.select_notifications(start, READ_PAGE)
                    if not page:
                        return done
                    for notification in page:
                        to_domain(notification)
                    done += len(page)
                    start = page[-1].id + 1

            return _clock(body)
        finally:
            app.close()

    return run


def es_repository_get(count: int, agents: int) -> Timed:
    def run(path: Path) -> Sample:
        ids = _es_fill(path, count, agents)
        app = _es_app(path)
        try:

            def body() -> int:
                done = 0
                for agg_id in ids:
                    done += app.repository.get(agg_id).version
                return done

            return _clock(body)
        finally:
            app.close()

    return run


def es_event_bytes(tmp_parent: str | None) -> float:
    """Mean stored size (topic + state) of the eventsourcing PrivateSet events."""
    with tempfile.TemporaryDirectory(prefix="cogfabric-peers-", dir=tmp_parent) as tmp:
        app = _es_app(Path(tmp))
        try:
            agg = _es_agents(app, 1)[0]
            for i in range(16):
                agg.set_private(f"k{i:02d}", VALUE)
            app.save(agg)
            stored = app.recorder.select_events(agg.id, gt=1)
            return statistics.fmean(len(s.state) + len(s.topic) for s in stored)
        finally:
            app.close()


# ---------------------------------------------------------------------- LangGraph


def _lg_open(path: Path) -> tuple[sqlite3.Connection, Any]:
    conn = sqlite3.connect(str(path / "lg.sqlite"), check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    return conn, saver


def _lg_items(count: int, agents: int) -> list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """(config, checkpoint, metadata) per put; each checkpoint's parent is its thread's last."""
    last: dict[str, str | None] = {}
    out = []
    for i in range(count):
        thread = f"a{i % agents}"
        checkpoint: dict[str, Any] = dict(empty_checkpoint())
        checkpoint["id"] = str(uuid6(clock_seq=i))
        checkpoint["channel_values"] = {"agent": thread, "key": f"k{i % 16:02d}", "value": VALUE}
        configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
        if last.get(thread) is not None:
            configurable["checkpoint_id"] = last[thread]
        last[thread] = checkpoint["id"]
        out.append(({"configurable": configurable}, checkpoint, {"source": "loop", "step": i}))
    return out


def lg_put(count: int, agents: int) -> Timed:
    items = _lg_items(count, agents)

    def run(path: Path) -> Sample:
        conn, saver = _lg_open(path)
        try:

            def body() -> int:
                for config, checkpoint, metadata in items:
                    saver.put(config, checkpoint, metadata, {})
                return len(items)

            return _clock(body)
        finally:
            conn.close()

    return run


def lg_get(count: int, agents: int) -> Timed:
    items = _lg_items(count, agents)
    reads = [{"configurable": {**c["configurable"], "checkpoint_id": cp["id"]}} for c, cp, _ in items]

    def run(path: Path) -> Sample:
        conn, saver = _lg_open(path)
        try:
            conn.execute("PRAGMA synchronous=OFF")
            for config, checkpoint, metadata in items:
                saver.put(config, checkpoint, metadata, {})
            conn.execute("PRAGMA synchronous=FULL")

            def body() -> int:
                for config in reads:
                    if saver.get_tuple(config) is None:
                        raise RuntimeError(f"checkpoint missing: {config}")
                return len(reads)

            return _clock(body)
        finally:
            conn.close()

    return run


def lg_checkpoint_bytes(agents: int) -> float:
    """Mean serialized size of a checkpoint plus its metadata, as ``put`` stores them."""
    saver = SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))
    sizes = []
    for _, checkpoint, metadata in _lg_items(16, agents):
        _, blob = saver.serde.dumps_typed(checkpoint)
        sizes.append(len(blob) + len(json.dumps(metadata)))
    saver.conn.close()
    return statistics.fmean(sizes)


def sqlite_defaults(tmp_parent: str | None) -> dict[str, Any]:
    """``journal_mode`` and ``synchronous`` of a fresh ``sqlite3`` connection switched to WAL."""
    with tempfile.TemporaryDirectory(prefix="cogfabric-peers-", dir=tmp_parent) as tmp:
        conn = sqlite3.connect(str(Path(tmp) / "probe.sqlite"))
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            sync = conn.execute("PRAGMA synchronous").fetchone()[0]
        finally:
            conn.close()
    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    return {
        "sqlite_version": sqlite3.sqlite_version,
        "journal_mode": mode,
        "synchronous": f"{sync} ({names.get(sync, '?')})",
    }


# ---------------------------------------------------------------------- running


@dataclass(frozen=True)
class Workload:
    """A named measurement, its system, and the cogfabric workload it is compared with."""

    name: str
    system: str
    timed: Timed | None
    unit: str = "events"
    reference: str = ""
    note: str = ""
    skipped: str = ""
    batched: bool = False
    """A peer write: also compared with cogfabric's batched append (1000 per commit)."""
    limit: str = ""
    """The raw-LMDB reference that bounds any library on this stack for this workload."""


@dataclass
class Row:
    """One line of the table: medians of one workload's runs."""

    workload: str
    system: str
    unit: str
    count: int
    seconds: float
    rate: float
    runs: list[float] = field(default_factory=list)
    reference: str = ""
    ratio: float | None = None
    batched_ratio: float | None = None
    """cogfabric's durable batched append (1000 per commit) over this peer's rate."""
    limit_ratio: float | None = None
    """Raw LMDB with msgspec at the same settings over this peer's rate: what cogfabric's
    journal would reach with no cost of its own."""
    note: str = ""
    skipped: str = ""


def build_workloads(config: Config, events: list[Event]) -> list[Workload]:
    c = config
    single = events[: c.single_events]
    batched = events[: c.batched_events]
    out = [
        Workload(RAW_APPEND, RAW_LMDB, limit(raw_append_encoding(batched, 1000)), note="the write limit"),
        Workload(CF_BATCH_1000, COGFABRIC, cf_append(batched, 1000), note="one fsync per 1000 events"),
        Workload(CF_BATCH_100, COGFABRIC, cf_append(batched, 100), note="one fsync per 100 events"),
        Workload(CF_BATCH_1, COGFABRIC, cf_append(single, 1), note=ONE_SYNC),
        Workload(RAW_REPLAY, RAW_LMDB, limit(raw_scan(batched, decode=True)), note="the read limit"),
        Workload(CF_REPLAY, COGFABRIC, cf_replay(batched)),
    ]
    es: list[tuple[str, Callable[[], Timed], str, str, str]] = [
        (
            "eventsourcing save, 100 events of 1 aggregate/save",
            lambda: es_save(c.batched_events, c.agents, "aggregate"),
            "events",
            CF_BATCH_100,
            "one fsync per 100 events",
        ),
        (
            f"eventsourcing save, {c.agents} aggregates x 1 event/save",
            lambda: es_save(c.batched_events, c.agents, "many"),
            "events",
            CF_BATCH_100,
            f"one fsync per {c.agents} events",
        ),
        (
            "eventsourcing save, 1 event/save",
            lambda: es_save(c.single_events, c.agents, "one"),
            "events",
            CF_BATCH_1,
            ONE_SYNC,
        ),
        (
            "eventsourcing replay (select_notifications + decode)",
            lambda: es_replay(c.batched_events, c.agents),
            "events",
            CF_REPLAY,
            f"pages of {READ_PAGE}; counts {c.agents} creation events",
        ),
        (
            "eventsourcing repository.get of every aggregate",
            lambda: es_repository_get(c.batched_events, c.agents),
            "events",
            CF_REPLAY,
            f"rebuilds each aggregate; counts {c.agents} creation events",
        ),
    ]
    for name, make, unit, ref, note in es:
        timed = None if EVENTSOURCING_ERROR else make()
        write = ref != CF_REPLAY
        bound = RAW_APPEND if write else RAW_REPLAY
        out.append(Workload(name, EVENTSOURCING, timed, unit, ref, note, EVENTSOURCING_ERROR, write, bound))
    lg: list[tuple[str, Callable[[], Timed], str, str, str]] = [
        (
            "langgraph SqliteSaver.put, 1 checkpoint/put",
            lambda: lg_put(c.single_events, c.agents),
            "puts",
            CF_BATCH_1,
            ONE_SYNC,
        ),
        (
            "langgraph SqliteSaver.get_tuple by id, every checkpoint",
            lambda: lg_get(c.read_checkpoints, c.agents),
            "gets",
            CF_REPLAY,
            "2 SELECTs per call",
        ),
    ]
    for name, make, unit, ref, note in lg:
        timed = None if LANGGRAPH_ERROR else make()
        write = ref != CF_REPLAY
        bound = RAW_APPEND if write else RAW_REPLAY
        out.append(Workload(name, LANGGRAPH, timed, unit, ref, note, LANGGRAPH_ERROR, write, bound))
    return out


def run_workloads(config: Config, workloads: list[Workload]) -> list[Row]:
    runs: dict[str, list[Sample]] = {w.name: [] for w in workloads}
    for round_no in range(config.repeat):
        # interleaved rounds: a slow spell of the machine hits every workload alike
        for workload in workloads:
            if workload.timed is None:
                continue
            with tempfile.TemporaryDirectory(prefix="cogfabric-peers-", dir=config.tmp_parent) as tmp:
                sample = workload.timed(Path(tmp))
            runs[workload.name].append(sample)
            print(
                f"  run {round_no + 1}/{config.repeat} {workload.name}: "
                f"{sample.done / sample.seconds:,.0f}/s",
                file=sys.stderr,
                flush=True,
            )
    rows: dict[str, Row] = {}
    for w in workloads:
        samples = runs[w.name]
        if not samples:
            rows[w.name] = Row(w.name, w.system, w.unit, 0, 0.0, 0.0, reference=w.reference)
            rows[w.name].skipped = w.skipped
            continue
        seconds = statistics.median(s.seconds for s in samples)
        done = samples[0].done
        rows[w.name] = Row(
            workload=w.name,
            system=w.system,
            unit=w.unit,
            count=done,
            seconds=seconds,
            rate=done / seconds,
            runs=[s.seconds for s in samples],
            reference=w.reference,
            note=w.note,
        )
    batched = {w.name for w in workloads if w.batched}
    limits = {w.name: w.limit for w in workloads if w.limit}
    for row in rows.values():
        if row.rate <= 0:
            continue
        if row.reference and rows[row.reference].rate > 0:
            row.ratio = rows[row.reference].rate / row.rate
        if row.workload in batched and rows[CF_BATCH_1000].rate > 0:
            row.batched_ratio = rows[CF_BATCH_1000].rate / row.rate
        bound = limits.get(row.workload)
        if bound and rows[bound].rate > 0:
            row.limit_ratio = rows[bound].rate / row.rate
    return list(rows.values())


# ---------------------------------------------------------------------- reporting


def format_table(rows: list[Row]) -> str:
    ratios = ("cogfabric/peer", "batched/peer", "limit/peer")
    headers = ("workload", "count", "seconds", "rate/s", "unit", *ratios, "note")
    lines = []
    for row in rows:
        if row.skipped:
            lines.append((row.workload, "", "", "", row.unit, "", "", "", f"SKIPPED: {row.skipped}"))
            continue
        ratios = [
            "" if value is None else f"{value:.1f}x"
            for value in (row.ratio, row.batched_ratio, row.limit_ratio)
        ]
        lines.append(
            (
                row.workload,
                f"{row.count:,}",
                f"{row.seconds:.3f}",
                f"{row.rate:,.0f}",
                row.unit,
                *ratios,
                row.note,
            )
        )
    return columns(headers, lines, right={1, 2, 3, 5, 6, 7})


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment(config: Config, events: list[Event]) -> dict[str, Any]:
    encoder = msgspec.msgpack.Encoder()
    tmp_parent = config.tmp_parent or tempfile.gettempdir()
    info: dict[str, Any] = {
        "commit": source_revision(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),  # empty on Linux: cpu_model names the CPU
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count(),
        "tmp_parent": tmp_parent,
        "tmp_filesystem": filesystem_of(tmp_parent) or "?",
        "versions": {
            name: _version(name)
            for name in (
                "cogfabric",
                "lmdb",
                "msgspec",
                "eventsourcing",
                "langgraph",
                "langgraph-checkpoint",
                "langgraph-checkpoint-sqlite",
            )
        },
        "sqlite": sqlite_defaults(config.tmp_parent),
        "cogfabric_event_bytes_mean": statistics.fmean(len(encoder.encode(e)) for e in events[:1000]),
        "agents": config.agents,
        "repeat": config.repeat,
        "skipped": {EVENTSOURCING: EVENTSOURCING_ERROR, LANGGRAPH: LANGGRAPH_ERROR},
    }
    if not EVENTSOURCING_ERROR:
        info["eventsourcing_event_bytes_mean"] = es_event_bytes(config.tmp_parent)
    if not LANGGRAPH_ERROR:
        info["langgraph_checkpoint_bytes_mean"] = lg_checkpoint_bytes(config.agents)
    return info


def describe(env_info: dict[str, Any]) -> str:
    v = env_info["versions"]
    sq = env_info["sqlite"]
    sizes = [f"cogfabric msgpack ~{env_info['cogfabric_event_bytes_mean']:.0f} B"]
    if "eventsourcing_event_bytes_mean" in env_info:
        sizes.append(f"eventsourcing topic+state ~{env_info['eventsourcing_event_bytes_mean']:.0f} B")
    if "langgraph_checkpoint_bytes_mean" in env_info:
        sizes.append(f"LangGraph checkpoint+metadata ~{env_info['langgraph_checkpoint_bytes_mean']:.0f} B")
    return (
        f"cogfabric vs peers: {env_info['agents']} agents, median of {env_info['repeat']}, "
        f"{env_info['cpus']} CPUs, temp dirs on {env_info['tmp_filesystem']} ({env_info['tmp_parent']})\n"
        f"versions: Python {env_info['python']}, lmdb {v['lmdb']}, msgspec {v['msgspec']}, "
        f"eventsourcing {v['eventsourcing']}, langgraph {v['langgraph']}, "
        f"langgraph-checkpoint-sqlite {v['langgraph-checkpoint-sqlite']}, SQLite {sq['sqlite_version']}\n"
        f"stored sizes: {'; '.join(sizes)}\n"
        f"durability: cogfabric LMDB sync=True (fsync per commit); both SQLite peers run "
        f"journal_mode={sq['journal_mode']}, synchronous={sq['synchronous']} (library default, "
        f"fsync of the WAL per commit)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    config, json_path = parse_args(argv)
    events = make_events(max(config.single_events, config.batched_events), config.agents)
    env_info = environment(config, events)
    warn_if_tmpfs(env_info)
    for system, error in env_info["skipped"].items():
        if error:
            print(f"skipping {system}: {error}", file=sys.stderr)
    rows = run_workloads(config, build_workloads(config, events))
    print()
    print(describe(env_info))
    print()
    print(format_table(rows))
    if json_path is not None:
        document = {
            "benchmark": "peers",
            "environment": env_info,
            "config": asdict(config),
            "results": [asdict(row) for row in rows],
        }
        write_json(json_path, document)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

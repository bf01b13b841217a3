"""Benchmark the LMDB journal's append, replay and verify against raw LMDB in the same run.

What it measures (each on fresh temporary directories, timed with ``time.perf_counter``,
repeated ``--repeat`` times; the table shows the median):

* ``Journal.append`` of ~250-byte ``PrivateSet`` events (msgpack size; spread over
  ~100 agents) through ``Journal.open(path, sync=True)``, in batches of 1, 100 and
  1000. Every batch is one synced commit, so batch-of-1 runs fewer events. Appends
  decode each event back (``validate=True``, the default); batches of 1000 run also
  with ``validate=False``, as the runtime's journal writer appends.
* Replay: ``journal.read()`` over every record, touching ``record.event`` (so every
  record is decoded into its typed event).
* ``journal.verify()``: the hash chain and the indexes, in records/s.
* References, measured beside them on the same event objects:

  - raw LMDB append with encoding: ``lmdb.open(..., sync=True)``, one named database,
    ``cursor.putmulti(items, append=True)`` per write transaction (1000, and also 100
    and 1 to match the journal's batch sizes), with the msgspec msgpack encoding
    inside the timed loop;
  - raw LMDB append of values encoded before the clock starts;
  - raw scan (cursor over every value), without and with a typed decode
    (``msgspec.msgpack.Decoder(AnyEvent)``).

* A side table comparing hash-chain schemes on the journal's record bodies, in
  microseconds per record (hashing only, and with each commit's stored values built as
  well): a per-record chained BLAKE2b-128 as the journal computes it (a copy of one
  prepared hasher, ``update(prev)``, ``update(body)``), against a per-record CRC32 plus
  one BLAKE2b-128 over each commit of 1000, and the same with each commit's BLAKE2b on
  a helper thread (hashlib releases the GIL for large buffers). This is the
  measurement the design note in ``store/_lmdb.py``'s docstring refers to.

Beside each median, the table shows the process's CPU time per event (the rest of a
synced append's time is mostly waiting for the disk) and the size of the LMDB data files
the run left per event (what its commits wrote, or what a scan read): together they
say whether a ratio is bound by the Python work or by the bytes written.

Each run starts after ``os.sync()``, so it does not pay for the previous one's writes. A
ratio is the median of the rounds' ratios: each round measures every workload once, in
turn, so a slow spell of the shared machine that spans a round cancels out.

Targets, printed beside the ratios: batched append (1000) >= 0.5x the raw append with
encoding; replay >= 0.8x the raw scan with typed decode.

Run it from the repository root::

    .venv/bin/python bench/journal_append.py              # full size
    .venv/bin/python bench/journal_append.py --quick      # small counts, a smoke test
    .venv/bin/python bench/journal_append.py --repeat 5 --json results.json

``--dir`` chooses where the temporary directories go: it must be a real disk (not
tmpfs) for synced commits to mean anything. Figures are noisy on shared machines;
ratios measured in one run hold better than absolute rates.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import gc
import hashlib
import os
import platform
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final, NamedTuple

import lmdb
import msgspec
from _common import columns, directory, json_file, source_revision, warn_if_tmpfs, write_json

from cogfabric._bench import cpu_model, filesystem_of
from cogfabric.events import AnyEvent, Event, PrivateSet
from cogfabric.store import Journal, LmdbJournal

TARGET_EVENT_BYTES: Final = 250
MAP_SIZE: Final = 1 << 30
RAW_BATCH: Final = 1000
HASH_COMMIT: Final = 1000
BATCH_SIZES: Final = (1, 100, 1000)

TARGET_APPEND: Final = 0.5
TARGET_REPLAY: Final = 0.8


# ---------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class Config:
    """What to run: counts, repeats and where the temporary directories go."""

    single_events: int
    batched_events: int
    hash_records: int
    agents: int
    event_bytes: int
    repeat: int
    tmp_parent: str | None
    ablate: bool = False


def parse_args(argv: Sequence[str] | None = None) -> tuple[Config, Path | None]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--single-events", type=int, default=None, help="events for batch-of-1 (2,000)")
    parser.add_argument(
        "--events", type=int, default=None, help="events for batches of 100 and 1000, and replay (200,000)"
    )
    parser.add_argument("--hash-records", type=int, default=None, help="records for the hash table (200,000)")
    parser.add_argument("--agents", type=int, default=100, help="agents the events are spread over")
    parser.add_argument(
        "--event-bytes", type=int, default=TARGET_EVENT_BYTES, help="msgpack size of one event"
    )
    parser.add_argument("--repeat", type=int, default=None, help="runs per measurement; median shown (3)")
    parser.add_argument("--quick", action="store_true", help="small counts and one run: a smoke test")
    parser.add_argument(
        "--dir", type=directory, default=None, help="parent of the temporary directories (a real disk)"
    )
    parser.add_argument(
        "--json", type=json_file, default=None, metavar="FILE", help="also write the results here"
    )
    parser.add_argument(
        "--ablate", action="store_true", help="also append with the chain hash, or the index puts, left out"
    )
    args = parser.parse_args(argv)
    quick = bool(args.quick)
    single = args.single_events if args.single_events is not None else (100 if quick else 2_000)
    batched = args.events if args.events is not None else (10_000 if quick else 200_000)
    hashed = args.hash_records if args.hash_records is not None else batched
    repeat = args.repeat if args.repeat is not None else (1 if quick else 3)
    if min(single, batched, hashed, args.agents, repeat) < 1:
        parser.error("counts, --agents and --repeat must be positive")
    config = Config(
        single_events=single,
        batched_events=batched,
        hash_records=hashed,
        agents=args.agents,
        event_bytes=args.event_bytes,
        repeat=repeat,
        tmp_parent=args.dir,
        ablate=bool(args.ablate),
    )
    return config, args.json


# ---------------------------------------------------------------------- the events


_encoder: Final = msgspec.msgpack.Encoder()


def make_events(count: int, agents: int, event_bytes: int) -> list[Event]:
    """``count`` PrivateSet events over ``agents`` agents, each ~``event_bytes`` encoded."""
    # the probe's id is as long as the longest real one: a 16-hex prefix and the hex counter
    probe_id = f"{'0' * 16}-{count:x}"
    probe = PrivateSet(at=1.7e9, agent=f"agent-{agents - 1:03d}", key="k15", value="", id=probe_id)
    base = len(_encoder.encode(probe))
    # a str of 32..255 bytes has a 2-byte msgpack header; the empty one had 1
    filler = max(0, event_bytes - base - 1)
    letters = "abcdefghijklmnopqrstuvwxyz0123456789"
    value = (letters * (filler // len(letters) + 1))[:filler]
    start = 1.7e9
    return [
        PrivateSet(at=start + i * 1e-3, agent=f"agent-{i % agents:03d}", key=f"k{i % 16:02d}", value=value)
        for i in range(count)
    ]


def record_bodies(events: Sequence[Event]) -> list[bytes]:
    """The record bodies the journal hashes (format 3, store/_record.py): the seq, the msgpack
    event and the trailer up to its chain link (stream, back link)."""
    out = []
    for seq, event in enumerate(events, 1):
        stream = event.stream.encode()
        link = bytes(8)  # the seq of the stream's previous record; its value does not change the cost
        trailer = b"%s%c%s" % (stream, len(stream), link)
        out.append(
            b"\x93\xcf%s%s\xc5%s%s"
            % (_seq_key(seq), _encoder.encode(event), (len(trailer) + 16).to_bytes(2, "big"), trailer)
        )
    return out


# ---------------------------------------------------------------------- measurements


class Clocked(NamedTuple):
    """One timed run: wall seconds, items done, and the process's CPU seconds meanwhile.

    Wall time minus CPU time is mostly waiting for the disk (each synced commit), so the
    two show how much of a ratio is the Python work and how much the writes.
    """

    seconds: float
    done: int
    cpu: float


Timed = Callable[[Path], Clocked]
"""A measurement: given a fresh temporary directory, return its ``Clocked`` run."""


def _clock(fn: Callable[[], int]) -> Clocked:
    gc.collect()
    os.sync()  # the previous measurement's dirty pages are not this one's to write
    cpu = time.process_time()
    start = time.perf_counter()
    done = fn()
    return Clocked(time.perf_counter() - start, done, time.process_time() - cpu)


def _open_raw(path: Path) -> tuple[lmdb.Environment, Any]:
    env = lmdb.open(str(path), map_size=MAP_SIZE, subdir=True, sync=True, max_dbs=2, readahead=False)
    return env, env.open_db(b"events", create=True)


def _seq_key(seq: int) -> bytes:
    return seq.to_bytes(8, "big")


class _NoHash:
    """A stand-in for the chain's hasher that does no work (ablation only)."""

    def copy(self) -> _NoHash:
        return self

    def update(self, data: bytes) -> None:
        pass

    def digest(self) -> bytes:
        return bytes(16)


def _ablated(journal: Journal, leave_out: str) -> None:
    """Take a part out of the append path, to measure what it costs (never a real journal).

    Reaches into the journal's internals on purpose: this is an ablation.
    """
    assert isinstance(journal, LmdbJournal)
    if leave_out == "hash":
        journal._hasher = _NoHash()  # type: ignore[assignment]  # noqa: SLF001
    elif leave_out == "indexes":
        events_db = journal._db_events  # noqa: SLF001

        def events_only(txn: lmdb.Transaction[bytes], *args: list[Any]) -> bool:
            txn.cursor(db=events_db).putmulti(args[1], append=True)  # args: ids, records, anchors, heads
            return True

        journal._put_records = events_only  # type: ignore[method-assign,assignment]  # noqa: SLF001


def journal_append(
    events: Sequence[Event], batch: int, leave_out: str = "", *, validate: bool = True
) -> Timed:
    batches = [events[i : i + batch] for i in range(0, len(events), batch)]

    def run(path: Path) -> Clocked:
        journal = Journal.open(path / "journal", sync=True)
        if leave_out:
            _ablated(journal, leave_out)
        try:

            def body() -> int:
                for chunk in batches:
                    journal.append(chunk, validate=validate)
                return len(events)

            return _clock(body)
        finally:
            journal.close()

    return run


def raw_append_encoding(events: Sequence[Event], batch: int) -> Timed:
    batches = [events[i : i + batch] for i in range(0, len(events), batch)]

    def run(path: Path) -> Clocked:
        env, db = _open_raw(path / "raw")
        encode = msgspec.msgpack.Encoder().encode
        try:

            def body() -> int:
                seq = 0
                for chunk in batches:
                    items = []
                    for event in chunk:
                        seq += 1
                        items.append((seq.to_bytes(8, "big"), encode(event)))
                    with env.begin(write=True, db=db) as txn:
                        txn.cursor().putmulti(items, append=True)
                return seq

            return _clock(body)
        finally:
            env.close()

    return run


def raw_append_preencoded(events: Sequence[Event], batch: int) -> Timed:
    encode = msgspec.msgpack.Encoder().encode
    items = [(_seq_key(i + 1), encode(event)) for i, event in enumerate(events)]
    batches = [items[i : i + batch] for i in range(0, len(items), batch)]

    def run(path: Path) -> Clocked:
        env, db = _open_raw(path / "raw")
        try:

            def body() -> int:
                for chunk in batches:
                    with env.begin(write=True, db=db) as txn:
                        txn.cursor().putmulti(chunk, append=True)
                return len(items)

            return _clock(body)
        finally:
            env.close()

    return run


def _fill_raw(path: Path, events: Sequence[Event]) -> lmdb.Environment:
    env, db = _open_raw(path)
    encode = msgspec.msgpack.Encoder().encode
    for start in range(0, len(events), RAW_BATCH):
        chunk = events[start : start + RAW_BATCH]
        items = [(_seq_key(start + i + 1), encode(event)) for i, event in enumerate(chunk)]
        with env.begin(write=True, db=db) as txn:
            txn.cursor().putmulti(items, append=True)
    env.close()
    env, _ = _open_raw(path)
    return env


def raw_scan(events: Sequence[Event], *, decode: bool) -> Timed:
    decoder = msgspec.msgpack.Decoder(AnyEvent)

    def run(path: Path) -> Clocked:
        env = _fill_raw(path / "raw", events)
        db = env.open_db(b"events", create=False)
        try:

            def scan_only() -> int:
                count = 0
                with env.begin(db=db) as txn:
                    for _value in txn.cursor().iternext(keys=False, values=True):
                        count += 1
                return count

            def scan_decode() -> int:
                count = 0
                typed = decoder.decode
                with env.begin(db=db) as txn:
                    for value in txn.cursor().iternext(keys=False, values=True):
                        typed(value)
                        count += 1
                return count

            return _clock(scan_decode if decode else scan_only)
        finally:
            env.close()

    return run


def _fill_journal(path: Path, events: Sequence[Event]) -> None:
    with Journal.open(path, sync=True) as journal:
        for start in range(0, len(events), RAW_BATCH):
            journal.append(events[start : start + RAW_BATCH])


def journal_replay(events: Sequence[Event]) -> Timed:
    def run(path: Path) -> Clocked:
        _fill_journal(path / "journal", events)
        with Journal.open(path / "journal", sync=True) as journal:

            def body() -> int:
                count = 0
                for record in journal.read():
                    _ = record.event
                    count += 1
                return count

            return _clock(body)

    return run


def journal_verify(events: Sequence[Event]) -> Timed:
    def run(path: Path) -> Clocked:
        _fill_journal(path / "journal", events)
        with Journal.open(path / "journal", sync=True) as journal:

            def body() -> int:
                report = journal.verify()
                if not report.ok:
                    raise RuntimeError(f"verify failed: {report}")
                return report.checked

            return _clock(body)

    return run


# ---------------------------------------------------------------------- hash schemes


def chain_per_record(bodies: Sequence[bytes], *, build: bool) -> Clocked:
    """Chained BLAKE2b-128 per record, as ``LmdbJournal._write`` does it (a copy of one
    prepared hasher per record); with ``build``, also each stored value ``body | chain``."""
    copy = hashlib.blake2b(digest_size=16).copy
    commits = [bodies[i : i + HASH_COMMIT] for i in range(0, len(bodies), HASH_COMMIT)]

    def body() -> int:
        prev = bytes(16)
        done = 0
        for commit in commits:
            stored = []  # one commit's values at a time, as the journal holds them
            for record in commit:
                h = copy()
                h.update(prev)
                h.update(record)
                prev = h.digest()
                if build:
                    stored.append(record + prev)
            done += len(commit)
        return done

    return _clock(body)


def crc_per_record_hash_per_commit(bodies: Sequence[bytes], *, build: bool) -> Clocked:
    """CRC32 per record and one chained BLAKE2b-128 per commit of 1000 (over the bodies).

    With ``build``, also each stored value ``body | crc``.
    """
    blake2b = hashlib.blake2b
    crc32 = zlib.crc32
    commits = [bodies[i : i + HASH_COMMIT] for i in range(0, len(bodies), HASH_COMMIT)]

    def body() -> int:
        prev = bytes(16)
        done = 0
        for commit in commits:
            if build:
                stored: list[Any] = [record + crc32(record).to_bytes(4, "big") for record in commit]
            else:
                stored = [crc32(record) for record in commit]
            prev = blake2b(prev + b"".join(commit), digest_size=16).digest()
            done += len(stored)
        return done

    return _clock(body)


def crc_per_record_hash_per_commit_threaded(bodies: Sequence[bytes], *, build: bool) -> Clocked:
    """As ``crc_per_record_hash_per_commit``, with each commit's BLAKE2b on a helper thread.

    hashlib releases the GIL while it hashes a buffer of 2 KiB or more, so the commit's
    hash runs on the second core while this thread computes the CRCs (and builds the
    stored values): the best case of the per-commit scheme on this machine.
    """
    blake2b = hashlib.blake2b
    crc32 = zlib.crc32
    commits = [bodies[i : i + HASH_COMMIT] for i in range(0, len(bodies), HASH_COMMIT)]

    def one_shot(data: bytes) -> bytes:
        return blake2b(data, digest_size=16).digest()

    def body() -> int:
        prev = bytes(16)
        done = 0
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            for commit in commits:
                digest = pool.submit(one_shot, prev + b"".join(commit))
                if build:
                    stored: list[Any] = [record + crc32(record).to_bytes(4, "big") for record in commit]
                else:
                    stored = [crc32(record) for record in commit]
                prev = digest.result()
                done += len(stored)
        return done

    return _clock(body)


# ---------------------------------------------------------------------- running


@dataclass
class Row:
    """One line of the table: a workload, its median and its reference."""

    workload: str
    events: int
    seconds: float
    rate: float
    runs: list[float] = field(default_factory=list)
    reference: str = ""
    ratio: float | None = None
    target: float | None = None
    cpu_runs: list[float] = field(default_factory=list)
    """The process's CPU seconds in each run (the rest of its time is mostly waiting for the disk)."""
    data_bytes: int = 0
    """The LMDB data files' size after the first run: what the workload wrote (or scanned)."""

    @property
    def cpu_us(self) -> float:
        """Median CPU microseconds per event."""
        return statistics.median(self.cpu_runs) / self.events * 1e6 if self.cpu_runs else 0.0

    @property
    def bytes_per_event(self) -> float:
        return self.data_bytes / self.events if self.events else 0.0

    @property
    def met(self) -> bool | None:
        if self.ratio is None or self.target is None:
            return None
        return self.ratio >= self.target


@dataclass(frozen=True)
class Workload:
    """A named measurement and the workload whose rate it is compared to."""

    name: str
    timed: Timed
    reference: str = ""
    target: float | None = None


def build_workloads(config: Config, events: list[Event]) -> list[Workload]:
    single = events[: config.single_events]
    batched = events[: config.batched_events]
    raw_1000 = "raw append + encoding, 1000/txn"
    raw_scan_decode = "raw scan + typed decode"
    ablations = [
        Workload(f"  ablation: {what}", journal_append(batched, 1000, leave_out), raw_1000)
        for what, leave_out in (("no chain hash", "hash"), ("no id/anchor/head puts", "indexes"))
    ]
    return [
        Workload("raw append, pre-encoded, 1000/txn", raw_append_preencoded(batched, RAW_BATCH)),
        Workload(raw_1000, raw_append_encoding(batched, RAW_BATCH)),
        Workload("raw append + encoding, 100/txn", raw_append_encoding(batched, 100)),
        Workload("raw append + encoding, 1/txn", raw_append_encoding(single, 1)),
        Workload("Journal.append, batch 1", journal_append(single, 1), "raw append + encoding, 1/txn"),
        Workload("Journal.append, batch 100", journal_append(batched, 100), "raw append + encoding, 100/txn"),
        Workload("Journal.append, batch 1000", journal_append(batched, 1000), raw_1000, TARGET_APPEND),
        # the runtime's writer: its events are built from values checked at the boundary
        Workload(
            "Journal.append(validate=False), batch 1000",
            journal_append(batched, 1000, validate=False),
            raw_1000,
            TARGET_APPEND,
        ),
        *(ablations if config.ablate else []),
        Workload("raw scan, no decode", raw_scan(batched, decode=False)),
        Workload(raw_scan_decode, raw_scan(batched, decode=True)),
        Workload("Journal.read replay (decode)", journal_replay(batched), raw_scan_decode, TARGET_REPLAY),
        Workload("Journal.verify", journal_verify(batched), raw_scan_decode),
    ]


def _data_bytes(where: Path) -> int:
    """The size of the LMDB data files under ``where`` (every page a workload's commits wrote)."""
    return sum(path.stat().st_size for path in where.rglob("data.mdb"))


def run_workloads(config: Config, workloads: list[Workload]) -> list[Row]:
    runs: dict[str, list[Clocked]] = {w.name: [] for w in workloads}
    sizes: dict[str, int] = {}
    for round_no in range(config.repeat):
        # interleaved rounds: a slow spell of the machine hits every workload alike
        for workload in workloads:
            with tempfile.TemporaryDirectory(prefix="cogfabric-bench-", dir=config.tmp_parent) as tmp:
                clocked = workload.timed(Path(tmp))
                sizes.setdefault(workload.name, _data_bytes(Path(tmp)))
            seconds, done = clocked.seconds, clocked.done
            runs[workload.name].append(clocked)
            print(
                f"  run {round_no + 1}/{config.repeat} {workload.name}: {done / seconds:,.0f}/s",
                file=sys.stderr,
                flush=True,
            )
    rows: dict[str, Row] = {}
    for workload in workloads:
        seconds = statistics.median(run.seconds for run in runs[workload.name])
        done = runs[workload.name][0].done
        rows[workload.name] = Row(
            workload=workload.name,
            events=done,
            seconds=seconds,
            rate=done / seconds,
            runs=[run.seconds for run in runs[workload.name]],
            reference=workload.reference,
            target=workload.target,
            cpu_runs=[run.cpu for run in runs[workload.name]],
            data_bytes=sizes[workload.name],
        )
    for row in rows.values():
        if row.reference:
            # paired by round: each round's ratio, then their median (a slow spell of the
            # machine that spans a round cancels out)
            ref = rows[row.reference]
            row.ratio = statistics.median(
                (row.events / mine) / (ref.events / theirs)
                for mine, theirs in zip(row.runs, ref.runs, strict=True)
            )
    return list(rows.values())


@dataclass
class HashRow:
    """One hash-chain scheme: microseconds per record, medians of the runs."""

    scheme: str
    records: int
    us_hash_only: float
    us_with_value: float
    runs_us_hash_only: list[float] = field(default_factory=list)
    runs_us_with_value: list[float] = field(default_factory=list)


HashScheme = Callable[..., Clocked]


def run_hash_table(config: Config, events: list[Event]) -> list[HashRow]:
    bodies = record_bodies(events[: config.hash_records])
    schemes: list[tuple[str, HashScheme]] = [
        ("chained BLAKE2b-128 per record", chain_per_record),
        (f"CRC32 per record + BLAKE2b-128 per {HASH_COMMIT}", crc_per_record_hash_per_commit),
        (
            f"CRC32 per record + BLAKE2b-128 per {HASH_COMMIT} on a helper thread",
            crc_per_record_hash_per_commit_threaded,
        ),
    ]
    # Interleaved rounds, as the main table's: a slow spell of the machine hits every scheme.
    hash_only: dict[str, list[float]] = {name: [] for name, _ in schemes}
    with_value: dict[str, list[float]] = {name: [] for name, _ in schemes}
    for _ in range(config.repeat):
        for name, fn in schemes:
            seconds, done, _ = fn(bodies, build=False)
            hash_only[name].append(seconds / done * 1e6)
            seconds, done, _ = fn(bodies, build=True)
            with_value[name].append(seconds / done * 1e6)
    return [
        HashRow(
            name,
            len(bodies),
            statistics.median(hash_only[name]),
            statistics.median(with_value[name]),
            hash_only[name],
            with_value[name],
        )
        for name, _ in schemes
    ]


# ---------------------------------------------------------------------- reporting


def format_table(rows: list[Row]) -> str:
    headers = (
        "workload", "events", "seconds", "events/s", "CPU us/event", "file bytes/event", "reference", "ratio",
        "target",
    )  # fmt: skip
    lines = []
    for row in rows:
        ratio = "" if row.ratio is None else f"{row.ratio:.2f}x"
        target = ""
        if row.target is not None:
            target = f">= {row.target:.1f}x " + ("met" if row.met else "MISSED")
        lines.append(
            (
                row.workload,
                f"{row.events:,}",
                f"{row.seconds:.3f}",
                f"{row.rate:,.0f}",
                f"{row.cpu_us:.2f}",
                f"{row.bytes_per_event:,.0f}",
                row.reference,
                ratio,
                target,
            )
        )
    return columns(headers, lines, right={1, 2, 3, 4, 5, 7})


def format_hash_table(rows: list[HashRow]) -> str:
    headers = ("hash scheme", "records", "us/record, hash only", "us/record, + stored value")
    lines = [
        (row.scheme, f"{row.records:,}", f"{row.us_hash_only:.3f}", f"{row.us_with_value:.3f}")
        for row in rows
    ]
    return columns(headers, lines, right={1, 2, 3})


def environment(config: Config, events: list[Event]) -> dict[str, Any]:
    sizes = [len(_encoder.encode(event)) for event in events[:1000]]
    return {
        "commit": source_revision(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "lmdb": lmdb.__version__,
        "lmdb_engine": ".".join(map(str, lmdb.version())),
        "msgspec": msgspec.__version__,
        "tmp_parent": config.tmp_parent or tempfile.gettempdir(),
        "tmp_filesystem": filesystem_of(config.tmp_parent or tempfile.gettempdir()) or "?",
        "cpu_model": cpu_model(),
        "event_bytes_mean": statistics.fmean(sizes),
        "agents": config.agents,
        "repeat": config.repeat,
    }


def main(argv: Sequence[str] | None = None) -> int:
    config, json_path = parse_args(argv)
    total = max(config.single_events, config.batched_events, config.hash_records)
    events = make_events(total, config.agents, config.event_bytes)
    env_info = environment(config, events)
    warn_if_tmpfs(env_info)
    print(
        f"events: PrivateSet, ~{env_info['event_bytes_mean']:.0f} bytes msgpack, {config.agents} agents; "
        f"sync=True; median of {config.repeat}; temp dirs under {env_info['tmp_parent']} "
        f"({env_info['tmp_filesystem']})",
        file=sys.stderr,
    )
    rows = run_workloads(config, build_workloads(config, events))
    hash_rows = run_hash_table(config, events)
    print()
    print(
        f"Journal vs raw LMDB: ~{env_info['event_bytes_mean']:.0f}-byte events, {config.agents} agents, "
        f"sync=True, median of {config.repeat} (Python {env_info['python']}, lmdb {env_info['lmdb']}, "
        f"msgspec {env_info['msgspec']}, {env_info['cpus']} CPUs)"
    )
    print()
    print(format_table(rows))
    print()
    print(format_hash_table(hash_rows))
    if json_path is not None:
        document = {
            "environment": env_info,
            "config": asdict(config),
            "results": [
                {**asdict(row), "met": row.met, "cpu_us": row.cpu_us, "bytes_per_event": row.bytes_per_event}
                for row in rows
            ],
            "hash_schemes": [asdict(row) for row in hash_rows],
        }
        write_json(json_path, document)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark ``cogfabric export``: plain, ``--verifiable`` and ``--no-verify``, to a file.

What it measures (timed with ``time.perf_counter``, repeated ``--repeat`` times in
interleaved rounds, each run writing into a fresh temporary directory; the table shows
the median, the JSON every run):

* The journal: ``cogfabric simulate``'s workload (``run_simulation``: researchers'
  private values, cognitive states, checkpoints, LLM records, sessions, review
  requests and replies, findings broadcast), run until it has written ``--events``
  records, whose first ``--events`` are then appended, as they are, to a fresh journal
  (``Journal.append``, 1000 a call): a fixed number of records of a real mix, built
  once before the first run. Its type mix is in the JSON (``journal.types``).
* ``cogfabric export JOURNAL -o FILE``, with ``--verifiable`` and with ``--no-verify``:
  the command itself, run in this process (``cogfabric.cli.main`` with the same
  arguments, so its whole path: the read-only open and its page walk in a child
  process, the chain's verification unless ``--no-verify``, every line encoded and
  written to the file's ``.partial``, the rename), not a subprocess: the figures leave
  out only the interpreter's start and imports, which a subprocess would add to every
  run (about a third of a second here). Each run checks that its file holds one line a
  record.
* References in the same rounds: reading every record with its typed event
  (``journal.read()``, after the same read-only open), and ``journal.verify()`` (what
  a plain export does before its first line). Each export's ratio is its rate over the
  read's (below 1: slower), paired by round: the median of the rounds' own ratios, not
  a ratio of the medians, so a slow spell of the shared machine that spans a round
  cancels out (files written before 2026-12-06's review, such as ``docs/audit-*.json``,
  hold the ratio of the medians).

Beside each time, the JSON has the process's CPU time a run (``cpu_seconds``: the page
walk's child is not in it) and the bytes it wrote (``output_bytes``). Before each run
``os.sync()`` writes out what the runs before it left unwritten (the previous run's
directory is removed by then), so no run pays for another's writes.

``--only tail`` measures the tail check instead (``journal.verify(after=N, decode=True)``,
what ``Runtime.open(verify="tail")`` runs), which reads every stream's head whatever the
tail holds, so its cost grows with the number of streams:

* The journals, built once before the first run, one for each of ``--tail-streams``
  (1,000, 10,000 and 100,000) and one of 10 streams: each holds ``--tail-records``
  records (200,000) of small ``PrivateSet`` events, the first ``--tail-records`` minus
  ``--tail-length`` of them spread over its streams in turn (a stream of 1,000 holds
  some 200 records, so anchors; one of 100,000, two), the last ``--tail-length`` (1,000)
  over the same 10 streams in every journal: the same tail, after the same number of
  records.
* For each journal, ``verify(after=N)`` of that tail alone and, in the same rounds, its
  full ``verify()`` (both with ``decode=True``, as the runtime's), each after a
  read-only open that is not timed (its page walk reads the file into the page cache).
  A tail check's ratio is against the tail check of the 10-stream journal (below 1:
  slower than it), and its note gives its share of the full check's time on the same
  journal; both are medians of the rounds' own ratios, as the exports'.

Run it from the repository root::

    .venv/bin/python bench/audit.py                  # 200,000 records
    .venv/bin/python bench/audit.py --quick          # 2,000 records, one run: a smoke test
    .venv/bin/python bench/audit.py --repeat 5 --json results.json
    .venv/bin/python bench/audit.py --only tail --repeat 3 --json tail.json

To compare two trees, run this script with each tree's ``src`` first on
``PYTHONPATH``: the JSON names the ``cogfabric`` it imported (``cogfabric_source`` and
its commit, ``cogfabric_commit``) beside the script's own commit (``commit``).
Figures are noisy on shared machines; ratios measured in one run hold better than rates.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import gc
import io
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from _common import directory, json_file, note_imported_cogfabric, positive, subset_of, write_json
from _workloads import Row, RowSpec, Sample, Timed, Workload, environment, format_table, run_workloads

from cogfabric._audit import open_for_audit
from cogfabric._simulation import run_simulation
from cogfabric.events import PrivateSet
from cogfabric.store import Journal

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

COPY_BATCH: Final = 1000
EVENTS_A_TURN: Final = 60
"""A first guess at the records a researcher's turn adds (about 70 with 200 agents): the
simulation runs again, for what is still missing, if it was too low."""
READ: Final = "read every record (typed decode)"
GROUPS: Final = ("export", "tail")
FEW_STREAMS: Final = 10
"""The streams of the tail check's reference journal, and those its tail's records are on in every journal."""


@dataclass(frozen=True)
class Settings:
    """What to run: the journal's size, repeats, where the temporary directories go."""

    events: int
    agents: int
    seed: int
    repeat: int
    tmp_parent: str | None
    only: tuple[str, ...] = ("export",)
    tail_streams: tuple[int, ...] = (1_000, 10_000, 100_000)
    tail_records: int = 200_000
    tail_length: int = 1_000


def parse_args(argv: Sequence[str] | None = None) -> tuple[Settings, Path | None]:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    add = p.add_argument
    add("--events", type=positive, default=None, help="records in the journal (200,000)")
    add("--agents", type=positive, default=None, help="the simulation's agents, at least 2 (200)")
    add("--seed", type=int, default=0, help="the simulation's scripted model's seed")
    add("--repeat", type=positive, default=None, help="runs per measurement; median shown (3)")
    add("--quick", action="store_true", help="2,000 records, 10 agents and one run: a smoke test")
    add("--dir", type=directory, default=None, help="parent of the temporary directories")
    add("--json", type=json_file, default=None, metavar="FILE", help="also write the results here")
    add(
        "--only",
        type=subset_of(GROUPS),
        default=("export",),
        help=f"comma-separated subset of {','.join(GROUPS)} (export)",
    )
    add(
        "--tail-streams",
        type=_sizes,
        default=None,
        help="the tail check's journals' streams (1000,10000,100000)",
    )
    add("--tail-records", type=positive, default=None, help="records in each of them (200,000)")
    add("--tail-length", type=positive, default=None, help="records in their tail (1,000)")
    args = p.parse_args(argv)
    quick = bool(args.quick)

    def pick(value: int | None, full: int, small: int) -> int:
        return value if value is not None else (small if quick else full)

    settings = Settings(
        events=pick(args.events, 200_000, 2_000),
        agents=pick(args.agents, 200, 10),
        seed=args.seed,
        repeat=pick(args.repeat, 3, 1),
        tmp_parent=args.dir,
        only=args.only,
        tail_streams=args.tail_streams or ((20, 200) if quick else (1_000, 10_000, 100_000)),
        tail_records=pick(args.tail_records, 200_000, 2_000),
        tail_length=pick(args.tail_length, 1_000, 100),
    )
    if settings.agents < 2:  # the simulation's own minimum
        p.error("--agents must be at least 2 (a researcher and a reviewer)")
    body = settings.tail_records - settings.tail_length
    if "tail" in settings.only and body < max(*settings.tail_streams, FEW_STREAMS):
        p.error(
            f"--tail-records minus --tail-length ({body:,}) must be at least the most streams, "
            f"{max(*settings.tail_streams, FEW_STREAMS):,}: every stream has a record before the tail"
        )
    return settings, args.json


def _sizes(text: str) -> tuple[int, ...]:
    """An argparse type: comma-separated positive integers."""
    sizes = tuple(positive(part) for part in text.split(",") if part.strip())
    if not sizes:
        msg = f"name one size at least, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return sizes


# ---------------------------------------------------------------------- the journal


def build_journal(settings: Settings, where: Path) -> dict[str, Any]:
    """Write ``settings.events`` records of the simulation's mix at ``where / "journal"``.

    Returns what the JSON says of it: its records, file size and type mix, and how long
    the simulation took.
    """
    simulated = where / "simulated"
    start = time.perf_counter()
    total = 0
    turns = math.ceil(settings.events / EVENTS_A_TURN)
    while total < settings.events:
        report = run_simulation(simulated, agents=settings.agents, turns=turns, seed=settings.seed)
        total = report.total_events
        missing = settings.events - total
        turns = max(1, math.ceil(missing * report.turns / max(1, report.events)))
    simulation_seconds = time.perf_counter() - start
    types: collections.Counter[str] = collections.Counter()
    with Journal.open(simulated) as source, Journal.open(where / "journal", sync=False) as target:
        batch = []
        for record in source.read(until=settings.events):
            batch.append(record.event)
            types[type(record.event).__name__] += 1
            if len(batch) == COPY_BATCH:
                target.append(batch)
                batch = []
        if batch:
            target.append(batch)
        records = target.last_seq
    if records != settings.events:
        msg = f"the journal holds {records} records, not {settings.events}"
        raise RuntimeError(msg)
    return {
        "records": records,
        "data_bytes": (where / "journal" / "data.mdb").stat().st_size,
        "types": dict(types.most_common()),
        "simulated_records": total,
        "simulation_seconds": simulation_seconds,
    }


# ---------------------------------------------------------------------- measurements


def _clocked(fn: Callable[[], int]) -> tuple[float, float, int]:
    """Run ``fn`` after a collection and a sync: its seconds, CPU seconds and result."""
    gc.collect()
    os.sync()  # the previous run's file is written out, not by this run
    cpu = time.process_time()
    start = time.perf_counter()
    done = fn()
    return time.perf_counter() - start, time.process_time() - cpu, done


def _lines_in(path: Path) -> int:
    lines = 0
    with path.open("rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            lines += chunk.count(b"\n")
    return lines


def cli_export(journal: Path, records: int, options: Sequence[str]) -> Timed:
    """``cogfabric export JOURNAL *options -o FILE``, in this process, as the command runs."""
    from cogfabric.cli import main  # noqa: PLC0415 - the command's module, imported as its entry point does

    def run(tmp: Path) -> Sample:
        output = tmp / "export.jsonl"
        said = io.StringIO()

        def body() -> int:
            args = ["export", str(journal), *options, "-o", str(output)]
            with contextlib.redirect_stderr(said):  # --no-verify's warning, each run
                try:
                    main.main(args=args, prog_name="cogfabric", standalone_mode=False)
                except SystemExit as exc:
                    if exc.code not in (0, None):
                        msg = f"cogfabric {' '.join(args)} exited {exc.code}: {said.getvalue()}"
                        raise RuntimeError(msg) from exc
            return records

        seconds, cpu, done = _clocked(body)
        lines = _lines_in(output)
        if lines != records:
            msg = f"export {' '.join(options)} wrote {lines} lines for {records} records"
            raise RuntimeError(msg)
        return Sample(
            seconds,
            {"records": done},
            {"cpu_seconds": cpu, "output_bytes": float(output.stat().st_size)},
        )

    return run


def read_all(journal: Path) -> Timed:
    """Every record with its typed event, after the export's own read-only open."""

    def run(_tmp: Path) -> Sample:
        def body() -> int:
            count = 0
            with open_for_audit(journal) as opened:
                for record in opened.read():
                    _ = record.event
                    count += 1
            return count

        seconds, cpu, done = _clocked(body)
        return Sample(seconds, {"records": done}, {"cpu_seconds": cpu})

    return run


def verify_all(journal: Path) -> Timed:
    """``journal.verify()``, after the same open: what a plain export does before its first line."""

    def run(_tmp: Path) -> Sample:
        def body() -> int:
            with open_for_audit(journal) as opened:
                report = opened.verify()
            if not report.ok:
                msg = f"the bench's journal fails verification: {report.reason}"
                raise RuntimeError(msg)
            return int(report.checked)

        seconds, cpu, done = _clocked(body)
        return Sample(seconds, {"records": done}, {"cpu_seconds": cpu})

    return run


# ---------------------------------------------------------------------- the tail check


def build_tail_journal(settings: Settings, streams: int, where: Path) -> dict[str, Any]:
    """Write the tail check's journal of ``streams`` streams at ``where`` (see the module's docstring)."""
    start = time.perf_counter()
    body = settings.tail_records - settings.tail_length
    batch: list[PrivateSet] = []
    with Journal.open(where, sync=False) as journal:
        for i in range(settings.tail_records):
            stream = i % streams if i < body else (i - body) % FEW_STREAMS
            batch.append(PrivateSet(at=1.7e9 + i, agent=f"agent-{stream:06d}", key="k", value=i))
            if len(batch) == COPY_BATCH or i == settings.tail_records - 1:
                journal.append(batch)
                batch = []
        records = journal.last_seq
    return {
        "streams": streams,
        "records": records,
        "tail": settings.tail_length,
        "after": records - settings.tail_length,
        "data_bytes": (where / "data.mdb").stat().st_size,
        "build_seconds": time.perf_counter() - start,
    }


def verify_from(journal: Path, after: int) -> Timed:
    """``journal.verify(after=after, decode=True)`` alone, after a read-only open that is not timed."""

    def run(_tmp: Path) -> Sample:
        with Journal.open(journal, readonly=True) as opened:

            def body() -> int:
                report = opened.verify(after=after, decode=True)
                if not report.ok:
                    msg = f"the bench's journal {journal} fails verification: {report.reason}"
                    raise RuntimeError(msg)
                return int(report.checked)

            seconds, cpu, done = _clocked(body)
        return Sample(seconds, {"records": done}, {"cpu_seconds": cpu})

    return run


def _tail_label(streams: int, after: int) -> str:
    return f"verify(after={after:,}), {streams:,} streams"


def _full_label(streams: int) -> str:
    return f"verify(), {streams:,} streams"


def build_tail_workloads(journals: Sequence[tuple[Path, dict[str, Any]]]) -> list[Workload]:
    """A tail check and a full check of each journal; the tail checks' reference is the 10-stream one's."""
    workloads = []
    few = next(info for _, info in journals if info["streams"] == FEW_STREAMS)
    reference = _tail_label(FEW_STREAMS, few["after"])
    for path, info in journals:
        streams, after = info["streams"], info["after"]
        tail = _tail_label(streams, after)
        full = _full_label(streams)
        workloads.append(
            Workload(tail, "tail", verify_from(path, after), (RowSpec(tail, "records", reference=reference),))
        )
        workloads.append(Workload(full, "tail", verify_from(path, 0), (RowSpec(full, "records"),)))
    return workloads


def note_full_shares(rows: list[Row], journals: Sequence[tuple[Path, dict[str, Any]]]) -> list[Row]:
    """Note on each tail check its share of the full check's time on its journal (the rounds' median)."""
    by_label = {row.workload: row for row in rows}
    for _, info in journals:
        tail = by_label[_tail_label(info["streams"], info["after"])]
        full = by_label[_full_label(info["streams"])]
        share = statistics.median(mine / theirs for mine, theirs in zip(tail.runs, full.runs, strict=True))
        said = f"{share:.1%} of the full check's time"
        tail.note = f"{said}; {tail.note}" if tail.note else said
    return rows


def run_tail(settings: Settings, tmp: Path) -> tuple[list[Row], list[dict[str, Any]]]:
    """Build the tail check's journals, then measure them in interleaved rounds."""
    journals = []
    for streams in dict.fromkeys((FEW_STREAMS, *settings.tail_streams)):  # once each, the reference first
        path = tmp / f"tail-{streams}"
        info = build_tail_journal(settings, streams, path)
        print(
            f"  built the journal of {streams:,} streams in {info['build_seconds']:.1f} s: "
            f"{info['data_bytes'] / 1e6:.1f} MB",
            file=sys.stderr,
            flush=True,
        )
        journals.append((path, info))
    rows = run_workloads(
        build_tail_workloads(journals),
        repeat=settings.repeat,
        tmp_parent=settings.tmp_parent,
        prefix="cogfabric-audit-run-",
    )
    return note_full_shares(paired_ratios(rows), journals), [info for _, info in journals]


def build_workloads(journal: Path, records: int) -> list[Workload]:
    def one(name: str, timed: Timed, reference: str = "") -> Workload:
        return Workload(name, "audit", timed, (RowSpec(name, "records", reference=reference),))

    return [
        one(READ, read_all(journal)),
        one("journal.verify()", verify_all(journal)),
        one("export -o FILE", cli_export(journal, records, []), READ),
        one("export --verifiable -o FILE", cli_export(journal, records, ["--verifiable"]), READ),
        one("export --no-verify -o FILE", cli_export(journal, records, ["--no-verify"]), READ),
    ]


def paired_ratios(rows: list[Row]) -> list[Row]:
    """Each ratio as the median of the rounds' ratios (run ``i`` against the reference's run ``i``).

    The shared table's ratio is the median rate over the reference's median rate; the
    rounds are interleaved so that a slow spell hits every workload of a round alike,
    which only a ratio taken within each round makes use of (as ``journal_append.py``'s).
    """
    by_label = {row.workload: row for row in rows}
    for row in rows:
        reference = by_label.get(row.reference) if row.reference else None
        if reference is None:
            continue
        row.ratio = statistics.median(
            (row.count / mine) / (reference.count / theirs)
            for mine, theirs in zip(row.runs, reference.runs, strict=True)
        )
    return rows


# ---------------------------------------------------------------------- running


def main(argv: Sequence[str] | None = None) -> int:
    settings, json_path = parse_args(argv)
    env_info = environment(repeat=settings.repeat, tmp_parent=settings.tmp_parent)
    note_imported_cogfabric(env_info)
    package = Path(env_info["cogfabric_source"])
    document: dict[str, Any] = {"environment": env_info, "settings": asdict(settings)}
    rows: list[Row] = []
    journal_info: dict[str, Any] = {}
    tail_rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="cogfabric-audit-", dir=settings.tmp_parent) as tmp:
        if "export" in settings.only:
            print(
                f"audit bench: building a journal of {settings.events:,} records ({settings.agents} agents' "
                f"simulation) under {tmp}",
                file=sys.stderr,
                flush=True,
            )
            journal_info = build_journal(settings, Path(tmp))
            print(
                f"  built in {journal_info['simulation_seconds']:.1f} s: "
                f"{journal_info['data_bytes'] / 1e6:.1f} MB; median of {settings.repeat}; "
                f"cogfabric from {package}",
                file=sys.stderr,
                flush=True,
            )
            rows = paired_ratios(
                run_workloads(
                    build_workloads(Path(tmp) / "journal", settings.events),
                    repeat=settings.repeat,
                    tmp_parent=settings.tmp_parent,
                    prefix="cogfabric-audit-run-",
                )
            )
            document["journal"] = journal_info
        if "tail" in settings.only:
            print(
                f"audit bench: building the tail check's journals of {settings.tail_records:,} records under "
                f"{tmp}; median of {settings.repeat}; cogfabric from {package}",
                file=sys.stderr,
                flush=True,
            )
            tail_rows, document["tail_journals"] = run_tail(settings, Path(tmp))
    versions = (
        f"Python {env_info['python']}, lmdb {env_info['lmdb']}, msgspec {env_info['msgspec']}, "
        f"{env_info['cpus']} CPUs"
    )
    if rows:
        print()
        print(
            f"cogfabric export at {env_info['cogfabric_commit']} ({package}): {settings.events:,} records of "
            f"the simulation's mix, {journal_info['data_bytes'] / 1e6:.1f} MB; median of {settings.repeat} "
            f"({versions}); in-process, to a file"
        )
        print()
        print(format_table(rows))
    if tail_rows:
        print()
        print(
            f"the tail check at {env_info['cogfabric_commit']} ({package}): journals of "
            f"{settings.tail_records:,} records, a tail of {settings.tail_length:,} "
            f"over {FEW_STREAMS} streams; median of {settings.repeat} ({versions}); "
            "decode=True, after a read-only open"
        )
        print()
        print(format_table(tail_rows))
    if json_path is not None:
        document["results"] = [asdict(row) for row in (*rows, *tail_rows)]
        write_json(json_path, document)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

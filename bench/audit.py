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

Run it from the repository root::

    .venv/bin/python bench/audit.py                  # 200,000 records
    .venv/bin/python bench/audit.py --quick          # 2,000 records, one run: a smoke test
    .venv/bin/python bench/audit.py --repeat 5 --json results.json

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

from _common import directory, json_file, note_imported_cogfabric, positive, write_json
from _workloads import Row, RowSpec, Sample, Timed, Workload, environment, format_table, run_workloads

from cogfabric._audit import open_for_audit
from cogfabric._simulation import run_simulation
from cogfabric.store import Journal

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

COPY_BATCH: Final = 1000
EVENTS_A_TURN: Final = 60
"""A first guess at the records a researcher's turn adds (about 70 with 200 agents): the
simulation runs again, for what is still missing, if it was too low."""
READ: Final = "read every record (typed decode)"


@dataclass(frozen=True)
class Settings:
    """What to run: the journal's size, repeats, where the temporary directories go."""

    events: int
    agents: int
    seed: int
    repeat: int
    tmp_parent: str | None


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
    )
    if settings.agents < 2:  # the simulation's own minimum
        p.error("--agents must be at least 2 (a researcher and a reviewer)")
    return settings, args.json


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
    with tempfile.TemporaryDirectory(prefix="cogfabric-audit-", dir=settings.tmp_parent) as tmp:
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
    print()
    print(
        f"cogfabric export at {env_info['cogfabric_commit']} ({package}): {settings.events:,} records of "
        f"the simulation's mix, {journal_info['data_bytes'] / 1e6:.1f} MB; median of {settings.repeat} "
        f"(Python {env_info['python']}, lmdb {env_info['lmdb']}, msgspec {env_info['msgspec']}, "
        f"{env_info['cpus']} CPUs); in-process, to a file"
    )
    print()
    print(format_table(rows))
    if json_path is not None:
        document = {
            "environment": env_info,
            "settings": asdict(settings),
            "journal": journal_info,
            "results": [asdict(row) for row in rows],
        }
        write_json(json_path, document)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

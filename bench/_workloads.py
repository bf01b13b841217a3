"""The workload table the fabric and sessions benches share: samples, rows, rounds, the table.

A bench script describes ``Workload``s, each a timed measurement and the table rows it
fills; ``run_workloads`` measures them in interleaved rounds and ``make_rows`` turns the
samples into rows (medians, ratios against a reference row, targets met or missed).

Imported by sibling name (``import _workloads``), as ``_common``.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import statistics
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import lmdb
import msgspec
from _common import columns, source_revision

from cogfabric._bench import cpu_model, filesystem_of

__all__ = [
    "Row",
    "RowSpec",
    "Sample",
    "Target",
    "Timed",
    "Workload",
    "environment",
    "format_table",
    "make_rows",
    "median_extra",
    "run_workloads",
]

SPREAD_NOTE: Final = 1.5
"""A row whose slowest run took this many times its fastest says so."""


@dataclass
class Sample:
    """One run of one workload: how long it took, what it did, anything else it saw."""

    seconds: float
    counts: dict[str, int]
    extra: dict[str, float] = field(default_factory=dict)


Timed = Callable[[Path], Sample]
"""A measurement: given a fresh temporary directory, return one Sample."""


@dataclass(frozen=True)
class Target:
    """A bar: a ratio to reach, a rate to reach, or a time to stay under."""

    kind: Literal["ratio", "rate", "seconds"]
    value: float

    def describe(self) -> str:
        if self.kind == "ratio":
            return f">= {self.value:.2f}x"
        if self.kind == "rate":
            return f">= {self.value:,.0f}/s"
        return f"< {self.value:g} s"


@dataclass(frozen=True)
class RowSpec:
    """One line of the table, drawn from one workload's samples."""

    label: str
    count: str
    """Which of the samples' counts it reports; also the unit of its rate."""
    reference: str = ""
    """The label of the row its ratio is against; empty: no ratio."""
    target: Target | None = None
    note: Callable[[list[Sample]], str] | None = None
    seconds: str = ""
    """Which of the samples' extras is its time; empty: the sample's own seconds."""


@dataclass(frozen=True)
class Workload:
    """A named measurement and the rows it fills."""

    name: str
    group: str
    timed: Timed
    rows: tuple[RowSpec, ...]


@dataclass
class Row:
    """One line of the table: medians of one workload's runs."""

    workload: str
    count: int
    unit: str
    seconds: float
    rate: float
    runs: list[float] = field(default_factory=list)
    reference: str = ""
    ratio: float | None = None
    target: str = ""
    met: bool | None = None
    note: str = ""
    extras: list[dict[str, float]] = field(default_factory=list)
    """Each run's other figures (its CPU time, context switches, ...), as the runs are listed."""


def median_extra(samples: list[Sample], key: str) -> float:
    """The median of one extra figure over a workload's runs."""
    return statistics.median(s.extra[key] for s in samples)


def run_workloads(
    workloads: list[Workload], *, repeat: int, tmp_parent: str | None, prefix: str
) -> list[Row]:
    """Measure every workload ``repeat`` times, each run in a fresh temporary directory."""
    samples: dict[str, list[Sample]] = {w.name: [] for w in workloads}
    for round_no in range(repeat):
        # interleaved rounds: a slow spell of the machine hits every workload alike
        for workload in workloads:
            threads_before = threading.active_count()
            with tempfile.TemporaryDirectory(prefix=prefix, dir=tmp_parent) as tmp:
                sample = workload.timed(Path(tmp))
            samples[workload.name].append(sample)
            left = threading.active_count() - threads_before
            if left > 0:
                print(f"  note: {left} threads outlived {workload.name}", file=sys.stderr)
            rates = ", ".join(f"{c / sample.seconds:,.0f} {k}/s" for k, c in sample.counts.items())
            extras = "".join(f", {k} {v:.3f}" for k, v in sample.extra.items() if k.endswith("_seconds"))
            print(
                f"  run {round_no + 1}/{repeat} {workload.name}: {sample.seconds:.3f} s, {rates}{extras}",
                file=sys.stderr,
                flush=True,
            )
    return make_rows(workloads, samples)


def _seconds(sample: Sample, spec: RowSpec) -> float:
    return sample.extra[spec.seconds] if spec.seconds else sample.seconds


def make_rows(workloads: list[Workload], samples: dict[str, list[Sample]]) -> list[Row]:
    """One row per row spec: the medians of its runs, its ratio and whether it met its target."""
    rows: dict[str, Row] = {}
    specs: dict[str, RowSpec] = {}
    for workload in workloads:
        runs = samples[workload.name]
        for spec in workload.rows:
            times = [_seconds(s, spec) for s in runs]
            seconds = statistics.median(times)
            counts = {s.counts[spec.count] for s in runs}
            count = runs[0].counts[spec.count]
            note = spec.note(runs) if spec.note is not None else ""
            if len(counts) > 1:
                note = (note + "; " if note else "") + f"counts varied: {sorted(counts)}"
            if max(times) > SPREAD_NOTE * min(times):
                note = (note + "; " if note else "") + f"runs spread {min(times):.2f}-{max(times):.2f} s"
            rows[spec.label] = Row(
                workload=spec.label,
                count=count,
                unit=spec.count,
                seconds=seconds,
                rate=count / seconds,
                runs=times,
                reference=spec.reference,
                note=note,
                extras=[dict(s.extra) for s in runs],
            )
            specs[spec.label] = spec
    for label, row in rows.items():
        spec = specs[label]
        if row.reference and row.reference in rows:
            row.ratio = row.rate / rows[row.reference].rate
        if spec.target is not None:
            row.target = spec.target.describe()
            row.met = _met(spec.target, row)
    return list(rows.values())


def _met(target: Target, row: Row) -> bool | None:
    if target.kind == "ratio":
        return None if row.ratio is None else row.ratio >= target.value
    if target.kind == "rate":
        return row.rate >= target.value
    return row.seconds < target.value


def format_table(rows: list[Row]) -> str:
    """The rows as aligned text; the target column only when a row has a target."""
    with_targets = any(row.target for row in rows)
    headers = ["workload", "count", "seconds", "rate", "reference", "ratio"]
    if with_targets:
        headers.append("target")
    headers.append("note")
    lines = []
    for row in rows:
        cells = [
            row.workload,
            f"{row.count:,}",
            f"{row.seconds:.3f}",
            f"{row.rate:,.0f} {row.unit}/s",
            row.reference,
            "" if row.ratio is None else f"{row.ratio:.2f}x",
        ]
        if with_targets:
            cells.append(f"{row.target} " + ("met" if row.met else "MISSED") if row.target else "")
        cells.append(row.note)
        lines.append(cells)
    return columns(headers, lines, right={1, 2, 3, 5})


def environment(*, repeat: int, tmp_parent: str | None) -> dict[str, Any]:
    """The machine, the versions and the commit a run's figures come from."""
    return {
        "commit": source_revision(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "lmdb": lmdb.__version__,
        "lmdb_engine": ".".join(map(str, lmdb.version())),
        "msgspec": msgspec.__version__,
        "pykka": importlib.metadata.version("pykka"),
        "tmp_parent": tmp_parent or tempfile.gettempdir(),
        "tmp_filesystem": filesystem_of(tmp_parent or tempfile.gettempdir()) or "?",
        "cpu_model": cpu_model(),
        "repeat": repeat,
    }

"""Chart benchmark results: a PNG bar chart of events/s (or ops/s) per workload.

Reads the ``--json`` output of ``cogfabric bench`` and of bench/peers.py,
bench/journal_append.py, bench/fabric.py, bench/sessions.py and bench/audit.py (any
number of files, in any order; each is recognised by its rows), and draws one
horizontal bar per workload on a log scale, coloured by system: cogfabric, its raw-LMDB
references, and each peer. Skipped workloads are left out.

Run it from the repository root::

    .venv/bin/python bench/peers.py --json peers.json
    .venv/bin/python bench/plot.py peers.json -o chart.png
    .venv/bin/python bench/plot.py peers.json journal.json fabric.json -o chart.png --title "..."
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from cogfabric._bench import unwritable

if TYPE_CHECKING:
    from collections.abc import Sequence

COLOURS: Final = {
    "cogfabric": "#1f77b4",
    "raw LMDB": "#9ecae1",
    "eventsourcing": "#ff7f0e",
    "langgraph": "#2ca02c",
    "Pykka": "#bcbddc",
}
OTHER_COLOUR: Final = "#7f7f7f"


@dataclass(frozen=True)
class Bar:
    """One bar: a workload's label, its system and its median rate."""

    label: str
    system: str
    rate: float
    unit: str


def _system(row: dict[str, Any]) -> str:
    if row.get("system"):
        return str(row["system"])
    name = str(row.get("workload", "")).lower()
    if name.startswith("bare pykka"):
        return "Pykka"
    return "raw LMDB" if name.startswith("raw") else "cogfabric"


def _source(document: dict[str, Any], path: Path) -> str:
    if document.get("benchmark"):
        return str(document["benchmark"])
    if "hash_schemes" in document:
        return "journal_append"
    if "settings" in document:
        return "fabric"
    if "repeat" in document and "machine" in document:
        return "bench"
    return path.stem


_TITLE_LINES: Final = 4


def _setting(document: dict[str, Any], name: str) -> object:
    """A run's setting ``name`` wherever its script keeps it (top level, or a settings section)."""
    for section in (document, *(document.get(k) for k in ("settings", "config", "environment", "machine"))):
        if isinstance(section, dict) and section.get(name) is not None:
            return section[name]
    return None


def _run_label(document: dict[str, Any], path: Path) -> str:
    """What produced one results file, for the default title: the command, its runs, its commit.

    Only ``cogfabric bench`` records ``--quick`` in its file; the scripts' quick runs
    show as their smaller counts in the row labels only.
    """
    source = _source(document, path)
    repeat = _setting(document, "repeat") or "?"
    commit = _setting(document, "git_commit") or _setting(document, "commit") or "?"
    quick = " --quick" if _setting(document, "quick") else ""
    if source == "bench":
        return f"cogfabric bench{quick} --repeat {repeat} at {commit}"
    if source == "peers":
        return (
            f"cogfabric vs peers{quick}: median of {repeat} at {commit}, durable on disk (fsync per commit)"
        )
    return f"bench/{source}.py{quick}: median of {repeat} at {commit}"


def load_bars(paths: Sequence[Path]) -> list[Bar]:
    bars = []
    for path in paths:
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            msg = f"cannot read {path}: {exc}"
            raise SystemExit(msg) from exc
        rows = document.get("results") if isinstance(document, dict) else None
        if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
            msg = f"{path} is no results file of the bench scripts (a JSON object with a list of results)"
            raise SystemExit(msg)
        source = _source(document, path)
        prefix = "" if source == "peers" or len(paths) == 1 else f"[{source}] "
        for row in rows:
            rate = float(row.get("rate") or 0.0)
            if row.get("skipped") or rate <= 0:
                continue
            unit = str(row.get("unit") or "events")
            bars.append(Bar(prefix + str(row["workload"]), _system(row), rate, unit))
    return bars


def draw(bars: Sequence[Bar], output: Path, title: str) -> None:
    try:
        import matplotlib as mpl  # noqa: PLC0415 - arguments are checked without it

        mpl.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
        from matplotlib.patches import Patch  # noqa: PLC0415
    except ImportError as exc:
        msg = f"plotting needs matplotlib, which the bench extra installs: pip install -e '.[bench]' ({exc})"
        raise SystemExit(msg) from exc
    height = max(3.0, 0.38 * len(bars) + 1.6)
    fig, ax = plt.subplots(figsize=(12, height))
    positions = range(len(bars))
    colours = [COLOURS.get(bar.system, OTHER_COLOUR) for bar in bars]
    ax.barh(list(positions), [bar.rate for bar in bars], color=colours)
    ax.set_yticks(list(positions))
    ax.set_yticklabels([bar.label for bar in bars], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("events/s (or ops/s, per the unit shown), log scale")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", which="both", alpha=0.3)
    for position, bar in zip(positions, bars, strict=True):
        ax.text(bar.rate * 1.05, position, f"{bar.rate:,.0f} {bar.unit}/s", va="center", fontsize=7)
    low = min(bar.rate for bar in bars)
    high = max(bar.rate for bar in bars)
    ax.set_xlim(low / 2, high * 8)
    systems = list(dict.fromkeys(bar.system for bar in bars))
    handles = [Patch(color=COLOURS.get(s, OTHER_COLOUR), label=s) for s in systems]
    ax.legend(handles=handles, loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(output, dpi=120)
    plt.close(fig)


def _png_file(text: str) -> Path:
    """An argparse type: the chart's path, ``.png`` added when it has no suffix, and writable."""
    path = Path(text)
    if path.name and not path.suffix and not path.is_dir():
        path = path.with_suffix(".png")  # matplotlib would add it, and the message name another file
    problem = unwritable(path)
    if problem is not None:
        msg = f"{path} {problem}; name a file you can write"
        raise argparse.ArgumentTypeError(msg)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n", 1)[0],
        epilog="Needs matplotlib, which the bench extra installs: pip install -e '.[bench]'.",
    )
    parser.add_argument(
        "results",
        type=Path,
        nargs="+",
        help=(
            "JSON files written with --json by cogfabric bench, journal_append.py, fabric.py, "
            "sessions.py, audit.py or peers.py (lmdb_gil.py's holds no rate to chart)"
        ),
    )
    parser.add_argument(
        "-o", "--output", type=_png_file, default=Path("chart.png"), help="PNG to write (.png added if none)"
    )
    parser.add_argument("--title", default=None, help="chart title")
    args = parser.parse_args(argv)
    bars = load_bars(args.results)
    if not bars:
        parser.error("no measured rows in the given files (lmdb_gil.py's hold none)")
    title = args.title
    if title is None:
        labels = [_run_label(json.loads(path.read_text(encoding="utf-8")), path) for path in args.results]
        if len(labels) > _TITLE_LINES:
            labels[_TITLE_LINES - 1 :] = [f"and {len(labels) - _TITLE_LINES + 1} more files"]
        title = "\n".join(labels)  # a line for each file
    try:
        draw(bars, args.output, title)
    except OSError as exc:
        parser.exit(2, f"{parser.prog}: error: cannot write {args.output}: {exc.strerror or exc}\n")
    print(f"wrote {args.output} ({len(bars)} bars)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

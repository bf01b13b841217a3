"""Chart benchmark results: a PNG bar chart of events/s (or ops/s) per workload.

Reads the ``--json`` output of bench/peers.py, and optionally that of
bench/journal_append.py, bench/fabric.py and ``cogfabric bench`` (any number of files, in
any order; each is recognised by its rows), and draws one horizontal bar per workload on a log scale,
coloured by system: cogfabric, its raw-LMDB references, and each peer. Skipped
workloads are left out.

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


def load_bars(paths: Sequence[Path]) -> list[Bar]:
    bars = []
    for path in paths:
        try:
            document = json.loads(path.read_text())
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("results", type=Path, nargs="+", help="JSON files written with --json")
    parser.add_argument(
        "-o", "--output", type=_png_file, default=Path("chart.png"), help="PNG to write (.png added if none)"
    )
    parser.add_argument("--title", default=None, help="chart title")
    args = parser.parse_args(argv)
    bars = load_bars(args.results)
    if not bars:
        parser.error("no measured rows in the given files")
    title = args.title
    if title is None:
        first = json.loads(args.results[0].read_text())
        if _source(first, args.results[0]) == "bench":  # cogfabric bench --json
            commit = first.get("machine", {}).get("git_commit") or "?"
            repeat = first.get("repeat", "?")
            title = f"cogfabric bench --repeat {repeat} at {commit}: rate per workload, log scale"
        else:
            repeat = first.get("environment", {}).get("repeat", "?")
            title = f"cogfabric vs peers: median of {repeat}, durable on disk (fsync per commit)"
    draw(bars, args.output, title)
    print(f"wrote {args.output} ({len(bars)} bars)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

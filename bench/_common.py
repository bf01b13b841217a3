"""Helpers the bench scripts share: a plain-text table and the source revision.

Imported by sibling name (``import _common``): the scripts run as ``python bench/x.py``,
which puts this folder on ``sys.path``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["columns", "source_revision"]


def columns(headers: Sequence[str], lines: Sequence[Sequence[str]], right: set[int]) -> str:
    """Left- or right-aligned columns under a rule, for the printed result tables."""
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(headers)]

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(cells)
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(headers), rule, *(fmt(line) for line in lines)])


def source_revision() -> str:
    """The repository's commit, with ``+dirty`` when the runtime's sources differ from it."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "actors", "events", "store", "src"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")

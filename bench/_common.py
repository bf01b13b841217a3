"""Helpers the bench scripts share: argument types, a plain-text table, JSON output, the revision.

Imported by sibling name (``import _common``): the scripts run as ``python bench/x.py``,
which puts this folder on ``sys.path``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cogfabric
from cogfabric._bench import unwritable

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = [
    "columns",
    "directory",
    "json_file",
    "positive",
    "source_revision",
    "subset_of",
    "write_json",
]


MAX_SECONDS = 1_000_000.0
"""The longest wait the scripts take (11 days): the clocks' arithmetic overflows past far larger ones."""


def positive_seconds(text: str) -> float:
    """An argparse type: a positive number of seconds, at most ``MAX_SECONDS``."""
    value = float(text)
    if not 0 < value <= MAX_SECONDS:  # refuses nan and inf too
        msg = f"must be a positive number of seconds up to {MAX_SECONDS:,.0f}, got {text}"
        raise argparse.ArgumentTypeError(msg)
    return value


def positive(text: str) -> int:
    """An argparse type: a positive integer."""
    value = int(text)
    if value < 1:
        msg = f"must be positive, got {value}"
        raise argparse.ArgumentTypeError(msg)
    return value


def subset_of(choices: Sequence[str]) -> Callable[[str], tuple[str, ...]]:
    """An argparse type: a comma-separated, non-empty subset of ``choices``."""

    def parse(text: str) -> tuple[str, ...]:
        names = tuple(n.strip() for n in text.split(",") if n.strip())
        if not names or any(n not in choices for n in names):
            msg = f"choose from {', '.join(choices)}; got {text!r}"
            raise argparse.ArgumentTypeError(msg)
        return names

    return parse


def json_file(text: str) -> Path:
    """An argparse type: a ``--json`` path that can be written, refused before minutes of measuring."""
    path = Path(text)
    problem = unwritable(path)
    if problem is not None:
        msg = f"{text} {problem}; name a file you can write"
        raise argparse.ArgumentTypeError(msg)
    return path


def directory(text: str) -> str:
    """An argparse type: an existing directory that can be written (``--dir``)."""
    path = Path(text)
    if not path.is_dir():
        msg = f"{text} is no directory" if path.exists() else f"{text} does not exist"
        raise argparse.ArgumentTypeError(msg)
    if not os.access(path, os.W_OK | os.X_OK):
        msg = f"{text} cannot be written"
        raise argparse.ArgumentTypeError(msg)
    return text


def warn_if_tmpfs(env_info: dict[str, Any]) -> None:
    """Warn on stderr when the run's temporary journals are on tmpfs, where an fsync costs nothing."""
    if env_info.get("tmp_filesystem") == "tmpfs":
        print(
            f"warning: {env_info.get('tmp_parent')} is on tmpfs: an fsync costs nothing there, so the "
            "synced workloads measure no disk (--dir names a directory on one)",
            file=sys.stderr,
            flush=True,
        )


def write_json(path: Path, document: dict[str, Any]) -> None:
    """Write the results document and say where; exit 2 with a message if it cannot be written.

    Called after the tables are printed, so a full disk loses no figure.
    """
    try:
        path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        print(f"error: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
        sys.exit(2)  # as the scripts' other refusals of their output
    print(f"\nwrote {path}")


def columns(headers: Sequence[str], lines: Sequence[Sequence[str]], right: set[int]) -> str:
    """Left- or right-aligned columns under a rule, for the printed result tables."""
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(headers)]

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(cells)
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(headers), rule, *(fmt(line) for line in lines)])


def note_imported_cogfabric(env_info: dict[str, Any]) -> None:
    """Name in ``env_info`` the ``cogfabric`` this run imported and its commit.

    A script run with another tree's ``PYTHONPATH`` (an A/B of two commits) measures
    that tree's code, while ``commit`` is the script's own tree's: ``cogfabric_source``
    and ``cogfabric_commit`` say which code ran.
    """
    package = Path(cogfabric.__file__).resolve().parent
    env_info["cogfabric_source"] = str(package)
    env_info["cogfabric_commit"] = source_revision(package.parent.parent)


def source_revision(root: Path | None = None) -> str:
    """The repository's commit, with ``+dirty`` when the runtime's sources differ from it.

    ``root``: another tree's (the one a run imported ``cogfabric`` from); by default this one's.
    ``"unknown"`` when git tracks no ``src`` there: a tree unpacked (``git archive``) or
    installed inside another repository's working tree is none of that repository's commits.
    """
    root = root if root is not None else Path(__file__).resolve().parent.parent
    try:
        tracked = subprocess.run(
            ["git", "ls-files", "--", "src"],
            cwd=root,
            capture_output=True,
            text=True,
            encoding="utf-8",
            check=True,
        ).stdout.strip()
        if not tracked:
            return "unknown"
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            encoding="utf-8",
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "actors", "events", "store", "src"],
            cwd=root,
            capture_output=True,
            text=True,
            encoding="utf-8",
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")

"""The ``cogfabric`` command line.

Today it audits journals (``verify``); the simulation and the other audit commands
come with later work and are not here yet.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

import cogfabric

__all__ = ["main"]

EXIT_OK = 0
EXIT_PROBLEM = 1
EXIT_USAGE = 2


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(cogfabric.__version__, prog_name="cogfabric")
def main() -> None:
    """cogfabric: an event-sourced actor runtime for the context of LLM agents."""


@main.command()
@click.argument("journal", type=click.Path(path_type=Path))
@click.option("--key", default=None, help="The chain key the journal was written with.")
def verify(journal: Path, key: str | None) -> None:
    r"""Check JOURNAL's hash chain, indexes and snapshots, and that every record decodes.

    Opens the journal read-only and never changes its data file. Exits 0 when it is
    clean, 1 naming the first bad seq and why, 2 when JOURNAL is not a journal.

    \b
    Example:
        cogfabric verify ./cogfabric-journal
    """
    from cogfabric.store import Journal, JournalError  # noqa: PLC0415 - keep `--help` free of lmdb

    try:
        with Journal.open(journal, readonly=True, key=key) as opened:
            report = opened.verify(decode=True)
    except JournalError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    if report.ok:
        click.echo(f"ok: {report.checked} records verified, head at seq {report.head_seq}")
        sys.exit(EXIT_OK)
    where = f"seq {report.first_bad_seq}" if report.first_bad_seq is not None else "the journal"
    click.echo(f"FAILED at {where}: {report.reason} ({report.checked} records checked before it)")
    sys.exit(EXIT_PROBLEM)

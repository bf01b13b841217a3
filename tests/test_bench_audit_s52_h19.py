"""bench/audit.py: ratios paired by round, and the commit of the tree it imported (helper h19, session 52).

The audit bench's ratio was the shared table's: its median rate over the read's median
rate, though its rounds are interleaved for ratios taken within a round (as
``journal_append.py``'s are). And ``source_revision(root)`` named the commit of any
repository around ``root``: a ``git archive`` of an older commit unpacked in a clone's
ignored ``build/`` was labelled with the clone's HEAD, clean.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

from tests.test_bench_scripts import _bench_module

if TYPE_CHECKING:
    from pathlib import Path


def test_an_exports_ratio_is_the_median_of_its_rounds_ratios_not_a_ratio_of_medians() -> None:
    audit = _bench_module("audit")
    workloads = _bench_module("_workloads")
    read = workloads.Row("read", 100, "records", 2.0, 50.0, runs=[1.0, 2.0, 3.0])
    export = workloads.Row("export", 100, "records", 2.0, 50.0, runs=[2.0, 2.0, 9.0], reference="read")

    (_, paired) = audit.paired_ratios([read, export])

    # the rounds' ratios: 1/2, 2/2 and 3/9; the medians' ratio would be 2/2
    assert paired.ratio == 0.5
    assert read.ratio is None


def _git(where: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=where,
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=True,
        timeout=30,
    )
    return done.stdout.strip()


def test_a_tree_unpacked_inside_another_repository_has_no_commit_of_that_repository(tmp_path: Path) -> None:
    revision = _bench_module("_common").source_revision
    repo = tmp_path / "repo"
    (repo / "src" / "cogfabric").mkdir(parents=True)
    (repo / "src" / "cogfabric" / "__init__.py").write_text("", encoding="utf-8")
    (repo / ".gitignore").write_text("build/\n", encoding="utf-8")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "one")
    unpacked = repo / "build" / "old"
    (unpacked / "src" / "cogfabric").mkdir(parents=True)
    (unpacked / "src" / "cogfabric" / "__init__.py").write_text("# an older tree\n", encoding="utf-8")

    assert revision(repo) == _git(repo, "rev-parse", "--short", "HEAD")
    assert revision(unpacked) == "unknown"

"""``cogfabric bench`` as a newcomer meets it (session 47, helper h6's walkthrough).

Every commit in the bench is synced, so its synced workloads measure the disk that holds
the journals: on tmpfs an fsync costs nothing (``Journal.append``, batch 1 ran 29 times
faster on /dev/shm than on ext4 in one quick run). The journals' directory is chosen with
``--dir`` (as the ``bench/`` scripts' is), named with its filesystem in the table and the
JSON, and tmpfs is warned of. No timing is asserted.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import cogfabric._bench
from cogfabric._bench import Result, Sizes, _machine, filesystem_of, run_bench
from cogfabric.cli import main

_README = Path(__file__).resolve().parent.parent / "README.md"
WRITE = "raw LMDB append, pre-encoded, 1000/txn"
SHM = Path("/dev/shm")  # noqa: S108 - only its filesystem is read


class _StopError(Exception):
    """Ends a run after its first workload."""


def _mount_type(path: Path) -> str | None:
    """What /proc/mounts says of ``path``'s filesystem: the longest mount point above it."""
    real, best, kind = str(path.resolve()), "", None
    for line in Path("/proc/mounts").read_text(encoding="utf-8", errors="surrogateescape").splitlines():
        device_point_type = line.split()[:3]
        point = device_point_type[1].replace("\\040", " ")
        if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, kind = point, device_point_type[2]
    return kind


def test_the_journals_go_under_the_directory_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    used: list[Path] = []

    def records_where(tmp: Path, values: list[bytes], per_txn: int) -> float:  # noqa: ARG001
        used.append(tmp)
        raise _StopError

    monkeypatch.setattr(cogfabric._bench, "_raw_append", records_where)
    with pytest.raises(_StopError):
        run_bench(Sizes.quick(), 1, tmp_parent=tmp_path)

    assert len(used) == 1
    assert used[0].resolve().is_relative_to(tmp_path.resolve())
    assert list(tmp_path.iterdir()) == []  # its temporary directory is removed all the same


@pytest.mark.skipif(not Path("/proc/mounts").is_file(), reason="needs /proc/mounts")
def test_the_machine_names_where_the_journals_were_and_on_whichfilesystem_of(tmp_path: Path) -> None:
    machine = _machine(tmp_path)

    assert machine["tmp_parent"] == str(tmp_path.resolve())
    assert machine["tmp_filesystem"] == _mount_type(tmp_path) is not None
    assert filesystem_of(tmp_path) == machine["tmp_filesystem"]
    assert "cpu_model" in machine


@pytest.mark.skipif(
    not Path("/proc/mounts").is_file() or _mount_type(SHM) != "tmpfs",
    reason="needs a tmpfs /dev/shm",
)
def test_a_tmpfs_is_named_tmpfs() -> None:
    assert filesystem_of(SHM) == "tmpfs"


def _fake_run(machine: dict[str, Any], asked: list[dict[str, Any]]) -> Any:
    def measures(sizes: Sizes, repeat: int, **options: Any) -> tuple[list[Result], dict[str, Any]]:
        asked.append({"sizes": sizes, "repeat": repeat, **options})
        reference = Result(WRITE, 100, "events", [1.0])
        return [reference, Result("journal", 50, "events", [1.0], reference=WRITE)], machine

    return measures


def test_dir_reaches_the_run_and_the_table_names_it_and_itsfilesystem_of(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[dict[str, Any]] = []
    machine = {
        "cores": 2,
        "python": "3.11",
        "git_commit": "abc1234",
        "tmp_parent": "/d",
        "tmp_filesystem": "ext4",
    }
    monkeypatch.setattr(cogfabric._bench, "run_bench", _fake_run(machine, asked))

    result = CliRunner().invoke(main, ["bench", "--quick", "--dir", str(tmp_path)])

    assert result.exit_code == 0, result.output
    assert [a["tmp_parent"] for a in asked] == [tmp_path]
    assert "journals under /d, on ext4" in result.output
    assert "warning" not in result.output
    # which way up the ratio is, beside the reference each row names
    assert "ratio: the workload's rate over its reference's" in result.output


def test_journals_on_tmpfs_are_warned_of(monkeypatch: pytest.MonkeyPatch) -> None:
    machine = {
        "cores": 2,
        "python": "3.11",
        "git_commit": None,
        "tmp_parent": "/mnt/ram",
        "tmp_filesystem": "tmpfs",
    }
    monkeypatch.setattr(cogfabric._bench, "run_bench", _fake_run(machine, []))

    output = CliRunner().invoke(main, ["bench", "--quick"]).output

    assert "warning: tmpfs holds the journals" in output


def test_a_dir_that_does_not_exist_is_refused_before_measuring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[dict[str, Any]] = []
    monkeypatch.setattr(cogfabric._bench, "run_bench", _fake_run({}, asked))

    result = CliRunner().invoke(main, ["bench", "--quick", "--dir", str(tmp_path / "missing")])

    assert result.exit_code == 2
    assert "does not exist" in result.output
    assert asked == []


def _readme_bench_commands() -> list[list[str]]:
    performance = _README.read_text(encoding="utf-8").split("## Performance", 1)[1].split("\n## ", 1)[0]
    return [shlex.split(c)[2:] for c in re.findall(r"`(cogfabric bench[^`]*)`", performance)]


def test_readme_tells_a_benchmarker_to_keep_the_journals_off_tmpfs_and_which_way_a_ratio_is() -> None:
    performance = _README.read_text(encoding="utf-8").split("## Performance", 1)[1].split("\n## ", 1)[0]

    assert "--dir" in performance
    assert "tmpfs" in performance
    assert "rate over its reference's" in performance


def test_readmes_bench_commands_are_accepted_and_one_writes_the_benchmarkers_own_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commands = _readme_bench_commands()
    asked: list[dict[str, Any]] = []
    machine = {"cores": 2, "python": "3.11", "git_commit": None}
    monkeypatch.setattr(cogfabric._bench, "run_bench", _fake_run(machine, asked))
    runner = CliRunner()

    assert len(commands) >= 3  # the smoke test, one's own set, the docs/ set
    monkeypatch.chdir(tmp_path)  # the docs/ the commands name is this one, not the project's
    (tmp_path / "docs").mkdir()
    for args in commands:
        result = runner.invoke(main, ["bench", *args])
        assert result.exit_code == 0, (args, result.output)
        if "--json" in args:
            written = json.loads((tmp_path / args[args.index("--json") + 1]).read_text(encoding="utf-8"))
            assert written["machine"] == machine
    assert len(asked) == len(commands)
    # copied as it stands, a command of README's for one's own machine overwrites no file in docs/
    own = [a[a.index("--json") + 1] for a in commands if "--json" in a]
    assert [path for path in own if not path.startswith("docs/")] != []


@pytest.mark.skipif(filesystem_of(SHM) != "tmpfs", reason="needs /dev/shm on tmpfs")
@pytest.mark.parametrize(
    ("script", "options"),
    [
        ("journal_append.py", "--events 500 --single-events 5 --hash-records 500 --repeat 1"),
        (
            "sessions.py",
            "--sync-ops 5 --batch-ops 20 --memory-ops 20 --prompt-ops 5 --sessions 20 --repeat 1",
        ),
    ],
)
def test_a_bench_script_on_tmpfs_records_it_and_warns(tmp_path: Path, script: str, options: str) -> None:
    # the scripts' JSON named the directory but not its filesystem, and nothing warned
    bench = Path(__file__).resolve().parent.parent / "bench"
    out = tmp_path / "out.json"
    with tempfile.TemporaryDirectory(dir=SHM) as shm:
        done = subprocess.run(
            [sys.executable, str(bench / script), *options.split(), "--dir", shm, "--json", str(out)],
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=300,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "is on tmpfs: an fsync costs nothing there" in done.stderr
    environment = json.loads(out.read_text(encoding="utf-8"))["environment"]
    assert environment["tmp_filesystem"] == "tmpfs"
    assert "cpu_model" in environment

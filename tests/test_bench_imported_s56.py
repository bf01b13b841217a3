"""bench/fabric.py names the cogfabric it imported, not only its own tree's commit.

An A/B of two commits runs one tree's bench scripts with the other tree's
``PYTHONPATH``: ``commit`` then named the script's tree for both sides (helper h10).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tests.test_bench_scripts import BENCH

if TYPE_CHECKING:
    import pytest


def test_fabric_names_the_cogfabric_it_imported_beside_its_own_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other"  # another tree: its package is this one's, copied (no git there)
    (other / "src").mkdir(parents=True)
    package = Path(__file__).resolve().parent.parent / "src" / "cogfabric"
    subprocess.run(["cp", "-rL", str(package), str(other / "src")], check=True)
    out = tmp_path / "out.json"
    monkeypatch.setenv("PYTHONPATH", str(other / "src"))
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "fabric.py"),
            *["--only", "ring-batch", "--ring-batch-agents", "4", "--ring-batch-hops", "20", "--repeat", "1"],
            "--dir",
            str(tmp_path),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    environment = json.loads(out.read_text(encoding="utf-8"))["environment"]
    assert environment["cogfabric_source"] == str((other / "src" / "cogfabric").resolve())
    assert environment["cogfabric_commit"] == "unknown"  # not a git tree: not the script's commit
    assert environment["commit"] != "unknown"
    assert "cogfabric fabric at unknown:" in done.stdout

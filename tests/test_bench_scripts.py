"""The scripts in bench/ run end to end (tiny counts, no timing asserted), so an API
change cannot leave the published benchmarks broken."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"

TINY = {
    "journal_append.py": "--events 2000 --single-events 10 --hash-records 2000 --repeat 2 --ablate",
    "fabric.py": (
        "--ring-batch-agents 4 --ring-batch-hops 10 --ring-sync-agents 4 --ring-sync-hops 5"
        " --handle-ops 200 --handle-sync-ops 20 --spawn-agents 20"
        " --recovery-agents 4 --recovery-events 2000 --repeat 1 --timeout 120"
    ),
    "sessions.py": (
        "--sync-ops 20 --batch-ops 200 --memory-ops 200 --prompt-ops 50 --sessions 200"
        " --repeat 1 --timeout 120"
    ),
    "peers.py": "--events 500 --single-events 10 --read-checkpoints 50 --repeat 1",
}


@pytest.mark.parametrize("script", TINY)
def test_the_script_runs_and_writes_its_results(tmp_path: Path, script: str) -> None:
    out = tmp_path / "out.json"
    options = [*TINY[script].split(), "--dir", str(tmp_path), "--json", str(out)]

    done = subprocess.run(
        [sys.executable, str(BENCH / script), *options],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(out.read_text()), script
    assert "workload" in done.stdout

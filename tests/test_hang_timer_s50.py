"""The suite's hang timer: a test that hangs ends the run with its stack, not at CI's time limit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"

_HANGING_TEST = """
import threading


def test_waits_for_what_never_comes():
    threading.Event().wait(30)
"""


def test_a_hanging_test_prints_its_stack_and_ends_the_run(tmp_path: Path) -> None:
    (tmp_path / "test_hangs.py").write_text(_HANGING_TEST, encoding="utf-8")
    done = subprocess.run(
        # the project's pytest settings, with the hang timer at 1 s instead of 420 s
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(_PYPROJECT)),
            *("--rootdir", str(tmp_path), "-o", "faulthandler_timeout=1", str(tmp_path / "test_hangs.py")),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=20,  # the hanging test's own wait is 30 s: the timer, not the wait, ends it
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Timeout (0:00:01)!" in done.stderr
    assert "test_waits_for_what_never_comes" in done.stderr

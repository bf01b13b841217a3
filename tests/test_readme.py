from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

_README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", _README.read_text(), flags=re.DOTALL)


def test_the_readme_example_runs() -> None:
    (example,) = _python_blocks()

    out = subprocess.run(
        [sys.executable, "-c", example], capture_output=True, text=True, timeout=120, check=False
    )

    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["1 TaskContextSet TASK_SHARED", "2 PrivateSet AGENT_PRIVATE"]


def test_the_readme_names_the_commands_ci_runs() -> None:
    ci = (_README.parent / ".ci" / "run").read_text()
    test_command = 'python3 -m venv .venv && . .venv/bin/activate && pip install -q -e ".[dev]" && pytest -q'

    assert test_command in _README.read_text()
    assert test_command in ci

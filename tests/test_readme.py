from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from cogfabric.cli import main

_README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", _README.read_text(encoding="utf-8"), flags=re.DOTALL)


def _run(example: str, tmp_path: Path) -> list[str]:
    """Run ``example``; the journal its ``tempfile.mkdtemp()`` makes goes under ``tmp_path``, not /tmp."""
    command = [sys.executable, "-c", example]
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    out = subprocess.run(
        command, capture_output=True, text=True, encoding="utf-8", timeout=120, check=False, env=env
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    return out.stdout.splitlines()


def test_the_readme_runtime_example_runs(tmp_path: Path) -> None:
    runtime_example = _python_blocks()[0]

    *printed, path = _run(runtime_example, tmp_path)
    assert printed == [
        "{'verdict': 'plausible', 'by': 'rev'} ['rev']",
        (
            "ContextView(task_shared={'goal': 'find X', 'deadline': 'friday'},"
            " private={'hypothesis': {'p': 0.7}})"
        ),
    ]
    replay = CliRunner().invoke(main, ["replay", path, "--agent", "rev", "--json"])  # its next step
    assert replay.exit_code == 0, replay.output
    assert json.loads(replay.output)["private"] == {"seen": {"claim": "X causes Y"}}


def test_the_readme_checkpoint_example_recovers_a_killed_agents_checkpoint_after_a_reopen(
    tmp_path: Path,
) -> None:
    checkpoint_example = _python_blocks()[1]

    assert _run(checkpoint_example, tmp_path) == ["ship it"]


def test_the_readme_journal_example_runs(tmp_path: Path) -> None:
    journal_example = _python_blocks()[3]

    assert _run(journal_example, tmp_path) == ["1 TaskContextSet TASK_SHARED", "2 PrivateSet AGENT_PRIVATE"]


def test_the_readme_audit_example_runs(tmp_path: Path) -> None:
    audit_example = _python_blocks()[4]

    assert _run(audit_example, tmp_path) == [
        "2 {'step': 1} {'step': 2} IDLE",
        "[('system', 'New session started'), ('user', 'hello')]",
    ]


def test_the_shell_verifies_the_journal_the_readme_example_writes(tmp_path: Path) -> None:
    journal_example = _python_blocks()[3]
    kept = journal_example.replace(
        'path = Path(tempfile.mkdtemp()) / "journal"', f"path = Path({str(tmp_path / 'journal')!r})"
    )
    assert kept != journal_example
    _run(kept, tmp_path)

    # as the README says next: `cogfabric verify JOURNAL` does the last step from the shell
    command = [sys.executable, "-m", "cogfabric", "verify", str(tmp_path / "journal")]
    out = subprocess.run(command, capture_output=True, text=True, encoding="utf-8", timeout=120, check=False)

    verdict = out.stdout.split(",")[0]
    assert (out.returncode, verdict) == (0, "ok: 2 records verified"), out.stdout + out.stderr


def test_the_readme_names_the_commands_ci_runs() -> None:
    ci = (_README.parent / ".ci" / "run").read_text(encoding="utf-8")
    test_command = (
        'python3 -m venv .venv && . .venv/bin/activate && pip install -q -e ".[dev]" && pytest -q -n auto'
    )

    assert test_command in _README.read_text(encoding="utf-8")
    assert test_command in ci


def test_the_readme_configuration_block_is_every_default() -> None:
    import msgspec  # noqa: PLC0415

    from cogfabric import Config  # noqa: PLC0415

    (block,) = re.findall(r"```yaml\n(.*?)```", _README.read_text(encoding="utf-8"), flags=re.DOTALL)

    assert msgspec.yaml.decode(block) == msgspec.to_builtins(Config())  # every key, none left out


def _anchor(heading: str) -> str:
    """The fragment GitHub gives a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_relative_link_in_the_docs_leads_somewhere() -> None:
    # The README sends readers to docs/performance.md for the missed targets and to the
    # JSON of each run it quotes: a moved file or a renamed heading must not leave a
    # dead link behind.
    pages = [_README, *sorted((_README.parent / "docs").glob("*.md"))]
    assert len(pages) > 1
    dead = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            path, _, fragment = target.partition("#")
            where = (page.parent / path).resolve() if path else page
            if not where.exists():
                dead.append(f"{page.name}: {target}")
            elif fragment and where.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", where.read_text(encoding="utf-8"), flags=re.MULTILINE)
                if fragment not in {_anchor(h) for h in headings}:
                    dead.append(f"{page.name}: {target} (no such heading)")
    assert dead == []

"""The commands ``simulate`` suggests run as shown, also for a journal named like an option."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from click.testing import CliRunner

from cogfabric.cli import main

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def _suggested(output: str, prefix: str) -> list[str]:
    line = next(line for line in output.splitlines() if line.startswith(prefix))
    return shlex.split(line.removeprefix(prefix).split(" && ")[0])


def test_the_audit_hint_for_a_journal_named_like_an_option_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    ran = CliRunner().invoke(main, ["simulate", "--journal", "-j", "--agents", "2", "--turns", "1"])
    assert ran.exit_code == 0, ran.output

    words = _suggested(ran.output, "audit it: ")
    assert words == ["cogfabric", "inspect", "./-j"]
    inspected = CliRunner().invoke(main, words[1:])
    assert inspected.exit_code == 0, inspected.output
    assert "records   17" in inspected.output


def test_the_failure_hint_for_a_journal_named_like_an_option_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "short.yaml").write_text("llm: {max_prompt_length: 10}\n", encoding="utf-8")
    ran = CliRunner().invoke(
        main,
        ["simulate", "--journal", "-j", "--agents", "2", "--turns", "1", "--config", "short.yaml"],
    )
    assert ran.exit_code == 1, ran.output

    line = next(line for line in ran.output.splitlines() if line.startswith("error: agents raised"))
    command = line.split("AgentFailed in the journal: ")[1].rstrip(")")
    words = shlex.split(command)
    assert words[:3] == ["cogfabric", "export", "./-j"]
    exported = CliRunner().invoke(main, words[1:])
    assert exported.exit_code == 0, exported.output
    assert '"type":"AgentFailed"' in exported.output

"""Acceptance items of issues 4 and 5 that no other test pinned (helper h4, session 62).

- Issue 4 and spec §6.2: the gate's limit is ``max_prompt_length`` when it is positive,
  otherwise 8192, so a negative one gates at 8192 too (only 0 was pinned at the gate).
- Issue 5: "a journal of a newer format gets a clear error", and the audit commands never
  change a byte of its data file; pinned before for ``verify``, ``inspect`` and
  ``export``, here for the other commands that open a journal by path.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

import cogfabric as cf
from cogfabric.cli import main
from cogfabric.store import FORMAT_VERSION
from tests.test_upgrade_s54_h6 import _journal_of_format

if TYPE_CHECKING:
    from pathlib import Path


class _Recording:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def generate(self, prompt: str, **params: Any) -> str:  # noqa: ARG002
        self.calls.append(prompt)
        return "ok"


@pytest.mark.parametrize("config", [{"max_prompt_length": -1}, cf.LLMConfig(max_prompt_length=-8192)])
def test_a_negative_max_prompt_length_gates_at_the_default_8192(config: Any) -> None:
    provider = _Recording()
    client = cf.LLMClient(provider, config)

    assert client.max_prompt_length == 8192
    assert client.generate("中" * 8192) == "ok"
    with pytest.raises(cf.PromptTooLongError) as caught:
        client.generate("中" * 8193)
    assert str(caught.value) == "prompt exceeds maximum length of 8192 characters"
    assert provider.calls == ["中" * 8192]


@pytest.mark.parametrize(
    "args",
    [
        ["replay", "{j}"],
        ["replay", "{j}", "--agent", "a", "--at", "1"],
        ["replay", "{j}", "--session", "s", "--json"],
        ["trace", "{j}", "--seq", "1"],
        ["export", "{j}", "--verifiable", "-o", "{out}"],
        ["backup", "{j}", "{out}"],
        ["salvage", "{j}", "{out}"],
        ["simulate", "--agents", "2", "--turns", "1", "--journal", "{j}"],
    ],
    ids=[
        "replay",
        "replay-agent",
        "replay-session-json",
        "trace",
        "export-verifiable",
        "backup",
        "salvage",
        "simulate",
    ],
)
def test_every_command_refuses_a_journal_of_a_newer_format_by_name_and_leaves_it_as_it_was(
    tmp_path: Path, args: list[str]
) -> None:
    journal = _journal_of_format(tmp_path / "j", FORMAT_VERSION + 1)
    out = tmp_path / "out"
    before = hashlib.sha256((journal / "data.mdb").read_bytes()).hexdigest()

    result = CliRunner().invoke(main, [a.format(j=journal, out=out) for a in args])

    assert result.exit_code == 2, result.output
    assert f"format version {FORMAT_VERSION + 1}, newer than this code's {FORMAT_VERSION}" in result.output
    assert "upgrade this one" in result.output
    assert hashlib.sha256((journal / "data.mdb").read_bytes()).hexdigest() == before
    assert not out.exists()  # nothing written for a journal it cannot read

"""``trace`` names the session of a model call made in one (session 49).

A turn's (or ``continue_turn``'s) output, refused prompt and provider failure are
journaled naming their session; the trace's line shows it, as ``--json`` did, so an
auditor reading the text sees which conversation a model's answer belongs to. A bare
``generate`` names none, and its line shows none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from cogfabric.actors import FakeClock, PromptTooLongError, Runtime, ScriptedProvider
from cogfabric.cli import main
from cogfabric.events import LlmOutputRecorded, PromptRejected
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path


def _record_line(path: Path, seq: int) -> str:
    result = CliRunner().invoke(main, ["trace", str(path), "--seq", str(seq)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    return lines[lines.index("record:") + 1].strip()


def test_a_model_call_in_a_session_shows_its_session(tmp_path: Path) -> None:
    path = tmp_path / "j"
    config = {"llm": {"max_prompt_length": 60}}
    with Runtime.open(
        path, clock=FakeClock(), config=config, llm_provider=ScriptedProvider(["a1", "a2"])
    ) as rt:
        session = rt.memory.create_session("u")
        rt.llm().turn(session, "hi")
        rt.llm().generate("bare")
        with pytest.raises(PromptTooLongError):  # the window over the limit: refused, naming the session
            rt.llm().turn(session, "x" * 100)
    with Journal.open(path, readonly=True) as journal:
        seqs = {
            (type(r.event).__name__, r.event.session is not None): r.seq
            for r in journal.read()
            if isinstance(r.event, (LlmOutputRecorded, PromptRejected))
        }

    assert _record_line(path, seqs["LlmOutputRecorded", True]) == (
        f'seq {seqs["LlmOutputRecorded", True]} LlmOutputRecorded runtime output "a1" session "{session}"'
    )
    assert _record_line(path, seqs["LlmOutputRecorded", False]).endswith('output "a2"')
    assert _record_line(path, seqs["PromptRejected", True]).endswith(
        f'"too_long" length 157 limit 60 session "{session}"'
    )

"""A new user's audit walk-through (session 47): what the summary, trace and a damaged file say."""

from __future__ import annotations

from typing import TYPE_CHECKING

from click.testing import CliRunner

from cogfabric._simulation import run_simulation
from cogfabric.actors import Config, MemoryConfig, Runtime
from cogfabric.cli import main
from cogfabric.events import AgentFailed, LlmCallFailed, LlmOutputRecorded, PromptRejected
from cogfabric.store import Journal
from cogfabric.store.testing import make_events
from tests.test_cli_trace import _journal, _message
from tests.test_cli_trace_pins import _dead, _text

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def test_the_summarys_journal_total_holds_expiries_journaled_up_to_the_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # README: the summary's "journal J: N events" is the journal's. The session ticker's
    # sweep may journal expiries after the run's events were counted, up to the close:
    # a sweep just before the close stands for it here (without the wait for the ticker)
    real_close = Runtime.close

    def close_after_a_sweep(self: Runtime) -> None:
        if not self.closed:
            self.memory.sweep()
        real_close(self)

    monkeypatch.setattr(Runtime, "close", close_after_a_sweep)
    path = tmp_path / "j"
    config = Config(memory=MemoryConfig(session_ttl=1e-6))  # every session has expired by then

    report = run_simulation(path, agents=3, turns=4, seed=0, config=config)

    with Journal.open(path, readonly=True) as journal:
        last = journal.last_seq
        late = [type(r.event).__name__ for r in journal.read(after=report.total_events)]
    assert report.total_events == last, late
    assert report.events == last  # a new journal: this run's events are all of them


def test_trace_shows_a_dead_letters_recipient_beside_its_reason(tmp_path: Path) -> None:
    # a broadcast's dead letter is one subscriber's: the line names which one missed it
    path = _journal(tmp_path / "j", [_message("m", "x", "", "t", kind="broadcast"), _dead("d", "m", "m")])

    assert _text(path, "--seq", "1")[-1] == '  seq 2 IpcDeadLettered bus to "a" "r"'


def test_trace_shows_what_a_model_said_and_why_a_prompt_or_a_call_failed(tmp_path: Path) -> None:
    path = _journal(
        tmp_path / "j",
        [
            _message("m", "driver", "a", "tick"),
            PromptRejected(at=1.0, id="r", cause="m", agent="a", length=9000, limit=4000),
            LlmOutputRecorded(
                at=1.0, id="o", cause="m", agent="a", provider="p", model="x", prompt_hash="h", output="yes\n"
            ),
            LlmCallFailed(
                at=1.0, id="f", cause="m", agent="a", provider="p", model="x", prompt_hash="h", error="down"
            ),
            AgentFailed(at=1.0, id="e", cause="m", agent="a", error="ValueError", detail="bad"),
            AgentFailed(at=1.0, id="g", cause="m", agent="a", error="KeyError"),
        ],
    )

    lines = _text(path, "--seq", "1")

    assert lines[-5:] == [
        '  seq 2 PromptRejected agent/a "too_long" length 9000 limit 4000',
        '  seq 3 LlmOutputRecorded agent/a output "yes\\n"',
        '  seq 4 LlmCallFailed agent/a error "down"',
        '  seq 5 AgentFailed agent/a error "ValueError: bad"',
        '  seq 6 AgentFailed agent/a error "KeyError"',
    ]


def test_trace_cuts_a_long_output(tmp_path: Path) -> None:
    long = LlmOutputRecorded(
        at=1.0, id="o", cause="m", agent="a", provider="p", model="x", prompt_hash="h", output="w" * 5000
    )
    path = _journal(tmp_path / "j", [_message("m", "driver", "a", "tick"), long])

    shown = f'  seq 2 LlmOutputRecorded agent/a output "{"w" * 199}... (5,002 characters)'
    assert _text(path, "--seq", "1")[-1] == shown


def test_a_truncated_journal_is_named_damaged_once(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        for start in range(0, 3000, 500):
            journal.append(make_events(500, start=start, value="v" * 200))
    data = path / "data.mdb"
    whole = data.read_bytes()
    data.write_bytes(whole[: len(whole) // 2])

    result = CliRunner().invoke(main, ["verify", str(path)])

    assert result.exit_code == 1, result.output
    assert "(it was truncated)" in result.output
    assert result.output.count("is damaged") == 1, result.output
    assert data.read_bytes() == whole[: len(whole) // 2]

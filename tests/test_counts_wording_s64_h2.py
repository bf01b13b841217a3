"""One record is "seq 1", not "seqs 1 to 1"; log records count events in one way (helper h2, s64).

Each message is reproduced through the command with a journal whose range holds one
record: ``export --until 1`` before a bad seq 2, ``salvage`` of a journal of one record
(its step line), a salvage whose seq 2 does not copy alike, ``verify-export --anchor``
past an export of one record. The log records that count events (what close dropped,
what was noted after a kill, what could not be journaled) say "1 X" or "N events, the
first X", as ``_events_named`` does.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from cogfabric import cli
from cogfabric.actors import FakeClock, Runtime
from cogfabric.actors._agent import _events_named
from cogfabric.cli import main
from cogfabric.events import IpcDelivered, IpcSubscribed, PrivateSet
from cogfabric.store import Journal
from cogfabric.store.testing import make_events
from tests.actors.test_close_and_flush import _config
from tests.actors.test_operator_logging_s62_h7 import LOST, WAIT
from tests.test_cli_counts_s63_h4 import _journal, _plural_one
from tests.test_salvage_s54_h12 import _nothing_under, _salvage, _upcast_at

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from cogfabric.actors import AgentContext
    from cogfabric.events import Event, IpcMessage


def test_export_before_a_bad_seq_2_says_seq_1_is_read(
    tmp_path: Path, break_link: Callable[[Path, int], None]
) -> None:
    path = _journal(tmp_path, 2)
    break_link(path, 2)

    result = CliRunner().invoke(main, ["export", str(path), "--until", "1"])

    assert result.exit_code == 0, result.output
    assert [json.loads(line)["seq"] for line in result.stdout.splitlines()] == [1]
    assert result.stderr.startswith("note: the journal fails verification at seq 2: ")
    assert result.stderr.endswith("; seq 1, before it, verified, is read\n")
    assert _plural_one(result.stderr) == []


def test_salvage_of_a_journal_of_one_record_says_it_copies_seq_1_and_of_thousands_groups_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "_stderr_is_terminal", lambda: True)  # the steps' lines
    dest = tmp_path / "saved"

    code, out, err = _salvage(_journal(tmp_path), dest)

    assert code == 0, err
    assert out.startswith(f"ok: salvaged seq 1 of {tmp_path / 'journal'} into {dest}, chain 1:")
    assert f"  copying seq 1 to {dest}...\n" in err
    assert _plural_one(out + err) == []

    code, _, err = _salvage(_journal(tmp_path / "many", 1000), tmp_path / "many" / "saved")

    assert code == 0, err
    assert f"  copying seqs 1 to 1,000 to {tmp_path / 'many' / 'saved'}...\n" in err


def test_a_salvage_whose_seq_2_does_not_copy_alike_says_seq_1_matches(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(1))
        journal.append([IpcSubscribed(at=1.0, agent="a0", topic="news")])
    _upcast_at(path, 2)  # stored at version 1: copied upcast, its bytes differ

    code, out, err = _salvage(path, tmp_path / "saved")

    assert (code, out) == (1, ""), err
    assert err.splitlines()[0].endswith(
        f"nothing was written to {tmp_path / 'saved'} (seq 1 matches: --until 1 salvages it)"
    )
    assert _plural_one(err) == []
    _nothing_under(tmp_path / "saved")


def test_an_anchor_past_an_export_of_one_record_names_seq_1(tmp_path: Path) -> None:
    path = _journal(tmp_path, 2)
    export = tmp_path / "one.jsonl"
    exported = CliRunner().invoke(
        main, ["export", str(path), "--until", "1", "--verifiable", "-o", str(export)]
    )
    assert exported.exit_code == 0, exported.output
    with Journal.open(path, readonly=True) as journal:
        head = next(journal.read(after=1, until=2))

    result = CliRunner().invoke(main, ["verify-export", str(export), "--anchor", f"2:{head.chain.hex()}"])

    assert result.exit_code == 1
    assert "anchor seq 2 is not in the export, which holds seq 1" in result.output
    assert _plural_one(result.output) == []


@pytest.mark.parametrize(
    ("events", "said"),
    [
        ([PrivateSet(at=0.0, agent="a", key="k", value=1)], "1 PrivateSet"),
        (
            [
                IpcDelivered(at=0.0, message_id="m", recipient="a"),
                PrivateSet(at=0.0, agent="a", key="k", value=1),
            ],
            "2 events, the first IpcDelivered",
        ),
    ],
)
def test_events_are_counted_as_the_records_count_them(events: list[Event], said: str) -> None:
    assert _events_named(events) == said
    assert _events_named(events, then=",") == (said if len(events) == 1 else f"{said},")


class _SetsThenHeld:
    """Sets a private value (``sets``), then holds its message until the gate opens."""

    def __init__(self, entered: threading.Event, gate: threading.Event, sets: bool) -> None:
        self.entered, self.gate, self.sets = entered, gate, sets

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
        if self.sets:
            ctx.set_private("k", 1)
        self.entered.set()
        assert self.gate.wait(WAIT)


def _lost_at_close(path: Path, caplog: pytest.LogCaptureFixture, durability: str, *, sets: bool) -> str:
    """What a busy agent cut off by close() logs it could not journal (``sets``: a private value too)."""
    caplog.clear()
    entered, gate = threading.Event(), threading.Event()
    rt = Runtime.open(
        path,
        config=_config(durability, call_timeout=0.2),
        clock=FakeClock(),
        behaviors={"held": lambda: _SetsThenHeld(entered, gate, sets)},
    )
    agent = rt.spawn("busy", behavior="held")
    held = rt._entry(agent.id).ref
    rt.bus.send("x", "busy", "work")
    assert entered.wait(WAIT)
    caplog.set_level(logging.DEBUG, logger="cogfabric")
    try:
        rt.close()
    finally:
        gate.set()
    assert held.actor_stopped.wait(WAIT)

    [lost] = [r.getMessage() for r in caplog.records if LOST in r.getMessage()]
    return lost


def test_what_a_busy_agent_could_not_journal_at_close_is_counted_as_the_other_records_do(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # sync durability: its delivery record only; batch: the private value it set too.
    # The README's words whole, then the count as _events_named words it.
    one = _lost_at_close(tmp_path / "sync", caplog, "sync", sets=False)
    assert one.startswith(f"agent busy: {LOST} (1 IpcDelivered): ")
    two = _lost_at_close(tmp_path / "batch", caplog, "batch", sets=True)
    assert two.startswith(f"agent busy: {LOST} (2 events, the first IpcDelivered): ")

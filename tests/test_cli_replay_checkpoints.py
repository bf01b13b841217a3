"""`cogfabric replay --agent` shows the checkpoints an agent's id took: how many, and the latest."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from click.testing import CliRunner

import cogfabric as cf
from cogfabric.cli import main
from cogfabric.events import CheckpointTaken
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path


def _journal(path: Path) -> list[int]:
    """a: two checkpoints, killed, spawned again, a third; b: none. The checkpoints' seqs."""
    with cf.Runtime.open(path, clock=cf.FakeClock(start=1_800_000_000.0)) as rt:
        a = rt.spawn("a")
        rt.spawn("b")
        for decision in ("first", "second"):
            a.set_cognitive_state(cf.CognitiveState(decision=decision))
            a.checkpoint_cognitive()
        a.set_cognitive_state(cf.CognitiveState(decision="not checkpointed"))
        rt.kill("a")
        again = rt.spawn("a")
        again.set_cognitive_state(cf.CognitiveState(decision="third"))
        again.checkpoint_cognitive()
    with Journal.open(path, readonly=True) as journal:
        return [r.seq for r in journal.read() if isinstance(r.event, CheckpointTaken)]


def _view(path: Path, *args: str) -> dict[str, Any]:
    shown = CliRunner().invoke(main, ["replay", str(path), *args, "--json"])
    assert shown.exit_code == 0, shown.output
    view: dict[str, Any] = json.loads(shown.output)
    return view


def test_the_json_gives_how_many_checkpoints_and_the_latest_at_the_seq_asked(tmp_path: Path) -> None:
    path = tmp_path / "j"
    first, second, third = _journal(path)

    latest = _view(path, "--agent", "a")["checkpoints"]
    assert latest["taken"] == 3  # the id's lives together, as Runtime.last_checkpoint reads them
    assert latest["latest"]["seq"] == third
    assert latest["latest"]["at"] == 1_800_000_000.0
    assert latest["latest"]["state"]["decision"] == "third"

    earlier = _view(path, "--agent", "a", "--at", str(second))["checkpoints"]
    assert earlier["taken"] == 2
    assert (earlier["latest"]["seq"], earlier["latest"]["state"]["decision"]) == (second, "second")
    assert _view(path, "--agent", "a", "--at", str(first - 1))["checkpoints"] == {"taken": 0, "latest": None}
    assert _view(path, "--agent", "b")["checkpoints"] == {"taken": 0, "latest": None}


def test_the_table_says_how_many_and_shows_the_latest_with_its_utc_time(tmp_path: Path) -> None:
    path = tmp_path / "j"
    *_, third = _journal(path)

    def row(agent: str) -> list[str]:
        shown = CliRunner().invoke(main, ["replay", str(path), "--agent", agent])
        assert shown.exit_code == 0, shown.output
        rows = [line.split("│")[1:-1] for line in shown.output.splitlines() if line.startswith("│")]
        start = next(i for i, r in enumerate(rows) if r[0].strip() == "checkpoints")
        end = next(i for i, r in enumerate(rows) if i > start and r[0].strip())
        return [r[-1].strip() for r in rows[start:end]]

    lines = row("a")
    assert lines[0] == f"3 taken, the latest at seq {third} (2027-01-15T08:00:00.000+00:00):"
    assert '"decision":"third"' in "".join(lines[1:])
    assert row("b") == ["none taken"]

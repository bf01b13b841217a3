"""A value nested as deeply as the boundary admits is journaled, and every reader reads it.

msgspec's nesting limit is the interpreter's recursion limit, counted from the stack it
runs on. Before ``MAX_VALUE_DEPTH``, a value the caller's shallow stack could encode was
refused by the journal writer a level deeper (in batch durability after it was applied,
so the change was lost), and a journaled one could not be decoded by ``cogfabric
verify``, whose deeper stack took the record for a malformed one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric import Runtime, UnencodableValueError
from cogfabric.actors import AgentContext, Config, JournalConfig
from cogfabric.events import MAX_VALUE_DEPTH, IpcMessage
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path


def _nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def _depth(value: object) -> int:
    depth = 0
    while isinstance(value, list):
        depth += 1
        value = value[0] if value else None
    return depth


class Nester:
    """Sets its private ``deep`` to the payload it is sent, from the agent's own thread."""

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> str:
        ctx.set_private("deep", message.payload)
        return "stored"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cogfabric", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_value_at_the_depth_limit_is_journaled_and_read_back_everywhere(
    tmp_path: Path, durability: str
) -> None:
    path = tmp_path / "j"
    config = Config(journal=JournalConfig(durability=durability, snapshot_interval=1))  # type: ignore[arg-type]
    with Runtime.open(path, config=config, behaviors={"nester": Nester}) as rt:
        agent = rt.spawn("a", behavior="nester", task_context={"t": _nested(MAX_VALUE_DEPTH - 1)})
        agent.set_private("direct", _nested(MAX_VALUE_DEPTH))
        assert rt.bus.request("x", "a", "nest", _nested(MAX_VALUE_DEPTH), timeout=30).payload == "stored"
        with pytest.raises(UnencodableValueError):
            agent.set_private("too", _nested(MAX_VALUE_DEPTH + 1))
        rt.flush()

    with Journal.open(path, readonly=True) as journal:
        assert journal.verify(decode=True).ok
    with Runtime.open(path, behaviors={"nester": Nester}) as rt:
        view = rt.agent("a").context_view()
        assert _depth(view.private["direct"]) == _depth(view.private["deep"]) == MAX_VALUE_DEPTH
        assert _depth(view.task_shared["t"]) == MAX_VALUE_DEPTH - 1
        assert "too" not in view.private

    # a fresh interpreter, each command on click's deeper stack
    verified = _cli("verify", str(path))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    exported = _cli("export", str(path))
    assert exported.returncode == 0, exported.stderr
    assert any(json.loads(line)["data"].get("key") == "direct" for line in exported.stdout.splitlines())
    replayed = _cli("replay", str(path), "--agent", "a", "--json")
    assert replayed.returncode == 0, replayed.stderr

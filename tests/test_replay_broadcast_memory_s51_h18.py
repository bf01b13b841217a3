"""``replay --agent`` keeps no fate that comes after its broadcast fell below the latest shown (helper h18).

Mutation pin for the window of ``test_replay_broadcast_memory_s51``: there, every copy's
fate is journaled right after its broadcast, before the broadcast can fall below the
latest ``_IPC_SHOWN``. Fates that come later (copies delivered after the agent sent
more) must not be kept for a broadcast whose fates were dropped, or memory follows
broadcasts times subscribers again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from cogfabric import _audit
from cogfabric.events import AgentSpawned, IpcDelivered, IpcMessage
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

_COPIES = 50


class _CountedFate(_audit._Fate):  # counts the copies' fates made
    __slots__ = ()
    made: ClassVar[int] = 0

    def __init__(self) -> None:
        super().__init__()
        _CountedFate.made += 1


def test_a_fate_that_comes_after_its_broadcast_fell_below_the_latest_is_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append([AgentSpawned(at=0.0, agent=a) for a in "XY"])
        journal.append([IpcMessage(at=0.0, id="cast", sender="X", recipient="", topic="t", kind="broadcast")])
        sends = _audit._IPC_SHOWN  # as many entries after it: it is no longer shown
        journal.append(
            [IpcMessage(at=0.0, id=f"m{n}", sender="X", recipient="Y", topic="s") for n in range(sends)]
        )
        journal.append([IpcDelivered(at=0.0, message_id="cast", recipient=f"s{n}") for n in range(_COPIES)])
    monkeypatch.setattr(_audit, "_Fate", _CountedFate)

    with Journal.open(path, readonly=True) as journal:
        view = _audit.agent_view(journal, "X", None)  # type: ignore[arg-type]

    assert view is not None
    assert view["ipc"]["messages"] == sends + 1
    assert [m["id"] for m in view["ipc"]["latest"]] == [f"m{n}" for n in range(sends)]
    assert _CountedFate.made == 0  # before: one for each of the 50 copies, kept to the end

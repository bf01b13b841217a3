"""``replay --agent`` of an agent that broadcasts keeps the copies' fates of the latest only.

It kept what became of every subscriber's copy of every broadcast the agent ever sent,
so its memory grew with broadcasts times subscribers (126 MB for 200 broadcasts to 4,000
subscribers, where ``inspect`` took 23 MB: helper h6's scale audit in session 51), while
it shows the fates of the latest ``_IPC_SHOWN`` messages only. Now a broadcast's fates
are dropped once as many entries of higher seqs exist.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from cogfabric import _audit
from cogfabric.actors import FakeClock, Runtime
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric.actors import AgentContext
    from cogfabric.events import IpcMessage

_SUBSCRIBERS = 30
_BROADCASTS = 60


class _Quiet:
    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:
        pass


class _Fussy:
    """Raises on every third broadcast: its copy is delivered, then dead-lettered."""

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
        if message.payload % 3 == 0:
            raise ValueError(message.payload)


@pytest.fixture(scope="module")
def hub_journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hub") / "j"
    behaviors: dict[str, Any] = {"quiet": _Quiet, "fussy": _Fussy}
    with Runtime.open(path, clock=FakeClock(), behaviors=behaviors) as runtime:
        runtime.spawn("hub", behavior="quiet")
        runtime.bus.subscribe("hub", "t")  # its own broadcasts reach it too
        for n in range(_SUBSCRIBERS):
            runtime.spawn(f"s{n}", behavior="fussy" if n == 0 else "quiet")
            runtime.bus.subscribe(f"s{n}", "t")
        for n in range(_BROADCASTS):
            runtime.bus.broadcast("hub", "t", n)
            runtime.flush()
    return path


class _CountedFate(_audit._Fate):  # counts the copies' fates alive at once
    __slots__ = ()
    alive: ClassVar[int] = 0
    most: ClassVar[int] = 0

    def __init__(self) -> None:
        super().__init__()
        _CountedFate.alive += 1
        _CountedFate.most = max(_CountedFate.most, _CountedFate.alive)

    def __del__(self) -> None:
        _CountedFate.alive -= 1


def test_the_fates_kept_at_once_follow_the_latest_shown_not_every_broadcast(
    hub_journal: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_audit, "_Fate", _CountedFate)
    with Journal.open(hub_journal, readonly=True) as journal:
        view = _audit.agent_view(journal, "hub", None)  # type: ignore[arg-type]
    assert view is not None
    copies = _SUBSCRIBERS + 1  # the hub is a subscriber too
    # before: every copy of every broadcast, 60 * 31 = 1,860 at once
    assert _CountedFate.most <= (_audit._IPC_SHOWN + 2) * copies
    assert view["ipc"]["messages"] == _BROADCASTS


def test_the_latest_broadcasts_still_show_every_copys_fate(hub_journal: Path) -> None:
    with Journal.open(hub_journal, readonly=True) as journal:
        view = _audit.agent_view(journal, "hub", None)  # type: ignore[arg-type]
    assert view is not None
    latest = view["ipc"]["latest"]
    assert [m["seq"] for m in latest] == sorted(m["seq"] for m in latest)
    assert len(latest) == _audit._IPC_SHOWN
    shown = range(_BROADCASTS - _audit._IPC_SHOWN, _BROADCASTS)
    for message, n in zip(latest, shown, strict=True):
        expected = "delivered to 30, dead-lettered for 1" if n % 3 == 0 else "delivered to 31"
        assert (message["kind"], message["status"]) == ("broadcast", expected)


def test_an_earlier_seq_shows_the_fates_as_of_then(hub_journal: Path) -> None:
    with Journal.open(hub_journal, readonly=True) as journal:
        full = _audit.agent_view(journal, "hub", None)  # type: ignore[arg-type]
        assert full is not None
        fifth = full["ipc"]["latest"][4]["seq"]
        earlier = _audit.agent_view(journal, "hub", fifth)  # type: ignore[arg-type]
    assert earlier is not None
    # the broadcast at `fifth` is now the latest: none of its copies is delivered yet
    assert earlier["ipc"]["latest"][-1]["seq"] == fifth
    assert earlier["ipc"]["latest"][-1]["status"] == "delivered to 0"
    assert all(m["status"] is not None for m in earlier["ipc"]["latest"])

"""An unregistered behavior instance is warned of only once its spawn started an agent."""

from __future__ import annotations

import logging

import pytest

from cogfabric.actors import FakeClock, InvalidSpawnSpecError, Runtime
from tests.actors.test_core_pins import _Unregistered

_SAID = "is not registered: it runs"


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if _SAID in r.getMessage()]


def test_a_refused_spawn_of_an_unregistered_instance_warns_of_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # the instance runs an agent of another runtime: this spawn starts nothing, so "it
    # runs, but a reopen cannot reattach it" would be false here
    caplog.set_level(logging.WARNING, logger="cogfabric")
    shared = _Unregistered()
    with Runtime.open(None, clock=FakeClock()) as first, Runtime.open(None, clock=FakeClock()) as second:
        first.spawn("a", behavior=shared)
        caplog.clear()
        with pytest.raises(InvalidSpawnSpecError, match="runs agent 'a' of another runtime"):
            second.spawn("x", behavior=shared)
        second.spawn("taken")
        with pytest.raises(InvalidSpawnSpecError):
            second.spawn_many([{"agent_id": "y", "behavior": _Unregistered()}, {"agent_id": "y"}])
        assert _said(caplog) == []

        second.spawn("z", behavior=_Unregistered())  # one that runs: warned of, once
        second.spawn("w", behavior=_Unregistered())
        assert len(_said(caplog)) == 1
        assert second.agents() == ["taken", "z", "w"]

"""A deferred request's timeout text closes its parenthesis, killed recipient or not (mutation round).

Session 50 split the "(its behavior returned None ... and no reply came)" hint to add
"; '<id>' was killed meanwhile" inside it; the error, and the dead letter that keeps
it, read the same either way but for that clause.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from cogfabric.actors import FakeClock, IpcTimeoutError, Runtime
from tests.actors.test_deferred_request_killed_s50 import Deferring, _request_in_thread, _reset  # noqa: F401

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize("killed", [False, True])
def test_the_deferred_hint_is_one_closed_parenthesis(tmp_path: Path, killed: bool) -> None:
    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"d": Deferring}) as runtime:
        runtime.spawn("d", behavior="d")
        outcome: list[BaseException] = []
        thread = _request_in_thread(runtime, outcome)
        if killed:
            runtime.kill("d")
        thread.join(10)
        assert not thread.is_alive()
        letters = [d.error for d in runtime.bus.dead_letters() if d.topic == "work"]

    (error,) = outcome
    assert isinstance(error, IpcTimeoutError)
    said = str(error)
    assert said.endswith("and no reply came; 'd' was killed meanwhile)" if killed else "and no reply came)")
    assert said.count("(") == said.count(")")
    assert letters == [said]

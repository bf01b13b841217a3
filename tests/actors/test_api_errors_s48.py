"""API reference check (session 48, helper h8): errors raised for bad input, as documented."""

from __future__ import annotations

import threading

import pytest

import cogfabric as cf


def test_start_ticker_refuses_a_sleep_that_is_not_callable_and_leaves_no_ticker_behind() -> None:
    # Taken before, the ticker's thread died on its first wait with "'int' object is not
    # callable" (a traceback on stderr, nothing raised to the caller), and the runtime's
    # one ticker slot stayed taken: a second start_ticker said "runs already".
    stopped = threading.Event()

    def sleep(_seconds: float) -> bool:
        stopped.set()
        return True

    with cf.Runtime.open(None, clock=cf.FakeClock()) as rt:  # a FakeClock: no ticker of its own
        with pytest.raises(TypeError, match="sleep is a callable"):
            rt.memory.start_ticker(sleep=3)  # type: ignore[arg-type]
        rt.memory.start_ticker(sleep=sleep)
        assert stopped.wait(5)

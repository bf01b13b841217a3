"""A sequence's output is taken under the provider's lock (session 63, helper h6's review of 979f217).

``ScriptedProvider``'s docstring: ``calls`` lists the prompts in the order they came in,
"which for a sequence is the order its outputs went out". That holds only while the
prompt goes into ``calls`` and the output is taken in one hold of the lock; the
concurrency test of helper h1 passes with the output taken after the lock is let go
(the GIL rarely switches between the two), so this one makes the switch happen there.
"""

from __future__ import annotations

import threading

from cogfabric import ScriptedProvider

_STUCK = 5.0
"""Seconds a call is given before it counts as stuck (it takes milliseconds)."""


class _PausingLock:
    """A lock whose first holder, once it let it go, waits for ``go_on`` before going on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._first = True
        self.released = threading.Event()
        self.go_on = threading.Event()

    def __enter__(self) -> bool:
        return self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()
        if self._first:
            self._first = False
            self.released.set()
            self.go_on.wait(_STUCK)


def test_a_call_that_let_the_lock_go_has_its_output_already() -> None:
    provider = ScriptedProvider(["first", "second"])
    lock = _PausingLock()
    provider._lock = lock  # type: ignore[assignment]  # the switch is made to happen there
    first: list[str] = []
    caller = threading.Thread(target=lambda: first.append(provider.generate("p1")), daemon=True)
    caller.start()
    try:
        assert lock.released.wait(_STUCK)
        second = provider.generate("p2")  # while p1's caller is between the lock and its return
    finally:
        lock.go_on.set()
        caller.join(_STUCK)

    assert not caller.is_alive()
    assert provider.calls == ["p1", "p2"]
    assert (first, second) == (["first"], "second")  # each prompt its output, in the order of calls

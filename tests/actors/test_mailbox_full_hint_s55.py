"""A full mailbox's error says what to change: the config key, its value, and the wait."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric import FakeClock, MailboxFullError, Runtime

if TYPE_CHECKING:
    from cogfabric.actors import AgentContext
    from cogfabric.events import IpcMessage


class _Blocking:
    """Holds its first message until ``release`` is set, so its mailbox fills."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ARG002
        self.started.set()
        self.release.wait(10)
        return None


def test_a_send_refused_for_a_full_mailbox_names_mailbox_size_and_the_wait() -> None:
    behavior = _Blocking()
    runtime = Runtime.open(
        None, config={"runtime": {"mailbox_size": 2, "call_timeout": 0.1}}, clock=FakeClock()
    )
    try:
        runtime.spawn("a", behavior=behavior)
        runtime.bus.send("x", "a", "block")
        assert behavior.started.wait(10)
        runtime.bus.send("x", "a", "one")
        runtime.bus.send("x", "a", "two")
        with pytest.raises(MailboxFullError) as caught:
            runtime.bus.send("x", "a", "three")
        message = str(caught.value)
        assert "the mailbox of 'a' stayed full for 0.1 s" in message
        assert "runtime.mailbox_size (2)" in message
        assert "runtime.call_timeout" in message
        assert "request's timeout" in message
    finally:
        behavior.release.set()
        runtime.close()

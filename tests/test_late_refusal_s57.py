"""A request its requester gave up on, then refused by its recipient, says so in the journal.

Session 57 (helper h9's finding, under a plugin delaying each agent's handling): a request
that timed out while queued behind a suspend (or a kill) of its recipient left only its
``timeout`` letter and its delivery, which an audit reads as a request handled after its
requester gave up (``delivered (its requester timed out)``). The refusal now leaves its
own letter, as a send's does.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from cogfabric import ActorTimeoutError, IpcTimeoutError
from cogfabric.cli import main
from cogfabric.events import IpcDeadLettered, IpcMessage
from cogfabric.store import Journal
from tests.actors.test_supervision import _open, _short_call_timeout

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric.actors import AgentContext


class _Blocking:
    """Holds its first message ``block`` until the test releases it; answers any other."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def on_message(self, ctx: AgentContext, message: Any) -> str:  # noqa: ARG002
        if message.topic == "block":
            self.started.set()
            assert self.release.wait(10), "the test never released the behavior"
        return "ok"


@pytest.mark.parametrize(("change", "reason"), [("suspend", "agent suspended"), ("kill", "agent killed")])
def test_a_request_refused_after_its_requester_gave_up_leaves_the_refusals_letter(
    tmp_path: Path, change: str, reason: str
) -> None:
    behavior = _Blocking()
    with _open(tmp_path / "j", behaviors={"blocking": lambda: behavior}) as runtime:
        runtime.spawn("a", behavior="blocking")
        runtime.bus.send("x", "a", "block")
        assert behavior.started.wait(10)
        # the change waits in the mailbox behind the running message, and times out
        with _short_call_timeout(runtime, 0.2), pytest.raises(ActorTimeoutError):
            getattr(runtime, change)("a")
        with pytest.raises(IpcTimeoutError):  # queued behind the change
            runtime.bus.request("x", "a", "ask", timeout=0.2)
        behavior.release.set()
        runtime.settle(10)

    with Journal.open(tmp_path / "j", readonly=True) as journal:
        events = [r.event for r in journal.read()]
    (asked,) = [e.id for e in events if isinstance(e, IpcMessage) and e.topic == "ask"]
    letters = [e.reason for e in events if isinstance(e, IpcDeadLettered) and e.message_id == asked]
    assert letters == ["timeout", reason]
    if change == "kill":
        return  # replay --agent shows a live agent only

    shown = CliRunner().invoke(main, ["replay", str(tmp_path / "j"), "--agent", "a", "--json"])
    assert shown.exit_code == 0, shown.output
    (status,) = [m["status"] for m in json.loads(shown.stdout)["ipc"]["latest"] if m["topic"] == "ask"]
    assert status == f"dead-lettered: {reason}"

"""A behavior's reply that cannot cross a context layer is named as the reply.

The requester's ``IpcHandlerError`` otherwise read as if handling the message raised,
and the journal's ``AgentFailed`` said the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from cogfabric import IpcHandlerError, Runtime, UnencodableValueError
from cogfabric.events import AgentFailed

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric.actors import AgentContext
    from cogfabric.events import IpcMessage


class _AnswersAnObject:
    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ARG002
        return {"verdict": [1, object()]}


def test_the_requester_and_the_journal_hear_that_the_reply_could_not_cross(tmp_path: Path) -> None:
    with Runtime.open(tmp_path / "j", behaviors={"b": _AnswersAnObject}) as runtime:
        runtime.spawn("a", behavior="b")
        with pytest.raises(IpcHandlerError) as caught:
            runtime.bus.request("x", "a", "review", {}, timeout=10)
        cause = caught.value.__cause__
        assert isinstance(cause, UnencodableValueError)
        assert isinstance(cause, TypeError)
        assert str(cause).startswith("the reply of 'a' to 'review': value of type dict cannot cross")
        assert "$['verdict'][1]" in str(cause)  # where in the reply
        assert "the reply of 'a' to 'review'" in str(caught.value)
        runtime.flush()
        journal = runtime._journal
        assert journal is not None
        failed = [r.event for r in journal.read(stream="agent/a") if isinstance(r.event, AgentFailed)]
    assert len(failed) == 1
    assert failed[0].error == "UnencodableValueError"
    assert "the reply of 'a' to 'review'" in failed[0].detail

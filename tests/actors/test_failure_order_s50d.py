"""A failure is journaled on its own, after its message's changes (helper h14, session 50).

The message's changes and its ``AgentFailed`` are two hand-overs, in that order, before
the ``handler error`` letter: a journal that refuses one of the changes without going
fail-stop (the writer commits the other submissions apart) still stores the failure
before the letter, as the code before the failure was journaled first did store it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import AgentContext, FakeClock, IpcHandlerError, Runtime
from cogfabric.events import AgentFailed, InvalidEventError, IpcDeadLettered, IpcMessage, PrivateSet

from .test_failure_order_s50 import _config, _records, _seq, _unexplained

if TYPE_CHECKING:
    from pathlib import Path


class _RaisesAfterABadChange:
    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002 - it only fails
        ctx.set_private("refused", 1)
        msg = "boom"
        raise ValueError(msg)


def test_a_journal_that_refuses_the_messages_changes_still_takes_the_failure_before_the_letter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # batch durability: the change waits in the outbox and is refused at its commit,
    # before anything is written (the journal stays usable, as for a value it cannot read back)
    path = tmp_path / "j"
    behaviors = {"raises": _RaisesAfterABadChange}
    with Runtime.open(path, config=_config("batch"), clock=FakeClock(), behaviors=behaviors) as rt:
        rt.spawn("a", behavior="raises")
        rt.flush()
        journal = rt._journal
        assert journal is not None
        append = journal.append

        def refuse_the_change(events: list[Any], **kwargs: Any) -> list[int]:
            if any(isinstance(e, PrivateSet) and e.key == "refused" for e in events):
                msg = "refused (the test)"
                raise InvalidEventError(msg)
            result: list[int] = append(events, **kwargs)
            return result

        monkeypatch.setattr(journal, "append", refuse_the_change)
        with pytest.raises(IpcHandlerError) as raised:
            rt.bus.request("x", "a", "ask", None, timeout=10)
        assert isinstance(raised.value.__cause__, ValueError)
        assert rt.agent("a").private("refused") is None  # restarted from the journal, which lacks it
        rt.flush()
        monkeypatch.undo()
    message_id = raised.value.message_id
    assert message_id is not None
    records = _records(path)

    assert _seq(records, PrivateSet, message_id) == []
    (failed,) = _seq(records, AgentFailed, message_id)
    (letter,) = _seq(records, IpcDeadLettered, message_id)
    assert failed < letter
    assert _unexplained(records) == []

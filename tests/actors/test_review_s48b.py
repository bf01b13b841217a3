"""A dead letter's error is the text its requester gets (review of session 48's bus commits).

README: a dead letter's ``error`` is "the text of the error a requester gets". Two
letters kept another text: a request whose reply the journal refused (its requester gets
``IpcHandlerError``, ``agentipc: handler panicked: ...``; the letter kept the journal
error's repr), and a request whose commit outlasted ``call_timeout`` (its requester gets
``ActorTimeoutError``, ``the journal did not acknowledge ...``; the letter said
``agentipc: request timed out: ...``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf
from cogfabric.store import JournalError

from .test_supervision import _open, _stall

if TYPE_CHECKING:
    from pathlib import Path


class _Answers(cf.Behavior):
    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> int:  # noqa: ARG002
        return 1


def test_a_refused_reply_letters_the_text_its_requester_gets(tmp_path: Path) -> None:
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), behaviors={"answers": _Answers}) as rt:
        rt.spawn("asker")
        rt.spawn("r", behavior="answers")
        journal = rt.bus._journal

        def refuse_replies(message: Any, **kwargs: Any) -> Any:
            if getattr(message, "kind", "") == "reply":
                msg = "the journal refused the reply"
                raise JournalError(msg)
            return journal(message, **kwargs)

        rt.bus._journal = refuse_replies  # type: ignore[method-assign,assignment]
        with pytest.raises(cf.IpcHandlerError) as caught:
            rt.bus.request("asker", "r", "q", timeout=600)
        (letter,) = rt.bus.dead_letters()

    assert (letter.reason, letter.error) == ("reply not journaled", str(caught.value))


def test_a_request_whose_commit_outlasted_call_timeout_letters_the_text_its_requester_got(
    tmp_path: Path,
) -> None:
    with _open(tmp_path / "j", timeout=0.3) as rt:
        rt.spawn("r", behavior="gate")
        gate = _stall(rt)
        with pytest.raises(cf.ActorTimeoutError) as caught:
            rt.bus.request("x", "r", "asked", timeout=10)
        gate.set()
        rt.flush()
        (letter,) = rt.bus.dead_letters()

    assert (letter.reason, letter.error) == ("timeout", str(caught.value))

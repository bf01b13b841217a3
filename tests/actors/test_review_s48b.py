"""A dead letter's error is the text its requester gets (review of session 48's bus commits).

README: a dead letter's ``error`` is "the text of the error a requester gets". Two
letters kept another text: a request whose reply the journal refused (pinned in
test_close_and_flush's test of that reply), and a request whose commit outlasted
``call_timeout`` (its requester gets ``ActorTimeoutError``, ``the journal did not
acknowledge ...``; the letter said ``agentipc: request timed out: ...``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

import cogfabric as cf

from .test_supervision import _open, _short_call_timeout, _stall

if TYPE_CHECKING:
    from pathlib import Path


def test_a_request_whose_commit_outlasted_call_timeout_letters_the_text_its_requester_got(
    tmp_path: Path,
) -> None:
    with _open(tmp_path / "j") as rt:
        rt.spawn("r", behavior="gate")  # its commit keeps 10 s: a loaded machine may need more than 0.3
        # the short call_timeout up to the letter: it says call_timeout as it is when written,
        # and the test checks it is the requester's; the flush after the stall gets its own 10 s
        with _short_call_timeout(rt, 0.3):
            gate = _stall(rt)
            with pytest.raises(cf.ActorTimeoutError) as caught:
                rt.bus.request("x", "r", "asked", timeout=10)
            gate.set()
            rt.flush(10)
            (letter,) = rt.bus.dead_letters()

    assert (letter.reason, letter.error) == ("timeout", str(caught.value))

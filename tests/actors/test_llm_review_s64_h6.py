"""Review of the call state after a Ctrl-C (session 64, helper h6).

``JournaledLLM._call_provider`` makes its call's state the thread's again once the
provider is done, whatever a call the provider made meanwhile left there (one a
Ctrl-C interrupted as it started leaves its own until its generator is closed). It
does so also when the provider then fails: the failure's record is made after the
provider returned, from the thread's state, and must name the turn's session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from cogfabric import FakeClock, ProviderError, Runtime, ScriptedProvider
from cogfabric.events import LlmCallFailed, LlmOutputRecorded

from .test_llm_pins import _events
from .test_llm_state_s64_h3 import _interrupted_as_it_starts

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric import JournaledLLM


def test_a_provider_that_fails_after_an_interrupted_nested_call_has_its_failure_name_the_turns_session(
    tmp_path: Path,
) -> None:
    held: list[object] = []  # the interrupted call's traceback, kept: its generator stays open
    holder: list[JournaledLLM] = []

    def script(prompt: str) -> str:
        if "outer" in prompt and not held:  # the first turn only (the next one's window holds it)
            llm = holder[0]
            held.append(_interrupted_as_it_starts(llm, lambda: llm.generate("inner")))
            msg = "the vendor is down"
            raise RuntimeError(msg)
        return "answer"

    with Runtime.open(tmp_path / "j", llm_provider=ScriptedProvider(script), clock=FakeClock()) as rt:
        llm = rt.llm()
        holder.append(llm)
        session = rt.memory.create_session("u")
        with pytest.raises(ProviderError, match="the vendor is down"):
            llm.turn(session, "outer")
        assert llm.turn(session, "again") == "answer"  # the thread's calls go on as before
        rt.flush()

    events = _events(tmp_path / "j")
    # Were the state put back only on the provider's answer, the failure's record would take
    # the interrupted call's blank state: no session.
    assert [e.session for e in events if isinstance(e, LlmCallFailed)] == [session]
    assert [e.session for e in events if isinstance(e, LlmOutputRecorded)] == [session]
    assert len(held) == 1

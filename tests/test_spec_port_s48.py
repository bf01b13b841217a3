"""Spec behaviours of the original (spec §§2-5) a port of its tests relies on, untested before.

Written against the public API only (``cogfabric``, ``cogfabric.events``), as a user
porting the original's tests would. Each test names the mutant of the code it was seen
failing under.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf
from cogfabric.events import AgentRecovered

if TYPE_CHECKING:
    from pathlib import Path

FALSY_BUT_SET: list[Any] = [{}, [], 0, "", False]
"""Values Go's ``!= nil`` counts as present, which Python's truthiness would not."""


@pytest.mark.parametrize("prior", FALSY_BUT_SET)
def test_a_falsy_experience_prior_still_seeds_a_version_one_state(prior: object) -> None:
    # spec §2.3 Spawn: the state is {SchemaVersion: 1, Context: prior} whenever
    # spec.ExperiencePrior != nil, an empty map or a zero included; only None leaves
    # the zero state (version 0) (mutant: `if experience_prior:` in Runtime.spawn)
    with cf.Runtime.open(None, clock=cf.FakeClock()) as rt:
        seeded = rt.spawn("seeded", experience_prior=prior).cognitive_state()
        bare = rt.spawn("bare", experience_prior=None).cognitive_state()

    assert (seeded.schema_version, seeded.context) == (1, prior)
    assert type(seeded.context) is type(prior)
    assert bare == cf.CognitiveState()


@pytest.mark.parametrize("checkpoint", FALSY_BUT_SET)
def test_recover_journals_a_falsy_checkpoint_as_a_checkpoint(tmp_path: Path, checkpoint: object) -> None:
    # spec §2.3 Recover: EventAgentRecovered {has_checkpoint: cs.Checkpoint != nil}, so a
    # checkpoint of {} or 0 is one (mutant: has_checkpoint=bool(stored.checkpoint))
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as rt:
        rt.spawn("a")
        rt.recover("a", cf.CognitiveState(checkpoint=checkpoint))
        rt.recover("a", cf.CognitiveState(checkpoint=None))
        assert rt.agent("a").cognitive_state().checkpoint is None

    with cf.Journal.open(tmp_path / "j", readonly=True) as journal:
        recovered = [r.event for r in journal.read() if isinstance(r.event, AgentRecovered)]
    journaled = [(e.has_checkpoint, e.cognitive.checkpoint) for e in recovered]
    assert journaled == [(True, checkpoint), (False, None)]


class _Recording:
    """A retriever that keeps the queries it is asked and finds one snippet."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    def retrieve(self, query: str) -> list[cf.Snippet]:
        self.queries.append(query)
        return [cf.Snippet(source="kb", content="found", score=1.0)]


def test_retrieval_asks_with_the_last_user_message_uncleaned() -> None:
    # spec §5.3 BuildPromptMessages step 5: the query is the raw, uncleaned content of the
    # last user message inside the window, so a message the cleaner cuts to max_user_len
    # (200 code points, "..." at the end) is asked whole
    # (mutant: the query taken from the cleaned window instead of the raw one)
    question = "why " * 75  # 300 code points
    retriever = _Recording()
    with cf.Runtime.open(None, clock=cf.FakeClock()) as rt:
        rt.memory.set_retrievers([retriever])
        session = rt.memory.create_session("u")
        rt.memory.add_message(session, "user", question)
        window = rt.memory.build_prompt_messages(session)

    assert retriever.queries == [question]
    assert [(m.role, len(m.content)) for m in window] == [("system", 29), ("system", 19), ("user", 200)]
    assert window[0].content == "Relevant context:\n[kb] found\n"
    assert window[-1].content == question[:197] + "..."


def test_a_window_with_neither_turn_ids_nor_a_user_message_is_one_active_turn() -> None:
    # spec §5.4 CleanWithTurns: without turn ids the window splits at user messages (the
    # original's groupByUserBoundary, which returns one turn for a window with none, so
    # its structural fallback is never reached); the only turn is the active one, whose
    # tool traffic is kept exactly. A window the user messages slid out of (MaxHistory
    # counts messages) must not have its earlier tool results summarised.
    # (mutant: _turns starts a turn after each tool result when no user message is there)
    calls = [
        cf.ToolCall(id=f"c{i}", function=cf.ToolCallFunction(name="weather", arguments='{"city": "Paris"}'))
        for i in (1, 2)
    ]
    result = "Sunny. Then rain from the west by evening, heavy at times."
    config = cf.Config(memory=cf.MemoryConfig(max_history=4))
    with cf.Runtime.open(None, clock=cf.FakeClock(), config=config) as rt:
        session = rt.memory.create_session("u")
        add = rt.memory.add_structured_message
        add(session, cf.Message(role="user", content="weather twice?"))
        add(session, cf.Message(role="assistant", content="Looking. Once.", tool_calls=[calls[0]]))
        add(session, cf.Message(role="tool_result", content=result, tool_call_id="c1"))
        add(session, cf.Message(role="assistant", content="Looking. Twice.", tool_calls=[calls[1]]))
        add(session, cf.Message(role="tool_result", content=result, tool_call_id="c2"))

        window = rt.memory.build_prompt_messages(session)

    assert [(m.role, m.content) for m in window] == [
        ("assistant", "Looking. Once."),
        ("tool_result", result),
        ("assistant", "Looking. Twice."),
        ("tool_result", result),
    ]

"""Mutation round of helper h2, session 59: tests for the mutants the suite let live.

Targets: events/ (codec, cognitive state, messages), actors/_cleaner.py,
actors/_memory.py, actors/_llm.py's gate, and the copies of a cognitive state the agent
makes. Each test names the mutant it kills (with its id in the round's table) and
passes on the real code: an earlier turn's assistant message with tool calls cut to
``max_tool_len``; ``LLMConfig.max_prompt_length`` left at 0 so that simulate gates at
4,000; each of a cognitive state's six fields copied on the way in and out (no test
held the checkpoint's or tool_state's copy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

import cogfabric._simulation
from cogfabric.actors import CleanOptions, Config, FakeClock, JournalConfig, LLMConfig, Runtime
from cogfabric.actors._cleaner import clean, clean_with_turns
from cogfabric.events import (
    COGNITIVE_STATE_FIELDS,
    CheckpointTaken,
    CognitiveState,
    CognitiveStateSet,
    Message,
    ToolCall,
    ToolCallFunction,
)
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path


def test_an_earlier_turns_assistant_message_with_tool_calls_keeps_a_gist_of_max_tool_len() -> None:
    # C11 (_clean_one): an assistant message with tool calls is cut to max_tool_len
    # (spec §5.4: extractGist(content, MaxToolLen)), not to max_assistant_len
    call = ToolCall(id="c1", function=ToolCallFunction(name="search", arguments="{}"))
    sentence = "I will look this up in the search index right now, then answer."
    messages = [
        Message(role="user", content="q", turn_id="t1"),
        Message(role="assistant", content=sentence, turn_id="t1", tool_calls=[call]),
        Message(role="user", content="next", turn_id="t2"),
    ]
    options = CleanOptions(max_tool_len=20, max_assistant_len=150)

    earlier = clean_with_turns(messages, options)[1]
    flat = clean(messages[1:2], options)[0]

    assert earlier.content == flat.content == "I will look this ..."
    assert earlier.tool_calls == [call]


def test_an_llm_section_left_out_means_8192_and_lets_simulate_use_its_4000() -> None:
    # L13 (LLMConfig.max_prompt_length defaulting to 8192 instead of 0): the same gate
    # for a runtime, but `cogfabric simulate` gates at 4,000 code points only where no
    # limit is set (README: "0 or less: 8192 code points (simulate: 4000)")
    assert LLMConfig().max_prompt_length == 0
    assert LLMConfig().prompt_limit == 8192
    assert cogfabric._simulation._settings(Config(), None).llm.prompt_limit == 4000


def _six(tag: str) -> CognitiveState:
    """A state whose six fields each hold a list inside a map: something a caller could change."""
    return CognitiveState(schema_version=1, **{name: {"v": [tag]} for name in COGNITIVE_STATE_FIELDS})


def _change_every_field(state: CognitiveState) -> None:
    for name in COGNITIVE_STATE_FIELDS:
        getattr(state, name)["v"].append("changed")


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_every_field_of_a_cognitive_state_is_copied_in_and_out_checkpoint_and_tool_state_too(
    tmp_path: Path, durability: str
) -> None:
    # D03, D01b, D03b (actors/_agent.py _copy_cognitive): tool_state or checkpoint shared
    # with the caller instead of copied (a copy still made for the depth check), which
    # every other test let live (DESIGN: "checkpoints are copies"); one held working_memory.
    # The caller's state after set, a read and a checkpoint are changed: the agent, its
    # next read, its next checkpoint and the journal keep the stored values; so does a
    # state given to recover.
    config = Config(journal=JournalConfig(durability=durability))  # type: ignore[arg-type]
    given = _six("stored")
    with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as rt:
        agent = rt.spawn("a")
        agent.set_cognitive_state(given)
        _change_every_field(given)
        _change_every_field(agent.cognitive_state())
        _change_every_field(agent.checkpoint_cognitive())
        read = agent.cognitive_state()
        checkpoint = agent.checkpoint_cognitive()
        rt.flush()
        last = rt.last_checkpoint("a")
        resumed = _six("recovered")
        rt.recover("a", resumed)
        _change_every_field(resumed)
        after_recover = rt.cognitive_states(["a"])["a"]

    assert read == checkpoint == last == _six("stored")
    assert after_recover == _six("recovered")
    with Journal.open(tmp_path / "j", readonly=True) as journal:
        states = [
            r.event.state for r in journal.read() if isinstance(r.event, CognitiveStateSet | CheckpointTaken)
        ]
    assert states == [_six("stored")] * 3

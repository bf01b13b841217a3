"""README's "Where cogfabric differs from the original" checked against the spec and the code (s47, h7)."""

from __future__ import annotations

import pytest

from cogfabric.actors import InvalidConfigError, MemoryConfig
from cogfabric.actors._cleaner import CleanOptions, clean_with_turns
from cogfabric.events import ROLE_ASSISTANT, ROLE_TOOL_RESULT, ROLE_USER, Message, ToolCall, ToolCallFunction


def _finished_turn(tool: str, arguments: str, result: str) -> list[Message]:
    call = ToolCall(id="c1", type="function", function=ToolCallFunction(name=tool, arguments=arguments))
    return [
        Message(role=ROLE_USER, content="q"),
        Message(role=ROLE_ASSISTANT, content="", tool_calls=[call]),
        Message(role=ROLE_TOOL_RESULT, content=result, tool_call_id="c1"),
        Message(role=ROLE_USER, content="next"),  # the turn above is finished
    ]


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [("other_tool", "{}"), ("file_tools", '{"operation": "delete", "path": "p"}')],
)
def test_a_white_space_tool_result_of_a_finished_turn_is_kept_as_the_original_keeps_it(
    tool: str, arguments: str
) -> None:
    # The original's SummarizeToolResult: extractGist(content, 200), and where that is
    # empty, WithEllipsis(content, 200); so output of white space only is not emptied.
    out = clean_with_turns(_finished_turn(tool, arguments, " \n "), CleanOptions())
    assert out[2].content == " \n "
    long_blank = " " * 250
    out = clean_with_turns(_finished_turn(tool, arguments, long_blank), CleanOptions())
    assert out[2].content == " " * 197 + "..."


def test_a_tool_result_with_text_is_summarised_as_before() -> None:
    out = clean_with_turns(_finished_turn("other_tool", "{}", "  Found it. More text."), CleanOptions())
    assert out[2].content == "Found it."


def test_a_nan_rag_min_score_is_refused_as_no_number_not_as_negative() -> None:
    nan = r"^invalid RAG configuration: rag_min_score must be a number, got nan"
    with pytest.raises(InvalidConfigError, match=nan):
        MemoryConfig(rag_min_score=float("nan"))
    with pytest.raises(InvalidConfigError, match=r"rag_min_score must not be negative, got -1\.0"):
        MemoryConfig(rag_min_score=-1.0)

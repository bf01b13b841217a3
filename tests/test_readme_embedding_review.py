"""README's "Embedding the runtime" and "What exists today", checked against the code.

A helper's review: the statements a user relies on that no other test pinned.
"""

from __future__ import annotations

import pytest

import cogfabric as cf
from cogfabric.events import Message, ToolCall, ToolCallFunction


def _search_summary(output: str) -> str:
    """What a later turn's window shows of a ``knowledge_search`` call's ``output``."""
    with cf.Runtime.open(None, clock=cf.FakeClock()) as rt:
        session = rt.memory.create_session("u")
        search = ToolCallFunction(name="knowledge_search", arguments='{"query": "q"}')
        call = ToolCall(id="c1", function=search)
        for message in (
            Message(role="user", content="look it up"),
            Message(role="assistant", content="", tool_calls=[call]),
            Message(role="tool_result", content=output, tool_call_id="c1"),
            Message(role="user", content="and now?"),  # a later turn: the search's is summarised
        ):
            rt.memory.add_structured_message(session, message)
        window = rt.memory.build_prompt_messages(session)
    (result,) = (m for m in window if m.role == "tool_result")
    return result.content.split(":", 1)[0]


@pytest.mark.parametrize(
    ("output", "head"),
    [
        ('["a", "b", "c"]', 'Search "q" (3 results)'),  # a JSON list: its items
        ('{"results": [1, 2]}', 'Search "q" (2 results)'),  # an object's results list
        # README said "else the lines with text": an object without results, over six
        # lines, counts as one result, as does one whose results is no list
        ('{\n  "hits": [\n    "a",\n    "b"\n  ]\n}', 'Search "q" (1 results)'),
        ('{"results": "none found"}', 'Search "q" (1 results)'),
        ("first hit\n\nsecond hit\nthird hit", 'Search "q" (3 results)'),  # no JSON: lines with text
    ],
    ids=["json-list", "results-list", "multi-line-object", "results-not-a-list", "plain-text"],
)
def test_a_searchs_result_count_is_what_the_readme_says(output: str, head: str) -> None:
    assert _search_summary(output) == head

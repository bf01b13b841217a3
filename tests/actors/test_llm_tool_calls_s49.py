"""An OpenAI-compatible answer of tool calls alone, whatever its content says (helper h5, session 49).

Servers differ on the content beside tool calls: null, an empty string, or no field at
all. Each is a ``ProviderError`` that names the tool calls, as a provider returns text:
an empty completion would lose them without a word, in the journal and the session.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import LLMConfig, OpenAICompatibleProvider, ProviderError

from .test_llm_pins import _Answers

if TYPE_CHECKING:
    from collections.abc import Callable

_CALL = {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}


def _answering(serve_http: Callable[..., str], message: dict[str, Any]) -> Callable[[], str]:
    """A provider's ``generate`` on a server whose answer holds ``message``."""
    body = {"choices": [{"message": message, "finish_reason": "tool_calls"}]}
    _Answers.answers = {"find x": (200, None, json.dumps(body).encode())}
    _Answers.received = []
    _Answers.release.clear()
    server = serve_http(_Answers, _Answers.release)
    provider = OpenAICompatibleProvider(LLMConfig(model="m", base_url=server, timeout=5))
    return lambda: provider.generate("find x")


@pytest.mark.parametrize(
    "content",
    [{"content": ""}, {"content": " \n"}, {}],
    ids=["empty", "blank", "left out"],
)
def test_tool_calls_beside_no_text_are_a_provider_error_that_names_them(
    serve_http: Callable[..., str], content: dict[str, str]
) -> None:
    generate = _answering(serve_http, {"role": "assistant", **content, "tool_calls": [_CALL, _CALL]})

    with pytest.raises(ProviderError, match=r"not text but 2 tool calls: a provider returns text only$"):
        generate()


def test_a_null_content_beside_no_tool_calls_is_not_text(
    serve_http: Callable[..., str],
) -> None:
    generate = _answering(serve_http, {"role": "assistant", "content": None, "tool_calls": []})

    with pytest.raises(ProviderError, match=r"answered a completion that is not text$"):
        generate()


def test_text_beside_tool_calls_is_the_answer_and_the_dropped_calls_are_logged(
    serve_http: Callable[..., str], caplog: pytest.LogCaptureFixture
) -> None:
    generate = _answering(
        serve_http, {"role": "assistant", "content": "Let me search.", "tool_calls": [_CALL]}
    )

    with caplog.at_level(logging.WARNING, logger="cogfabric"):
        assert generate() == "Let me search."

    dropped = "openai-compatible answered text beside 1 tool call(s), which are dropped"
    assert [r.getMessage() for r in caplog.records] == [f"{dropped}: a provider returns text only"]

"""A short api_key (a local server's placeholder) is not masked in errors.

``x`` or ``ollama`` is no secret; masked, it garbled every message holding its letters
(``conte***t length e***ceeded``), the provider's own name, and, for ``e``, dropped the
cause as if it "held the API key" (``ValueError`` holds an ``e``).
"""

from __future__ import annotations

from typing import Any

import pytest

from cogfabric.actors import LLMClient, ProviderError
from cogfabric.actors._llm import _secret


class _Local:
    name = "ollama"

    def generate(self, prompt: str, **params: Any) -> str:  # noqa: ARG002
        msg = "context length exceeded"
        raise ValueError(msg)


@pytest.mark.parametrize("key", ["x", "e", "ollama", "1234567"])
def test_a_placeholder_key_leaves_the_error_whole(key: str) -> None:
    client = LLMClient(_Local(), {"api_key": key})
    with pytest.raises(ProviderError) as caught:
        client.generate("hello")
    assert str(caught.value) == "provider ollama failed: ValueError('context length exceeded')"
    assert isinstance(caught.value.__cause__, ValueError)
    assert str(caught.value.__cause__) == "context length exceeded"


def test_a_key_of_eight_characters_or_more_is_masked() -> None:
    class _Echoes:
        def generate(self, prompt: str, **params: Any) -> str:  # noqa: ARG002
            msg = "bad key sk-12345"
            raise PermissionError(msg)

    client = LLMClient(_Echoes(), {"api_key": "sk-12345"})
    with pytest.raises(ProviderError) as caught:
        client.generate("hello")
    assert "sk-12345" not in str(caught.value)
    assert "***" in str(caught.value)


def test_secret_is_empty_below_eight_characters() -> None:
    assert _secret("") == _secret("ollama") == _secret("1234567") == ""
    assert _secret("12345678") == "12345678"

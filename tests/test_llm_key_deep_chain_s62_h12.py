"""A user's provider raising its own ``ProviderError`` whose chain holds ``config.llm.api_key``
past the depth the scrub clears: the caller gets a new ``ProviderError`` of the masked text
and no chain (the branch of ``_provider_error`` the suite never ran)."""

from __future__ import annotations

import traceback

import pytest

from cogfabric.actors import LLMClient, ProviderError, _llm
from tests.test_review_s55_h7 import KEY, _Failing


def _deep(links: int) -> ProviderError:
    """The provider's error, the key quoted by it and by the last of ``links`` errors chained under it."""
    error: BaseException = RuntimeError(f"Incorrect API key provided: {KEY}")
    for n in range(1, links):
        outer = RuntimeError(f"attempt {n} failed")
        outer.__cause__ = error
        error = outer
    failure = ProviderError(f"vendor call with key {KEY} failed")
    failure.__cause__ = error
    return failure


def test_a_providers_own_error_with_the_key_too_deep_in_its_chain_is_replaced_unchained() -> None:
    raised = _deep(_llm._CHAIN_DEPTH)  # with the ProviderError itself, one more than the scrub clears
    client = LLMClient(_Failing(raised), {"api_key": KEY})

    with pytest.raises(ProviderError) as caught:
        client.generate("hello")
    error = caught.value

    assert error is not raised
    assert str(error) == "vendor call with key *** failed (the API key masked; its cause is not chained)"
    assert error.__cause__ is None
    assert error.__suppress_context__
    assert KEY not in "".join(traceback.format_exception(error))


def test_a_providers_own_error_whose_chain_the_scrub_clears_is_raised_as_it_is() -> None:
    raised = _deep(_llm._CHAIN_DEPTH - 1)
    client = LLMClient(_Failing(raised), {"api_key": KEY})

    with pytest.raises(ProviderError) as caught:
        client.generate("hello")
    error = caught.value

    assert error is raised  # scrubbed in place, its cause still chained
    assert error.__cause__ is not None
    assert KEY not in "".join(traceback.format_exception(error))

"""A provider of the user's own: ``config.llm.api_key`` stays out of what its failures leave.

A developer who wraps a vendor's SDK as the provider, built from ``config.llm``, gets
that SDK's errors, some of which quote the key they were given ("Incorrect API key
provided: sk-..."). The journal keeps ``LlmCallFailed`` and ``AgentFailed`` for good, the
requester's ``IpcHandlerError`` and the log's traceback print the chained cause: none of
them may hold the key, as none does for the built-in HTTP provider (README: "no error
message holds the api_key").
"""

from __future__ import annotations

import logging
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf
from cogfabric.actors import LLMClient, ProviderError
from cogfabric.events import AgentFailed, LlmCallFailed
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric.events import IpcMessage

KEY = "sk-live-Qw7Er4Ty1Ui8Op5As2Df9Gh6Jk3"


class _AuthError(Exception):
    """An SDK's error that keeps the key in its message and in a field."""

    def __init__(self, key: str) -> None:
        super().__init__(f"401 Incorrect API key provided: {key}")
        self.api_key = key


class _VendorProvider:
    """Built from ``config.llm`` as a developer would; every call fails as the SDK does."""

    name = "vendor"

    def __init__(self, config: cf.LLMConfig, *, wrap: bool = False) -> None:
        self.model = config.model
        self._key = config.api_key
        self._wrap = wrap

    def generate(self, prompt: str, **params: Any) -> str:  # noqa: ARG002
        if self._wrap:  # the provider's own ProviderError, the SDK's error chained
            msg = f"vendor call with key {self._key} failed"
            raise ProviderError(msg) from _AuthError(self._key)
        raise _AuthError(self._key)


def _texts(error: BaseException) -> str:
    return "".join(traceback.format_exception(error))


class _Asker:
    def on_message(self, ctx: cf.AgentContext, message: IpcMessage) -> str:
        return ctx.llm.generate(str(message.payload))


@pytest.mark.parametrize("wrap", [False, True], ids=["sdk-error", "own-provider-error"])
def test_a_failure_that_quotes_the_key_leaves_it_nowhere(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, *, wrap: bool
) -> None:
    config = cf.Config(llm=cf.LLMConfig(api_key=KEY, model="v-1"), runtime=cf.RuntimeConfig(call_timeout=2.0))
    provider = _VendorProvider(config.llm, wrap=wrap)
    path = tmp_path / "journal"
    caplog.set_level(logging.DEBUG)
    with cf.Runtime.open(path, config=config, behaviors={"asker": _Asker}, llm_provider=provider) as rt:
        rt.spawn("a", behavior="asker")
        with pytest.raises(cf.IpcHandlerError) as caught:
            rt.bus.request("app", "a", "ask", "hello", timeout=2)
        assert isinstance(caught.value.__cause__, ProviderError)
        assert KEY not in _texts(caught.value)
        assert "***" in str(caught.value.__cause__)
    with Journal.open(path, readonly=True) as journal:
        events = [r.event for r in journal.read(stream="agent/a")]
    failed = [e.error for e in events if isinstance(e, LlmCallFailed)]
    details = [e.detail for e in events if isinstance(e, AgentFailed)]
    assert len(failed) == 1
    assert len(details) == 1
    assert KEY not in failed[0]
    assert KEY not in details[0]
    assert "***" in failed[0]
    assert KEY.encode() not in (path / "data.mdb").read_bytes()
    logged = "\n".join(
        r.getMessage() + (_texts(r.exc_info[1]) if r.exc_info and r.exc_info[1] else "")
        for r in caplog.records
    )
    assert KEY not in logged


def test_a_plain_client_masks_the_configured_key_and_keeps_the_cause() -> None:
    client = LLMClient(_VendorProvider(cf.LLMConfig(api_key=KEY)), {"api_key": KEY})
    with pytest.raises(ProviderError) as caught:
        client.generate("hello")
    assert KEY not in _texts(caught.value)
    assert isinstance(caught.value.__cause__, _AuthError)  # chained, scrubbed: what failed stays readable
    assert caught.value.__cause__.api_key == "***"


def test_without_a_configured_key_the_error_is_as_it_was() -> None:
    client = LLMClient(_VendorProvider(cf.LLMConfig(api_key="other-key")))
    with pytest.raises(ProviderError, match="other-key") as caught:
        client.generate("hello")
    assert isinstance(caught.value.__cause__, _AuthError)


class _Gathering:
    """Answers once ``parties`` calls are inside ``generate`` together (a barrier, no sleep)."""

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=2)

    def generate(self, prompt: str, **params: Any) -> str:  # noqa: ARG002
        self.barrier.wait()  # BrokenBarrierError if the runtime made the calls one at a time
        return "together"


def test_agents_call_one_provider_at_once() -> None:
    # README and LLMProvider's docstring: generate is called from every agent's thread at
    # once, so a provider of one's own is thread-safe (a doc pin: it held before)
    provider = _Gathering(4)
    config = {"runtime": {"call_timeout": 3.0}}
    with cf.Runtime.open(None, config=config, behaviors={"asker": _Asker}, llm_provider=provider) as rt:
        for i in range(4):
            rt.spawn(f"a{i}", behavior="asker")
        with ThreadPoolExecutor(4) as pool:
            replies = list(
                pool.map(lambda i: rt.bus.request("app", f"a{i}", "ask", "hi", timeout=3), range(4))
            )
    assert [r.payload for r in replies] == ["together"] * 4

"""The LLM client's promises (``actors/_llm.py``) that a third mutation test found no test held.

Each test names the mutant it kills and what a docstring or README.md promises: the order
of ``turn``'s checks, the session it journals, the turn id of a timed-out turn's answer,
the journaled prompt hash, a provider's output that is no UTF-8 or a ``str`` subclass, and
the HTTP provider's URL check, argument check, error text and key masking (a local
``http.server`` on 127.0.0.1 writes raw answers, as in ``test_llm_key_leaks``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from cogfabric.actors import (
    ActorTimeoutError,
    AgentContext,
    AgentNotFoundError,
    FakeClock,
    InvalidConfigError,
    LLMConfig,
    OpenAICompatibleProvider,
    ProviderError,
    Runtime,
    ScriptedProvider,
    SessionNotFoundError,
    _llm,
)
from cogfabric.events import IpcMessage, LlmCallFailed, LlmOutputRecorded, Message, PromptRejected

from .test_llm_key_leaks import KEY, _answer, _Raw
from .test_llm_pins import _events
from .test_supervision import _output_records, _short_call_timeout_once_answered, _stall

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


@pytest.fixture
def server(serve_http: Callable[..., str]) -> str:
    _Raw.parts = []
    _Raw.release.clear()
    return serve_http(_Raw, _Raw.release)


class _Keeper:
    """Keeps its ``ctx.llm`` for the test to call after the agent is killed."""

    kept: ClassVar[list[Any]] = []

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> str:  # noqa: ARG002
        _Keeper.kept.append(ctx.llm)
        return "kept"


def test_a_blank_turn_of_a_client_kept_past_its_agents_kill_raises_agent_not_found(tmp_path: Path) -> None:
    # mutant: turn() ran the gate's text checks before _check_open. README: "a call made after
    # the kill raises AgentNotFoundError before the gate"; turn: checked "as generate"
    _Keeper.kept = []
    provider = ScriptedProvider(["never"])
    with Runtime.open(
        tmp_path / "j", clock=FakeClock(), behaviors={"k": _Keeper}, llm_provider=provider
    ) as rt:
        rt.spawn("k", behavior="k")
        rt.bus.request("x", "k", "keep", timeout=10)
        session = rt.memory.create_session("u")
        rt.kill("k")

        with pytest.raises(AgentNotFoundError):
            _Keeper.kept[0].turn(session, "   ")

    assert not [e for e in _events(tmp_path / "j") if isinstance(e, PromptRejected)]
    assert provider.calls == []


def test_a_turn_of_an_unknown_session_leaves_no_session_to_later_calls(tmp_path: Path) -> None:
    # mutant: turn() set the thread's session before add_turn_message, outside its finally.
    # PromptRejected/LlmOutputRecorded.session is None for a call outside a turn
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        llm = rt.llm(ScriptedProvider(["answer"]))
        with pytest.raises(SessionNotFoundError):
            llm.turn("no-such-session", "hi")
        assert llm.generate("a plain call") == "answer"
        with pytest.raises(ValueError, match="white space"):
            llm.generate(" ")

    records = [e for e in _events(tmp_path / "j") if isinstance(e, LlmOutputRecorded | PromptRejected)]
    assert [(type(e).__name__, e.session) for e in records] == [
        ("LlmOutputRecorded", None),
        ("PromptRejected", None),
    ]


def test_a_timed_out_turns_answer_keeps_the_turns_id(tmp_path: Path) -> None:
    # mutant: the answer queued by _add_later after the output record timed out had no turn id.
    # turn(): in a session whose messages carry turn ids, "it and the answer get a fresh one"
    provider = ScriptedProvider(["the answer"])
    with Runtime.open(tmp_path / "j", clock=FakeClock(), llm_provider=provider) as runtime:
        session = runtime.memory.create_session("u")
        runtime.memory.add_structured_message(session, Message(role="user", content="hi", turn_id="t1"))
        gate = _stall(runtime, _output_records)
        try:
            # short once the provider answered: the turn's question keeps the runtime's own
            with _short_call_timeout_once_answered(runtime, provider, 0.3), pytest.raises(ActorTimeoutError):
                runtime.llm().turn(session, "question")
        finally:
            gate.set()
        runtime.flush()
        question, answer = runtime.memory.get_messages(session)[-2:]

    assert (question.content, answer.content) == ("question", "the answer")
    assert question.turn_id == answer.turn_id != "t1"
    assert answer.turn_id.startswith("turn-")


def test_an_outputs_record_holds_the_hash_of_the_prompt_sent(tmp_path: Path) -> None:
    # mutant: LlmOutputRecorded hashed the output. README: "an output or a failure [keeps] its
    # hash" (the prompt's); a turn's is the rendered window the provider got
    provider = ScriptedProvider(["first", "second"])
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        llm = rt.llm(provider)
        session = rt.memory.create_session("u")
        llm.generate("what is X?")
        llm.turn(session, "and Y?")

    outputs = [e for e in _events(tmp_path / "j") if isinstance(e, LlmOutputRecorded)]
    assert [e.prompt_hash for e in outputs] == [_llm.prompt_hash(p) for p in provider.calls]
    assert provider.calls[0] == "what is X?"


def test_an_output_of_no_utf8_is_a_journaled_provider_failure(tmp_path: Path) -> None:
    # mutant: generate() called on_output outside its ProviderError handling. README: the
    # client journals "each provider failure (LlmCallFailed, with the ProviderError the caller gets)"
    provider = ScriptedProvider(["lone \udc80"])
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        session = rt.memory.create_session("u")
        with pytest.raises(ProviderError) as caught:
            rt.llm(provider).turn(session, "hi")
        messages = [m.role for m in rt.memory.get_messages(session)]

    events = _events(tmp_path / "j")
    (failed,) = [e for e in events if isinstance(e, LlmCallFailed)]
    assert (failed.session, failed.error) == (session, str(caught.value))
    assert failed.prompt_hash == _llm.prompt_hash(provider.calls[0])
    assert not [e for e in events if isinstance(e, LlmOutputRecorded)]
    assert messages == ["system", "user"]


class _Answer(str):
    """A str subclass a provider may return (a library's own text type)."""

    __slots__ = ()


def test_a_providers_str_subclass_output_is_returned_and_journaled_as_plain_text(tmp_path: Path) -> None:
    # mutant: _call_provider returned the subclass as it was. "a subclass's text, plain, as the
    # journal stores it": the caller gets a plain str, the journal the text
    provider = ScriptedProvider(lambda prompt: _Answer(f"said {prompt}"))
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        output = rt.llm(provider).generate("hi")

    assert type(output) is str
    assert output == "said hi"
    (recorded,) = [e for e in _events(tmp_path / "j") if isinstance(e, LlmOutputRecorded)]
    assert recorded.output == "said hi"


@pytest.mark.parametrize("url", ["http://:8000/v1", "https://:443"])
def test_a_base_url_with_a_port_but_no_host_is_refused(url: str) -> None:
    # mutant: _check_base_url tested the netloc, not the host. InvalidConfigError: "base_url
    # is not an http(s) URL with a host"
    with pytest.raises(InvalidConfigError, match="names no host"):
        OpenAICompatibleProvider(LLMConfig(model="m", base_url=url))


def test_max_answer_bytes_of_true_is_refused() -> None:
    # mutant: the bool check dropped (True is 1). "ValueError: max_answer_bytes is not positive"
    # (a positive int, not a bool)
    config = LLMConfig(model="m", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ValueError, match="max_answer_bytes"):
        OpenAICompatibleProvider(config, max_answer_bytes=True)


def test_a_network_error_without_text_is_named_by_its_type(monkeypatch: pytest.MonkeyPatch) -> None:
    # mutant: the message took str(error) alone, "" for ConnectionResetError(): "failed: " said nothing
    def reset(*_args: object, **_kwargs: object) -> None:
        raise ConnectionResetError

    monkeypatch.setattr(_llm._NO_REDIRECTS, "open", reset)
    provider = OpenAICompatibleProvider(LLMConfig(model="m", base_url="http://127.0.0.1:9/v1", timeout=5))

    with pytest.raises(ProviderError) as caught:
        provider.generate("hi")

    assert str(caught.value).endswith("/v1/chat/completions failed: ConnectionResetError()")
    assert isinstance(caught.value.__cause__, ConnectionResetError)


def _chain_of(links: int) -> OSError:
    """An error whose cause chain is ``links`` errors long."""
    error = OSError("link 0")
    for n in range(1, links):
        outer = OSError(f"link {n}")
        outer.__cause__ = error
        error = outer
    return error


@pytest.mark.parametrize(("links", "chained"), [(_llm._CHAIN_DEPTH, True), (_llm._CHAIN_DEPTH + 1, False)])
def test_a_cause_chain_longer_than_the_scrubbed_depth_is_not_chained(
    monkeypatch: pytest.MonkeyPatch, links: int, chained: bool
) -> None:
    # mutant: the depth check was off by one (a chain of _CHAIN_DEPTH + 1 was chained with its
    # last error not scrubbed of the key). _CHAIN_DEPTH: the errors of the chain scrubbed
    error = _chain_of(links)

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise error

    monkeypatch.setattr(_llm._NO_REDIRECTS, "open", refuse)
    config = LLMConfig(model="m", base_url="http://127.0.0.1:9/v1", api_key=KEY, timeout=5)

    with pytest.raises(ProviderError) as caught:
        OpenAICompatibleProvider(config).generate("hi")

    assert (caught.value.__cause__ is error) is chained
    said = "(its cause is not chained: it held the API key, or too long a chain to clear)"
    assert str(caught.value).endswith(said) is not chained


@pytest.mark.parametrize("size", [4, len(KEY) - 1], ids=["first-4", "all-but-last"])
def test_an_error_body_ending_in_the_keys_start_shows_none_of_it(server: str, size: int) -> None:
    # mutants: the loop left an ending of exactly _KEY_START (4) of the key's characters, or of
    # all but its last. _KEY_START: "the fewest of the key's first characters masked ... (3 show at most)"
    body = f'{{"error": "bad key {KEY[:size]}'.encode()
    _Raw.parts = [_answer("401 Unauthorized", body)]
    provider = OpenAICompatibleProvider(LLMConfig(model="m", base_url=server, api_key=KEY, timeout=5))

    with pytest.raises(ProviderError, match="HTTP Error 401") as caught:
        provider.generate("hi")

    assert str(caught.value).endswith(': {"error": "bad key ***')


def test_a_read_cut_inside_a_non_ascii_character_of_the_key_shows_none_of_it(server: str) -> None:
    # mutants: the U+FFFD of a read cut inside a character was not stripped before the key's start
    # was looked for, or the mask was cut from the text with it ("s***"). A key may hold Latin-1
    key = "sk-p\xe9-Zx81Qm4Tt0Lr9Vb2"
    body = f'{{"error": "bad key {key}"}}'.encode()
    cut = body.index(key.encode()) + len("sk-p") + 1  # inside the two bytes of "é"
    _Raw.parts = [_answer("401 Unauthorized", body[:cut], length=len(body)), body[cut:]]
    provider = OpenAICompatibleProvider(LLMConfig(model="m", base_url=server, api_key=key, timeout=5))

    with pytest.raises(ProviderError, match="HTTP Error 401") as caught:
        provider.generate("hi")

    assert str(caught.value).endswith(': {"error": "bad key ***')

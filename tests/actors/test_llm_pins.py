"""The LLM client's promises (``actors/_llm.py``) that a mutation test found no test held.

Each test names what a docstring or README.md promises of ``LLMConfig``'s limits, the
HTTP provider (its answer limit, its error messages, which never hold the API key), the
journal's records of refusals and failures, and ``render_messages``. The HTTP provider
talks to a local ``http.server`` on 127.0.0.1 that answers each prompt as its test set it.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import threading
import traceback
import urllib.error
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from cogfabric.actors import (
    ActorTimeoutError,
    AgentContext,
    Config,
    FakeClock,
    InvalidArgumentError,
    LLMConfig,
    OpenAICompatibleProvider,
    PromptTooLongError,
    ProviderError,
    Runtime,
    RuntimeClosedError,
    ScriptedProvider,
    _llm,
    render_messages,
)
from cogfabric.events import (
    IpcMessage,
    LlmCallFailed,
    LlmOutputRecorded,
    Message,
    PromptRejected,
    ToolCall,
    ToolCallFunction,
)
from cogfabric.store import Journal

from .test_supervision import _short_call_timeout, _stall

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from cogfabric.events import Event

KEY = "sk-pin-secret-7"


def _completion(*contents: object) -> bytes:
    """An OpenAI chat-completions answer with one choice per content."""
    choices = [{"message": {"role": "assistant", "content": c}} for c in contents]
    return json.dumps({"choices": choices}).encode()


class _Answers(http.server.BaseHTTPRequestHandler):
    """Answers a prompt with what ``answers`` holds for it: a status, a reason phrase and a body."""

    answers: ClassVar[dict[str, tuple[int, str | None, bytes]]] = {}
    received: ClassVar[list[dict[str, Any]]] = []
    release: ClassVar[threading.Event] = threading.Event()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Answers.received.append(
            {
                "auth": self.headers.get("Authorization"),
                "content_type": self.headers.get("Content-Type"),
                **body,
            }
        )
        prompt = body["messages"][0]["content"]
        if prompt == "hold":  # headers that trickle, a byte each 0.1 s, until the test ends
            with contextlib.suppress(OSError):
                self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                while not _Answers.release.wait(0.1):
                    self.wfile.write(b"a")
                    self.wfile.flush()
            return
        status, reason, data = _Answers.answers[prompt]
        self.send_response(status, reason)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        with contextlib.suppress(OSError):  # a client that refused the answer hung up
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Quiet."""


@pytest.fixture
def server(serve_http: Callable[..., str]) -> str:
    _Answers.answers = {}
    _Answers.received = []
    _Answers.release.clear()
    return serve_http(_Answers, _Answers.release)


def _events(path: Path) -> list[Event]:
    with Journal.open(path, readonly=True) as journal:
        return [r.event for r in journal.read()]


def test_a_limit_of_one_is_positive_and_so_kept() -> None:
    # LLMConfig: max_prompt_length and max_tokens are the limit "when positive"; only 0 or less is the default
    config = LLMConfig(max_prompt_length=1, max_tokens=1)

    assert (config.prompt_limit, config.completion_tokens) == (1, 1)


def test_the_default_answer_limit_is_16_mib(server: str) -> None:
    # OpenAICompatibleProvider: the answer is read "up to max_answer_bytes (16 MiB by default)"
    _Answers.answers["huge"] = (200, None, b" " * ((16 << 20) + 1))
    provider = OpenAICompatibleProvider(LLMConfig(model="m", base_url=server, timeout=30))

    with pytest.raises(ProviderError, match=r"longer than 16777216 bytes \(max_answer_bytes\)"):
        provider.generate("huge")


def test_an_answer_of_exactly_max_answer_bytes_is_read(server: str) -> None:
    # "read up to max_answer_bytes: a longer one is refused": the limit itself passes
    data = _completion("ok")
    _Answers.answers["hi"] = (200, None, data)
    config = LLMConfig(model="m", base_url=server, timeout=5)

    assert OpenAICompatibleProvider(config, max_answer_bytes=len(data)).generate("hi") == "ok"
    with pytest.raises(ProviderError, match="max_answer_bytes"):
        OpenAICompatibleProvider(config, max_answer_bytes=len(data) - 1).generate("hi")


def test_the_providers_name_is_config_llm_provider_and_is_journaled(server: str, tmp_path: Path) -> None:
    # README: llm.provider is "a name only (empty: openai-compatible)"; the journal records a provider's name
    _Answers.answers["hi"] = (200, None, _completion("ok"))
    llm = {"provider": "acme", "base_url": server, "model": "m", "timeout": 5}
    with Runtime.open(tmp_path / "j", config={"llm": llm}, clock=FakeClock()) as runtime:
        assert runtime.llm().generate("hi") == "ok"

    (output,) = [e for e in _events(tmp_path / "j") if isinstance(e, LlmOutputRecorded)]
    assert (output.provider, output.model) == ("acme", "m")


def test_the_configurations_extra_fields_are_sent(server: str) -> None:
    # the HTTP provider sends the configuration's extra, and a call's params, as further request fields
    _Answers.answers["hi"] = (200, None, _completion("ok"))
    config = LLMConfig(model="m", base_url=server, timeout=5, extra={"temperature": 0.3})

    assert OpenAICompatibleProvider(config).generate("hi", top_p=0.5) == "ok"

    assert (_Answers.received[-1]["temperature"], _Answers.received[-1]["top_p"]) == (0.3, 0.5)


def test_no_authorization_header_is_sent_without_an_api_key(server: str) -> None:
    # api_key "" is no key (a local server): the request carries no "Bearer " header with nothing in it
    _Answers.answers["hi"] = (200, None, _completion("ok"))

    assert OpenAICompatibleProvider(LLMConfig(model="m", base_url=server, timeout=5)).generate("hi") == "ok"

    assert _Answers.received[-1]["auth"] is None


def test_a_completion_that_is_not_text_is_a_provider_error(server: str) -> None:
    # generate -> str; "an answer without a completion" is a ProviderError (a tool call's content is null)
    _Answers.answers["hi"] = (200, None, _completion(None))
    provider = OpenAICompatibleProvider(LLMConfig(model="m", base_url=server, timeout=5))

    with pytest.raises(ProviderError, match="not text"):
        provider.generate("hi")


def test_the_answer_is_the_first_choice(server: str) -> None:
    # OpenAI's API shape: with several choices (n=2) the completion is choices[0]
    _Answers.answers["hi"] = (200, None, _completion("first", "second"))
    provider = OpenAICompatibleProvider(LLMConfig(model="m", base_url=server, timeout=5))

    assert provider.generate("hi", n=2) == "first"


def test_a_timeout_message_never_holds_the_api_key_in_the_url(server: str) -> None:
    # README: "no error message holds the api_key", also one whose base_url carries it in a query
    # (the headers trickle: the socket never times out, the call's own deadline does)
    config = LLMConfig(model="m", base_url=f"{server}?key={KEY}", api_key=KEY, timeout=0.5)

    with pytest.raises(ProviderError, match="no whole answer") as caught:
        OpenAICompatibleProvider(config).generate("hold")

    assert KEY not in str(caught.value)


def test_an_http_error_message_never_holds_the_api_key_in_the_url_or_reason(server: str) -> None:
    # README: "no error message holds the api_key": not the URL's query, nor a status line echoing it
    _Answers.answers["hi"] = (401, f"bad key {KEY}", b"")
    config = LLMConfig(model="m", base_url=f"{server}?key={KEY}", api_key=KEY, timeout=5)

    with pytest.raises(ProviderError, match="HTTP Error 401") as caught:
        OpenAICompatibleProvider(config).generate("hi")

    assert KEY not in str(caught.value)


def test_an_http_errors_reason_is_kept_printable(server: str) -> None:
    # the server's reason is kept "printable, one line": no terminal escape or NUL reaches a log or journal
    _Answers.answers["hi"] = (500, None, b"boom \x1b[2J\x00 over")
    provider = OpenAICompatibleProvider(LLMConfig(model="m", base_url=server, timeout=5))

    with pytest.raises(ProviderError) as caught:
        provider.generate("hi")

    message = str(caught.value)
    assert message.endswith(": boom ?[2J? over")
    assert message.isprintable()


def test_an_http_error_without_a_body_ends_with_its_status(server: str) -> None:
    # the reason's detail is "" if none: no dangling ": " after the status
    _Answers.answers["hi"] = (500, None, b"")
    provider = OpenAICompatibleProvider(LLMConfig(model="m", base_url=server, timeout=5))

    with pytest.raises(ProviderError) as caught:
        provider.generate("hi")

    assert str(caught.value).endswith("failed: HTTP Error 500: Internal Server Error")


def test_a_refused_non_text_or_blank_prompt_is_journaled_with_its_length(tmp_path: Path) -> None:
    # README: the client journals "every refusal", and "a refusal keeps its length"
    provider = ScriptedProvider(["unused"])
    with Runtime.open(tmp_path / "j", clock=FakeClock(), llm_provider=provider) as runtime:
        llm = runtime.llm()
        for prompt in (b"bytes", "   "):
            with pytest.raises(InvalidArgumentError, match=r"^invalid argument provided"):
                llm.generate(prompt)  # type: ignore[arg-type]

    rejected = [e for e in _events(tmp_path / "j") if isinstance(e, PromptRejected)]
    assert [(e.reason, e.length, e.limit) for e in rejected] == [("not_text", 0, 8192), ("blank", 3, 8192)]
    assert provider.calls == []


def test_a_provider_failure_is_journaled_up_to_1000_characters(tmp_path: Path) -> None:
    # LlmCallFailed.error: "the ProviderError's message ... (cut to 1,000 characters)", not fewer
    def down(prompt: str) -> str:  # noqa: ARG001 - a provider's signature
        raise ConnectionError("x" * 1500)

    with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime, pytest.raises(ProviderError) as caught:
        runtime.llm(ScriptedProvider(down)).generate("hi")

    (failed,) = [e for e in _events(tmp_path / "j") if isinstance(e, LlmCallFailed)]
    assert failed.error == str(caught.value)[:1000]


def test_a_provider_that_finds_the_runtime_closed_raises_runtime_closed(tmp_path: Path) -> None:
    # a provider using the runtime that closed under it: the caller hears RuntimeClosedError, no ProviderError
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:

        def closed(prompt: str) -> str:  # noqa: ARG001 - a provider's signature
            raise RuntimeClosedError

        with pytest.raises(RuntimeClosedError):
            runtime.llm(ScriptedProvider(closed)).generate("hi")

    assert not [e for e in _events(tmp_path / "j") if isinstance(e, LlmCallFailed)]


def test_render_messages_shows_a_message_without_content_or_calls_as_role_colon() -> None:
    # render_messages: "A message is role: content", an empty content too
    window = [Message(role="user", content="hi"), Message(role="assistant", content="")]

    assert render_messages(window) == "user: hi\nassistant: "


def test_render_messages_shows_the_calls_of_the_last_turns_first_message_whole() -> None:
    # render_messages: in the last turn each tool call is a line "role tool call <id>: <name>(<arguments>)",
    # also in its first message (a window of no user message is one turn, from index 0)
    search = ToolCall(id="c1", function=ToolCallFunction(name="search", arguments='{"q": "x"}'))
    window = [Message(role="assistant", content="", tool_calls=[search])]

    assert render_messages(window) == 'assistant tool call c1: search({"q": "x"})'


def test_an_http_errors_cause_never_holds_the_api_key(server: str) -> None:
    # ProviderError's cause "says why" and is printed with it in every traceback and
    # log.exception: the chained HTTPError must not carry a status line or URL echoing the key
    _Answers.answers["hi"] = (401, f"bad key {KEY}", b"")
    config = LLMConfig(model="m", base_url=f"{server}?key={KEY}", api_key=KEY, timeout=5)

    with pytest.raises(ProviderError, match="HTTP Error 401") as caught:
        OpenAICompatibleProvider(config).generate("hi")

    assert caught.value.__cause__ is not None
    printed = "".join(traceback.format_exception(caught.value))
    assert "HTTP Error 401: bad key ***" in printed
    assert KEY not in printed
    assert KEY not in repr(caught.value.__cause__)


class _KeyInItsOwnWordsError(OSError):
    """A network error that prints a text no scrubbing of its fields reaches."""

    def __init__(self, key: str) -> None:
        super().__init__("refused")
        self._said = key[::-1]

    def __str__(self) -> str:
        return f"refused for {self._said[::-1]}"


def test_a_cause_that_still_prints_the_api_key_is_not_chained(monkeypatch: pytest.MonkeyPatch) -> None:
    # the key stays out of the printed chain even when the cause's own text cannot be scrubbed
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise _KeyInItsOwnWordsError(KEY)

    monkeypatch.setattr(_llm._NO_REDIRECTS, "open", refuse)
    config = LLMConfig(model="m", base_url="http://127.0.0.1:9/v1", api_key=KEY, timeout=5)

    match = r"refused for \*\*\*.*not chained: it held the API key"
    with pytest.raises(ProviderError, match=match) as caught:
        OpenAICompatibleProvider(config).generate("hi")

    assert caught.value.__cause__ is None
    assert KEY not in "".join(traceback.format_exception(caught.value))


# From a second mutation test of actors/_llm.py and actors/_memory_config.py.


class _Recording:
    """A provider that keeps the parameters of each call."""

    name = "recording"
    model = "r-1"

    def __init__(self) -> None:
        self.params: list[dict[str, Any]] = []

    def generate(self, prompt: str, **params: Any) -> str:  # noqa: ARG002 - a provider's signature
        self.params.append(params)
        return "ok"


def test_a_journaled_generate_and_turn_pass_their_parameters_to_the_provider(tmp_path: Path) -> None:
    # generate(prompt, **params) and turn(session_id, text, **params): the provider gets them
    # through runtime.llm(), as through a bare LLMClient
    provider = _Recording()
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
        llm = runtime.llm(provider)
        session = runtime.memory.create_session("u")

        assert llm.generate("hi", temperature=0.2) == "ok"
        assert llm.turn(session, "hi", temperature=0.3, top_p=0.5) == "ok"

    assert provider.params == [{"temperature": 0.2}, {"temperature": 0.3, "top_p": 0.5}]


def test_a_prompt_too_long_error_carries_the_prompts_length_in_code_points(tmp_path: Path) -> None:
    # PromptTooLongError(length, limit): the length is the refused prompt's, as the journal keeps it
    provider = ScriptedProvider(["unused"])
    config = {"llm": {"max_prompt_length": 10}}
    with (
        Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), llm_provider=provider) as runtime,
        pytest.raises(PromptTooLongError) as caught,
    ):
        runtime.llm().generate("字" * 10 + "😀")

    assert (caught.value.length, caught.value.limit) == (11, 10)
    (rejected,) = [e for e in _events(tmp_path / "j") if isinstance(e, PromptRejected)]
    assert (rejected.length, rejected.limit) == (11, 10)


def test_a_refused_prompt_of_no_utf8_is_journaled_with_its_length(tmp_path: Path) -> None:
    # README: "a refusal keeps its length", one with a lone surrogate too
    provider = ScriptedProvider(["unused"])
    with (
        Runtime.open(tmp_path / "j", clock=FakeClock(), llm_provider=provider) as runtime,
        pytest.raises(InvalidArgumentError, match="not valid UTF-8"),
    ):
        runtime.llm().generate("hi \ud800")

    (rejected,) = [e for e in _events(tmp_path / "j") if isinstance(e, PromptRejected)]
    assert (rejected.reason, rejected.length) == ("not_utf8", 4)
    assert provider.calls == []


def test_a_user_message_refused_before_it_joins_the_session_names_no_session(tmp_path: Path) -> None:
    # README: "a turn's output, provider failure and refused prompt window name its session
    # (a user message refused before it joins the session does not)"; PromptRejected.session
    # is None "for any other refusal", and so is the session of a later call outside a turn
    provider = ScriptedProvider(["answer"])
    with Runtime.open(tmp_path / "j", clock=FakeClock(), llm_provider=provider) as runtime:
        session = runtime.memory.create_session("u")
        llm = runtime.llm()
        with pytest.raises(InvalidArgumentError, match="only white space"):
            llm.turn(session, "   ")
        assert llm.generate("outside a turn") == "answer"

    events = _events(tmp_path / "j")
    (rejected,) = [e for e in events if isinstance(e, PromptRejected)]
    (output,) = [e for e in events if isinstance(e, LlmOutputRecorded)]
    assert (rejected.reason, rejected.session) == ("blank", None)
    assert output.session is None


class _RefusesABlankPrompt:
    """Asks its ctx.llm for a blank prompt and answers with the refusal's type."""

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> str:  # noqa: ARG002
        try:
            ctx.llm.generate("   ")
        except InvalidArgumentError as exc:
            return type(exc).__name__
        return "not refused"


def test_a_behaviors_refused_prompt_is_journaled_under_its_agent_naming_the_message(tmp_path: Path) -> None:
    # README: a ctx.llm client journals every refusal, and "names the message its agent is
    # handling as the cause" of what it journals
    behaviors = {"refuses": _RefusesABlankPrompt}
    provider = ScriptedProvider(["unused"])
    with Runtime.open(
        tmp_path / "j", clock=FakeClock(), behaviors=behaviors, llm_provider=provider
    ) as runtime:
        runtime.spawn("a", behavior="refuses")
        reply = runtime.bus.request("x", "a", "ask", timeout=10)

    events = _events(tmp_path / "j")
    (rejected,) = [e for e in events if isinstance(e, PromptRejected)]
    (request,) = [e for e in events if isinstance(e, IpcMessage) and e.topic == "ask"]
    assert reply.payload == "InvalidArgumentError"
    assert (rejected.agent, rejected.stream, rejected.cause) == ("a", "agent/a", request.id)
    assert provider.calls == []


def test_a_providers_own_provider_error_reaches_the_caller_as_it_is(server: str, tmp_path: Path) -> None:
    # a provider's ProviderError is not wrapped in another ("provider ... failed: ProviderError(...)"):
    # the caller and the journal get the HTTP provider's message, its cause the HTTP error
    _Answers.answers["hi"] = (503, None, b"overloaded")
    llm = {"base_url": server, "model": "m", "timeout": 5}
    with (
        Runtime.open(tmp_path / "j", config={"llm": llm}, clock=FakeClock()) as runtime,
        pytest.raises(ProviderError) as caught,
    ):
        runtime.llm().generate("hi")

    message = str(caught.value)
    status = "HTTP Error 503: Service Unavailable: overloaded"
    assert message == f"openai-compatible at {server}/chat/completions failed: {status}"
    assert isinstance(caught.value.__cause__, urllib.error.HTTPError)
    (failed,) = [e for e in _events(tmp_path / "j") if isinstance(e, LlmCallFailed)]
    assert failed.error == message


def test_the_prompt_is_sent_as_one_user_message_of_json_as_it_is(server: str) -> None:
    # generate: "POST /chat/completions with the prompt as one user message", a JSON body,
    # the gated prompt's text unchanged (no character replaced or escaped away)
    prompt = 'Grüße, 字 😀 "quoted"\n\tand a tab'
    _Answers.answers[prompt] = (200, None, _completion("ok"))

    assert OpenAICompatibleProvider(LLMConfig(model="m", base_url=server, timeout=5)).generate(prompt) == "ok"

    received = _Answers.received[-1]
    assert received["content_type"] == "application/json"
    assert received["messages"] == [{"role": "user", "content": prompt}]


def test_a_calls_parameters_replace_the_configurations_extra_and_max_tokens(server: str) -> None:
    # a call's params are request fields of that call: they win over the configuration's
    # extra, and both over the max_tokens the configuration asks for
    _Answers.answers["hi"] = (200, None, _completion("ok"))
    config = LLMConfig(model="m", base_url=server, timeout=5, max_tokens=7, extra={"temperature": 0.3})
    provider = OpenAICompatibleProvider(config)

    assert provider.generate("hi", temperature=0.9, max_tokens=5) == "ok"
    assert provider.generate("hi") == "ok"

    first, second = _Answers.received
    assert (first["temperature"], first["max_tokens"]) == (0.9, 5)
    assert (second["temperature"], second["max_tokens"]) == (0.3, 7)


def test_both_of_the_providers_own_fields_are_named_when_both_are_given() -> None:
    provider = OpenAICompatibleProvider(LLMConfig(model="m", base_url="http://127.0.0.1:9/v1"))

    # refused before anything is sent: no server listens there
    match = r"^invalid argument provided: messages and model are the provider's own, not a parameter$"
    with pytest.raises(InvalidArgumentError, match=match):
        provider.generate("hi", model="other", messages=[])


def test_an_answer_without_a_completion_is_quoted_only_in_its_start(server: str) -> None:
    # a large answer of the wrong shape does not go whole into the error, the log and the journal
    _Answers.answers["hi"] = (200, None, json.dumps({"result": "x" * 5000}).encode())
    provider = OpenAICompatibleProvider(LLMConfig(model="m", base_url=server, timeout=5))

    with pytest.raises(ProviderError, match="answered without a completion") as caught:
        provider.generate("hi")

    assert len(str(caught.value)) < 300


def test_render_messages_keeps_a_contents_white_space_and_line_breaks() -> None:
    # "nothing is escaped, so a content with line breaks spans lines": nor is it trimmed
    window = [Message(role="user", content="  indented\ncode  "), Message(role="assistant", content="\n")]

    assert render_messages(window) == "user:   indented\ncode  \nassistant: \n"


def test_the_prompt_hash_is_the_hex_blake2b_128_of_its_utf8() -> None:
    # prompt_hash: "The hex BLAKE2b-128 of a prompt": an auditor holding a prompt finds its records
    prompt = "what is X? 字"

    assert _llm.prompt_hash(prompt) == hashlib.blake2b(prompt.encode("utf-8"), digest_size=16).hexdigest()


def test_a_turn_whose_refused_windows_record_timed_out_raises_the_timeout(tmp_path: Path) -> None:
    # The refusal's record outlasting call_timeout is that timeout (ActorTimeoutError), also
    # for a client's first turn, which had no output of an earlier turn to look at
    config = Config(llm=LLMConfig(max_prompt_length=20))
    provider = ScriptedProvider(["unused"])
    with Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), llm_provider=provider) as runtime:
        session = runtime.memory.create_session("u")
        gate = _stall(runtime, lambda events: any(isinstance(e, PromptRejected) for e in events))
        try:
            with _short_call_timeout(runtime, 0.3), pytest.raises(ActorTimeoutError):
                runtime.llm().turn(session, "hi")
        finally:
            gate.set()
        runtime.flush()

    assert provider.calls == []

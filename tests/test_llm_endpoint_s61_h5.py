"""A researcher's self-hosted OpenAI-compatible server (vLLM, llama.cpp) that misbehaves.

A fake server on 127.0.0.1 answers slowly, hangs, cuts its body, answers 429/503 with
``Retry-After``, malformed JSON, a body without ``choices``, a body in another charset,
a redirect, chunked, tens of MB; agents call ``ctx.llm.turn`` at once against it.
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import json
import socket
import threading
import time
import tracemalloc
import urllib.request
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import pytest

import cogfabric as cf
from cogfabric.actors import (
    LLMClient,
    LLMConfig,
    OpenAICompatibleProvider,
    PromptTooLongError,
    ProviderError,
    Runtime,
    _llm,
)
from cogfabric.events import LlmCallFailed, LlmOutputRecorded
from tests.actors.test_llm_key_leaks import _chain, _held_texts

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from cogfabric.actors import AgentContext
    from cogfabric.events import IpcMessage

Durability = Literal["sync", "batch"]
KEY = "sk-s61h5-secret-key-0123456789"


def _completion(text: str) -> bytes:
    return json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]}).encode()


class _Answering(http.server.BaseHTTPRequestHandler):
    """An HTTP/1.1 handler that answers with a body of its length (its subclasses choose what)."""

    protocol_version = "HTTP/1.1"

    def _send(self, code: int, data: bytes, headers: tuple[tuple[str, str], ...] = ()) -> None:
        self.send_response(code)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(data)


class _Misbehaving(_Answering):
    """Answers by the prompt's last line (a turn's window ends ``user: <text>``)."""

    requests: ClassVar[list[str]] = []
    arrived: ClassVar[threading.Semaphore] = threading.Semaphore(0)
    release: ClassVar[threading.Event] = threading.Event()

    def _cut(self, prompt: str) -> None:
        """A Content-Length of 1000, fewer bytes, then the connection closes."""
        data = _completion("half") if prompt == "cut whole json" else b'{"choices": [{"mess'
        if prompt == "cut echo":  # a proxy's cut page that echoes the key
            data = f"<html>{self.headers['Authorization']}".encode()
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def do_POST(self) -> None:  # noqa: PLR0911, PLR0912 - one answer per prompt
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][0]["content"].rsplit("\n", 1)[-1].removeprefix("user: ")
        _Misbehaving.requests.append(prompt)
        _Misbehaving.arrived.release()
        if prompt == "hang":  # no answer until the test ends
            _Misbehaving.release.wait(30)
            self.close_connection = True
            return
        if prompt == "slow":  # a model that takes its time, within the call's timeout
            threading.Event().wait(0.3)
        if prompt.startswith("cut"):
            self._cut(prompt)
            return
        if prompt.startswith("status"):  # "status 429 2": the status, and Retry-After if given
            _, code, *after = prompt.split()
            headers = (("Retry-After", after[0]),) if after else ()
            self._send(int(code), b'{"error": {"message": "the server is busy"}}', headers)
            return
        if prompt == "flaky" and _Misbehaving.requests.count("flaky") == 1:  # busy the first time
            self._send(429, b'{"error": {"message": "the server is busy"}}', (("Retry-After", "0"),))
            return
        if prompt == "html":  # a proxy's page, which echoes the key it was sent
            page = f"<html><body>bad gateway for {self.headers['Authorization']}</body></html>"
            self._send(200, page.encode())
            return
        if prompt == "no choices":
            self._send(200, b'{"object": "chat.completion", "usage": {}}')
            return
        if prompt in ("latin-1", "utf-8 declared latin-1"):
            encoding = "latin-1" if prompt == "latin-1" else "utf-8"
            text = json.dumps({"choices": [{"message": {"content": "café"}}]}, ensure_ascii=False)
            declared = (("Content-Type", "application/json; charset=iso-8859-1"),)
            self._send(200, text.encode(encoding), declared)
            return
        if prompt == "redirect":
            self._send(307, b"", (("Location", "http://127.0.0.1:1/v1/chat/completions/"),))
            return
        if prompt == "chunked":
            data = _completion("chunked ok")
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for start in range(0, len(data), 7):
                part = data[start : start + 7]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
            return
        if prompt == "huge":  # 40 MiB of answer
            self.send_response(200)
            self.send_header("Content-Length", str(40 << 20))
            self.end_headers()
            with contextlib.suppress(OSError):
                for _ in range(40):
                    self.wfile.write(b" " * (1 << 20))
            return
        self._send(200, _completion(f"ok: {prompt}"))

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Quiet."""


@pytest.fixture
def server(serve_http: Callable[..., str]) -> str:
    _Misbehaving.requests = []
    _Misbehaving.arrived = threading.Semaphore(0)
    _Misbehaving.release = threading.Event()
    return serve_http(_Misbehaving, _Misbehaving.release)


def _provider(url: str, timeout: float = 5, **fields: Any) -> OpenAICompatibleProvider:
    config = LLMConfig(base_url=url, model="m", api_key=KEY, timeout=timeout, **fields)
    return OpenAICompatibleProvider(config)


# A connection closed before the Content-Length: http.client's read1 ends there without a
# word (read raises IncompleteRead), so a cut answer was read as if whole: a cut that left
# valid JSON was returned as the model's answer, and any other was "Expecting value".
def test_an_answer_cut_short_of_its_content_length_is_no_answer(server: str) -> None:
    with pytest.raises(ProviderError, match=r"IncompleteRead\(\d+ bytes read, \d+ more expected\)"):
        _provider(server).generate("cut whole json")


def test_a_cut_answer_says_it_was_cut_not_that_it_is_malformed(server: str) -> None:
    with pytest.raises(ProviderError) as caught:
        _provider(server).generate("cut")

    assert "more expected" in str(caught.value)
    assert "Expecting" not in str(caught.value)


def test_a_cut_answer_that_echoed_the_key_holds_it_nowhere_in_the_chain(server: str) -> None:
    # the IncompleteRead chained as the cause keeps what came, as its ``partial``
    with pytest.raises(ProviderError, match="more expected") as caught:
        _provider(server).generate("cut echo")

    assert not any(KEY in text for link in _chain(caught.value) for text in _held_texts(link))
    assert any(isinstance(link, http.client.IncompleteRead) for link in _chain(caught.value))


def test_an_answer_in_the_charset_it_declares_is_read(server: str) -> None:
    # was: "'utf-8' codec can't decode byte 0xe9", the answer lost
    assert _provider(server).generate("latin-1") == "café"


def test_utf8_comes_before_a_declared_charset(server: str) -> None:
    # a server that declares ISO-8859-1 by default and sends UTF-8 (JSON is UTF-8) gets no mojibake
    assert _provider(server).generate("utf-8 declared latin-1") == "café"


def test_an_answer_that_is_no_json_says_so_and_quotes_its_start_without_the_key(server: str) -> None:
    # was: "failed: Expecting value: line 1 column 1 (char 0)", naming neither JSON nor the page
    with pytest.raises(ProviderError) as caught:
        _provider(server).generate("html")

    text = str(caught.value)
    assert "the answer is not JSON text" in text
    assert "<html><body>bad gateway for Bearer ***" in text
    assert KEY not in text
    assert server in text


def test_a_redirect_says_where_it_pointed_and_is_not_followed(server: str) -> None:
    with pytest.raises(ProviderError, match="HTTP Error 307") as caught:
        _provider(server).generate("redirect")

    assert "a redirect, not followed, to 'http://127.0.0.1:1/v1/chat/completions/'" in str(caught.value)
    assert _Misbehaving.requests == ["redirect"]


@pytest.mark.parametrize(("status", "after"), [(429, "2"), (503, None), (500, None)])
def test_a_refusal_is_raised_once_with_its_status_endpoint_and_retry_after(
    server: str, status: int, after: str | None
) -> None:
    # no retry (none forever, none that ignores Retry-After): the caller reads the cause
    prompt = f"status {status}" + (f" {after}" if after else "")

    with pytest.raises(ProviderError) as caught:
        _provider(server).generate(prompt)

    assert f"HTTP Error {status}" in str(caught.value)
    assert f"{server}/chat/completions" in str(caught.value)
    assert "the server is busy" in str(caught.value)
    cause = caught.value.__cause__
    assert getattr(cause, "code", None) == status
    assert getattr(cause, "headers", {}).get("Retry-After") == after
    assert _Misbehaving.requests == [prompt]


def test_chunked_and_slow_answers_are_read(server: str) -> None:
    assert _provider(server).generate("chunked") == "chunked ok"
    assert _provider(server, timeout=3).generate("slow") == "ok: slow"


def test_an_answer_without_choices_is_a_provider_error_naming_what_came(server: str) -> None:
    # was: "openai-compatible answered without a completion", no endpoint among many servers
    with pytest.raises(ProviderError, match=r"answered without a completion: .*chat\.completion") as caught:
        _provider(server).generate("no choices")

    assert f"at {server}/chat/completions answered" in str(caught.value)


@pytest.mark.parametrize(
    "unit",
    [
        "\U0001f600",  # one astral code point (4 UTF-8 bytes, 2 UTF-16 units)
        "e\u0301",  # a letter and a combining mark: two code points, one glyph
        "\U0001f1eb\U0001f1f7",  # a flag: two code points
    ],
)
def test_the_gate_counts_code_points_at_the_limit_and_refuses_before_the_server(
    server: str, unit: str
) -> None:
    client = LLMClient(_provider(server))
    limit = client.max_prompt_length
    at_limit = (unit * (limit // len(unit) + 1))[:limit]
    over = at_limit + unit[0]

    assert len(at_limit) == 8192
    assert client.generate(at_limit).startswith("ok: ")
    with pytest.raises(PromptTooLongError) as caught:
        client.generate(over)

    assert (caught.value.length, caught.value.limit) == (8193, 8192)
    assert len(_Misbehaving.requests) == 1  # the refused prompt never reached the server


def test_a_failed_turn_is_retried_with_continue_turn_without_a_second_user_message(
    server: str, tmp_path: Path
) -> None:
    # README: a turn's user message stays in its session when the provider fails; turn()
    # again would add it twice, continue_turn() asks again with the window as it is
    with _open(tmp_path / "j", server, "sync") as runtime:
        llm = runtime.llm()
        session = runtime.memory.create_session("u")
        with pytest.raises(ProviderError, match="HTTP Error 429") as caught:
            llm.turn(session, "flaky")
        assert getattr(caught.value.__cause__, "headers", {}).get("Retry-After") == "0"

        assert llm.continue_turn(session) == "ok: flaky"
        messages = runtime.memory.get_messages(session)

    assert [(m.role, m.content) for m in messages if m.role != "system"] == [
        ("user", "flaky"),
        ("assistant", "ok: flaky"),
    ]
    assert messages[-1].turn_id == messages[-2].turn_id
    assert _Misbehaving.requests == ["flaky", "flaky"]


def test_a_failure_through_a_proxy_from_the_environment_names_the_proxy_not_its_password(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a cluster's http_proxy takes a local server's requests too: its refusal read as the server's
    monkeypatch.setenv("http_proxy", "http://someone:hunter2-proxy@127.0.0.1:9")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.setattr(_llm, "_NO_REDIRECTS", urllib.request.build_opener(_llm._RefuseRedirects))

    with pytest.raises(ProviderError) as caught:
        _provider(server).generate("hi")

    text = str(caught.value)
    assert "through the proxy at 127.0.0.1:9, from the environment's http_proxy" in text
    assert "hunter2" not in text
    assert "someone" not in text
    assert _Misbehaving.requests == []

    monkeypatch.setenv("no_proxy", "127.0.0.1")
    assert _provider(server).generate("hi") == "ok: hi"


class _Turner:
    """Answers each message with an LLM turn of a session of its own; a failure is its reply."""

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> str:
        session = ctx.memory.create_session("u", agent_id=ctx.agent_id)
        try:
            return ctx.llm.turn(session, str(message.payload))
        except ProviderError as exc:
            return f"ProviderError: {exc}"


_QUICK = ("slow", "cut", "status 429 2", "html", "no choices", "latin-1", "redirect", "chunked")


def _open(path: Path, url: str, durability: Durability, llm_timeout: float = 5) -> Runtime:
    config = cf.Config(
        journal=cf.JournalConfig(durability=durability),
        llm=LLMConfig(base_url=url, model="m", api_key=KEY, timeout=llm_timeout),
        runtime=cf.RuntimeConfig(call_timeout=1),
    )
    return Runtime.open(path, behaviors={"turner": _Turner}, config=config)


def _ask_all(runtime: Runtime, prompts: tuple[str, ...]) -> dict[str, str]:
    replies: dict[str, str] = {}

    def ask(index: int, prompt: str) -> None:
        replies[prompt] = str(runtime.bus.request("x", f"a{index}", "ask", prompt, timeout=10).payload)

    threads = [threading.Thread(target=ask, args=item) for item in enumerate(prompts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(15)
    return replies


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_agents_at_once_journal_each_failure_naming_the_agent_and_replay_calls_no_server(
    server: str, tmp_path: Path, durability: Durability, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "j"
    with _open(path, server, durability) as runtime:
        for index in range(len(_QUICK)):
            runtime.spawn(f"a{index}", behavior="turner")
        replies = _ask_all(runtime, _QUICK)
        runtime.flush()
        assert runtime._journal is not None
        records = [r.event for r in runtime._journal.read()]

    assert (replies["slow"], replies["latin-1"], replies["chunked"]) == ("ok: slow", "café", "chunked ok")
    failed = {e.agent: e for e in records if isinstance(e, LlmCallFailed)}
    outputs = {e.agent for e in records if isinstance(e, LlmOutputRecorded)}
    for index, prompt in enumerate(_QUICK):
        agent = f"a{index}"
        if replies[prompt].startswith("ProviderError"):
            assert failed[agent].session is not None
            assert replies[prompt].removeprefix("ProviderError: ")[:200] in failed[agent].error
        else:
            assert agent in outputs
    assert set(failed) == {"a1", "a2", "a3", "a4", "a6"}
    assert "HTTP Error 429" in failed["a2"].error
    assert f"{server}/chat/completions" in failed["a2"].error
    sent = len(_Misbehaving.requests)
    assert sent == len(_QUICK)

    with _open(path, server, durability):  # replay reads the records: no exchange is made again
        pass

    assert len(_Misbehaving.requests) == sent
    assert KEY.encode() not in (path / "data.mdb").read_bytes()
    assert not any(KEY in record.getMessage() or KEY in (record.exc_text or "") for record in caplog.records)


@pytest.mark.slow
@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_close_does_not_wait_for_a_hung_server_and_the_exchanges_end_after_their_timeout(
    server: str, tmp_path: Path, durability: Durability
) -> None:
    runtime = _open(tmp_path / "j", server, durability, llm_timeout=2)
    try:
        for index in range(6):
            runtime.spawn(f"a{index}", behavior="turner")
        for index in range(6):
            runtime.bus.send("x", f"a{index}", "ask", "hang" if index % 2 else "hi")
        for _ in range(6):
            assert _Misbehaving.arrived.acquire(timeout=10)
        started = time.monotonic()
    finally:
        runtime.close()
    closed_in = time.monotonic() - started

    assert closed_in < 1.8  # call_timeout (1 s) and some: not the exchanges' 2 s
    deadline = time.monotonic() + 10
    while any(t.name.startswith("cogfabric-llm-http") for t in threading.enumerate()):
        assert time.monotonic() < deadline, "an exchange outlived its timeout by far"
        threading.Event().wait(0.05)


@pytest.mark.slow
def test_a_huge_answer_is_refused_at_the_cap_without_holding_it(server: str) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(ProviderError, match=r"longer than 16777216 bytes \(max_answer_bytes\)"):
            _provider(server, timeout=30).generate("huge")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert peak < 24 << 20  # the 16 MiB cap and some, not the 40 MiB sent

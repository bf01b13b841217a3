"""Review of the HTTP provider against a misbehaving server (s61 h5's): the gaps its tests left.

An answer read to the connection's close, one exactly at ``max_answer_bytes``, a
redirect without a ``Location`` or with a long one that echoes the key, a non-JSON page
that echoes the key past the quoted start's cut, the declared charset's fallback, and a
proxy from the environment whose password holds "/", "?" or "#".
"""

from __future__ import annotations

import json
import urllib.request
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import LLMConfig, OpenAICompatibleProvider, ProviderError, _llm

from .test_llm_endpoint_s61_h5 import _Answering

if TYPE_CHECKING:
    from collections.abc import Callable

KEY = "sk-s61h6-secret-key-0123456789"
ANSWER = json.dumps({"choices": [{"message": {"content": "whole"}}]}).encode()
LONG_LOCATION = f"http://127.0.0.1:1/{'a' * 270}?key={KEY}"
"""The key starts before the quoted start's 300-character cut and ends after it."""


class _Edges(_Answering):
    """Answers by the prompt."""

    def do_POST(self) -> None:  # noqa: N802 - http.server calls it by this name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][0]["content"]
        if prompt == "to close":  # no Content-Length, not chunked: the body ends as the connection closes
            self.close_connection = True
            self.wfile.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
            self.wfile.write(ANSWER[:10])
            self.wfile.flush()
            self.wfile.write(ANSWER[10:])
            return
        if prompt == "302 nowhere":  # a broken proxy's redirect without a Location
            self._send(302, b"")
            return
        if prompt == "long location":
            self._send(307, b"", (("Location", LONG_LOCATION),))
            return
        if prompt == "padded echo":  # a page whose key, echoed far in, lands at the start once blanks go
            page = b" " * 1185 + f"Bearer {KEY}</html>".encode()
            self._send(200, page)
            return
        self._send(200, ANSWER)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Quiet."""


@pytest.fixture
def edges(serve_http: Callable[..., str]) -> str:
    return serve_http(_Edges)


def _provider(url: str, **kwargs: Any) -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider(LLMConfig(base_url=url, model="m", api_key=KEY, timeout=5), **kwargs)


def test_an_answer_without_content_length_is_read_to_the_close_whole(edges: str) -> None:
    # http.client's length is None then: no IncompleteRead for what has no declared length
    assert _provider(edges).generate("to close") == "whole"


def test_an_answer_of_exactly_max_answer_bytes_is_read_and_one_byte_less_refuses_it(edges: str) -> None:
    assert _provider(edges, max_answer_bytes=len(ANSWER)).generate("exact") == "whole"
    with pytest.raises(ProviderError, match=rf"longer than {len(ANSWER) - 1} bytes"):
        _provider(edges, max_answer_bytes=len(ANSWER) - 1).generate("exact")


def test_a_redirect_without_a_location_does_not_say_it_pointed_somewhere(edges: str) -> None:
    # the message used to end "(a redirect, not followed, to '')"
    with pytest.raises(ProviderError, match="HTTP Error 302") as caught:
        _provider(edges).generate("302 nowhere")

    assert "not followed, to" not in str(caught.value)


def test_a_long_location_that_echoes_the_key_shows_no_start_of_it_at_the_cut(edges: str) -> None:
    # the message's own masking finds the whole key only: the cut leaves a start of it
    with pytest.raises(ProviderError, match="a redirect, not followed, to") as caught:
        _provider(edges).generate("long location")

    assert KEY[: _llm._KEY_START] not in str(caught.value)
    assert "?key=***" in str(caught.value)


def test_a_page_that_echoes_the_key_past_the_quoted_start_shows_no_start_of_it(edges: str) -> None:
    with pytest.raises(ProviderError, match="the answer is not JSON text") as caught:
        _provider(edges).generate("padded echo")

    assert KEY[: _llm._KEY_START] not in str(caught.value)
    assert "Bearer ***" in str(caught.value)


@pytest.mark.parametrize(
    ("body", "charset"),
    [
        ('{"a": "café"}'.encode(), "iso-8859-1"),  # UTF-8 declared as another: UTF-8 comes first
        ('{"a": "café"}'.encode("utf-16"), "iso-8859-1"),  # a BOM: json's own detection
        ('{"a": "café"}'.encode("utf-16-le"), None),  # no BOM, no charset: json's detection too
        ('{"a": "café"}'.encode("cp1252"), "windows-1252"),
    ],
)
def test_the_answer_is_decoded_right_whatever_its_declared_charset(body: bytes, charset: str | None) -> None:
    assert _llm._json_answer(body, charset, KEY) == {"a": "café"}


@pytest.mark.parametrize("charset", ["x-no-such-charset", "base64", "utf-8\x7f"])
def test_a_charset_python_cannot_decode_text_in_is_a_value_error_naming_it(charset: str) -> None:
    # LookupError (an unknown name, a codec of bytes) is not let out as itself
    with pytest.raises(ValueError, match="declared charset") as caught:
        _llm._json_answer('{"a": "café"}'.encode("latin-1"), charset, KEY)

    assert not isinstance(caught.value, LookupError)


@pytest.fixture
def proxied(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """``proxied(url)``: the opener rebuilt with ``http_proxy`` set to ``url``, no ``no_proxy``."""
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)

    def use(proxy: str) -> None:
        monkeypatch.setenv("http_proxy", proxy)
        monkeypatch.setattr(_llm, "_NO_REDIRECTS", urllib.request.build_opener(_llm._RefuseRedirects))

    return use


@pytest.mark.parametrize(
    "proxy",
    [
        "http://someone:hun/ter2@127.0.0.1:9",
        "http://someone:hun?ter2@127.0.0.1:9",
        "http://someone:hun#ter2@127.0.0.1:9",
        "someone:hun/ter2@127.0.0.1:9",  # no scheme: urllib reads it as host and port all the same
    ],
)
def test_a_proxy_password_with_a_slash_question_mark_or_hash_is_not_shown(
    edges: str, proxied: Callable[[str], None], proxy: str
) -> None:
    # was: "through the proxy at someone:hun": urlsplit ends the host part at "/", "?" or "#",
    # where urllib, which connected to 127.0.0.1:9, takes all up to the last "@" as the user's
    proxied(proxy)

    with pytest.raises(ProviderError) as caught:
        _provider(edges).generate("hi")

    text = str(caught.value)
    assert "through the proxy at 127.0.0.1:9," in text
    assert "someone" not in text
    assert "hun" not in text


def test_a_host_no_proxy_lists_fails_without_a_proxy_named(
    edges: str, proxied: Callable[[str], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    proxied("http://127.0.0.1:9")
    monkeypatch.setenv("no_proxy", "127.0.0.1")

    with pytest.raises(ProviderError, match="HTTP Error 302") as caught:
        _provider(edges).generate("302 nowhere")

    assert "proxy" not in str(caught.value)


def test_an_https_url_with_only_http_proxy_set_names_no_proxy(proxied: Callable[[str], None]) -> None:
    proxied("http://127.0.0.1:9")

    assert _llm._proxy_note("https://127.0.0.1:1/v1/chat/completions") == ""
    assert "127.0.0.1:9" in _llm._proxy_note("http://127.0.0.1:1/v1/chat/completions")


def test_a_proxy_url_urllib_cannot_read_is_named_without_its_address(proxied: Callable[[str], None]) -> None:
    proxied("http:/someone:hunter2@127.0.0.1:9")  # one slash: urllib refuses it ("no authority")

    note = _llm._proxy_note("http://127.0.0.1:1/v1/chat/completions")

    assert "through the proxy (its address not shown)" in note
    assert "hunter2" not in note

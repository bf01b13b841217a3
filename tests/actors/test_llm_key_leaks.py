"""The API key stays out of what a failed LLM call or a config shows.

README: "no error message holds the api_key".

A server may echo the key in an error body that one read cuts inside it, in a header, or
in a page that is no JSON; a ``base_url`` may carry it in a query; ``rich`` pretty-prints a
config. The HTTP provider talks to a local ``http.server`` on 127.0.0.1 that writes raw
answers, in parts when a test needs a read to stop inside the key.
"""

from __future__ import annotations

import contextlib
import http.server
import threading
import urllib.error
from typing import TYPE_CHECKING, Any, ClassVar

import pytest
from rich.pretty import pretty_repr

from cogfabric.actors import InvalidConfigError, LLMConfig, OpenAICompatibleProvider, ProviderError
from cogfabric.config import Config

if TYPE_CHECKING:
    from collections.abc import Callable

KEY = "sk-proj-Zx81Qm4Tt0Lr9Vb2Nc7Wd5Ye3Uf6Ig1Hk0"


class _Raw(http.server.BaseHTTPRequestHandler):
    """Writes ``parts[0]`` (status line, headers and the start of a body) in one write.

    Any further part is written only once the test sets ``release``: the client's one
    read of the error body sees the first part alone, as a TCP segment or TLS record
    boundary leaves it on a real network.
    """

    parts: ClassVar[list[bytes]] = []
    release: ClassVar[threading.Event] = threading.Event()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        with contextlib.suppress(OSError):
            self.wfile.write(_Raw.parts[0])
            for part in _Raw.parts[1:]:
                _Raw.release.wait(10)
                self.wfile.write(part)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Quiet."""


@pytest.fixture
def server(serve_http: Callable[..., str]) -> str:
    _Raw.parts = []
    _Raw.release.clear()
    return serve_http(_Raw, _Raw.release)


def _answer(status: str, body: bytes, *, length: int | None = None, headers: str = "") -> bytes:
    size = len(body) if length is None else length
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{headers}Content-Length: {size}\r\n\r\n"
    return head.encode() + body


def _provider(server: str) -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider(LLMConfig(model="m", base_url=server, api_key=KEY, timeout=5))


def _chain(error: BaseException) -> list[BaseException]:
    links: list[BaseException] = []
    link: BaseException | None = error
    while link is not None and link not in links:
        links.append(link)
        link = link.__cause__ or link.__context__
    return links


def _held_texts(error: BaseException) -> list[str]:
    """The str and bytes an error holds in its args and attributes (one level down)."""
    texts: list[str] = []
    values = [*error.args, *vars(error).values()]
    for value in values:
        if isinstance(value, bytes | bytearray):
            texts.append(bytes(value).decode("latin-1"))
        elif isinstance(value, str):
            texts.append(value)
    for name in ("doc", "object", "partial", "headers"):
        value = getattr(error, name, None)
        if value is not None and not isinstance(value, bytes | str):
            texts.append(str(value))
        elif isinstance(value, bytes):
            texts.append(value.decode("latin-1"))
        elif isinstance(value, str):
            texts.append(value)
    return texts


# The HTTP error's reason (its body's start) shows none of the key, also where the one read
# of it stops inside the echoed key.
def test_an_error_body_read_that_ends_inside_the_echoed_key_shows_none_of_it(server: str) -> None:
    body = (
        f'{{"error": {{"message": "Incorrect API key provided: {KEY}", "code": "invalid_api_key"}}}}'.encode()
    )
    cut = body.index(KEY.encode()) + len(KEY) - 3  # the first read ends 3 characters before the key's end
    _Raw.parts = [_answer("401 Unauthorized", body[:cut], length=len(body)), body[cut:]]

    with pytest.raises(ProviderError, match="HTTP Error 401") as caught:
        _provider(server).generate("hi")

    assert KEY[:-3] not in str(caught.value)


def test_an_error_body_of_white_space_then_the_key_shows_none_of_it(server: str) -> None:
    # one read of 1200 bytes, white space collapsed, then 300 characters kept: the cut inside the key shows
    tail = f'"error": "bad key {KEY}"}}'.encode()
    pad = 1200 - tail.index(KEY.encode()) - (len(KEY) - 3)  # the 1200th byte is 3 before the key's end
    body = b"{" + b" " * (pad - 1) + tail  # an indented page
    _Raw.parts = [_answer("401 Unauthorized", body)]

    with pytest.raises(ProviderError, match="HTTP Error 401") as caught:
        _provider(server).generate("hi")

    assert KEY[:-3] not in str(caught.value)


# The chained cause's fields, not only its text, are without the key. README: "no error message
# holds the api_key, nor the error a ProviderError chains as its __cause__".
def test_a_json_decode_errors_doc_in_the_chain_does_not_hold_the_key(server: str) -> None:
    # a proxy answering 200 with a page that is no JSON and echoes the key
    _Raw.parts = [_answer("200 OK", f"<html>unknown key {KEY}</html>".encode())]

    with pytest.raises(ProviderError) as caught:
        _provider(server).generate("hi")

    assert not any(KEY in text for link in _chain(caught.value) for text in _held_texts(link))


def test_an_http_errors_headers_in_the_chain_do_not_hold_the_key(server: str) -> None:
    header = f'WWW-Authenticate: Bearer error="invalid_token", error_description="{KEY} is revoked"\r\n'
    _Raw.parts = [_answer("401 Unauthorized", b"", headers=header)]

    with pytest.raises(ProviderError, match="HTTP Error 401") as caught:
        _provider(server).generate("hi")

    cause = caught.value.__cause__
    assert cause is None or KEY not in str(cause.headers)  # type: ignore[attr-defined]


def test_a_unicode_errors_object_in_the_chain_does_not_hold_the_key_of_the_urls_query() -> None:
    # a typographic dash pasted into base_url: http.client refuses the request line, which holds the
    # query, and the UnicodeEncodeError keeps that line in its .object, which str() does not print
    config = LLMConfig(
        model="m", base_url=f"http://127.0.0.1:9/v1\u2013beta?key={KEY}", api_key=KEY, timeout=5
    )

    with pytest.raises(ProviderError, match="codec can't encode") as caught:
        OpenAICompatibleProvider(config).generate("hi")

    assert not any(KEY in text for link in _chain(caught.value) for text in _held_texts(link))


# A base_url with no host (a typo, "http:///v1") is shown without the key in its query.
def test_a_base_url_with_no_host_is_refused_without_showing_the_key_in_its_query() -> None:
    config = LLMConfig(model="m", base_url=f"http:///v1?key={KEY}", api_key=KEY)

    with pytest.raises(InvalidConfigError, match="names no host") as caught:
        OpenAICompatibleProvider(config)

    assert KEY not in str(caught.value)


# LLMConfig hides the key from repr, and from rich's pretty printer (msgspec's own __rich_repr__ shows it).
def test_rich_pretty_printing_a_config_does_not_show_the_key() -> None:
    config = Config(llm=LLMConfig(model="m", api_key=KEY))

    assert KEY not in repr(config)  # as promised
    assert KEY not in pretty_repr(config)


def test_the_chained_http_error_keeps_no_response_that_holds_the_key(server: str) -> None:
    # The chained HTTPError's headers were scrubbed, but its fp, the closed response,
    # kept the headers and status line as they came: cause.fp.headers showed the key.
    header = f'WWW-Authenticate: Bearer error_description="{KEY} is revoked"\r\n'
    _Raw.parts = [_answer(f"401 Bad key {KEY}", b"", headers=header)]

    with pytest.raises(ProviderError, match="HTTP Error 401") as caught:
        _provider(server).generate("hi")

    cause = caught.value.__cause__
    assert isinstance(cause, urllib.error.HTTPError)
    assert (cause.code, cause.reason) == (401, "Bad key ***")
    assert 'error_description="*** is revoked"' in str(cause.headers)
    for value in [*vars(cause).values(), *vars(getattr(cause, "fp", None) or object()).values()]:
        assert KEY not in repr(value)


def test_an_error_reason_ending_as_the_key_begins_is_kept_whole(server: str) -> None:
    # Only an ending of at least 4 of the key's first characters is masked: a reason
    # that ends in "s" is no start of "sk-..." cut by the read.
    _Raw.parts = [_answer("429 Too Many Requests", b"rate limited: too many requests")]

    with pytest.raises(ProviderError, match="HTTP Error 429") as caught:
        _provider(server).generate("hi")

    assert str(caught.value).endswith(": rate limited: too many requests")

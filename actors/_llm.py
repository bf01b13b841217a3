"""The prompt gate and the LLM client (spec §6), with a scripted and an HTTP provider.

The gate refuses, in this order and before any provider is called: an empty prompt, a
whitespace-only prompt (``InvalidArgumentError``), and a prompt of more than
``max_prompt_length`` code points (``PromptTooLongError``). Exactly the limit passes.
"""

from __future__ import annotations

import contextlib
import email.message
import hashlib
import http.client
import inspect
import itertools
import json
import logging
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import weakref
from collections.abc import Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Annotated, Any, Final, Protocol, cast, runtime_checkable

import msgspec

from cogfabric._errors import CogfabricError
from cogfabric.events import (
    ROLE_ASSISTANT,
    ROLE_TOOL_CALL,
    ROLE_USER,
    LlmCallFailed,
    LlmOutputRecorded,
    Message,
    PromptRejected,
)
from cogfabric.events._codec import journal_text, require_str

from ._cleaner import GO_SPACE, active_turn_start, summarise_tool_calls
from ._clock import bounded_wait
from ._core import printable, start_thread
from ._errors import (
    ActorError,
    ActorTimeoutError,
    ClockError,
    InvalidConfigError,
    RuntimeClosedError,
    SessionNotFoundError,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from cogfabric.events import Event

    from ._clock import Clock
    from ._memory import MemoryManager

__all__ = [
    "DEFAULT_MAX_PROMPT_LENGTH",
    "InvalidArgumentError",
    "JournaledLLM",
    "LLMClient",
    "LLMConfig",
    "LLMProvider",
    "OpenAICompatibleProvider",
    "PromptTooLongError",
    "ProviderError",
    "ScriptedProvider",
    "prompt_hash",
    "render_messages",
]

log = logging.getLogger(__name__)

DEFAULT_MAX_PROMPT_LENGTH: Final = 8192
"""The original's ``maxPromptLength``, in code points."""
DEFAULT_TIMEOUT: Final = 60.0
"""The original's ``defaultTimeoutSeconds``."""
DEFAULT_MAX_TOKENS: Final = 4096
"""The original's ``defaultMaxTokens``."""
DEFAULT_MAX_ANSWER_BYTES: Final = 16 << 20
"""The most bytes an HTTP provider reads of one answer (a completion of ``max_tokens`` is far less)."""
_READ_STEP: Final = 1 << 16
_ERROR_DETAIL: Final = 300
"""Characters of an HTTP error answer's body kept in the ``ProviderError`` (the server's reason)."""
_DETAIL_WAIT: Final = 0.5
"""Seconds an HTTP error waits for its body's first bytes (the server's reason)."""
_CHAIN_DEPTH: Final = 16
"""Errors of an HTTP failure's cause chain scrubbed of the API key (a chain is a few long)."""


class InvalidArgumentError(ActorError, ValueError):
    """Raised for a prompt the gate refuses before its length: empty or white space only, no str, or no UTF-8.

    Also for a request parameter that would replace the provider's own (``model``,
    ``messages``). Its message begins with the original's ``invalid argument provided``.
    """


class PromptTooLongError(ActorError, ValueError):
    """Raised for a prompt longer than the limit; the message is the original's exactly.

    ``length`` is the prompt's length and ``limit`` the limit, both in code points.
    """

    def __init__(self, length: int, limit: int) -> None:
        super().__init__(f"prompt exceeds maximum length of {limit} characters")
        self.length = length
        self.limit = limit


class NoLLMProviderError(ActorError, ValueError):
    """Raised for an LLM client asked of a runtime that has no provider (``ctx.llm``, ``runtime.llm()``).

    Also a ``ValueError``, as it was. Open the runtime with ``llm_provider=`` or
    ``config.llm.base_url``, or pass ``runtime.llm`` a provider.
    """


class ProviderError(ActorError):
    """Raised when a provider fails (HTTP error, malformed answer); ``__cause__`` says why.

    Neither its message nor, for the HTTP provider, the cause it chains holds the API key,
    in its text, headers or fields: a cause that would still hold it is not chained.
    """


class LLMConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``llm`` section of ``Config``, with the original's keys (spec §6.1)."""

    provider: str = ""
    api_key: str = ""
    base_url: Annotated[str, msgspec.Meta(pattern=r"^(https?://|$)")] = ""
    """An OpenAI-compatible API's URL, http or https (e.g. ``http://127.0.0.1:8000/v1``); empty: none."""
    model: str = ""
    timeout: float = DEFAULT_TIMEOUT
    """Seconds an HTTP provider waits for an answer; 0 (or less) means 60, and at most 1e9."""
    max_tokens: Annotated[int, msgspec.Meta(le=2**63 - 1)] = DEFAULT_MAX_TOKENS
    """Tokens an HTTP provider asks for; 0 (or less) means 4096, as the other limits' 0 does."""
    max_prompt_length: Annotated[int, msgspec.Meta(le=2**63 - 1)] = 0
    """Code points a prompt may have; 0 (or less) means 8192."""
    extra: dict[str, Any] = {}

    @property
    def prompt_limit(self) -> int:
        """The effective limit: ``max_prompt_length`` when positive, else 8192."""
        return self.max_prompt_length if self.max_prompt_length > 0 else DEFAULT_MAX_PROMPT_LENGTH

    @property
    def request_timeout(self) -> float:
        """The effective timeout: ``timeout`` when positive (at most ``MAX_WAIT``, 1e9 s), else 60.

        A socket cannot wait longer than about 9.2e9 s, and 0 would make it non-blocking.
        """
        return bounded_wait(self.timeout, DEFAULT_TIMEOUT)

    @property
    def completion_tokens(self) -> int:
        """The effective ``max_tokens``: the field when positive, else 4096.

        A YAML file that leaves the key at 0 means "the default", as it does for
        ``timeout`` and ``max_prompt_length``; an HTTP server would refuse 0.
        """
        return self.max_tokens if self.max_tokens > 0 else DEFAULT_MAX_TOKENS

    def __repr__(self) -> str:
        key = "***" if self.api_key else ""
        return f"LLMConfig(provider={self.provider!r}, model={self.model!r}, api_key={key!r})"

    def __rich_repr__(self) -> list[tuple[str, Any]]:
        """The fields for ``rich``'s pretty printer (msgspec's own shows them all), the key masked."""
        masked = {"api_key": "***"} if self.api_key else {}
        return [(name, masked.get(name, getattr(self, name))) for name in self.__struct_fields__]


def _checked_llm_config(config: object) -> LLMConfig:
    """``config`` (an ``LLMConfig``, a mapping of its fields, or None) with its field types checked.

    msgspec checks a Struct's field types only when it decodes one, so a hand-built
    ``LLMConfig(max_prompt_length="100")`` is caught here rather than at the first prompt.

    Raises:
        InvalidConfigError: a field is unknown or of the wrong type, or ``config`` is
            none of the three.

    """
    if config is None:
        return LLMConfig()
    try:
        if isinstance(config, LLMConfig):
            return msgspec.convert(msgspec.to_builtins(config), LLMConfig)
        if isinstance(config, Mapping):
            return msgspec.convert(config, LLMConfig)
    except msgspec.ValidationError as exc:
        raise InvalidConfigError(f"invalid LLM configuration: {exc}") from exc
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidConfigError(f"invalid LLM configuration: {exc}") from exc
    msg = f"an LLM configuration is an LLMConfig or a mapping, got {type(config).__name__}"
    raise InvalidConfigError(msg)


def _check_api_key(config: LLMConfig) -> LLMConfig:
    """Refuse an ``api_key`` with white space or control characters, without showing it.

    A key read from a file (``Path.read_text()``, a YAML block scalar) keeps its newline;
    sent on, the HTTP library refuses the header in an error that quotes the key, and
    the journal would keep that error for good.

    Raises:
        InvalidConfigError: the key holds such a character.

    """
    key = config.api_key
    if any(c.isspace() or not c.isprintable() for c in key):
        msg = (
            "invalid LLM configuration: api_key holds white space or a control character "
            "(a newline read from a file?); the key is not shown"
        )
        raise InvalidConfigError(msg)
    try:
        key.encode("latin-1")  # what http.client sends a header in
    except UnicodeEncodeError:
        msg = (
            "invalid LLM configuration: api_key holds a character an HTTP header cannot carry "
            "(outside Latin-1: a typographic dash or quote pasted in?); the key is not shown"
        )
        raise InvalidConfigError(msg) from None
    return config


def _check_base_url(config: LLMConfig) -> None:
    """Refuse a ``base_url`` with a user name or password in it (any '@'), without showing them.

    urllib sends no credentials from a URL (it would fail to connect to
    ``user:password@host``), and every error message names the URL: the password
    would be kept in the journal's ``LlmCallFailed`` for good. The key goes in ``api_key``.

    Raises:
        InvalidConfigError: the URL holds a user name or password, or has no host.

    """
    if "@" in config.base_url:
        # Anywhere: a password may hold "/", "?" or "#", which end the URL's host part
        # for urlsplit (``http://user:pa/ss@host`` is host "user", port "pa").
        msg = (
            "invalid LLM configuration: base_url holds a user name or password (an '@'; urllib "
            "sends neither: put the key in api_key); the URL is not shown"
        )
        raise InvalidConfigError(msg)
    try:
        parts = urllib.parse.urlsplit(config.base_url)
        parts.port  # noqa: B018 - urllib raises ValueError for a port that is no number
    except ValueError as exc:
        msg = f"invalid LLM configuration: base_url is not a URL ({exc})"
        raise InvalidConfigError(msg) from None
    if not parts.hostname:
        shown = _masked(config.base_url, _secret(config.api_key))
        msg = f"invalid LLM configuration: base_url {shown!r} names no host"
        raise InvalidConfigError(msg)


@runtime_checkable
class LLMProvider(Protocol):
    """What generates text: ``generate(prompt, **params) -> str``.

    That method is all a provider needs. A ``name`` and a ``model`` attribute, where a
    provider has them (any kind: plain, read-only property, class constant), are what
    the journal records of each call; without them (or where one is a method, which is
    not called: logged once) it records the provider's class name and an empty model.

    The runtime calls one provider from every agent's thread at once, unserialised: a
    provider keeps what it shares between calls (an SDK client, a counter) thread-safe.
    """

    def generate(self, prompt: str, **params: Any) -> str:  # noqa: ANN401 - provider-specific parameters
        """Generate a completion for ``prompt``."""
        ...


def _provider_label(provider: object, attribute: str) -> object:
    """A provider's ``name`` (its class name without one) or ``model`` ("" without one).

    What the journal records of a call. Read whatever the attribute is: a property
    that raises must not lose the call's record, nor turn a provider's failure into
    another error; its class name (or "") stands in then.
    """
    fallback = type(provider).__name__ if attribute == "name" else ""
    try:
        value = getattr(provider, attribute, fallback)
    except Exception:  # noqa: BLE001 - any failure of the user's property: the fallback is recorded
        log.warning("the provider's %s could not be read; %r is recorded instead", attribute, fallback)
        return fallback
    if callable(value):
        # a method (``def model(self)``) would be recorded as its repr, a memory address
        # that differs from run to run: not called (it is the user's code), and said once,
        # also when two threads make their first call at once (checked and marked under a lock)
        with _CALLABLE_LABELS_LOCK:
            warned = _CALLABLE_LABELS.setdefault(type(provider), set())
            first = attribute not in warned
            warned.add(attribute)
        if first:
            log.warning(
                "the provider's %s is a method, not a value (a plain attribute or a property); "
                "%r is recorded instead",
                attribute,
                fallback,
            )
        return fallback
    return value


_CALLABLE_LABELS: Final[weakref.WeakKeyDictionary[type, set[str]]] = weakref.WeakKeyDictionary()
"""The provider classes whose callable ``name`` or ``model`` was warned of (held weakly)."""
_CALLABLE_LABELS_LOCK: Final = threading.Lock()
"""Held while a label is checked against ``_CALLABLE_LABELS`` and marked there."""


class ScriptedProvider:
    """A deterministic provider for simulations and tests.

    ``script`` is either a sequence of outputs, returned in turn (cycling), or a
    function of the prompt. Every prompt it is called with is kept in ``calls``, for
    a test to look at; a long simulation passes ``keep_calls=False``, as ``cogfabric
    simulate`` does, so that they do not pile up (the journal holds each call's hash).

    Called from many threads at once (as the runtime calls a provider), a sequence
    hands out each output to exactly one call, in turn, and ``calls`` lists the prompts
    in the order they came in, which for a sequence is the order its outputs went out.
    A function script runs outside the provider's lock, on its caller's thread, and
    from every caller's thread at once: one that keeps state between calls (a counter,
    an iterator) guards it itself, or the answers go in a sequence. It may call this
    provider again, or a client of it (``ctx.llm``, ``runtime.llm()``), on its own
    thread or on another it waits for: the nested call is answered (and its prompt
    kept in ``calls``, after the prompt of the call it was made in) before the
    script returns.
    """

    def __init__(
        self,
        script: Iterable[str] | Callable[[str], str],
        *,
        name: str = "scripted",
        model: str = "script",
        keep_calls: bool = True,
    ) -> None:
        """Use ``script`` to answer.

        Raises:
            TypeError: ``script`` is neither callable nor a sequence (or iterator) of str
                outputs: a single str is refused (it would answer one character at a
                time; pass ``[text]``), as are a set or a mapping (no fixed order: a
                set's changes from process to process), None, and an output that is not
                a str.
            ValueError: ``script`` is an empty sequence.

        """
        self.name = name
        self.model = model
        self.calls: list[str] = []
        self._keep_calls = keep_calls
        self._lock = threading.Lock()
        """Held while a call takes its place: its prompt into ``calls``, a sequence's next output."""
        self._script: Callable[[str], str] | None = None
        self._outputs: Iterator[str] | None = None
        if callable(script):
            self._script = script
        else:
            unordered = isinstance(script, AbstractSet | Mapping)  # a set's order changes by process
            if isinstance(script, str | bytes) or unordered or not isinstance(script, Iterable):
                msg = (
                    "script is a sequence of outputs or a function of the prompt, got "
                    f"{type(script).__name__}"
                )
                if isinstance(script, str):
                    msg += " (it would answer one character at a time): pass [text] for one output"
                raise TypeError(msg)
            outputs = list(script)
            if not outputs:
                msg = "a scripted provider needs at least one output"
                raise ValueError(msg)
            bad = next((o for o in outputs if not isinstance(o, str)), None)
            if bad is not None:
                msg = f"a scripted output is a str, got {type(bad).__name__}"
                raise TypeError(msg)
            self._outputs = itertools.cycle(outputs)

    def generate(self, prompt: str, **params: Any) -> str:  # noqa: ANN401, ARG002 - a script ignores them
        """The next scripted output, or the script's answer to ``prompt``.

        The lock is not held while a function script runs: one that asks this provider
        again (on its thread, or on another it waits for) would wait for the lock for good.
        """
        with self._lock:
            if self._keep_calls:
                self.calls.append(prompt)
            if self._outputs is not None:
                return next(self._outputs)
        assert self._script is not None  # one of the two is set in __init__
        return self._script(prompt)


class OpenAICompatibleProvider:
    """A chat-completions provider over HTTP (OpenAI's API shape), with the standard library."""

    def __init__(
        self, config: LLMConfig | Mapping[str, Any], *, max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES
    ) -> None:
        """Talk to ``config.base_url`` (e.g. ``http://127.0.0.1:8000/v1``) as ``config.model``.

        The answer is read in steps, up to ``max_answer_bytes`` (16 MiB by default): a
        longer one is refused, not held in memory and journaled.

        Raises:
            InvalidConfigError: ``config`` is no ``LLMConfig`` (or mapping of its fields),
                a field has the wrong type, ``base_url`` is not an http(s) URL with a
                host (or holds a user name or password), ``model`` is empty (the
                original's "invalid argument provided: model is required"), or
                ``api_key`` holds white space, a control character or a character
                outside Latin-1.
            ValueError: ``base_url`` is empty, or ``max_answer_bytes`` is not positive.

        """
        config = _check_api_key(_checked_llm_config(config))
        if not config.base_url:
            msg = "an OpenAI-compatible provider needs base_url"
            raise ValueError(msg)
        _check_base_url(config)
        if config.model == "":
            # the original's NewClient refuses it too; sent on, a server answers 400 at the first call
            msg = "invalid argument provided: model is required (config.llm.model, beside base_url)"
            raise InvalidConfigError(msg)
        if (
            isinstance(max_answer_bytes, bool)
            or not isinstance(max_answer_bytes, int)
            or max_answer_bytes < 1
        ):
            msg = f"max_answer_bytes must be a positive int, got {max_answer_bytes!r}"
            raise ValueError(msg)
        self.name = config.provider or "openai-compatible"
        self.model = config.model
        self._config = config
        self._max_answer_bytes = max_answer_bytes
        # the path goes into the URL's path, before any query (``...?api-version=...``)
        parts = urllib.parse.urlsplit(config.base_url)
        self._url = urllib.parse.urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/chat/completions"))

    def generate(self, prompt: str, **params: Any) -> str:  # noqa: ANN401 - request fields
        """POST ``/chat/completions`` with the prompt as one user message.

        ``params`` (and the configuration's ``extra``) are further request fields, a
        call's over ``extra``'s and both over ``max_tokens``'s (as configured); the
        model and the messages are the provider's own (the gated prompt is what is
        sent, and the journal names this provider's model). The whole call, answer
        read included, takes at most ``timeout`` seconds, and the exchange behind it
        stops reading the answer's body soon after (a server that trickles it is cut
        off; one that trickles its headers holds that thread until its socket gives up); a
        redirect is not followed (it would take the API key to another address). An
        HTTP error's message keeps the start of the server's answer (its reason), and
        no message holds the API key. Nothing is retried: an HTTP error's
        ``urllib.error.HTTPError`` (its ``code``, its ``headers``' ``Retry-After``) is the
        ``ProviderError``'s ``__cause__``. The answer is read as UTF-8 JSON, else in the
        charset its ``Content-Type`` declares.

        Raises:
            InvalidArgumentError: ``params`` or ``extra`` set ``model`` or ``messages``.
            ProviderError: an HTTP or network error, no whole answer within the timeout,
                a connection closed before the answer's ``Content-Length``, an answer
                longer than ``max_answer_bytes``, a redirect (where it pointed), an
                answer that is not JSON (its start quoted), one without a completion,
                or one of tool calls alone (its content null, empty, blank or left
                out). Text beside tool calls is returned, and the calls are dropped with
                a warning logged. A failure through a proxy of the environment's
                (``http_proxy``) names it.
            RuntimeCapacityError: the process cannot start the exchange's thread (also a
                ``RuntimeError``).

        """
        taken = _OWN_FIELDS.intersection(self._config.extra).union(_OWN_FIELDS.intersection(params))
        if taken:
            names = " and ".join(sorted(taken))
            verb = "are" if len(taken) > 1 else "is"
            msg = f"invalid argument provided: {names} {verb} the provider's own, not a parameter"
            raise InvalidArgumentError(msg)
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": self._config.completion_tokens,
            **self._config.extra,
            **params,
        }
        headers = {"Content-Type": "application/json"}
        if self._config.api_key:
            headers["Authorization"] = f"Bearer {self._config.api_key}"
        url = self._url
        request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")  # noqa: S310 - scheme checked in __init__
        answer = self._answer(request, url)
        try:
            message = answer["choices"][0]["message"]
            calls = message.get("tool_calls") if isinstance(message, dict) else None
            text = message.get("content") if isinstance(message, dict) else None
            if isinstance(calls, list) and calls and not (isinstance(text, str) and text.strip()):
                # Tool calls alone (content null, "" or left out, as servers differ): a
                # provider returns text, and an empty one would lose the calls unseen;
                # the original's Chat (tools in, tool calls out) is not ported.
                plural = "" if len(calls) == 1 else "s"
                msg = (
                    f"{self.name} at {url} answered a completion that is not text but {len(calls)} "
                    f"tool call{plural}: a provider returns text only"
                )
                raise ProviderError(msg)
            content = message["content"]
        except (KeyError, IndexError, TypeError) as exc:
            msg = f"{self.name} at {url} answered without a completion: {self._scrubbed(str(answer))[:200]}"
            raise ProviderError(self._scrubbed(msg)) from exc
        if not isinstance(content, str):
            msg = f"{self.name} at {url} answered a completion that is not text"
            raise ProviderError(msg)
        if isinstance(calls, list) and calls:
            # text beside tool calls: the text is the answer, and the calls, which a
            # provider cannot return, should not go unnoticed
            log.warning(
                "%s answered text beside %d tool call(s), which are dropped: a provider returns text only",
                self.name,
                len(calls),
            )
        return content

    def _answer(self, request: urllib.request.Request, url: str) -> Any:  # noqa: ANN401 - decoded JSON
        """The decoded answer, within ``timeout`` for the whole exchange.

        On a daemon thread, waited for with the deadline: a socket timeout bounds each
        read, not a server that trickles its answer, so the exchange reads in steps and
        gives up once past the deadline itself (a late answer is dropped).
        """
        timeout = self._config.request_timeout
        deadline = time.monotonic() + timeout
        limit = self._max_answer_bytes
        done = threading.Event()
        outcome: list[Any] = []

        def exchange() -> None:
            try:
                with _NO_REDIRECTS.open(request, timeout=timeout) as response:
                    body = _read_within(response, deadline, limit)
                    charset = response.headers.get_content_charset()
                outcome.append(_json_answer(body, charset, _secret(self._config.api_key)))
            except BaseException as exc:  # noqa: BLE001 - network, HTTP, JSON: the caller's ProviderError
                detail = ""
                if isinstance(exc, urllib.error.HTTPError):
                    key = _secret(self._config.api_key)
                    detail = _error_detail(exc, deadline, key)
                    if 300 <= exc.code < 400 and "Location" in exc.headers:  # noqa: PLR2004 - where to, for base_url
                        location = str(exc.headers["Location"]).encode("utf-8", "replace")
                        detail += f" (a redirect, not followed, to {_quoted(location, key)!r})"
                    exc.close()  # it holds the answer's socket
                outcome.append((exc, detail))
            finally:
                done.set()

        # named after its caller (``cogfabric-llm-http for AgentActor-3 [sim-a] a``): an exchange
        # that outlives its call (a server trickling its headers) names the runtime it served
        caller = printable(threading.current_thread().name)
        thread = threading.Thread(target=exchange, name=f"cogfabric-llm-http for {caller}", daemon=True)
        start_thread(thread, "LLM provider's HTTP exchange", None)
        if not done.wait(bounded_wait(timeout, 0.0)):
            msg = f"{self.name} at {url} gave no whole answer within {timeout} s{_proxy_note(url)}"
            raise ProviderError(self._scrubbed(msg))
        answer = outcome[0]
        if isinstance(answer, tuple):
            error, detail = answer
            msg = f"{self.name} at {url} failed: {str(error) or repr(error)}{detail}{_proxy_note(url)}"
            cause = _scrubbed_cause(error, _secret(self._config.api_key))
            if cause is None:
                msg += " (its cause is not chained: it held the API key, or too long a chain to clear)"
            raise ProviderError(self._scrubbed(msg)) from cause
        return answer

    def _scrubbed(self, message: str) -> str:
        """``message`` without the API key (a server or a library may echo it)."""
        return _masked(message, _secret(self._config.api_key))


def _read_within(response: Any, deadline: float, limit: int) -> bytes:  # noqa: ANN401 - http.client's response
    """The answer's body, read in steps until its end, the deadline or ``limit`` bytes.

    Raises:
        TimeoutError: the answer was still coming at the deadline.
        ValueError: it is longer than ``limit`` bytes.
        http.client.IncompleteRead: the connection closed before the ``Content-Length``
            the answer declared (``read1``, unlike ``read``, ends there without a word).

    """
    chunks: list[bytes] = []
    size = 0
    while chunk := response.read1(_READ_STEP):
        size += len(chunk)
        if size > limit:
            msg = f"the answer is longer than {limit} bytes (max_answer_bytes)"
            raise ValueError(msg)
        chunks.append(chunk)
        if time.monotonic() > deadline:
            msg = "the answer was still coming at the deadline"
            raise TimeoutError(msg)
    missing = getattr(response, "length", None)  # what http.client still expected of the Content-Length
    if isinstance(missing, int) and missing > 0:
        raise http.client.IncompleteRead(b"".join(chunks), missing)
    return b"".join(chunks)


def _json_answer(body: bytes, charset: str | None, key: str) -> Any:  # noqa: ANN401 - decoded JSON
    """The answer's JSON: UTF-8 (or UTF-16 or -32, which json detects), else the charset it declares.

    UTF-8 first, as JSON is UTF-8 (RFC 8259): a server that declares ISO-8859-1 by
    default and sends UTF-8 is read right; one that sends the charset it declares
    (``application/json; charset=iso-8859-1``) is read in it.

    Raises:
        ValueError: the answer is not JSON, or not text in UTF-8 nor in its charset;
            the message quotes its start (printable, without ``key``).

    """
    try:
        try:
            return json.loads(body)
        except UnicodeDecodeError:
            if charset is None:
                raise
            text = body.decode(charset)  # LookupError for a charset Python does not know
            return json.loads(text)
    except (ValueError, LookupError) as exc:
        declared = f" (declared charset {charset!r})" if charset else ""
        msg = f"the answer is not JSON text{declared}: {exc}; it begins {_quoted(body, key)!r}"
        raise ValueError(msg) from None


def _quoted(raw: bytes, key: str) -> str:
    """The start of a server's text: printable, on one line, without ``key`` (nor its start at the cut)."""
    text = " ".join(bytes(raw[: 4 * _ERROR_DETAIL]).decode("utf-8", "replace").split())
    if key:  # before the cut; also a key the read stopped inside of
        text = _without_key_start(text, key)
    return "".join(c if c.isprintable() else "?" for c in text)[:_ERROR_DETAIL]


_LEAST_SECRET: Final = 8
"""The shortest ``api_key`` masked in errors: a shorter one is a local server's placeholder."""


def _secret(key: str) -> str:
    """``key`` as errors mask it: "" (nothing masked) for one shorter than ``_LEAST_SECRET``.

    A local server's placeholder key (``x``, ``ollama``, ``none``) is no secret, and
    masking it would garble every message holding those letters (``conte***t``), the
    provider's own name and the error's class name included.
    """
    return key if len(key) >= _LEAST_SECRET else ""


def _masked(text: str, key: str) -> str:
    """``text`` with every ``key`` in it as ``***`` (an empty key masks nothing)."""
    return text.replace(key, "***") if key and key in text else text


def _scrubbed_cause(error: BaseException, key: str) -> BaseException | None:
    """``error`` to chain under a ``ProviderError``, without ``key``; None if it would still show it.

    The chained error is printed with the ``ProviderError`` in every traceback and
    ``log.exception``, and a debugger or a handler reads its fields: an ``HTTPError``'s
    status line or headers may echo the key, its URL may carry it in a query, a
    ``JSONDecodeError`` keeps the whole answer. An ``HTTPError`` is chained as a fresh one
    of its URL, status, reason and headers, scrubbed, without the answer it read (whose
    response object keeps the headers as they came); each error of the chain (and of an
    exception group, each member's) has its ``args``, text fields, headers and notes
    (``add_note``, which a traceback prints) scrubbed in place.
    """
    if not key:
        return error
    if isinstance(error, urllib.error.HTTPError):
        hdrs = cast("email.message.Message", _scrubbed_value(error.hdrs, key))
        url, msg = _masked(error.url, key), _masked(error.msg, key)
        error = urllib.error.HTTPError(url, error.code, msg, hdrs, None)
    chain = _printed_with(error)
    if chain is None:
        return None  # not scrubbed to its end
    for link in chain:
        link.args = tuple(_scrubbed_value(arg, key) for arg in link.args)
        for name in _fields(link):
            value = _field(link, name)
            clean = _scrubbed_value(value, key)
            if clean is not value:
                with contextlib.suppress(AttributeError, TypeError):  # read-only (HTTPError's reason)
                    setattr(link, name, clean)
    return None if any(_shows(link, key) for link in chain) else error


def _printed_with(error: BaseException) -> list[BaseException] | None:
    """``error`` and each error a traceback prints with it; None past ``_CHAIN_DEPTH`` of them.

    Its cause (or context), theirs, and an exception group's members with their own.
    """
    seen: set[int] = set()
    chain: list[BaseException] = []
    waiting: list[BaseException] = [error]
    while waiting:
        link = waiting.pop()
        if id(link) in seen:
            continue
        if len(chain) == _CHAIN_DEPTH:
            return None
        seen.add(id(link))
        chain.append(link)
        after = link.__cause__ or link.__context__
        if after is not None:
            waiting.append(after)
        if isinstance(link, BaseExceptionGroup):
            waiting.extend(link.exceptions)
    return chain


_TEXT_FIELDS: Final = (
    "msg",
    "reason",
    "filename",
    "filename2",
    "url",
    "strerror",
    "doc",
    "object",
    "text",
    "hdrs",
)
"""Where urllib's, http.client's, json's and the builtin errors keep text (some are C-level slots)."""


def _fields(error: BaseException) -> list[str]:
    return [*_TEXT_FIELDS, *(name for name in vars(error) if name not in _TEXT_FIELDS)]


def _field(error: BaseException, name: str) -> object:
    try:
        return getattr(error, name, None)
    except Exception:  # noqa: BLE001 - a property that raises holds nothing to scrub
        return None


_VALUE_DEPTH: Final = 8
"""How deep in lists, tuples and dicts a field is scrubbed (an SDK error's parsed ``body``)."""


def _scrubbed_value(value: object, key: str, depth: int = 0) -> object:
    """``value`` without ``key`` if it is text, bytes or headers that hold it; else ``value`` itself.

    In a list, tuple or dict (``__notes__``, a parsed body) down to ``_VALUE_DEPTH``, a
    copy holds each item scrubbed; a container deeper than that is left as it is
    (``_shows`` then finds the key in its repr).
    """
    if isinstance(value, list | tuple | dict) and depth < _VALUE_DEPTH:
        return _scrubbed_items(value, key, depth + 1)
    if isinstance(value, str):
        return _masked(value, key)
    if isinstance(value, bytes | bytearray):
        raw = key.encode("utf-8")
        return bytes(value).replace(raw, b"***") if raw in value else value
    if isinstance(value, email.message.Message) and any(key in str(v) for v in value.values()):
        clean = type(value)()
        for name, header in value.items():
            clean[name] = _masked(str(header), key)
        return clean
    return value


def _shows(error: BaseException, key: str) -> bool:
    """Whether ``key`` is in ``error``'s text, ``args`` or fields (one whose ``str`` raises shows nothing)."""
    try:
        texts = [str(error), repr(error)]
    except Exception:  # noqa: BLE001 - traceback prints "<exception str() failed>"
        texts = []
    values = [*error.args, *(_field(error, name) for name in _fields(error))]
    return (
        any(key in text for text in texts)
        or any(_scrubbed_value(v, key) is not v for v in values)
        or any(key in _safe_repr(v) for v in values if isinstance(v, list | tuple | dict))
    )


def _scrubbed_items(value: list[Any] | tuple[Any, ...] | dict[Any, Any], key: str, depth: int) -> object:
    """A copy of ``value``, each item (a dict's keys too) scrubbed; ``value`` itself if none held ``key``."""
    if isinstance(value, dict):
        pairs = [(_scrubbed_value(k, key, depth), _scrubbed_value(v, key, depth)) for k, v in value.items()]
        same = all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items(), strict=True))
        return value if same else dict(pairs)
    items = [_scrubbed_value(item, key, depth) for item in value]
    if all(item is old for item, old in zip(items, value, strict=True)):
        return value
    return items if isinstance(value, list) else tuple(items)


def _safe_repr(value: object) -> str:
    """``repr(value)``, or "" when it raises (nothing shown)."""
    try:
        return repr(value)
    except Exception:  # noqa: BLE001 - an item's repr of the user's own
        return ""


_KEY_START: Final = 4
"""The fewest of the key's first characters masked at the end of a cut error body (3 show at most)."""


def _without_key_start(text: str, key: str) -> str:
    """``text`` without ``key``, and with an ending that starts it masked too.

    A read may stop inside an echoed key: its first characters would show. An ending
    shorter than ``_KEY_START`` is left (a reason ending in "s" is no start of "sk-...").
    """
    text = _masked(text, key)
    end = text.rstrip("\ufffd")  # a read that stopped inside a character of the key
    for size in range(min(len(key) - 1, len(end)), _KEY_START - 1, -1):
        if end.endswith(key[:size]):
            return end[:-size] + "***"
    return text


def _error_detail(error: urllib.error.HTTPError, deadline: float, key: str) -> str:
    """``": "`` and the start of an HTTP error's body (printable, one line, without ``key``); "" if none.

    One read, waiting ``_DETAIL_WAIT`` seconds at most (and not past ``deadline``): the
    status is the error; a body that is slow to come must not turn it into a timeout.
    Without a socket to bound the wait on, no read.
    """
    raw = getattr(getattr(error.fp, "fp", None), "raw", None)
    sock = getattr(raw, "_sock", None)  # http.client's SocketIO: the answer's socket
    read = getattr(error.fp, "read1", None)
    if sock is None or read is None:
        return ""
    try:
        sock.settimeout(max(0.0, min(_DETAIL_WAIT, deadline - time.monotonic())) or 1e-3)
        body = read(4 * _ERROR_DETAIL)
    except Exception:  # noqa: BLE001 - the reason is a courtesy: the status stands without it
        return ""
    text = _quoted(body, key)
    return f": {text}" if text else ""


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """Follow no redirect: urllib would send the API key on, and turn the POST into a GET."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:  # noqa: ANN401, ARG002 - urllib's hook
        """Refuse it: urllib then raises the 3xx as an ``HTTPError``."""
        return


_NO_REDIRECTS: Final = urllib.request.build_opener(_RefuseRedirects)


def _proxy_note(url: str) -> str:
    """Where a failed exchange went instead of ``url``: the proxy urllib sent it through; "" for none.

    urllib takes ``http_proxy``/``https_proxy`` from the environment (as the opener was
    built, at import) and ``no_proxy`` at each request, for a local server too: a proxy's
    refusal reads as the server's. The proxy is named by its host and port alone (its
    URL may hold a user name and password).
    """
    parts = urllib.parse.urlsplit(url)
    # the opener's own: urllib keeps them in attributes its stubs do not declare
    handlers = getattr(_NO_REDIRECTS, "handlers", [])
    proxies = [getattr(h, "proxies", {}) for h in handlers if isinstance(h, urllib.request.ProxyHandler)]
    proxy = next((str(p[parts.scheme]) for p in proxies if parts.scheme in p), "")
    if not proxy or urllib.request.proxy_bypass(parts.netloc):
        return ""
    # urllib's own reading of the proxy's URL (where it connected): urlsplit's would end
    # the host part at a "/", "?" or "#" of the password and show what came before
    parse = getattr(urllib.request, "_parse_proxy", None)
    try:
        host = str(parse(proxy)[3]) if parse is not None else ""
    except ValueError:  # no authority: urllib failed on it too
        host = ""
    where = f"at {printable(host)}" if host else "(its address not shown)"
    return (
        f" (through the proxy {where}, from the environment's {parts.scheme}_proxy: "
        "no_proxy lists the hosts reached directly)"
    )


_OWN_FIELDS: Final = frozenset({"model", "messages"})


def prompt_hash(prompt: str) -> str:
    """The hex BLAKE2b-128 of a prompt, journaled instead of the prompt itself."""
    return hashlib.blake2b(prompt.encode(), digest_size=16).hexdigest()


def render_messages(messages: Sequence[Message]) -> str:
    """Render prompt messages as the text ``turn`` gates and sends.

    A message is ``role: content``; one that answers a tool call names it,
    ``role for <tool_call_id>: content``. In the last turn (as the window's cleaner
    splits turns), whose tool traffic the cleaner keeps exactly, each tool call of a
    message follows on a line of its own, ``role tool call <id>: <name>(<arguments>)``,
    the arguments as given (an assistant message of tool calls and no text is those
    lines alone): the model reads which tool it called with what, as the original
    hands its provider the window's messages with their tool calls. In earlier turns a
    message's tool calls are one line in the cleaner's summary form, ``role tool calls:
    <id>: call <name>(k1, k2="v")`` (the arguments' keys, and string values of at most
    20 characters), so a long argument value is not sent again with every later prompt;
    a cleaned ``tool_call`` message's own text holds that summary there. (The cleaner's
    summaries of earlier tool results keep some arguments whole, as the original's do: a
    fetched URL, a file's path, a search query.)
    Turn ids, event kinds, parent ids and artifact refs are not rendered. The text is for
    a model to read, not to parse: nothing is escaped, so a content with line breaks
    spans lines.
    """
    active = active_turn_start(messages)
    lines: list[str] = []
    for index, m in enumerate(messages):
        calls = m.tool_calls
        if m.content or not calls:
            named = f" for {m.tool_call_id}" if m.tool_call_id else ""
            lines.append(f"{m.role}{named}: {m.content}")
        if not calls:
            continue
        if index >= active:
            for call in calls:
                named = f" {call.id}" if call.id else ""
                lines.append(f"{m.role} tool call{named}: {call.function.name}({call.function.arguments})")
        elif m.role != ROLE_TOOL_CALL or not m.content:
            lines.append(f"{m.role} tool calls: {summarise_tool_calls(calls)}")
    return "\n".join(lines)


class LLMClient:
    """Gates prompts, then calls the provider.

    Made directly, it journals nothing; ``runtime.llm(provider)`` (and a behavior's
    ``ctx.llm``) journal every refusal, every output and every provider failure.
    """

    def __init__(
        self,
        provider: LLMProvider,
        config: LLMConfig | Mapping[str, Any] | None = None,
        *,
        on_reject: Callable[[int, int, str], None] | None = None,
        on_output: Callable[[str, str], None] | None = None,
        on_failure: Callable[[str, ProviderError], None] | None = None,
    ) -> None:
        """Use ``provider`` under ``config``'s limit; the hooks are for journaling.

        Raises:
            TypeError: ``provider`` has no ``generate`` method.
            InvalidConfigError: ``config`` is no ``LLMConfig`` (or mapping of its fields).

        """
        if not callable(getattr(provider, "generate", None)):
            msg = f"an LLM provider has a generate(prompt, **params) method, got {type(provider).__name__}"
            raise TypeError(msg)
        self.provider = provider
        self.config = _checked_llm_config(config)
        self._on_reject = on_reject
        self._on_output = on_output
        self._on_failure = on_failure

    @property
    def max_prompt_length(self) -> int:
        """The limit in code points."""
        return self.config.prompt_limit

    def validate(self, prompt: str) -> str:
        """Apply the gate without calling the provider; return the prompt as a plain ``str``.

        A ``str`` subclass is measured and passed on as its text, so that no method of
        its own (a ``__len__``) decides what the gate counts.

        Raises:
            InvalidArgumentError: an empty or whitespace-only prompt, not a str, or text
                UTF-8 cannot encode (a lone surrogate).
            PromptTooLongError: more than ``max_prompt_length`` code points.

        """
        return self._gate(prompt)

    def _gate(self, prompt: str) -> str:
        """``validate``, within the call under way (``generate``'s)."""
        prompt = self._check_text(prompt)
        limit = self.max_prompt_length
        if len(prompt) > limit:
            self._reject(len(prompt), limit, "too_long")
            raise PromptTooLongError(len(prompt), limit)
        return prompt

    def _check_text(self, prompt: str) -> str:
        """The gate's checks but the length: a str, not empty or blank, UTF-8 text (returned plain)."""
        limit = self.max_prompt_length
        if not isinstance(prompt, str):
            self._reject(0, limit, "not_text")
            msg = f"invalid argument provided: a prompt is a str, got {type(prompt).__name__}"
            raise InvalidArgumentError(msg)
        prompt = str.__str__(prompt)  # a subclass's text: its own methods decide nothing here
        if prompt == "":
            self._reject(0, limit, "empty")
            msg = "invalid argument provided: empty prompt"
            raise InvalidArgumentError(msg)
        if not prompt.strip(GO_SPACE):  # Go's TrimSpace, as the original's gate
            self._reject(len(prompt), limit, "blank")
            msg = "invalid argument provided: prompt is only white space"
            raise InvalidArgumentError(msg)
        try:
            require_str(prompt, "prompt")
        except TypeError:  # a lone surrogate: no provider, journal or hash takes it
            self._reject(len(prompt), limit, "not_utf8")
            msg = "invalid argument provided: the prompt is not valid UTF-8 text (it holds a lone surrogate)"
            raise InvalidArgumentError(msg) from None
        return prompt

    def _reject(self, length: int, limit: int, reason: str) -> None:
        if self._on_reject is not None:
            self._on_reject(length, limit, reason)

    def generate(self, prompt: str, **params: Any) -> str:  # noqa: ANN401 - provider parameters
        """Gate ``prompt``, then return the provider's output.

        Raises:
            InvalidArgumentError: an empty or whitespace-only prompt, or not UTF-8 text.
            PromptTooLongError: a prompt over the limit.
            ProviderError: the provider failed (its own error is the ``__cause__``).
            RuntimeClosedError: the runtime closed under the call (the runtime's own
                provider raises it as it is, not as a ``ProviderError``).

        """
        prompt = self._gate(prompt)
        try:
            output = self._call_provider(prompt, params)
            if self._on_output is not None:
                self._on_output(prompt, output)
        except ProviderError as exc:
            if self._on_failure is not None:
                try:
                    self._on_failure(prompt, exc)
                except Exception:  # the runtime closed meanwhile, say: the caller hears the provider
                    log.warning("a provider's failure could not be journaled", exc_info=True)
            raise
        return output

    def _call_provider(self, prompt: str, params: dict[str, Any]) -> str:
        failure: ProviderError | None = None
        try:
            output = self.provider.generate(prompt, **params)
        except RuntimeClosedError:
            raise  # the runtime closing under it
        except Exception as exc:  # noqa: BLE001 - any provider failure is a ProviderError, raised below
            failure = self._provider_error(exc)
        if failure is not None:
            # raised here, not in the except clause: the error it stands for, which may
            # show the key, is not its __context__
            raise failure
        if not isinstance(output, str):
            name = _provider_label(self.provider, "name")
            msg = f"provider {name} returned {type(output).__name__}, not str"
            if inspect.iscoroutine(output):
                output.close()  # nothing awaits it: no "never awaited" warning
                msg += " (its generate is async: the caller's thread runs it, and would never await it)"
            raise ProviderError(msg)
        return str.__str__(output)  # a subclass's text, plain, as the journal stores it

    def _provider_error(self, exc: Exception) -> ProviderError:
        """The ``ProviderError`` the caller gets for a provider's failure, without the API key.

        A provider of the user's own (a vendor's SDK wrapped) may quote the key it was
        given in its error: with ``config.llm.api_key`` set, that key is masked as
        ``***`` in what the journal keeps (``LlmCallFailed``, ``AgentFailed``) and in the
        chained cause's text and fields, and a cause that would still show it is not
        chained, as the HTTP provider does for its own errors (a key shorter than
        ``_LEAST_SECRET`` is not masked: ``_secret``).
        """
        key = _secret(self.config.api_key)
        if isinstance(exc, ProviderError):
            # a provider's error already: as it is, its chain scrubbed of the key in place
            if not key or _scrubbed_cause(exc, key) is exc:
                return exc
            error = ProviderError(
                _masked(journal_text(exc), key) + " (the API key masked; its cause is not chained)"
            )
            error.__suppress_context__ = True
            return error
        msg = f"provider {_provider_label(self.provider, 'name')} failed: {exc!r}"
        cause = _scrubbed_cause(exc, key)  # the key masked in its chain's text and fields, in place
        if cause is None:
            msg += " (its cause is not chained: it held the API key, or too long a chain to clear)"
        error = ProviderError(_masked(msg, key))
        error.__cause__ = cause
        error.__suppress_context__ = True
        return error


def _answer(output: str, turn_id: str) -> Message:
    """A turn's answer, as its session keeps it."""
    return Message(role=ROLE_ASSISTANT, content=output, turn_id=turn_id)


class _Call:
    """What one call of a ``JournaledLLM`` keeps while it runs, for its records.

    A call made within it on the same thread (a provider that asks its client a
    sub-question, or runs a turn of another session) has its own, and the outer
    call's is its thread's again once it returns.
    """

    __slots__ = ("asked_at", "output", "session")

    def __init__(self) -> None:
        self.session: str | None = None
        """The session of the turn under way, which its records name; None outside a turn."""
        self.output: str | None = None
        """The output once journaled: a turn whose record times out still answers its session."""
        self.asked_at: float | None = None
        """The clock's reading as the provider was called: the record's time if the clock fails after."""


class JournaledLLM(LLMClient):
    """An ``LLMClient`` that journals every refusal, output and provider failure, and runs session turns.

    Made by ``runtime.llm(provider)`` and offered to behaviors as ``ctx.llm``.
    """

    def __init__(
        self,
        provider: LLMProvider,
        config: LLMConfig,
        *,
        clock: Clock,
        journal: Callable[[Event], None],
        memory: MemoryManager,
        agent_id: str | None = None,
        check_open: Callable[[], None] | None = None,
        hand_over: Callable[[], None] | None = None,
    ) -> None:
        """Journal through ``journal`` (one event at a time) on behalf of ``agent_id``.

        A behavior's ``ctx.llm`` journals through its agent, which names the message the
        behavior is handling as the cause of each output and refusal. ``check_open``
        raises once nothing could be journaled (``RuntimeClosedError``, or the journal's
        error once it is fail-stop): no provider is called then (a model's output that
        no record holds would be lost to an audit, and a paid call with it).
        ``hand_over`` hands what ``journal`` keeps waiting (an agent's records, which
        otherwise wait for its next change) to the journal writer, before a turn's answer
        goes into its session: the output's record is journaled ahead of the answer.
        """
        super().__init__(
            provider, config, on_reject=self._rejected, on_output=self._answered, on_failure=self._failed
        )
        self._clock = clock
        self._journal = journal
        self._memory = memory
        self._agent_id = agent_id
        self._check_open = check_open
        self._hand_over = hand_over
        self._calls = threading.local()
        """``current``: this thread's call under way (a ``_Call``): one client may serve many threads."""

    def generate(self, prompt: str, **params: Any) -> str:  # noqa: ANN401 - provider parameters
        """``LLMClient.generate``, refused before the gate and the provider once nothing could be journaled.

        Raises:
            RuntimeClosedError: the runtime is closed.
            JournalError: the journal is fail-stop (``JournalStillFullError`` after a
                full map, else ``JournalFailedError``).
            ClockError: the clock failed before the provider was called (it is not called);
                one that fails while the model answers is logged, and the output's record
                takes the time the call was made.

        """
        with self._call():
            return self._generate(prompt, params)

    def validate(self, prompt: str) -> str:
        """``LLMClient.validate``, its refusal journaled naming no session (even within a turn's call).

        Raises:
            InvalidArgumentError, PromptTooLongError: as ``LLMClient.validate``.

        """
        with self._call():
            return super().validate(prompt)

    def _generate(self, prompt: str, params: dict[str, Any]) -> str:
        """``generate`` within the call under way (a bare call's, or a turn's naming its session)."""
        if self._check_open is not None:
            self._check_open()
        return super().generate(prompt, **params)

    @contextlib.contextmanager
    def _call(self) -> Iterator[_Call]:
        """A call's own state, this thread's for the call; the caller's is put back after it.

        A provider that calls this client again (``generate`` or a turn, on this thread)
        is answered within this call: what the inner call sets (its session, output and
        the clock's reading) is its own, and this call's records keep this call's.
        """
        outer = getattr(self._calls, "current", None)
        call = self._calls.current = _Call()
        try:
            yield call
        finally:
            # Put the caller's back only where this call is still the thread's: a Ctrl-C
            # that lands as the call starts (after the yield, before the ``with`` body)
            # leaves this generator open, to be closed whenever its traceback is freed,
            # perhaps by the garbage collector on another thread and within another call
            # there, whose state must not be replaced (its records would name no session).
            if getattr(self._calls, "current", None) is call:
                self._calls.current = outer

    def _current(self) -> _Call:
        """The call under way on this thread; a blank one outside any (``validate`` called itself)."""
        call: _Call | None = getattr(self._calls, "current", None)
        return _Call() if call is None else call

    def _call_provider(self, prompt: str, params: dict[str, Any]) -> str:
        # The clock first: one that fails refuses the call before the provider is paid,
        # and its reading stamps the call's record if the clock fails while the model answers.
        call = self._current()
        call.asked_at = self._clock.now()
        try:
            return super()._call_provider(prompt, params)
        finally:
            # This call's state is its thread's again for its records, whatever a call the
            # provider made meanwhile left there: one a Ctrl-C interrupted as it started
            # (and the provider went on) leaves its own until its generator is closed.
            self._calls.current = call

    def _rejected(self, length: int, limit: int, reason: str) -> None:
        self._journal(
            PromptRejected(
                at=self._clock.now(),
                agent=self._agent_id,
                length=length,
                limit=limit,
                reason=reason,
                session=self._current().session,
            )
        )

    def _answered(self, prompt: str, output: str) -> None:
        try:
            require_str(output, "the provider's output")
        except TypeError as exc:
            # It would be journaled where replay could not read it back.
            raise ProviderError(str(exc)) from exc
        self._current().output = output  # a turn whose record times out still answers its session
        self._journal(LlmOutputRecorded(**self._call_fields(prompt), output=output))

    def _failed(self, prompt: str, error: ProviderError) -> None:
        self._journal(LlmCallFailed(**self._call_fields(prompt), error=journal_text(error, 1000)))

    def _call_fields(self, prompt: str) -> dict[str, Any]:
        """What an output and a failure record of the call: its time, agent, provider, prompt, session."""
        call = self._current()
        try:
            at = self._clock.now()
        except ClockError:
            asked_at = call.asked_at
            if asked_at is None:
                raise
            at = asked_at
            # the answer is paid for: its record is kept, at the time the call was made
            log.warning(
                "the clock failed as the model answered; the call's record has the time it was made (%r)",
                at,
                exc_info=True,
            )
        return {
            "at": at,
            "agent": self._agent_id,
            "provider": journal_text(_provider_label(self.provider, "name")),
            "model": journal_text(_provider_label(self.provider, "model")),
            "prompt_hash": prompt_hash(prompt),
            "session": call.session,
        }

    def turn(self, session_id: str, user_message: str, **params: Any) -> str:  # noqa: ANN401
        """Run one LLM turn of a session and return the output.

        Adds the user message, builds the prompt window, renders it
        (``render_messages``), gates it, calls the provider, journals the output and
        adds it to the session as the assistant's message (the output's record is handed
        to the journal first, also a behavior's, which the agent's other records wait
        for). The user message starts a
        new turn (``memory.add_turn_message``): in a session whose messages carry turn
        ids, it and the answer get a fresh one; without them the cleaner splits turns at
        user messages (once the window holds an earlier one). The tool traffic of the
        turns before it, which the window keeps whole only in its last turn, is then
        summarised. Run one session's turns one at a time: two at once both see both
        user messages, and may answer the later one. The window's
        cleaner shortens long messages (as in the original), so a long user message is
        truncated rather than refused; the gate refuses the rendered window when it is
        still over the limit.

        Raises:
            SessionNotFoundError: the session is unknown, deleted, expired or evicted
                (``reason`` says which); or it ended while the provider answered: the
                output is journaled (``LlmOutputRecorded``, naming the session) but not
                added to the session, and is the error's ``output``.
            InvalidArgumentError: an empty, blank or non-UTF-8 ``user_message``, refused
                (and journaled) before it is added to the session.
            InvalidArgumentError, PromptTooLongError: the gate refused the prompt
                (the user message stays in the session).
            ProviderError: the provider failed.
            ClockError: as ``generate``; a clock that fails as the model answers and is
                still down when the answer would go into the session leaves it out of
                the session: the output's record holds it, and so does the error's ``output``.
            RuntimeClosedError, JournalError, AgentNotFoundError: as ``generate``. They
                are checked before the user message is added, so a runtime closed (an
                agent gone, a fail-stop journal) before the call adds nothing; a
                ``close()`` or a journal failure that comes while the turn runs raises
                them later, with the user message left in the session (and, when it
                comes after the output was journaled, ``LlmOutputRecorded``, with no
                answer added to the session beside that record). A ``ctx.llm`` turn
                its agent's kill lands in raises ``AgentNotFoundError`` once the
                provider answered: the kill dropped the output's record, so the answer
                is not added to the session either.
            ActorTimeoutError: the output's record outlasted ``call_timeout`` (sync
                durability): the answer is queued to go into the session all the same,
                behind it (not if the session is gone by then, nor once ``close()`` has
                begun or has stopped the session actor before it got to it: then the
                record is stored without its answer in the session, and a warning logged).

        """
        if self._check_open is not None:
            self._check_open()  # as generate: before the user message goes into the session
        with self._call() as call:
            # the gate's checks but the length (the cleaner truncates); a refusal names no session
            user_message = self._check_text(user_message)
            turn_id = self._memory.add_turn_message(session_id, ROLE_USER, user_message)
            prompt = render_messages(self._memory.build_prompt_messages(session_id))
            return self._answer_turn(call, session_id, prompt, turn_id, params)

    def continue_turn(self, session_id: str, **params: Any) -> str:  # noqa: ANN401
        """Ask the model again within the session's current turn, and return the output.

        For the steps of a tool loop after ``turn``: once the caller has added what the
        model asked for (a tool's result, ``memory.add_structured_message``), this
        builds the prompt window of the session as it is, renders it, gates it, calls
        the provider, journals the output naming the session (as ``turn`` does, where a
        bare ``generate`` names none) and adds it as the assistant's message, with the
        turn id of the session's last message (none if it has none). No user message
        is added. Run a session's ``turn`` and ``continue_turn`` calls one at a time: one
        that builds its window while a ``turn`` waits for its answer takes that turn's
        user message and turn id. The window keeps its last turn's tool traffic whole
        (``tool_call`` and ``tool_result`` messages, and an assistant's with tool calls;
        any other role is shortened): a window holding a tool's result longer than the
        gate's limit is refused for as long as that result stays in its last turn, so
        shorten a long one before adding it.

        Raises:
            SessionNotFoundError: as ``turn`` (with the answer as ``output`` when the
                session ended while the provider answered).
            InvalidArgumentError, PromptTooLongError: the gate refused the prompt.
            ProviderError, ClockError, RuntimeClosedError, JournalError, AgentNotFoundError,
            ActorTimeoutError: as ``turn``.

        """
        if self._check_open is not None:
            self._check_open()
        session_id = require_str(session_id, "session_id")
        with self._call() as call:
            window = self._memory.build_prompt_messages(session_id)
            turn_id = window[-1].turn_id if window else ""
            return self._answer_turn(call, session_id, render_messages(window), turn_id, params)

    def _answer_turn(
        self, call: _Call, session_id: str, prompt: str, turn_id: str, params: dict[str, Any]
    ) -> str:
        """``prompt``'s answer, journaled naming ``session_id`` and added to it in turn ``turn_id``.

        ``call`` is this turn's (``_call``), this thread's while the provider answers.
        """
        call.session = require_str(session_id, "session_id")  # journaled with the output
        try:
            output = self._generate(prompt, params)
        except ActorTimeoutError:
            journaled = call.output
            if journaled is None:
                raise
            # The output's record outlasted call_timeout: the writer will most likely
            # store it, so the answer goes into the session behind it, as replay will
            # find them, without a second wait; the caller hears the timeout.
            try:
                self._memory._add_later(session_id, _answer(journaled, turn_id))  # noqa: SLF001
            except CogfabricError as exc:  # closed meanwhile, say
                log.warning(
                    "the answer of a turn whose output record timed out was not added to session %r: %r",
                    session_id,
                    exc,
                )
            raise
        if self._hand_over is not None:
            # The output's record first: a crash between the two then leaves a record
            # without its answer in the session (as a session that ended meanwhile
            # does), never an answer in the session that no record of the call holds.
            self._hand_over()
        try:
            self._memory.add_structured_message(session_id, _answer(output, turn_id))
        except ClockError as exc:
            # The clock failed as the model answered, and is still down: the output's
            # record holds the answer, which the session cannot take without a time.
            exc.output = output
            raise
        except SessionNotFoundError as exc:
            # The session ended while the provider answered (its TTL passed during a long
            # call; another thread deleted it, or new sessions evicted it): the answer is
            # journaled and paid for, so the caller gets it with the error.
            exc.output = output
            raise
        return output
